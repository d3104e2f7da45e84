//! `linegate capture` against a real mosquitto (issue 21, docs/contracts.md section 10): a
//! gateway forwards a paced trace while a capture subscribes to its `events/#` and `gaps/#`; the
//! broker is restarted in the middle (with persistence, so the capture's session and what was
//! queued for it survive); `replay` of the capture decides the same incidents as the gateway.

mod support;

use std::path::Path;
use std::process::{Child, Stdio};

use serde_json::Value;
use support::daemon::Daemon;
use support::mqtt::Broker;
use support::{cli, free_port, linegate, poll, replay, trace_daemon_sections, wait_for, DEADLINE};

const T0: i64 = 1_700_000_000_000;

/// 10 minutes: machines m1 and m2, two sensors each, one event per sensor and second (arriving
/// 300 ms late), bursts above 0.5 g at minutes 1 and 3 (m1, one incident) and 2 (m2), which
/// close long before the end; a tick every 10 s.
fn write_trace(path: &Path) -> usize {
    let mut lines = Vec::new();
    for s in 0..600i64 {
        let ts = T0 + s * 1000;
        for (machine, minutes) in [("m1", [1, 3]), ("m2", [2, 2])] {
            for sensor in ["a", "b"] {
                let burst = minutes.contains(&(s / 60)) && s % 60 < 10;
                let value = if burst { 0.8 } else { 0.1 };
                let seq = s + 1;
                lines.push(support::event_line(machine, sensor, seq, ts, value, ts + 300));
            }
        }
        if s % 10 == 9 {
            lines.push(format!(r#"{{"at":{},"kind":"tick"}}"#, ts + 500));
        }
    }
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
    600 * 4
}

fn incidents(alert_lines: &[String]) -> Vec<linegate::whatif::Incident> {
    let records: Vec<linegate::rule::alert::AlertRecord> =
        alert_lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    linegate::whatif::incidents(&records)
}

struct Capturing {
    child: Child,
    log: std::path::PathBuf,
}

impl Capturing {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The distinct events it reports having taken so far.
    fn events(&self) -> usize {
        let log = self.log();
        let last = log.lines().rev().find_map(|l| {
            let n = l.strip_prefix("capture: ")?.split_once(" events, ")?.0;
            n.parse().ok()
        });
        last.unwrap_or(0)
    }
}

impl Drop for Capturing {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_capture_across_a_broker_restart_replays_to_the_gateways_incidents() {
    let dir = tempfile::tempdir().unwrap();
    let persistence = format!("persistence true\npersistence_location {}/\n", dir.path().display());
    let mut broker = Broker::start(dir.path(), free_port(), &persistence);
    let trace = dir.path().join("trace.jsonl");
    let events = write_trace(&trace);
    let config = dir.path().join("gateway.toml");
    let rule = std::fs::read_to_string(support::fixture("fixtures/traces/golden.toml")).unwrap();
    let mqtt = format!("\n[mqtt]\nhost = \"127.0.0.1\"\nport = {}\nprefix = \"lg\"\n", broker.port);
    // 10 minutes of trace in about 6 s.
    let sections = trace_daemon_sections(&dir.path().join("db"), "", 0, &trace, 100.0);
    std::fs::write(&config, rule + &sections + &mqtt).unwrap();

    let out = dir.path().join("capture.jsonl");
    let log = dir.path().join("capture.log");
    let child = linegate(&["capture", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .arg("--gaps")
        .arg(dir.path().join("gaps.jsonl"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut capture = Capturing { child, log };
    wait_for("the capture to subscribe", || capture.log().contains("subscribed to"));

    let mut gateway = Daemon::start(&config, &["--exit-at-end", "--drain-timeout", "60s"], &[]);
    wait_for("the first events to reach the capture", || capture.events() > 0);
    broker.stop();
    broker.restart();
    let (status, _) = gateway.wait(DEADLINE);
    assert!(status.success(), "the gateway failed ({status}):\n{}", gateway.log());
    let inspect: Value = serde_json::from_str(&cli(&["inspect", "--json"], &config)).unwrap();
    assert_eq!(inspect["outbox"], serde_json::json!({}), "everything was delivered: {inspect}");
    let got = poll(DEADLINE, || (capture.events() >= events).then_some(()));
    assert!(
        got.is_some(),
        "the capture has {} of {events} events:\n{}",
        capture.events(),
        capture.log()
    );
    assert!(
        capture.log().matches("connected to").count() >= 2,
        "the capture reconnected:\n{}",
        capture.log()
    );
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &capture.child.id().to_string()])
        .status();
    let status = capture.child.wait().unwrap();
    assert!(status.success(), "capture failed ({status}):\n{}", capture.log());

    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().count(), events, "each event once");
    let ats: Vec<i64> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["at"].as_i64().unwrap())
        .collect();
    assert!(ats.windows(2).all(|w| w[0] <= w[1]), "in ingest order");
    let archive: Vec<String> =
        cli(&["dump", "alerts"], &config).lines().map(String::from).collect();
    let from_gateway = incidents(&archive);
    assert!(from_gateway.len() >= 2, "an incident on each machine: {archive:?}");
    let rdir = dir.path().join("replay");
    std::fs::create_dir_all(&rdir).unwrap();
    let replayed = incidents(&replay(&out, &config, &rdir).alert_lines());
    let key = |i: &linegate::whatif::Incident| (i.machine.clone(), i.onset_ms, i.end_ms);
    assert_eq!(
        replayed.iter().map(key).collect::<Vec<_>>(),
        from_gateway.iter().map(key).collect::<Vec<_>>(),
        "replay of the capture decides the gateway's incidents"
    );
}
