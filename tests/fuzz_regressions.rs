//! Failures found by the fuzz targets in fuzz/ (docs/testing.md, "Fuzzing"), each kept as a named
//! test on stable with its input inline.

use linegate::event::parse::parse_event;

/// Found by `event_schema2`: the squares of these axes sum to a subnormal f64 (about 7.3e-324,
/// rounded to 4.9e-324), and the root-sum-square came out as 2.22e-162 instead of 2.70e-162.
#[test]
fn schema_2_rss_of_axes_whose_squares_are_subnormal_is_accurate() {
    let raw = br#"{"event_id": "node-3.s1.1187", "machine": "press-7", "sensor": "s1", "seq": 1187, "ts_ms": 1700000000000, "clock": {"state": "synced", "err_ms": 2}, "metric": "accel_rms", "unit": "g", "schema": 2, "quality": "good", "axes": {"y": 2.6998257541122185e-162, "z": 1.6360837203673e-310}}"#;
    let event = parse_event(std::str::from_utf8(raw).unwrap()).unwrap();
    let want = 2.6998257541122185e-162_f64;
    assert!((event.value - want).abs() <= want * 1e-15, "value {:e}, want {want:e}", event.value);
}

/// Found by `decider_snapshot`: a snapshot whose incident lists a further member outside the
/// incident's time span restored, and deciding the next event then tripped an assertion of the
/// rule core. The engine's restore now checks each incident's invariants and refuses such a
/// snapshot (as damage: the store then re-derives the state from its journal).
#[test]
fn a_snapshot_whose_incident_lists_a_member_outside_it_is_refused_at_restore() {
    let snapshot = include_bytes!(
        "../fixtures/fuzz/decider_snapshot-incident-member-outside-its-incident.cbor"
    );
    let config = linegate::config::Config::for_replay_defaults("gw-fuzz");
    let err = linegate::decider::Decider::restore(&config, snapshot).expect_err("refused");
    assert!(err.to_string().contains("incident gw-fuzz/high-vibration/press-1/"), "{err}");
}
