//! The failure rehearsals' stage (tests/rehearsals.rs): a trace and a configuration in a
//! directory of their own, the real daemon run over it while a scraper records `/metrics`, and
//! the check that the outcome equals what `linegate replay` decides on the same input.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};

use super::daemon::Daemon;
use super::promtool::{sample, scrape};
use super::{cli, fixture, free_port, ledger, poll, replay, trace_daemon_sections, DEADLINE};

/// 2023-11-14T22:13:20Z: the traces' time origin.
pub const T0: i64 = 1_700_000_000_000;

/// A rehearsal's directory: its trace, its configuration and the store.
pub struct Stage {
    pub dir: tempfile::TempDir,
    pub trace: PathBuf,
    pub config: PathBuf,
    pub port: u16,
    /// Trace lines written.
    pub lines: usize,
}

impl Stage {
    /// Writes `lines` as the trace and a configuration reading it at `speed` (0: as fast as the
    /// pipeline takes it): the golden traces' rule, with `rule` added to its `[rule]` section.
    pub fn new(lines: &[String], speed: f64, rule: &str) -> Stage {
        Stage::with_sections(lines, speed, rule, "")
    }

    /// [`Stage::new`] forwarding to the MQTT broker on loopback `port` (prefix `lg`, so topics are
    /// under `lg/gw-test/`), with `mqtt` keys added to its `[mqtt]` section.
    pub fn with_broker(lines: &[String], speed: f64, port: u16, mqtt: &str) -> Stage {
        let section =
            format!("\n[mqtt]\nhost = \"127.0.0.1\"\nport = {port}\nprefix = \"lg\"\n{mqtt}\n");
        Stage::with_sections(lines, speed, "", &section)
    }

    fn with_sections(lines: &[String], speed: f64, rule: &str, sections: &str) -> Stage {
        // The golden traces' rule and time (fixtures/traces/golden.toml), then this stage's own.
        let golden = std::fs::read_to_string(fixture("fixtures/traces/golden.toml")).unwrap();
        let golden = golden.replace("count = 3\n", &format!("count = 3\n{rule}\n"));
        Stage::with_rules(lines, speed, &golden, sections)
    }

    /// [`Stage::new`] with the gateway, rules and time of `golden` (a golden trace's own
    /// configuration, `fixtures/traces/NAME.toml`) in place of golden.toml's.
    pub fn with_golden_config(lines: &[String], speed: f64, name: &str) -> Stage {
        let golden = std::fs::read_to_string(fixture(&format!("fixtures/traces/{name}"))).unwrap();
        Stage::with_rules(lines, speed, &golden, "")
    }

    fn with_rules(lines: &[String], speed: f64, golden: &str, sections: &str) -> Stage {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("input.jsonl");
        std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
        let port = free_port();
        let config = dir.path().join("gateway.toml");
        let golden = golden.to_owned();
        let store = dir.path().join("db");
        let extra = "commit_records = 50\ncommit_interval = \"20ms\"\n";
        let text = golden + &trace_daemon_sections(&store, extra, port, &trace, speed) + sections;
        std::fs::write(&config, text).unwrap();
        Stage { dir, trace, config, port, lines: lines.len() }
    }

    /// More of the input arrives: `lines` are appended to the trace.
    pub fn append(&mut self, lines: &[String]) {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new().append(true).open(&self.trace).unwrap();
        f.write_all((lines.join("\n") + "\n").as_bytes()).unwrap();
        self.lines += lines.len();
    }

    /// Runs the daemon (`--forward local-ack`) over the whole trace while a scraper records
    /// `/metrics`; stops it with SIGTERM once every line is decided. The scrapes, in order.
    pub fn run(&self) -> Vec<String> {
        let running = self.start(&["--forward", "local-ack"]);
        running.wait("every line decided", |b| self.all_decided(b));
        running.stop()
    }

    /// [`Stage::run`] inside a drill: `drill start NAME` through the daemon's control socket
    /// as soon as it listens, `drill end NAME` once every line is decided.
    pub fn run_drill(&self, name: &str) -> Vec<String> {
        let running = self.start(&["--forward", "local-ack"]);
        self.drill("start", name);
        running.wait("every line decided", |b| self.all_decided(b));
        self.drill("end", name);
        running.stop()
    }

    /// `linegate drill PHASE NAME`: through the daemon's control socket when one runs, on the
    /// stopped store otherwise. A daemon just started may hold the store's lock before its
    /// socket listens: the command is tried again until it is answered (a refused one writes
    /// nothing).
    pub fn drill(&self, phase: &str, name: &str) {
        let ask = || {
            super::run(super::linegate(&["drill", phase, name]).arg("--config").arg(&self.config))
        };
        if poll(DEADLINE, || ask().ok().then_some(())).is_none() {
            let r = ask();
            panic!("drill {phase} {name}: {}\n{}", r.stdout, r.stderr);
        }
    }

    /// `reconcile --json` shows drill `name` from its start to its end: what it says happened
    /// meanwhile.
    #[track_caller]
    pub fn drill_shown(&self, name: &str) -> Value {
        let r =
            super::run(super::linegate(&["reconcile", "--json"]).arg("--config").arg(&self.config));
        let report: Value = serde_json::from_str(&r.stdout).unwrap();
        let drills = report["drills"].as_array().cloned().unwrap_or_default();
        let d = drills.iter().find(|d| d["name"] == name);
        let d = d.unwrap_or_else(|| panic!("drill {name} not in reconcile: {report}"));
        assert!(d["start_ms"].is_i64() && d["end_ms"].is_i64(), "drill {name} not closed: {d}");
        d["during"].clone()
    }

    /// Starts the daemon with `args` and a scraper of its `/metrics`.
    pub fn start(&self, args: &[&str]) -> Running {
        let daemon = Daemon::start(&self.config, args, &[]);
        Running { scraper: Scraper::start(self.port), daemon, port: self.port }
    }

    /// Whether a scrape shows every line of the trace decided.
    pub fn all_decided(&self, body: &str) -> bool {
        sample(body, "linegate_records_total") == Some(self.lines as f64)
    }

    /// After the run: `reconcile` passes, and the accepted events and archived alert records are
    /// exactly those `linegate replay` decides on the trace. The replayed alert records and
    /// summary.
    pub fn check_against_replay(&self) -> (Vec<Value>, Value) {
        let report = super::reconciled(&["reconcile", "--record"], &self.config);
        assert!(report.contains("the gateway lost nothing it accepted"), "{report}");
        assert!(report.contains("verdict recorded in the ledger"), "{report}");
        let want = replay(&self.trace, &self.config, self.dir.path());
        let accepted: Vec<String> = ledger(&self.config)
            .iter()
            .filter(|e| e["kind"] == "accepted")
            .map(|e| e["event_id"].as_str().unwrap().to_owned())
            .collect();
        assert!(!accepted.is_empty(), "the run accepted no event: nothing to compare");
        let unique: BTreeSet<&String> = accepted.iter().collect();
        assert_eq!(unique.len(), accepted.len(), "an event was accepted twice");
        assert_eq!(accepted.len() as u64, want.accepted(), "accepted events differ from replay");
        let archived: BTreeSet<String> =
            cli(&["dump", "alerts"], &self.config).lines().map(String::from).collect();
        let lines = want.alert_lines();
        assert_eq!(archived, lines.iter().cloned().collect(), "alert records differ from replay");
        let summary = std::fs::read_to_string(&want.summary).unwrap();
        let alerts = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        (alerts, serde_json::from_str(&summary).unwrap())
    }
}

/// A daemon at work and the scraper of its `/metrics`.
pub struct Running {
    pub daemon: Daemon,
    scraper: Scraper,
    port: u16,
}

impl Running {
    /// Waits until a scrape satisfies `ok` (failing the test with the daemon's log after
    /// [`DEADLINE`]): that scrape.
    #[track_caller]
    pub fn wait(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        poll(DEADLINE, || scrape(self.port).filter(|b| ok(b))).unwrap_or_else(|| {
            panic!("metrics never showed {what}: {:?}\n{}", scrape(self.port), self.daemon.log())
        })
    }

    /// Waits for the daemon to end by itself (`--exit-at-end`), which must be exit 0: the
    /// scrapes taken meanwhile.
    pub fn finish(mut self) -> Vec<String> {
        self.daemon.wait_success(DEADLINE);
        self.scraper.stop()
    }

    /// Stops the scraper, scrapes once more, then stops the daemon (SIGTERM, which must end it
    /// with exit 0): the scrapes, the last one taken after every wait.
    pub fn stop(mut self) -> Vec<String> {
        let mut scrapes = self.scraper.stop();
        scrapes.extend(scrape(self.port));
        self.daemon.signal("TERM");
        self.daemon.wait_success(DEADLINE);
        scrapes
    }
}

/// Scrapes `/metrics` every 20 ms on a thread of its own until stopped.
struct Scraper {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<String>>,
}

impl Scraper {
    fn start(port: u16) -> Scraper {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut bodies = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                bodies.extend(scrape(port));
                std::thread::sleep(Duration::from_millis(20));
            }
            bodies
        });
        Scraper { stop, thread }
    }

    fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// The value of `name` in every scrape that has it.
pub fn series(scrapes: &[String], name: &str) -> Vec<f64> {
    scrapes.iter().filter_map(|b| sample(b, name)).collect()
}

/// A counter's last value, after checking that some scrape has it and that it never went down
/// from one scrape to the next.
#[track_caller]
pub fn counter(scrapes: &[String], name: &str) -> f64 {
    let values = series(scrapes, name);
    assert!(!values.is_empty(), "{name}: in none of {} scrapes", scrapes.len());
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "{name} went down: {values:?}");
    last(scrapes, name)
}

/// Fails the test unless `values` holds at least one value and `ok` holds for each: a check
/// over every value must not pass because there is none.
#[track_caller]
pub fn every<T: std::fmt::Debug>(what: &str, values: &[T], ok: impl Fn(&T) -> bool) {
    assert!(!values.is_empty(), "{what}: no values to check");
    assert!(values.iter().all(ok), "{what}: {values:?}");
}

/// Fails the test unless `values` holds at least two values (one shows no trend) and none is
/// below the one before it.
#[track_caller]
pub fn never_down(what: &str, values: &[f64]) {
    assert!(values.len() >= 2, "{what}: {} values, too few to see a trend", values.len());
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "{what}: {values:?}");
}

/// The value of `name` in the last scrape (0 when absent).
pub fn last(scrapes: &[String], name: &str) -> f64 {
    scrapes.last().and_then(|b| sample(b, name)).unwrap_or(0.0)
}

/// One `event` trace line: ingest time `at`, event time `ts` (ms after [`T0`]).
pub fn event(at: i64, ts: i64, machine: &str, sensor: &str, seq: u64, value: f64) -> Value {
    json!({"at": T0 + at, "kind": "event", "event": {
        "event_id": format!("{machine}.{sensor}.{seq}"), "machine": machine, "sensor": sensor,
        "seq": seq, "ts_ms": T0 + ts, "clock": {"state": "synced", "err_ms": 2},
        "metric": "accel_rms", "value": value, "unit": "g", "schema": 1, "quality": "good"}})
}

/// A steady sensor: one event a second from `from_s` to `to_s` (exclusive), arriving 200 ms
/// after its time, with `value(second)`.
pub fn steady(
    machine: &str,
    sensor: &str,
    from_s: i64,
    to_s: i64,
    value: impl Fn(i64) -> f64,
) -> Vec<(i64, Value)> {
    (from_s..to_s)
        .map(|s| {
            let ts = s * 1000;
            (ts + 200, event(ts + 200, ts, machine, sensor, (s + 1) as u64, value(s)))
        })
        .collect()
}

/// Lines in arrival order (stable for equal arrival times), as text.
pub fn in_arrival_order(mut lines: Vec<(i64, Value)>) -> Vec<String> {
    lines.sort_by_key(|(at, _)| *at);
    lines.into_iter().map(|(_, v)| v.to_string()).collect()
}
