//! Per-sensor watermarks (docs/contracts.md section 5) and the `auto` bound.
//!
//! A sensor's watermark is `max ts_ms seen - bound`, and never moves backwards. A sensor is idle
//! once `idle_timeout` of ingest time has passed since its last record; from then on its watermark
//! advances one-for-one with ingest time from where its last record left it, as if it had kept
//! sending on time. With `auto`, "on time" is what was measured: besides the disorder (`max ts
//! seen - ts`, which sets the bound), the ingest delay (`at - ts`; for an event older than the
//! newest seen, `at - max ts seen`, its disorder being measured already) is measured, and an idle
//! sensor's watermark advances no further than ingest time minus the larger of the two quantiles
//! (clamped like the bound), so a sensor whose uplink delivers its events late (a node that
//! forwards every 40 s) is not overtaken while it is quiet. The machine's watermark is the minimum over its non-idle sensors (over all of
//! them, advanced, when every sensor is idle), and it too never moves backwards.

use serde::{Deserialize, Serialize};

/// How the bound between the newest event time seen and the watermark is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum BoundMode {
    Fixed(i64),
    /// A quantile of measured lateness (disorder) over the last [`LATENESS_WINDOW`] events,
    /// clamped; while the sensor is idle, the larger of that and the ingest delay's quantile.
    Auto {
        min_ms: i64,
        max_ms: i64,
        quantile: f64,
    },
}

/// How many recent lateness measurements the `auto` bound looks at, per sensor.
pub const LATENESS_WINDOW: usize = 1024;
const BUCKETS: usize = 128;

/// Lateness histogram over a sliding window, bucketed log-linearly (4 buckets per octave above 16 ms),
/// so the quantile is exact to within 19 % and costs a fixed 128-slot walk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatenessQuantile {
    ring: std::collections::VecDeque<u8>,
    counts: Vec<u32>,
}

impl Default for LatenessQuantile {
    fn default() -> Self {
        LatenessQuantile { ring: Default::default(), counts: vec![0; BUCKETS] }
    }
}

fn bucket_of(ms: i64) -> usize {
    if ms < 16 {
        return ms.max(0) as usize;
    }
    let log = 63 - ms.leading_zeros() as usize; // >= 4
    let sub = ((ms >> (log - 2)) & 3) as usize;
    (16 + (log - 4) * 4 + sub).min(BUCKETS - 1)
}

/// The largest lateness that falls in bucket `b` (its inclusive upper edge).
fn bucket_upper(b: usize) -> i64 {
    if b < 16 {
        return b as i64;
    }
    let log = (b - 16) / 4 + 4;
    let sub = ((b - 16) % 4) as i64;
    ((4 + sub + 1) << (log - 2)) - 1
}

impl LatenessQuantile {
    pub fn record(&mut self, lateness_ms: i64) {
        let b = bucket_of(lateness_ms);
        if self.ring.len() == LATENESS_WINDOW {
            if let Some(old) = self.ring.pop_front() {
                self.counts[old as usize] -= 1;
            }
        }
        self.ring.push_back(b as u8);
        self.counts[b] += 1;
    }

    /// The `q` quantile (upper bucket edge), or `None` before any measurement.
    pub fn quantile(&self, q: f64) -> Option<i64> {
        let n = self.ring.len();
        if n == 0 {
            return None;
        }
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        let mut seen = 0usize;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c as usize;
            if seen >= rank {
                return Some(bucket_upper(b));
            }
        }
        None
    }
}

/// One sensor's event-time progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SensorClock {
    pub max_ts: i64,
    /// The watermark as of the last record (already never-backwards).
    pub wm: i64,
    pub last_ingest: i64,
    pub bound_ms: i64,
    pub lateness: Option<LatenessQuantile>,
    /// `auto`: the ingest delay of the sensor's newest event time, `at - max ts seen`, at each
    /// record (absent in snapshots written before it was measured: measured from the next record
    /// on).
    #[serde(default)]
    pub delay: Option<LatenessQuantile>,
    /// `auto`: the larger of the disorder and delay quantiles, clamped: an idle sensor's
    /// watermark stays this far behind ingest time.
    #[serde(default)]
    pub idle_bound_ms: Option<i64>,
}

impl SensorClock {
    pub fn new(mode: BoundMode, at: i64) -> Self {
        let (bound_ms, lateness, delay) = match mode {
            BoundMode::Fixed(b) => (b, None, None),
            BoundMode::Auto { min_ms, .. } => {
                (min_ms, Some(LatenessQuantile::default()), Some(LatenessQuantile::default()))
            }
        };
        SensorClock {
            max_ts: i64::MIN,
            wm: i64::MIN,
            last_ingest: at,
            bound_ms,
            lateness,
            delay,
            idle_bound_ms: None,
        }
    }

    pub fn is_idle(&self, now: i64, idle_timeout_ms: i64) -> bool {
        now.saturating_sub(self.last_ingest) >= idle_timeout_ms
    }

    /// The watermark at ingest time `now`, advanced with ingest time when idle (with `auto`, to
    /// at most `now` minus the measured delay).
    pub fn watermark_at(&self, now: i64, idle_timeout_ms: i64) -> i64 {
        if self.is_idle(now, idle_timeout_ms) && self.wm != i64::MIN {
            let advanced = self.wm.saturating_add(now - self.last_ingest);
            let capped = match self.idle_bound_ms {
                Some(b) => advanced.min(now.saturating_sub(b)),
                None => advanced,
            };
            self.wm.max(capped)
        } else {
            self.wm
        }
    }

    /// An accepted record of this sensor with event time `ts` arrived at ingest time `at`.
    pub fn observe(&mut self, ts: i64, at: i64, mode: BoundMode, idle_timeout_ms: i64) {
        // An idle sensor keeps the watermark it had advanced to: never backwards.
        self.wm = self.watermark_at(at, idle_timeout_ms);
        self.last_ingest = at;
        if let (Some(q), BoundMode::Auto { min_ms, max_ms, quantile }) = (&mut self.lateness, mode)
        {
            let late_by = if self.max_ts == i64::MIN { 0 } else { self.max_ts.saturating_sub(ts) };
            q.record(late_by.max(0));
            // The ingest delay of the sensor's newest event time: `at - ts` for an event in order;
            // an older one's `at - ts` is this plus its disorder, measured above. The ingest time
            // is the record's own (journaled), so this stays deterministic.
            let delay = self.delay.get_or_insert_with(LatenessQuantile::default);
            delay.record(at.saturating_sub(self.max_ts.max(ts)).max(0));
            let disorder = q.quantile(quantile);
            self.bound_ms = disorder.unwrap_or(min_ms).clamp(min_ms, max_ms);
            let larger = disorder.max(delay.quantile(quantile));
            self.idle_bound_ms = Some(larger.unwrap_or(min_ms).clamp(min_ms, max_ms));
        }
        self.max_ts = self.max_ts.max(ts);
        self.wm = self.wm.max(self.max_ts.saturating_sub(self.bound_ms));
    }
}

impl SensorClock {
    /// `auto`: the measured quantiles, in ms, of disorder and of ingest delay (`None` when the
    /// bound is fixed, or before any measurement).
    pub fn measured(&self, quantile: f64) -> (Option<i64>, Option<i64>) {
        let q = |m: &Option<LatenessQuantile>| m.as_ref().and_then(|m| m.quantile(quantile));
        (q(&self.lateness), q(&self.delay))
    }
}

/// The machine watermark from its sensors at ingest time `now` (before the never-backwards max).
pub fn machine_watermark<'a>(
    sensors: impl Iterator<Item = &'a SensorClock> + Clone,
    now: i64,
    idle_timeout_ms: i64,
) -> i64 {
    let active = sensors
        .clone()
        .filter(|s| !s.is_idle(now, idle_timeout_ms))
        .map(|s| s.watermark_at(now, idle_timeout_ms))
        .min();
    match active {
        Some(w) => w,
        None => sensors.map(|s| s.watermark_at(now, idle_timeout_ms)).min().unwrap_or(i64::MIN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: i64 = 30_000;

    #[test]
    fn fixed_bound_and_never_backwards() {
        let mode = BoundMode::Fixed(5_000);
        let mut s = SensorClock::new(mode, 0);
        s.observe(100_000, 0, mode, IDLE);
        assert_eq!(s.wm, 95_000);
        s.observe(50_000, 1, mode, IDLE); // late record: watermark stays
        assert_eq!(s.wm, 95_000);
        s.observe(101_000, 2, mode, IDLE);
        assert_eq!(s.wm, 96_000);
    }

    #[test]
    fn idle_sensor_advances_with_ingest_time() {
        let mode = BoundMode::Fixed(5_000);
        let mut s = SensorClock::new(mode, 0);
        s.observe(100_000, 1_000, mode, IDLE);
        assert_eq!(s.watermark_at(1_000 + IDLE - 1, IDLE), 95_000);
        assert!(!s.is_idle(1_000 + IDLE - 1, IDLE));
        assert!(s.is_idle(1_000 + IDLE, IDLE));
        assert_eq!(s.watermark_at(1_000 + IDLE, IDLE), 95_000 + IDLE);
        assert_eq!(s.watermark_at(1_000 + IDLE + 7, IDLE), 95_000 + IDLE + 7);
        // It comes back with an old record: keeps the advanced watermark.
        s.observe(90_000, 1_000 + 2 * IDLE, mode, IDLE);
        assert_eq!(s.wm, 95_000 + 2 * IDLE);
    }

    #[test]
    fn machine_watermark_skips_idle_sensors_unless_all_are() {
        let mode = BoundMode::Fixed(0);
        let mut a = SensorClock::new(mode, 0);
        let mut b = SensorClock::new(mode, 0);
        a.observe(10_000, 0, mode, IDLE);
        b.observe(50_000, 20_000, mode, IDLE);
        let both = [a.clone(), b.clone()];
        assert_eq!(machine_watermark(both.iter(), 20_000, IDLE), 10_000);
        // a idle at 30_000: only b counts.
        assert_eq!(machine_watermark(both.iter(), 30_000, IDLE), 50_000);
        // both idle at 50_000: the minimum of the advanced watermarks.
        assert_eq!(machine_watermark(both.iter(), 50_000, IDLE), 10_000 + 50_000);
    }

    #[test]
    fn auto_bound_follows_the_quantile_and_is_clamped() {
        let mode = BoundMode::Auto { min_ms: 1_000, max_ms: 60_000, quantile: 0.9 };
        let mut s = SensorClock::new(mode, 0);
        s.observe(1_000_000, 0, mode, IDLE);
        assert_eq!(s.bound_ms, 1_000); // no lateness yet: the minimum
        for i in 1..=100 {
            // every 5th record carries a time 3 s older than its slot: 2 s behind the newest seen
            let ts = 1_000_000 + i * 1_000 - if i % 5 == 0 { 3_000 } else { 0 };
            s.observe(ts, i, mode, IDLE);
        }
        assert!(s.bound_ms >= 2_000 && s.bound_ms <= 2_400, "bound {}", s.bound_ms);
        for i in 101..=200 {
            s.observe(1_000_000 + i * 1_000 - 3_600_000, i, mode, IDLE);
        }
        assert_eq!(s.bound_ms, 60_000);
    }

    /// A sensor whose records arrive in order but up to 40 s after their time (an uplink that
    /// delivers every 40 s): no disorder, yet its watermark, advanced with ingest time while it is
    /// idle between deliveries, would pass the next delivery's events under a small bound; the
    /// measured delay holds it back.
    #[test]
    fn auto_bound_takes_the_larger_of_disorder_and_ingest_delay() {
        let mode = BoundMode::Auto { min_ms: 1_000, max_ms: 60_000, quantile: 0.99 };
        let fixed = BoundMode::Fixed(5_000);
        let (mut auto, mut small) =
            (SensorClock::new(mode, 40_000), SensorClock::new(fixed, 40_000));
        let mut late = (0, 0);
        for i in 0..200 {
            let (ts, at) = (i * 1_000, (i / 40 + 1) * 40_000);
            for (s, m, n) in [(&mut auto, mode, &mut late.0), (&mut small, fixed, &mut late.1)] {
                if ts < s.watermark_at(at, IDLE) {
                    *n += 1;
                }
                s.observe(ts, at, m, IDLE);
            }
        }
        assert_eq!(late.0, 0, "auto: none late");
        assert!(late.1 > 100, "a 5 s bound: {} late", late.1);
        let (disorder, delay) = auto.measured(0.99);
        assert_eq!(disorder, Some(0));
        assert!(delay.is_some_and(|d| (40_000..48_000).contains(&d)), "{delay:?}");
        assert_eq!(auto.bound_ms, 1_000, "no disorder: the minimum while it sends");
        assert_eq!(auto.idle_bound_ms, delay);
        assert_eq!(small.measured(0.99), (None, None));
        // A snapshot from before the delay was measured starts measuring at its next record.
        let mut old = auto.clone();
        old.delay = None;
        old.observe(200_000, 240_000, mode, IDLE);
        assert_eq!(old.measured(0.99).1, Some(40_959), "the upper edge of 40 s's bucket");
    }

    #[test]
    fn buckets_cover_their_values() {
        for ms in [0, 1, 15, 16, 17, 31, 32, 100, 999, 1000, 4096, 5000, 3_600_000] {
            let b = bucket_of(ms);
            assert!(bucket_upper(b) >= ms, "{ms} -> {b} -> {}", bucket_upper(b));
            if b > 0 {
                assert!(bucket_upper(b - 1) < ms, "{ms} lower edge");
            }
        }
    }
}
