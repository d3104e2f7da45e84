//! A change of several rules at restart with the real binary (docs/contracts.md sections 4 and
//! 11): a gateway with two measurement rules and a composite `all_of` over them decides the first
//! part of a trace, is started again with one rule's threshold changed and a rule added, then
//! again with that rule removed. The ledger names each rule that changed, and `replay` of the
//! exported history with both `--switch-config`s gives the archive, rule by rule.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::daemon::Daemon;
use support::{append_lines, burst_lines, cli, linegate, run, trace_daemon_sections, DEADLINE};

const T0: i64 = 1_700_000_000_000;

/// A measurement rule's table over accel_rms.
fn measured(name: &str, threshold: f64, window: &str, count: u32) -> String {
    format!(
        "[[rule]]\nname = \"{name}\"\nmetric = \"accel_rms\"\nunit = \"g\"\n\
         threshold = {threshold}\nwindow = \"{window}\"\ncount = {count}\n\n"
    )
}

/// A configuration named `name` with `rules` (tables) over the store and trace in `dir`.
fn config(dir: &Path, name: &str, rules: &str, trace: &Path) -> PathBuf {
    let head = format!(
        "[gateway]\nid = \"gw-rules\"\n\n{rules}[time]\nwatermark_bound = \"5s\"\n\
         allowed_lateness = \"1m\"\nidle_timeout = \"30s\"\nmax_future = \"5s\"\n"
    );
    let extra = "commit_records = 50\ncommit_interval = \"20ms\"\n";
    let path = dir.join(name);
    let sections = trace_daemon_sections(&dir.join("db"), extra, 0, trace, 0.0);
    std::fs::write(&path, head + &sections).unwrap();
    path
}

/// One run of the daemon to the end of the trace.
fn run_to_end(config: &Path) {
    let mut d = Daemon::start(config, &["--exit-at-end", "--forward", "local-ack"], &[]);
    let (status, _) = d.wait(DEADLINE);
    assert!(status.success(), "linegate run failed ({status}):\n{}", d.log());
}

/// Alert record lines by the rule that decided them.
fn by_rule<'a>(lines: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in lines {
        let rec: Value = serde_json::from_str(line).unwrap();
        let rule = rec["rule"].as_str().unwrap().to_owned();
        out.entry(rule).or_default().insert(line.to_owned());
    }
    out
}

/// The ledger's `rule_changed` records at journal position `pos`: rule name → (from, to).
fn changes_at(ledger: &[Value], pos: usize) -> BTreeMap<String, (String, String)> {
    ledger
        .iter()
        .filter(|e| e["kind"] == "rule_changed" && e["journal_pos"] == pos)
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_else(|| panic!("no {k}: {e}")).to_owned();
            (s("rule"), (s("from"), s("to")))
        })
        .collect()
}

/// Each rule's `rule_version` as `check-config` prints it (`  rule NAME: …, version V`).
fn versions(config: &Path) -> BTreeMap<String, String> {
    let out = run(linegate(&["check-config"]).arg(config)).success();
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("rule "))
        .map(|l| {
            let (name, rest) = l.split_once(':').unwrap();
            let (_, version) = rest.rsplit_once("version ").unwrap();
            (name.to_owned(), version.to_owned())
        })
        .collect()
}

#[test]
fn several_rules_changed_at_restarts_replay_with_the_switches_as_the_gateway_decided() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let trace = d.join("trace.jsonl");
    let both = "[[rule]]\nname = \"both\"\nall_of = [\"warn\", \"alarm\"]\nwindow = \"2m\"\n\n";
    let alarm = measured("alarm", 0.7, "2m", 3);
    let first = format!("{}{alarm}{both}", measured("warn", 0.5, "2m", 3));
    // warn's threshold raised, peak added; then peak removed again.
    let warn = measured("warn", 0.65, "2m", 3);
    let second = format!("{warn}{alarm}{both}{}", measured("peak", 0.75, "1m", 2));
    let third = format!("{warn}{alarm}{both}");

    let mut written = 0;
    let mut starts = Vec::new();
    let mut configs = Vec::new();
    for (i, (name, rules)) in
        [("first.toml", &first), ("second.toml", &second), ("third.toml", &third)]
            .into_iter()
            .enumerate()
    {
        let part = burst_lines(T0, i as i64 * 600, (i as i64 + 1) * 600);
        starts.push(written + 1);
        written += part.len();
        append_lines(&trace, &part);
        let c = config(d, name, rules, &trace);
        run_to_end(&c);
        configs.push(c);
    }
    let (v1, v2, v3) = (versions(&configs[0]), versions(&configs[1]), versions(&configs[2]));
    assert_ne!(v1["warn"], v2["warn"], "the threshold is part of the version");
    assert_eq!(v1["alarm"], v2["alarm"]);
    assert_eq!(v2["warn"], v3["warn"]);

    // Each start ledgers the rules that changed, by name, and only those.
    let ledger = support::ledger(&configs[2]);
    let second_start = changes_at(&ledger, starts[1]);
    assert_eq!(second_start["warn"], (v1["warn"].clone(), v2["warn"].clone()), "{ledger:?}");
    assert_eq!(second_start["peak"], (String::new(), v2["peak"].clone()));
    assert!(!second_start.contains_key("alarm"), "alarm did not change: {second_start:?}");
    let third_start = changes_at(&ledger, starts[2]);
    let names: Vec<&str> = third_start.keys().map(String::as_str).collect();
    assert_eq!(names, ["peak"], "only peak changed (removed): {third_start:?}");
    assert_eq!(third_start["peak"], (v2["peak"].clone(), String::new()));

    let archive = cli(&["dump", "alerts"], &configs[2]);
    let archived = by_rule(archive.lines());
    let rules: Vec<&str> = archived.keys().map(String::as_str).collect();
    assert_eq!(rules, ["alarm", "both", "peak", "warn"], "every rule alerted");
    for rec in &archived["both"] {
        let rec: Value = serde_json::from_str(rec).unwrap();
        let members: BTreeSet<&str> = rec["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["rule"].as_str().unwrap())
            .collect();
        assert_eq!(members, BTreeSet::from(["warn", "alarm"]), "{rec}");
    }
    let warn_versions: BTreeSet<&str> = archived["warn"]
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["rule_version"].as_str().unwrap().to_owned()
        })
        .map(|v| if v == v1["warn"] { "old" } else { "new" })
        .collect();
    assert_eq!(warn_versions, BTreeSet::from(["old", "new"]), "warn alerted under both");

    let export = d.join("export.jsonl");
    run(linegate(&["export", "--out"]).arg(&export).arg("--config").arg(&configs[2])).success();
    let replay = |switches: &[(usize, &Path)]| {
        let out = d.join("replay.jsonl");
        let mut cmd = linegate(&["replay"]);
        cmd.arg(&export).arg("--config").arg(&configs[0]).arg("--out").arg(&out);
        for (line, c) in switches {
            cmd.arg("--switch-config").arg(format!("{line}={}", c.display()));
        }
        run(&mut cmd).success();
        let text = std::fs::read_to_string(&out).unwrap();
        by_rule(text.lines())
    };
    let switched = replay(&[(starts[1], &configs[1]), (starts[2], &configs[2])]);
    for (rule, records) in &archived {
        assert_eq!(switched.get(rule), Some(records), "rule {rule}: replay differs");
    }
    assert_eq!(switched, archived, "the whole set");

    // Without the second switch, peak goes on deciding: the comparison can tell.
    let one_switch = replay(&[(starts[1], &configs[1])]);
    assert_eq!(one_switch["warn"], archived["warn"]);
    assert_ne!(one_switch["peak"], archived["peak"]);
}
