//! Modbus TCP against a real peer: pymodbus serving recorded vibration (tests/support/).
//! Normal polling, device exceptions, a server that never answers, a killed server that comes
//! back, and `probe`.

mod support;

use linegate::source::modbus::{probe_async, ModbusOutput};
use support::modbus::*;
use support::{free_port, wait_until};

fn tcp_keys(port: u16, extra: &str) -> String {
    format!(
        "kind = \"modbus-tcp\"\nhost = \"127.0.0.1\"\nport = {port}\nmachine = \"m1\"\n\
         poll_rate = 100\ntimeout = \"300ms\"\nblock_length = \"100ms\"\n\
         reconnect_min = \"20ms\"\nreconnect_max = \"200ms\"\n{}",
        map_keys(extra)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_decode_what_the_server_serves() {
    let port = free_port();
    let _server = server(&["--tcp", &port.to_string()]);
    let source = source(&tcp_keys(port, ""));
    wait_answer(&source).await;
    let mut p = poll(source);
    let mut got = Vec::new();
    p.collect_until(&mut got, |g, _| records(g, "index").len() >= 4).await;
    assert!(check_values(&got) >= 4 * 4 * 2, "checked too few polls");
    let full = records(&got, "f32-little").into_iter().filter(|r| r.data.len() == 10).count();
    assert!(full >= 1, "blocks of 100 ms hold 10 polls");
    let r = records(&got, "f32-little")[0];
    assert_eq!((r.rate_hz, r.axis.as_deref(), r.unit.as_str()), (100.0, Some("z"), "g"));
    let s = p.stats.snapshot();
    assert!(s.answers >= 4 && s.timeouts == 0 && s.frame_errors == 0, "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_exception_is_a_bad_reading_not_a_failure() {
    let port = free_port();
    let _server = server(&["--tcp", &port.to_string()]);
    // Registers 200..202 do not exist on the server: exception 2 at every poll.
    let extra = "[[source.block]]\naddress = 200\n[[source.block.channel]]\n\
                 sensor = \"missing\"\ntype = \"f32\"\nunit = \"g\"\n";
    let source = source(&tcp_keys(port, extra));
    wait_answer(&source).await;
    let mut p = poll(source);
    let mut got = Vec::new();
    p.collect_until(&mut got, |g, _| {
        g.iter().filter(|o| matches!(o, ModbusOutput::Bad(_))).count() >= 2
            && records(g, "index").len() >= 2
    })
    .await;
    let bad: Vec<_> = got
        .iter()
        .filter_map(|o| match o {
            ModbusOutput::Bad(b) => Some(b),
            ModbusOutput::Samples(_) => None,
        })
        .collect();
    assert!(bad.iter().all(|b| b.sensor == "missing" && b.exception == 2 && b.polls >= 1));
    assert!(records(&got, "missing").is_empty());
    // The good block on the same connection goes on undisturbed.
    check_values(&got);
    let s = p.stats.snapshot();
    assert!(s.exceptions >= 2 && s.reconnects == 0 && s.transport_errors == 0, "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_times_out_and_is_reconnected() {
    let port = free_port();
    let _server = server(&["--tcp", &port.to_string(), "--silent"]);
    let keys = tcp_keys(port, "").replace("timeout = \"300ms\"", "timeout = \"50ms\"");
    let source = source(&keys);
    wait_until("the silent server", || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
        .await;
    let mut p = poll(source);
    let mut got = Vec::new();
    p.collect_until(&mut got, |_, s| {
        let s = s.snapshot();
        s.timeouts >= 3 && s.reconnects >= 2
    })
    .await;
    assert!(got.is_empty(), "no samples without answers: {got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_that_comes_back_is_polled_again() {
    let port = free_port();
    let mut server1 = server(&["--tcp", &port.to_string()]);
    let source = source(&tcp_keys(port, ""));
    wait_answer(&source).await;
    let mut p = poll(source);
    let mut got = Vec::new();
    p.collect_until(&mut got, |g, _| records(g, "index").len() >= 2).await;
    server1.kill();
    p.collect_until(&mut got, |_, s| {
        let s = s.snapshot();
        s.transport_errors + s.timeouts + s.frame_errors >= 1 && s.connect_failures >= 1
    })
    .await;
    let before = records(&got, "index").len();
    let _server2 = server(&["--tcp", &port.to_string()]);
    p.collect_until(&mut got, |g, s| {
        records(g, "index").len() >= before + 2 && s.snapshot().reconnects >= 1
    })
    .await;
    // The new server starts its recording from the beginning; values still match what it serves.
    check_values(&got);
    let index = records(&got, "index");
    assert!(index.windows(2).all(|w| w[1].t0_ms > w[0].t0_ms), "records keep moving forward");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_prints_readings_and_rms_and_explains_exceptions() {
    let port = free_port();
    let _server = server(&["--tcp", &port.to_string()]);
    let extra = "[[source.block]]\naddress = 200\n[[source.block.channel]]\n\
                 sensor = \"missing\"\ntype = \"i16\"\nunit = \"g\"\n";
    let source = source(&tcp_keys(port, extra));
    wait_answer(&source).await;
    let report = probe_async(&source, 5).await;
    let text = report.to_string();
    assert!(report.ok, "{text}");
    assert!(text.contains(&format!("modbus-tcp 127.0.0.1:{port} unit 1 (machine m1)")), "{text}");
    assert!(text.contains("read 5: i16 = "), "{text}");
    assert!(text.contains("f32-big: 5 readings, mean "), "{text}");
    assert!(text.contains("RMS about the mean"), "{text}");
    assert!(text.contains("Device exception 2 (illegal data address)"), "{text}");
    assert!(text.contains("holding address 100"), "{text}");
    assert!(text.contains("missing: no readings"), "{text}");
}

#[tokio::test]
async fn probe_explains_a_refused_connection() {
    let port = free_port();
    let report = probe_async(&source(&tcp_keys(port, "")), 3).await;
    let text = report.to_string();
    assert!(!report.ok);
    assert!(text.contains("refused the connection"), "{text}");
    assert!(text.contains("port (Modbus TCP is usually 502)"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_explains_a_device_that_does_not_answer() {
    let port = free_port();
    let _server = server(&["--tcp", &port.to_string(), "--silent"]);
    wait_until("the silent server", || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
        .await;
    let keys = tcp_keys(port, "").replace("timeout = \"300ms\"", "timeout = \"50ms\"");
    let report = probe_async(&source(&keys), 3).await;
    let text = report.to_string();
    assert!(!report.ok);
    assert!(text.contains("read 1: FAILED: no answer within 50 ms"), "{text}");
    assert!(text.contains("Check the unit id"), "{text}");
}
