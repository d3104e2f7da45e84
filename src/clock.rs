//! The one place that reads the machine's clocks. Everything else takes time as an input
//! (clippy.toml bans `SystemTime::now` and `Instant::now` elsewhere), so decisions replay exactly.
#![allow(clippy::disallowed_methods)]

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A source of time: wall clock in Unix milliseconds, and a monotonic reading for durations.
pub trait Clock: Send + Sync {
    /// Wall-clock time, milliseconds since the Unix epoch (UTC).
    fn now_ms(&self) -> i64;
    /// Monotonic milliseconds since an arbitrary origin; never goes back.
    fn monotonic_ms(&self) -> i64;
    /// The same monotonic reading in seconds, finer than a millisecond where the clock can (for
    /// latency histograms of sub-millisecond work).
    fn monotonic_s(&self) -> f64 {
        self.monotonic_ms() as f64 / 1000.0
    }
}

/// A shared clock is a clock (the bus loop owns one handle, a test advances another).
impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now_ms(&self) -> i64 {
        (**self).now_ms()
    }
    fn monotonic_ms(&self) -> i64 {
        (**self).monotonic_ms()
    }
    fn monotonic_s(&self) -> f64 {
        (**self).monotonic_s()
    }
}

/// The machine's clocks.
#[derive(Debug)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    pub fn new() -> Self {
        SystemClock { origin: Instant::now() }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_millis() as i64,
            Err(e) => -(e.duration().as_millis() as i64),
        }
    }
    fn monotonic_ms(&self) -> i64 {
        self.origin.elapsed().as_millis() as i64
    }
    fn monotonic_s(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }
}

/// A clock that moves only when told to: for tests.
#[derive(Debug, Default)]
pub struct ManualClock {
    wall: AtomicI64,
    mono: AtomicI64,
}

impl ManualClock {
    pub fn new(wall_ms: i64) -> Self {
        ManualClock { wall: AtomicI64::new(wall_ms), mono: AtomicI64::new(0) }
    }
    /// Both clocks move forward by `ms`.
    pub fn advance(&self, ms: i64) {
        self.wall.fetch_add(ms, Ordering::SeqCst);
        self.mono.fetch_add(ms, Ordering::SeqCst);
    }
    /// The wall clock jumps (a clock step); the monotonic clock does not.
    pub fn step_wall(&self, ms: i64) {
        self.wall.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.wall.load(Ordering::SeqCst)
    }
    fn monotonic_ms(&self) -> i64 {
        self.mono.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_steps_wall_but_not_monotonic() {
        let c = ManualClock::new(1_000);
        c.advance(500);
        c.step_wall(-10_000);
        assert_eq!(c.now_ms(), -8_500);
        assert_eq!(c.monotonic_ms(), 500);
        assert_eq!(c.monotonic_s(), 0.5);
    }

    #[test]
    fn system_clock_is_after_2020_and_monotonic() {
        let c = SystemClock::new();
        assert!(c.now_ms() > 1_577_836_800_000);
        let a = c.monotonic_ms();
        assert!(c.monotonic_ms() >= a);
        let s = c.monotonic_s();
        assert!(c.monotonic_s() >= s && s < 60.0);
    }
}
