//! Failure rehearsals (issue 19; docs/runbook.md says for each how it shows, what the gateway
//! decides and what the operator does): one test per failure, named after it, on the real binary.
//! Each scrapes `/metrics` while the failure happens and asserts that the signals the runbook
//! names move as it says; afterwards `reconcile` passes and the accepted events and archived alert
//! records equal what `linegate replay` decides on the same input (`support::rehearsal`).
//!
//! The failures that arrive with the input (a hot partition, a schema change, poison events, a
//! clock jump, a reconnect burst, duplicated delivery) are fed through a trace source, with the
//! outbox acknowledged in-process: the sink plays no part in them.

mod support;

use serde_json::{json, Value};
use support::cli;
use support::rehearsal::{counter, event, in_arrival_order, last, series, steady, Stage, T0};

const HIGH: f64 = 0.8;
const LOW: f64 = 0.1;

/// One machine above threshold for an hour on four sensors (14 400 high events, one incident):
/// the rule state stays under a bound set by the window and the allowed lateness, not by the
/// incident's length, and the `close` record lists `also_max` of its further events with the
/// full count.
#[test]
fn hot_partition() {
    let mut lines = Vec::new();
    for s in ["s1", "s2", "s3", "s4"] {
        lines.extend(steady("press-1", s, 0, 3600, |_| HIGH));
    }
    lines.extend(steady("mill-2", "s1", 0, 3600, |_| LOW));
    for after in [60, 600] {
        lines.push((
            3_600_000 + after * 1000,
            json!({"at": T0 + 3_600_000 + after * 1000, "kind": "tick"}),
        ));
    }
    let stage = Stage::new(&in_arrival_order(lines), 1500.0, "");
    let scrapes = stage.run();
    assert!(scrapes.len() >= 10, "only {} scrapes during the run", scrapes.len());

    // Evidence is at most a window of four sensors (480), `also` at most also_max (100); the
    // high-event index at most W + allowed lateness + bound of them (4 x 725).
    let members = series(&scrapes, "linegate_rule_state_entries{part=\"members\"}");
    let high = series(&scrapes, "linegate_rule_state_entries{part=\"high_events\"}");
    assert!(members.iter().all(|&m| m <= 580.0), "members grew past the bound: {members:?}");
    assert!(high.iter().all(|&h| h <= 3_000.0), "high events grew past the bound: {high:?}");
    assert!(members.iter().any(|&m| m > 0.0), "the incident was never seen open");

    let (alerts, _) = stage.check_against_replay();
    let close = alerts.iter().find(|a| a["kind"] == "close" && a["machine"] == "press-1").unwrap();
    assert_eq!(close["evidence"].as_array().unwrap().len(), 4, "the four events at 0 s");
    assert_eq!(close["also_count"], 14_396);
    assert_eq!(close["also"].as_array().unwrap().len(), 100);
    assert!(
        close.to_string().len() <= 16 * 1024,
        "close record of {} bytes",
        close.to_string().len()
    );
}

/// An upstream node moves from schema 1 to schema 2 (per-axis values) halfway, and another,
/// upgraded too far, sends schema 3: schema 2 is upcast and decides like schema 1; schema 3 is
/// quarantined `unknown_schema`, counted, and stops nothing.
#[test]
fn schema_change() {
    let mut lines = steady("press-1", "s1", 0, 300, |_| LOW);
    for s in 300..600 {
        let (ts, at) = (s * 1000, s * 1000 + 200);
        let x = if (400..410).contains(&s) { 0.6 } else { 0.05 };
        lines.push((
            at,
            json!({"at": T0 + at, "kind": "event", "event": {
            "event_id": format!("press-1.s1.{}", s + 1), "machine": "press-1", "sensor": "s1",
            "seq": s + 1, "ts_ms": T0 + ts, "clock": {"state": "synced", "err_ms": 2},
            "metric": "accel_rms", "axes": {"x": x, "y": 0.3}, "combine": "rss", "unit": "g",
            "schema": 2, "quality": "good"}}),
        ));
    }
    for (i, s) in (100..200).enumerate() {
        let mut e = event(s * 1000 + 300, s * 1000, "press-1", "s2", i as u64 + 1, HIGH);
        e["event"]["schema"] = json!(3);
        lines.push((s * 1000 + 300, e));
    }
    let stage = Stage::new(&in_arrival_order(lines), 300.0, "");
    let scrapes = stage.run();

    assert_eq!(counter(&scrapes, "linegate_rejected_total{reason=\"unknown_schema\"}"), 100.0);
    assert_eq!(last(&scrapes, "linegate_events_total{origin=\"received\"}"), 600.0);

    let (alerts, _) = stage.check_against_replay();
    let open =
        alerts.iter().find(|a| a["kind"] == "open").expect("schema 2 highs open an incident");
    assert_eq!(open["onset_ms"], T0 + 402_000, "sqrt(0.6^2 + 0.3^2) = 0.67 from 400 s");
    let list = cli(&["quarantine", "list"], &stage.config);
    assert!(list.contains("unknown_schema"), "{list}");
}

/// Poison among good events: every kind of bad line is quarantined with its reason and counted
/// by reason while the pipeline goes on; nothing else is lost.
#[test]
fn poison_event() {
    let mut lines =
        steady("press-1", "s1", 0, 600, |s| if (200..205).contains(&s) { HIGH } else { LOW });
    let mut bad = |at_s: i64, text: String| lines.push((at_s * 1000 + 500, Value::String(text)));
    let good = |seq: u64| event(0, 0, "press-1", "s9", seq, 0.2);
    let with = |seq: u64, f: &dyn Fn(&mut Value)| {
        let mut e = good(seq);
        e["at"] = json!(T0 + 1000 * seq as i64);
        f(&mut e["event"]);
        e.to_string()
    };
    bad(50, "{\"at\": 1700000050500, \"kind\": \"event\", \"event\": {\"event_id\":".into());
    bad(60, "not json at all".into());
    bad(70, with(70, &|e| drop(e.as_object_mut().unwrap().remove("value"))));
    bad(80, with(80, &|e| e["value"] = json!(-1.0)));
    bad(90, with(90, &|e| e["unit"] = json!("mm/s")));
    bad(100, with(100, &|e| e["machine"] = json!("press 1")));
    bad(110, with(110, &|e| e["value"] = json!("NaN-marker")).replace("\"NaN-marker\"", "NaN"));
    bad(120, json!({"at": T0 + 120_500, "kind": "weather"}).to_string());
    let lines: Vec<String> = {
        lines.sort_by_key(|(at, _)| *at);
        lines
            .into_iter()
            .map(|(_, v)| v.as_str().map_or_else(|| v.to_string(), String::from))
            .collect()
    };
    let stage = Stage::new(&lines, 200.0, "");
    let scrapes = stage.run();

    for reason in [
        "malformed_json",
        "missing_field",
        "negative_value",
        "unit_mismatch",
        "bad_identifier",
        "non_finite_value",
        "unknown_kind",
    ] {
        let name = format!("linegate_rejected_total{{reason=\"{reason}\"}}");
        let want = if reason == "malformed_json" { 2.0 } else { 1.0 };
        assert_eq!(counter(&scrapes, &name), want, "{reason}");
    }
    assert_eq!(counter(&scrapes, "linegate_records_total"), stage.lines as f64);
    assert_eq!(last(&scrapes, "linegate_accepted_total"), 600.0);
    let (alerts, _) = stage.check_against_replay();
    assert!(alerts.iter().any(|a| a["kind"] == "close"), "the highs at 200 s still alert");
}

/// A sensor's clock jumps an hour ahead for ten seconds, then steps back: those events are
/// quarantined `clock_future` and the machine's watermark never follows them (nor moves back).
#[test]
fn clock_jump() {
    let mut lines = Vec::new();
    for (at, mut e) in
        steady("press-1", "s1", 0, 600, |s| if (300..303).contains(&s) { HIGH } else { LOW })
    {
        let s = (at - 200) / 1000;
        if (200..210).contains(&s) {
            e["event"]["ts_ms"] = json!(T0 + s * 1000 + 3_600_000);
            e["event"]["clock"] = json!({"state": "stepped"});
        }
        lines.push((at, e));
    }
    lines.extend(steady("press-1", "s2", 0, 600, |_| LOW));
    let stage = Stage::new(&in_arrival_order(lines), 200.0, "");
    let scrapes = stage.run();

    let wm = series(&scrapes, "linegate_watermark_timestamp_seconds{machine=\"press-1\"}");
    assert!(!wm.is_empty());
    assert!(wm.windows(2).all(|w| w[0] <= w[1]), "the watermark moved back: {wm:?}");
    let latest = (T0 + 600_000) as f64 / 1000.0;
    assert!(wm.iter().all(|&w| w <= latest), "the watermark followed the jump: {wm:?}");
    assert_eq!(last(&scrapes, "linegate_rejected_total{reason=\"clock_future\"}"), 10.0);
    let (alerts, _) = stage.check_against_replay();
    assert!(alerts.iter().any(|a| a["kind"] == "open"), "the highs at 300 s still alert");
}

/// A sensor node of mill-2 loses its uplink for 15 minutes, then delivers its buffer at once:
/// the watermarks never move back, the other machine's lag holds still, the part of the burst
/// beyond allowed lateness is counted too late (kept, never applied), the rest is applied late.
#[test]
fn reconnect_burst() {
    let mut lines = steady("press-1", "s1", 0, 1500, |_| LOW);
    for (at, e) in
        steady("mill-2", "s1", 0, 1500, |s| if (700..703).contains(&s) { HIGH } else { LOW })
    {
        let s = (at - 200) / 1000;
        let at = if (200..1100).contains(&s) { 1_100_000 + s } else { at };
        let mut e = e;
        e["at"] = json!(T0 + at);
        lines.push((at, e));
    }
    let stage = Stage::new(&in_arrival_order(lines), 600.0, "");
    let scrapes = stage.run();

    for m in ["press-1", "mill-2"] {
        let wm =
            series(&scrapes, &format!("linegate_watermark_timestamp_seconds{{machine=\"{m}\"}}"));
        assert!(wm.windows(2).all(|w| w[0] <= w[1]), "{m}'s watermark moved back: {wm:?}");
    }
    let lag = series(&scrapes, "linegate_lag_seconds{machine=\"press-1\"}");
    assert!(lag.iter().all(|&l| l <= 10.0), "press-1's lag moved with mill-2's burst: {lag:?}");
    let too_late = last(&scrapes, "linegate_too_late_total");
    let late = last(&scrapes, "linegate_late_applied_total");
    assert!(too_late > 200.0 && late > 200.0, "too late {too_late}, late applied {late}");
    let (alerts, summary) = stage.check_against_replay();
    assert_eq!(summary["too_late"], too_late as u64);
    assert_eq!(summary["late_applied"], late as u64);
    assert!(alerts.iter().any(|a| a["machine"] == "mill-2"), "the buffered highs alert late");
}

/// An upstream delivers everything twice: each second copy is counted as a duplicate and decides
/// nothing, so the alerts are those of a single delivery.
#[test]
fn duplicated_delivery() {
    let mut lines = Vec::new();
    for s in ["s1", "s2"] {
        lines.extend(steady("press-1", s, 0, 300, |s| {
            if (100..103).contains(&s) {
                HIGH
            } else {
                LOW
            }
        }));
    }
    let once = in_arrival_order(lines.clone());
    let twice: Vec<(i64, Value)> = lines.into_iter().flat_map(|l| [l.clone(), l]).collect();
    let stage = Stage::new(&in_arrival_order(twice), 150.0, "");
    let scrapes = stage.run();

    assert_eq!(counter(&scrapes, "linegate_duplicates_total"), 600.0);
    assert_eq!(last(&scrapes, "linegate_accepted_total"), 600.0);
    let (alerts, _) = stage.check_against_replay();
    assert!(!alerts.is_empty());

    let single = stage.dir.path().join("once");
    std::fs::create_dir(&single).unwrap();
    std::fs::write(single.join("input.jsonl"), once.join("\n") + "\n").unwrap();
    let want = support::replay(&single.join("input.jsonl"), &stage.config, &single);
    let got: Vec<String> = alerts.iter().map(Value::to_string).collect();
    let want: Vec<String> = want.alert_lines();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        let (g, w): (Value, Value) =
            (serde_json::from_str(g).unwrap(), serde_json::from_str(w).unwrap());
        assert_eq!(g, w, "a duplicate changed an alert record");
    }
}
