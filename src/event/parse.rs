//! Parsing and validation of untrusted event JSON (CONTRACTS sections 2 and 7).
//!
//! [`parse_event`] turns the text of one event object into an [`Event`] or a [`Rejection`]. It
//! never panics, and the same bytes always give the same reason and detail.
//!
//! Order of checks: size → JSON (syntax, an object, no duplicate key at any depth) → `schema` →
//! unknown fields → presence and type of each field in a fixed order → semantic checks
//! (identifiers, non-finite value, negative value, unit mismatch, implausible clock).
//!
//! The JSON is read once into a small fixed set of slots (no `serde_json::Value`), with borrowed
//! strings wherever the text has no escapes. Python's `json.dumps` writes bare `NaN`, `Infinity`
//! and `-Infinity`, which are not JSON; only when the strict parse fails is the text re-scanned,
//! those tokens (and number literals too large for f64) replaced by a sentinel and the text parsed
//! again, so a non-finite `value` is reported as `non_finite_value` rather than `malformed_json`.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::schema2::{self, Axis, Combine};
use super::{is_identifier, Clock, ClockState, Event, Metric, Quality, SampleRef, Unit};
use crate::quarantine::{Reason, Rejection};

/// An event object larger than this many bytes is rejected as `oversized` without parsing.
pub const MAX_EVENT_BYTES: usize = 16 * 1024;

/// 2000-01-01T00:00:00Z in Unix milliseconds: an earlier `ts_ms` is `clock_implausible`.
pub const MIN_PLAUSIBLE_TS_MS: i64 = 946_684_800_000;

/// The longest `event_id`, in bytes.
pub const MAX_EVENT_ID_BYTES: usize = 128;

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

/// The reference path: decides every input (the fast path only ever agrees with it).
fn exact_event(raw: &str) -> Result<Event, Rejection> {
    match read_top::<EVENT_SLOTS>(raw, &EVENT_SHAPE, Pass::Strict) {
        Ok(top) => validate_event_json(&top),
        Err(e) => {
            let Some(patched) = patch_non_finite(raw) else {
                return Err(malformed_json(&e));
            };
            match read_top::<EVENT_SLOTS>(&patched.text, &EVENT_SHAPE, Pass::Fallback) {
                Ok(top) => validate_event_json(&top),
                Err(e2) => Err(malformed_json(pick_error(&e, &e2))),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The event shape and its validation.

pub(crate) const EVENT_SLOTS: usize = 15;
const F_EVENT_ID: usize = 0;
const F_MACHINE: usize = 1;
const F_SENSOR: usize = 2;
const F_SEQ: usize = 3;
const F_TS_MS: usize = 4;
const F_CLOCK: usize = 5;
const F_METRIC: usize = 6;
const F_VALUE: usize = 7;
const F_UNIT: usize = 8;
const F_SCHEMA: usize = 9;
const F_QUALITY: usize = 10;
const F_SAMPLES: usize = 11;
const F_REPLAYED: usize = 12;
const F_AXES: usize = 13;
const F_COMBINE: usize = 14;

const EVENT_NAMES: [&str; EVENT_SLOTS] = [
    "event_id", "machine", "sensor", "seq", "ts_ms", "clock", "metric", "value", "unit", "schema",
    "quality", "samples", "replayed", "axes", "combine",
];

fn event_key(k: &str) -> Option<usize> {
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
        _ => return None,
    })
}

static EVENT_SHAPE: Shape = Shape {
    names: &EVENT_NAMES,
    lookup: event_key,
    raw: None,
    nums: None,
    expecting: "a JSON object (an event)",
};

const METRICS: &[(&str, Metric)] = &[
    ("accel_rms", Metric::AccelRms),
    ("velocity_rms", Metric::VelocityRms),
    ("accel_peak", Metric::AccelPeak),
];
pub(crate) const UNITS: &[(&str, Unit)] =
    &[("g", Unit::G), ("m/s2", Unit::Ms2), ("mm/s", Unit::MmS)];
const QUALITIES: &[(&str, Quality)] =
    &[("good", Quality::Good), ("uncertain", Quality::Uncertain), ("bad", Quality::Bad)];
const CLOCK_STATES: &[(&str, ClockState)] = &[
    ("synced", ClockState::Synced),
    ("holdover", ClockState::Holdover),
    ("unsynced", ClockState::Unsynced),
    ("stepped", ClockState::Stepped),
    ("unknown", ClockState::Unknown),
];
const COMBINES: &[(&str, Combine)] = &[("rss", Combine::Rss), ("max", Combine::Max)];

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
    if !metric.fits(unit) {
        return Err(Rejection::new(
            Reason::UnitMismatch,
            format!("unit {:?} does not fit metric {:?}", unit.as_str(), metric.as_str()),
        ));
    }
    check_plausible_ts(ts_ms, "ts_ms")?;

    Ok(Event {
        event_id: event_id.to_owned(),
        machine: machine.to_owned(),
        sensor: sensor.to_owned(),
        seq,
        ts_ms,
        clock,
        metric,
        // -0.0 is accepted; store +0.0 so equal events have equal fingerprints.
        value: if value == 0.0 { 0.0 } else { value },
        unit,
        schema,
        quality,
        samples,
    })
}

fn unknown_schema(found: &str) -> Rejection {
    Rejection::new(Reason::UnknownSchema, format!("schema {found} is not supported (known: 1, 2)"))
}

/// Parses a `clock` object (shared by events and samples lines).
pub(crate) fn clock_from(v: &Val<'_>) -> Result<Clock, Rejection> {
    let obj = as_obj(v, "clock")?;
    obj.check_fields("clock", &["state", "err_ms"])?;
    let state = as_enum(required(obj.get("state"), "clock.state")?, "clock.state", CLOCK_STATES)?;
    let err_ms = match present(obj.get("err_ms")) {
        None => None,
        Some(v) => Some(as_u32(v, "clock.err_ms")?),
    };
    Ok(Clock { state, err_ms })
}

fn samples_from(v: &Val<'_>) -> Result<SampleRef, Rejection> {
    let obj = as_obj(v, "samples")?;
    obj.check_fields("samples", &["block_seq", "from_ms", "to_ms"])?;
    let block_seq =
        as_u64(required(obj.get("block_seq"), "samples.block_seq")?, "samples.block_seq")?;
    let from_ms = as_i64(required(obj.get("from_ms"), "samples.from_ms")?, "samples.from_ms")?;
    let to_ms = as_i64(required(obj.get("to_ms"), "samples.to_ms")?, "samples.to_ms")?;
    if from_ms > to_ms {
        return Err(Rejection::new(
            Reason::BadType,
            format!("samples: from_ms {from_ms} is after to_ms {to_ms}"),
        ));
    }
    Ok(SampleRef { block_seq, from_ms, to_ms })
}

/// Reads `axes`: 1..=3 entries keyed `x`, `y`, `z`, each a number; sorted by axis.
fn axes_from(v: &Val<'_>) -> Result<Vec<(Axis, Number)>, Rejection> {
    let obj = as_obj(v, "axes")?;
    if obj.entries.is_empty() {
        return Err(Rejection::new(
            Reason::BadType,
            "axes: expected 1 to 3 of \"x\", \"y\", \"z\", found an empty object",
        ));
    }
    let mut axes = Vec::with_capacity(obj.entries.len());
    for (key, val) in &obj.entries {
        let Some(axis) = Axis::from_key(key) else {
            return Err(Rejection::new(
                Reason::BadType,
                format!("axes: unknown axis {} (expected \"x\", \"y\" or \"z\")", show(key)),
            ));
        };
        axes.push((axis, as_number(val, axis.path())?));
    }
    // Keys are unique (duplicates are malformed_json), so at most three remain.
    axes.sort_by_key(|&(axis, _)| axis);
    Ok(axes)
}

fn check_event_id(id: &str) -> Result<(), Rejection> {
    if id.is_empty() {
        return Err(Rejection::new(Reason::BadIdentifier, "event_id is empty"));
    }
    if id.len() > MAX_EVENT_ID_BYTES {
        return Err(Rejection::new(
            Reason::BadIdentifier,
            format!("event_id {} is {} bytes (max {MAX_EVENT_ID_BYTES})", show(id), id.len()),
        ));
    }
    Ok(())
}

/// `machine` and `sensor`: 1..=64 bytes of `[A-Za-z0-9_.-]`; the detail says why not.
pub(crate) fn check_identifier(field: &str, s: &str) -> Result<(), Rejection> {
    if is_identifier(s) {
        return Ok(());
    }
    let why = if s.is_empty() {
        "is empty".to_owned()
    } else if s.len() > 64 {
        format!("{} is {} bytes (max 64)", show(s), s.len())
    } else {
        let bad = s
            .char_indices()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')));
        match bad {
            Some((i, c)) => {
                format!("{} has {c:?} at byte {i} (allowed: A-Z a-z 0-9 _ . -)", show(s))
            }
            None => format!("{} is not an identifier", show(s)),
        }
    };
    Err(Rejection::new(Reason::BadIdentifier, format!("{field} {why}")))
}

pub(crate) fn check_plausible_ts(ts: i64, field: &str) -> Result<(), Rejection> {
    if ts < MIN_PLAUSIBLE_TS_MS {
        return Err(Rejection::new(
            Reason::ClockImplausible,
            format!("{field} {ts} is before 2000-01-01T00:00:00Z ({MIN_PLAUSIBLE_TS_MS})"),
        ));
    }
    Ok(())
}

/// The number itself, or `non_finite_value` naming `path`.
pub(crate) fn finite(n: Number, path: &str) -> Result<f64, Rejection> {
    match n {
        Number::Finite(x) => Ok(x),
        Number::NonFinite(t) => {
            Err(Rejection::new(Reason::NonFiniteValue, format!("{path} is {}", t.describe())))
        }
    }
}

fn non_negative(x: f64, path: &str) -> Result<(), Rejection> {
    if x < 0.0 {
        return Err(Rejection::new(
            Reason::NegativeValue,
            format!("{path} is {x:?} (must be >= 0)"),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Typed access to parsed JSON values. Each names the field path in its rejection.

/// A number as found in the text: finite, or one of the non-finite tokens the fallback replaced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Number {
    Finite(f64),
    NonFinite(NonFinite),
}

/// The value of a field, or `missing_field` naming `path`.
pub(crate) fn required<'v, 'a>(
    v: Option<&'v Val<'a>>,
    path: &str,
) -> Result<&'v Val<'a>, Rejection> {
    v.ok_or_else(|| Rejection::new(Reason::MissingField, format!("missing field {path:?}")))
}

/// An optional field: absent and `null` are the same.
pub(crate) fn present<'v, 'a>(v: Option<&'v Val<'a>>) -> Option<&'v Val<'a>> {
    v.filter(|v| !matches!(v, Val::Null))
}

pub(crate) fn bad_type(path: &str, expected: &str, found: &Val<'_>) -> Rejection {
    Rejection::new(
        Reason::BadType,
        format!("{path}: expected {expected}, found {}", found.describe()),
    )
}

pub(crate) fn as_str<'v>(v: &'v Val<'_>, path: &str) -> Result<&'v str, Rejection> {
    match v {
        Val::Str(s) => Ok(s),
        other => Err(bad_type(path, "a string", other)),
    }
}

pub(crate) fn as_bool(v: &Val<'_>, path: &str) -> Result<bool, Rejection> {
    match v {
        Val::Bool(b) => Ok(*b),
        other => Err(bad_type(path, "a boolean", other)),
    }
}

pub(crate) fn as_u64(v: &Val<'_>, path: &str) -> Result<u64, Rejection> {
    match v {
        Val::U64(n) => Ok(*n),
        other => Err(bad_type(path, "an unsigned 64-bit integer", other)),
    }
}

pub(crate) fn as_u32(v: &Val<'_>, path: &str) -> Result<u32, Rejection> {
    match v {
        Val::U64(n) => {
            u32::try_from(*n).map_err(|_| bad_type(path, "an unsigned 32-bit integer", v))
        }
        other => Err(bad_type(path, "an unsigned 32-bit integer", other)),
    }
}

pub(crate) fn as_i64(v: &Val<'_>, path: &str) -> Result<i64, Rejection> {
    match v {
        Val::U64(n) => i64::try_from(*n).map_err(|_| bad_type(path, "a signed 64-bit integer", v)),
        Val::I64(n) => Ok(*n),
        other => Err(bad_type(path, "a signed 64-bit integer", other)),
    }
}

/// Any JSON number, or a non-finite token (left to the semantic checks).
pub(crate) fn as_number(v: &Val<'_>, path: &str) -> Result<Number, Rejection> {
    match v {
        Val::U64(n) => Ok(Number::Finite(*n as f64)),
        Val::I64(n) => Ok(Number::Finite(*n as f64)),
        Val::F64(x) => Ok(Number::Finite(*x)),
        Val::NonFinite(t) => Ok(Number::NonFinite(*t)),
        other => Err(bad_type(path, "a number", other)),
    }
}

pub(crate) fn as_obj<'v, 'a>(v: &'v Val<'a>, path: &str) -> Result<&'v Obj<'a>, Rejection> {
    match v {
        Val::Object(o) => Ok(o),
        other => Err(bad_type(path, "an object", other)),
    }
}

/// A string out of a fixed enumeration; anything else is `bad_type`.
pub(crate) fn as_enum<T: Copy>(
    v: &Val<'_>,
    path: &str,
    table: &[(&str, T)],
) -> Result<T, Rejection> {
    let s = match v {
        Val::Str(s) => s,
        other => return Err(bad_type(path, &one_of(table), other)),
    };
    match table.iter().find(|(name, _)| *name == &**s) {
        Some(&(_, t)) => Ok(t),
        None => Err(Rejection::new(
            Reason::BadType,
            format!("{path}: unknown value {}, expected {}", show(s), one_of(table)),
        )),
    }
}

fn one_of<T>(table: &[(&str, T)]) -> String {
    let names: Vec<String> = table.iter().map(|(n, _)| format!("{n:?}")).collect();
    format!("one of {}", names.join(", "))
}

/// A string for a rejection detail: quoted and escaped, cut to about 40 characters.
pub(crate) fn show(s: &str) -> String {
    const KEEP: usize = 40;
    if s.len() <= KEEP + 8 {
        return format!("{s:?}");
    }
    let mut cut = KEEP;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{:?}… ({} bytes)", &s[..cut], s.len())
}

// ---------------------------------------------------------------------------------------------
// Reading JSON into values, without serde_json::Value.

/// A parsed JSON value, kept only as far as validation needs it.
#[derive(Debug)]
pub(crate) enum Val<'a> {
    Null,
    Bool(bool),
    /// Any non-negative integer literal that fits u64.
    U64(u64),
    /// A negative integer literal that fits i64.
    I64(i64),
    /// Any other (finite) number.
    F64(f64),
    /// A non-finite token replaced by the fallback scan.
    NonFinite(NonFinite),
    Str(Cow<'a, str>),
    /// An array whose contents are not needed (checked for syntax and duplicate keys only).
    Array,
    Object(Obj<'a>),
    /// An array read as numbers (the `data` of a samples line).
    Nums(Box<Nums>),
    /// The unparsed text of a value (the `event` of a trace line).
    Raw(&'a RawValue),
    /// A valid event read in the same pass as its trace line: it is in [`Top::event`].
    Event,
}

impl Val<'_> {
    /// What was found, for `bad_type` details.
    pub(crate) fn describe(&self) -> String {
        match self {
            Val::Null => "null".to_owned(),
            Val::Bool(b) => format!("{b}"),
            Val::U64(n) => format!("the number {n}"),
            Val::I64(n) => format!("the number {n}"),
            Val::F64(x) => format!("the number {x:?}"),
            Val::NonFinite(t) => t.describe().to_owned(),
            Val::Str(s) => format!("the string {}", show(s)),
            Val::Array | Val::Nums(_) => "an array".to_owned(),
            Val::Object(_) | Val::Event => "an object".to_owned(),
            Val::Raw(r) => describe_raw(r.get()),
        }
    }
}

/// Describes the text of one JSON value by its first character.
pub(crate) fn describe_raw(text: &str) -> String {
    let t = text.trim_start();
    match t.as_bytes().first() {
        Some(b'{') => "an object".to_owned(),
        Some(b'[') => "an array".to_owned(),
        Some(b'"') => match serde_json::from_str::<String>(t) {
            Ok(s) => match NonFinite::from_decoded(&s) {
                Some(n) => n.describe().to_owned(),
                None => format!("the string {}", show(&s)),
            },
            Err(_) => "a string".to_owned(),
        },
        Some(b't' | b'f') => t.to_owned(),
        Some(b'n') => "null".to_owned(),
        _ => format!("the number {}", show(t)),
    }
}

/// A JSON object's entries in document order (keys are unique).
#[derive(Debug, Default)]
pub(crate) struct Obj<'a> {
    pub(crate) entries: Vec<(Cow<'a, str>, Val<'a>)>,
}

impl<'a> Obj<'a> {
    pub(crate) fn get(&self, key: &str) -> Option<&Val<'a>> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// `unknown_field` for the first key (in document order) not in `allowed`.
    pub(crate) fn check_fields(&self, path: &str, allowed: &[&str]) -> Result<(), Rejection> {
        match self.entries.iter().find(|(k, _)| !allowed.contains(&&**k)) {
            None => Ok(()),
            Some((k, _)) => Err(Rejection::new(
                Reason::UnknownField,
                format!("unknown field {}", show(&format!("{path}.{k}"))),
            )),
        }
    }
}

/// An array read as numbers: the finite ones, and the first element of each kind of trouble.
#[derive(Debug, Default)]
pub(crate) struct Nums {
    pub(crate) values: Vec<f64>,
    /// The first element that is not a number: its index and what it was.
    pub(crate) first_bad: Option<(usize, String)>,
    /// The first non-finite token.
    pub(crate) first_non_finite: Option<(usize, NonFinite)>,
}

/// How a top-level object's known fields are read.
#[derive(Debug)]
pub(crate) struct Shape {
    pub(crate) names: &'static [&'static str],
    pub(crate) lookup: fn(&str) -> Option<usize>,
    /// The slot holding an event object: raw text, or read inline in [`Pass::Inline`].
    pub(crate) raw: Option<usize>,
    /// The slot read as an array of numbers.
    pub(crate) nums: Option<usize>,
    pub(crate) expecting: &'static str,
}

/// A top-level object read into fixed slots, with the document position of each key.
#[derive(Debug)]
pub(crate) struct Top<'a, const N: usize> {
    pub(crate) vals: [Option<Val<'a>>; N],
    pos: [u32; N],
    names: &'static [&'static str],
    /// Keys that are not in the shape, with their positions.
    unknown: Vec<(u32, Cow<'a, str>)>,
    /// The event read by [`Pass::Inline`] (then its slot holds [`Val::Event`]).
    pub(crate) event: Option<Event>,
}

impl<const N: usize> Top<'_, N> {
    /// The first key in document order that is unknown or not `allowed`; `true` when known.
    pub(crate) fn first_unknown(&self, allowed: impl Fn(usize) -> bool) -> Option<(&str, bool)> {
        let mut best: Option<(u32, &str, bool)> =
            self.unknown.first().map(|(p, k)| (*p, &**k, false));
        for i in 0..N {
            let earlier = match best {
                None => true,
                Some((p, _, _)) => self.pos[i] < p,
            };
            if self.vals[i].is_some() && !allowed(i) && earlier {
                best = Some((self.pos[i], self.names[i], true));
            }
        }
        best.map(|(_, k, known)| (k, known))
    }
}

/// How [`read_top`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Strict JSON; the `raw` slot is kept as text.
    Strict,
    /// Strict JSON, and the `raw` slot is read as an event object in the same pass. Any error
    /// must be answered by a [`Pass::Strict`] read, which judges the event on its own text.
    Inline,
    /// The text was patched by [`patch_non_finite`]: sentinel strings are non-finite tokens.
    Fallback,
}

/// Reads `text` as one object of `shape`.
pub(crate) fn read_top<'a, const N: usize>(
    text: &'a str,
    shape: &'static Shape,
    pass: Pass,
) -> Result<Box<Top<'a, N>>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let seed = TopSeed::<N> { shape, fb: pass == Pass::Fallback, inline: pass == Pass::Inline };
    let top = seed.deserialize(&mut de)?;
    de.end()?;
    Ok(top)
}

/// `malformed_json` with serde_json's message (which names the position).
pub(crate) fn malformed_json(e: &serde_json::Error) -> Rejection {
    Rejection::new(Reason::MalformedJson, e.to_string())
}

/// After a failed fallback pass: its error when it is ours (duplicate key, not an object), else
/// the strict pass's error, whose position refers to the original text.
pub(crate) fn pick_error<'e>(
    strict: &'e serde_json::Error,
    fallback: &'e serde_json::Error,
) -> &'e serde_json::Error {
    if fallback.classify() == serde_json::error::Category::Data {
        fallback
    } else {
        strict
    }
}

fn duplicate<E: de::Error>(key: &str) -> E {
    E::custom(format_args!("duplicate key {key:?}"))
}

struct TopSeed<const N: usize> {
    shape: &'static Shape,
    fb: bool,
    inline: bool,
}

impl<'de, const N: usize> DeserializeSeed<'de> for TopSeed<N> {
    type Value = Box<Top<'de, N>>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, const N: usize> Visitor<'de> for TopSeed<N> {
    type Value = Box<Top<'de, N>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.shape.expecting)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // Boxed from the start: the slots are a few hundred bytes, not worth moving around.
        let mut top = Box::new(Top {
            vals: std::array::from_fn(|_| None),
            pos: [0; N],
            names: self.shape.names,
            unknown: Vec::new(),
            event: None,
        });
        let mut unknown_set: Option<HashSet<String>> = None;
        let mut position: u32 = 0;
        let value = ValSeed { fb: self.fb, nums: false };
        while let Some(key) = map.next_key_seed(KeySeed { lookup: self.shape.lookup })? {
            position = position.saturating_add(1);
            match key {
                Key::Known(i) => {
                    if top.vals[i].is_some() {
                        return Err(duplicate(self.shape.names[i]));
                    }
                    let v = if Some(i) == self.shape.raw {
                        if self.inline {
                            top.event = Some(map.next_value_seed(FastEvent)?);
                            Val::Event
                        } else {
                            Val::Raw(map.next_value::<&'de RawValue>()?)
                        }
                    } else {
                        map.next_value_seed(ValSeed {
                            fb: self.fb,
                            nums: Some(i) == self.shape.nums,
                        })?
                    };
                    top.vals[i] = Some(v);
                    top.pos[i] = position;
                }
                Key::Other(name) => {
                    if !insert_unique(&top.unknown, &mut unknown_set, &name, |(_, k)| k) {
                        return Err(duplicate(&name));
                    }
                    map.next_value_seed(value)?;
                    top.unknown.push((position, name));
                }
            }
        }
        Ok(top)
    }
}

/// Records `key` as seen; false when it already was. Linear for small objects, hashed beyond.
fn insert_unique<T>(
    seen: &[T],
    set: &mut Option<HashSet<String>>,
    key: &str,
    key_of: impl Fn(&T) -> &str,
) -> bool {
    const LINEAR: usize = 16;
    if set.is_none() && seen.len() >= LINEAR {
        *set = Some(seen.iter().map(|t| key_of(t).to_owned()).collect());
    }
    match set {
        Some(set) => set.insert(key.to_owned()),
        None => !seen.iter().any(|t| key_of(t) == key),
    }
}

enum Key<'a> {
    Known(usize),
    Other(Cow<'a, str>),
}

struct KeySeed {
    lookup: fn(&str) -> Option<usize>,
}

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Key<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok((self.lookup)(s).map_or(Key::Other(Cow::Borrowed(s)), Key::Known))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok((self.lookup)(s).map_or_else(|| Key::Other(Cow::Owned(s.to_owned())), Key::Known))
    }
}

/// A string key or value, borrowed from the text when it has no escapes.
struct CowStr;

impl<'de> DeserializeSeed<'de> for CowStr {
    type Value = Cow<'de, str>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for CowStr {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(s))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s.to_owned()))
    }
}

/// Reads any JSON value into a [`Val`]. `nums`: read an array as [`Nums`].
#[derive(Clone, Copy)]
struct ValSeed {
    fb: bool,
    nums: bool,
}

impl<'de> DeserializeSeed<'de> for ValSeed {
    type Value = Val<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl ValSeed {
    fn string(self, s: Cow<'_, str>) -> Val<'_> {
        if self.fb {
            if let Some(t) = NonFinite::from_decoded(&s) {
                return Val::NonFinite(t);
            }
        }
        Val::Str(s)
    }
}

impl<'de> Visitor<'de> for ValSeed {
    type Value = Val<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Val::Null)
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Self::Value, E> {
        Ok(Val::Bool(b))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
        Ok(Val::U64(n))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
        Ok(u64::try_from(n).map_or(Val::I64(n), Val::U64))
    }
    fn visit_f64<E: de::Error>(self, x: f64) -> Result<Self::Value, E> {
        Ok(Val::F64(x))
    }
    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(self.string(Cow::Borrowed(s)))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(self.string(Cow::Owned(s.to_owned())))
    }
    fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
        Ok(self.string(Cow::Owned(s)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let elem = ValSeed { fb: self.fb, nums: false };
        if !self.nums {
            while seq.next_element_seed(elem)?.is_some() {}
            return Ok(Val::Array);
        }
        let mut nums = Box::<Nums>::default();
        let mut i = 0usize;
        while let Some(v) = seq.next_element_seed(elem)? {
            match v {
                Val::U64(n) => nums.values.push(n as f64),
                Val::I64(n) => nums.values.push(n as f64),
                Val::F64(x) => nums.values.push(x),
                Val::NonFinite(t) => {
                    nums.first_non_finite.get_or_insert((i, t));
                }
                other => {
                    if nums.first_bad.is_none() {
                        nums.first_bad = Some((i, other.describe()));
                    }
                }
            }
            i += 1;
        }
        Ok(Val::Nums(nums))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut obj = Obj::default();
        let mut set = None;
        let value = ValSeed { fb: self.fb, nums: false };
        while let Some(key) = map.next_key_seed(CowStr)? {
            if !insert_unique(&obj.entries, &mut set, &key, |(k, _)| k) {
                return Err(duplicate(&key));
            }
            let v = map.next_value_seed(value)?;
            obj.entries.push((key, v));
        }
        Ok(Val::Object(obj))
    }
}

// ---------------------------------------------------------------------------------------------
// The fast path for valid schema-1 events.
//
// It reads the fields straight into their types in one pass and succeeds only for an event that
// the exact path above would accept, giving the same `Event`: the same fields, types, enumerations,
// `null`-as-absent rule and semantic checks. On anything else (schema 2, an unknown or duplicate
// key, a wrong type, a failed check) it fails without saying why, and the exact path decides.

/// The event, when `raw` is a valid schema-1 event; `None` leaves the verdict to the exact path.
fn fast_event(raw: &str) -> Option<Event> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let event = FastEvent.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(event)
}

fn no<E: de::Error>() -> E {
    E::custom("not a plain valid event")
}

fn fast_enum<T: Copy, E: de::Error>(s: &str, table: &[(&str, T)]) -> Result<T, E> {
    table.iter().find(|(name, _)| *name == s).map(|&(_, t)| t).ok_or_else(no)
}

/// Reads one valid schema-1 event object, or fails.
pub(crate) struct FastEvent;

impl<'de> DeserializeSeed<'de> for FastEvent {
    type Value = Event;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FastEvent {
    type Value = Event;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Event, A::Error> {
        let (mut event_id, mut machine, mut sensor) = (None, None, None);
        let (mut seq, mut ts_ms, mut clock, mut metric, mut value) = (None, None, None, None, None);
        let (mut unit, mut schema, mut quality, mut samples) = (None, None, None, None);
        let mut seen = 0u32;
        while let Some(key) = map.next_key_seed(KeySeed { lookup: event_key })? {
            let Key::Known(i) = key else { return Err(no()) };
            if seen & (1 << i) != 0 {
                return Err(no());
            }
            seen |= 1 << i;
            match i {
                F_EVENT_ID => event_id = Some(map.next_value_seed(CowStr)?),
                F_MACHINE => machine = Some(map.next_value_seed(CowStr)?),
                F_SENSOR => sensor = Some(map.next_value_seed(CowStr)?),
                F_SEQ => seq = Some(map.next_value::<u64>()?),
                F_TS_MS => ts_ms = Some(map.next_value::<i64>()?),
                F_CLOCK => clock = Some(map.next_value_seed(FastClock)?),
                F_METRIC => metric = Some(fast_enum(&map.next_value_seed(CowStr)?, METRICS)?),
                F_VALUE => value = Some(map.next_value::<f64>()?),
                F_UNIT => unit = Some(fast_enum(&map.next_value_seed(CowStr)?, UNITS)?),
                F_SCHEMA => schema = Some(map.next_value::<u64>()?),
                F_QUALITY => quality = Some(fast_enum(&map.next_value_seed(CowStr)?, QUALITIES)?),
                F_SAMPLES => samples = map.next_value_seed(FastSamples)?,
                F_REPLAYED => {
                    map.next_value::<Option<bool>>()?;
                }
                _ => return Err(no()),
            }
        }
        let (Some(event_id), Some(machine), Some(sensor), Some(seq), Some(ts_ms), Some(clock)) =
            (event_id, machine, sensor, seq, ts_ms, clock)
        else {
            return Err(no());
        };
        let (Some(metric), Some(value), Some(unit), Some(1), Some(quality)) =
            (metric, value, unit, schema, quality)
        else {
            return Err(no());
        };
        let valid = check_event_id(&event_id).is_ok()
            && is_identifier(&machine)
            && is_identifier(&sensor)
            && value.is_finite()
            && value >= 0.0
            && metric.fits(unit)
            && ts_ms >= MIN_PLAUSIBLE_TS_MS;
        if !valid {
            return Err(no());
        }
        Ok(Event {
            event_id: event_id.into_owned(),
            machine: machine.into_owned(),
            sensor: sensor.into_owned(),
            seq,
            ts_ms,
            clock,
            metric,
            value: if value == 0.0 { 0.0 } else { value },
            unit,
            schema: 1,
            quality,
            samples,
        })
    }
}

struct FastClock;

impl<'de> DeserializeSeed<'de> for FastClock {
    type Value = Clock;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FastClock {
    type Value = Clock;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a clock object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Clock, A::Error> {
        let (mut state, mut err_ms, mut seen_err) = (None, None, false);
        while let Some(key) = map.next_key_seed(CowStr)? {
            match &*key {
                "state" if state.is_none() => {
                    state = Some(fast_enum(&map.next_value_seed(CowStr)?, CLOCK_STATES)?);
                }
                "err_ms" if !seen_err => {
                    seen_err = true;
                    err_ms = map.next_value::<Option<u32>>()?;
                }
                _ => return Err(no()),
            }
        }
        Ok(Clock { state: state.ok_or_else(no)?, err_ms })
    }
}

/// `samples`: `null` or a valid object.
struct FastSamples;

impl<'de> DeserializeSeed<'de> for FastSamples {
    type Value = Option<SampleRef>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FastSamples {
    type Value = Option<SampleRef>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a samples object")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut block_seq, mut from_ms, mut to_ms) = (None, None, None);
        while let Some(key) = map.next_key_seed(CowStr)? {
            match &*key {
                "block_seq" if block_seq.is_none() => block_seq = Some(map.next_value::<u64>()?),
                "from_ms" if from_ms.is_none() => from_ms = Some(map.next_value::<i64>()?),
                "to_ms" if to_ms.is_none() => to_ms = Some(map.next_value::<i64>()?),
                _ => return Err(no()),
            }
        }
        match (block_seq, from_ms, to_ms) {
            (Some(block_seq), Some(from_ms), Some(to_ms)) if from_ms <= to_ms => {
                Ok(Some(SampleRef { block_seq, from_ms, to_ms }))
            }
            _ => Err(no()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The non-finite fallback.

/// A token that is not JSON but that producers write for non-finite floats, or a number literal
/// that overflows f64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NonFinite {
    NaN,
    Infinity,
    NegInfinity,
    Overflow,
    NegOverflow,
}

impl NonFinite {
    const ALL: [NonFinite; 5] = [
        NonFinite::NaN,
        NonFinite::Infinity,
        NonFinite::NegInfinity,
        NonFinite::Overflow,
        NonFinite::NegOverflow,
    ];

    /// The JSON text that replaces the token in the fallback pass. It contains `\u0000`, and the
    /// fallback never runs on text that already does, so it cannot be forged.
    fn sentinel(self) -> &'static str {
        match self {
            NonFinite::NaN => "\"\\u0000nf:NaN\"",
            NonFinite::Infinity => "\"\\u0000nf:Infinity\"",
            NonFinite::NegInfinity => "\"\\u0000nf:-Infinity\"",
            NonFinite::Overflow => "\"\\u0000nf:overflow\"",
            NonFinite::NegOverflow => "\"\\u0000nf:-overflow\"",
        }
    }

    /// The sentinel as a decoded string.
    fn decoded(self) -> &'static str {
        match self {
            NonFinite::NaN => "\u{0}nf:NaN",
            NonFinite::Infinity => "\u{0}nf:Infinity",
            NonFinite::NegInfinity => "\u{0}nf:-Infinity",
            NonFinite::Overflow => "\u{0}nf:overflow",
            NonFinite::NegOverflow => "\u{0}nf:-overflow",
        }
    }

    fn from_decoded(s: &str) -> Option<NonFinite> {
        if !s.starts_with('\u{0}') {
            return None;
        }
        NonFinite::ALL.into_iter().find(|t| t.decoded() == s)
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            NonFinite::NaN => "NaN",
            NonFinite::Infinity => "Infinity",
            NonFinite::NegInfinity => "-Infinity",
            NonFinite::Overflow => "a number literal too large for f64",
            NonFinite::NegOverflow => "a negative number literal too large for f64",
        }
    }
}

/// Text with its non-finite tokens replaced by sentinels, and where.
#[derive(Debug)]
pub(crate) struct Patched {
    pub(crate) text: String,
    /// Each replacement: its start in `text`, its length there, its length in the original.
    shifts: Vec<(usize, usize, usize)>,
}

impl Patched {
    /// The offset in the original text of `pos` in the patched text (never inside a sentinel).
    pub(crate) fn original_offset(&self, pos: usize) -> usize {
        let mut orig = pos;
        for &(start, new_len, old_len) in &self.shifts {
            if start + new_len > pos {
                break;
            }
            orig = orig + old_len - new_len;
        }
        orig
    }

    /// The original text of a slice of `self.text` that spans whole JSON values.
    pub(crate) fn original_slice<'o>(&self, original: &'o str, slice: &str) -> Option<&'o str> {
        let start = (slice.as_ptr() as usize).checked_sub(self.text.as_ptr() as usize)?;
        let end = start + slice.len();
        if end > self.text.len() {
            return None;
        }
        original.get(self.original_offset(start)..self.original_offset(end))
    }
}

/// Replaces, outside strings, bare `NaN`, `Infinity`, `-Infinity` and number literals that
/// overflow f64 by sentinels. `None` when there is nothing to replace, or when the text contains
/// `\u0000` (which could forge a sentinel).
pub(crate) fn patch_non_finite(text: &str) -> Option<Patched> {
    if text.contains("\\u0000") {
        return None;
    }
    let b = text.as_bytes();
    let mut out = String::new();
    let mut shifts = Vec::new();
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        let (len, token) = match b[i] {
            b'"' => {
                i = string_end(b, i);
                continue;
            }
            b'N' if b[i..].starts_with(b"NaN") => (3, NonFinite::NaN),
            b'I' if b[i..].starts_with(b"Infinity") => (8, NonFinite::Infinity),
            b'-' if b[i + 1..].starts_with(b"Infinity") => (9, NonFinite::NegInfinity),
            b'-' | b'0'..=b'9' => {
                let end = number_end(b, i);
                let lit = &text[i..end];
                match lit.parse::<f64>() {
                    Ok(x) if x.is_infinite() && is_json_number(lit.as_bytes()) => {
                        let t = if x < 0.0 { NonFinite::NegOverflow } else { NonFinite::Overflow };
                        (end - i, t)
                    }
                    _ => {
                        i = end;
                        continue;
                    }
                }
            }
            _ => {
                i += 1;
                continue;
            }
        };
        if out.is_empty() {
            out.reserve(text.len() + 64);
        }
        out.push_str(&text[copied..i]);
        let s = token.sentinel();
        shifts.push((out.len(), s.len(), len));
        out.push_str(s);
        i += len;
        copied = i;
    }
    if shifts.is_empty() {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(Patched { text: out, shifts })
}

/// The index just after the string starting at `b[start] == b'"'` (or the end of `b`).
fn string_end(b: &[u8], start: usize) -> usize {
    let mut j = start + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return j + 1,
            _ => j += 1,
        }
    }
    b.len()
}

/// The end of a run of number-literal characters starting at `start`.
fn number_end(b: &[u8], start: usize) -> usize {
    let mut j = start + 1;
    while j < b.len() && matches!(b[j], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
        j += 1;
    }
    j
}

/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
fn is_json_number(s: &[u8]) -> bool {
    let mut i = 0;
    let digits = |i: &mut usize| {
        let from = *i;
        while *i < s.len() && s[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > from
    };
    if s.first() == Some(&b'-') {
        i += 1;
    }
    if s.get(i) == Some(&b'0') {
        i += 1;
    } else if !digits(&mut i) {
        return false;
    }
    if s.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(s.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(s.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == s.len()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::{json, Map, Value};

    fn base() -> Map<String, Value> {
        let v = json!({
            "event_id": "gw-01.s1.42",
            "machine": "press-7",
            "sensor": "s1",
            "seq": 42,
            "ts_ms": 1_700_000_000_000_i64,
            "clock": {"state": "synced", "err_ms": 3},
            "metric": "accel_rms",
            "value": 0.61,
            "unit": "g",
            "schema": 1,
            "quality": "good",
            "samples": {"block_seq": 7, "from_ms": 1_699_999_999_000_i64, "to_ms": 1_700_000_000_000_i64}
        });
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn with(f: impl FnOnce(&mut Map<String, Value>)) -> String {
        let mut m = base();
        f(&mut m);
        Value::Object(m).to_string()
    }

    fn schema2(axes: Value, combine: Option<&str>) -> String {
        with(|m| {
            m.remove("value");
            m.insert("schema".into(), json!(2));
            m.insert("axes".into(), axes);
            if let Some(c) = combine {
                m.insert("combine".into(), json!(c));
            }
        })
    }

    /// Parses, checks the fast path agrees with the exact path, and that the verdict is stable.
    fn parse(raw: &str) -> Result<Event, Rejection> {
        let r = parse_event(raw);
        assert_eq!(r, parse_event(raw), "not deterministic: {raw}");
        if raw.len() <= MAX_EVENT_BYTES {
            assert_eq!(r, exact_event(raw), "fast and exact paths disagree: {raw}");
            if let Some(fast) = fast_event(raw) {
                assert_eq!(Ok(fast), r);
            }
        }
        r
    }

    fn reject(raw: &str, reason: Reason, needle: &str) -> Rejection {
        let r = parse(raw).expect_err(raw);
        assert_eq!(r.reason, reason, "{raw}: {r}");
        assert!(r.detail.contains(needle), "{raw}: detail {:?} lacks {needle:?}", r.detail);
        r
    }

    #[test]
    fn valid_schema_1_event_round_trips() {
        let raw = with(|_| {});
        let e = parse(&raw).unwrap();
        assert_eq!(e.event_id, "gw-01.s1.42");
        assert_eq!(e.machine, "press-7");
        assert_eq!(e.seq, 42);
        assert_eq!(e.clock, Clock { state: ClockState::Synced, err_ms: Some(3) });
        assert_eq!(e.metric, Metric::AccelRms);
        assert_eq!(e.value, 0.61);
        assert_eq!(e.unit, Unit::G);
        assert_eq!(e.schema, 1);
        assert_eq!(e.quality, Quality::Good);
        assert_eq!(
            e.samples,
            Some(SampleRef { block_seq: 7, from_ms: 1_699_999_999_000, to_ms: 1_700_000_000_000 })
        );
        let again = parse(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(again, e);
        assert_eq!(again.fingerprint(), e.fingerprint());
    }

    #[test]
    fn minimal_event_round_trips_and_optional_nulls_are_absent() {
        let raw = with(|m| {
            m.remove("samples");
            m.insert("clock".into(), json!({"state": "unknown", "err_ms": null}));
            m.insert("event_id".into(), json!("weird \"id\" ü \u{1F600}"));
        });
        let e = parse(&raw).unwrap();
        assert_eq!(e.clock, Clock::UNKNOWN);
        assert_eq!(e.samples, None);
        assert_eq!(parse(&serde_json::to_string(&e).unwrap()).unwrap(), e);
        let nulls = with(|m| {
            m.insert("samples".into(), Value::Null);
            m.insert("replayed".into(), Value::Null);
        });
        assert_eq!(parse(&nulls).unwrap().samples, None);
    }

    #[test]
    fn replayed_is_accepted_and_ignored() {
        let plain = parse(&with(|_| {})).unwrap();
        let replayed = parse(&with(|m| {
            m.insert("replayed".into(), json!(true));
        }))
        .unwrap();
        assert_eq!(plain, replayed);
        reject(
            &with(|m| {
                m.insert("replayed".into(), json!("yes"));
            }),
            Reason::BadType,
            "replayed",
        );
    }

    #[test]
    fn escaped_keys_are_decoded() {
        let raw =
            with(|_| {}).replace("\"seq\"", "\"s\\u0065q\"").replace("\"unit\"", "\"\\u0075nit\"");
        assert!(raw.contains("\\u0065"));
        assert_eq!(parse(&raw).unwrap(), parse(&with(|_| {})).unwrap());
        let unknown = with(|_| {}).replace("\"quality\"", "\"qu\\u00e4lity\"");
        reject(&unknown, Reason::UnknownField, "qu\u{e4}lity");
    }

    #[test]
    fn integer_value_and_negative_zero_are_fine() {
        assert_eq!(parse(&with(|m| drop(m.insert("value".into(), json!(2))))).unwrap().value, 2.0);
        let raw = with(|_| {}).replace("0.61", "-0.0");
        let e = parse(&raw).unwrap();
        assert_eq!(e.value, 0.0);
        assert!(e.value.is_sign_positive());
    }

    // --- one reason at a time -------------------------------------------------------------

    #[test]
    fn malformed_json() {
        reject("{\"seq\": 1,", Reason::MalformedJson, "EOF");
        reject("", Reason::MalformedJson, "EOF");
        reject("[1, 2]", Reason::MalformedJson, "JSON object");
        reject("\"event\"", Reason::MalformedJson, "JSON object");
        reject("17", Reason::MalformedJson, "JSON object");
        reject(&format!("{} x", with(|_| {})), Reason::MalformedJson, "trailing");
        reject("{'seq': 1}", Reason::MalformedJson, "key must be a string");
        reject("{\"value\": NaN,}", Reason::MalformedJson, "line 1");
    }

    #[test]
    fn duplicate_keys_are_malformed_at_any_depth() {
        let raw = with(|_| {}).replace("\"seq\":42", "\"seq\":42,\"seq\":43");
        reject(&raw, Reason::MalformedJson, "duplicate key \"seq\"");
        let escaped = with(|_| {}).replace("\"seq\":42", "\"seq\":42,\"s\\u0065q\":43");
        reject(&escaped, Reason::MalformedJson, "duplicate key \"seq\"");
        let clock =
            with(|_| {}).replace("\"state\":\"synced\"", "\"state\":\"synced\",\"state\":\"x\"");
        reject(&clock, Reason::MalformedJson, "duplicate key \"state\"");
        let unknown = with(|_| {}).replace("\"seq\":42", "\"seq\":42,\"a\":1,\"a\":2");
        reject(&unknown, Reason::MalformedJson, "duplicate key \"a\"");
        // JSON comes before the schema: a duplicate deep inside still makes it malformed.
        reject(
            "{\"schema\": 9, \"x\": [{\"k\": 1, \"k\": 2}]}",
            Reason::MalformedJson,
            "duplicate key \"k\"",
        );
        // Many keys (the hashed path).
        let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\": {i}")).collect();
        let raw = format!("{{\"x\": {{{}, \"k33\": 0}}}}", many.join(", "));
        reject(&raw, Reason::MalformedJson, "duplicate key \"k33\"");
    }

    #[test]
    fn missing_fields() {
        for f in [
            "event_id", "machine", "sensor", "seq", "ts_ms", "clock", "metric", "value", "unit",
            "schema", "quality",
        ] {
            let raw = with(|m| drop(m.remove(f)));
            reject(&raw, Reason::MissingField, &format!("\"{f}\""));
        }
        reject(
            &with(|m| drop(m.insert("clock".into(), json!({})))),
            Reason::MissingField,
            "clock.state",
        );
        for f in ["block_seq", "from_ms", "to_ms"] {
            let raw = with(|m| {
                m.get_mut("samples").unwrap().as_object_mut().unwrap().remove(f);
            });
            reject(&raw, Reason::MissingField, &format!("samples.{f}"));
        }
    }

    #[test]
    fn bad_types() {
        let cases: Vec<(&str, Value, &str)> = vec![
            ("metric", json!("foo"), "metric: unknown value \"foo\""),
            ("unit", json!("furlongs"), "unit: unknown value \"furlongs\""),
            ("quality", json!("excellent"), "quality: unknown value \"excellent\""),
            ("clock", json!({"state": "x"}), "clock.state: unknown value \"x\""),
            ("clock", json!({"state": 1}), "clock.state"),
            ("clock", json!({"state": "synced", "err_ms": -1}), "clock.err_ms"),
            ("clock", json!({"state": "synced", "err_ms": 4_294_967_296_u64}), "clock.err_ms"),
            ("clock", json!({"state": "synced", "err_ms": 2.5}), "clock.err_ms"),
            ("clock", json!("synced"), "clock: expected an object, found the string \"synced\""),
            ("seq", json!(-1), "seq: expected an unsigned 64-bit integer, found the number -1"),
            ("seq", json!(1.5), "seq: expected an unsigned 64-bit integer, found the number 1.5"),
            ("seq", json!("42"), "seq"),
            ("ts_ms", json!(1.7e12), "ts_ms"),
            ("ts_ms", json!(u64::MAX), "ts_ms"),
            ("event_id", json!(5), "event_id: expected a string, found the number 5"),
            ("machine", Value::Null, "machine: expected a string, found null"),
            ("value", json!("0.5"), "value: expected a number"),
            ("value", json!([0.5]), "value: expected a number, found an array"),
            ("samples", json!({"block_seq": 1, "from_ms": 9, "to_ms": 3}), "from_ms 9 is after"),
            ("samples", json!({"block_seq": -1, "from_ms": 1, "to_ms": 3}), "samples.block_seq"),
            ("samples", json!([1, 2, 3]), "samples: expected an object"),
        ];
        for (field, v, needle) in cases {
            reject(&with(|m| drop(m.insert(field.into(), v))), Reason::BadType, needle);
        }
        // A non-finite token outside `value` is a bad type, naming the field and the token.
        reject(&with(|_| {}).replace("\"seq\":42", "\"seq\":NaN"), Reason::BadType, "seq");
        reject(&with(|_| {}).replace("\"seq\":42", "\"seq\":NaN"), Reason::BadType, "found NaN");
        let ts = with(|_| {}).replace("1700000000000,", "1e999,");
        reject(&ts, Reason::BadType, "ts_ms: expected a signed 64-bit integer, found a number");
    }

    #[test]
    fn unknown_schema_is_checked_first() {
        reject(
            &with(|m| drop(m.insert("schema".into(), json!(3)))),
            Reason::UnknownSchema,
            "schema 3",
        );
        reject(
            &with(|m| drop(m.insert("schema".into(), json!(0)))),
            Reason::UnknownSchema,
            "schema 0",
        );
        reject(&with(|m| drop(m.insert("schema".into(), json!(-1)))), Reason::UnknownSchema, "-1");
        // A future shape with other fields still says unknown_schema.
        reject("{\"schema\": 3, \"payload\": {}}", Reason::UnknownSchema, "schema 3");
        reject(&with(|m| drop(m.insert("schema".into(), json!("1")))), Reason::BadType, "schema");
        reject(&with(|m| drop(m.insert("schema".into(), json!(1.0)))), Reason::BadType, "schema");
        reject("{\"payload\": {}}", Reason::MissingField, "\"schema\"");
    }

    #[test]
    fn non_finite_values() {
        let raw = with(|_| {});
        for (token, needle) in [
            ("NaN", "value is NaN"),
            ("Infinity", "value is Infinity"),
            ("-Infinity", "value is -Infinity"),
            ("1e999", "value is a number literal too large"),
            ("-1e999", "value is a negative number literal too large"),
            (&format!("1{}", "0".repeat(400)), "too large for f64"),
        ] {
            reject(&raw.replace("0.61", token), Reason::NonFiniteValue, needle);
        }
        // Python's spelling, with spaces.
        let py = "{\"event_id\": \"e\", \"machine\": \"m\", \"sensor\": \"s\", \"seq\": 1, \
                  \"ts_ms\": 1700000000000, \"clock\": {\"state\": \"synced\"}, \"metric\": \
                  \"accel_rms\", \"value\": NaN, \"unit\": \"g\", \"schema\": 1, \"quality\": \"good\"}";
        reject(py, Reason::NonFiniteValue, "value is NaN");
    }

    #[test]
    fn non_finite_fallback_leaves_strings_alone_and_cannot_be_forged() {
        // NaN inside strings is text, not a token.
        let raw =
            with(|m| drop(m.insert("event_id".into(), json!("NaN Infinity -Infinity 1e999"))));
        assert_eq!(parse(&raw).unwrap().event_id, "NaN Infinity -Infinity 1e999");
        let esc = with(|m| drop(m.insert("event_id".into(), json!("a\\\"NaN"))));
        assert!(parse(&esc).is_ok());
        let nan_and_escaped_string =
            with(|m| drop(m.insert("event_id".into(), json!("a\"b")))).replace("0.61", "NaN");
        reject(&nan_and_escaped_string, Reason::NonFiniteValue, "value is NaN");
        // A text that spells the sentinel itself does not get the fallback.
        let forged =
            with(|m| drop(m.insert("sensor".into(), json!("\u{0}nf:NaN")))).replace("0.61", "NaN");
        assert!(forged.contains("\\u0000"));
        reject(&forged, Reason::MalformedJson, "line 1");
        // Without a non-finite token a syntax error stays a syntax error.
        reject("{\"value\": Nope}", Reason::MalformedJson, "expected value");
        // A token next to garbage is still malformed.
        reject(&with(|_| {}).replace("0.61", "NaNx"), Reason::MalformedJson, "line 1");
        reject(&with(|_| {}).replace("0.61", "+Infinity"), Reason::MalformedJson, "line 1");
        reject(&with(|_| {}).replace("0.61", "1.e999"), Reason::MalformedJson, "line 1");
    }

    #[test]
    fn negative_value() {
        reject(&with(|_| {}).replace("0.61", "-0.5"), Reason::NegativeValue, "value is -0.5");
    }

    #[test]
    fn unit_mismatch() {
        let r = reject(
            &with(|m| drop(m.insert("unit".into(), json!("mm/s")))),
            Reason::UnitMismatch,
            "unit \"mm/s\"",
        );
        assert!(r.detail.contains("accel_rms"));
        reject(
            &with(|m| drop(m.insert("metric".into(), json!("velocity_rms")))),
            Reason::UnitMismatch,
            "velocity_rms",
        );
        let ok = with(|m| {
            m.insert("metric".into(), json!("velocity_rms"));
            m.insert("unit".into(), json!("mm/s"));
        });
        assert_eq!(parse(&ok).unwrap().unit, Unit::MmS);
        let peak = with(|m| {
            m.insert("metric".into(), json!("accel_peak"));
            m.insert("unit".into(), json!("m/s2"));
        });
        assert_eq!(parse(&peak).unwrap().metric, Metric::AccelPeak);
    }

    #[test]
    fn bad_identifiers() {
        let set = |f: &'static str, v: Value| with(move |m| drop(m.insert(f.into(), v)));
        reject(&set("event_id", json!("")), Reason::BadIdentifier, "event_id is empty");
        reject(
            &set("event_id", json!("e".repeat(129))),
            Reason::BadIdentifier,
            "129 bytes (max 128)",
        );
        assert!(parse(&set("event_id", json!("e".repeat(128)))).is_ok());
        reject(
            &set("machine", json!("press 7")),
            Reason::BadIdentifier,
            "machine \"press 7\" has ' '",
        );
        reject(&set("machine", json!("")), Reason::BadIdentifier, "machine is empty");
        reject(&set("sensor", json!("s".repeat(65))), Reason::BadIdentifier, "sensor");
        reject(&set("sensor", json!("s".repeat(65))), Reason::BadIdentifier, "65 bytes (max 64)");
        reject(&set("sensor", json!("prëss")), Reason::BadIdentifier, "sensor \"prëss\" has 'ë'");
    }

    #[test]
    fn oversized() {
        let big = with(|m| drop(m.insert("event_id".into(), json!("e".repeat(MAX_EVENT_BYTES)))));
        reject(&big, Reason::Oversized, "max 16384");
        // Exactly at the limit is fine (padding with whitespace).
        let raw = with(|_| {});
        let pad = format!("{raw}{}", " ".repeat(MAX_EVENT_BYTES - raw.len()));
        assert_eq!(pad.len(), MAX_EVENT_BYTES);
        assert!(parse(&pad).is_ok());
        reject(&format!("{pad} "), Reason::Oversized, "16385 bytes");
        // Size comes before everything, even for text that is not JSON.
        reject(&"x".repeat(MAX_EVENT_BYTES + 1), Reason::Oversized, "event object");
    }

    #[test]
    fn clock_implausible() {
        let set = |v: i64| with(move |m| drop(m.insert("ts_ms".into(), json!(v))));
        reject(&set(1000), Reason::ClockImplausible, "ts_ms 1000 is before 2000-01-01");
        reject(&set(-5), Reason::ClockImplausible, "ts_ms -5");
        reject(&set(MIN_PLAUSIBLE_TS_MS - 1), Reason::ClockImplausible, "ts_ms");
        assert!(parse(&set(MIN_PLAUSIBLE_TS_MS)).is_ok());
    }

    #[test]
    fn unknown_fields() {
        reject(&with(|m| drop(m.insert("foo".into(), json!(1)))), Reason::UnknownField, "\"foo\"");
        let clock = json!({"state": "synced", "drift": 1});
        reject(
            &with(|m| drop(m.insert("clock".into(), clock))),
            Reason::UnknownField,
            "clock.drift",
        );
        let samples = json!({"block_seq": 1, "from_ms": 1, "to_ms": 2, "n": 3});
        reject(
            &with(|m| drop(m.insert("samples".into(), samples))),
            Reason::UnknownField,
            "samples.n",
        );
        let axes = with(|m| drop(m.insert("axes".into(), json!({"x": 1}))));
        reject(&axes, Reason::UnknownField, "\"axes\" is not defined in schema 1");
        // The first offending key in document order, whether unknown or not in this schema.
        let raw = with(|_| {}).replace("{\"", "{\"zz\":1,\"axes\":{},\"");
        reject(&raw, Reason::UnknownField, "unknown field \"zz\"");
        let raw = with(|_| {}).replace("{\"", "{\"axes\":{},\"zz\":1,\"");
        reject(&raw, Reason::UnknownField, "\"axes\" is not defined");
    }

    #[test]
    fn checks_run_in_the_documented_order() {
        // schema before unknown fields before presence.
        let raw = with(|m| {
            m.insert("schema".into(), json!(4));
            m.insert("foo".into(), json!(1));
            m.remove("seq");
        });
        reject(&raw, Reason::UnknownSchema, "schema 4");
        let raw = with(|m| {
            m.insert("foo".into(), json!(1));
            m.remove("seq");
        });
        reject(&raw, Reason::UnknownField, "foo");
        // Presence/type in field order: event_id before seq.
        let raw = with(|m| {
            m.remove("seq");
            m.insert("event_id".into(), json!(1));
        });
        reject(&raw, Reason::BadType, "event_id");
        // Types before semantics: a bad unit string beats a bad identifier.
        let raw = with(|m| {
            m.insert("machine".into(), json!("a b"));
            m.insert("unit".into(), json!("furlongs"));
        });
        reject(&raw, Reason::BadType, "unit");
        // Identifier, then non-finite, then negative, then unit, then clock.
        let raw = with(|m| {
            m.insert("machine".into(), json!("a b"));
            m.insert("ts_ms".into(), json!(5));
        })
        .replace("0.61", "NaN");
        reject(&raw, Reason::BadIdentifier, "machine");
        let raw = with(|m| {
            m.insert("unit".into(), json!("mm/s"));
            m.insert("ts_ms".into(), json!(5));
        })
        .replace("0.61", "NaN");
        reject(&raw, Reason::NonFiniteValue, "value");
        let raw = with(|m| {
            m.insert("unit".into(), json!("mm/s"));
            m.insert("ts_ms".into(), json!(5));
            m.insert("value".into(), json!(-1));
        });
        reject(&raw, Reason::NegativeValue, "value");
        let raw = with(|m| {
            m.insert("unit".into(), json!("mm/s"));
            m.insert("ts_ms".into(), json!(5));
        });
        reject(&raw, Reason::UnitMismatch, "mm/s");
    }

    // --- schema 2 -------------------------------------------------------------------------

    #[test]
    fn schema_2_rss_and_max_upcast() {
        let e = parse(&schema2(json!({"x": 3.0, "y": 4.0}), None)).unwrap();
        assert_eq!((e.schema, e.value), (2, 5.0));
        let e = parse(&schema2(json!({"z": 0.3, "x": 0.9, "y": 0.1}), Some("max"))).unwrap();
        assert_eq!((e.schema, e.value), (2, 0.9));
        let e = parse(&schema2(json!({"x": 1, "y": 2, "z": 2}), Some("rss"))).unwrap();
        assert_eq!(e.value, 3.0);
        let e = parse(&schema2(json!({"y": 0.25}), None)).unwrap();
        assert_eq!(e.value, 0.25);
        let nulled =
            schema2(json!({"x": 3.0, "y": 4.0}), None).replacen('{', "{\"combine\":null,", 1);
        assert_eq!(parse(&nulled).unwrap().value, 5.0);
    }

    #[test]
    fn schema_2_doc_example_and_reserialisation_caveat() {
        let doc = include_str!("../../docs/event-schema-2.md");
        let start = doc.find("```json\n").unwrap() + 8;
        let end = start + doc[start..].find("```").unwrap();
        let e = parse(&doc[start..end]).unwrap();
        assert_eq!(e.schema, 2);
        assert!((e.value - 0.5).abs() < 1e-12, "{}", e.value);
        // Documented: an upcast event re-serialised is not a valid schema-2 event.
        let again = parse(&serde_json::to_string(&e).unwrap()).unwrap_err();
        assert_eq!(again.reason, Reason::UnknownField);
    }

    #[test]
    fn schema_2_rejections() {
        let with_value = schema2(json!({"x": 1}), None).replace("{\"", "{\"value\":1,\"");
        reject(&with_value, Reason::UnknownField, "\"value\" is not defined in schema 2");
        let no_axes = with(|m| {
            m.remove("value");
            m.insert("schema".into(), json!(2));
        });
        reject(&no_axes, Reason::MissingField, "\"axes\"");
        reject(&schema2(json!({"w": 1}), None), Reason::BadType, "unknown axis \"w\"");
        reject(&schema2(json!({"X": 1}), None), Reason::BadType, "axes");
        reject(&schema2(json!({}), None), Reason::BadType, "axes: expected 1 to 3");
        reject(&schema2(json!([1, 2, 3]), None), Reason::BadType, "axes: expected an object");
        reject(&schema2(json!({"x": "1"}), None), Reason::BadType, "axes.x");
        reject(&schema2(json!({"x": 1}), Some("mean")), Reason::BadType, "combine");
        let nan = schema2(json!({"x": 1, "y": 0.5}), None).replace("0.5", "NaN");
        reject(&nan, Reason::NonFiniteValue, "axes.y is NaN");
        let inf = schema2(json!({"x": 1.5}), None).replace("1.5", "1e999");
        reject(&inf, Reason::NonFiniteValue, "axes.x");
        reject(&schema2(json!({"x": 1, "z": -0.5}), None), Reason::NegativeValue, "axes.z is -0.5");
        let huge = schema2(json!({"x": f64::MAX, "y": f64::MAX}), None);
        reject(&huge, Reason::NonFiniteValue, "rss of axes overflows");
        let dup = schema2(json!({"x": 1}), None).replace("\"x\":1", "\"x\":1,\"x\":2");
        reject(&dup, Reason::MalformedJson, "duplicate key \"x\"");
        let mismatch = schema2(json!({"x": 1}), None).replace("\"g\"", "\"mm/s\"");
        reject(&mismatch, Reason::UnitMismatch, "mm/s");
    }

    #[test]
    fn helpers_behave() {
        assert!(is_json_number(b"0"));
        assert!(is_json_number(b"-12.5e+3"));
        assert!(!is_json_number(b"01"));
        assert!(!is_json_number(b"1."));
        assert!(!is_json_number(b".5"));
        assert!(!is_json_number(b"1e"));
        assert!(!is_json_number(b"-"));
        let p = patch_non_finite("[NaN, 1, -Infinity, \"NaN\", 1e999]").unwrap();
        let n = serde_json::from_str::<Vec<Value>>(&p.text).unwrap();
        assert_eq!(n.len(), 5);
        assert_eq!(n[3], json!("NaN"));
        assert_eq!(p.original_offset(p.text.len()), "[NaN, 1, -Infinity, \"NaN\", 1e999]".len());
        assert!(patch_non_finite("[1, 2]").is_none());
        assert_eq!(show("abc"), "\"abc\"");
        assert!(show(&"é".repeat(100)).ends_with("(200 bytes)"));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn arbitrary_text_never_panics_and_paths_agree(s in ".{0,200}") {
                let _ = parse(&s);
            }

            #[test]
            fn mutated_events_never_panic_and_paths_agree(
                pos in 0usize..400,
                insert in proptest::sample::select(vec![
                    "", "NaN", "-", "\"", "{", "}", ",", "1e999", "\\u0000", " ", ":", "null", "]"
                ]),
                cut in 0usize..6,
            ) {
                let raw = with(|_| {});
                let pos = pos.min(raw.len());
                let end = (pos + cut).min(raw.len());
                let s = format!("{}{}{}", &raw[..pos], insert, &raw[end..]);
                let _ = parse(&s);
            }
        }
    }
}
