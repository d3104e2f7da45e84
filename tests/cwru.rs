//! The real-data trace (CWRU bearing recordings, fixtures/cwru/README.md) through the whole
//! decision path: its final incidents must equal those the independent brute-force computation
//! (fixtures/cwru/reference.py, numpy-free Python over the same trace) wrote to
//! fixtures/expected/cwru.incidents.json.

mod support;

use std::io::BufReader;

use linegate::config::Config;
use linegate::replay::{replay, Sinks, Summary};
use linegate::rule::alert::AlertRecord;
use serde::Deserialize;
use support::applied::{self, Rules};
use support::fixture;
use support::incidents::{check_revisions, final_incidents, FinalIncident};

#[derive(Deserialize)]
struct Expected {
    machine: String,
    onset_ms: i64,
    end_ms: i64,
    evidence: Vec<String>,
    also: Vec<String>,
}

/// fixtures/expected/cwru.incidents.json as final incidents.
fn expected_incidents() -> Vec<FinalIncident> {
    let text = std::fs::read_to_string(fixture("fixtures/expected/cwru.incidents.json")).unwrap();
    let expected: Vec<Expected> = serde_json::from_str(&text).unwrap();
    let mut expected: Vec<FinalIncident> = expected
        .into_iter()
        .map(|e| FinalIncident {
            machine: e.machine,
            onset_ms: e.onset_ms,
            end_ms: Some(e.end_ms),
            evidence: e.evidence,
            also_count: e.also.len() as u64,
            also: e.also,
        })
        .collect();
    expected.sort();
    expected
}

/// The CWRU trace replayed under `config`: the summary and the alert records.
fn replay_cwru(config: &Config) -> (Summary, Vec<AlertRecord>) {
    let trace = std::fs::File::open(fixture("fixtures/traces/cwru.jsonl")).unwrap();
    let mut sinks = Sinks { alerts: Vec::new(), rejected: None::<Vec<u8>>, events: None };
    let summary = replay(config, BufReader::new(trace), &mut sinks, |_| {}).unwrap();
    let records = String::from_utf8(sinks.alerts)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (summary, records)
}

#[test]
fn cwru_trace_alerts_match_the_brute_force_reference() {
    let config = Config::load(&fixture("fixtures/traces/cwru.toml")).unwrap();
    let (summary, records) = replay_cwru(&config);
    check_revisions(&records);

    let expected = expected_incidents();
    assert_eq!(final_incidents(&records), expected);
    assert!(!expected.is_empty());
    assert_eq!(summary.counts.quarantined.values().sum::<u64>(), 0);
    assert_eq!(summary.counts.events_received, 0, "every event is derived from raw samples");
    assert_eq!(summary.counts.events_derived, 19, "one event per second of samples");
}

/// The golden traces' reference (`support::applied`, frames included, in Rust) and reference.py
/// agree on the trace: two derivations written apart, neither from the crate.
#[test]
fn the_golden_traces_reference_agrees_with_reference_py() {
    let rules = Rules::load(&fixture("fixtures/traces/cwru.toml"));
    let applied = applied::derive(&fixture("fixtures/traces/cwru.jsonl"), &rules);
    assert_eq!(applied.incidents(&rules), expected_incidents());
    assert_eq!(applied.counts.events_derived, 19);
    assert_eq!(applied.counts.quarantined, 0);
}

/// The committed expectations are exactly what the independent reference computes from the
/// committed trace (python3, standard library only), and its hand-worked self-test passes.
#[test]
fn committed_expectations_are_the_reference_output() {
    let script = fixture("fixtures/cwru/reference.py");
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        let out = std::process::Command::new("python3")
            .arg(&script)
            .args(args)
            .output()
            .expect("python3 runs the reference computation");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    run(&["--self-test".as_ref()]);
    run(&["--out-dir".as_ref(), dir.path().as_os_str()]);
    for name in ["cwru.incidents.json", "cwru.frames.json"] {
        let fresh = std::fs::read(dir.path().join(name)).unwrap();
        let committed = std::fs::read(fixture("fixtures/expected").join(name)).unwrap();
        assert!(fresh == committed, "{name} differs from reference.py's output");
    }
}

/// A velocity rule over the raw samples: derived events carry `velocity_rms`, so the rule counts
/// them. 0.3 mm/s lies between the frames' values (fixtures/expected/cwru.features.json: motor-a
/// 0.144..0.456 mm/s, two seconds above; motor-b 0.222..0.403 mm/s, five above, three of them
/// consecutive), so motor-b alerts and motor-a does not.
/// A velocity rule over the raw samples: derived events carry `velocity_rms`, so the rule counts
/// them. cwru.toml with its rule made `velocity_rms > 0.3 mm/s` (no per-machine threshold) and
/// the asset table: 0.3 mm/s lies between the frames' values (fixtures/expected/cwru.features.json:
/// motor-a 0.144..0.456 mm/s, two seconds above; motor-b 0.222..0.403 mm/s, five above, its
/// first three consecutive), so motor-b alerts on its first three seconds and motor-a never.
#[test]
fn a_velocity_rule_counts_events_derived_from_samples() {
    let text = std::fs::read_to_string(fixture("fixtures/traces/cwru.toml")).unwrap();
    let rule = "metric = \"accel_rms\"\nunit = \"g\"\nthreshold = 0.5\n";
    let motor_b = "[rule.machines.motor-b]\nthreshold = 0.511\n";
    assert!(text.contains(rule) && text.contains(motor_b), "cwru.toml's rule changed");
    let velocity = "metric = \"velocity_rms\"\nunit = \"mm/s\"\nthreshold = 0.3\n";
    let assets = std::fs::read_to_string(fixture("fixtures/cwru/assets.toml")).unwrap();
    let text = text.replace(rule, velocity).replace(motor_b, "") + &assets;
    let config = Config::from_toml(&text, "cwru.toml with a velocity rule").unwrap();
    let (summary, records) = replay_cwru(&config);
    check_revisions(&records);
    assert_eq!(summary.counts.quarantined.values().sum::<u64>(), 0);
    assert_eq!(summary.counts.events_derived, 19);
    let incidents = final_incidents(&records);
    let machines: Vec<&str> = incidents.iter().map(|i| i.machine.as_str()).collect();
    assert_eq!(machines, ["motor-b"], "{incidents:?}");
    let evidence = ["gw-cwru.b-de.1", "gw-cwru.b-de.2", "gw-cwru.b-de.3"];
    assert_eq!(incidents[0].evidence, evidence, "{incidents:?}");
}
