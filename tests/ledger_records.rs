//! The evidence ledger's own facts, on the real binary (docs/contracts.md sections 6 and 11): a
//! trace source at its end declares its sensors' tails (`source_ended`), so a finished recording
//! reconciles with exit 0 while one cut short still reports its silent sensor missing; every
//! committed checkpoint is a `checkpoint` record; `drill start|end` and `reconcile --record`
//! write `drill` and `reconciled` records, through the daemon's socket or on the stopped store,
//! and `reconcile` shows each drill with what happened while it was on; an `accepted` record
//! names the rules that counted the event, the incident it joined, and the watermark then.

mod support;

use serde_json::Value;
use support::daemon::{run_to_end, Daemon};
use support::promtool::{sample, scrape_until};
use support::rehearsal::{in_arrival_order, steady, Stage};
use support::{cli, ledger, linegate, run, wait_for};

/// s1 sends every second for 900 s; s2 stops after 100 s, so that from 700 s on it is silent
/// past the allowed lateness (10 minutes, fixtures/traces/golden.toml).
fn recording() -> Vec<String> {
    let mut lines = steady("press-1", "s1", 0, 900, |_| 0.1);
    lines.extend(steady("press-1", "s2", 0, 100, |_| 0.1));
    in_arrival_order(lines)
}

/// `linegate reconcile ARGS` on `stage`: exit status and standard output.
fn reconcile(stage: &Stage, args: &[&str]) -> (Option<i32>, String) {
    let r = run(linegate(&[&["reconcile"], args].concat()).arg("--config").arg(&stage.config));
    (r.status.code(), r.stdout)
}

fn kind<'a>(ledger: &'a [Value], kind: &str) -> Vec<&'a Value> {
    ledger.iter().filter(|e| e["kind"] == kind).collect()
}

#[test]
fn a_finished_recording_reconciles_and_one_cut_short_does_not() {
    // Cut short: paced at 25x (36 s), killed once s2 is silent past the allowed lateness.
    let stage = Stage::new(&recording(), 25.0, "");
    let mut d = Daemon::start(&stage.config, &["--no-forward"], &[]);
    scrape_until(&d, stage.port, "s1 past 760 s", |b| {
        sample(b, "linegate_records_total").is_some_and(|n| n >= 860.0)
    });
    d.kill();
    assert!(kind(&ledger(&stage.config), "source_ended").is_empty(), "killed before the end");
    let (code, text) = reconcile(&stage, &[]);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("tail press-1/s2 after seq 100") && text.contains("MISSING"), "{text}");

    // The same recording run to its end: both tails declared, exit 0.
    run_to_end(&stage.config, &["--no-forward"]);
    let (code, text) = reconcile(&stage, &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("tail press-1/s2 after seq 100, quiet for"), "{text}");
    assert!(text.contains("ended (declared: end of trace)"), "{text}");
    let records = ledger(&stage.config);
    let ended = kind(&records, "source_ended");
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0]["reason"], "end_of_trace");
    let tails: Vec<(String, u64)> = ended[0]["sensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["sensor"].as_str().unwrap().to_string(), s["last_seq"].as_u64().unwrap()))
        .collect();
    assert_eq!(tails, [("s1".to_string(), 900), ("s2".to_string(), 100)]);

    // A start at the end declares nothing new; more input makes s1's tail due again.
    run_to_end(&stage.config, &["--no-forward"]);
    assert_eq!(kind(&ledger(&stage.config), "source_ended").len(), 1, "declared once");
    let mut stage = stage;
    stage.append(&in_arrival_order(steady("press-1", "s1", 900, 910, |_| 0.1)));
    run_to_end(&stage.config, &["--no-forward"]);
    let records = ledger(&stage.config);
    let ended = kind(&records, "source_ended");
    assert_eq!(ended.len(), 2, "{ended:?}");
    assert_eq!(
        ended[1]["sensors"],
        serde_json::json!([{"machine": "press-1", "sensor": "s1", "last_seq": 910}])
    );
    assert_eq!(reconcile(&stage, &[]).0, Some(0));
}

/// Every checkpoint is a `checkpoint` record: journal positions ascending to the store's
/// checkpoint, the rule's version, and outbox ranges that cover every queued record once.
#[test]
fn every_checkpoint_is_a_ledger_record() {
    let stage = Stage::new(&recording(), 0.0, "");
    run_to_end(&stage.config, &["--no-forward"]);
    let records = ledger(&stage.config);
    let checkpoints = kind(&records, "checkpoint");
    // `commit_records = 50` is where a commit is due, not a cap: a loaded machine decides
    // bigger batches, so only "several" is certain.
    assert!(checkpoints.len() >= 2, "{} checkpoints of 1000 records", checkpoints.len());
    let positions: Vec<u64> =
        checkpoints.iter().map(|c| c["journal_pos"].as_u64().unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] <= w[1]), "{positions:?}");
    let inspect: Value = serde_json::from_str(&cli(&["inspect", "--json"], &stage.config)).unwrap();
    assert_eq!(positions.last().copied(), inspect["checkpoint"].as_u64());
    let decided: u64 = checkpoints.iter().map(|c| c["records"].as_u64().unwrap()).sum();
    assert_eq!(decided, 1000, "every line decided in exactly one checkpoint");
    let versions = &checkpoints[0]["rule_versions"];
    assert_eq!(versions["high-vibration"].as_str().map(str::len), Some(16), "{versions}");
    let mut next = 1;
    for c in &checkpoints {
        if let Some(range) = c["outbox"].as_array() {
            let (a, b) = (range[0].as_u64().unwrap(), range[1].as_u64().unwrap());
            assert_eq!(a, next, "outbox ranges are contiguous: {c}");
            next = b + 1;
        }
    }
    assert_eq!(next - 1, 1000, "one outbox record per accepted event");
    let text = cli(&["dump", "ledger"], &stage.config);
    assert!(text.contains("\"kind\":\"checkpoint\""), "dump shows them");
}

/// Drills and recorded verdicts, on the stopped store and through the running daemon: the
/// duplicates delivered during a drill show beside it in `reconcile`.
#[test]
fn drills_and_recorded_verdicts_are_ledger_facts() {
    let first = in_arrival_order(steady("press-1", "s1", 0, 100, |_| 0.1));
    let mut stage = Stage::new(&first, 0.0, "");
    run_to_end(&stage.config, &["--no-forward"]);
    cli(&["drill", "start", "double-delivery"], &stage.config);
    // The upstream sends the last 20 events again, then goes on.
    let mut again: Vec<(i64, Value)> = steady("press-1", "s1", 80, 100, |_| 0.1)
        .into_iter()
        .map(|(at, mut l)| {
            l["at"] = Value::from(l["at"].as_i64().unwrap() + 30_000);
            (at + 30_000, l)
        })
        .collect();
    again.extend(steady("press-1", "s1", 130, 140, |_| 0.1));
    stage.append(&in_arrival_order(again));
    run_to_end(&stage.config, &["--no-forward"]);
    cli(&["drill", "end", "double-delivery"], &stage.config);

    let (code, text) = reconcile(&stage, &["--record"]);
    assert_eq!(code, Some(0), "{text}");
    let drill = text.lines().find(|l| l.contains("drill double-delivery from")).unwrap_or("");
    assert!(drill.contains(" to ") && drill.contains("20 duplicate"), "{text}");
    assert!(text.contains("verdict recorded in the ledger"), "{text}");
    let (_, json) = reconcile(&stage, &["--json"]);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["drills"][0]["during"]["duplicate"], 20, "{json}");
    // The seq gap 101..=130 is still within allowed lateness: delayed, listed.
    assert_eq!(json["gaps"][0]["from_seq"], 101, "{json}");

    // Through the daemon's socket: who asked is the socket's peer.
    let mut d = Daemon::start(&stage.config, &["--no-forward"], &[]);
    let socket = stage.dir.path().join("db").join("control.sock");
    wait_for("the control socket", || socket.exists());
    cli(&["drill", "start", "cable-pull"], &stage.config);
    let (code, _) = reconcile(&stage, &["--record", "--json"]);
    assert_eq!(code, Some(0));
    d.signal("TERM");
    d.wait_success(support::DEADLINE);
    let records = ledger(&stage.config);
    let drills = kind(&records, "drill");
    let phases: Vec<(&str, &str, bool)> = drills
        .iter()
        .map(|d| {
            let via = d["by"]["via_socket"].as_bool().unwrap();
            (d["name"].as_str().unwrap(), d["phase"].as_str().unwrap(), via)
        })
        .collect();
    assert_eq!(
        phases,
        [
            ("double-delivery", "start", false),
            ("double-delivery", "end", false),
            ("cable-pull", "start", true)
        ]
    );
    let verdicts = kind(&records, "reconciled");
    assert_eq!(verdicts.len(), 2, "{verdicts:?}");
    assert_eq!(verdicts[0]["exit"], 0);
    assert_eq!(verdicts[0]["accepted_events"], 110);
    assert_eq!(verdicts[1]["by"]["via_socket"], true, "{}", verdicts[1]);
    let (_, text) = reconcile(&stage, &[]);
    assert!(text.contains("drill cable-pull from") && text.contains("still on"), "{text}");

    let bad = run(linegate(&["drill", "start", "a b"]).arg("--config").arg(&stage.config));
    assert!(!bad.ok() && bad.stderr.contains("drill name \"a b\""), "{}", bad.stderr);
}

/// Each accepted event's ledger record says how it stood after it was decided: the rules that
/// counted it with the incident it belonged to right then (an alert id in the archive; none
/// yet for the high events before an incident's onset), and its machine's watermark then, which
/// only rises.
#[test]
fn an_accepted_record_names_its_rules_incident_and_watermark() {
    // s1 high from 100 s to 110 s: one incident of the golden rule (3 events in 2 min).
    let hot = |s: i64| if (100..110).contains(&s) { 0.9 } else { 0.1 };
    let stage = Stage::new(&in_arrival_order(steady("press-1", "s1", 0, 400, hot)), 0.0, "");
    run_to_end(&stage.config, &["--no-forward"]);
    let records = ledger(&stage.config);
    let alerts: Vec<Value> = cli(&["dump", "alerts"], &stage.config)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let opened = &alerts.iter().find(|a| a["kind"] == "open").expect("an incident opened");
    let id = opened["alert_id"].as_str().unwrap();
    let accepted = kind(&records, "accepted");
    let counted: Vec<&&Value> = accepted.iter().filter(|e| e["counted"] == true).collect();
    assert_eq!(counted.len(), 10, "the ten high events count");
    // The first two belong to no incident when they are decided; the third opens it.
    for (i, e) in counted.iter().enumerate() {
        let rule = match i {
            0 | 1 => serde_json::json!({"rule": "high-vibration"}),
            _ => serde_json::json!({"rule": "high-vibration", "alert_id": id}),
        };
        assert_eq!(e["rules"], serde_json::json!([rule]), "{e}");
    }
    for ev in opened["evidence"].as_array().unwrap() {
        assert!(counted.iter().any(|e| e["event_id"] == ev["event_id"]), "evidence {ev} counted");
    }
    let quiet = accepted.iter().filter(|e| e["counted"] == false);
    assert!(quiet.clone().all(|e| e.get("rules").is_none()), "no rules on events not counted");
    let marks: Vec<i64> = accepted.iter().map(|e| e["watermark_ms"].as_i64().unwrap()).collect();
    assert!(marks.windows(2).all(|w| w[0] <= w[1]), "the watermark only rises: {marks:?}");
    let last = accepted.last().unwrap();
    assert_eq!(marks.last().copied(), Some(last["ts_ms"].as_i64().unwrap() - 5000), "bound 5 s");
}
