//! Trace line parsing (docs/contracts.md section 8): one line's bytes to a [`TraceLine`] or a rejection.
//!
//! Order of checks: size → UTF-8 → JSON (syntax, an object, no duplicate top-level key) → `at` →
//! `kind` → fields the kind does not define → the kind's own fields. For `kind: "event"` the inner
//! event is validated by [`parse_event`] on its exact text, so a line's event is judged the same as
//! the same event arriving on its own. Never panics; the same bytes give the same result.

use super::{Arrival, SamplesRecord, TraceLine};
use crate::event::parse::{
    as_enum, as_i64, as_number, as_str, bad_type, check_identifier, check_plausible_ts, clock_from,
    describe_raw, parse_event, present, read_top, read_top_with_fallback, required, show, Number,
    Pass, Patched, Scan, Shape, Top, Val, MAX_EVENT_BYTES, UNITS,
};
use crate::event::rejection::{Reason, Rejection};
use crate::event::Unit;
use std::ops::Range;

pub use crate::event::parse::MIN_PLAUSIBLE_TS_MS;

/// A line longer than this many bytes is rejected as `oversized` without parsing.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The highest accepted `rate_hz` of a samples line.
pub const MAX_RATE_HZ: f64 = 1_000_000.0;

/// What parsing a line gives: the line, or its `at` when it could be read and the rejection.
pub type Verdict = Result<TraceLine, (Option<i64>, Rejection)>;

/// Parses one trace line (without its newline). On rejection returns the line's `at` when it could
/// be read: always once `at` itself is valid; for a line that is not valid JSON, when the line
/// starts with `{"at": <integer>,` (whitespace allowed); never for an oversized line.
pub fn parse_line(line: &[u8]) -> Verdict {
    parse_line_reusing(line, &mut Vec::new())
}

/// [`parse_line`], writing an accepted event's `event_id`, `machine` and `sensor` into strings
/// taken from `spare` where it has some (`replay` hands back those of the events it decided):
/// the same result, without allocating them anew.
pub fn parse_line_reusing(line: &[u8], spare: &mut Vec<String>) -> Verdict {
    parse_line_spanning(line, spare).0
}

/// [`parse_line`], and for an event line the fastest path read, where in `line` its `event`
/// member's value is: the bytes serde_json's `RawValue` of that member borrows. `None` where
/// another path decided. The decide stage keeps those bytes as the event's outbox payload, so it
/// need not find them again.
pub fn parse_line_and_event_span(line: &[u8]) -> (Verdict, Option<Range<usize>>) {
    parse_line_spanning(line, &mut Vec::new())
}

fn parse_line_spanning(line: &[u8], spare: &mut Vec<String>) -> (Verdict, Option<Range<usize>>) {
    let text = match checked_text(line) {
        Ok(text) => text,
        Err(rejected) => return (Err(rejected), None),
    };
    // Fast path: a line no longer than an event may be can hold no oversized event, so its event
    // is read in the same pass. Any error there is answered by the exact path.
    if text.len() <= MAX_EVENT_BYTES {
        if let Some((tl, event_span)) = plain_line(text, spare) {
            return (Ok(tl), event_span);
        }
        if let Ok(top) = read_top::<LINE_SLOTS>(text, &LINE_SHAPE, Pass::Inline) {
            return (validate_line(top, text, None), None);
        }
    }
    (exact_line(line, text), None)
}

/// `line` as UTF-8 text within the size limit, or its rejection.
fn checked_text(line: &[u8]) -> Result<&str, (Option<i64>, Rejection)> {
    if line.len() > MAX_LINE_BYTES {
        return Err((
            None,
            Rejection::new(
                Reason::Oversized,
                format!("line is {} bytes (max {MAX_LINE_BYTES})", line.len()),
            ),
        ));
    }
    std::str::from_utf8(line).map_err(|e| {
        let detail = format!("not UTF-8: invalid byte at offset {}", e.valid_up_to());
        (salvage_at(line), Rejection::new(Reason::MalformedJson, detail))
    })
}

/// The reference path for a UTF-8 line within the size limit (`text` is `line` as UTF-8).
/// Public only for the fuzz target `trace_line` (fuzz/), which checks [`parse_line`] against it.
#[doc(hidden)]
pub fn exact_line(line: &[u8], text: &str) -> Verdict {
    read_top_with_fallback::<LINE_SLOTS, _>(text, &LINE_SHAPE, |top, patched| {
        validate_line(top, text, patched)
    })
    .map_err(|r| (salvage_at(line), r))?
}

/// The fastest path, for the lines a trace is mostly made of: a valid `tick` line or a valid
/// `event` line whose event the event fast path accepts, with nothing else in it, in the plain
/// JSON [`Scan`] reads. It reads the line straight into a [`TraceLine`] (no slots) and succeeds
/// only where [`exact_line`] accepts with the same result; anything else (another kind, an unknown
/// or repeated key, an escape, a wrong type) gives `None` and the paths above decide. With the
/// line, where its event object is (for an event line).
fn plain_line(text: &str, spare: &mut Vec<String>) -> Option<(TraceLine, Option<Range<usize>>)> {
    let mut scan = Scan::new(text);
    let mut span = None;
    let (mut at, mut kind, mut event) = (None, None, None);
    scan.object(|s, key| {
        match key {
            "at" if at.is_none() => at = Some(s.i64()?),
            "kind" if kind.is_none() => {
                kind = Some(match s.str()? {
                    "event" => Kind::Event,
                    "tick" => Kind::Tick,
                    _ => return None,
                })
            }
            "event" if event.is_none() => {
                let (e, found) = s.event_spanned(Some(&mut *spare))?;
                (event, span) = (Some(e), Some(found));
            }
            _ => return None,
        }
        Some(())
    })?;
    scan.end()?;
    let arrival = match (kind?, event) {
        (Kind::Event, Some(event)) => Arrival::Event(event),
        (Kind::Tick, None) => Arrival::Tick,
        _ => return None,
    };
    Some((TraceLine { at: at?, arrival }, span))
}

const LINE_SLOTS: usize = 11;
const L_AT: usize = 0;
const L_KIND: usize = 1;
const L_EVENT: usize = 2;
const L_MACHINE: usize = 3;
const L_SENSOR: usize = 4;
const L_T0_MS: usize = 5;
const L_RATE_HZ: usize = 6;
const L_UNIT: usize = 7;
const L_AXIS: usize = 8;
const L_CLOCK: usize = 9;
const L_DATA: usize = 10;

const LINE_NAMES: [&str; LINE_SLOTS] = [
    "at", "kind", "event", "machine", "sensor", "t0_ms", "rate_hz", "unit", "axis", "clock", "data",
];

fn line_key(k: &str) -> Option<usize> {
    Some(match k {
        "at" => L_AT,
        "kind" => L_KIND,
        "event" => L_EVENT,
        "machine" => L_MACHINE,
        "sensor" => L_SENSOR,
        "t0_ms" => L_T0_MS,
        "rate_hz" => L_RATE_HZ,
        "unit" => L_UNIT,
        "axis" => L_AXIS,
        "clock" => L_CLOCK,
        "data" => L_DATA,
        _ => return None,
    })
}

static LINE_SHAPE: Shape = Shape {
    names: &LINE_NAMES,
    lookup: line_key,
    raw: Some(L_EVENT),
    nums: Some(L_DATA),
    expecting: "a JSON object (a trace line)",
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Event,
    Samples,
    Readings,
    Tick,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Event => "event",
            Kind::Samples => "samples",
            Kind::Readings => "readings",
            Kind::Tick => "tick",
        }
    }
    fn defines(self, slot: usize) -> bool {
        match self {
            Kind::Event => matches!(slot, L_AT | L_KIND | L_EVENT),
            Kind::Samples | Kind::Readings => slot != L_EVENT,
            Kind::Tick => matches!(slot, L_AT | L_KIND),
        }
    }
}

fn validate_line(
    mut top: Box<Top<'_, LINE_SLOTS>>,
    original: &str,
    patched: Option<&Patched>,
) -> Verdict {
    let at = required(top.vals[L_AT].as_ref(), "at")
        .and_then(|v| as_i64(v, "at"))
        .map_err(|r| (None, r))?;
    let with_at = |r: Rejection| (Some(at), r);

    let kind = match required(top.vals[L_KIND].as_ref(), "kind").map_err(with_at)? {
        Val::Str(s) => match &**s {
            "event" => Kind::Event,
            "samples" => Kind::Samples,
            "readings" => Kind::Readings,
            "tick" => Kind::Tick,
            other => {
                let detail = format!(
                    "kind {} (expected \"event\", \"samples\", \"readings\" or \"tick\")",
                    show(other)
                );
                return Err(with_at(Rejection::new(Reason::UnknownKind, detail)));
            }
        },
        other => return Err(with_at(bad_type("kind", "a string", other))),
    };

    if let Some((name, known)) = top.first_unknown(|i| kind.defines(i)) {
        let detail = if known {
            format!("field {} is not defined for kind {:?}", show(name), kind.as_str())
        } else {
            format!("unknown field {}", show(name))
        };
        return Err(with_at(Rejection::new(Reason::UnknownField, detail)));
    }

    let arrival = match kind {
        Kind::Tick => Arrival::Tick,
        Kind::Event => {
            if let Some(event) = top.event.take() {
                // Read and validated in the same pass as the line (the fast path).
                return Ok(TraceLine { at, arrival: Arrival::Event(event) });
            }
            let v = required(top.vals[L_EVENT].as_ref(), "event").map_err(with_at)?;
            let raw = match v {
                Val::Raw(raw) => raw,
                other => return Err(with_at(bad_type("event", "an object", other))),
            };
            // In the fallback pass the raw text has sentinels; judge the event on its own bytes.
            let text = match patched {
                None => raw.get(),
                Some(p) => p.original_slice(original, raw.get()).unwrap_or(raw.get()),
            };
            if !text.trim_start().starts_with('{') {
                let found = describe_raw(raw.get());
                return Err(with_at(Rejection::new(
                    Reason::BadType,
                    format!("event: expected an object, found {found}"),
                )));
            }
            Arrival::Event(parse_event(text).map_err(with_at)?)
        }
        Kind::Samples => Arrival::Samples(samples_line(top, kind).map_err(with_at)?),
        Kind::Readings => Arrival::Readings(samples_line(top, kind).map_err(with_at)?),
    };
    Ok(TraceLine { at, arrival })
}

/// The fields of a `samples` or a `readings` line (`kind`), which differ only in their unit:
/// raw acceleration in `g` or `m/s2`, or velocities a device measured, in `mm/s` and `>= 0`.
fn samples_line(mut top: Box<Top<'_, LINE_SLOTS>>, kind: Kind) -> Result<SamplesRecord, Rejection> {
    let slot = |i: usize| top.vals[i].as_ref();

    // Presence and type, in a fixed order.
    let machine = as_str(required(slot(L_MACHINE), "machine")?, "machine")?;
    let sensor = as_str(required(slot(L_SENSOR), "sensor")?, "sensor")?;
    let t0_ms = as_i64(required(slot(L_T0_MS), "t0_ms")?, "t0_ms")?;
    let rate_v = required(slot(L_RATE_HZ), "rate_hz")?;
    let rate_hz = match as_number(rate_v, "rate_hz")? {
        Number::Finite(x) if x > 0.0 && x <= MAX_RATE_HZ => x,
        _ => {
            return Err(Rejection::new(
                Reason::BadType,
                format!(
                    "rate_hz: expected a number > 0 and <= {MAX_RATE_HZ}, found {}",
                    rate_v.describe()
                ),
            ))
        }
    };
    let unit = as_enum(required(slot(L_UNIT), "unit")?, "unit", UNITS)?;
    let axis = match present(slot(L_AXIS)) {
        None => None,
        Some(v) => Some(as_str(v, "axis")?.to_owned()),
    };
    let clock = match present(slot(L_CLOCK)) {
        None => None,
        Some(v) => Some(clock_from(v)?),
    };
    let data_v = required(slot(L_DATA), "data")?;
    let Val::Nums(nums) = data_v else {
        return Err(bad_type("data", "an array of numbers", data_v));
    };
    if let Some((i, found)) = &nums.first_bad {
        return Err(Rejection::new(
            Reason::BadType,
            format!("data[{i}]: expected a number, found {found}"),
        ));
    }
    if nums.values.is_empty() && nums.first_non_finite.is_none() {
        return Err(Rejection::new(Reason::BadType, "data: expected a non-empty array, found []"));
    }

    // Semantic checks.
    check_identifier("machine", machine)?;
    check_identifier("sensor", sensor)?;
    if let Some((i, t)) = nums.first_non_finite {
        return Err(Rejection::new(
            Reason::NonFiniteValue,
            format!("data[{i}] is {}", t.describe()),
        ));
    }
    match (kind, unit) {
        (Kind::Readings, Unit::MmS) => {
            if let Some(i) = nums.values.iter().position(|&x| x < 0.0) {
                return Err(Rejection::new(
                    Reason::NegativeValue,
                    format!("data[{i}] is {}: a velocity RMS is >= 0", nums.values[i]),
                ));
            }
        }
        (Kind::Readings, _) => {
            return Err(Rejection::new(
                Reason::UnitMismatch,
                format!(
                    "unit {:?} does not fit readings: readings are velocities a device measured, \
                     in \"mm/s\"; raw acceleration is a \"samples\" line",
                    unit.as_str()
                ),
            ))
        }
        (_, Unit::MmS) => {
            return Err(Rejection::new(
                Reason::UnitMismatch,
                "unit \"mm/s\" does not fit samples: raw samples are acceleration in \"g\" or \
                 \"m/s2\"; velocities a device measured itself are a \"readings\" line (one \
                 velocity_rms event per value)",
            ))
        }
        _ => {}
    }
    check_plausible_ts(t0_ms, "t0_ms")?;

    let (machine, sensor) = (machine.to_owned(), sensor.to_owned());
    let data = match top.vals[L_DATA].take() {
        Some(Val::Nums(nums)) => nums.values,
        _ => Vec::new(),
    };
    Ok(SamplesRecord { machine, sensor, t0_ms, rate_hz, unit, axis, clock, data })
}

/// `at` of a line that is not valid JSON, when the line starts `{"at": <integer>` followed by
/// `,` or `}` (whitespace allowed between tokens).
pub fn salvage_at(b: &[u8]) -> Option<i64> {
    let mut i = 0;
    let ws = |i: &mut usize| {
        while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\r' | b'\n') {
            *i += 1;
        }
    };
    let lit = |i: &mut usize, s: &[u8]| {
        let ok = b[*i..].starts_with(s);
        if ok {
            *i += s.len();
        }
        ok
    };
    ws(&mut i);
    if !lit(&mut i, b"{") {
        return None;
    }
    ws(&mut i);
    if !lit(&mut i, b"\"at\"") {
        return None;
    }
    ws(&mut i);
    if !lit(&mut i, b":") {
        return None;
    }
    ws(&mut i);
    let start = i;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    let digits = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i == digits || (b[digits] == b'0' && i > digits + 1) {
        return None;
    }
    let end = i;
    ws(&mut i);
    if !matches!(b.get(i), Some(b',' | b'}')) {
        return None;
    }
    std::str::from_utf8(&b[start..end]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests;
