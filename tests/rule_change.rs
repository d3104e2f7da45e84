//! A rule change at restart with the real binary (issue 21, docs/contracts.md section 11): a
//! gateway decides the first part of a trace under one threshold, is started with another and
//! killed (SIGKILL) before and after the new rule's first checkpoint, then runs to the end. The
//! ledger says where the rule changed, every alert record says which rule decided it, and
//! `replay --switch-config LINE=FILE` of the exported history gives the archive byte for byte.
#![cfg(feature = "failpoints")]

mod support;

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::daemon::Daemon;
use support::{append_lines, burst_lines, cli, linegate, run, trace_daemon_sections, DEADLINE};

const T0: i64 = 1_700_000_000_000;

fn config(dir: &Path, name: &str, threshold: f64, trace: &Path) -> PathBuf {
    let rule = format!(
        "[gateway]\nid = \"gw-rule\"\n\n[rule]\nname = \"high-vibration\"\nmetric = \"accel_rms\"\n\
         unit = \"g\"\nthreshold = {threshold}\nwindow = \"2m\"\ncount = 3\n\n[time]\n\
         watermark_bound = \"5s\"\nallowed_lateness = \"1m\"\nidle_timeout = \"30s\"\n\
         max_future = \"5s\"\n"
    );
    let extra = "commit_records = 50\ncommit_interval = \"20ms\"\n";
    let path = dir.join(name);
    let sections = trace_daemon_sections(&dir.join("db"), extra, 0, trace, 0.0);
    std::fs::write(&path, rule + &sections).unwrap();
    path
}

/// One run to its end, or to a SIGKILL at `kill_at` (`point:nth`): whether it was killed.
fn run_once(config: &Path, kill_at: Option<&str>) -> bool {
    let env: Vec<(&str, &str)> = kill_at.map(|k| ("LINEGATE_KILL_AT", k)).into_iter().collect();
    let mut d = Daemon::start(config, &["--exit-at-end", "--forward", "local-ack"], &env);
    let (status, _) = d.wait(DEADLINE);
    match status.signal() {
        Some(9) => true,
        _ => {
            assert!(status.success(), "linegate run failed ({status}):\n{}", d.log());
            false
        }
    }
}

#[test]
fn a_rule_change_at_restart_is_ledgered_and_replay_with_the_switch_gives_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let first = burst_lines(T0, 0, 600);
    append_lines(&trace, &first);
    let old = config(dir.path(), "old.toml", 0.5, &trace);
    assert!(!run_once(&old, None));
    append_lines(&trace, &burst_lines(T0, 600, 1200));
    let new = config(dir.path(), "new.toml", 0.7, &trace);
    // Killed before the new rule's first checkpoint commits (the start is repeated, the rule
    // change with it), then after a later one; then to the end.
    assert!(run_once(&new, Some("app::decide::before_commit:1")), "not killed");
    assert!(run_once(&new, Some("app::decide::after_checkpoint:3")), "not killed");
    assert!(!run_once(&new, None));

    let version = |c: &Path| run(linegate(&["check-config"]).arg(c)).success();
    let (v_old, v_new) = (version(&old), version(&new));
    let switch = (first.len() + 1) as u64;
    let changes: Vec<Value> =
        support::ledger(&new).into_iter().filter(|e| e["kind"] == "rule_changed").collect();
    assert!(!changes.is_empty(), "no rule_changed record");
    for c in &changes {
        assert_eq!(c["journal_pos"], switch, "{c}");
        let (from, to) = (c["from"].as_str().unwrap(), c["to"].as_str().unwrap());
        assert!(v_old.contains(from) && v_new.contains(to), "{c}\n{v_old}\n{v_new}");
    }

    let archive: BTreeSet<String> =
        cli(&["dump", "alerts"], &new).lines().map(String::from).collect();
    let versions: BTreeSet<String> = archive
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["rule_version"].as_str().unwrap().into())
        .collect();
    assert_eq!(versions.len(), 2, "alerts of both rules: {versions:?}");

    let export = dir.path().join("export.jsonl");
    run(linegate(&["export", "--out"]).arg(&export).arg("--config").arg(&new)).success();
    let out = dir.path().join("replay.jsonl");
    let mut cmd = linegate(&["replay"]);
    cmd.arg(&export).arg("--config").arg(&old).arg("--out").arg(&out);
    cmd.arg("--switch-config").arg(format!("{switch}={}", new.display()));
    run(&mut cmd).success();
    let replayed: BTreeSet<String> =
        std::fs::read_to_string(&out).unwrap().lines().map(String::from).collect();
    assert_eq!(replayed, archive, "replay with the switch decides what the gateway decided");

    // Without the switch, replay decides otherwise: the test can tell.
    let mut cmd = linegate(&["replay"]);
    cmd.arg(&export).arg("--config").arg(&old).arg("--out").arg(&out);
    run(&mut cmd).success();
    let unswitched: BTreeSet<String> =
        std::fs::read_to_string(&out).unwrap().lines().map(String::from).collect();
    assert_ne!(unswitched, archive);
}
