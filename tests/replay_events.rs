//! `linegate replay --events` on the real binary over the CWRU trace (fixtures/cwru/README.md):
//! every derived event written with its features, as the independent reference computed them.
//! (It runs the binary as a child, so it is not among the tests `.ci/arm.sh` runs under
//! qemu-user, which cannot exec an aarch64 child; `tests/cwru.rs` is.)

mod support;

use support::fixture;

/// `replay --events`: one line per accepted event, every one derived here, carrying the features
/// fixtures/cwru/features_reference.py computed for its frame (within 1e-9 relative, the envelope
/// indicators within 1e-6, as tests/cwru_frames.rs checks them on the frame cutter).
#[test]
fn replay_events_writes_each_event_with_the_reference_features() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("fixtures/traces/cwru.toml")).unwrap();
    let assets = std::fs::read_to_string(fixture("fixtures/cwru/assets.toml")).unwrap();
    let config = dir.path().join("cwru.toml");
    std::fs::write(&config, text + &assets).unwrap();
    let events = dir.path().join("events.jsonl");
    let mut cmd = support::linegate(&["replay"]);
    cmd.arg(fixture("fixtures/traces/cwru.jsonl")).arg("--config").arg(&config);
    cmd.arg("--out").arg(dir.path().join("alerts.jsonl")).arg("--events").arg(&events);
    support::run(&mut cmd).success();
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("fixtures/expected/cwru.features.json")).unwrap(),
    )
    .unwrap();
    let frames = reference["frames"].as_array().unwrap();
    assert_eq!(lines.len(), 19, "one line per event");
    assert_eq!(lines.len(), frames.len());
    for want in frames {
        let (machine, seq) = (&want["machine"], &want["seq"]);
        let e = lines.iter().find(|e| &e["machine"] == machine && &e["seq"] == seq).unwrap();
        assert_eq!((&e["derived"], &e["ts_ms"]), (&true.into(), &want["ts_ms"]), "{e}");
        assert!(e["at"].is_i64(), "{e}");
        let features = e["features"].as_object().unwrap();
        assert_eq!(features.len(), 9, "{e}");
        for (name, got) in features {
            let (got, want) = (got.as_f64().unwrap(), want[name].as_f64().unwrap());
            let tol = if name.starts_with("env_") { 1e-6 } else { 1e-9 };
            assert!((got - want).abs() <= tol * want.abs(), "{name}: {got} vs {want}");
        }
    }
}
