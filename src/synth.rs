//! Deterministic synthetic load: many machines, one event per sensor and second, mostly quiet
//! with bursts of high vibration, a little arrival jitter and the odd duplicate ([`Load`]); and
//! a realistic trace with everything a line network sends besides ([`mixed_trace`]). Used by the
//! benchmarks, by `examples/gen_trace.rs` to write large traces and by the soak
//! (`tests/soak.rs`); never by the daemon.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::event::{ClockEvidence, ClockState, Event, Metric, Quality, Unit};

/// A small, fast, deterministic PRNG (xorshift64*), so every run generates the same load.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One second of acceleration at `rate` Hz (in g) for the feature path's benchmarks
/// (`benches/features.rs`, `examples/features_load.rs`): a carrier at 0.3 x `rate`
/// amplitude-modulated at 162.2 Hz (the CWRU inner-race defect frequency), plus deterministic
/// noise. The feature path's cost does not depend on what the samples hold.
pub fn vibration_frame(rate: usize) -> Vec<f64> {
    let mut rng = Rng::new(17);
    (0..rate)
        .map(|i| {
            let t = i as f64 / rate as f64;
            let carrier = (2.0 * std::f64::consts::PI * 0.3 * rate as f64 * t).sin();
            let modulation = 1.0 + 0.5 * (2.0 * std::f64::consts::PI * 162.2 * t).cos();
            0.2 * carrier * modulation + 0.1 * (rng.unit() - 0.5)
        })
        .collect()
}

/// The shape of the load.
#[derive(Debug, Clone)]
pub struct Load {
    pub gateway: String,
    pub machines: usize,
    pub sensors_per_machine: usize,
    pub seconds: i64,
    pub start_ms: i64,
    /// Probability that a machine starts a 5-minute high-vibration burst in a given second.
    pub burst_rate: f64,
    /// Probability that an event is re-sent (a duplicate) right after.
    pub duplicate_rate: f64,
    pub seed: u64,
}

impl Load {
    pub fn new(machines: usize, seconds: i64) -> Self {
        Load {
            gateway: "gw-bench".into(),
            machines,
            sensors_per_machine: 1,
            seconds,
            start_ms: 1_700_000_000_000,
            burst_rate: 1.0 / 3600.0,
            duplicate_rate: 0.001,
            seed: 7,
        }
    }

    /// Calls `f(at, event)` for every arrival, in arrival order. Arrival lags event time by
    /// 50–450 ms, so sensors of a machine interleave slightly out of order.
    pub fn generate(&self, mut f: impl FnMut(i64, &Event)) {
        let mut rng = Rng::new(self.seed);
        let mut burst_until = vec![i64::MIN; self.machines];
        let names: Vec<String> = (0..self.machines).map(|m| format!("machine-{m:03}")).collect();
        let sensors: Vec<String> = (0..self.sensors_per_machine).map(|s| format!("s{s}")).collect();
        let mut pending: Vec<(i64, Event)> = Vec::new();
        for sec in 0..self.seconds {
            let ts = self.start_ms + sec * 1000;
            for (m, name) in names.iter().enumerate() {
                if burst_until[m] < ts && rng.unit() < self.burst_rate {
                    burst_until[m] = ts + 300_000;
                }
                let burst = ts <= burst_until[m];
                for (s, sensor) in sensors.iter().enumerate() {
                    let seq = (sec + 1) as u64;
                    let value =
                        if burst { 0.6 + 0.4 * rng.unit() } else { 0.05 + 0.3 * rng.unit() };
                    let e = Event {
                        event_id: format!("{}.{}.{}.{}", self.gateway, name, sensor, seq),
                        machine: name.clone(),
                        sensor: sensor.clone(),
                        seq,
                        ts_ms: ts,
                        clock: ClockEvidence { state: ClockState::Synced, err_ms: Some(2) },
                        metric: Metric::AccelRms,
                        value: (value * 1e4).round() / 1e4,
                        unit: Unit::G,
                        schema: 1,
                        quality: if s == 0 || rng.unit() > 0.01 {
                            Quality::Good
                        } else {
                            Quality::Uncertain
                        },
                        samples: None,
                        features: None,
                    };
                    let at = ts + 50 + (rng.next_u64() % 400) as i64;
                    if rng.unit() < self.duplicate_rate {
                        pending.push((at + 1, e.clone()));
                    }
                    pending.push((at, e));
                }
            }
            // Arrivals of this second, in arrival order.
            pending.sort_by_key(|(at, _)| *at);
            for (at, e) in pending.drain(..) {
                f(at, &e);
            }
        }
    }
}

// ---- A realistic mixed trace

/// How many lines of each kind [`mixed_trace`] wrote.
#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct MixedCounts {
    events: u64,
    samples: u64,
    ticks: u64,
    late: u64,
    too_late: u64,
    duplicates: u64,
    conflicts: u64,
    future: u64,
    poison: u64,
}

/// Where [`mixed_trace`] starts in the benchmarks: 2023-11-14T22:13:20Z.
pub const MIXED_START_MS: i64 = 1_700_000_000_000;
const RAW_RATE: usize = 400;

/// Lines waiting for their arrival time: (at, order written, line).
type Pending = BinaryHeap<Reverse<(i64, u64, String)>>;

fn event_line(at: i64, id: &str, machine: &str, sensor: &str, seq: u64, ts: i64, v: f64) -> String {
    format!(
        r#"{{"at":{at},"kind":"event","event":{{"event_id":"{id}","machine":"{machine}","sensor":"{sensor}","seq":{seq},"ts_ms":{ts},"clock":{{"state":"synced","err_ms":2}},"metric":"accel_rms","value":{v:.4},"unit":"g","schema":1,"quality":"good"}}}}"#
    )
}

fn samples_line(at: i64, machine: &str, sensor: &str, t0: i64, rng: &mut Rng, amp: f64) -> String {
    let mut s = format!(
        r#"{{"at":{at},"kind":"samples","machine":"{machine}","sensor":"{sensor}","t0_ms":{t0},"rate_hz":{RAW_RATE},"unit":"g","axis":"z","data":["#
    );
    for i in 0..RAW_RATE {
        let x = amp * (i as f64 * 0.7).sin() + 0.05 * (rng.unit() - 0.5);
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!("{x:.4}"));
    }
    s.push_str("]}");
    s
}

fn poison_line(at: i64, rng: &mut Rng, machine: &str) -> String {
    match rng.next_u64() % 4 {
        0 => "this is not json at all".to_string(),
        1 => format!(r#"{{"at":{at},"kind":"event","event":{{"event_id":"cut"#),
        2 => format!(r#"{{"at":{at},"kind":"telemetry","value":1}}"#),
        _ => format!(r#"{{"at":{at},"kind":"event","event":{{"machine":"{machine}"}}}}"#),
    }
}

/// A realistic trace (docs/contracts.md section 8) for the default `[time]` settings (bound 5 s,
/// allowed lateness 10 min, max future 5 s), deterministic from `seed`: `machines` machines with
/// two event sensors each, one event a second each, for `seconds`; every sixth machine also has
/// a raw sensor (`raw-{machine}`: a sensor belongs to one machine) sending a one-second block of 400 samples a second. Per event: arrival
/// jitter within the bound (50 ms – 4 s), 2 % arriving beyond the bound but within the allowed
/// lateness (10 s – 5 min late), 0.2 % too late (15–30 min), 0.5 % duplicates, 0.05 % id
/// conflicts (the same id, another value), 0.02 % from a clock 2 min ahead; 0.05 % poison lines
/// (not JSON, cut short, an unknown kind, an event without its fields); a tick every 10 s.
/// Machines have bursts of high vibration (5 min, about one every 30 min). Event time starts at
/// `start_ms` (ingest time shortly after). `emit` gets every
/// line (without its newline) in arrival order; returns what was written.
pub fn mixed_trace(
    machines: usize,
    seconds: i64,
    seed: u64,
    start_ms: i64,
    mut emit: impl FnMut(&str),
) -> MixedCounts {
    let mut rng = Rng::new(seed);
    let names: Vec<String> = (0..machines).map(|m| format!("machine-{m:03}")).collect();
    let mut burst_until = vec![i64::MIN; machines];
    let mut pending = Pending::new();
    let mut order = 0u64;
    let mut c = MixedCounts::default();
    let mut push = |p: &mut Pending, at: i64, line: String| {
        order += 1;
        p.push(Reverse((at, order, line)));
    };
    for sec in 0..seconds {
        let ts = start_ms + sec * 1000;
        if sec % 10 == 0 {
            push(&mut pending, ts, format!(r#"{{"at":{ts},"kind":"tick"}}"#));
            c.ticks += 1;
        }
        for (m, name) in names.iter().enumerate() {
            if burst_until[m] < ts && rng.unit() < 1.0 / 1800.0 {
                burst_until[m] = ts + 300_000;
            }
            let burst = ts <= burst_until[m];
            for sensor in ["s0", "s1"] {
                let seq = (sec + 1) as u64;
                let id = format!("gw-bench.{name}.{sensor}.{seq}");
                let v = if burst { 0.6 + 0.4 * rng.unit() } else { 0.05 + 0.3 * rng.unit() };
                let r = rng.unit();
                let (lag, ts_e) = if r < 0.0002 {
                    c.future += 1;
                    (100, ts + 120_000)
                } else if r < 0.0022 {
                    c.too_late += 1;
                    (900_000 + (rng.next_u64() % 900_000) as i64, ts)
                } else if r < 0.0222 {
                    c.late += 1;
                    (10_000 + (rng.next_u64() % 290_000) as i64, ts)
                } else {
                    (50 + (rng.next_u64() % 3950) as i64, ts)
                };
                let at = ts + lag;
                push(&mut pending, at, event_line(at, &id, name, sensor, seq, ts_e, v));
                c.events += 1;
                let r = rng.unit();
                if r < 0.005 {
                    let again = at + 1 + (rng.next_u64() % 2000) as i64;
                    push(&mut pending, again, event_line(again, &id, name, sensor, seq, ts_e, v));
                    c.duplicates += 1;
                } else if r < 0.0055 {
                    let again = at + 1 + (rng.next_u64() % 2000) as i64;
                    let line = event_line(again, &id, name, sensor, seq, ts_e, v + 0.5);
                    push(&mut pending, again, line);
                    c.conflicts += 1;
                }
                if rng.unit() < 0.0005 {
                    let line = poison_line(at, &mut rng, name);
                    push(&mut pending, at, line);
                    c.poison += 1;
                }
            }
            if m % 6 == 0 {
                let at = ts + 1000 + 20 + (rng.next_u64() % 200) as i64;
                let amp = if burst { 1.2 } else { 0.3 };
                let line = samples_line(at, name, &format!("raw-{name}"), ts, &mut rng, amp);
                push(&mut pending, at, line);
                c.samples += 1;
            }
        }
        // Everything due before the next second has arrived, in arrival order.
        while pending.peek().is_some_and(|Reverse((at, _, _))| *at < ts + 1000) {
            if let Some(Reverse((_, _, line))) = pending.pop() {
                emit(&line);
            }
        }
    }
    while let Some(Reverse((_, _, line))) = pending.pop() {
        emit(&line);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_load_with_bursts_and_duplicates() {
        let mut load = Load::new(5, 3600);
        load.burst_rate = 1.0 / 600.0;
        let collect = |l: &Load| {
            let mut v = Vec::new();
            l.generate(|at, e| v.push((at, e.event_id.clone(), e.value)));
            v
        };
        let a = collect(&load);
        assert_eq!(a, collect(&load));
        assert!(a.len() > 5 * 3600);
        assert!(a.iter().any(|x| x.2 >= 0.6), "bursts happen");
        assert!(a.windows(2).all(|w| w[0].0 <= w[1].0), "arrival order");
    }

    #[test]
    fn mixed_trace_is_deterministic_ordered_and_has_every_kind() {
        let collect = |seed| {
            let mut lines = Vec::new();
            let counts = mixed_trace(6, 1800, seed, MIXED_START_MS, |l| lines.push(l.to_owned()));
            (lines, counts)
        };
        let (a, counts) = collect(3);
        assert_eq!((a.clone(), counts.clone()), collect(3), "same seed, same trace");
        assert_ne!(a, collect(4).0, "another seed, another trace");
        let ats: Vec<i64> = a
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["at"].as_i64())
            .collect();
        assert!(ats.windows(2).all(|w| w[0] <= w[1]), "arrival order");
        let total = counts.events
            + counts.samples
            + counts.ticks
            + counts.duplicates
            + counts.conflicts
            + counts.poison;
        assert_eq!(a.len() as u64, total, "{counts:?}");
        for (what, n) in [
            ("late", counts.late),
            ("too late", counts.too_late),
            ("duplicates", counts.duplicates),
            ("conflicts", counts.conflicts),
            ("future", counts.future),
            ("poison", counts.poison),
            ("samples", counts.samples),
        ] {
            assert!(n > 0, "no {what}: {counts:?}");
        }
        assert_eq!(counts.events, 6 * 2 * 1800);
        assert!(a.iter().any(|l| serde_json::from_str::<serde_json::Value>(l).is_err()));
    }
}
