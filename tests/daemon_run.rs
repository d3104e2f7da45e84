//! `linegate run` as a daemon (issue 6), the real binary on trace sources:
//! - `/metrics` is served while it works, passes `promtool check metrics`, and shows what the
//!   stages counted;
//! - SIGTERM stops it with exit 0 within the shutdown bound, even when closing the store hangs
//!   (a failpoint), and a restart resumes: `reconcile`
//!   is clean and the accepted events are exactly those `linegate replay` accepts;
//! - systemd's notify protocol: READY=1, WATCHDOG=1 (with `WATCHDOG_USEC`), STOPPING=1 on a
//!   datagram socket the test binds;
//! - a short `[store] history` prunes the ledger, and `reconcile` still proves the whole life;
//! - a small `[store] max_bytes` sheds old raw samples: `Shed` records in `linegate dump ledger`,
//!   and `reconcile` lists them as missing with the reason.

mod support;

use std::collections::BTreeSet;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::Duration;

use support::daemon::Daemon;
use support::promtool::{self, sample, scrape, scrape_until};
use support::{cli, fixture, free_port, ledger, poll, reconciled, replay, DEADLINE};

fn cwru_trace() -> PathBuf {
    fixture("fixtures/traces/cwru.jsonl")
}

struct Setup {
    trace: PathBuf,
    speed: f64,
    port: u16,
    max_bytes: &'static str,
    allowed_lateness: &'static str,
    history: &'static str,
}

impl Setup {
    fn new(trace: PathBuf) -> Setup {
        Setup {
            trace,
            speed: 0.0,
            port: free_port(),
            max_bytes: "4GiB",
            allowed_lateness: "10m",
            history: "24h",
        }
    }

    /// Writes the configuration (the CWRU fixture's rule) to `dir/NAME`.
    fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let text = format!(
            r#"[gateway]
id = "gw-daemon"

[rule]
name = "high-vibration"
metric = "accel_rms"
unit = "g"
threshold = 0.5
window = "2m"
count = 3

[rule.machines.motor-b]
threshold = 0.511

[time]
watermark_bound = "5s"
allowed_lateness = "{lateness}"
idle_timeout = "30s"
max_future = "5s"

"#,
            lateness = self.allowed_lateness,
        ) + &support::trace_daemon_sections(
            &dir.join("db"),
            &format!(
                "max_bytes = \"{}\"\nhistory = \"{}\"\ncommit_records = 20\ncommit_interval = \"20ms\"\n",
                self.max_bytes, self.history
            ),
            self.port,
            &self.trace,
            self.speed,
        );
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// Event ids the ledger accepted (each must appear once).
fn accepted_ids(ledger: &[serde_json::Value]) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for e in ledger.iter().filter(|e| e["kind"] == "accepted") {
        let id = e["event_id"].as_str().unwrap().to_owned();
        assert!(ids.insert(id.clone()), "event {id} accepted twice");
    }
    ids
}

#[test]
fn metrics_are_served_while_running_and_pass_promtool() {
    let dir = tempfile::tempdir().unwrap();
    let setup = Setup::new(cwru_trace());
    let config = setup.write(dir.path(), "run.toml");
    let mut d = Daemon::start(&config, &[], &[]);
    // All 119 lines decided (the daemon then waits for more), and the store sampled since.
    let body = scrape_until(&d, setup.port, "every line decided and the outbox sampled", |b| {
        sample(b, "linegate_records_total") == Some(119.0)
            && sample(b, "linegate_outbox_records{kind=\"samples\"}").unwrap_or(0.0) > 0.0
    });
    let (ok, said) = promtool::check(&body);
    assert!(ok && said.trim().is_empty(), "promtool check metrics: {said}\n--- body:\n{body}");

    assert_eq!(sample(&body, "linegate_samples_records_total"), Some(77.0));
    assert_eq!(sample(&body, "linegate_ticks_total"), Some(42.0));
    assert!(sample(&body, "linegate_accepted_total").unwrap() > 0.0);
    assert_eq!(sample(&body, "linegate_outbox_records{kind=\"samples\"}"), Some(77.0));
    assert!(sample(&body, "linegate_outbox_records{kind=\"event\"}").unwrap() > 0.0);
    assert!(sample(&body, "linegate_outbox_bytes{kind=\"event\"}").unwrap() > 0.0);
    // The trace's 77 raw-sample lines alone are about 3 MB in the segment file (`raw/`); sled's
    // own file is under 100 KB.
    let disk = sample(&body, "linegate_store_disk_bytes").unwrap();
    assert!(disk > 100_000.0, "store disk bytes {disk}\n--- body:\n{body}");
    for machine in ["motor-a", "motor-b"] {
        let wm = format!("linegate_watermark_timestamp_seconds{{machine=\"{machine}\"}}");
        assert!(sample(&body, &wm).unwrap() > 1.7e9, "{wm}");
        let lag = format!("linegate_lag_seconds{{machine=\"{machine}\"}}");
        assert!(sample(&body, &lag).is_some(), "{lag}");
    }
    assert!(sample(&body, "linegate_processing_latency_seconds_count").unwrap() > 0.0);
    assert!(sample(&body, "linegate_rule_state_entries{part=\"machines\"}").unwrap() >= 2.0);
    // Nothing forwards: the backlog is the whole outbox and does not drain.
    let backlog = sample(&body, "linegate_replay_backlog_records").unwrap();
    assert!(backlog >= 77.0 && sample(&body, "linegate_replay_eta_seconds").is_some());
    // A fixed bound is exported too: the configured 5 s, per sensor.
    let bound = "linegate_watermark_bound_seconds{machine=\"motor-a\",sensor=\"a-de\"}";
    assert_eq!(sample(&body, bound), Some(5.0), "{bound}");
    let clock_states: f64 = body
        .lines()
        .filter(|l| l.starts_with("linegate_clock_state{"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum();
    assert_eq!(clock_states, 1.0, "exactly one clock state");

    d.signal("TERM");
    let took = d.wait_success(DEADLINE);
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(scrape(setup.port).is_none(), "the endpoint outlived the daemon");
}

/// The `auto` watermark bound is exported per sensor and moves with the lateness measured: the
/// golden trace `auto_bound` (quantile 0.9, clamped to 1 s..60 s), whose first three events are
/// on time (the bound stays at its 1 s minimum) and whose rest has every third event 10 s late
/// (the quantile's bucket edge: 10.239 s). The rest is appended between two runs: the second
/// resumes with the lateness window restored from the checkpoint.
#[test]
fn the_auto_watermark_bound_is_exported_and_follows_measured_lateness() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read_to_string(fixture("fixtures/traces/auto_bound.jsonl")).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    let trace = dir.path().join("auto_bound.jsonl");
    std::fs::write(&trace, lines[..3].join("\n") + "\n").unwrap();
    let port = free_port();
    let extra = "commit_records = 20\ncommit_interval = \"20ms\"\n";
    let config = dir.path().join("run.toml");
    let text = std::fs::read_to_string(fixture("fixtures/traces/auto_bound.toml")).unwrap()
        + &support::trace_daemon_sections(&dir.path().join("db"), extra, port, &trace, 0.0);
    std::fs::write(&config, text).unwrap();
    let mut d = Daemon::start(&config, &["--no-forward"], &[]);
    let bound = "linegate_watermark_bound_seconds{machine=\"press-1\",sensor=\"s1\"}";

    let body = scrape_until(&d, port, "the first three events decided", |b| {
        sample(b, "linegate_records_total") == Some(3.0) && sample(b, bound).is_some()
    });
    assert_eq!(sample(&body, bound), Some(1.0), "on time: the minimum\n{body}");

    d.signal("TERM");
    d.wait_success(DEADLINE);

    let mut f = std::fs::OpenOptions::new().append(true).open(&trace).unwrap();
    std::io::Write::write_all(&mut f, (lines[3..].join("\n") + "\n").as_bytes()).unwrap();
    let mut d = Daemon::start(&config, &["--no-forward"], &[]);
    let body = scrape_until(&d, port, "every line decided", |b| {
        sample(b, "linegate_records_total") == Some(lines.len() as f64)
    });
    assert_eq!(sample(&body, bound), Some(10.239), "10 s late events\n{body}");
    let (ok, said) = promtool::check(&body);
    assert!(ok && said.trim().is_empty(), "promtool check metrics: {said}\n--- body:\n{body}");

    d.signal("TERM");
    d.wait_success(DEADLINE);
}

/// The CWRU trace paced at 40× real time (621 s of trace: about 15 s), with `env`; SIGTERM once
/// some records are decided, so it lands in the middle. Asserts exit 0 within the 10 s bound.
fn sigterm_mid_trace(dir: &Path, env: &[(&str, &str)]) -> (Setup, PathBuf, Daemon) {
    let mut setup = Setup::new(cwru_trace());
    setup.speed = 40.0;
    let config = setup.write(dir, "paced.toml");
    let mut d = Daemon::start(&config, &[], env);
    scrape_until(&d, setup.port, "some records decided", |b| {
        sample(b, "linegate_records_total").is_some_and(|n| n >= 10.0)
    });
    d.signal("TERM");
    let took = d.wait_success(DEADLINE);
    assert!(took < Duration::from_secs(10), "shutdown took {took:?}");
    (setup, config, d)
}

#[test]
fn sigterm_exits_zero_in_bounded_time_and_a_restart_resumes_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let (mut setup, paced, _) = sigterm_mid_trace(dir.path(), &[]);
    let before = accepted_ids(&ledger(&paced));
    assert!(!before.is_empty());

    // The rest at full speed, to the end.
    setup.speed = 0.0;
    let fast = setup.write(dir.path(), "fast.toml");
    let d = support::daemon::run_to_end(&fast, &[]);

    let ledger = ledger(&fast);
    let kinds: Vec<&str> = ledger.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(!kinds.contains(&"recovery"), "the store was moved aside:\n{}", d.log());
    let restart = ledger.iter().find(|e| e["kind"] == "restart").expect("a restart");
    assert!(restart["checkpoint_pos"].as_u64().unwrap() > 0, "{restart}");
    let after = accepted_ids(&ledger);
    assert!(after.is_superset(&before) && after.len() > before.len());
    assert_eq!(after.len() as u64, replay(&cwru_trace(), &fast, dir.path()).accepted());
    let report = reconciled(&["reconcile"], &fast);
    assert!(report.contains("the gateway lost nothing it accepted"), "{report}");
}

#[test]
fn a_store_close_that_hangs_does_not_hold_the_exit_up() {
    let dir = tempfile::tempdir().unwrap();
    // sled 0.34's flush when the store drops has been seen to hang for good: here it takes a
    // minute, far past the shutdown bound.
    let hang = [("FAILPOINTS", "app::close_store=sleep(60000)")];
    let (_, config, d) = sigterm_mid_trace(dir.path(), &hang);
    assert!(d.log().contains("the store did not close in time"), "{}", d.log());
    // Everything was durable before the close: the store reopens and reconciles.
    let report = reconciled(&["reconcile"], &config);
    assert!(report.contains("the gateway lost nothing it accepted"), "{report}");
}

#[test]
fn systemd_hears_ready_watchdog_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let setup = Setup::new(cwru_trace());
    let config = setup.write(dir.path(), "run.toml");
    let socket_env = socket_path.to_str().unwrap();
    // A 200 ms watchdog: pings every 100 ms.
    let env = [("NOTIFY_SOCKET", socket_env), ("WATCHDOG_USEC", "200000")];
    let mut d = Daemon::start(&config, &[], &env);

    let mut heard: Vec<String> = Vec::new();
    let mut buf = [0u8; 4096];
    let mut listen_until = |heard: &mut Vec<String>, what: &str| {
        let got = poll(DEADLINE, || {
            while let Ok(n) = socket.recv(&mut buf) {
                heard.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
            heard.iter().any(|m| m.lines().any(|l| l == what)).then_some(())
        });
        assert!(got.is_some(), "never heard {what}; heard {heard:?}\nlog:\n{}", d.log());
    };
    listen_until(&mut heard, "READY=1");
    listen_until(&mut heard, "WATCHDOG=1");
    let ready = heard.iter().position(|m| m.contains("READY=1")).unwrap();
    let ping = heard.iter().position(|m| m.contains("WATCHDOG=1")).unwrap();
    assert!(ready < ping || heard[ready].contains("WATCHDOG=1"), "{heard:?}");
    d.signal("TERM");
    listen_until(&mut heard, "STOPPING=1");
    d.wait_success(DEADLINE);
}

/// One machine, two sensors, `seconds` of 2000 Hz samples in 1-second lines, and a tick.
fn samples_trace(path: &Path, seconds: i64) {
    const T0: i64 = 1_700_000_000_000;
    let mut out = String::new();
    for s in 0..seconds {
        for sensor in ["x1", "x2"] {
            let data: Vec<String> =
                (0..2000).map(|i| format!("{:.3}", 0.1 * ((i + s) as f64 * 0.3).sin())).collect();
            let (t0, at) = (T0 + s * 1000, T0 + s * 1000 + 1100);
            out.push_str(&format!(
                r#"{{"at":{at},"kind":"samples","machine":"mill","sensor":"{sensor}","t0_ms":{t0},"rate_hz":2000,"unit":"g","data":[{}]}}"#,
                data.join(",")
            ));
            out.push('\n');
        }
    }
    let end = T0 + seconds * 1000 + 60_000;
    out.push_str(&format!("{{\"at\":{end},\"kind\":\"tick\"}}\n"));
    std::fs::write(path, out).unwrap();
}

#[test]
fn a_small_budget_sheds_old_samples_as_declared_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("samples.jsonl");
    samples_trace(&trace, 400);
    let mut setup = Setup::new(trace);
    setup.max_bytes = "2MiB";
    setup.allowed_lateness = "10s";
    let config = setup.write(dir.path(), "run.toml");
    let mut d = Daemon::start(&config, &["--exit-at-end"], &[]);
    d.wait_success(DEADLINE * 2);

    let ledger = ledger(&config);
    let shed: Vec<_> = ledger.iter().filter(|e| e["kind"] == "shed").collect();
    assert!(!shed.is_empty(), "nothing shed; log:\n{}", d.log());
    // The watermark never passes the last ingest time (the final tick at 460 s), and frames
    // within the rule window (2 min) plus the allowed lateness (10 s) of it are kept.
    let kept_from = 1_700_000_000_000 + 460_000 - 130_000;
    for e in &shed {
        let gap = &e["gap"];
        assert_eq!(gap["reason"], "shed");
        assert_eq!(gap["machine"], "mill");
        let to = gap["range"]["to_ms"].as_i64().unwrap_or_else(|| panic!("{gap}"));
        assert!(to <= kept_from, "a recent frame was shed: {gap}");
    }
    let report = reconciled(&["reconcile"], &config);
    let missing = report.lines().filter(|l| l.contains("missing (declared: shed)")).count();
    assert!(missing >= shed.len(), "{report}");
    assert!(report.contains("gap mill/x1 samples ["), "{report}");
}

#[test]
fn a_short_history_prunes_the_ledger_and_reconcile_still_proves_the_whole_life() {
    let dir = tempfile::tempdir().unwrap();
    let mut setup = Setup::new(cwru_trace());
    setup.allowed_lateness = "30s";
    setup.history = "1m";
    let config = setup.write(dir.path(), "run.toml");
    let d = support::daemon::run_to_end(&config, &["--forward", "local-ack"]);

    let replayed = replay(&cwru_trace(), &config, dir.path());
    let kept = accepted_ids(&ledger(&config));
    // The trace spans 621 s of ingest time; a minute of it stays in the ledger.
    assert!(!kept.is_empty() && (kept.len() as u64) < replayed.accepted() / 2, "{}", d.log());
    let json: serde_json::Value =
        serde_json::from_str(&reconciled(&["reconcile", "--json"], &config)).unwrap();
    assert!(json["pruned_records"].as_u64().unwrap() > 0, "{json}");
    assert_eq!(json["accepted_events"].as_u64(), Some(replayed.accepted()), "{json}");
    assert_eq!(json["alert_records"].as_u64(), Some(replayed.alert_lines().len() as u64));
    assert_eq!(json["unaccounted"], serde_json::json!([]), "{json}");
    let inspect: serde_json::Value =
        serde_json::from_str(&cli(&["inspect", "--json"], &config)).unwrap();
    assert_eq!(inspect["ledger_pruned"], json["pruned_records"], "{inspect}");
    let report = reconciled(&["reconcile"], &config);
    assert!(report.contains("folded into the history summary"), "{report}");
    assert!(report.contains("the gateway lost nothing it accepted"), "{report}");
}

/// Every alert record says which rule decided it, and a start with another rule is ledgered, not
/// silent (issue 21, part 1): the checkpoint keeps the version it was decided under.
#[test]
fn alert_records_carry_the_rule_version_and_a_changed_rule_is_ledgered_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let setup = Setup::new(cwru_trace());
    let config = setup.write(dir.path(), "run.toml");
    support::daemon::run_to_end(&config, &["--no-forward"]);
    let status: serde_json::Value =
        serde_json::from_str(&cli(&["status", "--once", "--json"], &config)).unwrap();
    let version = status["rule_version"].as_str().unwrap().to_owned();
    assert_eq!(version.len(), 16, "{status}");
    let alerts = cli(&["dump", "alerts"], &config);
    assert!(!alerts.is_empty());
    for line in alerts.lines() {
        let a: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(a["rule_version"], version.as_str(), "{a}");
    }
    // The same rule reformatted: no change; another threshold: a rule_changed record.
    let text = std::fs::read_to_string(&config).unwrap();
    let reformatted = dir.path().join("same.toml");
    std::fs::write(&reformatted, text.replace("threshold = 0.5\n", "threshold = 5e-1   # same\n"))
        .unwrap();
    support::daemon::run_to_end(&reformatted, &["--no-forward"]);
    assert!(!ledger(&reformatted).iter().any(|r| r["kind"] == "rule_changed"));
    let changed = dir.path().join("changed.toml");
    std::fs::write(&changed, text.replace("threshold = 0.5\n", "threshold = 0.6\n")).unwrap();
    support::daemon::run_to_end(&changed, &["--no-forward"]);
    let records = ledger(&changed);
    let rc: Vec<_> = records.iter().filter(|r| r["kind"] == "rule_changed").collect();
    assert_eq!(rc.len(), 1, "{rc:?}");
    assert_eq!(rc[0]["from"], version.as_str());
    let now: serde_json::Value =
        serde_json::from_str(&cli(&["status", "--once", "--json"], &changed)).unwrap();
    assert_eq!(rc[0]["to"], now["rule_version"]);
    assert_ne!(now["rule_version"], version.as_str());
}

/// The duplicate memory is kept beside the checkpoint, a page per checkpoint, not in its
/// snapshot: events delivered again after a restart are still duplicates.
#[test]
fn events_delivered_again_after_a_restart_are_still_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("events.jsonl");
    let mut load = linegate::synth::Load::new(2, 300);
    load.sensors_per_machine = 2;
    let mut lines = Vec::new();
    let mut last_at = 0;
    load.generate(|at, e| {
        lines.push(serde_json::json!({"at": at, "kind": "event", "event": e}));
        last_at = at;
    });
    let text =
        |ls: &[serde_json::Value]| ls.iter().map(|l| l.to_string() + "\n").collect::<String>();
    std::fs::write(&trace, text(&lines)).unwrap();
    let config = Setup::new(trace.clone()).write(dir.path(), "run.toml");
    support::daemon::run_to_end(&config, &["--no-forward"]);
    let first = ledger(&config);
    let duplicates =
        |rs: &[serde_json::Value]| rs.iter().filter(|r| r["kind"] == "duplicate").count();
    {
        let store =
            linegate::store::Store::open(&dir.path().join("db"), Default::default()).unwrap();
        let pages = store.dedup_pages().count();
        assert!(pages > 10, "a page per checkpoint (20 records each): {pages}");
    }
    // The last 100 events again, delivered later.
    let again: Vec<serde_json::Value> = lines[lines.len() - 100..]
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut l = l.clone();
            l["at"] = serde_json::json!(last_at + 1000 + i as i64);
            l
        })
        .collect();
    let mut f = std::fs::OpenOptions::new().append(true).open(&trace).unwrap();
    std::io::Write::write_all(&mut f, text(&again).as_bytes()).unwrap();
    drop(f);
    support::daemon::run_to_end(&config, &["--no-forward"]);
    let records = ledger(&config);
    let accepted = accepted_ids(&first);
    assert_eq!(accepted_ids(&records), accepted, "nothing accepted twice");
    let resent = again
        .iter()
        .filter(|l| accepted.contains(l["event"]["event_id"].as_str().unwrap()))
        .count();
    assert!(resent > 90, "{resent} of the 100 were accepted the first time");
    assert_eq!(duplicates(&records) - duplicates(&first), resent);
}
