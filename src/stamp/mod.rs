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
//! - **Features.** The open frame also keeps its samples, in the frame's unit as it takes them:
//!   at most `ceil(rate_hz) + 2` (a second's worth and a margin for rounded sample times), never
//!   more than [`MAX_FRAME_SAMPLES`] (65 536). At emission [`crate::features::Extractor`] computes
//!   the event's `features` from them with the machine's [`MachineFeatures`] (from its asset entry,
//!   [`FrameParams::machines`]; the 10-1000 Hz velocity band and no bearing for a machine without
//!   one): `accel_rms`, `accel_peak`, `crest_factor`, `kurtosis` always (`accel_rms`/`accel_peak`
//!   bit for bit the event's `value`), `velocity_rms` when `rate_hz / 2` is above the velocity
//!   band's top, the `env_*` indicators when the machine has a bearing and a shaft speed and the
//!   spectrum holds them. A frame gives **no features** (its `value` is unaffected) when its samples
//!   are velocities (`mm/s`), when samples of more than one rate went into it (they are not evenly
//!   spaced), when more samples arrived than it keeps (counted by
//!   [`FrameCutter::unbuffered_frames`]), or when it was open in a snapshot written before frames
//!   kept their samples (below). Gaps inside a frame are closed up, as for the value.
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

//!
//! # Snapshots
//!
//! [`FrameCutter::snapshot`] holds each open frame's samples (the `samples` field, CBOR `f64`s:
//! 9 bytes a sample, so about 9 x rate bytes for a frame at its end, 108 kB at 12 kHz). A
//! snapshot written before frames kept their samples has no such field and still restores; the
//! frames open in it then give no features (their first samples are gone, and features of part
//! of a second would not be the frame's), and every frame opened after the restore gives them.
//! Restoring refuses kept samples that do not match the frame's count or are not finite. The
//! extractor (FFT plans and buffers) is not state: [`FrameCutter::new`] and
//! [`FrameCutter::restore`] create it.
//!
//! # Cost
//!
//! - **Memory:** 8 bytes x `ceil(rate_hz) + 2` per open frame (one per sensor; 96 kB at 12 kHz,
//!   26 kB at 3200 Hz), allocated when the frame opens, plus the extractor's plans and buffers for
//!   each frame length seen (a few times the frame).
//! - **CPU:** one real FFT of the frame per emitted frame when it can give `velocity_rms` or
//!   indicators (`O(n log n)`), and for indicators the envelope's inverse and forward FFTs of the
//!   envelope band; moments alone are linear. `benches/features.rs` measures each path against
//!   the plain running RMS (`cargo bench --bench features`).

pub mod clock;
pub mod frames;

pub use frames::{FrameCutter, FrameParams, MachineFeatures, FRAME_MS, MAX_FRAME_SAMPLES};

#[cfg(test)]
mod tests;
