//! Modbus RTU against a real peer: pymodbus as an RTU server on one end of a socat pty pair,
//! linegate on the other. Normal polling, garbage on the line, a line nobody answers, an adapter
//! that is unplugged (its path disappears) and plugged back, and `probe`.

mod support;

use std::path::Path;

use linegate::source::modbus::probe_async;
use support::modbus::*;
use support::{linegate, run, wait_until};

fn rtu_keys(path: &Path, extra: &str) -> String {
    format!(
        "kind = \"modbus-rtu\"\npath = \"{}\"\nbaud = 115200\nparity = \"none\"\nmachine = \"m1\"\n\
         poll_rate = 100\ntimeout = \"150ms\"\nblock_length = \"100ms\"\n\
         reconnect_min = \"20ms\"\nreconnect_max = \"200ms\"\n{}",
        path.display(),
        map_keys(extra)
    )
}

/// A pty pair with the server on one end; returns (socat, server, client end).
async fn line(dir: &Path, server_args: &[&str]) -> (Child, Child, std::path::PathBuf) {
    let (socat, server_end, client_end) = socat(dir);
    wait_until("socat's pty links", || server_end.exists() && client_end.exists()).await;
    let mut args = vec!["--rtu", server_end.to_str().unwrap(), "--baud", "115200"];
    args.extend_from_slice(server_args);
    (socat, server(&args), client_end)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_over_a_serial_line_decode_what_the_server_serves() {
    let dir = tempfile::tempdir().unwrap();
    let (_socat, _server, client_end) = line(dir.path(), &[]).await;
    let source = source(&rtu_keys(&client_end, ""));
    wait_answer(&source).await;
    let mut p = poll(source);
    let mut got = Vec::new();
    p.collect_until(&mut got, |g, _| records(g, "index").len() >= 4).await;
    assert!(check_values(&got) >= 4 * 4 * 2);
    let s = p.stats.snapshot();
    assert!(s.frame_errors == 0 && s.transport_errors == 0, "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_line_is_counted_and_the_line_resynchronised() {
    let dir = tempfile::tempdir().unwrap();
    // Every 7th answer is replaced by random bytes, 3 longer than the answer.
    let (_socat, _server, client_end) = line(dir.path(), &["--garbage-every", "7"]).await;
    let source = source(&rtu_keys(&client_end, ""));
    wait_answer(&source).await;
    let mut p = poll(source);
    let mut got = Vec::new();
    p.collect_until(&mut got, |g, s| {
        let s = s.snapshot();
        s.frame_errors + s.timeouts >= 3 && s.reconnects >= 3 && records(g, "index").len() >= 8
    })
    .await;
    // No garbled answer was taken for values, and none was taken for another poll's answer.
    check_values(&got);
    assert!(p.stats.snapshot().frame_errors >= 1, "{:?}", p.stats.snapshot());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_nobody_answers_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let (_socat, _server_end, client_end) = socat(dir.path());
    wait_until("socat's pty links", || client_end.exists()).await;
    let keys = rtu_keys(&client_end, "").replace("timeout = \"150ms\"", "timeout = \"30ms\"");
    let mut p = poll(source(&keys));
    let mut got = Vec::new();
    p.collect_until(&mut got, |_, s| {
        let s = s.snapshot();
        s.timeouts >= 3 && s.reconnects >= 2
    })
    .await;
    assert!(got.is_empty(), "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unplugged_adapter_is_reopened_by_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let (mut socat1, mut server1, client_end) = line(dir.path(), &[]).await;
    let source = source(&rtu_keys(&client_end, ""));
    wait_answer(&source).await;
    let mut p = poll(source);
    let mut got = Vec::new();
    p.collect_until(&mut got, |g, _| records(g, "index").len() >= 2).await;
    // Unplug: the pty goes away and so does its path (udev removes a by-id link the same way).
    socat1.kill();
    server1.kill();
    for link in [&client_end, &dir.path().join("server-end")] {
        let _ = std::fs::remove_file(link);
    }
    p.collect_until(&mut got, |_, s| s.snapshot().connect_failures >= 2).await;
    let before = records(&got, "index").len();
    // Plug back in: the same path appears again.
    let (_socat2, _server2, _) = line(dir.path(), &[]).await;
    p.collect_until(&mut got, |g, s| {
        records(g, "index").len() >= before + 2 && s.snapshot().reconnects >= 1
    })
    .await;
    check_values(&got);
}

#[tokio::test]
async fn probe_explains_a_missing_adapter() {
    let report =
        probe_async(&source(&rtu_keys(Path::new("/dev/serial/by-id/no-such-adapter"), "")), 3)
            .await;
    let text = report.to_string();
    assert!(!report.ok);
    assert!(text.contains("/dev/serial/by-id/no-such-adapter does not exist"), "{text}");
    assert!(text.contains("ls -l /dev/serial/by-id/"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_explains_a_line_nobody_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (_socat, _server_end, client_end) = socat(dir.path());
    wait_until("socat's pty links", || client_end.exists()).await;
    let keys = rtu_keys(&client_end, "").replace("timeout = \"150ms\"", "timeout = \"30ms\"");
    let text = probe_async(&source(&keys), 2).await.to_string();
    assert!(text.contains("No answer from unit 1 within 30 ms"), "{text}");
    assert!(text.contains("A/B not swapped"), "{text}");
    assert!(text.contains("115200 baud, parity None, 8 data and 1 stop bit(s)"), "{text}");
}

/// `linegate probe` (the binary) exits non-zero and explains itself for an absent adapter.
#[test]
fn probe_command_fails_with_the_explanation() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rtu.toml");
    let text = format!(
        "[gateway]\nid = \"gw\"\n\n[[source]]\n{}",
        rtu_keys(&dir.path().join("ttyUSB-gone"), "")
    );
    std::fs::write(&config, text).unwrap();
    let out = run(linegate(&["probe", "--config"]).arg(&config));
    assert!(!out.ok(), "{out:?}");
    let stdout = &out.stdout;
    assert!(stdout.contains("source[0]: modbus-rtu"), "{stdout}");
    assert!(stdout.contains("ttyUSB-gone does not exist"), "{stdout}");
    assert!(out.stderr.contains("1 of 1 source(s) failed the probe"), "{}", out.stderr);
}
