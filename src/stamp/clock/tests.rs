//! The clock model against an injected clock (`crate::clock::ManualClock`) and scripted kernel
//! evidence: steps forward and back, an unsynchronised boot, resync, error growth in holdover.

use super::*;
use crate::clock::{Clock as _, ManualClock};

const T: i64 = 1_700_000_000_000;

const SYNCED: KernelEvidence = KernelEvidence {
    unsynchronised: false,
    time_error: false,
    maxerror_us: 12_300,
    esterror_us: 800,
};
const UNSYNCED: KernelEvidence = KernelEvidence {
    unsynchronised: true,
    time_error: true,
    maxerror_us: 16_000_000,
    esterror_us: 16_000_000,
};

fn read(c: &ManualClock, k: Option<KernelEvidence>) -> ClockReading {
    ClockReading { mono_ms: c.monotonic_ms(), real_ms: c.now_ms(), kernel: k }
}

fn cfg() -> ClockModelConfig {
    ClockModelConfig { step_threshold_ms: 100, resync_hold_ms: 10_000, holdover_drift_ppm: 500.0 }
}

/// One reading per second for `secs` seconds.
fn run(
    m: &mut ClockModel,
    c: &ManualClock,
    k: Option<KernelEvidence>,
    secs: i64,
) -> Vec<ClockStep> {
    let mut steps = Vec::new();
    for _ in 0..secs {
        c.advance(1_000);
        steps.extend(m.observe(read(c, k)).unwrap());
    }
    steps
}

#[test]
fn synced_clock_stamps_real_time_with_the_kernel_error_bound() {
    let c = ManualClock::new(T);
    let mut m = ClockModel::new(cfg(), read(&c, Some(SYNCED)));
    assert!(run(&mut m, &c, Some(SYNCED), 5).is_empty());
    let s = m.stamp(c.monotonic_ms());
    assert_eq!(s.ts_ms, T + 5_000);
    assert_eq!(
        s.clock,
        ClockEvidence { state: ClockState::Synced, err_ms: Some(13) },
        "12.3 ms rounds up"
    );
}

#[test]
fn forward_step_is_ledgered_and_held_over_from_the_trusted_offset() {
    let c = ManualClock::new(T);
    let mut m = ClockModel::new(cfg(), read(&c, Some(SYNCED)));
    run(&mut m, &c, Some(SYNCED), 2);
    c.advance(1_000);
    c.step_wall(3_600_000); // one hour forward
    let step = m.observe(read(&c, Some(SYNCED))).unwrap().unwrap();
    assert_eq!(
        step,
        ClockStep {
            from_ms: T + 3_000,
            to_ms: T + 3_603_000,
            size_ms: 3_600_000,
            at_mono_ms: 3_000,
            held_over: true
        }
    );
    // Stamps continue from the trusted offset: monotonic + (T - 0).
    let s = m.stamp(c.monotonic_ms());
    assert_eq!(s.ts_ms, T + 3_000);
    assert_eq!(s.clock.state, ClockState::Holdover);
    // Error: the anchor's 13 ms plus 500 ppm of the 1 s since the anchor (0.5 ms, rounded up).
    assert_eq!(s.clock.err_ms, Some(14));
}

#[test]
fn backward_step_is_ledgered_with_a_negative_size() {
    let c = ManualClock::new(T);
    let mut m = ClockModel::new(cfg(), read(&c, Some(SYNCED)));
    c.advance(1_000);
    c.step_wall(-250);
    let step = m.observe(read(&c, Some(SYNCED))).unwrap().unwrap();
    assert_eq!((step.from_ms, step.to_ms, step.size_ms), (T + 1_000, T + 750, -250));
    assert_eq!(m.stamp(c.monotonic_ms()).ts_ms, T + 1_000, "held over, not stepped back");
}

#[test]
fn small_changes_within_threshold_and_slew_are_not_steps() {
    let c = ManualClock::new(T);
    let mut m = ClockModel::new(cfg(), read(&c, Some(SYNCED)));
    c.advance(1_000);
    c.step_wall(100); // exactly the threshold: not more than it
    assert_eq!(m.observe(read(&c, Some(SYNCED))).unwrap(), None);
    // After an hour without readings, slewing may have moved the offset by up to 1.8 s.
    c.advance(3_600_000);
    c.step_wall(1_800);
    assert_eq!(m.observe(read(&c, Some(SYNCED))).unwrap(), None);
    c.advance(1_000);
    c.step_wall(102); // 100 ms plus 1 ms of slewing allowed in 1 s (0.5 ms, rounded up)
    assert!(m.observe(read(&c, Some(SYNCED))).unwrap().is_some());
}

#[test]
fn holdover_ends_after_the_kernel_is_synced_for_the_hold_time() {
    let c = ManualClock::new(T);
    let mut m = ClockModel::new(cfg(), read(&c, Some(SYNCED)));
    c.advance(1_000);
    c.step_wall(5_000);
    assert!(m.observe(read(&c, Some(UNSYNCED))).unwrap().is_some());
    // Unsynchronised for a while: the hold has not started.
    run(&mut m, &c, Some(UNSYNCED), 20);
    assert_eq!(m.stamp(c.monotonic_ms()).clock.state, ClockState::Holdover);
    // Synced for 9 s, then a break: the hold starts again.
    run(&mut m, &c, Some(SYNCED), 9);
    run(&mut m, &c, Some(UNSYNCED), 1);
    run(&mut m, &c, Some(SYNCED), 10);
    assert_eq!(m.stamp(c.monotonic_ms()).clock.state, ClockState::Holdover);
    assert_eq!(m.stamp(c.monotonic_ms()).ts_ms, T + c.monotonic_ms());
    run(&mut m, &c, Some(SYNCED), 1); // 10 s since the hold started
    let s = m.stamp(c.monotonic_ms());
    assert_eq!(s.clock.state, ClockState::Synced);
    assert_eq!(s.ts_ms, c.now_ms(), "stamps follow the new offset");
}

#[test]
fn holdover_error_grows_with_time() {
    let c = ManualClock::new(T);
    let mut m = ClockModel::new(cfg(), read(&c, Some(SYNCED)));
    c.advance(1_000);
    c.step_wall(-60_000);
    m.observe(read(&c, Some(UNSYNCED))).unwrap();
    let errs: Vec<u32> = (0..3)
        .map(|_| {
            run(&mut m, &c, Some(UNSYNCED), 600);
            m.stamp(c.monotonic_ms()).clock.err_ms.unwrap()
        })
        .collect();
    // 13 ms + 500 ppm of 601 s, 1201 s, 1801 s (rounded up).
    assert_eq!(errs, vec![13 + 301, 13 + 601, 13 + 901]);
}

#[test]
fn unsynchronised_boot_then_first_ntp_step_then_resync() {
    let c = ManualClock::new(T - 86_400_000); // booted with yesterday's time
    let mut m = ClockModel::new(cfg(), read(&c, Some(UNSYNCED)));
    run(&mut m, &c, Some(UNSYNCED), 3);
    assert_eq!(
        m.stamp(c.monotonic_ms()).clock,
        ClockEvidence { state: ClockState::Unsynced, err_ms: None }
    );
    c.advance(1_000);
    c.step_wall(86_400_000);
    let step = m.observe(read(&c, Some(SYNCED))).unwrap().unwrap();
    assert!(!step.held_over, "nothing trusted to hold over from");
    let s = m.stamp(c.monotonic_ms());
    assert_eq!(s.clock, ClockEvidence { state: ClockState::Stepped, err_ms: None });
    assert_eq!(s.ts_ms, c.now_ms(), "stepped: real time is the best there is");
    run(&mut m, &c, Some(SYNCED), 10);
    assert_eq!(m.stamp(c.monotonic_ms()).clock.state, ClockState::Synced);
}

#[test]
fn losing_sync_without_a_step_is_holdover_on_real_time() {
    let c = ManualClock::new(T);
    let mut m = ClockModel::new(cfg(), read(&c, Some(SYNCED)));
    run(&mut m, &c, Some(UNSYNCED), 2);
    let s = m.stamp(c.monotonic_ms());
    assert_eq!(s.ts_ms, c.now_ms());
    assert_eq!(s.clock, ClockEvidence { state: ClockState::Holdover, err_ms: Some(13 + 1) });
}

#[test]
fn no_kernel_evidence_is_unknown_and_a_monotonic_step_back_is_refused() {
    let c = ManualClock::new(T);
    let mut m = ClockModel::new(cfg(), read(&c, None));
    run(&mut m, &c, None, 1);
    assert_eq!(m.stamp(c.monotonic_ms()).clock, ClockEvidence::UNKNOWN);
    let bad = ClockReading { mono_ms: 10, real_ms: T, kernel: None };
    assert_eq!(m.observe(bad), Err(MonotonicWentBack { last_ms: 1_000, got_ms: 10 }));
    assert_eq!(m.last_reading().mono_ms, 1_000, "nothing changed");
}
