//! The input's history with the real binary (issue 21, docs/contracts.md section 11): the
//! journal keeps what was decided for `[store] history`, `export` writes it as a trace (whole,
//! or by time and machine), and `whatif` decides it again under another rule (or several, all
//! or one by `--rule`) through the running daemon's control socket, its incidents compared with
//! the gateway's.
//! (`tests/crash.rs` checks that the export is the trace after SIGKILLs at every failpoint.)

mod support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use support::daemon::Daemon;
use support::{cli, linegate, poll, replay, run, trace_daemon_sections, DEADLINE};

const T0: i64 = 1_700_000_000_000;

/// 30 minutes of trace: machines m1 and m2, two sensors each, one event per sensor and second,
/// arriving 300 ms late; a burst above 0.5 g in the first 8 s of every third minute (m2: every
/// fourth), peaking at 0.65 g (so a threshold of 0.7 sees none); a tick every 10 s.
fn write_trace(path: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for s in 0..1800i64 {
        let ts = T0 + s * 1000;
        for (machine, every) in [("m1", 3), ("m2", 4)] {
            for sensor in ["a", "b"] {
                let burst = (s / 60) % every == 0 && s % 60 < 8;
                let value = if burst { 0.55 + (s % 3) as f64 * 0.05 } else { 0.1 };
                let seq = s + 1;
                lines.push(support::event_line(machine, sensor, seq, ts, value, ts + 300));
            }
        }
        if s % 10 == 9 {
            lines.push(format!(r#"{{"at":{},"kind":"tick"}}"#, ts + 500));
        }
    }
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
    lines
}

fn rule(threshold: f64) -> String {
    rules(&[("high-vibration", threshold)]).replace("[[rule]]", "[rule]")
}

/// The gateway's head with a `[[rule]]` table per (name, threshold).
fn rules(tables: &[(&str, f64)]) -> String {
    let tables: String = tables
        .iter()
        .map(|(name, threshold)| {
            format!(
                "[[rule]]\nname = \"{name}\"\nmetric = \"accel_rms\"\nunit = \"g\"\n\
                 threshold = {threshold}\nwindow = \"2m\"\ncount = 3\n\n"
            )
        })
        .collect();
    format!(
        r#"[gateway]
id = "gw-history"

{tables}[time]
watermark_bound = "5s"
allowed_lateness = "1m"
idle_timeout = "30s"
max_future = "5s"
"#
    )
}

struct Gateway {
    dir: tempfile::TempDir,
    trace: PathBuf,
    lines: Vec<String>,
}

impl Gateway {
    fn new() -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace.jsonl");
        let lines = write_trace(&trace);
        Gateway { dir, trace, lines }
    }

    /// A configuration of this gateway's store with `threshold` and `store` keys.
    fn config(&self, name: &str, threshold: f64, store: &str) -> PathBuf {
        self.config_with(name, rule(threshold), store)
    }

    /// A configuration of this gateway's store with `head` (gateway, rules, time) and `store`
    /// keys.
    fn config_with(&self, name: &str, head: String, store: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        let sections =
            trace_daemon_sections(&self.dir.path().join("db"), store, 0, &self.trace, 0.0);
        std::fs::write(&path, head + &sections).unwrap();
        path
    }
}

fn at(line: &str) -> i64 {
    serde_json::from_str::<Value>(line).unwrap()["at"].as_i64().unwrap()
}

#[test]
fn history_keeps_its_horizon_and_export_writes_it_whole_or_by_time_and_machine() {
    let g = Gateway::new();
    let config = g.config("gateway.toml", 0.5, "history = \"10m\"\n");
    support::daemon::run_to_end(&config, &["--forward", "local-ack"]);
    // What is older than 10 minutes before the last record decided has left the journal.
    let last = at(g.lines.last().unwrap());
    let kept: Vec<&String> = g.lines.iter().filter(|l| at(l) >= last - 600_000).collect();
    let exported = cli(&["export"], &config);
    let exported: Vec<&str> = exported.lines().collect();
    assert_eq!(exported.len(), kept.len(), "the history holds the last 10 minutes");
    assert!(exported.iter().zip(&kept).all(|(a, b)| a == b), "the export is the trace's tail");
    let inspect: Value = serde_json::from_str(&cli(&["inspect", "--json"], &config)).unwrap();
    assert!(inspect["journal_start"].as_u64().unwrap() > 1, "{inspect}");
    assert_eq!(inspect["history_from_ms"], at(kept[0]), "{inspect}");

    // A time range (RFC 3339 and ms) and one machine, into a file.
    let (from, to) = (last - 300_000, last - 120_000);
    let out = g.dir.path().join("part.jsonl");
    let from_text = linegate::timefmt::time(from);
    let mut cmd = linegate(&["export", "--from", &from_text, "--to", &to.to_string()]);
    cmd.args(["--machine", "m2", "--out"]).arg(&out).arg("--config").arg(&config);
    run(&mut cmd).success();
    let want: Vec<&String> = g
        .lines
        .iter()
        .filter(|l| (from..to).contains(&at(l)) && !l.contains(r#""machine":"m1""#))
        .collect();
    let got = std::fs::read_to_string(&out).unwrap();
    assert_eq!(got.lines().count(), want.len());
    assert!(got.lines().zip(&want).all(|(a, b)| a == *b), "the machine's lines and the ticks");
    assert!(want.iter().any(|l| l.contains(r#""kind":"tick""#)));
}

/// The incidents `replay` of the trace decides under `config`: final alert ids, not superseded.
fn incidents(trace: &Path, config: &Path, dir: &Path) -> usize {
    let lines = replay(trace, config, dir).alert_lines();
    let records: Vec<linegate::rule::alert::AlertRecord> =
        lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    linegate::whatif::incidents(&records).len()
}

#[test]
fn whatif_decides_the_history_again_through_the_running_daemon_and_says_what_changed() {
    let g = Gateway::new();
    let config = g.config("gateway.toml", 0.5, "");
    let mut d = Daemon::start(&config, &["--forward", "local-ack"], &[]);
    // The daemon stays up at the trace's end: wait until it has decided every line.
    let n = g.lines.len() as u64;
    let decided = poll(DEADLINE, || {
        let r = run(linegate(&["inspect", "--json"]).arg("--config").arg(&config));
        let v: Value = serde_json::from_str(&r.stdout).ok()?;
        (v["checkpoint"].as_u64()? >= n).then_some(())
    });
    assert!(decided.is_some(), "the daemon did not decide the trace:\n{}", d.log());

    // Threshold 0.7: no burst reaches it. 0.5 again: the same incidents.
    let higher = g.config("higher.toml", 0.7, "");
    let out = g.dir.path().join("whatif.jsonl");
    let mut cmd = linegate(&["whatif", "--json", "--out"]);
    cmd.arg(&out).arg("--config").arg(&higher);
    let report: Value = serde_json::from_str(&run(&mut cmd).success()).unwrap();
    d.assert_running();
    let replay_dir = g.dir.path().join("r");
    std::fs::create_dir_all(&replay_dir).unwrap();
    let gateway_incidents = incidents(&g.trace, &config, &replay_dir);
    assert!(gateway_incidents >= 10, "the trace has too few incidents: {gateway_incidents}");
    assert_eq!(report["gateway_incidents"], gateway_incidents, "{report}");
    assert_eq!(report["whatif_incidents"], 0, "{report}");
    assert_eq!(report["removed"], gateway_incidents, "{report}");
    assert_eq!(report["records"], n, "{report}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "", "no alert record at 0.7 g");

    let text = cli(&["whatif"], &config);
    assert!(
        text.contains(&format!("0 added, 0 removed, 0 moved, {gateway_incidents} the same")),
        "{text}"
    );
    // 0.62: only the 0.65 g events of a burst are high; whatever moves, the counts are replay's.
    let lower = g.config("lower.toml", 0.62, "");
    let mut cmd = linegate(&["whatif", "--json"]);
    let report: Value =
        serde_json::from_str(&run(cmd.arg("--config").arg(&lower)).success()).unwrap();
    let want = incidents(&g.trace, &lower, &replay_dir);
    assert_eq!(report["whatif_incidents"], want, "{report}");
    let r = &report;
    let sum = |keys: &[&str]| keys.iter().map(|k| r[*k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum(&["added", "moved", "same"]), want as u64, "{report}");
    assert_eq!(sum(&["removed", "moved", "same"]), gateway_incidents as u64, "{report}");

    // Several rules: the gateway's own again, and `strict` at 0.62, which the gateway never ran.
    // All of them at once, then one with `--rule`; a rule the configuration lacks is refused.
    let two = g.config_with("two.toml", rules(&[("high-vibration", 0.5), ("strict", 0.62)]), "");
    let whatif = |extra: &[&str]| -> Value {
        let mut cmd = linegate(&[&["whatif", "--json"], extra].concat());
        serde_json::from_str(&run(cmd.arg("--config").arg(&two)).success()).unwrap()
    };
    let all = whatif(&[]);
    assert_eq!(all["gateway_incidents"], gateway_incidents, "{all}");
    assert_eq!(all["whatif_incidents"], gateway_incidents + want, "{all}");
    assert_eq!(
        (&all["same"], &all["added"], &all["removed"]),
        (&json!(gateway_incidents), &json!(want), &json!(0)),
        "{all}"
    );
    let own = whatif(&["--rule", "high-vibration"]);
    assert_eq!(
        (&own["same"], &own["added"], &own["removed"]),
        (&json!(gateway_incidents), &json!(0), &json!(0)),
        "{own}"
    );
    let strict = whatif(&["--rule", "strict"]);
    assert_eq!(
        (&strict["gateway_incidents"], &strict["added"]),
        (&json!(0), &json!(want)),
        "{strict}"
    );
    let r = run(linegate(&["whatif", "--rule", "nope", "--config"]).arg(&two));
    assert!(!r.ok(), "an unknown rule is refused");
    assert!(
        r.stderr.contains("\"nope\"") && r.stderr.contains("high-vibration, strict"),
        "{}",
        r.stderr
    );
    d.signal("TERM");
    d.wait_success(DEADLINE);
}
