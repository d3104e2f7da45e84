//! Golden traces: `linegate replay` must reproduce every fixture's expected alerts and summary
//! byte for byte. The scenarios and their expected meaning are described in
//! fixtures/traces/make_golden.py; the expected files were checked against it by hand.
//! `LINEGATE_BLESS=1 cargo test --test golden` rewrites them (then review the diff!).

mod support;

use std::path::Path;

use linegate::rule::alert::AlertRecord;
use support::incidents::check_revisions;
use support::{fixture, linegate, replay, run, trace};

/// Runs the binary on `fixtures/traces/{name}.jsonl` and compares with `fixtures/expected/`.
fn golden(name: &str) -> Vec<AlertRecord> {
    let own = trace(&format!("{name}.toml"));
    let config = if own.exists() { own } else { trace("golden.toml") };
    let dir = tempfile::tempdir().unwrap();
    let out = replay(&trace(&format!("{name}.jsonl")), &config, dir.path());
    let expected = fixture("fixtures/expected");
    for (got, want) in [
        (&out.alerts, expected.join(format!("{name}.alerts.jsonl"))),
        (&out.summary, expected.join(format!("{name}.summary.json"))),
    ] {
        compare(got, &want);
    }
    let records: Vec<AlertRecord> =
        out.alert_lines().iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    check_revisions(&records);
    records
}

fn compare(got: &Path, want: &Path) {
    let got_bytes = std::fs::read(got).unwrap();
    if std::env::var_os("LINEGATE_BLESS").is_some() {
        std::fs::write(want, &got_bytes).unwrap();
        return;
    }
    let want_bytes = std::fs::read(want)
        .unwrap_or_else(|e| panic!("{}: {e} (LINEGATE_BLESS=1 writes it)", want.display()));
    if got_bytes != want_bytes {
        panic!(
            "{} differs\n--- expected\n{}\n--- got\n{}",
            want.display(),
            String::from_utf8_lossy(&want_bytes),
            String::from_utf8_lossy(&got_bytes)
        );
    }
}

macro_rules! golden_tests {
    ($($name:ident),* $(,)?) => {
        $( #[test] fn $name() { golden(stringify!($name)); } )*

        /// Every trace in fixtures/traces has a test above.
        #[test]
        fn every_trace_has_a_golden_test() {
            let listed = [$(stringify!($name)),*];
            for entry in std::fs::read_dir(fixture("fixtures/traces")).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "jsonl") {
                    let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
                    assert!(
                        listed.contains(&stem.as_str()) || stem == "cwru",
                        "{stem}.jsonl has no golden test"
                    );
                }
            }
        }
    };
}

golden_tests!(
    three_in_two_minutes,
    exactly_two_minutes_apart,
    equal_timestamps,
    incident_extended,
    two_incidents,
    late_creates_incident,
    late_moves_onset,
    late_merges,
    too_late,
    duplicates,
    id_conflict,
    idle_sensor,
    clock_future,
    poison,
    two_machines_interleaved,
    per_machine_threshold,
    ms2_events,
    schema_versions_mixed,
    early,
    auto_bound,
    samples_clock_jump,
    also_max,
    count_clock,
    velocity_zones,
);

/// A derived event the rule rejects is kept in `--rejected` with its reason and its content.
#[test]
fn rejected_derived_events_are_kept_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let rejected = dir.path().join("rejected.jsonl");
    run(linegate(&["replay"])
        .arg(trace("samples_clock_jump.jsonl"))
        .args(["--config".as_ref(), trace("golden.toml").as_os_str()])
        .args(["--out".as_ref(), dir.path().join("alerts.jsonl").as_os_str()])
        .args(["--rejected".as_ref(), rejected.as_os_str()]))
    .success();
    let text = std::fs::read_to_string(&rejected).unwrap();
    let rows: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!(rows[0]["reason"], "clock_future");
    assert_eq!(rows[0]["derived"], true);
    assert_eq!(rows[0]["line"], 4);
    let raw: serde_json::Value = serde_json::from_str(rows[0]["raw"].as_str().unwrap()).unwrap();
    assert_eq!(raw["event_id"], "gw-test.s1.3");
}
