//! `linegate run` as a Sparkplug B edge node against a real mosquitto, checked by hosts nobody
//! here wrote: pysparkplug (PyPI, `tests/sparkplug/host.py`, in the venv `scripts/setup` makes)
//! decodes every message and resolves DDATA aliases through its own birth table, and the payloads
//! it received are decoded again by `sparkplug-payload` (npm, the specification's authors'
//! decoder, run by Debian's nodejs from `target/sparkplug-node`, `tests/sparkplug/decode.js`).
//!
//! Asserted on what the hosts received: births decode and declare every metric later sent; `seq`
//! has no gap within a session; NDEATH's `bdSeq` is its NBIRTH's; after a 30 s outage (a proxy
//! in front of the broker cut) and after a SIGKILL, every held value arrives once, flagged
//! historical, with its original timestamp, before newer live values of the same metric; a
//! rebirth command is answered within a second; with a primary host, nothing is published while
//! its `STATE` is offline and everything held arrives once it is online.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use support::daemon::Daemon;
use support::mqtt::{received_events, Broker, Proxy, Subscriber};
use support::{free_port, poll, root, DEADLINE};

/// The independent host: `host.py`, its JSON lines collected by a thread.
struct Host {
    child: Child,
    stdin: ChildStdin,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Host {
    fn start(port: u16, group: &str, host_id: &str) -> Host {
        let mut child = Command::new("python3")
            .arg(root().join("tests/sparkplug/host.py"))
            .args(["127.0.0.1", &port.to_string(), group, host_id])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 with pysparkplug (scripts/setup installs it into target/venv)");
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line).expect("host.py prints JSON lines");
                sink.lock().unwrap().push(v);
            }
        });
        let host = Host { child, stdin, lines };
        host.wait("host.py to subscribe", |m| m.iter().any(|v| v["type"] == "READY"));
        host
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn messages(&self) -> Vec<Value> {
        self.lines.lock().unwrap().clone()
    }

    /// Sparkplug messages of the node, in arrival order.
    fn node(&self) -> Vec<Value> {
        let kinds = ["NBIRTH", "DBIRTH", "DDATA", "NDEATH", "ERROR"];
        self.messages()
            .into_iter()
            .filter(|v| kinds.contains(&v["type"].as_str().unwrap()))
            .collect()
    }

    #[track_caller]
    fn wait(&self, what: &str, ready: impl Fn(&[Value]) -> bool) {
        if poll(DEADLINE, || ready(&self.messages()).then_some(())).is_none() {
            panic!("timed out waiting for {what}; the host received:\n{:#?}", self.node());
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn count(messages: &[Value], kind: &str) -> usize {
    messages.iter().filter(|v| v["type"] == kind).count()
}

/// A trace of `n` seconds of events of machine `m1`, sensors `s1` and `s2`, each with a
/// `velocity_rms` feature; high (0.9 g) at seconds 20..=25, so an incident opens and closes.
fn write_trace(path: &Path, n: i64, t0: i64) {
    let mut text = String::new();
    for seq in 1..=n {
        for sensor in ["s1", "s2"] {
            let ts = t0 + 1000 * seq;
            let value = if (20..=25).contains(&seq) { 0.9 } else { 0.2 };
            text.push_str(&event_line("m1", sensor, seq, ts, ts + 100, value));
        }
    }
    std::fs::write(path, text).unwrap();
}

/// One trace line: an event of `machine`/`sensor` at `ts` arriving at `at`, its `velocity_rms`
/// ten times its value.
fn event_line(machine: &str, sensor: &str, seq: i64, ts: i64, at: i64, value: f64) -> String {
    format!(
        r#"{{"at":{at},"kind":"event","event":{{"event_id":"{machine}.{sensor}.{seq}","machine":"{machine}","sensor":"{sensor}","seq":{seq},"ts_ms":{ts},"clock":{{"state":"synced","err_ms":2}},"metric":"accel_rms","unit":"g","schema":1,"quality":"good","value":{value},"features":{{"velocity_rms":{}}}}}}}"#,
        value * 10.0
    ) + "\n"
}

fn config(dir: &Path, port: u16, trace: &Path, speed: f64, primary_host: Option<&str>) -> PathBuf {
    config_with(dir, port, trace, speed, primary_host, "")
}

/// As [`config`], with `mqtt` added to the `[mqtt]` table.
fn config_with(
    dir: &Path,
    port: u16,
    trace: &Path,
    speed: f64,
    primary_host: Option<&str>,
    mqtt: &str,
) -> PathBuf {
    let primary = primary_host.map(|h| format!("primary_host = \"{h}\"\n")).unwrap_or_default();
    let text = format!(
        "{}\n[store]\npath = \"{}\"\ncommit_interval = \"20ms\"\n\n\
         [mqtt]\nhost = \"127.0.0.1\"\nport = {port}\nprefix = \"lg\"\n{mqtt}\n\
         [sparkplug]\nenabled = true\ngroup_id = \"plant\"\n{primary}\n\
         [[source]]\nkind = \"trace\"\npath = \"{}\"\nspeed = {speed:?}\n",
        std::fs::read_to_string(support::trace("golden.toml")).unwrap(),
        dir.join("db").display(),
        trace.display()
    );
    let path = dir.join("run.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Every DDATA metric value as `(device, name, timestamp, historical)`, in arrival order.
fn values(messages: &[Value]) -> Vec<(String, String, i64, bool)> {
    let mut out = Vec::new();
    for m in messages.iter().filter(|m| m["type"] == "DDATA") {
        for v in m["metrics"].as_array().unwrap() {
            let device = m["device"].as_str().unwrap().to_owned();
            let name = v["name"].as_str().expect("every DDATA alias resolved by a birth");
            let ts = v["timestamp"].as_i64().unwrap();
            out.push((device, name.to_owned(), ts, v["historical"] == true));
        }
    }
    out
}

/// What every run must show: nothing failed to decode (for both decoders), births declare every
/// metric sent after them, `seq` runs without a gap from each NBIRTH, every NDEATH carries its
/// NBIRTH's `bdSeq`.
fn check_protocol(messages: &[Value]) {
    let errors: Vec<&Value> = messages.iter().filter(|m| m["type"] == "ERROR").collect();
    assert!(errors.is_empty(), "the host could not decode: {errors:#?}");
    let mut expected_seq: Option<u64> = None;
    let mut bd_seq: Option<i64> = None;
    let mut declared: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in messages {
        let kind = m["type"].as_str().unwrap();
        let seq = m["seq"].as_u64();
        match kind {
            "NBIRTH" => {
                assert_eq!(seq, Some(0), "NBIRTH starts seq at 0");
                bd_seq = m["bd_seq"].as_i64();
                declared.clear();
            }
            "NDEATH" => {
                // A connection that never got to its births (the primary host offline) dies too.
                if let Some(b) = bd_seq.take() {
                    assert_eq!(m["bd_seq"].as_i64(), Some(b), "NDEATH's bdSeq is its NBIRTH's");
                }
                expected_seq = None;
                continue;
            }
            _ => {}
        }
        if kind != "NBIRTH" {
            assert_eq!(seq, expected_seq, "seq gap at {m}");
        }
        expected_seq = seq.map(|s| (s + 1) % 256);
        let device = m["device"].as_str().unwrap_or_default().to_owned();
        let names = m["metrics"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap());
        match kind {
            "DBIRTH" => {
                declared.insert(device, names.map(str::to_owned).collect());
            }
            "DDATA" => {
                for n in names {
                    let ok = declared.get(&device).is_some_and(|d| d.contains(n));
                    assert!(ok, "{device}/{n} sent without a DBIRTH declaring it in its session");
                }
            }
            _ => {}
        }
    }
    check_with_npm(messages);
}

/// The payloads decoded again by `sparkplug-payload`: the same `seq` and metrics as pysparkplug
/// read, the same historical flags.
fn check_with_npm(messages: &[Value]) {
    let modules = root().join("target/sparkplug-node/node_modules");
    let mut node = Command::new("node")
        .arg(root().join("tests/sparkplug/decode.js"))
        .env("SPARKPLUG_NODE_MODULES", &modules)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("Debian's nodejs (scripts/setup installs it)");
    let mut stdin = node.stdin.take().unwrap();
    let raws: Vec<String> =
        messages.iter().map(|m| m["raw"].as_str().unwrap_or_default().to_owned()).collect();
    let writer = std::thread::spawn(move || {
        for r in raws {
            writeln!(stdin, "{r}").unwrap();
        }
    });
    let out = node.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "decode.js failed (is target/sparkplug-node installed?)");
    let decoded: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(decoded.len(), messages.len());
    for (py, js) in messages.iter().zip(&decoded) {
        assert!(js.get("error").is_none(), "sparkplug-payload could not decode {py}: {js}");
        if py["type"] != "NDEATH" {
            assert_eq!(js["seq"].as_u64(), py["seq"].as_u64(), "{js}");
        }
        let (pm, jm) = (py["metrics"].as_array().unwrap(), js["metrics"].as_array().unwrap());
        assert_eq!(pm.len(), jm.len(), "{js}");
        for (p, j) in pm.iter().zip(jm) {
            assert_eq!(j["timestamp"].as_i64(), p["timestamp"].as_i64(), "{j}");
            assert_eq!(j["isHistorical"] == true, p["historical"] == true, "{j}");
        }
    }
}

/// How long the broker is away in the outage test: the length the issue names.
const OUTAGE: Duration = Duration::from_secs(30);

/// A broker, the independent host with its `STATE` published (`online` or `offline`), and a
/// subscriber on the JSON topics.
fn broker_and_host(dir: &Path, state: &str) -> (Broker, Host, Subscriber) {
    let broker = Broker::start(dir, free_port(), "");
    let mut host = Host::start(broker.port, "plant", "scada");
    host.send(state);
    host.wait("STATE sent", |m| count(m, "STATE_SENT") == 1);
    let sub = Subscriber::start(dir, broker.port, "lg/gw-test", &[]);
    (broker, host, sub)
}

/// Held values (`historical`) arrive once each, before any live value of the same metric in the
/// same session, each older than those live values; no value arrives twice.
fn check_history(messages: &[Value]) {
    let all = values(messages);
    let mut seen = BTreeSet::new();
    for (d, n, ts, _) in &all {
        assert!(seen.insert((d.clone(), n.clone(), *ts)), "{d}/{n} at {ts} arrived twice");
    }
    // Per session (from an NBIRTH), per metric: no historical value after a live one.
    let mut live_seen: BTreeMap<(String, String), i64> = BTreeMap::new();
    for m in messages {
        if m["type"] == "NBIRTH" {
            live_seen.clear();
        }
        for (d, n, ts, historical) in values(std::slice::from_ref(m)) {
            let key = (d.clone(), n.clone());
            match (historical, live_seen.get(&key)) {
                (true, Some(live_ts)) => {
                    panic!("{d}/{n}: historical value at {ts} after a live one at {live_ts}")
                }
                (false, _) => {
                    live_seen.entry(key).or_insert(ts);
                }
                _ => {}
            }
        }
    }
}

/// The timestamps of `name`'s DDATA values, with how many came flagged historical.
fn timestamps(messages: &[Value], name: &str) -> (BTreeSet<i64>, usize) {
    let v = values(messages);
    let mine: Vec<_> = v.iter().filter(|(_, n, _, _)| n == name).collect();
    (mine.iter().map(|(_, _, ts, _)| *ts).collect(), mine.iter().filter(|x| x.3).count())
}

/// Messages the node published itself (a will is the broker's).
fn published(host: &Host) -> usize {
    host.node().iter().filter(|m| m["type"] != "NDEATH").count()
}

/// A broker outage of 30 s (a proxy between gateway and broker closed) while events flow:
/// NDEATH by the will, births again on return, the values decided meanwhile sent once as
/// historical before the live ones; a rebirth command answered within a second; the NDEATH of a
/// clean stop; the JSON topics as ever.
#[test]
fn after_an_outage_held_values_arrive_once_as_historical_before_live_ones() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), free_port(), "");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let proxy = rt.block_on(Proxy::start(broker.port, Duration::ZERO));
    let mut host = Host::start(broker.port, "plant", "scada");
    let sub = Subscriber::start(dir.path(), broker.port, "lg/gw-test", &[]);
    let trace = dir.path().join("flow.jsonl");
    let (n, t0) = (600, 1_700_000_000_000);
    write_trace(&trace, n, t0);
    // Ten events per sensor a second for 60 s: the outage below holds about 300 of them, and
    // live values follow it (for about half a minute, however slow the start on a loaded
    // machine).
    let cfg = config(dir.path(), proxy.port, &trace, 10.0, None);
    let mut d = Daemon::start(&cfg, &[], &[]);
    host.wait("live DDATA", |m| count(m, "DDATA") >= 10);
    proxy.open.send(false).unwrap();
    host.wait("the will: NDEATH", |m| count(m, "NDEATH") >= 1);
    // The outage's length is the point: events are decided and held meanwhile.
    std::thread::sleep(OUTAGE);
    let before_return = host.node().len();
    proxy.open.send(true).unwrap();
    host.wait("births again", |m| count(m, "NBIRTH") >= 2);
    host.wait("live values after the return", |m| {
        let after = &m[m.iter().rposition(|v| v["type"] == "NBIRTH").unwrap()..];
        values(after).iter().any(|v| !v.3)
    });
    host.send("rebirth gw-test");
    host.wait("the rebirth's NBIRTH", |m| count(m, "NBIRTH") >= 3);
    let msgs = host.messages();
    let sent = msgs.iter().find(|v| v["type"] == "REBIRTH_SENT").unwrap()["at"].as_i64().unwrap();
    let nbirth = msgs.iter().filter(|v| v["type"] == "NBIRTH").nth(2).unwrap();
    let answered_in = nbirth["timestamp"].as_i64().unwrap() - sent;
    assert!(answered_in < 1000, "rebirth answered after {answered_in} ms");
    let last_ts = t0 + 1000 * n;
    host.wait("every event's value", |m| timestamps(m, "s1/accel_rms").0.contains(&last_ts));
    d.signal("TERM");
    d.wait_success(DEADLINE);
    host.wait("the NDEATH of a clean stop", |m| count(m, "NDEATH") >= 2);

    let messages = host.node();
    check_protocol(&messages);
    check_history(&messages);
    // Held during the outage: sent flagged historical after the return, none missing from the
    // first held one on (a value written just before the cut may be lost: QoS 0).
    let after_return = &messages[before_return..];
    let births: Vec<usize> = (messages.iter().enumerate())
        .filter(|(_, m)| m["type"] == "NBIRTH")
        .map(|(i, _)| i)
        .collect();
    let returned = &messages[births[1]..births[2]];
    for name in ["s1/accel_rms", "s2/accel_rms", "s1/velocity_rms"] {
        let (held_ts, held) = timestamps(after_return, name);
        // Ten a second for 30 s, less what the gateway decided before the cut was noticed.
        assert!(held >= 200, "{name}: only {held} historical values after the outage");
        let (all, _) = timestamps(&messages, name);
        let first_held = *held_ts.iter().next().unwrap();
        let expected: BTreeSet<i64> =
            (1..=n).map(|s| t0 + 1000 * s).filter(|ts| *ts >= first_held).collect();
        let missing: Vec<_> = expected.difference(&all).collect();
        assert!(missing.is_empty(), "{name}: values missing after the outage: {missing:?}");
        // Everything held is flagged, each once: in the session after the return (up to the
        // rebirth, after which what was not sent yet is historical again), the historical values
        // are one unbroken run.
        let flagged: BTreeSet<i64> = values(returned)
            .into_iter()
            .filter(|(_, n, _, historical)| n == name && *historical)
            .map(|(_, _, ts, _)| ts)
            .collect();
        assert!(
            flagged.len() >= 200,
            "{name}: only {} held values after the return",
            flagged.len()
        );
        let (first, last) = (flagged.first().unwrap(), flagged.last().unwrap());
        let run = expected.range(first..=last).copied().collect::<BTreeSet<_>>();
        assert_eq!(flagged, run, "{name}: every value held during the outage, as historical");
    }
    // The rule's metrics: the incident of seconds 20..=25 opened.
    let rule = values(&messages);
    assert!(rule.iter().any(|v| v.1 == "high-vibration/incident_open"), "no rule metrics");
    // The JSON topics: every event, as without Sparkplug.
    let events = received_events(&sub.messages());
    let ids: BTreeSet<String> = events.iter().map(|(_, e)| e["event_id"].to_string()).collect();
    assert_eq!(ids.len(), 2 * n as usize);
}

/// With a primary host: nothing while its `STATE` is offline (the JSON forwarder meanwhile
/// acknowledges and removes every record), the gateway SIGKILLed and started again, and once the
/// host is online everything held arrives, once, as historical, with its original timestamps.
#[test]
fn with_a_primary_host_offline_then_a_sigkill_everything_held_arrives_once_when_it_is_online() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut host, sub) = broker_and_host(dir.path(), "offline");
    let trace = dir.path().join("held.jsonl");
    let (n, t0) = (40, 1_700_000_000_000);
    write_trace(&trace, n, t0);
    let cfg = config(dir.path(), broker.port, &trace, 0.0, Some("scada"));
    let mut d = Daemon::start(&cfg, &[], &[]);
    let all_json = || received_events(&sub.messages()).len() >= 2 * n as usize;
    assert!(poll(DEADLINE, || all_json().then_some(())).is_some(), "JSON events not delivered");
    // The JSON forwarder has acknowledged (and removed) every record: the Sparkplug view still
    // holds them, set aside in the store.
    assert_eq!(published(&host), 0, "published while the primary host is offline");
    // (A connection lost and made again meanwhile, on a loaded machine, had its will too.)
    let deaths = count(&host.messages(), "NDEATH");
    d.kill();
    d.wait(DEADLINE);
    // The broker sends the killed connection's will.
    host.wait("the will: NDEATH", |m| count(m, "NDEATH") > deaths);
    let mut d = Daemon::start(&cfg, &[], &[]);
    let connected = || d.log().contains("sparkplug: connected").then_some(());
    assert!(poll(DEADLINE, connected).is_some(), "the restarted gateway did not connect");
    assert_eq!(published(&host), 0, "published while the primary host is offline");
    host.send("online");
    host.wait("births once the host is online", |m| count(m, "NBIRTH") >= 1);
    let last_ts = t0 + 1000 * n;
    host.wait("every held value", |m| timestamps(m, "s2/velocity_rms").0.contains(&last_ts));
    d.signal("TERM");
    d.wait_success(DEADLINE);

    let messages = host.node();
    check_protocol(&messages);
    check_history(&messages);
    let expected: BTreeSet<i64> = (1..=n).map(|s| t0 + 1000 * s).collect();
    for name in ["s1/accel_rms", "s2/accel_rms", "s1/velocity_rms", "s2/velocity_rms"] {
        let (ts, historical) = timestamps(&messages, name);
        assert_eq!(ts, expected, "{name}: every held value, with its original timestamp");
        assert_eq!(historical, n as usize, "{name}: all of them historical, each once");
    }
}

/// Live data is not starved: with a primary host offline, machine `m1`'s 300 records are held;
/// once it is online they drain at `replay_rate` (20 a second: 15 s), and machine `m2`, which
/// holds nothing, starts sending meanwhile: its values arrive live while `m1`'s history is still
/// arriving, and per metric every held value still precedes the newer live ones.
#[test]
fn while_held_values_drain_live_values_of_other_machines_are_not_starved() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut host, sub) = broker_and_host(dir.path(), "offline");
    // m1: 150 events per sensor within the first 0.75 s; m2: 40 events from 8 s on, one every
    // 200 ms (the trace is replayed at its own pace).
    let t0: i64 = 1_700_000_000_000;
    let mut text = String::new();
    for seq in 1..=150 {
        for sensor in ["s1", "s2"] {
            let at = t0 + 5 * seq;
            text.push_str(&event_line("m1", sensor, seq, at - 100, at, 0.2));
        }
    }
    for seq in 1..=40 {
        let at = t0 + 8_000 + 200 * seq;
        text.push_str(&event_line("m2", "s1", seq, at - 100, at, 0.3));
    }
    let trace = dir.path().join("fair.jsonl");
    std::fs::write(&trace, text).unwrap();
    let cfg =
        config_with(dir.path(), broker.port, &trace, 1.0, Some("scada"), "replay_rate = 20\n");
    let mut d = Daemon::start(&cfg, &[], &[]);
    let of = |machine: &str| {
        let events = received_events(&sub.messages());
        events.iter().filter(|(_, e)| e["machine"] == machine).count()
    };
    let held = || (of("m1") == 300).then_some(());
    assert!(poll(DEADLINE, held).is_some(), "m1's JSON events not delivered");
    assert_eq!(of("m2"), 0, "m2 must hold nothing when the host comes online: a slower machine?");
    assert_eq!(published(&host), 0, "published while the primary host is offline");
    host.send("online");
    let m1_last = t0 + 5 * 150 - 100;
    let m2_last = t0 + 8_000 + 200 * 40 - 100;
    host.wait("every value", |m| {
        timestamps(m, "s2/accel_rms").0.contains(&m1_last)
            && values(m).iter().any(|v| v.0 == "m2" && v.2 == m2_last)
    });
    d.signal("TERM");
    d.wait_success(DEADLINE);

    let messages = host.node();
    check_protocol(&messages);
    check_history(&messages);
    let all = values(&messages);
    let m1: Vec<_> = all.iter().filter(|v| v.0 == "m1").collect();
    assert_eq!(m1.len(), 600, "m1: 300 records, two metrics each, once");
    assert!(m1.iter().all(|v| v.3), "every value of m1 was held: historical");
    let m2: Vec<usize> = (all.iter().enumerate())
        .filter(|(_, v)| v.0 == "m2")
        .map(|(i, v)| {
            assert!(!v.3, "m2 held nothing: {v:?} came as historical");
            i
        })
        .collect();
    assert_eq!(m2.len(), 80, "m2: 40 records, two metrics each");
    // Arrival order: m2's values while m1's history was still draining.
    let last_m1 = all.iter().rposition(|v| v.0 == "m1").unwrap();
    let during = m2.iter().filter(|i| **i < last_m1).count();
    assert!(during >= 20, "only {during} of m2's values came before m1's drain ended");
}

/// With a primary host: when its `STATE` goes offline after the births, the node ends its
/// session (NDEATH with the births' `bdSeq`, then DISCONNECT; Sparkplug B 3.0), connects again,
/// publishes nothing while the host is offline, and on its return births with a new `bdSeq`
/// and sends what it held as historical.
#[test]
fn the_primary_host_going_offline_ends_the_session_and_what_follows_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut host, sub) = broker_and_host(dir.path(), "online");
    let trace = dir.path().join("host.jsonl");
    let (n, t0) = (300, 1_700_000_000_000);
    write_trace(&trace, n, t0);
    let cfg = config(dir.path(), broker.port, &trace, 10.0, Some("scada"));
    let mut d = Daemon::start(&cfg, &[], &[]);
    host.wait("live DDATA", |m| count(m, "DDATA") >= 5);
    host.send("offline");
    host.wait("the node's NDEATH", |m| count(m, "NDEATH") >= 1);
    let at_death = published(&host);
    let json_at_death = received_events(&sub.messages()).len();
    // Events decided while the host is offline: the JSON topics carry them, Sparkplug holds.
    let more = || (received_events(&sub.messages()).len() >= json_at_death + 40).then_some(());
    assert!(poll(DEADLINE, more).is_some(), "no events decided while the host was offline");
    let reconnected = || (d.log().matches("sparkplug: connected").count() >= 2).then_some(());
    assert!(poll(DEADLINE, reconnected).is_some(), "the node did not connect again");
    assert_eq!(published(&host), at_death, "published while the primary host is offline");
    host.send("online");
    host.wait("births once the host is online", |m| count(m, "NBIRTH") >= 2);
    let last_ts = t0 + 1000 * n;
    host.wait("every value", |m| timestamps(m, "s1/accel_rms").0.contains(&last_ts));
    d.signal("TERM");
    d.wait_success(DEADLINE);

    let messages = host.node();
    check_protocol(&messages);
    check_history(&messages);
    let births: Vec<i64> = (messages.iter().filter(|m| m["type"] == "NBIRTH"))
        .map(|m| m["bd_seq"].as_i64().unwrap())
        .collect();
    assert!(births[1] > births[0], "a new session, a new bdSeq: {births:?}");
    let second = messages.iter().rposition(|m| m["type"] == "NBIRTH").unwrap();
    let deaths = count(&messages[..second], "NDEATH");
    assert_eq!(deaths, 1, "one NDEATH, the node's own: DISCONNECT keeps the will back");
    let after = &messages[at_death..];
    let (_, held) = timestamps(after, "s1/accel_rms");
    assert!(held >= 20, "only {held} values held while the host was offline");
    let expected: BTreeSet<i64> = (1..=n).map(|s| t0 + 1000 * s).collect();
    let first_after = timestamps(after, "s1/accel_rms").0.first().copied().unwrap();
    let (all, _) = timestamps(&messages, "s1/accel_rms");
    let missing: Vec<_> = expected.range(first_after..).filter(|ts| !all.contains(ts)).collect();
    assert!(missing.is_empty(), "values missing after the host's return: {missing:?}");
}
