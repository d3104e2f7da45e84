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
use super::shape::*;
use super::value::{without_negative_zero, CowStr, Key, KeySeed, MIN_PLAUSIBLE_TS_MS};
use crate::event::{is_identifier, ClockEvidence, Event, SampleRef};

/// The event, when `raw` is a valid schema-1 event; `None` leaves the verdict to the exact path.
pub(super) fn fast_event(raw: &str) -> Option<Event> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let event = FastEvent(None).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(event)
}

fn no<E: de::Error>() -> E {
    E::custom("not a plain valid event")
}

fn fast_enum<T: Copy, E: de::Error>(s: &str, table: &[(&str, T)]) -> Result<T, E> {
    table.iter().find(|(name, _)| *name == s).map(|&(_, t)| t).ok_or_else(no)
}

/// Reads one valid schema-1 event object, or fails. With spare strings (those of events already
/// decided, handed back by `replay`), the event's `event_id`, `machine` and `sensor` are written
/// into them instead of newly allocated ones: the same event, fewer allocations.
pub(crate) struct FastEvent<'s>(pub(crate) Option<&'s mut Vec<String>>);

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

impl<'de> DeserializeSeed<'de> for FastEvent<'_> {
    type Value = Event;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FastEvent<'_> {
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
        let mut spare = self.0;
        Ok(Event {
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
            samples,
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
