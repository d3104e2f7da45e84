//! The backlog's drain rate, for `linegate_replay_drain_rate_records_per_second` and the ETA.
//!
//! Pure: the forwarder reports, at monotonic times it reads itself, the total number of backlog
//! records it has sent so far; [`DrainRate`] answers records per second over the last `window`.
//! A sliding window rather than the rate since the outage ended, so the ETA follows the pace the
//! broker takes now. Memory is bounded: at most [`DrainRate::MAX_POINTS`] readings are kept.

use std::collections::VecDeque;

/// Records per second sent over a sliding window of readings.
#[derive(Debug, Clone)]
pub struct DrainRate {
    window_ms: i64,
    /// (monotonic ms, total sent), oldest first; the first one may be older than the window, as
    /// the base of the rate.
    points: VecDeque<(i64, u64)>,
}

impl DrainRate {
    /// Readings kept at most; closer readings than `window / MAX_POINTS` replace the newest.
    pub const MAX_POINTS: usize = 32;

    /// A window of `window_ms` (at least 1 ms).
    pub fn new(window_ms: i64) -> Self {
        DrainRate { window_ms: window_ms.max(1), points: VecDeque::new() }
    }

    /// Takes a reading: `sent_total` records sent by `now_ms`. Returns the rate in records per
    /// second over the window, 0 until two readings span some time. A reading with an earlier
    /// time or a lower total than the last one (a restarted count) starts over.
    pub fn observe(&mut self, now_ms: i64, sent_total: u64) -> f64 {
        if let Some(&(t, n)) = self.points.back() {
            if now_ms < t || sent_total < n {
                self.points.clear();
            }
        }
        let spacing = self.window_ms / Self::MAX_POINTS as i64;
        let len = self.points.len();
        if len >= 2 && now_ms - self.points[len - 2].0 < spacing {
            self.points.pop_back();
        }
        self.points.push_back((now_ms, sent_total));
        // Keep one reading at or before the window's start as the base.
        while self.points.len() > 2 && self.points[1].0 <= now_ms - self.window_ms {
            self.points.pop_front();
        }
        while self.points.len() > Self::MAX_POINTS {
            self.points.pop_front();
        }
        self.rate()
    }

    /// The rate over the readings kept.
    pub fn rate(&self) -> f64 {
        match (self.points.front(), self.points.back()) {
            (Some(&(t0, n0)), Some(&(t1, n1))) if t1 > t0 => {
                (n1 - n0) as f64 * 1000.0 / (t1 - t0) as f64
            }
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_pace_gives_its_rate() {
        let mut d = DrainRate::new(10_000);
        assert_eq!(d.observe(0, 0), 0.0);
        for s in 1..=100 {
            let r = d.observe(s * 1_000, (s as u64) * 250);
            assert!((r - 250.0).abs() < 1e-9, "at {s} s: {r}");
        }
    }

    #[test]
    fn the_window_forgets_an_earlier_pace() {
        let mut d = DrainRate::new(10_000);
        for s in 0..=60 {
            d.observe(s * 1_000, (s as u64) * 1_000);
        }
        // The broker slows to 10 records/s; after a window the rate is the new pace.
        let mut total = 60_000;
        let mut r = 0.0;
        for s in 61..=80 {
            total += 10;
            r = d.observe(s * 1_000, total);
        }
        assert!((r - 10.0).abs() < 1e-9, "{r}");
    }

    #[test]
    fn stalled_drain_goes_to_zero_and_a_reset_count_starts_over() {
        let mut d = DrainRate::new(5_000);
        d.observe(0, 0);
        d.observe(1_000, 500);
        for s in 2..=20 {
            d.observe(s * 1_000, 500);
        }
        assert_eq!(d.rate(), 0.0);
        assert_eq!(d.observe(21_000, 3), 0.0, "a lower total starts over");
        assert!((d.observe(22_000, 103) - 100.0).abs() < 1e-9);
        assert_eq!(d.observe(10, 200), 0.0, "time going back starts over");
    }

    #[test]
    fn frequent_readings_keep_memory_bounded() {
        let mut d = DrainRate::new(60_000);
        for ms in 0..100_000 {
            d.observe(ms, ms as u64 * 2);
            assert!(d.points.len() <= DrainRate::MAX_POINTS);
        }
        assert!((d.rate() - 2_000.0).abs() < 1e-6, "{}", d.rate());
    }
}
