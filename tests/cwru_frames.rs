//! Feature extraction on real data: the CWRU trace (fixtures/cwru/README.md) cut by `FrameCutter`
//! must give exactly the derived events the independent Python reference computed
//! (fixtures/expected/cwru.frames.json).

mod support;

use std::collections::BTreeMap;

use linegate::event::features::Feature;
use linegate::event::{Event, Metric, Quality, Unit};
use linegate::features::{Band, Bearing, DefectOrders, EnvelopeMethod, FEATURE_NAMES};
use linegate::stamp::{FrameCutter, FrameParams, MachineFeatures};
use linegate::trace::SamplesRecord;
use serde_json::Value;
use support::fixture;

/// A deliberately minimal reading of a `samples` line (the real trace parser lives in
/// `trace::parse`); this test trusts its own fixture.
fn samples_record(v: &Value) -> SamplesRecord {
    let s = |k: &str| v[k].as_str().unwrap().to_owned();
    let unit = match v["unit"].as_str().unwrap() {
        "g" => Unit::G,
        "m/s2" => Unit::Ms2,
        other => panic!("unexpected unit {other}"),
    };
    SamplesRecord {
        machine: s("machine"),
        sensor: s("sensor"),
        t0_ms: v["t0_ms"].as_i64().unwrap(),
        rate_hz: v["rate_hz"].as_f64().unwrap(),
        unit,
        axis: v.get("axis").and_then(Value::as_str).map(str::to_owned),
        clock: None,
        data: v["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect(),
    }
}

/// The cutter as `cwru.toml` configures it (gateway gw-cwru, RMS, half of a 30 s idle timeout).
fn cwru_cutter() -> FrameCutter {
    FrameCutter::new(FrameParams {
        gateway: "gw-cwru".into(),
        metric: Metric::AccelRms,
        flush_after_ms: 15_000,
        machines: BTreeMap::new(),
    })
}

/// The cutter with the feature parameters of fixtures/cwru/assets.toml: both machines above
/// 600 rpm (10-1000 Hz velocity band), an SKF 6205 bearing, the 2-5 kHz fixed envelope band.
fn cwru_params_with_assets() -> FrameParams {
    let machine = |rpm: f64| MachineFeatures {
        velocity_band: Band::ISO,
        bearing: Some(Bearing { shaft_hz: rpm / 60.0, orders: DefectOrders::SKF_6205 }),
        envelope_band: Band::new(2000.0, 5000.0),
        envelope: EnvelopeMethod::Fixed,
    };
    FrameParams {
        gateway: "gw-cwru".into(),
        metric: Metric::AccelRms,
        flush_after_ms: 15_000,
        machines: BTreeMap::from([
            ("motor-a".to_owned(), machine(1796.0)),
            ("motor-b".to_owned(), machine(1797.0)),
        ]),
    }
}

fn run_trace() -> (Vec<Event>, FrameCutter) {
    run_trace_with(cwru_cutter(), None)
}

/// Replays the trace through `cutter`; with `restore`, the cutter is snapshotted and restored
/// with those parameters before every samples line (most of them fall inside a frame).
fn run_trace_with(
    mut cutter: FrameCutter,
    restore: Option<&FrameParams>,
) -> (Vec<Event>, FrameCutter) {
    let text = std::fs::read_to_string(fixture("fixtures/traces/cwru.jsonl")).unwrap();
    let mut out = Vec::new();
    let mut last_at = i64::MIN;
    for (n, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line).unwrap();
        let at = v["at"].as_i64().unwrap();
        assert!(at >= last_at, "line {}: `at` goes backwards", n + 1);
        last_at = at;
        cutter.advance(at, &mut out);
        match v["kind"].as_str().unwrap() {
            "samples" => {
                if let Some(params) = restore {
                    cutter = FrameCutter::restore(params.clone(), &cutter.snapshot()).unwrap();
                }
                let rec = samples_record(&v);
                cutter.push(at, &rec, &mut out).unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
            }
            "tick" => {}
            other => panic!("line {}: unexpected kind {other}", n + 1),
        }
    }
    (out, cutter)
}

#[test]
fn cwru_trace_frames_match_the_reference() {
    let (events, cutter) = run_trace();
    assert_eq!(cutter.open_frames(), 0, "the final ticks flush every sensor");
    assert_eq!(cutter.dropped_samples(), 0);

    // Emission order: per sensor, seq 1, 2, 3, ... with ts increasing.
    let mut next: BTreeMap<(&str, &str), (u64, i64)> = BTreeMap::new();
    for e in &events {
        let slot = next.entry((e.machine.as_str(), e.sensor.as_str())).or_insert((1, i64::MIN));
        assert_eq!(e.seq, slot.0, "{} emitted out of seq order", e.event_id);
        assert!(e.ts_ms > slot.1, "{} emitted out of ts order", e.event_id);
        *slot = (e.seq + 1, e.ts_ms);
        assert_eq!(e.metric, Metric::AccelRms);
        assert_eq!(e.unit, Unit::G);
        assert_eq!(e.schema, 1);
        let r = e.samples.unwrap();
        assert_eq!((r.block_seq, r.from_ms, r.to_ms), (e.seq, e.ts_ms - 1000, e.ts_ms));
    }

    let expected: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(fixture("fixtures/expected/cwru.frames.json")).unwrap(),
    )
    .unwrap();
    let mut got: Vec<&Event> = events.iter().collect();
    got.sort_by(|a, b| (&a.machine, &a.sensor, a.seq).cmp(&(&b.machine, &b.sensor, b.seq)));
    assert_eq!(got.len(), expected.len(), "number of derived events");
    let mut worst = 0f64;
    for (e, x) in got.iter().zip(&expected) {
        assert_eq!(e.event_id, x["event_id"].as_str().unwrap());
        assert_eq!(e.machine, x["machine"].as_str().unwrap());
        assert_eq!(e.sensor, x["sensor"].as_str().unwrap());
        assert_eq!(e.seq, x["seq"].as_u64().unwrap());
        assert_eq!(e.ts_ms, x["ts_ms"].as_i64().unwrap(), "{}", e.event_id);
        let q = match x["quality"].as_str().unwrap() {
            "good" => Quality::Good,
            "uncertain" => Quality::Uncertain,
            other => panic!("unexpected quality {other}"),
        };
        assert_eq!(e.quality, q, "{}", e.event_id);
        let want = x["value"].as_f64().unwrap();
        let rel = (e.value - want).abs() / want.abs();
        worst = worst.max(rel);
        assert!(rel < 1e-6, "{}: value {} vs reference {want} (rel {rel:e})", e.event_id, e.value);
    }
    eprintln!("largest relative difference from the reference: {worst:e}");
    // The fixture really contains one gappy (uncertain) frame.
    assert_eq!(got.iter().filter(|e| e.quality == Quality::Uncertain).count(), 1);
}

/// The same trace with every record delivered in two parts must give the same events: record
/// boundaries are not frame boundaries.
#[test]
fn cwru_trace_split_records_give_the_same_events() {
    let (whole, _) = run_trace();
    let text = std::fs::read_to_string(fixture("fixtures/traces/cwru.jsonl")).unwrap();
    let mut cutter = cwru_cutter();
    let mut out = Vec::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let at = v["at"].as_i64().unwrap();
        cutter.advance(at, &mut out);
        if v["kind"] == "samples" {
            let rec = samples_record(&v);
            // cut at 0.1 s (1200 samples at 12 kHz), so the second half starts on an integer ms
            let cut = rec.data.len().min(1200);
            let mut a = rec.clone();
            a.data.truncate(cut);
            let mut b = rec.clone();
            b.data.drain(..cut);
            b.t0_ms = rec.t0_ms + (cut as f64 * 1000.0 / rec.rate_hz) as i64;
            cutter.push(at, &a, &mut out).unwrap();
            cutter.push(at, &b, &mut out).unwrap();
        }
    }
    assert_eq!(whole.len(), out.len());
    for (x, y) in whole.iter().zip(&out) {
        assert_eq!((&x.event_id, x.ts_ms, x.quality), (&y.event_id, y.ts_ms, y.quality));
        assert!((x.value - y.value).abs() <= 1e-12 * x.value, "{}", x.event_id);
    }
}

/// Every derived event carries the features fixtures/cwru/features_reference.py computed for its
/// frame: within 1e-9 relative, the envelope indicators within 1e-6 (tests/features_reference.rs
/// explains the looser bound).
#[test]
fn cwru_derived_events_carry_the_reference_features() {
    let (events, _) = run_trace_with(FrameCutter::new(cwru_params_with_assets()), None);
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("fixtures/expected/cwru.features.json")).unwrap(),
    )
    .unwrap();
    let frames = reference["frames"].as_array().unwrap();
    assert_eq!(events.len(), frames.len());
    for want in frames {
        let (machine, seq) = (want["machine"].as_str().unwrap(), want["seq"].as_u64().unwrap());
        let e = events.iter().find(|e| e.machine == machine && e.seq == seq).unwrap();
        let features = e.features.as_deref().unwrap_or_else(|| panic!("{}: none", e.event_id));
        assert_eq!(features.len(), FEATURE_NAMES.len(), "{}: every feature", e.event_id);
        for name in FEATURE_NAMES {
            let got = features.get(Feature::from_name(name).unwrap()).unwrap();
            let want = want[name].as_f64().unwrap();
            let tol = if name.starts_with("env_") { 1e-6 } else { 1e-9 };
            assert!(
                (got - want).abs() <= tol * want.abs(),
                "{} {name}: {got} vs the reference's {want}",
                e.event_id
            );
        }
        assert_eq!(features.get(Feature::AccelRms).unwrap().to_bits(), e.value.to_bits());
    }
}

/// Restoring the cutter from its snapshot before every samples record (mid-frame) derives the
/// same events, features included, bit for bit, as the uninterrupted run.
#[test]
fn cwru_snapshot_mid_frame_gives_the_same_features() {
    let params = cwru_params_with_assets();
    let (whole, _) = run_trace_with(FrameCutter::new(params.clone()), None);
    let (restored, _) = run_trace_with(FrameCutter::new(params.clone()), Some(&params));
    assert!(whole.iter().all(|e| e.features.is_some()));
    assert_eq!(whole, restored);
}
