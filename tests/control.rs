//! The control socket with the real binary (issue 20, docs/contracts.md section 11): while a
//! paced trace streams through `linegate run`, every audit command answers through the socket,
//! a sensor that stops becomes idle then silent, quarantined records are released and dropped
//! through the decide stage, and every answer agrees with the store read directly once the
//! daemon has stopped. Hostile clients (500 connections, one that stalls, 10 MB of garbage) do
//! not stop decisions; a user outside the socket's group is refused with a clear error.

mod support;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::daemon::Daemon;
use support::{linegate, poll, run, wait_for, DEADLINE};

const T0: i64 = 1_700_000_000_000;

/// One event line: machine m1, `sensor`, `seq`, event time `t` s after T0, arriving 200 ms later.
fn event(sensor: &str, seq: u64, t: i64, value: f64) -> String {
    format!(
        r#"{{"at":{at},"kind":"event","event":{{"event_id":"m1.{sensor}.{seq}","machine":"m1","sensor":"{sensor}","seq":{seq},"ts_ms":{ts},"clock":{{"state":"synced","err_ms":2}},"metric":"accel_rms","unit":"g","schema":1,"quality":"good","value":{value}}}}}"#,
        at = T0 + t * 1000 + 200,
        ts = T0 + t * 1000,
    )
}

/// `seconds` of trace: s1 every second (high, 0.8, from second 5 on: one incident that stays
/// open), s2 every second until second 40 (then nothing: idle, then silent), and at second 10
/// two records quarantined as `clock_future` (event time a minute after their arrival): the
/// test releases one (with an ingest time that makes it acceptable) and drops the other.
fn write_trace(path: &Path, seconds: i64) {
    let mut lines = Vec::new();
    for t in 0..seconds {
        let v = if t >= 5 { 0.8 } else { 0.1 };
        lines.push(event("s1", t as u64 + 1, t, v));
        if t < 40 {
            lines.push(event("s2", t as u64 + 1, t, 0.1));
        }
        if t == 10 {
            for (sensor, seq) in [("s3", 1), ("s4", 1)] {
                let mut l: Value = serde_json::from_str(&event(sensor, seq, t + 60, 0.1)).unwrap();
                l["at"] = Value::from(T0 + t * 1000);
                lines.push(l.to_string());
            }
        }
    }
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

struct Gateway {
    dir: tempfile::TempDir,
    config: PathBuf,
    port: u16,
}

/// A gateway configuration in a directory everyone may enter (so that the permission test hears
/// about the socket, not the directory), its socket at `control.sock` there.
fn gateway(seconds: i64, speed: f64) -> Gateway {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let trace = dir.path().join("trace.jsonl");
    write_trace(&trace, seconds);
    let port = support::free_port();
    let text = format!(
        r#"[gateway]
id = "gw-control"
[rule]
threshold = 0.5
window = "2m"
count = 3
[time]
watermark_bound = "2s"
allowed_lateness = "60s"
idle_timeout = "10s"
max_future = "5s"
[control]
socket = "{socket}"
{sections}"#,
        socket = dir.path().join("control.sock").display(),
        sections =
            support::trace_daemon_sections(&dir.path().join("store"), "", port, &trace, speed),
    );
    let config = dir.path().join("gateway.toml");
    std::fs::write(&config, text).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    Gateway { dir, config, port }
}

/// `linegate ARGS --config C` (any exit status).
fn ask(args: &[&str], config: &Path) -> support::Ran {
    run(linegate(args).arg("--config").arg(config))
}

/// `linegate ARGS --config C --json`, which must exit 0 (or `code`): its JSON.
#[track_caller]
fn json(args: &[&str], config: &Path) -> Value {
    let out = ask(&[args, &["--json"]].concat(), config).success();
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}\n{out}"))
}

fn sensor<'a>(status: &'a Value, name: &str) -> &'a Value {
    static NONE: Value = Value::Null;
    let sensors = status["sensors"].as_array();
    sensors.and_then(|all| all.iter().find(|s| s["sensor"] == name)).unwrap_or(&NONE)
}

/// Waits until the daemon's status says `what`.
#[track_caller]
fn status_until(config: &Path, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    poll(DEADLINE, || {
        let st = ask(&["status", "--once", "--json"], config);
        let st: Value = serde_json::from_str(&st.stdout).ok()?;
        ready(&st).then_some(st)
    })
    .unwrap_or_else(|| panic!("status never said {what}"))
}

/// What a read gives through the daemon and directly must agree on: the inspection without
/// sled's size on disk (sled writes at close).
fn comparable_inspection(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("size_on_disk");
    v
}

#[test]
fn a_running_gateway_answers_every_command_through_its_socket_and_agrees_with_its_store() {
    let g = gateway(200, 8.0);
    let c = &g.config;
    let mut d = Daemon::start(c, &["--no-forward"], &[]);
    let socket = g.dir.path().join("control.sock");
    wait_for("the control socket", || socket.exists());
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660, "the socket is for its owner and group only");

    // s2 stops at second 40: idle 10 s later, silent 60 s later (ingest time).
    let st = status_until(c, "s2 idle", |st| sensor(st, "s2")["state"] == "idle");
    assert_eq!(sensor(&st, "s2")["last_seq"], 40);
    assert_eq!(sensor(&st, "s1")["state"], "live");
    assert!(st["daemon"]["pid"].as_u64().is_some(), "{st}");
    let st = status_until(c, "s2 silent", |st| sensor(st, "s2")["state"] == "silent");
    d.assert_running();

    // An alert still open, explained while the trace streams.
    let open = &st["machines"][0]["open_incidents"][0];
    let alert_id = open["alert_id"].as_str().unwrap_or_else(|| panic!("no open incident: {st}"));
    let x = json(&["explain", alert_id], c);
    assert_eq!(x["alert_id"], alert_id);
    assert!(x["revisions"][0]["end_ms"].is_null(), "still open: {x}");
    let text = ask(&["explain", alert_id], c).success();
    assert!(text.contains("T") && text.contains("Z"), "RFC 3339 times: {text}");
    assert!(!text.contains("Some(") && !text.contains(" { "), "no debug notation: {text}");

    // reconcile: nothing lost, but s2's tail is missing: its own exit status.
    let r = ask(&["reconcile", "--json"], c);
    assert_eq!(r.status.code(), Some(3), "{}\n{}", r.stdout, r.stderr);
    let rj: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(rj["gateway_lost_nothing"], true);
    assert_eq!(rj["source_complete"], false);
    let tail = rj["silent_tails"].as_array().unwrap();
    assert!(
        tail.iter().any(|t| t["sensor"] == "s2" && t["last_seq"] == 40 && t["status"] == "missing"),
        "{rj}"
    );
    let r = ask(&["reconcile"], c);
    assert!(r.stdout.contains("tail m1/s2 after seq 40"), "{}", r.stdout);
    assert!(r.stdout.contains("the gateway lost nothing it accepted"), "{}", r.stdout);

    // Quarantine: list, show, release (decided by the running daemon), drop.
    let list = ask(&["quarantine", "list"], c).success();
    assert!(list.starts_with("2 quarantined record(s)"), "{list}");
    let ids: Vec<&str> = list.lines().skip(1).map(|l| l.split('\t').next().unwrap()).collect();
    let show = ask(&["quarantine", "show", ids[0]], c).success();
    assert!(show.contains("clock_future") && show.contains("m1.s3.1"), "{show}");
    let at = (T0 + 70_000).to_string();
    let released = ask(&["quarantine", "release", ids[0], "--at", &at], c).success();
    assert!(released.contains("the daemon decides it now"), "{released}");
    ask(&["quarantine", "drop", ids[1]], c).success();
    let st = status_until(c, "s3 decided", |st| {
        st["sensors"].as_array().unwrap().iter().any(|s| s["sensor"] == "s3" && s["events"] == 1)
    });
    assert_eq!(st["quarantined"], 0);
    let ledger = ask(&["dump", "ledger"], c).success();
    let kinds: Vec<Value> = ledger.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let by = |kind: &str| {
        kinds.iter().find(|r| r["entry"]["kind"] == kind).unwrap_or_else(|| panic!("no {kind}"))
    };
    let me = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    for kind in ["released", "dropped"] {
        let rec = by(kind);
        assert_eq!(rec["entry"]["by"]["via_socket"], true, "{rec}");
        assert_eq!(
            rec["entry"]["by"]["uid"].as_u64(),
            me.as_ref().ok().map(|&u| u64::from(u)),
            "{rec}"
        );
    }
    assert!(kinds
        .iter()
        .any(|r| r["entry"]["kind"] == "accepted" && r["entry"]["event_id"] == "m1.s3.1"));

    // The trace ends; once everything is decided, every answer through the socket equals the
    // store's own after the daemon stops.
    status_until(c, "the trace decided", |st| sensor(st, "s1")["last_seq"] == 200);
    let through = wait_settled(c);
    let socket_answers = answers(c, alert_id);
    d.signal("TERM");
    d.wait_success(DEADLINE);
    assert!(!socket.exists(), "the socket is removed at a clean stop");
    let direct = answers(c, alert_id);
    assert_eq!(socket_answers.len(), direct.len());
    for ((what, a), (_, b)) in socket_answers.iter().zip(&direct) {
        assert_eq!(
            a, b,
            "{what}: through the socket and directly differ (journal through {through})"
        );
    }
    let st = json(&["status", "--once"], c);
    assert!(st["daemon"].is_null(), "{st}");
    assert_eq!(sensor(&st, "s2")["state"], "silent");
}

/// Waits until the daemon's checkpoint covers its whole journal: the journal position.
fn wait_settled(c: &Path) -> u64 {
    poll(DEADLINE, || {
        let i = json(&["inspect"], c);
        let next = i["journal_next"].as_u64()?;
        (i["checkpoint"].as_u64()? + 1 == next).then_some(next)
    })
    .expect("the daemon never caught up")
}

/// The answers compared both ways.
fn answers(c: &Path, alert_id: &str) -> Vec<(&'static str, String)> {
    vec![
        ("inspect", comparable_inspection(json(&["inspect"], c)).to_string()),
        ("reconcile", ask(&["reconcile", "--json"], c).stdout),
        ("explain", json(&["explain", alert_id], c).to_string()),
        ("quarantine list", ask(&["quarantine", "list"], c).success()),
        ("dump alerts", ask(&["dump", "alerts"], c).success()),
        ("dump ledger", ask(&["dump", "ledger"], c).success()),
    ]
}

fn records_total(port: u16) -> Option<f64> {
    let text = support::promtool::scrape(port)?;
    text.lines().find_map(|l| l.strip_prefix("linegate_records_total ")?.trim().parse().ok())
}

#[test]
fn hostile_clients_do_not_stop_decisions_and_the_next_request_is_answered() {
    let g = gateway(600, 4.0);
    let c = &g.config;
    let mut d = Daemon::start(c, &["--no-forward"], &[]);
    let socket = g.dir.path().join("control.sock");
    wait_for("the control socket", || socket.exists());
    let before = poll(DEADLINE, || records_total(g.port).filter(|&n| n > 0.0)).expect("metrics");

    // 10 MB of garbage.
    let garbage = {
        let socket = socket.clone();
        std::thread::spawn(move || {
            let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
            let chunk = vec![0xA5u8; 1 << 20];
            let sent = (0..10).try_for_each(|_| s.write_all(&chunk));
            let mut answer = String::new();
            let _ = std::io::Read::read_to_string(&mut s, &mut answer);
            (sent.is_ok(), answer)
        })
    };
    let (_, answer) = garbage.join().unwrap();
    assert!(
        answer.is_empty() || answer.contains("longer than"),
        "garbage gets an error or is dropped: {answer}"
    );
    // A client that sends one byte and stalls, and 500 connections held open.
    let mut held = vec![std::os::unix::net::UnixStream::connect(&socket).unwrap()];
    held[0].write_all(b"{").unwrap();
    for _ in 0..500 {
        held.push(std::os::unix::net::UnixStream::connect(&socket).unwrap());
    }
    let mut busy = String::new();
    std::io::Read::read_to_string(&mut held[400], &mut busy).unwrap();
    assert!(busy.contains("busy"), "the 401st client hears the daemon is busy: {busy}");
    // Decisions go on meanwhile.
    let after = poll(DEADLINE, || records_total(g.port).filter(|&n| n > before + 20.0));
    assert!(after.is_some(), "records_total stayed at {before} with hostile clients");
    d.assert_running();
    drop(held);
    // The next well-formed request is answered.
    let i = poll(DEADLINE, || {
        let r = ask(&["inspect", "--json"], c);
        r.ok().then(|| serde_json::from_str::<Value>(&r.stdout).unwrap())
    })
    .expect("inspect after the hostile clients");
    assert!(i["journal_next"].as_u64().unwrap() > 1);
    let metrics = support::promtool::scrape(g.port).expect("metrics");
    assert!(metrics.contains("linegate_control_requests_total{outcome=\"busy\"}"), "{metrics}");
    d.signal("TERM");
    d.wait_success(DEADLINE);
}

#[test]
fn a_user_outside_the_group_is_refused_with_the_socket_and_group_named() {
    // SAFETY-free check of the effective user: /proc/self belongs to it.
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
    let g = gateway(600, 2.0);
    let c = &g.config;
    let mut d = Daemon::start(c, &["--no-forward"], &[]);
    let socket = g.dir.path().join("control.sock");
    wait_for("the control socket", || socket.exists());
    if uid != 0 {
        // Without root there is no other user to become; the socket's mode is what refuses.
        let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
        eprintln!("not root: the refusal of another user is checked by mode only");
    } else {
        let out = run(std::process::Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(support::BIN)
            .args(["inspect", "--config"])
            .arg(c));
        assert!(!out.ok(), "nobody was answered: {}", out.stdout);
        assert!(out.stderr.contains("permission denied on the control socket"), "{}", out.stderr);
        assert!(out.stderr.contains(&socket.display().to_string()), "{}", out.stderr);
        assert!(out.stderr.contains("group root"), "{}", out.stderr);
    }
    d.assert_running();
    d.signal("TERM");
    d.wait_success(DEADLINE);
}
