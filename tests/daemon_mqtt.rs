//! `linegate run` forwarding to a real mosquitto, recorded by an independent subscriber
//! (`mosquitto_sub`): steady flow on fixture traces, compared with `linegate replay` of the same
//! trace; the daemon SIGKILLed in the middle of a backlog drain, then restarted; SIGKILLed after
//! an alert was published and before its checkpoint committed; the broker absent when the daemon
//! starts. Every assertion is on what the subscriber received and on what
//! `linegate reconcile` and the ledger say afterwards.

#[path = "support/mqtt.rs"]
mod mqtt;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use mqtt::*;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_linegate");

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/traces").join(name)
}

/// `rules` (a fixture configuration without store, broker or source) with the store in
/// `dir/db`, the broker at `port` under prefix `lg`, `mqtt_extra` keys, and `trace` as source.
fn config(
    dir: &Path,
    name: &str,
    rules: &str,
    trace: &Path,
    port: u16,
    mqtt_extra: &str,
) -> PathBuf {
    let text = format!(
        "{}\n[store]\npath = \"{}\"\ncommit_interval = \"20ms\"\n\n\
         [mqtt]\nhost = \"127.0.0.1\"\nport = {port}\nprefix = \"lg\"\n{mqtt_extra}\n\n\
         [[source]]\nkind = \"trace\"\npath = \"{}\"\nspeed = 0.0\n",
        std::fs::read_to_string(fixture(rules)).unwrap(),
        dir.join("db").display(),
        trace.display()
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `linegate run --config CONFIG ARGS`, with `env` added to its environment.
fn daemon(config: &Path, args: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Child {
    Command::new(BIN)
        .args(["run", "--config"])
        .arg(config)
        .args(args)
        .env("LINEGATE_LOG", "info")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// `linegate run --exit-at-end ARGS` to its end; it must succeed.
fn run_to_end(config: &Path, args: &[&str]) {
    let out = daemon(config, &[&["--exit-at-end"], args].concat(), &[], Stdio::piped())
        .wait_with_output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "linegate run failed: {:?}\n{err}", out.status);
}

fn cli(args: &[&str], config: &Path) -> String {
    let out = Command::new(BIN).args(args).arg("--config").arg(config).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "linegate {args:?} failed: {err}");
    String::from_utf8(out.stdout).unwrap()
}

/// What `linegate replay` decides for the trace: its alert records and its accepted count.
fn replay(trace: &Path, config: &Path, dir: &Path) -> (Vec<Value>, u64) {
    let (out, summary) = (dir.join("replay.alerts.jsonl"), dir.join("replay.summary.json"));
    let status = Command::new(BIN)
        .arg("replay")
        .arg(trace)
        .arg("--config")
        .arg(config)
        .arg("--out")
        .arg(&out)
        .arg("--summary")
        .arg(&summary)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let alerts = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    (alerts, summary["accepted"].as_u64().unwrap())
}

/// The store's ledger, as `linegate dump ledger` prints it.
fn ledger(config: &Path) -> Vec<Value> {
    cli(&["dump", "ledger"], config).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// An accepted event as the ledger names it.
#[derive(Debug)]
struct Accepted {
    event_id: String,
    machine: String,
    sensor: String,
    ts_ms: i64,
}

fn accepted(ledger: &[Value]) -> Vec<Accepted> {
    ledger
        .iter()
        .map(|r| &r["entry"])
        .filter(|e| e["kind"] == "accepted")
        .map(|e| Accepted {
            event_id: e["event_id"].as_str().unwrap().into(),
            machine: e["machine"].as_str().unwrap().into(),
            sensor: e["sensor"].as_str().unwrap().into(),
            ts_ms: e["ts_ms"].as_i64().unwrap(),
        })
        .collect()
}

/// `linegate reconcile` accounts for everything, and nothing is left queued; every
/// acknowledged outbox record was ledgered `Published` before.
fn check_store(config: &Path) {
    let r: Value = serde_json::from_str(&cli(&["reconcile", "--json"], config)).unwrap();
    assert_eq!(r["unaccounted"], serde_json::json!([]), "{r}");
    assert_eq!(r["queued"], 0, "everything forwarded: {r}");
    let mut published = BTreeSet::new();
    for e in ledger(config).iter().map(|r| &r["entry"]) {
        let seqs = || e["outbox_seqs"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap());
        match e["kind"].as_str() {
            Some("published") => published.extend(seqs()),
            Some("acknowledged") => {
                for s in seqs() {
                    assert!(published.contains(&s), "outbox record {s} acknowledged unpublished");
                }
            }
            _ => {}
        }
    }
}

/// What the subscriber got: every copy of every event by `event_id` (with its topic), the first
/// occurrence order per sensor, and every alert record copy.
struct Delivered {
    events: BTreeMap<String, Vec<(String, Value)>>,
    order: BTreeMap<String, Vec<u64>>,
    alerts: Vec<Value>,
}

fn delivered(sub: &Subscriber) -> Delivered {
    let msgs = sub.messages();
    let mut d = Delivered { events: BTreeMap::new(), order: BTreeMap::new(), alerts: Vec::new() };
    for (topic, e) in received_events(&msgs) {
        let id = e["event_id"].as_str().unwrap().to_owned();
        let copies = d.events.entry(id).or_default();
        if copies.is_empty() {
            let sensor = format!("{}/{}", e["machine"], e["sensor"]);
            d.order.entry(sensor).or_default().push(e["seq"].as_u64().unwrap());
        }
        copies.push((topic, e));
    }
    for (_, p) in msgs.iter().filter(|(t, _)| t.contains("/alerts/")) {
        d.alerts.push(serde_json::from_slice(p).unwrap());
    }
    d
}

fn alert_key(a: &Value) -> (String, u64) {
    (a["alert_id"].as_str().unwrap().to_owned(), a["revision"].as_u64().unwrap())
}

/// Waits until every accepted event and every replay alert record reached the subscriber, then
/// checks docs/contracts.md section 10: each event on `events/{machine}/{sensor}` with its original
/// `ts_ms`, nothing else, per-sensor `seq` order after deduplication on `event_id`, and the alert
/// records, deduplicated on `(alert_id, revision)`, equal to replay's.
fn check_delivered(
    sub: &Subscriber,
    root: &str,
    accepted: &[Accepted],
    replayed: &[Value],
) -> Delivered {
    let want_alerts: BTreeMap<_, _> = replayed.iter().map(|a| (alert_key(a), a.clone())).collect();
    wait_for("every event and alert at the subscriber", 500, || {
        let d = delivered(sub);
        let keys: BTreeSet<_> = d.alerts.iter().map(alert_key).collect();
        accepted.iter().all(|a| d.events.contains_key(&a.event_id))
            && want_alerts.keys().all(|k| keys.contains(k))
    });
    let d = delivered(sub);
    assert_eq!(d.events.len(), accepted.len(), "events received that were never accepted");
    for a in accepted {
        for (topic, e) in &d.events[&a.event_id] {
            assert_eq!(topic, &format!("{root}/events/{}/{}", a.machine, a.sensor));
            assert_eq!(e["ts_ms"].as_i64(), Some(a.ts_ms), "original ts_ms of {}", a.event_id);
        }
    }
    for (sensor, seqs) in &d.order {
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{sensor} out of order: {seqs:?}");
    }
    let mut got = BTreeMap::new();
    for a in &d.alerts {
        let before = got.insert(alert_key(a), a.clone());
        assert!(before.is_none_or(|b| &b == a), "two contents for {:?}", alert_key(a));
    }
    assert_eq!(got, want_alerts, "alert records against linegate replay");
    d
}

#[test]
fn steady_flow_delivers_every_event_and_the_replay_alerts() {
    let mut alert_records = 0;
    for (trace, rules, gateway) in [
        ("cwru.jsonl", "cwru.toml", "gw-cwru"),
        ("late_merges.jsonl", "golden.toml", "gw-test"),
        ("too_late.jsonl", "golden.toml", "gw-test"),
        ("duplicates.jsonl", "golden.toml", "gw-test"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::start(dir.path(), free_port(), "");
        let root = format!("lg/{gateway}");
        let sub = Subscriber::start(dir.path(), broker.port, &root, &[]);
        let trace = fixture(trace);
        let cfg = config(dir.path(), "run.toml", rules, &trace, broker.port, "");
        run_to_end(&cfg, &[]);
        // The exit came after the drain: nothing is left queued.
        check_store(&cfg);
        let ledger = ledger(&cfg);
        let accepted = accepted(&ledger);
        let (alerts, replay_accepted) = replay(&trace, &cfg, dir.path());
        assert_eq!(accepted.len() as u64, replay_accepted, "{}", trace.display());
        assert!(!accepted.is_empty(), "{}", trace.display());
        alert_records += alerts.len();
        check_delivered(&sub, &root, &accepted, &alerts);
        let status = sub.on(&format!("{root}/status"));
        assert_eq!(status.first().map(|s| s.1.as_slice()), Some(&br#"{"state":"online"}"#[..]));
        if gateway == "gw-cwru" {
            assert!(!sub.on("/samples/").is_empty(), "CWRU raw frames are forwarded");
        }
    }
    assert!(alert_records >= 10, "the traces make alerts: {alert_records}");
}

/// A trace of `n` events for each of four sensors of machine `m1`, one per second, high (0.9 g)
/// for seq 50..=55 so that alerts are among them.
fn write_trace(path: &Path, n: u64) {
    let mut text = String::new();
    for seq in 1..=n {
        for sensor in ["s1", "s2", "s3", "s4"] {
            let ts = 1_700_000_000_000 + 1000 * seq as i64;
            let value = if (50..=55).contains(&seq) { 0.9 } else { 0.2 };
            text.push_str(&format!(
                r#"{{"at":{},"kind":"event","event":{{"event_id":"m1.{sensor}.{seq}","machine":"m1","sensor":"{sensor}","seq":{seq},"ts_ms":{ts},"clock":{{"state":"synced","err_ms":2}},"metric":"accel_rms","unit":"g","schema":1,"quality":"good","value":{value}}}}}"#,
                ts + 100
            ));
            text.push('\n');
        }
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn killed_while_draining_a_backlog_loses_nothing_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), free_port(), "max_queued_messages 0");
    let root = "lg/gw-test";
    let sub = Subscriber::start(dir.path(), broker.port, root, &[]);
    let trace = dir.path().join("backlog.jsonl");
    write_trace(&trace, 250);
    // A slow drain (200 records per second) so that the kill lands in its middle.
    let slow =
        config(dir.path(), "slow.toml", "golden.toml", &trace, broker.port, "replay_rate = 200");
    let fast =
        config(dir.path(), "fast.toml", "golden.toml", &trace, broker.port, "replay_rate = 0");
    run_to_end(&slow, &["--no-forward"]);
    let accepted = accepted(&ledger(&slow));
    assert_eq!(accepted.len(), 1000);

    let mut child = daemon(&slow, &[], &[], Stdio::null());
    wait_for("a quarter of the backlog at the subscriber", 500, || {
        delivered(&sub).events.len() >= 250
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let at_kill = delivered(&sub).events.len();
    assert!(at_kill < 1000, "the kill must land before the drain ends ({at_kill} delivered)");

    run_to_end(&fast, &[]);
    check_store(&fast);
    let (alerts, _) = replay(&trace, &fast, dir.path());
    assert!(!alerts.is_empty());
    let d = check_delivered(&sub, root, &accepted, &alerts);
    // Everything went out as backlog (queued before each connection): flagged as replayed.
    for (id, copies) in &d.events {
        for (_, e) in copies {
            assert_eq!(e["replayed"], true, "{id} sent from backlog without the replayed flag");
        }
    }
}

#[test]
fn broker_absent_at_start_gets_everything_once_it_comes() {
    let dir = tempfile::tempdir().unwrap();
    let persistence = format!(
        "persistence true\npersistence_location {}/\nmax_queued_messages 0",
        dir.path().display()
    );
    let mut broker = Broker::start(dir.path(), free_port(), &persistence);
    let root = "lg/gw-cwru";
    // A persistent session: the broker queues for it while it is away, across its own restart.
    drop(Subscriber::with_session(dir.path(), broker.port, root, "recorder"));
    broker.stop();

    let trace = fixture("cwru.jsonl");
    let cfg = config(dir.path(), "run.toml", "cwru.toml", &trace, broker.port, "");
    let log = dir.path().join("daemon.log");
    let stderr = std::fs::File::create(&log).unwrap();
    let mut child =
        daemon(&cfg, &["--exit-at-end", "--drain-timeout", "30s"], &[], Stdio::from(stderr));
    wait_for("the daemon to find no broker", 500, || {
        std::fs::read_to_string(&log).unwrap().contains("MQTT connection lost or refused")
    });
    assert!(child.try_wait().unwrap().is_none(), "the daemon waits for the broker to drain");
    broker.restart();
    wait_for("the daemon to drain and exit", 1000, || child.try_wait().unwrap().is_some());
    let status = child.wait().unwrap();
    assert!(status.success(), "{}", std::fs::read_to_string(&log).unwrap());
    check_store(&cfg);

    let sub = Subscriber::with_session(dir.path(), broker.port, root, "recorder");
    let (alerts, _) = replay(&trace, &cfg, dir.path());
    check_delivered(&sub, root, &accepted(&ledger(&cfg)), &alerts);
}

/// The decide stage wakes the forwarder once a checkpoint's batch is applied, and commits it
/// while the forwarder publishes. Killed in between, the daemon decides the same records again
/// after a restart: every alert delivered before the kill is delivered again, identical (same
/// `alert_id`, `revision` and content, which consumers deduplicate on), and nothing is lost.
#[cfg(feature = "failpoints")]
#[test]
fn killed_after_publishing_an_alert_before_its_checkpoint_commits_sends_it_again_identical() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), free_port(), "max_queued_messages 0");
    let root = "lg/gw-test";
    let sub = Subscriber::start(dir.path(), broker.port, root, &[]);
    let trace = dir.path().join("alerts.jsonl");
    write_trace(&trace, 80);
    let cfg = config(dir.path(), "run.toml", "golden.toml", &trace, broker.port, "replay_rate = 0");
    // Every checkpoint waits 5 s between its applied batch and its commit: the kill below, right
    // after the subscriber got an alert, lands in that wait.
    let pause = [("FAILPOINTS", "app::decide::before_commit=sleep(5000)")];
    let mut child = daemon(&cfg, &[], &pause, Stdio::null());
    wait_for("an alert at the subscriber", 2000, || !delivered(&sub).alerts.is_empty());
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = delivered(&sub).alerts;
    // Delivered, and not durable: its checkpoint (which archives it) had not committed.
    let archived: BTreeSet<_> = cli(&["dump", "alerts"], &cfg)
        .lines()
        .map(|l| alert_key(&serde_json::from_str(l).unwrap()))
        .collect();
    for a in &before {
        assert!(!archived.contains(&alert_key(a)), "{a} was committed before it was published");
    }

    run_to_end(&cfg, &[]);
    check_store(&cfg);
    let (alerts, _) = replay(&trace, &cfg, dir.path());
    let d = check_delivered(&sub, root, &accepted(&ledger(&cfg)), &alerts);
    for a in &before {
        let copies = d.alerts.iter().filter(|b| *b == a).count();
        assert!(copies >= 2, "published before the kill, then not durable: sent again ({a})");
    }
}
