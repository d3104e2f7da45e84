//! `linegate run` (the real binary) with live Modbus sources against pymodbus serving recorded
//! vibration (tests/support/): events derived and stored, a killed server's outage declared as a
//! gap, SIGTERM and SIGINT stops, and sequence numbers that go on after a restart. Checked with
//! `linegate dump ledger`, `inspect --json` and `reconcile` on the store afterwards.
//!
//! The daemon's store is locked while it runs, so the tests follow it through its log and its
//! `/metrics`: each phase lasts until the accepted events it needs are checkpointed.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::daemon::Daemon;
use support::modbus::*;
use support::promtool::{sample, scrape};
use support::{cli, free_port, ledger, reconciled, wait_until};

/// The five channels of the served register map.
const SENSORS: [&str; 5] = ["i16", "f32-big", "f32-little", "i32-little", "index"];
/// Each phase of a run lasts until this many more events of every sensor are accepted (one a
/// second of polls; the five sensors are polled together, so their counts move in step).
const EVENTS_PER_PHASE: usize = 2;

/// Waits until `n` lines of the daemon's log contain `needle`; fails if it exits first.
async fn wait_log(d: &mut Daemon, needle: &str, n: usize) {
    wait_until(&format!("{n} × {needle:?} in the log"), || {
        d.assert_running();
        d.log_count(needle) >= n
    })
    .await;
}

/// Waits until the daemon's `/metrics` on `port` count at least `n` accepted events (they count
/// once their checkpoint is written; totals since the store was created); that count.
async fn accepted_at_least(d: &mut Daemon, port: u16, n: usize) -> usize {
    let mut got = 0;
    wait_until(&format!("{n} accepted events"), || {
        d.assert_running();
        let count = scrape(port).and_then(|body| sample(&body, "linegate_accepted_total"));
        got = count.map_or(0, |v| v as usize);
        count.is_some() && got >= n
    })
    .await;
    got
}

/// Waits until [`EVENTS_PER_PHASE`] more events of every sensor than now are accepted.
async fn record_phase(d: &mut Daemon, port: u16) {
    let now = accepted_at_least(d, port, 0).await;
    accepted_at_least(d, port, now + EVENTS_PER_PHASE * SENSORS.len()).await;
}

/// Sends `signal` (TERM or INT) and waits for a clean exit that the log explains.
async fn stop(mut d: Daemon, signal: &str) {
    d.signal(signal);
    wait_until(&format!("linegate to exit after SIG{signal}"), || d.exited().is_some()).await;
    let (status, log) = (d.exited().unwrap(), d.log());
    assert!(status.success(), "linegate after SIG{signal}: {status}\n{log}");
    assert!(log.contains(&format!("SIG{signal}")), "{log}");
}

/// The configuration: the store in `dir/db`, `/metrics` on `metrics_port`, one source.
fn write_config(dir: &Path, source_keys: &str, metrics_port: u16) -> PathBuf {
    let path = dir.join("linegate.toml");
    let text = format!(
        "[gateway]\nid = \"gw-live\"\n\n[store]\npath = \"{}\"\ncommit_interval = \"50ms\"\n\n\
         [metrics]\nlisten = \"127.0.0.1:{metrics_port}\"\n\n[[source]]\n{source_keys}",
        dir.join("db").display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Per sensor, the seqs of its accepted events in ledger order; every event id is
/// `gw-live.{sensor}.{seq}`.
fn accepted(ledger: &[Value]) -> BTreeMap<String, Vec<u64>> {
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in ledger.iter().filter(|e| e["kind"] == "accepted") {
        let (sensor, seq) = (e["sensor"].as_str().unwrap(), e["seq"].as_u64().unwrap());
        assert_eq!(e["event_id"], format!("gw-live.{sensor}.{seq}"));
        assert_eq!(e["machine"], "m1");
        out.entry(sensor.to_owned()).or_default().push(seq);
    }
    out
}

/// The declared gaps `(sensor, reason, from_ms, to_ms)`.
fn gaps(ledger: &[Value]) -> Vec<(String, String, i64, i64)> {
    ledger
        .iter()
        .filter(|e| e["kind"] == "gap_declared")
        .map(|e| {
            let g = &e["gap"];
            (
                g["sensor"].as_str().unwrap().to_owned(),
                g["reason"].as_str().unwrap().to_owned(),
                g["range"]["from_ms"].as_i64().unwrap(),
                g["range"]["to_ms"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Every sensor's seqs are 1, 2, 3, ...: none skipped, none taken twice, across restarts.
fn check_seqs(accepted: &BTreeMap<String, Vec<u64>>, min_events: usize) {
    for sensor in SENSORS {
        let seqs = accepted.get(sensor).map(Vec::as_slice).unwrap_or_default();
        assert!(seqs.len() >= min_events, "{sensor}: {seqs:?}");
        let want: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(seqs, want, "{sensor}");
    }
}

/// The outage, the reconcile report and the queues after a run with a killed server.
fn check_outage_and_audit(config: &Path, ledger: &[Value]) {
    let gaps = gaps(ledger);
    for sensor in ["i16", "index"] {
        let g: Vec<_> = gaps.iter().filter(|g| g.0 == sensor && g.1 == "no_answer").collect();
        assert!(!g.is_empty(), "{sensor}: the outage is declared: {gaps:?}");
        // The server was away for a second at least; the poller notices within a timeout.
        assert!(g.iter().any(|g| g.3 - g.2 >= 500), "{g:?}");
    }
    let report = reconciled(&["reconcile"], config);
    assert!(!report.to_lowercase().contains("undeclared"), "{report}");
    let inspect: Value = serde_json::from_str(&cli(&["inspect", "--json"], config)).unwrap();
    let outbox = &inspect["outbox"];
    for kind in ["event", "samples", "gap"] {
        assert!(outbox[kind][0].as_u64().unwrap_or(0) >= 1, "{kind} in the outbox: {inspect}");
    }
    assert_eq!(
        inspect["checkpoint"].as_u64().unwrap() + 1,
        inspect["journal_next"].as_u64().unwrap()
    );
}

/// Starts linegate (`/metrics` on `port`), records a phase, kills the server, lets the outage
/// last a second after linegate noticed it, and starts a new server with `args`: the running
/// daemon and the new server.
async fn outage(config: &Path, port: u16, mut server1: Child, args: &[&str]) -> (Daemon, Child) {
    let mut daemon = Daemon::start(config, &[], &[]);
    wait_log(&mut daemon, "modbus connected", 1).await;
    record_phase(&mut daemon, port).await;
    server1.kill();
    wait_log(&mut daemon, "reconnecting", 1).await;
    // The outage's length, not a synchronisation: `check_outage_and_audit` then asserts a
    // declared gap of at least half of it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    (daemon, server(args))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modbus_tcp_run_stores_events_declares_an_outage_and_resumes_numbering() {
    let dir = tempfile::tempdir().unwrap();
    let (port, metrics) = (free_port(), free_port());
    let server1 = server(&["--tcp", &port.to_string()]);
    let config = write_config(dir.path(), &tcp_keys(port), metrics);
    wait_answer(&source(&tcp_keys(port))).await;

    let port_arg = port.to_string();
    let (mut daemon, _server2) = outage(&config, metrics, server1, &["--tcp", &port_arg]).await;
    wait_log(&mut daemon, "modbus connected", 2).await;
    record_phase(&mut daemon, metrics).await;
    stop(daemon, "TERM").await;

    let first = ledger(&config);
    let before = accepted(&first);
    check_seqs(&before, 3);
    check_outage_and_audit(&config, &first);

    // A second run on the same store goes on numbering after the first (and so do its counts).
    let mut daemon = Daemon::start(&config, &[], &[]);
    wait_log(&mut daemon, "modbus connected", 1).await;
    let first_total: usize = before.values().map(Vec::len).sum();
    accepted_at_least(&mut daemon, metrics, first_total + EVENTS_PER_PHASE * SENSORS.len()).await;
    stop(daemon, "INT").await;
    let second = ledger(&config);
    assert!(second.iter().any(|e| e["kind"] == "restart"));
    let after = accepted(&second);
    check_seqs(&after, 3);
    for (sensor, seqs) in &before {
        assert!(after[sensor].len() > seqs.len(), "{sensor}: more events after the restart");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modbus_rtu_run_over_a_pty_declares_the_outage_of_a_killed_server() {
    let dir = tempfile::tempdir().unwrap();
    let (_socat, server_end, client_end) = socat(dir.path());
    wait_until("socat's pty links", || server_end.exists() && client_end.exists()).await;
    let rtu = |path: &Path| {
        format!(
            "kind = \"modbus-rtu\"\npath = \"{}\"\nbaud = 115200\nparity = \"none\"\n\
             machine = \"m1\"\npoll_rate = 100\ntimeout = \"150ms\"\nblock_length = \"100ms\"\n\
             reconnect_min = \"20ms\"\nreconnect_max = \"200ms\"\n{}",
            path.display(),
            map_keys("")
        )
    };
    let args = ["--rtu", server_end.to_str().unwrap(), "--baud", "115200"];
    let server1 = server(&args);
    wait_answer(&source(&rtu(&client_end))).await;
    let metrics = free_port();
    let config = write_config(dir.path(), &rtu(&client_end), metrics);

    let (mut daemon, _server2) = outage(&config, metrics, server1, &args).await;
    // The serial device is reopened after every failure (so "modbus connected" says nothing
    // here); the first answer ends the outage, and events follow.
    record_phase(&mut daemon, metrics).await;
    stop(daemon, "TERM").await;

    let ledger = ledger(&config);
    check_seqs(&accepted(&ledger), 3);
    check_outage_and_audit(&config, &ledger);
}

/// The gateway's own downtime is a gap too (issue 20): a daemon polling a Modbus TCP device is
/// SIGKILLed and restarted two seconds later; each sensor's first block after the restart
/// declares the time nobody polled, from the end of its last journaled block, as
/// `gateway_down`, and reconcile lists it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_and_restarted_gateway_declares_its_downtime_as_gateway_down() {
    let dir = tempfile::tempdir().unwrap();
    let (port, metrics) = (free_port(), free_port());
    let _server = server(&["--tcp", &port.to_string()]);
    let config = write_config(dir.path(), &tcp_keys(port), metrics);
    wait_answer(&source(&tcp_keys(port))).await;
    let mut daemon = Daemon::start(&config, &[], &[]);
    wait_log(&mut daemon, "modbus connected", 1).await;
    record_phase(&mut daemon, metrics).await;
    daemon.kill();
    daemon.wait(support::DEADLINE);
    // The downtime's length, not a synchronisation: the gaps must cover it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut daemon = Daemon::start(&config, &[], &[]);
    wait_log(&mut daemon, "modbus connected", 1).await;
    record_phase(&mut daemon, metrics).await;
    stop(daemon, "TERM").await;

    let ledger = ledger(&config);
    let down: Vec<_> = gaps(&ledger).into_iter().filter(|g| g.1 == "gateway_down").collect();
    for sensor in SENSORS {
        let g: Vec<_> = down.iter().filter(|g| g.0 == sensor).collect();
        assert_eq!(g.len(), 1, "{sensor}: one gateway_down gap: {down:?}");
        assert!(g[0].3 - g[0].2 >= 2_000, "{sensor}: the gap covers the downtime: {g:?}");
    }
    let report = reconciled(&["reconcile"], &config);
    assert!(report.contains("missing (declared: gateway_down)"), "{report}");
    let status: Value =
        serde_json::from_str(&cli(&["status", "--once", "--json"], &config)).unwrap();
    let sensors = status["sensors"].as_array().unwrap();
    assert!(sensors.iter().all(|s| s["gaps"]["gateway_down"] == 1), "{status}");
}
