//! The checkpoint contract of the decide stage (docs/architecture.md, "the checkpoint boundary"):
//! stopping after any line, snapshotting, restoring and going on decides exactly as a run that
//! never stopped — same alert records, byte for byte, and the same counts.

mod support;

use std::path::Path;

use linegate::config::Config;
use linegate::decide::Decider;
use linegate::records::counts::Counts;
use linegate::trace::parse::parse_line;
use proptest::prelude::*;
use support::fixture;

fn config_for(trace: &Path) -> Config {
    let own = trace.with_extension("toml");
    let path = if own.exists() { own } else { fixture("fixtures/traces/golden.toml") };
    Config::load(&path).unwrap()
}

/// Decides `lines`, restoring from a snapshot after every line for which `cut` says so.
fn decide(config: &Config, lines: &[&[u8]], cut: impl Fn(usize) -> bool) -> (String, Counts) {
    let mut d = Decider::new(config);
    let mut alerts = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let _ = d.line(&parse_line(line), &mut alerts);
        if cut(i) {
            let bytes = d.snapshot();
            d = Decider::restore(config, &bytes).unwrap();
        }
    }
    let text: String = alerts.iter().map(|a| serde_json::to_string(a).unwrap() + "\n").collect();
    (text, d.counts().clone())
}

fn lines_of(data: &[u8]) -> Vec<&[u8]> {
    data.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect()
}

#[test]
fn restoring_after_every_line_of_every_fixture_changes_nothing() {
    let mut checked = 0;
    for entry in std::fs::read_dir(fixture("fixtures/traces")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let config = config_for(&path);
        let data = std::fs::read(&path).unwrap();
        let lines = lines_of(&data);
        let straight = decide(&config, &lines, |_| false);
        let stopped = decide(&config, &lines, |_| true);
        assert_eq!(straight, stopped, "{}", path.display());
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} traces");
}

#[test]
fn a_corrupt_snapshot_is_an_error_not_a_panic() {
    let config = Config::for_replay_defaults("gw-test");
    let mut bytes = Decider::new(&config).snapshot();
    bytes.truncate(bytes.len() / 2);
    assert!(Decider::restore(&config, &bytes).is_err());
    assert!(Decider::restore(&config, b"\xff\x00garbage").is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    /// Synthetic load with bursts, jitter and duplicates: any set of stopping points.
    #[test]
    fn restoring_at_random_points_changes_nothing(seed in any::<u64>(), every in 50usize..400) {
        let mut load = linegate::synth::Load::new(3, 900);
        load.sensors_per_machine = 2;
        load.burst_rate = 1.0 / 200.0;
        load.seed = seed;
        let mut data = Vec::new();
        load.generate(|at, e| {
            let line = serde_json::json!({"at": at, "kind": "event", "event": e});
            data.extend(serde_json::to_vec(&line).unwrap());
            data.push(b'\n');
        });
        let config = Config::for_replay_defaults("gw-bench");
        let lines = lines_of(&data);
        let straight = decide(&config, &lines, |_| false);
        prop_assert!(!straight.0.is_empty(), "the load must produce alerts");
        let stopped = decide(&config, &lines, |i| (i + seed as usize).is_multiple_of(every));
        prop_assert_eq!(straight, stopped);
    }
}

/// Snapshots written before the dedup memory was packed and the cores' snapshots were byte
/// strings (CBOR arrays of numbers then; `fixtures/snapshots/`, taken after the first N lines of
/// a fixture) restore, and deciding the rest gives what a run that never stopped gives.
#[test]
fn snapshots_written_before_packing_restore_and_continue_identically() {
    for (name, trace, n) in [
        ("decider-cbor-arrays-duplicates-5.cbor", "duplicates.jsonl", 5),
        ("decider-cbor-arrays-samples_clock_jump-4.cbor", "samples_clock_jump.jsonl", 4),
    ] {
        let path = fixture(&format!("fixtures/traces/{trace}"));
        let config = config_for(&path);
        let data = std::fs::read(&path).unwrap();
        let lines = lines_of(&data);
        let (straight, counts) = decide(&config, &lines, |_| false);
        let old = std::fs::read(fixture(&format!("fixtures/snapshots/{name}"))).unwrap();
        let mut d = Decider::restore(&config, &old).unwrap();
        let mut alerts = Vec::new();
        // The alerts of the first n lines, then the rest decided after the restore.
        let (before, _) = decide(&config, &lines[..n], |_| false);
        for line in &lines[n..] {
            let _ = d.line(&parse_line(line), &mut alerts);
        }
        let after: String =
            alerts.iter().map(|a| serde_json::to_string(a).unwrap() + "\n").collect();
        assert_eq!(before + &after, straight, "{name}");
        assert_eq!(d.counts(), &counts, "{name}");
        // Taken again, the snapshot is in the new form and restores the same.
        assert!(Decider::restore(&config, &d.snapshot()).is_ok());
    }
}
