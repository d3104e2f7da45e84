//! Failure rehearsals (issue 19; docs/runbook.md says for each how it shows, what the gateway
//! decides and what the operator does): one test per failure, named after it, on the real binary.
//! Each scrapes `/metrics` while the failure happens and asserts that the signals the runbook
//! names move as it says; afterwards `reconcile` passes and the accepted events and archived alert
//! records equal what `linegate replay` decides on the same input (`support::rehearsal`).
//!
//! The failures that arrive with the input (a hot partition, a schema change, poison events, a
//! clock jump, a reconnect burst, duplicated delivery) are fed through a trace source, with the
//! outbox acknowledged in-process: the sink plays no part in them. The sink's failures (a slow
//! sink, an alert-service outage) forward to a real mosquitto through a TCP proxy that delays or
//! cuts the connection, with `mosquitto_sub` as the independent subscriber. A lost checkpoint is
//! a store damaged between two runs of the daemon.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Value};
use support::daemon::Daemon;
use support::mqtt::{received_events, Broker, Proxy, Subscriber};
use support::promtool::sample;
use support::rehearsal::{
    counter, event, every, in_arrival_order, last, never_down, series, steady, Stage, T0,
};
use support::{cli, free_port, reconciled};

/// The topic root of the rehearsal gateway's MQTT records.
const ROOT: &str = "lg/gw-test";

const HIGH: f64 = 0.8;
const LOW: f64 = 0.1;

/// A sensor's value at second `s`: high from `from` to `to` (exclusive), low otherwise.
fn highs(from: i64, to: i64) -> impl Fn(i64) -> f64 {
    move |s| if (from..to).contains(&s) { HIGH } else { LOW }
}

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
    let scrapes = stage.run_drill("hot-partition");
    assert!(scrapes.len() >= 10, "only {} scrapes during the run", scrapes.len());

    // Evidence is at most a window of four sensors (480), `also` at most also_max (100); the
    // high-event index at most W + allowed lateness + bound of them (4 x 725).
    let members = series(&scrapes, "linegate_rule_state_entries{part=\"members\"}");
    let high = series(&scrapes, "linegate_rule_state_entries{part=\"high_events\"}");
    every("members grew past the bound", &members, |&m| m <= 580.0);
    every("high events grew past the bound", &high, |&h| h <= 3_000.0);
    assert!(members.iter().any(|&m| m > 0.0), "the incident was never seen open");

    let (alerts, _) = stage.check_against_replay();
    stage.drill_shown("hot-partition");
    let close = alerts.iter().find(|a| a["kind"] == "close" && a["machine"] == "press-1").unwrap();
    assert_eq!(close["evidence"].as_array().unwrap().len(), 4, "the four events at 0 s");
    assert_eq!(close["also_count"], 14_396);
    assert_eq!(close["also"].as_array().unwrap().len(), 100);
    assert!(
        close.to_string().len() <= 16 * 1024,
        "close record of {} bytes",
        close.to_string().len()
    );

    // The whole membership stays in the ledger: `explain` pages it, `also` is its start.
    let id = close["alert_id"].as_str().unwrap();
    let page = |p: &str| -> Value {
        let text = cli(&["explain", id, "--json", "--members", p], &stage.config);
        serde_json::from_str::<Value>(&text).unwrap()["members"].clone()
    };
    let (first, tail) = (page("0"), page("14"));
    assert_eq!(first["total"], 14_396);
    assert_eq!(
        first["event_ids"].as_array().unwrap()[..100],
        close["also"].as_array().unwrap()[..]
    );
    assert_eq!(tail["event_ids"].as_array().unwrap().len(), 396, "14 000 .. 14 396");
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
    let scrapes = stage.run_drill("schema-change");

    assert_eq!(counter(&scrapes, "linegate_rejected_total{reason=\"unknown_schema\"}"), 100.0);
    assert_eq!(last(&scrapes, "linegate_events_total{origin=\"received\"}"), 600.0);

    let (alerts, _) = stage.check_against_replay();
    stage.drill_shown("schema-change");
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
    let mut lines = steady("press-1", "s1", 0, 600, highs(200, 205));
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
    let scrapes = stage.run_drill("poison-event");

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
    stage.drill_shown("poison-event");
    assert!(alerts.iter().any(|a| a["kind"] == "close"), "the highs at 200 s still alert");
}

/// A sensor's clock jumps an hour ahead for ten seconds, then steps back: those events are
/// quarantined `clock_future` and the machine's watermark never follows them (nor moves back).
#[test]
fn clock_jump() {
    let mut lines = Vec::new();
    for (at, mut e) in steady("press-1", "s1", 0, 600, highs(300, 303)) {
        let s = (at - 200) / 1000;
        if (200..210).contains(&s) {
            e["event"]["ts_ms"] = json!(T0 + s * 1000 + 3_600_000);
            e["event"]["clock"] = json!({"state": "stepped"});
        }
        lines.push((at, e));
    }
    lines.extend(steady("press-1", "s2", 0, 600, |_| LOW));
    let stage = Stage::new(&in_arrival_order(lines), 200.0, "");
    let scrapes = stage.run_drill("clock-jump");

    let wm = series(&scrapes, "linegate_watermark_timestamp_seconds{machine=\"press-1\"}");
    never_down("the watermark moved back", &wm);
    let latest = (T0 + 600_000) as f64 / 1000.0;
    every("the watermark followed the jump", &wm, |&w| w <= latest);
    assert_eq!(last(&scrapes, "linegate_rejected_total{reason=\"clock_future\"}"), 10.0);
    let (alerts, _) = stage.check_against_replay();
    stage.drill_shown("clock-jump");
    assert!(alerts.iter().any(|a| a["kind"] == "open"), "the highs at 300 s still alert");
}

/// A sensor node of mill-2 loses its uplink for 15 minutes, then delivers its buffer at once:
/// the watermarks never move back, the other machine's lag holds still, the part of the burst
/// beyond allowed lateness is counted too late (kept, never applied), the rest is applied late.
#[test]
fn reconnect_burst() {
    let mut lines = steady("press-1", "s1", 0, 1500, |_| LOW);
    for (at, e) in steady("mill-2", "s1", 0, 1500, highs(700, 703)) {
        let s = (at - 200) / 1000;
        let at = if (200..1100).contains(&s) { 1_100_000 + s } else { at };
        let mut e = e;
        e["at"] = json!(T0 + at);
        lines.push((at, e));
    }
    let stage = Stage::new(&in_arrival_order(lines), 600.0, "");
    let scrapes = stage.run_drill("reconnect-burst");

    for m in ["press-1", "mill-2"] {
        let wm =
            series(&scrapes, &format!("linegate_watermark_timestamp_seconds{{machine=\"{m}\"}}"));
        never_down(&format!("{m}'s watermark moved back"), &wm);
    }
    let lag = series(&scrapes, "linegate_lag_seconds{machine=\"press-1\"}");
    every("press-1's lag moved with mill-2's burst", &lag, |&l| l <= 10.0);
    let too_late = last(&scrapes, "linegate_too_late_total");
    let late = last(&scrapes, "linegate_late_applied_total");
    assert!(too_late > 200.0 && late > 200.0, "too late {too_late}, late applied {late}");
    let (alerts, summary) = stage.check_against_replay();
    stage.drill_shown("reconnect-burst");
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
        lines.extend(steady("press-1", s, 0, 300, highs(100, 103)));
    }
    let once = in_arrival_order(lines.clone());
    let twice: Vec<(i64, Value)> = lines.into_iter().flat_map(|l| [l.clone(), l]).collect();
    let stage = Stage::new(&in_arrival_order(twice), 150.0, "");
    let scrapes = stage.run_drill("duplicated-delivery");

    assert_eq!(counter(&scrapes, "linegate_duplicates_total"), 600.0);
    assert_eq!(last(&scrapes, "linegate_accepted_total"), 600.0);
    let (alerts, _) = stage.check_against_replay();
    stage.drill_shown("duplicated-delivery");
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

/// The sum of `linegate_outbox_records` over its kinds in one scrape.
fn queued(body: &str) -> f64 {
    ["alert", "event", "samples", "gap"]
        .iter()
        .filter_map(|k| sample(body, &format!("linegate_outbox_records{{kind=\"{k}\"}}")))
        .sum()
}

/// Event IDs received, each with the `replayed` flag of every copy.
type Flags = BTreeMap<String, Vec<bool>>;

/// What the subscribers got: event IDs (with their `replayed` flags) and alert record keys.
fn received(subs: &[&Subscriber]) -> (Flags, BTreeSet<(String, u64)>) {
    let msgs: Vec<(String, Vec<u8>)> = subs.iter().flat_map(|s| s.messages()).collect();
    let mut events: Flags = BTreeMap::new();
    for (_, e) in received_events(&msgs) {
        let id = e["event_id"].as_str().unwrap().to_owned();
        events.entry(id).or_default().push(e["replayed"] == true);
    }
    let alerts = msgs
        .iter()
        .filter(|(t, _)| t.contains("/alerts/"))
        .map(|(_, p)| serde_json::from_slice::<Value>(p).unwrap())
        .map(|a| (a["alert_id"].as_str().unwrap().to_owned(), a["revision"].as_u64().unwrap()))
        .collect();
    (events, alerts)
}

/// Every accepted event and every alert record of the run reached the subscribers.
#[track_caller]
fn check_delivered(stage: &Stage, subs: &[&Subscriber], alerts: &[Value]) -> Flags {
    let accepted: BTreeSet<String> = support::ledger(&stage.config)
        .iter()
        .filter(|e| e["kind"] == "accepted")
        .map(|e| e["event_id"].as_str().unwrap().to_owned())
        .collect();
    let want: BTreeSet<(String, u64)> = alerts
        .iter()
        .map(|a| (a["alert_id"].as_str().unwrap().to_owned(), a["revision"].as_u64().unwrap()))
        .collect();
    assert!(!accepted.is_empty() && !want.is_empty(), "nothing to deliver: {want:?}");
    let complete = || {
        let (events, got) = received(subs);
        accepted.iter().all(|id| events.contains_key(id)) && want.is_subset(&got)
    };
    if support::poll(support::DEADLINE, || complete().then_some(())).is_none() {
        let (events, got) = received(subs);
        let missing = accepted.iter().filter(|id| !events.contains_key(*id)).count();
        panic!("{missing} of {} events missing; alerts {got:?} of {want:?}", accepted.len());
    }
    received(subs).0
}

/// A broker that answers every packet 500 ms late, with at most two PUBLISHes (of at most 4 KiB
/// each, so that the count and not the bytes is the bound) in flight, about 60 events a second:
/// the decisions go on at full pace while the outbox buffers what the sink has not taken, the
/// window stays at its bound, and everything drains once the input stops. (With a byte bound
/// below two packets, a backlog queued before the CONNACK, which comes 500 ms late too, goes one
/// full batch at a time and the window never shows two.)
#[test]
fn slow_sink() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), free_port(), "");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let proxy = rt.block_on(Proxy::start(broker.port, Duration::from_millis(500)));
    let sub = Subscriber::start(dir.path(), broker.port, ROOT, &[]);
    let mut lines = Vec::new();
    for s in ["s1", "s2", "s3", "s4"] {
        lines.extend(steady("press-1", s, 0, 150, highs(100, 103)));
    }
    let stage = Stage::with_broker(
        &in_arrival_order(lines),
        0.0,
        proxy.port,
        "inflight = 2\ninflight_bytes = 16384\nmax_packet = 4096",
    );
    let running = stage.start(&[]);
    stage.drill("start", "slow-sink");
    // Every line decided while the outbox still holds most of them (it drains in about 10 s).
    running.wait("every line decided, the outbox still buffering", |b| {
        stage.all_decided(b) && queued(b) > 0.0
    });
    running.wait("the outbox drained", |b| queued(b) == 0.0);
    stage.drill("end", "slow-sink");
    let scrapes = running.stop();

    let in_flight = series(&scrapes, "linegate_broker_in_flight_publishes");
    every("window exceeded", &in_flight, |&n| n <= 2.0);
    assert!(in_flight.contains(&2.0), "the window never filled: {in_flight:?}");
    let (alerts, _) = stage.check_against_replay();
    let events = check_delivered(&stage, &[&sub], &alerts);
    assert_eq!(events.len(), 600);
    stage.drill_shown("slow-sink");
}

/// The broker (the alert service) goes away mid-run and comes back: the outbox and the replay
/// backlog grow while it is away, the decisions go on, and once it is back the backlog drains to
/// zero, its events flagged `"replayed": true`, every alert record delivered.
#[test]
fn alert_service_outage() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), free_port(), "persistence false");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let proxy = rt.block_on(Proxy::start(broker.port, Duration::ZERO));
    let sub = Subscriber::start(dir.path(), broker.port, ROOT, &[]);
    let mut lines = Vec::new();
    for s in ["s1", "s2"] {
        lines.extend(steady("press-1", s, 0, 600, highs(300, 303)));
    }
    let stage = Stage::with_broker(&in_arrival_order(lines), 100.0, proxy.port, "");
    let running = stage.start(&[]);
    let records = |b: &str| sample(b, "linegate_records_total").unwrap_or(0.0);
    running.wait("a quarter decided, the broker connected", |b| {
        records(b) >= 300.0 && sample(b, "linegate_broker_connected") == Some(1.0)
    });
    stage.drill("start", "alert-service-outage");
    broker.stop();
    proxy.open.send(false).unwrap();
    let away = running.wait("the session lost and a backlog queued", |b| {
        sample(b, "linegate_broker_connected") == Some(0.0) && queued(b) > 0.0
    });
    running.wait("three quarters decided", |b| records(b) >= 900.0);
    broker.restart();
    let after = Subscriber::start(dir.path(), broker.port, ROOT, &[]);
    proxy.open.send(true).unwrap();
    running.wait("the backlog drained", |b| {
        stage.all_decided(b)
            && queued(b) == 0.0
            && sample(b, "linegate_broker_connected") == Some(1.0)
    });
    stage.drill("end", "alert-service-outage");
    let scrapes = running.stop();

    let backlog = series(&scrapes, "linegate_replay_backlog_records");
    assert!(backlog.iter().any(|&n| n > 0.0), "no replay backlog: {backlog:?}");
    assert_eq!(last(&scrapes, "linegate_replay_backlog_records"), 0.0);
    assert!(counter(&scrapes, "linegate_broker_disconnects_total") >= 1.0);
    let (alerts, _) = stage.check_against_replay();
    let events = check_delivered(&stage, &[&sub, &after], &alerts);
    let before = records(&away) as usize;
    let replayed = events.values().filter(|flags| flags.contains(&true)).count();
    assert!(replayed > 0 && replayed < 1200 - before / 2, "{replayed} replayed of 1200");
    stage.drill_shown("alert-service-outage");
}

/// The checkpoint is lost (its record no longer decodes) while a backlog of raw frames and events
/// waits for the broker: the start-up check fails, the store is moved aside and everything still
/// readable is salvaged into a fresh one; the decide stage re-derives the rule state from the
/// salvaged journal (`linegate_records_total` climbs again from 0: replay progress), the backlog
/// drains, and a `recovery` record says what was kept. (An input whose every line already left
/// the journal's history resumes from its kept position: `lost_checkpoint_with_an_empty_journal`.)
#[test]
fn lost_checkpoint() {
    // One sensor's raw samples, a block a second at 100 Hz: RMS 0.9 g from 290 to 320 s.
    let block = |s: i64| {
        let amp = if (290..320).contains(&s) { 0.9 } else { 0.05 };
        let data: Vec<f64> = (0..100).map(|i| if i % 2 == 0 { amp } else { -amp }).collect();
        json!({"at": T0 + s * 1000 + 1050, "kind": "samples", "machine": "press-1",
               "sensor": "s1", "t0_ms": T0 + s * 1000, "rate_hz": 100, "unit": "g", "axis": "z",
               "data": data})
        .to_string()
    };
    let all: Vec<String> = (0..600).map(block).collect();
    let (first, rest) = all.split_at(300);
    let mut stage = Stage::new(first, 0.0, "");
    support::daemon::run_to_end(&stage.config, &["--no-forward"]);
    stage.drill("start", "lost-checkpoint");
    let db = linegate::store::open_sled_directly(&stage.dir.path().join("db")).unwrap();
    db.open_tree("state").unwrap().insert("c/", &b"\x09broken"[..]).unwrap();
    db.flush().unwrap();
    drop(db);
    stage.append(rest);

    let running = stage.start(&["--forward", "local-ack", "--exit-at-end"]);
    let scrapes = running.finish();
    let records = series(&scrapes, "linegate_records_total");
    // Never down from one scrape to the next (and scraped at least once); a short run may give a
    // single scrape, which the progress check below then must have caught mid-replay.
    counter(&scrapes, "linegate_records_total");
    // The first run's checkpoint said 300; the re-derived count starts again below it.
    assert!(records.iter().any(|&r| r < 300.0), "no replay progress seen: {records:?}");

    let recovery = support::ledger(&stage.config).into_iter().find(|e| e["kind"] == "recovery");
    let salvage = &recovery.expect("a recovery record")["salvage"];
    assert_eq!(salvage["unreadable"]["checkpoint"], 1, "{salvage}");
    for kind in ["journal", "outbox", "ledger"] {
        assert!(salvage["copied"][kind].as_u64().unwrap_or(0) > 0, "{kind}: {salvage}");
    }
    let (alerts, _) = stage.check_against_replay();
    let opens = alerts.iter().filter(|a| a["kind"] == "open").count();
    assert_eq!(opens, 1, "the incident across the damage is one alert");
    let report: Value =
        serde_json::from_str(&reconciled(&["reconcile", "--json"], &stage.config)).unwrap();
    assert_eq!(report["queued"], 0, "the backlog drained: {report}");
    stage.drill("end", "lost-checkpoint");
    let during = stage.drill_shown("lost-checkpoint");
    assert_eq!(during["recovery"], 1, "the salvage shows in the drill: {during}");
}

/// A record of the backlog is damaged where the bounded start-up check does not look (an outbox
/// event in the middle of 300): the start is clean, and the decide stage finds the record while
/// running. The daemon marks the store for salvage and exits non-zero, naming the record; the
/// next start salvages around it, says so in a `recovery` record, declares the event lost, and
/// goes on (never a crash loop on the same damage).
#[test]
fn damage_found_while_running() {
    let lines = in_arrival_order(steady("press-1", "s1", 0, 600, highs(200, 205)));
    let (first, rest) = lines.split_at(300);
    let mut stage = Stage::new(first, 0.0, "");
    support::daemon::run_to_end(&stage.config, &["--no-forward"]);
    let store = stage.dir.path().join("db");
    stage.drill("start", "damage-found-while-running");
    support::damage_outbox_record(&store, 150, b"\x01junk");
    stage.append(rest);

    let mut d = Daemon::start(&stage.config, &["--exit-at-end", "--no-forward"], &[]);
    let (status, _) = d.wait(support::DEADLINE);
    assert!(!status.success(), "{}", d.log());
    let line = d.log().lines().find(|l| l.contains("marked for salvage")).map(String::from);
    let line = line.unwrap_or_else(|| panic!("no salvage line: {}", d.log()));
    assert!(line.contains("tree=state") && line.contains("key=o/150"), "{line}");
    assert!(store.join(linegate::store::SALVAGE_MARKER).exists(), "the marker is durable");

    support::daemon::run_to_end(&stage.config, &["--forward", "local-ack"]);
    assert!(!store.join(linegate::store::SALVAGE_MARKER).exists(), "left with the damage");
    let ledger = support::ledger(&stage.config);
    let recovery = ledger.iter().find(|e| e["kind"] == "recovery").expect("a recovery record");
    let what = recovery["what"].as_str().unwrap();
    assert!(what.contains("damage found while running") && what.contains("o/150"), "{what}");
    assert_eq!(recovery["salvage"]["unreadable"]["outbox"], 1, "{recovery}");
    assert_eq!(recovery["salvage"]["copied"]["checkpoint"], 1, "{recovery}");
    stage.check_against_replay();
    let report = reconciled(&["reconcile"], &stage.config);
    assert!(report.contains("1 lost to a damaged store"), "{report}");
    stage.drill("end", "damage-found-while-running");
    let during = stage.drill_shown("damage-found-while-running");
    assert_eq!(during["recovery"], 1, "the salvage shows in the drill: {during}");
}

/// The checkpoint is lost after everything was decided and acknowledged and the history expired,
/// so the journal is empty too: the trace source resumes from its position kept beside the checkpoint (`n/source/0`,
/// salvaged), not from its start, and no event is accepted twice.
#[test]
fn lost_checkpoint_with_an_empty_journal() {
    // The incident closes (at 142 s) before the damage: with the journal empty there is nothing
    // to re-derive the rule state from (docs/runbook.md, "lost checkpoint").
    let lines = in_arrival_order(steady("press-1", "s1", 0, 400, highs(20, 25)));
    let (first, rest) = lines.split_at(200);
    let mut stage = Stage::new(first, 0.0, "");
    support::daemon::run_to_end(&stage.config, &["--forward", "local-ack"]);
    let inspect: Value = serde_json::from_str(&cli(&["inspect", "--json"], &stage.config)).unwrap();
    stage.drill("start", "lost-checkpoint-empty-journal");
    let db = linegate::store::open_sled_directly(&stage.dir.path().join("db")).unwrap();
    // The history holds every line; it expires as after `[store] history` with nothing new (the
    // decide stage's truncation: the start moved past every record, the records removed).
    let journal = db.open_tree("journal").unwrap();
    let decided = inspect["checkpoint"].as_u64().unwrap();
    // One append's records share a page (one sled value): count the records.
    let held: u64 =
        journal.iter().values().map(|v| linegate::store::page::count(&v.unwrap()).unwrap()).sum();
    assert_eq!(held, decided, "the history holds every line: {inspect}");
    journal.clear().unwrap();
    let start = (decided + 1).to_be_bytes();
    db.open_tree("state").unwrap().insert("n/journal_start", &start[..]).unwrap();
    drop(journal);
    db.open_tree("state").unwrap().insert("c/", &b"\x09broken"[..]).unwrap();
    db.flush().unwrap();
    drop(db);
    stage.append(rest);

    support::daemon::run_to_end(&stage.config, &["--forward", "local-ack"]);
    let recovery = support::ledger(&stage.config).into_iter().find(|e| e["kind"] == "recovery");
    let salvage = &recovery.expect("a recovery record")["salvage"];
    assert_eq!(salvage["unreadable"]["checkpoint"], 1, "{salvage}");
    assert_eq!(salvage["copied"]["source_positions"], 1, "{salvage}");
    // Every event accepted once, as replay decides them.
    stage.check_against_replay();
    stage.drill("end", "lost-checkpoint-empty-journal");
    let during = stage.drill_shown("lost-checkpoint-empty-journal");
    assert_eq!(during["recovery"], 1, "the salvage shows in the drill: {during}");
}

/// A sensor node forwards its buffer every 30 s (an uplink 30 s behind, in order): with
/// `watermark_bound = "auto"` the gateway measures the ingest delay (`at - ts`, about 30 s) beside
/// the disorder (none), exports both, and holds the quiet sensor's watermark back by it, so the
/// incident opens once, on time, with nothing late and no amendment. The same input under the
/// fixed 5 s bound lets the watermark run ahead while the node is quiet: most of every delivery
/// is late, and the incident is amended.
#[test]
fn uplink_delay() {
    let lines: Vec<(i64, Value)> = (0..300)
        .map(|s| {
            let at = (s / 30 + 1) * 30_000 + 200;
            let v = if [25, 26, 27, 35, 36].contains(&s) { HIGH } else { LOW };
            (at, event(at, s * 1000, "press-1", "s1", s as u64 + 1, v))
        })
        .collect();
    let stage = Stage::new(&in_arrival_order(lines), 0.0, "");
    let fixed = std::fs::read_to_string(&stage.config).unwrap();
    let auto = "watermark_bound = \"auto\"\nauto_bound_min = \"1s\"\nauto_bound_max = \"60s\"\n";
    assert!(fixed.contains("watermark_bound = \"5s\"\n"), "{fixed}");
    std::fs::write(&stage.config, fixed.replace("watermark_bound = \"5s\"\n", auto)).unwrap();
    let scrapes = stage.run_drill("uplink-delay");

    let label = "{machine=\"press-1\",sensor=\"s1\"}";
    let delay = last(&scrapes, &format!("linegate_ingest_delay_seconds{label}"));
    assert!((30.0..36.0).contains(&delay), "measured delay {delay} s");
    assert_eq!(last(&scrapes, &format!("linegate_watermark_disorder_seconds{label}")), 0.0);
    assert_eq!(last(&scrapes, "linegate_late_applied_total"), 0.0);
    let status: Value = serde_json::from_str(&cli(&["status", "--json"], &stage.config)).unwrap();
    let s1 = &status["sensors"][0];
    assert_eq!((&s1["bound_ms"], &s1["disorder_ms"]), (&json!(1000), &json!(0)), "{s1}");
    let status_delay = s1["delay_ms"].as_f64().unwrap_or(0.0);
    assert!((status_delay - delay * 1000.0).abs() < 1.0, "the metric's: {s1}");
    let text = cli(&["status"], &stage.config);
    assert!(
        text.contains("watermark bound 1.0 s (measured: disorder 0 ms, ingest delay 3"),
        "{text}"
    );
    let (alerts, summary) = stage.check_against_replay();
    stage.drill_shown("uplink-delay");
    assert_eq!(summary["late_applied"], 0);
    let kinds: Vec<&str> = alerts.iter().map(|a| a["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["open", "close"], "decided on time: {alerts:?}");
    assert_eq!(alerts[1]["also"], json!(["press-1.s1.36", "press-1.s1.37"]));

    // The contrast: the fixed 5 s bound of the golden traces.
    let dir = stage.dir.path().join("fixed");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("gateway.toml"), &fixed).unwrap();
    let replayed = support::replay(&stage.trace, &dir.join("gateway.toml"), &dir);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(&replayed.summary).unwrap()).unwrap();
    assert!(summary["late_applied"].as_u64().unwrap() > 150, "{summary}");
    let amended = replayed.alert_lines().iter().any(|l| l.contains("\"kind\":\"amend\""));
    assert!(amended, "a 5 s bound amends: {:?}", replayed.alert_lines());
}

/// A late event completes a composite rule's incident after a restart (docs/contracts.md
/// section 4, composite rules): the golden trace `composite_sequence` is decided up to the line
/// before its late event by a daemon that is SIGKILLed once it has decided them all (its
/// checkpoint may lag: the journal is decided again); the rest of the trace, the late event
/// first, comes to the next start. The composite alert it completes opens once, caused by it,
/// citing the member alert the late event made; nothing decided before the kill is repeated,
/// and everything equals `linegate replay` of the whole trace.
#[test]
fn late_event_completes_a_composite_after_a_restart() {
    let text = std::fs::read_to_string(support::trace("composite_sequence.jsonl")).unwrap();
    let lines: Vec<String> = text.lines().map(String::from).collect();
    let late_id = "press-7.s1.34";
    let at = lines.iter().position(|l| l.contains(late_id)).expect("the late event");
    let late: Value = serde_json::from_str(&lines[at]).unwrap();
    assert!(late["event"]["ts_ms"].as_i64() < Some(late["at"].as_i64().unwrap() - 30_000));
    let (first, rest) = lines.split_at(at);
    let mut stage = Stage::with_golden_config(first, 0.0, "composite_sequence.toml");
    let running = stage.start(&["--forward", "local-ack"]);
    running.wait("every line decided", |b| stage.all_decided(b));
    let mut daemon = running.daemon;
    daemon.kill();
    let before = cli(&["dump", "alerts"], &stage.config);
    let composite = |text: &str| -> Vec<Value> {
        let all = text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap());
        all.filter(|a| a["rule"] == "then").collect()
    };
    assert_eq!(composite(&before).len(), 2, "the first composite opened and closed:\n{before}");
    stage.append(rest);
    stage.start(&["--forward", "local-ack", "--exit-at-end"]).finish();
    let (alerts, _) = stage.check_against_replay();
    let opens: Vec<&Value> =
        alerts.iter().filter(|a| a["rule"] == "then" && a["kind"] == "open").collect();
    assert_eq!(opens.len(), 2, "one open per composite incident: {opens:?}");
    let completed = opens[1];
    assert_eq!(completed["caused_by"], late_id, "{completed}");
    let cited: Vec<&str> = completed["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["rule"].as_str().unwrap())
        .collect();
    assert_eq!(cited, ["vib", "env"], "{completed}");
    let vib = &completed["members"][0];
    assert!(vib["evidence"].as_array().unwrap().iter().any(|e| e == late_id), "{completed}");
    // Its records took the path of every alert: one ledger `alert` record each, queued in the
    // outbox and acknowledged (`--forward local-ack`).
    let ledger = support::ledger(&stage.config);
    let id = completed["alert_id"].as_str().unwrap();
    let queued: Vec<&Value> =
        ledger.iter().filter(|e| e["kind"] == "alert" && e["alert_id"] == id).collect();
    let kinds: Vec<&str> = queued.iter().map(|e| e["alert_kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["open", "close"], "{queued:?}");
    let seqs: BTreeSet<u64> = queued.iter().map(|e| e["outbox_seq"].as_u64().unwrap()).collect();
    let acked = ledger.iter().filter(|e| e["kind"] == "acknowledged").flat_map(|e| {
        e["outbox_seqs"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()).collect::<Vec<_>>()
    });
    assert_eq!(acked.filter(|s| seqs.contains(s)).count(), 2, "both acknowledged once");
}
