//! The event object's shape: the slot of each field, the field names, and the JSON spelling of
//! each enumeration.

use super::value::Shape;
use crate::event::schema2::Combine;
use crate::event::{ClockState, Metric, Quality, Unit};

pub(crate) const EVENT_SLOTS: usize = 16;
pub(super) const F_EVENT_ID: usize = 0;
pub(super) const F_MACHINE: usize = 1;
pub(super) const F_SENSOR: usize = 2;
pub(super) const F_SEQ: usize = 3;
pub(super) const F_TS_MS: usize = 4;
pub(super) const F_CLOCK: usize = 5;
pub(super) const F_METRIC: usize = 6;
pub(super) const F_VALUE: usize = 7;
pub(super) const F_UNIT: usize = 8;
pub(super) const F_SCHEMA: usize = 9;
pub(super) const F_QUALITY: usize = 10;
pub(super) const F_SAMPLES: usize = 11;
pub(super) const F_REPLAYED: usize = 12;
pub(super) const F_AXES: usize = 13;
pub(super) const F_COMBINE: usize = 14;
pub(super) const F_FEATURES: usize = 15;

const EVENT_NAMES: [&str; EVENT_SLOTS] = [
    "event_id", "machine", "sensor", "seq", "ts_ms", "clock", "metric", "value", "unit", "schema",
    "quality", "samples", "replayed", "axes", "combine", "features",
];

pub(super) fn event_key(k: &str) -> Option<usize> {
    Some(match k {
        "event_id" => F_EVENT_ID,
        "machine" => F_MACHINE,
        "sensor" => F_SENSOR,
        "seq" => F_SEQ,
        "ts_ms" => F_TS_MS,
        "clock" => F_CLOCK,
        "metric" => F_METRIC,
        "value" => F_VALUE,
        "unit" => F_UNIT,
        "schema" => F_SCHEMA,
        "quality" => F_QUALITY,
        "samples" => F_SAMPLES,
        "replayed" => F_REPLAYED,
        "axes" => F_AXES,
        "combine" => F_COMBINE,
        "features" => F_FEATURES,
        _ => return None,
    })
}

pub(super) static EVENT_SHAPE: Shape = Shape {
    names: &EVENT_NAMES,
    lookup: event_key,
    raw: None,
    nums: None,
    expecting: "a JSON object (an event)",
};

pub(super) const METRICS: &[(&str, Metric)] = &[
    ("accel_rms", Metric::AccelRms),
    ("velocity_rms", Metric::VelocityRms),
    ("accel_peak", Metric::AccelPeak),
];
pub(crate) const UNITS: &[(&str, Unit)] =
    &[("g", Unit::G), ("m/s2", Unit::Ms2), ("mm/s", Unit::MmS)];
pub(super) const QUALITIES: &[(&str, Quality)] =
    &[("good", Quality::Good), ("uncertain", Quality::Uncertain), ("bad", Quality::Bad)];
pub(super) const CLOCK_STATES: &[(&str, ClockState)] = &[
    ("synced", ClockState::Synced),
    ("holdover", ClockState::Holdover),
    ("unsynced", ClockState::Unsynced),
    ("stepped", ClockState::Stepped),
    ("unknown", ClockState::Unknown),
];
pub(super) const COMBINES: &[(&str, Combine)] = &[("rss", Combine::Rss), ("max", Combine::Max)];
