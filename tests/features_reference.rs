//! The features of `linegate::features` against what nobody here wrote in Rust:
//!
//! - every frame of the CWRU trace against the independent numpy reference
//!   (`fixtures/cwru/features_reference.py` → `fixtures/expected/cwru.features.json`, computed
//!   from the asset table `fixtures/cwru/assets.toml`): `velocity_rms` within 1e-9 relative, the
//!   envelope indicators of every method within 1e-6;
//! - `accel_rms` and `accel_peak` bit for bit against `FrameCutter`'s derived events on random
//!   records;
//! - a frame of a length seen before allocates nothing (a counting global allocator).

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;

use linegate::event::{Metric, Unit};
use linegate::features::{
    AccelUnit, Band, Bearing, Defect, DefectOrders, EnvelopeMethod, Extractor, Features, Params,
};
use linegate::stamp::{FrameCutter, FrameParams};
use linegate::synth::Rng;
use linegate::trace::SamplesRecord;
use serde_json::Value;
use support::fixture;

/// Counts the allocations of the thread that makes them.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count_one() {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is passed on unchanged to the system allocator; counting touches only a
// const-initialised thread-local cell, which never allocates.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A frame of the trace cut the obvious way: sample `i` of a record at
/// `t0_ms + i * 1000 / rate_hz`, frame `floor(t / 1000)`.
struct Frame {
    machine: String,
    sensor: String,
    seq: u64,
    ts_ms: i64,
    rate_hz: f64,
    samples: Vec<f64>,
}

fn trace_frames() -> Vec<Frame> {
    let text = std::fs::read_to_string(fixture("fixtures/traces/cwru.jsonl")).unwrap();
    // (machine, sensor) -> frame index -> (rate, samples)
    type Frames = BTreeMap<i64, (f64, Vec<f64>)>;
    let mut by_sensor: BTreeMap<(String, String), Frames> = BTreeMap::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["kind"] != "samples" {
            continue;
        }
        assert_eq!(v["unit"], "g", "the CWRU trace is in g");
        let key =
            (v["machine"].as_str().unwrap().to_owned(), v["sensor"].as_str().unwrap().to_owned());
        let (t0, rate) = (v["t0_ms"].as_i64().unwrap() as f64, v["rate_hz"].as_f64().unwrap());
        let frames = by_sensor.entry(key).or_default();
        for (i, x) in v["data"].as_array().unwrap().iter().enumerate() {
            let k = ((t0 + (i as f64 * 1000.0) / rate) / 1000.0).floor() as i64;
            frames.entry(k).or_insert_with(|| (rate, Vec::new())).1.push(x.as_f64().unwrap());
        }
    }
    let mut out = Vec::new();
    for ((machine, sensor), frames) in by_sensor {
        for (n, (k, (rate_hz, samples))) in frames.into_iter().enumerate() {
            let (machine, sensor) = (machine.clone(), sensor.clone());
            out.push(Frame {
                machine,
                sensor,
                seq: n as u64 + 1,
                ts_ms: (k + 1) * 1000,
                rate_hz,
                samples,
            });
        }
    }
    out
}

/// `"2kHz"` → 2000.0, `"500Hz"` → 500.0.
fn hz(v: &toml::Value) -> f64 {
    let s = v.as_str().unwrap();
    match s.strip_suffix("kHz") {
        Some(k) => k.parse::<f64>().unwrap() * 1000.0,
        None => s.strip_suffix("Hz").unwrap().parse().unwrap(),
    }
}

/// Each machine's parameters (without the method) from the asset table.
fn assets() -> BTreeMap<String, (f64, DefectOrders, Band)> {
    let text = std::fs::read_to_string(fixture("fixtures/cwru/assets.toml")).unwrap();
    let table: toml::Table = text.parse().unwrap();
    let machines = table["machines"].as_table().unwrap();
    let mut out = BTreeMap::new();
    for (name, m) in machines {
        let b = &m["bearing"];
        let order = |k: &str| b[k].as_float().unwrap();
        let orders = DefectOrders {
            bpfo: order("bpfo"),
            bpfi: order("bpfi"),
            bsf: order("bsf"),
            ftf: order("ftf"),
        };
        let band = m["envelope_band"].as_array().unwrap();
        let rpm = m["rpm"].as_integer().unwrap() as f64;
        out.insert(name.clone(), (rpm, orders, Band::new(hz(&band[0]), hz(&band[1]))));
    }
    out
}

/// `|got - want| <= tol * |want|`, naming what differs.
fn close(what: &str, got: f64, want: &Value, tol: f64) {
    let want = want.as_f64().unwrap_or_else(|| panic!("{what}: reference has {want}"));
    assert!((got - want).abs() <= tol * want.abs(), "{what}: {got} vs the reference's {want}");
}

fn check_envelope(what: &str, f: &Features, want: &Value) {
    let e = f.envelope.as_ref().unwrap_or_else(|| panic!("{what}: no envelope"));
    close(&format!("{what} band low"), e.band.lo_hz, &want["band_hz"][0], 1e-12);
    close(&format!("{what} band high"), e.band.hi_hz, &want["band_hz"][1], 1e-12);
    if let Some(choice) = &e.kurtogram {
        assert_eq!(choice.bands as u64, want["bands"].as_u64().unwrap(), "{what}: kurtogram level");
        assert_eq!(choice.index as u64, want["index"].as_u64().unwrap(), "{what}: kurtogram band");
        close(&format!("{what} SK"), choice.kurtosis, &want["sk"], 1e-6);
    }
    for d in Defect::ALL {
        let (what, want) = (format!("{what} {}", d.name()), &want[d.name()]);
        let i =
            e.get(d).unwrap_or_else(|| panic!("{what}: no indicator, the reference has {want}"));
        close(&format!("{what} defect_hz"), i.defect_hz, &want["defect_hz"], 1e-12);
        assert_eq!(Some(i.peak_hz), want["peak_hz"].as_f64(), "{what}: peak frequency");
        for (field, got) in [("peak", i.peak), ("floor", i.floor), ("value", i.value)] {
            close(&format!("{what} {field}"), got, &want[field], 1e-6);
        }
    }
}

#[test]
fn cwru_features_agree_with_the_numpy_reference() {
    let text = std::fs::read_to_string(fixture("fixtures/expected/cwru.features.json")).unwrap();
    let expected: Value = serde_json::from_str(&text).unwrap();
    let expected = expected["frames"].as_array().unwrap();
    let frames = trace_frames();
    assert_eq!(frames.len(), expected.len(), "frames in the trace against the reference");
    let assets = assets();
    let mut ex = Extractor::new();
    for (frame, want) in frames.iter().zip(expected) {
        let what = format!("{}/{} seq {}", frame.machine, frame.sensor, frame.seq);
        assert_eq!(want["sensor"], frame.sensor.as_str(), "{what}");
        assert_eq!(want["seq"].as_u64(), Some(frame.seq), "{what}");
        assert_eq!(want["ts_ms"].as_i64(), Some(frame.ts_ms), "{what}");
        assert_eq!(want["n"].as_u64(), Some(frame.samples.len() as u64), "{what}");
        let (rpm, orders, envelope_band) = assets[&frame.machine];
        for method in EnvelopeMethod::ALL {
            let params = Params {
                velocity_band: Band::iso_for_rpm(Some(rpm)),
                bearing: Some(Bearing { shaft_hz: rpm / 60.0, orders }),
                envelope_band,
                envelope: method,
                ..Params::new(AccelUnit::G, frame.rate_hz)
            };
            let f = ex.extract(&frame.samples, &params).unwrap();
            check_envelope(&format!("{what} {method}"), &f, &want["envelope"][method.as_str()]);
            if method != EnvelopeMethod::Fixed {
                continue;
            }
            for (name, got) in f.each() {
                let got = got.unwrap_or_else(|| panic!("{what}: no {name}"));
                let tol = if name.starts_with("env_") { 1e-6 } else { 1e-9 };
                close(&format!("{what} {name}"), got, &want[name], tol);
            }
        }
    }
}

/// The frames of `records` (one sensor, all in g) cut the way the cutter cuts them.
fn frames_of(records: &[SamplesRecord]) -> Vec<Vec<f64>> {
    let mut frames: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for r in records {
        for (i, &x) in r.data.iter().enumerate() {
            let t = r.t0_ms as f64 + (i as f64) * 1000.0 / r.rate_hz;
            frames.entry((t / 1000.0).floor() as i64).or_default().push(x);
        }
    }
    frames.into_values().collect()
}

fn cut(records: &[SamplesRecord], metric: Metric) -> Vec<f64> {
    let params = FrameParams {
        gateway: "gw".into(),
        metric,
        flush_after_ms: 1_000_000,
        machines: BTreeMap::new(),
    };
    let mut cutter = FrameCutter::new(params);
    let mut events = Vec::new();
    for (at, r) in records.iter().enumerate() {
        cutter.push(at as i64, r, &mut events).unwrap();
    }
    cutter.advance(i64::MAX / 2, &mut events);
    events.iter().map(|e| e.value).collect()
}

#[test]
fn accel_rms_and_peak_are_the_frame_cutters_bit_for_bit() {
    let mut rng = Rng::new(42);
    for case in 0..20 {
        let rate = [100.0, 800.0, 1000.0 / 3.0, 3200.0][case % 4];
        let offset = rng.unit() * 4.0 - 2.0;
        let mut t0 = 1_700_000_000_000i64 + (rng.unit() * 1000.0) as i64;
        let mut records = Vec::new();
        for _ in 0..1 + (rng.unit() * 8.0) as usize {
            let len = 1 + (rng.unit() * 1.5 * rate) as usize;
            let data: Vec<f64> = (0..len).map(|_| offset + rng.unit() * 2.0 - 1.0).collect();
            let last = t0 as f64 + (len - 1) as f64 * 1000.0 / rate;
            records.push(SamplesRecord {
                machine: "m".into(),
                sensor: "s".into(),
                t0_ms: t0,
                rate_hz: rate,
                unit: Unit::G,
                axis: None,
                clock: None,
                data,
            });
            t0 = (last + 1000.0 / rate).ceil() as i64 + (rng.unit() * 1500.0) as i64;
        }
        let frames = frames_of(&records);
        let (rms, peak) = (cut(&records, Metric::AccelRms), cut(&records, Metric::AccelPeak));
        assert_eq!(frames.len(), rms.len(), "case {case}: frames");
        let mut ex = Extractor::new();
        for (i, frame) in frames.iter().enumerate() {
            let f = ex.extract(frame, &Params::new(AccelUnit::G, rate)).unwrap();
            assert_eq!(f.accel_rms.to_bits(), rms[i].to_bits(), "case {case} frame {i}: accel_rms");
            assert_eq!(
                f.accel_peak.to_bits(),
                peak[i].to_bits(),
                "case {case} frame {i}: accel_peak"
            );
        }
    }
}

#[test]
fn a_frame_of_a_known_length_allocates_nothing() {
    let mut rng = Rng::new(1);
    let frame: Vec<f64> = (0..12000).map(|_| rng.unit() - 0.5).collect();
    let mut ex = Extractor::new();
    for method in EnvelopeMethod::ALL {
        let params = Params {
            bearing: Some(Bearing { shaft_hz: 29.95, orders: DefectOrders::SKF_6205 }),
            envelope: method,
            ..Params::new(AccelUnit::G, 12000.0)
        };
        ex.extract(&frame, &params).unwrap(); // plans and buffers
        let before = ALLOCATIONS.with(Cell::get);
        let f = ex.extract(&frame, &params).unwrap();
        let after = ALLOCATIONS.with(Cell::get);
        assert!(f.envelope.is_some());
        assert_eq!(after - before, 0, "{method}: allocations in steady state");
    }
}
