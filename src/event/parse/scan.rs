//! A byte scanner for the plainest valid JSON: the first try of the fast paths.
//!
//! It reads what producers (linegate among them) write for valid schema-1 events and trace lines:
//! objects, strings without escapes, non-negative integers, decimals of at most 15 digits without
//! an exponent, `null`, `true` and `false`. On anything else it gives `None` without saying why:
//! a string with an escape or a control character, a negative number, an exponent, a leading zero,
//! a number that does not fit, a key it does not know or sees twice. The serde paths then decide,
//! so the scanner only has to be right where it says yes: there it gives exactly what
//! `serde_json` (with `float_roundtrip`) reads from the same text, at a fraction of its cost.
//!
//! Numbers: an integer is its digits; a decimal `m / 10^k` with `m < 10^15` (below 2^53, so exact
//! as an f64) and `k <= 14` (at least one digit comes before the point; 10^k is exact as an f64)
//! is one correctly rounded IEEE division of two exact values, which is the correctly rounded
//! value of the text, as serde_json gives it.

use std::borrow::Cow;
use std::ops::Range;

use super::fast::PlainFields;
use super::shape::*;
use crate::event::features::{Feature, Features};
use crate::event::{ClockEvidence, Event, SampleRef};

/// The most significant digits a decimal may have here (10^15 < 2^53).
const MAX_DIGITS: u32 = 15;

/// 10^k for the fraction digits a decimal may have (`k < MAX_DIGITS`).
const POW10: [f64; MAX_DIGITS as usize] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14];

/// A cursor over JSON text.
pub(crate) struct Scan<'a> {
    text: &'a str,
    i: usize,
}

impl<'a> Scan<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Scan { text, i: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.i).copied()
    }

    /// Skips JSON whitespace and returns the next byte.
    fn next_token(&mut self) -> Option<u8> {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
        self.peek()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next_token()? == c).then(|| self.i += 1)
    }

    /// Nothing but whitespace is left.
    pub(crate) fn end(&mut self) -> Option<()> {
        self.next_token().is_none().then_some(())
    }

    /// A string without escapes or control characters.
    pub(crate) fn str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        let rest = &self.text.as_bytes()[start..];
        let len = string_end(rest)?;
        if rest[len] != b'"' {
            return None;
        }
        self.i = start + len + 1;
        // Both ends are ASCII quotes, so the slice is on character boundaries.
        self.text.get(start..start + len)
    }

    /// An object: calls `field` with the scanner after each key's colon, to read the value.
    pub(crate) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        if self.next_token()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.str()?;
            self.eat(b':')?;
            field(self, key)?;
            match self.next_token()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Digits of a JSON integer part (no leading zero), their value and how many there were;
    /// `None` past `u64::MAX`.
    fn digits(&mut self) -> Option<(u64, u32)> {
        self.next_token()?;
        let b = self.text.as_bytes();
        let start = self.i;
        let mut v: u64 = 0;
        while let Some(d @ b'0'..=b'9') = b.get(self.i).copied() {
            v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.i += 1;
        }
        let n = (self.i - start) as u32;
        if n == 0 || (n > 1 && b[start] == b'0') {
            return None;
        }
        Some((v, n))
    }

    /// A non-negative integer (not followed by a fraction or an exponent).
    pub(crate) fn u64(&mut self) -> Option<u64> {
        let (v, _) = self.digits()?;
        (!matches!(self.peek(), Some(b'.' | b'e' | b'E'))).then_some(v)
    }

    pub(crate) fn i64(&mut self) -> Option<i64> {
        i64::try_from(self.u64()?).ok()
    }

    /// A non-negative number of at most 15 digits, without an exponent.
    pub(crate) fn f64(&mut self) -> Option<f64> {
        let (int, n) = self.digits()?;
        let (mut m, mut k) = (int, 0u32);
        if self.peek() == Some(b'.') {
            self.i += 1;
            let b = self.text.as_bytes();
            while let Some(d @ b'0'..=b'9') = b.get(self.i).copied() {
                k += 1;
                if n + k > MAX_DIGITS {
                    return None;
                }
                m = m * 10 + u64::from(d - b'0');
                self.i += 1;
            }
            if k == 0 {
                return None;
            }
        }
        if n + k > MAX_DIGITS || matches!(self.peek(), Some(b'e' | b'E')) {
            return None;
        }
        Some(m as f64 / POW10[k as usize])
    }

    /// `null`, `true` or `false`: `None` when it is not one of them.
    fn literal(&mut self) -> Option<Option<bool>> {
        self.next_token()?;
        let rest = &self.text.as_bytes()[self.i..];
        let (value, len) = if rest.starts_with(b"null") {
            (None, 4)
        } else if rest.starts_with(b"true") {
            (Some(true), 4)
        } else if rest.starts_with(b"false") {
            (Some(false), 5)
        } else {
            return None;
        };
        self.i += len;
        Some(value)
    }

    fn null(&mut self) -> Option<()> {
        (self.literal()?.is_none()).then_some(())
    }

    /// Skips one value of the kinds the scanner reads (an object's keys may be any here, up to
    /// `depth` levels deep) and returns its bytes' range.
    fn skip(&mut self, depth: u32) -> Option<Range<usize>> {
        let first = self.next_token()?;
        let start = self.i;
        match first {
            b'{' if depth > 0 => self.object(|s, _| s.skip(depth - 1).map(drop))?,
            b'"' => self.str().map(drop)?,
            b'n' | b't' | b'f' => self.literal().map(drop)?,
            b'0'..=b'9' => self.f64().map(drop)?,
            _ => return None,
        }
        Some(start..self.i)
    }

    /// [`Self::event`], and where the object is: from its `{` to past its `}`.
    pub(crate) fn event_spanned(
        &mut self,
        spare: Option<&mut Vec<String>>,
    ) -> Option<(Event, Range<usize>)> {
        self.next_token()?;
        let start = self.i;
        let event = self.event(spare)?;
        Some((event, start..self.i))
    }

    /// A valid schema-1 event object, as the serde fast path reads it (`FastEvent`).
    pub(crate) fn event(&mut self, spare: Option<&mut Vec<String>>) -> Option<Event> {
        let mut f = PlainFields::default();
        let mut seen = 0u32;
        self.object(|s, key| {
            let i = event_key(key)?;
            if seen & (1 << i) != 0 {
                return None;
            }
            seen |= 1 << i;
            match i {
                F_EVENT_ID => f.event_id = Some(Cow::Borrowed(s.str()?)),
                F_MACHINE => f.machine = Some(Cow::Borrowed(s.str()?)),
                F_SENSOR => f.sensor = Some(Cow::Borrowed(s.str()?)),
                F_SEQ => f.seq = Some(s.u64()?),
                F_TS_MS => f.ts_ms = Some(s.i64()?),
                F_CLOCK => f.clock = Some(s.clock()?),
                F_METRIC => f.metric = Some(lookup(s.str()?, METRICS)?),
                F_VALUE => f.value = Some(s.f64()?),
                F_UNIT => f.unit = Some(lookup(s.str()?, UNITS)?),
                F_SCHEMA => f.schema = Some(s.u64()?),
                F_QUALITY => f.quality = Some(lookup(s.str()?, QUALITIES)?),
                F_SAMPLES => f.samples = s.samples()?,
                F_FEATURES => f.features = s.features()?,
                F_REPLAYED => {
                    s.literal()?;
                }
                _ => return None,
            }
            Some(())
        })?;
        f.finish(spare)
    }

    fn clock(&mut self) -> Option<ClockEvidence> {
        let (mut state, mut err_ms, mut seen_err) = (None, None, false);
        self.object(|s, key| {
            match key {
                "state" if state.is_none() => state = Some(lookup(s.str()?, CLOCK_STATES)?),
                "err_ms" if !seen_err => {
                    seen_err = true;
                    err_ms = match s.next_token()? {
                        b'n' => s.null().map(|()| None)?,
                        _ => Some(u32::try_from(s.u64()?).ok()?),
                    };
                }
                _ => return None,
            }
            Some(())
        })?;
        Some(ClockEvidence { state: state?, err_ms })
    }

    /// `features`: `null` or an object of known feature names, each once, to numbers.
    fn features(&mut self) -> Option<Option<Features>> {
        if self.next_token()? == b'n' {
            return self.null().map(|()| None);
        }
        let mut out = Features::default();
        self.object(|s, key| {
            let f = Feature::from_name(key)?;
            if out.get(f).is_some() {
                return None;
            }
            out.set(f, s.f64()?);
            Some(())
        })?;
        Some(Some(out))
    }

    /// `samples`: `null` or a valid object.
    fn samples(&mut self) -> Option<Option<SampleRef>> {
        if self.next_token()? == b'n' {
            return self.null().map(|()| None);
        }
        let (mut block_seq, mut from_ms, mut to_ms) = (None, None, None);
        self.object(|s, key| {
            match key {
                "block_seq" if block_seq.is_none() => block_seq = Some(s.u64()?),
                "from_ms" if from_ms.is_none() => from_ms = Some(s.i64()?),
                "to_ms" if to_ms.is_none() => to_ms = Some(s.i64()?),
                _ => return None,
            }
            Some(())
        })?;
        let (block_seq, from_ms, to_ms) = (block_seq?, from_ms?, to_ms?);
        (from_ms <= to_ms).then_some(Some(SampleRef { block_seq, from_ms, to_ms }))
    }
}

/// Where the value of the member `key` of `text` is, when `text` is one object of the JSON the
/// scanner reads (at most 16 levels deep) with `key` once: the bytes serde_json's `RawValue` of
/// that member borrows. `None` leaves it to serde_json.
pub(crate) fn member_span(text: &str, key: &str) -> Option<Range<usize>> {
    let mut scan = Scan::new(text);
    let mut span = None;
    scan.object(|s, k| {
        let value = s.skip(16)?;
        if k == key {
            if span.is_some() {
                return None;
            }
            span = Some(value);
        }
        Some(())
    })?;
    scan.end()?;
    span
}

/// Where the first `"`, `\\` or control character of `b` is: eight bytes at a time.
fn string_end(b: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte of `x` below `n` sets its high bit here; a false one only ever follows a true one.
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH;
    let mut i = 0;
    while let Some(chunk) = b.get(i..i + 8) {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        let hits = below(word ^ (ONES * u64::from(b'"')), 1)
            | below(word ^ (ONES * u64::from(b'\\')), 1)
            | below(word, 0x20);
        if hits != 0 {
            return Some(i + hits.trailing_zeros() as usize / 8);
        }
        i += 8;
    }
    b[i..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).map(|p| i + p)
}

/// The value `s` names in an enumeration's table.
pub(super) fn lookup<T: Copy>(s: &str, table: &[(&str, T)]) -> Option<T> {
    table.iter().find(|(name, _)| *name == s).map(|&(_, t)| t)
}

#[cfg(test)]
mod tests;
