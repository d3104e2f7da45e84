//! ADXL345 bus sources: the FIFO read loop that turns a sensor into timestamped sample records.
//!
//! [`BusReader`] is generic over the driver's bus (`linux-embedded-hal` on a gateway,
//! `embedded-hal-mock` in tests), the clock (`crate::clock::Clock`) and the kernel's clock evidence
//! ([`KernelClock`]), so the whole loop runs in unit tests with a `ManualClock`. [`open`] opens the
//! real device nodes; [`run`] drives a reader on its own thread into a bounded channel.
//!
//! # One poll ([`BusReader::poll_once`])
//!
//! 1. Read the clocks (`monotonic`, `real time`; the kernel's evidence at most once a second) into
//!    the clock model; a step becomes a [`BusOutput::ClockStep`] for the ledger.
//! 2. Read `INT_SOURCE` for the overrun flag (reading the data clears it, so it comes first), then
//!    drain the FIFO.
//! 3. Place the drained samples on the **timeline**: sample times continue at the nominal rate
//!    from the previous sample (`t + 1000 / rate_hz`), so records never overlap and frames get
//!    exact spacing. The timeline is (re)anchored to the clock model's stamp of the drain (the
//!    last sample read now, the others `1000 / rate_hz` apart before it, rounded up to a whole ms):
//!    at the first drain, after an overrun, and when the clock is more than [`RESYNC_MS`] ahead of
//!    the timeline (a resync; counted). A timeline ahead of the clock cannot move back without
//!    overlapping samples already sent; that skew is reported in [`BusStats::max_ahead_ms`].
//! 4. An overrun (samples lost while the FIFO was full) ends the current block and becomes a
//!    declared gap per exported sensor ([`GapNotice`], `GapRange::Samples`, reason `"overrun"`) from the end of the
//!    timeline to the re-anchored start (at least one sample period). An overrun at the first
//!    drain (the FIFO filled between `init` and the first poll) is no gap: nothing was expected.
//! 5. Samples collect into blocks of the configured length; each full block becomes one
//!    [`SamplesRecord`] per configured axis, in g, with the least trustworthy clock evidence seen
//!    while it filled.
//!
//! # Poll period
//!
//! The FIFO holds 32 samples; with no watermark interrupt wired the loop polls at half the time
//! the FIFO takes to fill ([`poll_period_us`]: 5 ms at 3200 Hz, 160 ms at 100 Hz).

mod open;
mod run;

pub use open::{open_i2c, open_spi, BusKind, BusProblem, Problem};
pub use run::{run, spawn, LoopEnd};

use crate::clock::Clock;
use crate::config::{Axis, BusSensor};
use crate::driver::adxl345::registers::FIFO_DEPTH;
use crate::driver::adxl345::{self, Adxl345, DataRate, RegisterAccess, Sample, FULL_RES_G_PER_LSB};
use crate::event::{ClockEvidence, Unit};
use crate::records::outbox::{GapNotice, GapRange};
use crate::source::clock_quality::KernelClock;
use crate::stamp::clock::{
    ClockModel, ClockModelConfig, ClockReading, ClockStep, MonotonicWentBack,
};
use crate::stamp::frames::worse_clock;
use crate::trace::SamplesRecord;

/// A clock this far (ms) ahead of the timeline re-anchors it.
pub const RESYNC_MS: f64 = 100.0;
/// Kernel evidence is read at most this often (monotonic ms).
pub const KERNEL_EVERY_MS: i64 = 1_000;
/// The reason of the gap an overrun leaves (one per exported sensor and overrun).
pub const OVERRUN: &str = "overrun";
/// The FIFO watermark given to the driver (not used for interrupts; the loop polls).
const WATERMARK: u8 = 16;

/// What the loop sends downstream.
#[derive(Debug, Clone, PartialEq)]
pub enum BusOutput {
    /// One block of one axis.
    Samples(SamplesRecord),
    /// Samples that will never be delivered (an overrun, or shed under backpressure).
    Gap(GapNotice),
    /// The clock stepped: for the ledger.
    ClockStep(ClockStep),
}

/// Counters of one reader.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BusStats {
    pub polls: u64,
    pub samples: u64,
    pub overruns: u64,
    /// Timeline re-anchored forward because the clock ran ahead (not counting overruns).
    pub resyncs: u64,
    /// Records dropped because the channel was full (each declared as a gap).
    pub shed_records: u64,
    /// The largest amount (ms) by which the timeline was ahead of the clock.
    pub max_ahead_ms: f64,
}

/// What went wrong in a poll.
#[derive(Debug, thiserror::Error)]
pub enum BusError<E: std::fmt::Debug> {
    #[error("{0}")]
    Driver(adxl345::Error<E>),
    #[error("{0}")]
    Clock(#[from] MonotonicWentBack),
}

/// Half the time the 32-sample FIFO takes to fill at `rate`, in µs.
pub fn poll_period_us(rate: DataRate) -> u64 {
    FIFO_DEPTH as u64 * 1_000_000 / u64::from(rate.hz()) / 2
}

/// The driver configuration for a configured sensor.
pub fn driver_config(s: &BusSensor) -> adxl345::Config {
    adxl345::Config { range: s.range, data_rate: s.rate, watermark: WATERMARK }
}

/// The block being filled.
#[derive(Debug)]
struct Block {
    t0_ms: i64,
    samples: Vec<Sample>,
    clock: ClockEvidence,
}

/// The read loop's state; see the module documentation.
#[derive(Debug)]
pub struct BusReader<IFACE, C, K> {
    accel: Adxl345<IFACE>,
    clock: C,
    kernel: K,
    kernel_last: Option<crate::stamp::clock::KernelEvidence>,
    kernel_read_at: i64,
    model: ClockModel,
    cfg: BusSensor,
    /// `(axis, sensor name)` per exported axis.
    axes: Vec<(Axis, String)>,
    period_ms: f64,
    block_len: usize,
    buf: [Sample; FIFO_DEPTH + 1],
    /// Event time of the next sample on the timeline; `None` before the first drain.
    next_ms: Option<f64>,
    block: Option<Block>,
    stats: BusStats,
}

impl<IFACE: RegisterAccess, C: Clock, K: KernelClock> BusReader<IFACE, C, K>
where
    IFACE::Error: std::fmt::Debug,
{
    /// A reader over an initialised driver (`Adxl345::init` with [`driver_config`]).
    pub fn new(accel: Adxl345<IFACE>, clock: C, mut kernel: K, cfg: BusSensor) -> Self {
        let kernel_last = kernel.read();
        let first = ClockReading {
            mono_ms: clock.monotonic_ms(),
            real_ms: clock.now_ms(),
            kernel: kernel_last,
        };
        let axes = cfg.axes.iter().map(|&a| (a, cfg.sensor_for(a))).collect();
        let hz = cfg.rate.hz();
        BusReader {
            accel,
            kernel,
            kernel_last,
            kernel_read_at: first.mono_ms,
            model: ClockModel::new(ClockModelConfig::default(), first),
            axes,
            period_ms: 1000.0 / f64::from(hz),
            block_len: (i64::from(hz) * cfg.block_ms / 1000).max(1) as usize,
            cfg,
            clock,
            buf: [Sample::default(); FIFO_DEPTH + 1],
            next_ms: None,
            block: None,
            stats: BusStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> BusStats {
        self.stats
    }

    /// The clock model (for its latest reading and stamp).
    pub fn clock_model(&self) -> &ClockModel {
        &self.model
    }

    /// How long to wait between polls.
    pub fn poll_period_us(&self) -> u64 {
        poll_period_us(self.cfg.rate)
    }

    /// The monotonic clock the reader uses (for pacing).
    pub fn monotonic_ms(&self) -> i64 {
        self.clock.monotonic_ms()
    }

    /// Sends the block being filled now, short (at the end of a read).
    pub fn flush(&mut self, out: &mut Vec<BusOutput>) {
        self.emit_partial(out);
    }

    /// Gives the driver back.
    pub fn into_driver(self) -> Adxl345<IFACE> {
        self.accel
    }

    /// One poll: clocks, overrun flag, FIFO drain, blocks. Appends what it produced to `out`.
    pub fn poll_once(&mut self, out: &mut Vec<BusOutput>) -> Result<(), BusError<IFACE::Error>> {
        let mono_ms = self.clock.monotonic_ms();
        if mono_ms - self.kernel_read_at >= KERNEL_EVERY_MS {
            self.kernel_last = self.kernel.read();
            self.kernel_read_at = mono_ms;
        }
        let reading =
            ClockReading { mono_ms, real_ms: self.clock.now_ms(), kernel: self.kernel_last };
        if let Some(step) = self.model.observe(reading)? {
            out.push(BusOutput::ClockStep(step));
        }
        let overrun = self.accel.fifo_overrun().map_err(BusError::Driver)?;
        let n = self.accel.read_fifo(&mut self.buf).map_err(BusError::Driver)?;
        self.stats.polls += 1;
        if overrun && self.next_ms.is_some() {
            self.stats.overruns += 1;
        }
        if n == 0 {
            return Ok(());
        }
        self.stats.samples += n as u64;
        let stamp = self.model.stamp(mono_ms);
        // Where the clock puts the first sample of this drain.
        let clock_first = stamp.ts_ms as f64 - (n - 1) as f64 * self.period_ms;
        match self.next_ms {
            None => self.anchor(clock_first, out),
            Some(next) if overrun => {
                self.emit_partial(out);
                let t0 = clock_first.ceil().max((next + self.period_ms).ceil());
                for (_, sensor) in &self.axes {
                    out.push(BusOutput::Gap(GapNotice {
                        machine: self.cfg.machine.clone(),
                        sensor: sensor.clone(),
                        range: GapRange::Samples { from_ms: next.floor() as i64, to_ms: t0 as i64 },
                        reason: OVERRUN.to_owned(),
                        declared_at_ms: reading.real_ms,
                    }));
                }
                self.anchor(t0, out);
            }
            Some(next) if clock_first - next > RESYNC_MS => {
                self.stats.resyncs += 1;
                self.emit_partial(out);
                self.anchor(clock_first, out);
            }
            Some(next) => {
                self.stats.max_ahead_ms = self.stats.max_ahead_ms.max(next - clock_first);
            }
        }
        for i in 0..n {
            let sample = self.buf[i];
            self.push(sample, stamp.clock, out);
        }
        Ok(())
    }

    /// Restarts the timeline at `t_ms` (rounded up to a whole ms).
    fn anchor(&mut self, t_ms: f64, out: &mut Vec<BusOutput>) {
        self.emit_partial(out);
        self.next_ms = Some(t_ms.ceil());
    }

    fn push(&mut self, sample: Sample, clock: ClockEvidence, out: &mut Vec<BusOutput>) {
        let next = self.next_ms.unwrap_or_default();
        let block = self.block.get_or_insert_with(|| Block {
            t0_ms: next.ceil() as i64,
            samples: Vec::with_capacity(self.block_len),
            clock,
        });
        block.clock = worse_clock(block.clock, clock);
        block.samples.push(sample);
        self.next_ms = Some(next + self.period_ms);
        if block.samples.len() >= self.block_len {
            self.emit_partial(out);
        }
    }

    /// Sends the block being filled, if any, one record per axis. The timeline goes on from the
    /// block's exact end, so a partial block's successor starts at the next whole ms.
    fn emit_partial(&mut self, out: &mut Vec<BusOutput>) {
        let Some(block) = self.block.take() else { return };
        for (axis, sensor) in &self.axes {
            let data = block
                .samples
                .iter()
                .map(|s| {
                    let raw = match axis {
                        Axis::X => s.x,
                        Axis::Y => s.y,
                        Axis::Z => s.z,
                    };
                    f64::from(raw) * FULL_RES_G_PER_LSB
                })
                .collect();
            out.push(BusOutput::Samples(SamplesRecord {
                machine: self.cfg.machine.clone(),
                sensor: sensor.clone(),
                t0_ms: block.t0_ms,
                rate_hz: f64::from(self.cfg.rate.hz()),
                unit: Unit::G,
                axis: Some(axis.as_str().to_owned()),
                clock: Some(block.clock),
                data,
            }));
        }
        if let Some(next) = self.next_ms {
            self.next_ms = Some(next.ceil());
        }
    }
}

#[cfg(test)]
mod tests;
