//! Stamping and feature extraction: raw samples in, one derived event per sensor and second out.
//!
//! A pure core (docs/architecture.md): no I/O, no clock reads. Ingest time is an argument of every
//! call, so a replay of the journal derives exactly the same events.
//!
//! # Frames (docs/contracts.md section 8, made precise)
//!
//! [`FrameCutter`] keeps one state per (machine, sensor).
//!
//! - **Sample time.** Sample `i` of a record is at event time
//!   `t_i = t0_ms + i * 1000 / rate_hz` ms, computed in `f64` exactly in that order
//!   (`t0_ms as f64 + (i as f64 * 1000.0) / rate_hz`). Its frame index is
//!   `k = floor(t_i / 1000)`; frame `k` covers `[k*1000, (k+1)*1000)` of event time.
//! - **Accumulation.** Per sensor one frame is open at a time. It accumulates count, mean and sum
//!   of squared deviations (Welford's method, `f64`), minimum and maximum.
//! - **Emission.** A frame is emitted when a sample of a later frame arrives for its sensor, or
//!   by [`FrameCutter::advance`] when the sensor has stalled: its last samples arrived (ingest
//!   time) at or before `at - flush_after_ms`. The daemon and `replay` use half the rule's
//!   `idle_timeout`, so a stalled sensor's last frame is decided while the sensor still holds the
//!   watermark back (on time), and only then does the sensor go idle. A stream that jumps far ahead emits the old frame and
//!   opens a new one; frames without samples produce no event, and `seq` counts only emitted
//!   events. A frame is emitted at most once: samples that belong to a frame already emitted
//!   (possible only after an idle flush, when the sensor resumes inside the flushed second) are
//!   not taken; [`FrameCutter::dropped_samples`] counts them.
//! - **The event.** `metric = params.metric`; for `accel_rms` (and `velocity_rms`, for velocity
//!   samples) `value = sqrt(mean((x - mean)^2))` (population variance, frame mean removed), for
//!   `accel_peak` `value = max |x - mean|`; `unit` = the record's unit; `ts_ms = (k+1)*1000`
//!   (frame end); `seq` per sensor from 1, +1 per emitted frame;
//!   `event_id = "{gateway}.{sensor}.{seq}"`; `schema = 1`; `clock` = the record's clock or
//!   `unknown` (when records with different clocks share a frame, the less trustworthy one);
//!   `samples = {block_seq: seq, from_ms: k*1000, to_ms: (k+1)*1000}`.
//! - **Quality.** The expected count of a frame is `round(rate_hz)` of its samples. Fewer samples
//!   than expected, fewer than 2 samples, or samples of different rates in one frame give
//!   `uncertain`; otherwise `good`. Missing samples are never padded. A frame with one sample is
//!   still emitted (value 0).
//! - **Overlap.** Per sensor the event time of the last sample taken is kept. A record whose
//!   `t0_ms < last_sample_t + (1000 / rate_hz) / 2` overlaps or precedes it: `push` returns `Err`
//!   naming sensor, `t0_ms` and the last sample time, and changes nothing (the caller quarantines
//!   the record with `Reason::SamplesOverlap`). Gaps are fine; they only lower a frame's count.
//! - **Invalid records** (`rate_hz` not a positive finite number, a non-finite sample) are also
//!   refused with `Err` and no state change; validation upstream should have caught them.
//! - **Sensor names.** Derived ids name the gateway and the sensor but not the machine, so a
//!   sensor name belongs to the first machine it is seen with; samples of the same sensor name on
//!   another machine are refused with `Err` rather than minting colliding event ids.
//! - **Units.** A record whose unit differs from its sensor's open frame is converted into the
//!   frame's unit where the units convert (g and m/s2); otherwise the open frame is emitted first.
//! - **Order.** `push` appends the events of one sensor in seq order; `advance` flushes idle
//!   sensors in order of their last arrival, ties in (machine, sensor) order. `advance` does not
//!   allocate when no sensor is idle.

pub mod clock;
pub mod frames;

pub use frames::{FrameCutter, FrameParams, FRAME_MS};

#[cfg(test)]
mod tests;
