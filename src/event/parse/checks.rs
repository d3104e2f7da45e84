//! The semantic checks, run once every field is present and of the right type.

use super::value::{show, Number, MAX_EVENT_ID_BYTES, MIN_PLAUSIBLE_TS_MS};
use crate::event::is_identifier;
use crate::event::rejection::{Reason, Rejection};

pub(super) fn check_event_id(id: &str) -> Result<(), Rejection> {
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
            format!(
                "{field} {ts} ({}) is before 2000-01-01T00:00:00.000Z",
                crate::timefmt::time(ts)
            ),
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

pub(super) fn non_negative(x: f64, path: &str) -> Result<(), Rejection> {
    if x < 0.0 {
        return Err(Rejection::new(
            Reason::NegativeValue,
            format!("{path} is {x:?} (must be >= 0)"),
        ));
    }
    Ok(())
}
