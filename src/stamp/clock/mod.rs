//! ClockEvidence quality: how far the gateway's real-time clock can be trusted, and which time to stamp.
//!
//! A pure core: it is fed periodic [`ClockReading`]s (a monotonic and a real-time reading taken
//! together, plus the kernel's own evidence from `adjtimex`, read by
//! `crate::source::clock_quality`) and answers two questions: what time to stamp a block with, and
//! what the event `clock` field (docs/contracts.md section 2) says about it.
//!
//! # The model
//!
//! - **Offset.** Each reading gives `offset = realtime - monotonic`. Between two readings the
//!   offset may move only by slewing (at most [`SLEW_PPM`] of the monotonic time between them).
//!   A larger move plus [`ClockModelConfig::step_threshold_ms`] is a **step**: somebody (NTP,
//!   an operator, a battery-less boot) set the clock. Each step yields one [`ClockStep`] for the
//!   ledger.
//! - **Trusted.** A reading is trusted when the kernel says the clock is synchronised (`STA_UNSYNC`
//!   clear, `adjtimex` not returning `TIME_ERROR`). The last trusted reading (offset, monotonic
//!   time, error bound) is the anchor for holdover.
//! - **Modes and the `clock` field.**
//!   - *Real time*, the normal mode: stamp = monotonic + the latest offset. State `synced` with
//!     `err_ms` = the kernel's `maxerror` when trusted; `holdover` when the kernel lost sync after
//!     an earlier trusted reading (the clock free-runs), with `err_ms` = the anchor's error plus
//!     [`ClockModelConfig::holdover_drift_ppm`] of the time since; `unsynced` (no `err_ms`) when
//!     nothing was ever trusted; `unknown` when there is no kernel evidence at all.
//!   - *Hold after step*: a step after a trusted reading. Stamp = monotonic + the anchor's offset,
//!     so stamps stay continuous across the step; state `holdover`, error growing as above.
//!   - *Stepped*: a step with no trusted anchor (typically the first NTP step after an
//!     unsynchronised boot). Stamp from real time (there is nothing better); state `stepped`, no
//!     `err_ms`.
//!   - Both leave for real time once the kernel has said *synchronised* continuously for
//!     [`ClockModelConfig::resync_hold_ms`] of monotonic time; the stamps then follow the new
//!     offset (that jump is the step already ledgered, not a new one).
//! - A reading whose monotonic time is earlier than the previous one is refused with an error and
//!   changes nothing.

use serde::{Deserialize, Serialize};

use crate::event::{ClockEvidence, ClockState};

/// The largest rate at which NTP slews the clock (the kernel's `MAXFREQ`, 500 ppm): offset changes
/// within this are never taken for steps.
pub const SLEW_PPM: f64 = 500.0;

/// What the kernel says about its clock (`adjtimex` in read-only mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelEvidence {
    /// `STA_UNSYNC` is set: the kernel does not consider its clock synchronised.
    pub unsynchronised: bool,
    /// `adjtimex` returned `TIME_ERROR` (clock not synchronised, or a leap second in trouble).
    pub time_error: bool,
    /// `maxerror`: the kernel's bound on the clock's error, µs.
    pub maxerror_us: i64,
    /// `esterror`: the estimated error, µs.
    pub esterror_us: i64,
}

impl KernelEvidence {
    /// Whether the kernel considers the clock synchronised.
    pub fn synchronised(&self) -> bool {
        !self.unsynchronised && !self.time_error
    }
}

/// One reading of the clocks, taken together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReading {
    /// Monotonic milliseconds (`crate::clock::Clock::monotonic_ms`).
    pub mono_ms: i64,
    /// Real time, Unix milliseconds (`crate::clock::Clock::now_ms`).
    pub real_ms: i64,
    /// The kernel's evidence, or `None` when it could not be read.
    pub kernel: Option<KernelEvidence>,
}

impl ClockReading {
    fn offset(&self) -> i64 {
        self.real_ms - self.mono_ms
    }
}

/// Settings of the model (defaults in `Default`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockModelConfig {
    /// An offset change larger than this (plus slewing) between two readings is a step. 100 ms:
    /// ntpd's step threshold is 128 ms, chrony's `makestep` is usually 1 s, and readings jitter
    /// by a millisecond or two.
    pub step_threshold_ms: i64,
    /// After a step, how long the kernel must say *synchronised* without a break before stamps
    /// follow the real-time clock again. 60 s.
    pub resync_hold_ms: i64,
    /// Error growth while holding over, in parts per million of elapsed time: 500 ppm, the same
    /// bound the kernel adds to `maxerror` while unsynchronised.
    pub holdover_drift_ppm: f64,
}

impl Default for ClockModelConfig {
    fn default() -> Self {
        ClockModelConfig {
            step_threshold_ms: 100,
            resync_hold_ms: 60_000,
            holdover_drift_ppm: 500.0,
        }
    }
}

/// A detected clock step, for the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockStep {
    /// Real time the clock would have read without the step (Unix ms).
    pub from_ms: i64,
    /// Real time it read (Unix ms).
    pub to_ms: i64,
    /// `to_ms - from_ms`: positive forward, negative back.
    pub size_ms: i64,
    /// Monotonic time of the reading that showed the step.
    pub at_mono_ms: i64,
    /// Whether stamps hold over from a trusted offset (else they follow the stepped clock).
    pub held_over: bool,
}

/// What to stamp with: the event time and its `clock` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub ts_ms: i64,
    pub clock: ClockEvidence,
}

/// A reading the model refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("clock reading refused: monotonic time went back from {last_ms} ms to {got_ms} ms")]
pub struct MonotonicWentBack {
    pub last_ms: i64,
    pub got_ms: i64,
}

/// The last trusted reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Anchor {
    offset_ms: i64,
    mono_ms: i64,
    err_ms: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    RealTime,
    /// Holding the anchor's offset after a step; `synced_since` starts the resync hold.
    HoldAfterStep {
        anchor: Anchor,
        synced_since: Option<i64>,
    },
    /// Stepped with no anchor.
    Stepped {
        synced_since: Option<i64>,
    },
}

/// The clock-quality model; see the module documentation.
#[derive(Debug, Clone)]
pub struct ClockModel {
    cfg: ClockModelConfig,
    last: ClockReading,
    anchor: Option<Anchor>,
    mode: Mode,
}

impl ClockModel {
    /// A model whose first reading is `first` (not checked for a step: there is nothing before).
    pub fn new(cfg: ClockModelConfig, first: ClockReading) -> Self {
        let mut m = ClockModel { cfg, last: first, anchor: None, mode: Mode::RealTime };
        m.trust(first);
        m
    }

    /// Takes the next reading; returns the step it shows, if any.
    pub fn observe(&mut self, r: ClockReading) -> Result<Option<ClockStep>, MonotonicWentBack> {
        if r.mono_ms < self.last.mono_ms {
            return Err(MonotonicWentBack { last_ms: self.last.mono_ms, got_ms: r.mono_ms });
        }
        let elapsed = r.mono_ms - self.last.mono_ms;
        let moved = r.offset() - self.last.offset();
        let slew = (elapsed as f64 * SLEW_PPM / 1e6).ceil() as i64;
        let step = (moved.abs() > self.cfg.step_threshold_ms + slew).then(|| ClockStep {
            from_ms: r.mono_ms + self.last.offset(),
            to_ms: r.real_ms,
            size_ms: moved,
            at_mono_ms: r.mono_ms,
            held_over: self.anchor.is_some(),
        });
        let synced = r.kernel.is_some_and(|k| k.synchronised());
        if step.is_some() {
            // A step restarts the resync hold; the anchor is the last trusted reading before it.
            let since = synced.then_some(r.mono_ms);
            self.mode = match self.anchor {
                Some(anchor) => Mode::HoldAfterStep { anchor, synced_since: since },
                None => Mode::Stepped { synced_since: since },
            };
        } else {
            self.mode = match self.mode {
                Mode::RealTime => Mode::RealTime,
                Mode::HoldAfterStep { anchor, synced_since } => {
                    match self.hold(synced_since, synced, r.mono_ms) {
                        Some(since) => Mode::HoldAfterStep { anchor, synced_since: since },
                        None => Mode::RealTime,
                    }
                }
                Mode::Stepped { synced_since } => {
                    match self.hold(synced_since, synced, r.mono_ms) {
                        Some(since) => Mode::Stepped { synced_since: since },
                        None => Mode::RealTime,
                    }
                }
            };
        }
        self.last = r;
        if self.mode == Mode::RealTime {
            self.trust(r);
        }
        Ok(step)
    }

    /// The resync hold: `None` when it is over, else the new start of the synchronised stretch.
    fn hold(&self, since: Option<i64>, synced: bool, now: i64) -> Option<Option<i64>> {
        match (synced, since) {
            (false, _) => Some(None),
            (true, None) if self.cfg.resync_hold_ms <= 0 => None,
            (true, None) => Some(Some(now)),
            (true, Some(s)) if now - s >= self.cfg.resync_hold_ms => None,
            (true, Some(s)) => Some(Some(s)),
        }
    }

    /// Makes `r` the anchor when the kernel says it is synchronised.
    fn trust(&mut self, r: ClockReading) {
        if let Some(k) = r.kernel.filter(KernelEvidence::synchronised) {
            self.anchor = Some(Anchor {
                offset_ms: r.offset(),
                mono_ms: r.mono_ms,
                err_ms: us_to_ms(k.maxerror_us),
            });
        }
    }

    /// The stamp for monotonic instant `mono_ms` (normally the latest reading's or later).
    pub fn stamp(&self, mono_ms: i64) -> Stamp {
        let from_real = mono_ms + self.last.offset();
        let (ts_ms, state, err_ms) = match self.mode {
            Mode::HoldAfterStep { anchor, .. } => (
                mono_ms + anchor.offset_ms,
                ClockState::Holdover,
                Some(self.drift(anchor, mono_ms)),
            ),
            Mode::Stepped { .. } => (from_real, ClockState::Stepped, None),
            Mode::RealTime => match (self.last.kernel, self.anchor) {
                (None, _) => (from_real, ClockState::Unknown, None),
                (Some(k), _) if k.synchronised() => {
                    (from_real, ClockState::Synced, Some(us_to_ms(k.maxerror_us)))
                }
                (Some(_), Some(anchor)) => {
                    (from_real, ClockState::Holdover, Some(self.drift(anchor, mono_ms)))
                }
                (Some(_), None) => (from_real, ClockState::Unsynced, None),
            },
        };
        Stamp { ts_ms, clock: ClockEvidence { state, err_ms } }
    }

    /// The anchor's error grown by the holdover drift up to `mono_ms`.
    fn drift(&self, anchor: Anchor, mono_ms: i64) -> u32 {
        let elapsed = (mono_ms - anchor.mono_ms).max(0) as f64;
        let grown = (elapsed * self.cfg.holdover_drift_ppm / 1e6).ceil();
        u32::try_from(u64::from(anchor.err_ms).saturating_add(grown as u64)).unwrap_or(u32::MAX)
    }

    /// The latest reading taken.
    pub fn last_reading(&self) -> ClockReading {
        self.last
    }
}

/// Microseconds to whole milliseconds, rounded up (an error bound must not shrink); negative as 0.
fn us_to_ms(us: i64) -> u32 {
    let ms = (us.max(0) as u64).div_ceil(1000);
    u32::try_from(ms).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
