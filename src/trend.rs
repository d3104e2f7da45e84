//! The status page's trends: per machine and measurement rule, the last hour of the measurement
//! the rule reads, downsampled as it arrives into a bounded ring of buckets.
//!
//! The hour is cut into `points` buckets of equal width (`[metrics] trend_points`, default
//! [`DEFAULT_POINTS`]: 15 s each); a bucket keeps the smallest and the largest value that fell in
//! it, so a one-second spike survives the downsampling. A series holds at most `points` buckets,
//! the newest and those up to an hour of event time before it: a value older than that is not
//! kept, a late one within the hour lands in its bucket. A bucket is 24 bytes, so a series is at
//! most `points x 24` bytes (5 760 at the default), and the book holds at most [`MAX_SERIES`]
//! series (machines x rules): values of a further series are counted in
//! [`TrendBook::dropped`], not kept.
//!
//! Pure: values and event times in, buckets out. The decider feeds it (`crate::decide`), the
//! decide stage publishes a copy at each checkpoint (`crate::telemetry`), the status page draws
//! it (`crate::audit::trend_svg`). It is not part of any snapshot: it starts empty at each start.

use std::collections::{BTreeMap, VecDeque};

/// The span a series covers, in ms of event time: one hour.
pub const WINDOW_MS: i64 = 3_600_000;

/// Buckets per hour when `[metrics] trend_points` is not set.
pub const DEFAULT_POINTS: u32 = 240;

/// The largest `[metrics] trend_points`: one bucket a second.
pub const MAX_POINTS: u32 = 3600;

/// Series (machine x rule) the book keeps at most.
pub const MAX_SERIES: usize = 256;

/// One bucket: the smallest and largest value whose event time fell in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Its start, in units of the bucket width since the epoch.
    pub index: i64,
    pub min: f64,
    pub max: f64,
}

/// One series' buckets, oldest first, indices increasing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    buckets: VecDeque<Bucket>,
}

impl Series {
    /// Adds `value` to bucket `index`, keeping at most `cap` buckets ending at the newest;
    /// `false` when the bucket is older than that.
    fn add(&mut self, index: i64, value: f64, cap: i64) -> bool {
        let fresh = Bucket { index, min: value, max: value };
        let Some(newest) = self.buckets.back().map(|b| b.index) else {
            self.buckets.push_back(fresh);
            return true;
        };
        if index > newest {
            self.buckets.push_back(fresh);
            while self.buckets.front().is_some_and(|b| b.index <= index - cap) {
                self.buckets.pop_front();
            }
            return true;
        }
        if index <= newest - cap {
            return false;
        }
        match self.buckets.binary_search_by_key(&index, |b| b.index) {
            Ok(i) => {
                let b = &mut self.buckets[i];
                b.min = b.min.min(value);
                b.max = b.max.max(value);
            }
            Err(i) => self.buckets.insert(i, fresh),
        }
        true
    }

    /// The buckets, oldest first.
    pub fn buckets(&self) -> impl Iterator<Item = &Bucket> {
        self.buckets.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

/// One machine's series, by rule index, and its newest event time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MachineTrend {
    /// By the rule's index in the configuration (`crate::rule::Params::rules`); a rule whose
    /// measurement the machine's events never carried has an empty series or none.
    pub series: Vec<Series>,
    /// The newest event time of a value kept.
    pub newest_ms: i64,
}

/// Every series, by machine.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendBook {
    points: u32,
    width_ms: i64,
    machines: BTreeMap<String, MachineTrend>,
    series: usize,
    dropped: u64,
}

impl Default for TrendBook {
    /// A book that keeps nothing (`points` 0).
    fn default() -> Self {
        TrendBook::new(0)
    }
}

impl TrendBook {
    /// A book of `points` buckets per hour (at most [`MAX_POINTS`]; 0 keeps nothing).
    pub fn new(points: u32) -> Self {
        let points = points.min(MAX_POINTS);
        let width_ms = match points {
            0 => WINDOW_MS,
            p => (WINDOW_MS + i64::from(p) - 1) / i64::from(p),
        };
        TrendBook { points, width_ms, machines: BTreeMap::new(), series: 0, dropped: 0 }
    }

    /// Buckets per hour.
    pub fn points(&self) -> u32 {
        self.points
    }

    /// A bucket's width in ms.
    pub fn width_ms(&self) -> i64 {
        self.width_ms
    }

    /// Values not kept: older than their series' hour, not finite, or of a series beyond
    /// [`MAX_SERIES`].
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Keeps `value`, measured at event time `ts_ms`, in the series of `machine` and rule
    /// `rule` (its index). No allocation once the machine's series exist.
    pub fn record(&mut self, machine: &str, rule: usize, ts_ms: i64, value: f64) {
        if self.points == 0 {
            return;
        }
        if !value.is_finite() {
            self.dropped += 1;
            return;
        }
        let known = self.machines.get(machine).is_some_and(|m| m.series.len() > rule);
        if !known && self.series + rule + 1 > MAX_SERIES {
            self.dropped += 1;
            return;
        }
        let m = match self.machines.get_mut(machine) {
            Some(m) => m,
            None => self
                .machines
                .entry(machine.to_owned())
                .or_insert(MachineTrend { series: Vec::new(), newest_ms: i64::MIN }),
        };
        if m.series.len() <= rule {
            self.series += rule + 1 - m.series.len();
            m.series.resize_with(rule + 1, Series::default);
        }
        let index = ts_ms.div_euclid(self.width_ms);
        if m.series[rule].add(index, value, i64::from(self.points)) {
            m.newest_ms = m.newest_ms.max(ts_ms);
        } else {
            self.dropped += 1;
        }
    }

    /// Every machine's series.
    pub fn machines(&self) -> impl Iterator<Item = (&str, &MachineTrend)> {
        self.machines.iter().map(|(m, t)| (m.as_str(), t))
    }

    /// The series of `machine`.
    pub fn machine(&self, machine: &str) -> Option<&MachineTrend> {
        self.machines.get(machine)
    }

    /// This book becomes a copy of `other`, reusing its allocations where it can.
    pub fn copy_from(&mut self, other: &TrendBook) {
        self.clone_from(other);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_000 - 1_700_000_000_000 % 15_000;

    fn spans(book: &TrendBook, machine: &str, rule: usize) -> Vec<(i64, f64, f64)> {
        book.machine(machine).unwrap().series[rule]
            .buckets()
            .map(|b| (b.index * book.width_ms() - T0, b.min, b.max))
            .collect()
    }

    #[test]
    fn a_bucket_keeps_its_smallest_and_largest_value() {
        let mut book = TrendBook::new(240);
        assert_eq!(book.width_ms(), 15_000);
        for (s, v) in [(0, 0.3), (1, 2.5), (2, 0.1), (14, 0.2), (15, 0.4)] {
            book.record("m", 0, T0 + s * 1000, v);
        }
        assert_eq!(spans(&book, "m", 0), vec![(0, 0.1, 2.5), (15_000, 0.4, 0.4)]);
        assert_eq!(book.machine("m").unwrap().newest_ms, T0 + 15_000);
    }

    #[test]
    fn a_series_keeps_one_hour_before_its_newest_value() {
        let mut book = TrendBook::new(4);
        assert_eq!(book.width_ms(), 900_000);
        let t = T0 - T0 % 900_000;
        for k in 0..6 {
            book.record("m", 0, t + k * 900_000, k as f64);
        }
        let kept: Vec<f64> =
            book.machine("m").unwrap().series[0].buckets().map(|b| b.max).collect();
        assert_eq!(kept, vec![2.0, 3.0, 4.0, 5.0], "at most 4 buckets, the newest");
        book.record("m", 0, t + 3 * 900_000 + 1, 9.0);
        book.record("m", 0, t + 900_000, 7.0);
        let kept: Vec<f64> =
            book.machine("m").unwrap().series[0].buckets().map(|b| b.max).collect();
        assert_eq!(kept, vec![2.0, 9.0, 4.0, 5.0], "a late value lands in its bucket");
        assert_eq!(book.dropped(), 1, "one older than the hour");
    }

    #[test]
    fn a_late_value_in_an_empty_bucket_is_inserted_in_order() {
        let mut book = TrendBook::new(240);
        book.record("m", 1, T0, 1.0);
        book.record("m", 1, T0 + 60_000, 3.0);
        book.record("m", 1, T0 + 30_000, 2.0);
        let at: Vec<i64> = spans(&book, "m", 1).iter().map(|s| s.0).collect();
        assert_eq!(at, vec![0, 30_000, 60_000]);
        assert!(book.machine("m").unwrap().series[0].is_empty(), "rule 0 had no value");
    }

    #[test]
    fn not_finite_values_and_series_beyond_the_bound_are_dropped() {
        let mut book = TrendBook::new(240);
        book.record("m", 0, T0, f64::NAN);
        book.record("m", 0, T0, f64::INFINITY);
        assert_eq!(book.dropped(), 2);
        for i in 0..MAX_SERIES {
            book.record(&format!("m{i}"), 0, T0, 1.0);
        }
        book.record("one-too-many", 0, T0, 1.0);
        book.record("m0", 1, T0, 1.0);
        assert_eq!(book.dropped(), 4);
        assert!(book.machine("one-too-many").is_none());
        book.record("m0", 0, T0 + 1, 2.0);
        assert_eq!(book.dropped(), 4, "a known series still takes values");
        let mut off = TrendBook::default();
        off.record("m", 0, T0, 1.0);
        assert_eq!(off.machines().count(), 0, "0 points: nothing kept");
        let mut copy = TrendBook::new(1);
        copy.copy_from(&book);
        assert_eq!(copy, book);
    }
}
