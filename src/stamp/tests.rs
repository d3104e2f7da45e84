use std::collections::BTreeMap;

use super::*;
use crate::event::features::Feature;
use crate::event::rejection::Reason;
use crate::event::{ClockEvidence, ClockState, Event, Metric, Quality, SampleRef, Unit};
use crate::trace::SamplesRecord;
use proptest::prelude::*;

pub(super) const T: i64 = 1_700_000_000_000;

pub(super) fn params(metric: Metric) -> FrameParams {
    FrameParams { gateway: "gw".into(), metric, flush_after_ms: 15_000, machines: BTreeMap::new() }
}

pub(super) fn rec(
    machine: &str,
    sensor: &str,
    t0_ms: i64,
    rate_hz: f64,
    data: Vec<f64>,
) -> SamplesRecord {
    SamplesRecord {
        machine: machine.into(),
        sensor: sensor.into(),
        t0_ms,
        rate_hz,
        unit: Unit::G,
        axis: None,
        clock: None,
        data,
    }
}

fn sine(a: f64, periods: f64, n: usize, offset: f64) -> Vec<f64> {
    (0..n)
        .map(|i| offset + a * (2.0 * std::f64::consts::PI * periods * i as f64 / n as f64).sin())
        .collect()
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(f64::MIN_POSITIVE)
}

#[test]
fn constant_signal_has_zero_rms_and_full_frame_is_good() {
    let mut c = FrameCutter::new(params(Metric::AccelRms));
    let mut out = Vec::new();
    c.push(T + 500, &rec("m", "s", T, 100.0, vec![0.37; 100]), &mut out).unwrap();
    assert!(out.is_empty(), "frame still open");
    assert_eq!(c.open_frames(), 1);
    c.push(T + 1500, &rec("m", "s", T + 1000, 100.0, vec![0.37; 1]), &mut out).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].value, 0.0);
    assert_eq!(out[0].quality, Quality::Good);
    assert_eq!(out[0].ts_ms, T + 1000);
}

#[test]
fn sine_rms_is_amplitude_over_sqrt2_and_dc_is_removed() {
    for &(a, offset) in &[(1.0, 0.0), (0.25, 0.0), (0.5, 3.0), (2.0, -100.0)] {
        let mut c = FrameCutter::new(params(Metric::AccelRms));
        let mut out = Vec::new();
        c.push(T, &rec("m", "s", T, 1000.0, sine(a, 7.0, 1000, offset)), &mut out).unwrap();
        c.advance(T + 30_000, &mut out);
        assert_eq!(out.len(), 1);
        let want = a / 2f64.sqrt();
        assert!(
            rel(out[0].value, want) < 1e-9,
            "a={a} offset={offset}: {} vs {want}",
            out[0].value
        );
        assert_eq!(out[0].quality, Quality::Good);
    }
}

#[test]
fn peak_is_largest_deviation_from_mean() {
    let mut c = FrameCutter::new(params(Metric::AccelPeak));
    let mut out = Vec::new();
    // mean 1.0; deviations -1, +3, -1, -1
    c.push(T, &rec("m", "s", T, 4.0, vec![0.0, 4.0, 0.0, 0.0]), &mut out).unwrap();
    c.advance(T + 30_000, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].metric, Metric::AccelPeak);
    assert!((out[0].value - 3.0).abs() < 1e-12);
    // a sine with offset: peak = amplitude
    let mut c = FrameCutter::new(params(Metric::AccelPeak));
    let mut out = Vec::new();
    c.push(T, &rec("m", "s", T, 1000.0, sine(0.8, 5.0, 1000, 2.0)), &mut out).unwrap();
    c.advance(T + 30_000, &mut out);
    assert!(rel(out[0].value, 0.8) < 1e-9);
}

#[test]
fn frame_split_across_records_equals_one_record() {
    let data = sine(1.3, 12.0, 2000, 0.2); // 6 whole periods per frame
    let mut whole = FrameCutter::new(params(Metric::AccelRms));
    let mut a = Vec::new();
    whole.push(T, &rec("m", "s", T, 1000.0, data.clone()), &mut a).unwrap();
    whole.advance(T + 60_000, &mut a);

    // split at 0.7 s and 1.3 s: frame 0 spans records 1 and 2, frame 1 spans records 2 and 3
    let mut split = FrameCutter::new(params(Metric::AccelRms));
    let mut b = Vec::new();
    split.push(T, &rec("m", "s", T, 1000.0, data[..700].to_vec()), &mut b).unwrap();
    assert!(b.is_empty());
    split.push(T + 1, &rec("m", "s", T + 700, 1000.0, data[700..1300].to_vec()), &mut b).unwrap();
    assert_eq!(b.len(), 1);
    split.push(T + 2, &rec("m", "s", T + 1300, 1000.0, data[1300..].to_vec()), &mut b).unwrap();
    split.advance(T + 60_000, &mut b);

    assert_eq!(a.len(), 2);
    assert_eq!(b.len(), 2);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.event_id, y.event_id);
        assert_eq!(x.ts_ms, y.ts_ms);
        assert_eq!(x.quality, Quality::Good);
        assert_eq!(y.quality, Quality::Good);
        assert!(rel(x.value, y.value) < 1e-12);
        assert!(rel(x.value, 1.3 / 2f64.sqrt()) < 1e-9);
    }
}

#[test]
fn gap_makes_frame_uncertain_and_is_not_an_overlap() {
    let mut c = FrameCutter::new(params(Metric::AccelRms));
    let mut out = Vec::new();
    c.push(T, &rec("m", "s", T, 100.0, sine(1.0, 1.0, 40, 0.0)), &mut out).unwrap();
    // skip 0.4..0.5 s: 10 samples missing
    c.push(T + 1, &rec("m", "s", T + 500, 100.0, vec![0.1; 50]), &mut out).unwrap();
    c.push(T + 2, &rec("m", "s", T + 1000, 100.0, vec![0.1; 100]), &mut out).unwrap();
    c.advance(T + 60_000, &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].quality, Quality::Uncertain);
    assert_eq!(out[1].quality, Quality::Good);
}

#[test]
fn overlap_is_refused_and_state_unchanged() {
    let mut c = FrameCutter::new(params(Metric::AccelRms));
    let mut out = Vec::new();
    c.push(T, &rec("m", "s", T, 100.0, vec![1.0; 50]), &mut out).unwrap();
    let before = format!("{c:?}");
    // last sample at T+490; next expected at T+500; T+495 is within half a period
    let e = c.push(T + 1, &rec("m", "s", T + 494, 100.0, vec![9.0; 10]), &mut out).unwrap_err();
    assert_eq!(e.reason, Reason::SamplesOverlap);
    let e = e.detail;
    assert!(e.contains("m/s") && e.contains(&(T + 494).to_string()), "{e}");
    assert!(e.contains(&format!("{}", T + 490)), "{e}");
    // a replay of the start precedes it
    assert!(c.push(T + 2, &rec("m", "s", T, 100.0, vec![9.0; 10]), &mut out).is_err());
    assert_eq!(format!("{c:?}"), before);
    assert!(out.is_empty());
    // exactly on schedule (and a little early, within half a period) is fine
    c.push(T + 3, &rec("m", "s", T + 496, 100.0, vec![1.0; 50]), &mut out).unwrap();
    c.advance(T + 60_000, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].quality, Quality::Good);
    assert_eq!(out[0].value, 0.0);
}

#[test]
fn idle_flush_after_timeout_only() {
    let mut c = FrameCutter::new(params(Metric::AccelRms));
    let mut out = Vec::new();
    c.push(T + 300, &rec("m", "a", T, 100.0, vec![1.0, 2.0]), &mut out).unwrap();
    c.push(T + 200, &rec("m", "b", T, 100.0, vec![1.0, 2.0]), &mut out).unwrap();
    assert_eq!(c.next_flush_due(), Some(T + 15_200));
    c.advance(T + 15_199, &mut out);
    assert!(out.is_empty());
    assert_eq!(c.open_frames(), 2);
    c.advance(T + 15_200, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].sensor, "b");
    assert_eq!(c.next_flush_due(), Some(T + 15_300));
    c.advance(T + 15_300, &mut out);
    assert_eq!(c.next_flush_due(), None);
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].sensor, "a");
    assert_eq!(c.open_frames(), 0);
    assert_eq!(out[0].quality, Quality::Uncertain);
    assert!((out[0].value - 0.5).abs() < 1e-15);
    // nothing more to flush
    c.advance(T + 90_000, &mut out);
    assert_eq!(out.len(), 2);
}

#[test]
fn resuming_inside_a_flushed_frame_does_not_emit_it_twice() {
    let mut c = FrameCutter::new(params(Metric::AccelRms));
    let mut out = Vec::new();
    c.push(T, &rec("m", "s", T, 100.0, vec![1.0; 50]), &mut out).unwrap();
    c.advance(T + 30_000, &mut out);
    assert_eq!(out.len(), 1);
    c.push(T + 30_001, &rec("m", "s", T + 500, 100.0, vec![1.0; 60]), &mut out).unwrap();
    assert_eq!(c.dropped_samples(), 50);
    c.advance(T + 90_000, &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].ts_ms, T + 2000);
    assert_eq!(out[1].seq, 2);
}

#[test]
fn seq_event_id_and_sample_ref() {
    let mut c = FrameCutter::new(FrameParams {
        gateway: "gw-7".into(),
        metric: Metric::AccelRms,
        flush_after_ms: 15_000,
        machines: BTreeMap::new(),
    });
    let mut out = Vec::new();
    let clock = ClockEvidence { state: ClockState::Synced, err_ms: Some(3) };
    let mut r = rec("press-7", "s1", T, 10.0, vec![0.0; 30]);
    r.clock = Some(clock);
    c.push(T + 3000, &r, &mut out).unwrap();
    // jump far ahead: no events for the empty frames between
    c.push(T + 9000, &rec("press-7", "s1", T + 3_600_000, 10.0, vec![0.0; 10]), &mut out).unwrap();
    c.advance(T + 100_000, &mut out);
    let ids: Vec<&str> = out.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(ids, ["gw-7.s1.1", "gw-7.s1.2", "gw-7.s1.3", "gw-7.s1.4"]);
    let want = Event {
        event_id: "gw-7.s1.2".into(),
        machine: "press-7".into(),
        sensor: "s1".into(),
        seq: 2,
        ts_ms: T + 2000,
        clock,
        metric: Metric::AccelRms,
        value: 0.0,
        unit: Unit::G,
        schema: 1,
        quality: Quality::Good,
        samples: Some(SampleRef { block_seq: 2, from_ms: T + 1000, to_ms: T + 2000 }),
        // Constant samples: every moment 0; at 10 Hz no velocity (Nyquist below 1000 Hz).
        features: Some(Box::new(
            [Feature::AccelRms, Feature::AccelPeak, Feature::CrestFactor, Feature::Kurtosis]
                .into_iter()
                .map(|f| (f, 0.0))
                .collect(),
        )),
    };
    assert_eq!(out[1], want);
    assert_eq!(out[3].ts_ms, T + 3_601_000);
    assert_eq!(out[3].clock, ClockEvidence::UNKNOWN);
    assert_eq!(c.last_seq("press-7", "s1"), Some(4));
}

#[test]
fn single_sample_frame_is_uncertain_with_zero_rms() {
    let mut c = FrameCutter::new(params(Metric::AccelRms));
    let mut out = Vec::new();
    c.push(T, &rec("m", "s", T + 999, 1000.0, vec![5.0]), &mut out).unwrap();
    c.advance(T + 31_000, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].value, 0.0);
    assert_eq!(out[0].quality, Quality::Uncertain);
}

#[test]
fn sensor_name_on_two_machines_is_refused() {
    let mut c = FrameCutter::new(params(Metric::AccelRms));
    let mut out = Vec::new();
    c.push(T, &rec("a", "de", T, 10.0, vec![0.0; 5]), &mut out).unwrap();
    let e = c.push(T, &rec("b", "de", T, 10.0, vec![0.0; 5]), &mut out).unwrap_err();
    assert_eq!(e.reason, Reason::SensorConflict);
    assert!(e.detail.contains("collide"), "{e}");
    assert_eq!(c.open_frames(), 1);
}

#[test]
fn invalid_records_are_refused() {
    let mut c = FrameCutter::new(params(Metric::AccelRms));
    let mut out = Vec::new();
    assert!(c.push(T, &rec("m", "s", T, 0.0, vec![1.0]), &mut out).is_err());
    assert!(c.push(T, &rec("m", "s", T, f64::NAN, vec![1.0]), &mut out).is_err());
    let e = c.push(T, &rec("m", "s", T, 10.0, vec![1.0, f64::INFINITY]), &mut out).unwrap_err();
    assert_eq!(e.reason, Reason::NonFiniteValue);
    assert_eq!(c.open_frames(), 0);
}

#[test]
fn convertible_unit_change_inside_a_frame_is_converted() {
    let mut c = FrameCutter::new(params(Metric::AccelPeak));
    let mut out = Vec::new();
    c.push(T, &rec("m", "s", T, 4.0, vec![0.0, 0.0]), &mut out).unwrap();
    let mut r = rec("m", "s", T + 500, 4.0, vec![0.0, 4.0 * crate::event::STANDARD_GRAVITY]);
    r.unit = Unit::Ms2;
    c.push(T + 1, &r, &mut out).unwrap();
    c.advance(T + 60_000, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].unit, Unit::G);
    assert!((out[0].value - 3.0).abs() < 1e-12);
}

#[test]
fn restore_seq_continues_numbering() {
    let mut c = FrameCutter::new(params(Metric::AccelRms));
    c.restore_seq("m", "s", 41).unwrap();
    assert!(c.restore_seq("other", "s", 1).is_err());
    let mut out = Vec::new();
    c.push(T, &rec("m", "s", T, 10.0, vec![0.0; 10]), &mut out).unwrap();
    c.advance(T + 30_000, &mut out);
    assert_eq!(out[0].seq, 42);
    assert_eq!(out[0].event_id, "gw.s.42");
}

proptest! {
    /// Cutting the same samples into records of any sizes (keeping the schedule) derives the same
    /// events, up to float rounding.
    #[test]
    fn record_boundaries_do_not_matter(
        cuts in proptest::collection::vec(1usize..700, 1..12),
        start in 0i64..5000,
        amp in 0.01f64..10.0,
    ) {
        let n = 2500usize;
        let data = sine(amp, 13.0, n, 0.5);
        let t0 = T + start;
        let mut one = FrameCutter::new(params(Metric::AccelRms));
        let mut a = Vec::new();
        one.push(t0, &rec("m", "s", t0, 1000.0, data.clone()), &mut a).unwrap();
        one.advance(t0 + 1_000_000, &mut a);

        let mut many = FrameCutter::new(params(Metric::AccelRms));
        let mut b = Vec::new();
        let mut i = 0usize;
        let mut ci = 0usize;
        while i < n {
            let len = cuts[ci % cuts.len()].min(n - i);
            ci += 1;
            many.advance(t0, &mut b);
            many.push(t0, &rec("m", "s", t0 + i as i64, 1000.0, data[i..i + len].to_vec()), &mut b).unwrap();
            i += len;
        }
        many.advance(t0 + 1_000_000, &mut b);
        prop_assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            prop_assert_eq!(&x.event_id, &y.event_id);
            prop_assert_eq!(x.ts_ms, y.ts_ms);
            prop_assert_eq!(x.quality, y.quality);
            prop_assert!((x.value - y.value).abs() <= 1e-12 * x.value.abs().max(1e-9));
        }
    }
}

/// A derived frame's clock is the worst of its samples' in the order an alert's `clock_trust`
/// uses (docs/contracts.md section 3): `unknown` is better than `unsynced` and `stepped`.
#[test]
fn worse_clock_follows_the_contract_order() {
    use crate::stamp::frames::worse_clock;
    let c = |state, err_ms| ClockEvidence { state, err_ms };
    let order = [
        ClockState::Synced,
        ClockState::Holdover,
        ClockState::Unknown,
        ClockState::Unsynced,
        ClockState::Stepped,
    ];
    for (i, &a) in order.iter().enumerate() {
        for &b in &order[i + 1..] {
            assert_eq!(worse_clock(c(a, Some(1)), c(b, Some(1))).state, b);
            assert_eq!(worse_clock(c(b, Some(1)), c(a, None)).state, b);
        }
    }
    let (small, none) = (c(ClockState::Unknown, Some(5)), c(ClockState::Unknown, None));
    assert_eq!(worse_clock(small, none), none, "a missing bound counts as the largest");
}

/// One samples record of the clock property: sensor index, gap after the sensor's last sample
/// (ms), rate index, sample count, clock evidence (`None`: the record carries none), and whether
/// the cutter is snapshotted and restored after it.
type ClockCase = (usize, u16, usize, usize, Option<ClockEvidence>, bool);

fn clock_evidence() -> impl Strategy<Value = ClockEvidence> {
    (0..ClockState::ALL.len(), proptest::option::of(0u32..4))
        .prop_map(|(s, err_ms)| ClockEvidence { state: ClockState::ALL[s], err_ms })
}

fn clock_case() -> impl Strategy<Value = ClockCase> {
    (
        0usize..4,
        0u16..1500,
        0usize..4,
        1usize..40,
        proptest::option::of(clock_evidence()),
        any::<bool>(),
    )
}

/// How little a clock can be trusted: its state in the contract's order (section 3), then its
/// error bound, a missing bound the largest.
fn distrust(c: ClockEvidence) -> (u8, u64) {
    (c.state.distrust(), c.err_ms.map_or(u64::MAX, u64::from))
}

proptest! {
    /// A derived event's clock is never better than the clock of any sample in its frame, and is
    /// one of theirs (the worst): random records of random clock evidence, frames spanning
    /// records, rates and sensors mixed, snapshots taken between records.
    #[test]
    fn a_derived_event_s_clock_is_never_better_than_its_samples(
        cases in proptest::collection::vec(clock_case(), 1..60),
    ) {
        const RATES: [f64; 4] = [1.0, 4.0, 10.0, 33.3];
        let mut c = FrameCutter::new(params(Metric::AccelRms));
        let mut out = Vec::new();
        // (machine, sensor, frame) -> the clocks of the samples taken into it
        let mut taken: BTreeMap<(String, String, i64), Vec<ClockEvidence>> = BTreeMap::new();
        let mut last: BTreeMap<usize, f64> = BTreeMap::new();
        for (i, &(s, gap, rate, n, clock, snapshot)) in cases.iter().enumerate() {
            let rate = RATES[rate];
            let (machine, sensor) = (if s < 3 { "m0" } else { "m1" }, format!("s{s}"));
            let earliest = last.get(&s).map_or(T as f64, |&l| l + 500.0 / rate);
            let t0 = earliest.ceil() as i64 + i64::from(gap);
            let mut r = rec(machine, &sensor, t0, rate, vec![0.5; n]);
            r.clock = clock;
            c.push(T + i as i64, &r, &mut out).unwrap();
            for j in 0..n {
                let t = t0 as f64 + (j as f64) * 1000.0 / rate;
                let k = (t / 1000.0).floor() as i64;
                let key = (machine.to_owned(), sensor.clone(), k);
                taken.entry(key).or_default().push(clock.unwrap_or(ClockEvidence::UNKNOWN));
            }
            last.insert(s, t0 as f64 + ((n - 1) as f64) * 1000.0 / rate);
            if snapshot {
                c = FrameCutter::restore(params(Metric::AccelRms), &c.snapshot()).unwrap();
            }
        }
        c.advance(T + 1_000_000_000, &mut out);
        prop_assert_eq!(c.dropped_samples(), 0);
        prop_assert_eq!(out.len(), taken.len(), "one event per frame with samples");
        for e in &out {
            let k = e.samples.as_ref().unwrap().from_ms / FRAME_MS;
            let clocks = &taken[&(e.machine.clone(), e.sensor.clone(), k)];
            for &sample in clocks {
                prop_assert!(
                    distrust(e.clock) >= distrust(sample),
                    "{}: {:?} is better than its sample's {:?}", e.event_id, e.clock, sample
                );
            }
            prop_assert!(clocks.contains(&e.clock), "{}: {:?} not among {:?}", e.event_id, e.clock, clocks);
        }
    }
}

/// A second of a 120 Hz sine (amplitude 1 g) plus a 30 Hz one (0.5 g), sampled at `rate` Hz.
fn tones(t0: i64, rate: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let t = (t0 as f64 + i as f64 * 1000.0 / rate) / 1000.0;
            (2.0 * std::f64::consts::PI * 120.0 * t).sin()
                + 0.5 * (2.0 * std::f64::consts::PI * 30.0 * t).sin()
        })
        .collect()
}

#[test]
fn derived_events_carry_the_extractors_features_of_their_frame() {
    let mut machines = BTreeMap::new();
    let bearing = crate::features::Bearing {
        shaft_hz: 1797.0 / 60.0,
        orders: crate::features::DefectOrders::SKF_6205,
    };
    let with_bearing = MachineFeatures { bearing: Some(bearing), ..MachineFeatures::default() };
    machines.insert("m".to_owned(), with_bearing.clone());
    let mut c = FrameCutter::new(FrameParams { machines, ..params(Metric::AccelRms) });
    let rate = 12_000.0;
    let data = tones(T, rate, 24_000);
    let mut out = Vec::new();
    c.push(T, &rec("m", "s", T, rate, data.clone()), &mut out).unwrap();
    c.advance(T + 100_000, &mut out);
    assert_eq!(out.len(), 2);
    let want = crate::features::Extractor::new()
        .extract(&data[..12_000], &with_bearing.params(crate::features::AccelUnit::G, rate))
        .unwrap();
    let got = out[0].features.as_deref().expect("features");
    for (name, value) in want.each() {
        let f = Feature::from_name(name).unwrap();
        assert_eq!(got.get(f).map(f64::to_bits), value.map(f64::to_bits), "{name}");
    }
    assert_eq!(got.get(Feature::AccelRms), Some(out[0].value));
    // 120 Hz at 1 g is 9.80665 / (2 pi 120) m/s rms / sqrt 2, 30 Hz at 0.5 g twice that.
    let v120 = 9.80665 / (2.0 * std::f64::consts::PI * 120.0) / 2f64.sqrt() * 1000.0;
    let v = got.get(Feature::VelocityRms).unwrap();
    assert!((v - (v120 * v120 + (2.0 * v120).powi(2)).sqrt()).abs() < 1e-6 * v, "{v}");
    assert!(got.get(Feature::EnvBpfo).is_some(), "the bearing's indicators");
}

#[test]
fn features_follow_what_the_frame_allows() {
    let mut c = FrameCutter::new(params(Metric::AccelRms));
    let mut out = Vec::new();
    // 1 kHz: Nyquist 500 Hz is below the velocity band's top; no bearing: no envelope.
    c.push(T, &rec("m", "s", T, 1000.0, tones(T, 1000.0, 1000)), &mut out).unwrap();
    // Velocity samples give no acceleration features.
    let mut v = rec("m", "v", T, 1000.0, vec![1.0, 2.0]);
    v.unit = Unit::MmS;
    c.push(T, &v, &mut out).unwrap();
    c.advance(T + 100_000, &mut out);
    let f = out[0].features.as_deref().unwrap();
    assert!(f.get(Feature::Kurtosis).is_some());
    assert_eq!(f.get(Feature::VelocityRms), None);
    assert_eq!(f.get(Feature::EnvBpfo), None);
    assert_eq!(out[1].sensor, "v");
    assert_eq!(out[1].features, None);
}

#[test]
fn a_frame_keeps_at_most_a_second_of_samples_and_otherwise_gives_no_features() {
    let mut c = FrameCutter::new(params(Metric::AccelRms));
    let mut out = Vec::new();
    // Samples of 10 Hz and 20 Hz in one frame: not evenly spaced, no features.
    c.push(T, &rec("m", "s", T, 10.0, vec![1.0, 2.0]), &mut out).unwrap();
    c.push(T, &rec("m", "s", T + 250, 20.0, vec![3.0; 5]), &mut out).unwrap();
    let r = rec("m", "s", T + 1000, 10.0, vec![1.0; 10]);
    c.push(T, &r, &mut out).unwrap();
    assert_eq!(c.unbuffered_frames(), 0);
    c.advance(T + 100_000, &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].features, None, "mixed rates");
    assert!(out[1].features.is_some());
}

#[test]
fn an_overflowing_frame_is_counted_and_keeps_its_value() {
    // A frame opened at 10.4 Hz keeps ceil(10.4) + 2 = 13 samples; 30 more at 40 Hz in the
    // same second outgrow that.
    let mut c = FrameCutter::new(params(Metric::AccelRms));
    let mut out = Vec::new();
    c.push(T, &rec("m", "s", T, 10.4, vec![1.0]), &mut out).unwrap();
    c.push(T, &rec("m", "s", T + 100, 40.0, (0..30).map(f64::from).collect()), &mut out).unwrap();
    assert_eq!(c.unbuffered_frames(), 1);
    c.advance(T + 100_000, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].features, None);
    let mut plain = FrameCutter::new(params(Metric::AccelRms));
    let mut want = Vec::new();
    plain.push(T, &rec("m", "s", T, 10.4, vec![1.0]), &mut want).unwrap();
    let r = rec("m", "s", T + 100, 40.0, (0..30).map(f64::from).collect());
    plain.push(T, &r, &mut want).unwrap();
    plain.advance(T + 100_000, &mut want);
    assert_eq!(out[0].value.to_bits(), want[0].value.to_bits());
}

#[test]
fn snapshot_mid_frame_gives_the_same_features_as_an_uninterrupted_run() {
    let rate = 4096.0;
    let data = tones(T, rate, 4096 * 3);
    // Records of 1024 samples: a quarter second each, four to a frame.
    let recs: Vec<SamplesRecord> = data
        .chunks(1024)
        .enumerate()
        .map(|(i, d)| rec("m", "s", T + 250 * i as i64, rate, d.to_vec()))
        .collect();
    let run = |split: Option<usize>| {
        let mut c = FrameCutter::new(params(Metric::AccelRms));
        let mut out = Vec::new();
        for (i, r) in recs.iter().enumerate() {
            if split == Some(i) {
                c = FrameCutter::restore(params(Metric::AccelRms), &c.snapshot()).unwrap();
            }
            c.push(i as i64, r, &mut out).unwrap();
        }
        c.advance(T + 100_000, &mut out);
        out
    };
    let whole = run(None);
    assert_eq!(whole.len(), 3);
    assert!(whole.iter().all(|e| e
        .features
        .as_ref()
        .and_then(|f| f.get(Feature::VelocityRms))
        .is_some()));
    for split in 1..recs.len() {
        assert_eq!(run(Some(split)), whole, "restored before record {split}");
    }
}
