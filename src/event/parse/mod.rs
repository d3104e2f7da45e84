//! Parsing and validation of untrusted event JSON (docs/contracts.md sections 2 and 7).
//!
//! [`parse_event`] turns the text of one event object into an [`Event`] or a [`Rejection`]. It
//! never panics, and the same bytes always give the same reason and detail.
//!
//! Order of checks: size → JSON (syntax, an object, no duplicate key at any depth) → `schema` →
//! unknown fields → presence and type of each field in a fixed order → semantic checks
//! (identifiers, non-finite value, negative value, non-finite then negative `features`, unit
//! mismatch of the metric then of an acceleration feature, implausible clock).
//!
//! `features` (docs/contracts.md sections 2 and 12) is an object of known feature names to
//! numbers: an unknown name or a value that is no number is `bad_type` naming the key, a
//! duplicate key `malformed_json` as everywhere, a non-finite value `non_finite_value`, a
//! negative one `negative_value`; `accel_rms`/`accel_peak` are in the event's unit, so an event in
//! `mm/s` carrying them is `unit_mismatch`. An empty object is the same as none (`null` too).
//!
//! The JSON is read once into a small fixed set of slots (no `serde_json::Value`), with borrowed
//! strings wherever the text has no escapes. Python's `json.dumps` writes bare `NaN`, `Infinity`
//! and `-Infinity`, which are not JSON; only when the strict parse fails is the text re-scanned,
//! those tokens (and number literals too large for f64) replaced by a sentinel and the text parsed
//! again, so a non-finite `value` is reported as `non_finite_value` rather than `malformed_json`.
//!
//! The code is cut by what it is:
//! - this file: the public API and the order of checks ([`validate_event_json`]);
//! - `value`: the values JSON is read into, the seeds for keys and strings, the limits and the
//!   detail helper; a leaf every other part imports (no circle between the parts);
//! - `shape`: the event's slots, field names and the spellings of its enumerations;
//! - `reader`: the slot reader, a serde visitor that reads an object into [`Top`] and [`Val`]s;
//! - `fields`: typed access to those values, each naming its field path in the rejection;
//! - `checks`: the semantic checks (identifiers, non-finite, negative, plausible clock);
//! - `scan`: a byte scanner for the plainest valid JSON, the first try of the fast paths;
//! - `fast`: the typed single-pass fast path for valid schema-1 events;
//! - `non_finite`: the fallback for `NaN`, `Infinity` and number literals that overflow f64.

mod checks;
mod fast;
mod fields;
mod non_finite;
mod reader;
mod scan;
mod shape;
mod value;

// Shared with the trace-line parser (`crate::trace::parse`).
pub(crate) use checks::{check_identifier, check_plausible_ts};
pub(crate) use fields::{
    as_enum, as_i64, as_number, as_str, bad_type, clock_from, present, required,
};
pub(crate) use non_finite::{read_top_with_fallback, Patched};
pub(crate) use reader::read_top;
pub(crate) use scan::{member_span, Scan};
pub(crate) use shape::UNITS;
pub(crate) use value::{describe_raw, show, Number, Pass, Shape, Top, Val};
pub use value::{MAX_EVENT_ID_BYTES, MIN_PLAUSIBLE_TS_MS};

use super::features::{Feature, Features, Quantity};
use super::schema2::{self, Axis, Combine};
use super::{Event, Unit};
use crate::event::rejection::{Reason, Rejection};
use checks::{check_event_id, finite, non_negative};
use fast::fast_event;
use fields::{as_bool, as_u64, axes_from, feature_path, features_from, samples_from};
use shape::*;
use value::without_negative_zero;

/// An event object larger than this many bytes is rejected as `oversized` without parsing.
pub const MAX_EVENT_BYTES: usize = 16 * 1024;

/// Parses and validates the JSON text of one event object (schema 1 or 2).
///
/// Schema-2 events are upcast to the scalar form (`value = combine(axes)`) and keep `schema: 2`.
/// A `"replayed"` boolean (added by the MQTT output for backlog) is accepted and ignored.
/// `-0.0` is accepted and normalised to `0.0`, so equal events have equal fingerprints.
pub fn parse_event(raw: &str) -> Result<Event, Rejection> {
    if raw.len() > MAX_EVENT_BYTES {
        return Err(Rejection::new(
            Reason::Oversized,
            format!("event object is {} bytes (max {MAX_EVENT_BYTES})", raw.len()),
        ));
    }
    match fast_event(raw) {
        Some(event) => Ok(event),
        None => exact_event(raw),
    }
}

/// The reference path: decides every input (the fast path only ever agrees with it). Public
/// only for the fuzz targets `event_json` and `event_schema2` (fuzz/), which check
/// [`parse_event`] against it.
#[doc(hidden)]
pub fn exact_event(raw: &str) -> Result<Event, Rejection> {
    read_top_with_fallback::<EVENT_SLOTS, _>(raw, &EVENT_SHAPE, |top, _| validate_event_json(&top))?
}

// ---------------------------------------------------------------------------------------------
// Validation of an event's slots.

/// What the event carries as its magnitude before the semantic checks.
enum Magnitude {
    Scalar(Number),
    Axes { axes: Vec<(Axis, Number)>, combine: Combine },
}

/// Validates the slots of one event object; see the module docs for the order of checks.
pub(crate) fn validate_event_json(top: &Top<'_, EVENT_SLOTS>) -> Result<Event, Rejection> {
    let slot = |i: usize| top.vals[i].as_ref();

    // Schema first: a future version with another shape must say unknown_schema.
    let schema = match required(slot(F_SCHEMA), "schema")? {
        Val::U64(n @ (1 | 2)) => *n as u32,
        Val::U64(n) => return Err(unknown_schema(&n.to_string())),
        Val::I64(n) => return Err(unknown_schema(&n.to_string())),
        other => return Err(bad_type("schema", "an integer", other)),
    };

    // Fields the schema does not define.
    let allowed = |i: usize| match i {
        F_VALUE => schema == 1,
        F_AXES | F_COMBINE => schema == 2,
        _ => true,
    };
    if let Some((name, known)) = top.first_unknown(allowed) {
        let detail = if known {
            let hint = if schema == 2 { " (schema 2 carries \"axes\")" } else { "" };
            format!("field {} is not defined in schema {schema}{hint}", show(name))
        } else {
            format!("unknown field {}", show(name))
        };
        return Err(Rejection::new(Reason::UnknownField, detail));
    }

    // Presence and type, in a fixed order.
    let event_id = as_str(required(slot(F_EVENT_ID), "event_id")?, "event_id")?;
    let machine = as_str(required(slot(F_MACHINE), "machine")?, "machine")?;
    let sensor = as_str(required(slot(F_SENSOR), "sensor")?, "sensor")?;
    let seq = as_u64(required(slot(F_SEQ), "seq")?, "seq")?;
    let ts_ms = as_i64(required(slot(F_TS_MS), "ts_ms")?, "ts_ms")?;
    let clock = clock_from(required(slot(F_CLOCK), "clock")?)?;
    let metric = as_enum(required(slot(F_METRIC), "metric")?, "metric", METRICS)?;
    let magnitude = if schema == 1 {
        Magnitude::Scalar(as_number(required(slot(F_VALUE), "value")?, "value")?)
    } else {
        let axes = axes_from(required(slot(F_AXES), "axes")?)?;
        let combine = match present(slot(F_COMBINE)) {
            None => Combine::default(),
            Some(v) => as_enum(v, "combine", COMBINES)?,
        };
        Magnitude::Axes { axes, combine }
    };
    let unit = as_enum(required(slot(F_UNIT), "unit")?, "unit", UNITS)?;
    let quality = as_enum(required(slot(F_QUALITY), "quality")?, "quality", QUALITIES)?;
    let samples = match present(slot(F_SAMPLES)) {
        None => None,
        Some(v) => Some(samples_from(v)?),
    };
    let features = match present(slot(F_FEATURES)) {
        None => Vec::new(),
        Some(v) => features_from(v)?,
    };
    if let Some(v) = present(slot(F_REPLAYED)) {
        as_bool(v, "replayed")?;
    }

    // Semantic checks.
    check_event_id(event_id)?;
    check_identifier("machine", machine)?;
    check_identifier("sensor", sensor)?;
    let value = match magnitude {
        Magnitude::Scalar(n) => {
            let x = finite(n, "value")?;
            non_negative(x, "value")?;
            x
        }
        Magnitude::Axes { axes, combine } => {
            let mut finite_axes = Vec::with_capacity(axes.len());
            for &(axis, n) in &axes {
                finite_axes.push((axis, finite(n, axis.path())?));
            }
            for &(axis, x) in &finite_axes {
                non_negative(x, axis.path())?;
            }
            let x = schema2::upcast(&finite_axes, combine);
            if !x.is_finite() {
                return Err(Rejection::new(
                    Reason::NonFiniteValue,
                    format!("value: the {} of axes overflows f64", combine.as_str()),
                ));
            }
            x
        }
    };
    let mut finite_features = Vec::with_capacity(features.len());
    for &(f, n) in &features {
        finite_features.push((f, finite(n, &feature_path(f))?));
    }
    for &(f, x) in &finite_features {
        non_negative(x, &feature_path(f))?;
    }
    if !metric.fits(unit) {
        return Err(Rejection::new(
            Reason::UnitMismatch,
            format!("unit {:?} does not fit metric {:?}", unit.as_str(), metric.as_str()),
        ));
    }
    if let Some(&(f, _)) = finite_features.iter().find(|&&(f, _)| !feature_fits(f, unit)) {
        return Err(Rejection::new(
            Reason::UnitMismatch,
            format!(
                "{}: an acceleration is in the event's unit, and {:?} is none",
                feature_path(f),
                unit.as_str()
            ),
        ));
    }
    check_plausible_ts(ts_ms, "ts_ms")?;
    let features: Features = finite_features.into_iter().collect();

    Ok(Event {
        event_id: event_id.to_owned(),
        machine: machine.to_owned(),
        sensor: sensor.to_owned(),
        seq,
        ts_ms,
        clock,
        metric,
        value: without_negative_zero(value),
        unit,
        schema,
        quality,
        samples,
        features: (!features.is_empty()).then(|| Box::new(features)),
    })
}

/// Whether a feature value can be read with the event's `unit`: an acceleration feature is in
/// that unit, so it must be an acceleration unit; the others carry their own.
pub(super) fn feature_fits(f: Feature, unit: Unit) -> bool {
    f.quantity() != Quantity::Acceleration || unit != Unit::MmS
}

fn unknown_schema(found: &str) -> Rejection {
    Rejection::new(Reason::UnknownSchema, format!("schema {found} is not supported (known: 1, 2)"))
}

#[cfg(test)]
mod tests;
