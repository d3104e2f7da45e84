//! The stored bytes of an event's outbox record written by hand: what
//! `OutboxRecord::Event { .. }.encode()` gives through serde and ciborium (the version byte, a
//! map of the variant's name to a map of its five fields in declaration order, `json` a byte
//! string), without building the record or the JSON with `at` first. One such record is made
//! for every event decided; the test below checks the bytes against ciborium's.

use super::{with_at_parts, AtTail, VERSION};
use crate::records::cbor_write::{bytes, head, map, text};

/// The outbox record of an event, its JSON made of `json_parts` one after the other.
pub(super) fn encode(
    machine: &str,
    sensor: &str,
    seq: u64,
    event_id: &str,
    json_parts: &[&[u8]],
) -> Vec<u8> {
    let json_len: usize = json_parts.iter().map(|p| p.len()).sum();
    let mut out = Vec::with_capacity(64 + machine.len() + sensor.len() + event_id.len() + json_len);
    out.push(VERSION);
    map(&mut out, 1);
    text(&mut out, "Event");
    map(&mut out, 5);
    text(&mut out, "machine");
    text(&mut out, machine);
    text(&mut out, "sensor");
    text(&mut out, sensor);
    text(&mut out, "seq");
    head(&mut out, 0, seq);
    text(&mut out, "event_id");
    text(&mut out, event_id);
    text(&mut out, "json");
    bytes(&mut out, json_parts);
    out
}

/// The outbox record of an event whose JSON is `json` with `"at":at` added as
/// [`super::event_json_with_at`] adds it.
pub fn encode_with_at(
    machine: &str,
    sensor: &str,
    seq: u64,
    event_id: &str,
    json: &[u8],
    at: i64,
) -> Vec<u8> {
    let mut tail = AtTail::default();
    encode(machine, sensor, seq, event_id, &with_at_parts(json, at, &mut tail))
}

#[cfg(test)]
mod tests {
    use super::super::{event_json_with_at, OutboxRecord};
    use super::*;
    use proptest::prelude::*;

    /// The record through serde and ciborium (not `OutboxRecord::encode`, which comes here).
    fn by_serde(machine: &str, sensor: &str, seq: u64, event_id: &str, json: &[u8]) -> Vec<u8> {
        let record = OutboxRecord::Event {
            machine: machine.into(),
            sensor: sensor.into(),
            seq,
            event_id: event_id.into(),
            json: json.to_vec(),
        };
        crate::records::cbor::encode(&[VERSION], &record)
    }

    fn edge_u64() -> impl Strategy<Value = u64> {
        let edges = [0u64, 23, 24, 255, 256, 65_535, 65_536, 4_294_967_295, 4_294_967_296];
        prop_oneof![proptest::sample::select(edges.to_vec()), any::<u64>()]
    }

    /// JSON-like bodies of every length class of a CBOR byte string, closed or not, some with
    /// trailing white space or an empty object.
    fn json() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            "\\{[a-z\":,0-9 ]{0,300}\\}[ \n]{0,2}".prop_map(String::into_bytes),
            "\\{ *\\}".prop_map(String::into_bytes),
            proptest::collection::vec(any::<u8>(), 0..70_000),
        ]
    }

    proptest! {
        /// The bytes are ciborium's for the record with `event_json_with_at`'s JSON.
        #[test]
        fn an_event_record_is_written_as_ciborium_writes_it(
            names in ("[a-z0-9-]{0,30}", "[a-z0-9_.]{0,30}", ".{0,40}"),
            seq in edge_u64(),
            json in json(),
            at in prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0i64), any::<i64>()],
        ) {
            let (machine, sensor, event_id) = names;
            let want = by_serde(&machine, &sensor, seq, &event_id, &event_json_with_at(&json, at));
            prop_assert_eq!(encode_with_at(&machine, &sensor, seq, &event_id, &json, at), want);
            let plain = by_serde(&machine, &sensor, seq, &event_id, &json);
            prop_assert_eq!(encode(&machine, &sensor, seq, &event_id, &[&json]), plain);
        }
    }
}
