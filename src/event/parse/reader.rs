//! Reading JSON into values, without `serde_json::Value`: a top-level object into fixed slots
//! ([`Top`]), every value into a [`Val`], and duplicate keys rejected at any depth.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::fast::FastEvent;
use super::value::{CowStr, Key, KeySeed, NonFinite, Nums, Obj, Pass, Shape, Top, Val};

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
