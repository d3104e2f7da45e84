//! Deterministic synthetic load: many machines, one event per sensor and second, mostly quiet
//! with bursts of high vibration, a little arrival jitter and the odd duplicate. Used by the
//! benchmarks and by `examples/gen_trace.rs` to write large traces; never by the daemon.

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
}
