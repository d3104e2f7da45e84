//! Reading JSON into values, without `serde_json::Value`: a top-level object into fixed slots
//! ([`Top`]), every value into a [`Val`], and duplicate keys rejected at any depth.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::fast::FastEvent;
use super::fields::show;
use super::non_finite::NonFinite;
use crate::event::Event;
use crate::records::quarantine::{Reason, Rejection};

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
    /// The text was patched by [`patch_non_finite`](super::non_finite::patch_non_finite): sentinel strings are non-finite tokens.
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
