//! The fast path for valid schema-1 events.
//!
//! It reads the fields straight into their types in one pass and succeeds only for an event that
//! the exact path (`exact_event` in the parent module) would accept, giving the same `Event`: the
//! same fields, types, enumerations, `null`-as-absent rule and semantic checks. On anything else
//! (schema 2, an unknown or duplicate key, a wrong type, a failed check) it fails without saying
//! why, and the exact path decides.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};

use super::checks::check_event_id;
use super::feature_fits;
use super::scan::{lookup, Scan};
use super::shape::*;
use super::value::{without_negative_zero, CowStr, Key, KeySeed, MIN_PLAUSIBLE_TS_MS};
use crate::event::features::{Feature, Features};
use crate::event::{is_identifier, ClockEvidence, Event, Metric, Quality, SampleRef, Unit};

/// The event, when `raw` is a valid schema-1 event; `None` leaves the verdict to the exact path.
pub(super) fn fast_event(raw: &str) -> Option<Event> {
    let mut scan = Scan::new(raw);
    if let Some(event) = scan.event(None) {
        if scan.end().is_some() {
            return Some(event);
        }
    }
    let mut de = serde_json::Deserializer::from_str(raw);
    let event = FastEvent.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(event)
}

fn no<E: de::Error>() -> E {
    E::custom("not a plain valid event")
}

fn fast_enum<T: Copy, E: de::Error>(s: &str, table: &[(&str, T)]) -> Result<T, E> {
    lookup(s, table).ok_or_else(no)
}

/// Reads one valid schema-1 event object, or fails.
pub(super) struct FastEvent;

/// `s` as an owned string, in a spare one when there is one.
fn owned(s: Cow<'_, str>, spare: &mut Option<&mut Vec<String>>) -> String {
    match spare.as_mut().and_then(|v| v.pop()) {
        Some(mut buf) => {
            buf.clear();
            buf.push_str(&s);
            buf
        }
        None => s.into_owned(),
    }
}

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
        let mut f = PlainFields::default();
        let mut seen = 0u32;
        while let Some(key) = map.next_key_seed(KeySeed { lookup: event_key })? {
            let Key::Known(i) = key else { return Err(no()) };
            if seen & (1 << i) != 0 {
                return Err(no());
            }
            seen |= 1 << i;
            match i {
                F_EVENT_ID => f.event_id = Some(map.next_value_seed(CowStr)?),
                F_MACHINE => f.machine = Some(map.next_value_seed(CowStr)?),
                F_SENSOR => f.sensor = Some(map.next_value_seed(CowStr)?),
                F_SEQ => f.seq = Some(map.next_value::<u64>()?),
                F_TS_MS => f.ts_ms = Some(map.next_value::<i64>()?),
                F_CLOCK => f.clock = Some(map.next_value_seed(FastClock)?),
                F_METRIC => f.metric = Some(fast_enum(&map.next_value_seed(CowStr)?, METRICS)?),
                F_VALUE => f.value = Some(map.next_value::<f64>()?),
                F_UNIT => f.unit = Some(fast_enum(&map.next_value_seed(CowStr)?, UNITS)?),
                F_SCHEMA => f.schema = Some(map.next_value::<u64>()?),
                F_QUALITY => f.quality = Some(fast_enum(&map.next_value_seed(CowStr)?, QUALITIES)?),
                F_SAMPLES => f.samples = map.next_value_seed(FastSamples)?,
                F_FEATURES => f.features = map.next_value_seed(FastFeatures)?,
                F_REPLAYED => {
                    map.next_value::<Option<bool>>()?;
                }
                _ => return Err(no()),
            }
        }
        f.finish(None).ok_or_else(no)
    }
}

/// The fields of a schema-1 event as read by a fast path (each at most once), before the checks.
#[derive(Default)]
pub(super) struct PlainFields<'a> {
    pub(super) event_id: Option<Cow<'a, str>>,
    pub(super) machine: Option<Cow<'a, str>>,
    pub(super) sensor: Option<Cow<'a, str>>,
    pub(super) seq: Option<u64>,
    pub(super) ts_ms: Option<i64>,
    pub(super) clock: Option<ClockEvidence>,
    pub(super) metric: Option<Metric>,
    pub(super) value: Option<f64>,
    pub(super) unit: Option<Unit>,
    pub(super) schema: Option<u64>,
    pub(super) quality: Option<Quality>,
    pub(super) samples: Option<SampleRef>,
    /// Read as numbers of known names, each once; signs and units are checked by `finish`.
    pub(super) features: Option<Features>,
}

impl PlainFields<'_> {
    /// The event, when every required field is there, `schema` is 1 and the semantic checks pass;
    /// otherwise `None` (the exact path decides). Strings go into `spare` ones where there are.
    pub(super) fn finish(self, mut spare: Option<&mut Vec<String>>) -> Option<Event> {
        let PlainFields { event_id, machine, sensor, seq, ts_ms, clock, metric, value, .. } = self;
        let (Some(event_id), Some(machine), Some(sensor), Some(seq), Some(ts_ms), Some(clock)) =
            (event_id, machine, sensor, seq, ts_ms, clock)
        else {
            return None;
        };
        let (Some(metric), Some(value), Some(unit), Some(1), Some(quality)) =
            (metric, value, self.unit, self.schema, self.quality)
        else {
            return None;
        };
        let valid = check_event_id(&event_id).is_ok()
            && is_identifier(&machine)
            && is_identifier(&sensor)
            && value.is_finite()
            && value >= 0.0
            && metric.fits(unit)
            && ts_ms >= MIN_PLAUSIBLE_TS_MS
            && self.features.as_ref().is_none_or(|fs| {
                fs.iter().all(|(f, v)| v >= 0.0 && v.is_finite() && feature_fits(f, unit))
            });
        if !valid {
            return None;
        }
        Some(Event {
            event_id: owned(event_id, &mut spare),
            machine: owned(machine, &mut spare),
            sensor: owned(sensor, &mut spare),
            seq,
            ts_ms,
            clock,
            metric,
            value: without_negative_zero(value),
            unit,
            schema: 1,
            quality,
            samples: self.samples,
            features: self.features.filter(|fs| !fs.is_empty()).map(Box::new),
        })
    }
}

struct FastClock;

impl<'de> DeserializeSeed<'de> for FastClock {
    type Value = ClockEvidence;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FastClock {
    type Value = ClockEvidence;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a clock object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ClockEvidence, A::Error> {
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
        Ok(ClockEvidence { state: state.ok_or_else(no)?, err_ms })
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

/// `features`: `null` or an object of known feature names to numbers, each name once.
struct FastFeatures;

impl<'de> DeserializeSeed<'de> for FastFeatures {
    type Value = Option<Features>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FastFeatures {
    type Value = Option<Features>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a features object")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Features::default();
        while let Some(key) = map.next_key_seed(CowStr)? {
            let f = Feature::from_name(&key).ok_or_else(no)?;
            if out.get(f).is_some() {
                return Err(no());
            }
            out.set(f, map.next_value::<f64>()?);
        }
        Ok(Some(out))
    }
}
