//! The feature path (`linegate::features`): samples per second per core of one frame's features,
//! at 3200 Hz (an ADXL345 on SPI) and 12 kHz (the CWRU recordings), side by side in one run:
//!
//! - `welford_rms_peak`: the plain running RMS/peak pass the frame cutter makes today;
//! - `velocity_only`: moments and `velocity_rms` (no bearing: no envelope);
//! - `all_fixed`: every feature, the envelope in the fixed band (the default);
//! - `all_whitened`, `all_kurtogram`: every feature with the other two envelope methods.
//!
//! `cargo bench --bench features`, then `benches/criterion_medians.sh` for the medians as
//! samples/s (criterion's elements). Time is the benchmark thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`), not wall time: "per core", and the other processes of a shared
//! machine do not count (their effect on the caches still does). The signal is deterministic
//! noise with an amplitude-modulated carrier; the cost does not depend on what the samples hold.
//! Numpy's speed on the CWRU trace's frames: `python3 fixtures/cwru/features_reference.py --time`.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use linegate::features::{
    rms_and_peak, AccelUnit, Band, Bearing, DefectOrders, EnvelopeMethod, Extractor, Params,
};
use linegate::synth::vibration_frame;

/// The calling thread's CPU time.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec, which `ts` is.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Criterion's measurement in thread CPU time, in nanoseconds.
struct ThreadCpuTime;

impl Measurement for ThreadCpuTime {
    type Intermediate = Duration;
    type Value = Duration;
    fn start(&self) -> Duration {
        thread_cpu_time()
    }
    fn end(&self, start: Duration) -> Duration {
        thread_cpu_time().saturating_sub(start)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, typical_ns: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = match typical_ns {
            t if t < 1e3 => (1.0, "ns CPU"),
            t if t < 1e6 => (1e-3, "µs CPU"),
            _ => (1e-6, "ms CPU"),
        };
        values.iter_mut().for_each(|v| *v *= factor);
        unit
    }
    fn scale_throughputs(
        &self,
        _typical: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let per_iteration = match throughput {
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) | Throughput::Elements(n) => {
                *n as f64
            }
        };
        values.iter_mut().for_each(|v| *v = per_iteration * 1e3 / *v);
        "M/s CPU"
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

fn features(c: &mut Criterion<ThreadCpuTime>) {
    for (rate, band) in [(3200usize, Band::new(500.0, 1500.0)), (12000, Band::new(2000.0, 5000.0))]
    {
        let samples = vibration_frame(rate);
        let mut g = c.benchmark_group(format!("features_{rate}hz"));
        g.throughput(Throughput::Elements(rate as u64));
        g.sample_size(30);
        g.bench_function("welford_rms_peak", |b| b.iter(|| rms_and_peak(&samples)));
        let velocity = Params::new(AccelUnit::G, rate as f64);
        let mut ex = Extractor::new();
        g.bench_function("velocity_only", |b| b.iter(|| ex.extract(&samples, &velocity).unwrap()));
        for (name, method) in [
            ("all_fixed", EnvelopeMethod::Fixed),
            ("all_whitened", EnvelopeMethod::Whitened),
            ("all_kurtogram", EnvelopeMethod::Kurtogram),
        ] {
            let params = Params {
                bearing: Some(Bearing { shaft_hz: 29.95, orders: DefectOrders::SKF_6205 }),
                envelope_band: band,
                envelope: method,
                ..velocity.clone()
            };
            g.bench_function(name, |b| b.iter(|| ex.extract(&samples, &params).unwrap()));
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = features
}
criterion_main!(benches);
