//! The values the parser reads JSON into, and the small pieces every part of it shares: a leaf
//! module (it imports nothing else of `parse`), so the reader, the fast path, the fallback and
//! the field access depend on it and never on each other in a circle.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Visitor};
use serde_json::value::RawValue;

use crate::event::rejection::{Reason, Rejection};
use crate::event::Event;

/// 2000-01-01T00:00:00Z in Unix milliseconds: an earlier `ts_ms` is `clock_implausible`.
pub const MIN_PLAUSIBLE_TS_MS: i64 = 946_684_800_000;

/// The longest `event_id`, in bytes.
pub const MAX_EVENT_ID_BYTES: usize = 128;

/// `-0.0` is accepted and stored as `+0.0`, so equal events have equal fingerprints.
pub(super) fn without_negative_zero(x: f64) -> f64 {
    if x == 0.0 {
        0.0
    } else {
        x
    }
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

/// A number as found in the text: finite, or one of the non-finite tokens the fallback replaced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Number {
    Finite(f64),
    NonFinite(NonFinite),
}

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
    pub(super) const ALL: [NonFinite; 5] = [
        NonFinite::NaN,
        NonFinite::Infinity,
        NonFinite::NegInfinity,
        NonFinite::Overflow,
        NonFinite::NegOverflow,
    ];

    /// The JSON text that replaces the token in the fallback pass. It contains `\u0000`, and the
    /// fallback never runs on text that already does, so it cannot be forged.
    pub(super) fn sentinel(self) -> &'static str {
        match self {
            NonFinite::NaN => "\"\\u0000nf:NaN\"",
            NonFinite::Infinity => "\"\\u0000nf:Infinity\"",
            NonFinite::NegInfinity => "\"\\u0000nf:-Infinity\"",
            NonFinite::Overflow => "\"\\u0000nf:overflow\"",
            NonFinite::NegOverflow => "\"\\u0000nf:-overflow\"",
        }
    }

    /// The sentinel as a decoded string.
    pub(super) fn decoded(self) -> &'static str {
        match self {
            NonFinite::NaN => "\u{0}nf:NaN",
            NonFinite::Infinity => "\u{0}nf:Infinity",
            NonFinite::NegInfinity => "\u{0}nf:-Infinity",
            NonFinite::Overflow => "\u{0}nf:overflow",
            NonFinite::NegOverflow => "\u{0}nf:-overflow",
        }
    }

    pub(super) fn from_decoded(s: &str) -> Option<NonFinite> {
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
    pub(super) pos: [u32; N],
    pub(super) names: &'static [&'static str],
    /// Keys that are not in the shape, with their positions.
    pub(super) unknown: Vec<(u32, Cow<'a, str>)>,
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
    /// The text was patched by [`patch_non_finite`](super::non_finite::patch_non_finite): sentinel strings are non-finite tokens.
    Fallback,
}

pub(super) enum Key<'a> {
    Known(usize),
    Other(Cow<'a, str>),
}

pub(super) struct KeySeed {
    pub(super) lookup: fn(&str) -> Option<usize>,
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
pub(super) struct CowStr;

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
