//! The non-finite fallback. Python's `json.dumps` writes bare `NaN`, `Infinity` and `-Infinity`,
//! which are not JSON. Only when the strict parse fails is the text re-scanned, those tokens (and
//! number literals too large for f64) replaced by a sentinel string and the text read again, so a
//! non-finite number is reported by the semantic checks rather than as `malformed_json`.

use super::reader::read_top;
use super::value::{NonFinite, Pass, Shape, Top};
use crate::event::rejection::{Reason, Rejection};

/// Reads `text` as one object of `shape` and hands it to `validate`: strictly first and, when
/// that fails, once more from the text [`patch_non_finite`] gives (which `validate` then gets
/// too). `Err` is the `malformed_json` rejection when neither read succeeds.
pub(crate) fn read_top_with_fallback<const N: usize, T>(
    text: &str,
    shape: &'static Shape,
    validate: impl for<'t> FnOnce(Box<Top<'t, N>>, Option<&Patched>) -> T,
) -> Result<T, Rejection> {
    match read_top::<N>(text, shape, Pass::Strict) {
        Ok(top) => Ok(validate(top, None)),
        Err(e) => {
            let Some(patched) = patch_non_finite(text) else {
                return Err(malformed_json(&e));
            };
            match read_top::<N>(&patched.text, shape, Pass::Fallback) {
                Ok(top) => Ok(validate(top, Some(&patched))),
                Err(e2) => Err(malformed_json(pick_error(&e, &e2))),
            }
        }
    }
}

/// `malformed_json` with serde_json's message (which names the position).
fn malformed_json(e: &serde_json::Error) -> Rejection {
    Rejection::new(Reason::MalformedJson, e.to_string())
}

/// After a failed fallback pass: its error when it is ours (duplicate key, not an object), else
/// the strict pass's error, whose position refers to the original text.
fn pick_error<'e>(
    strict: &'e serde_json::Error,
    fallback: &'e serde_json::Error,
) -> &'e serde_json::Error {
    if fallback.classify() == serde_json::error::Category::Data {
        fallback
    } else {
        strict
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
pub(super) fn is_json_number(s: &[u8]) -> bool {
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
