//! The trace file (docs/contracts.md section 8): one arrival per JSON line, in arrival order.
//!
//! `parse` turns one line's bytes into an [`Arrival`] or a [`Rejection`]; it never panics.

pub mod parse;

use crate::event::{ClockEvidence, Event, Unit};

/// Raw samples of one sensor: sample `i` is at `t0_ms + i * 1000 / rate_hz` (event time).
#[derive(Debug, Clone, PartialEq)]
pub struct SamplesRecord {
    pub machine: String,
    pub sensor: String,
    pub t0_ms: i64,
    pub rate_hz: f64,
    pub unit: Unit,
    /// Free text such as `"z"`; optional.
    pub axis: Option<String>,
    /// Optional clock evidence for the block (extension; absent means `unknown`).
    pub clock: Option<ClockEvidence>,
    pub data: Vec<f64>,
}

/// What one trace line carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    Event(Event),
    Samples(SamplesRecord),
    /// Velocities in `mm/s` a device measured itself (a Modbus channel in `mm/s`), value `i` at
    /// `t0_ms + i * 1000 / rate_hz`: one `velocity_rms` event each, numbered by the decider.
    Readings(SamplesRecord),
    Tick,
}

/// One parsed trace line: its ingest time `at` and what arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceLine {
    pub at: i64,
    pub arrival: Arrival,
}
