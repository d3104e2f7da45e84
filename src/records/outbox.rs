//! What waits in the store's outbox for publication (docs/architecture.md: decide → outbox → forward).
//!
//! The decide stage adds [`OutboxRecord`]s in its checkpoint batch; the forwarder reads them in
//! outbox order, publishes each on its topic (docs/contracts.md section 10) and removes it only after the
//! broker's acknowledgement. This module is the shared, pure vocabulary of both: the record types,
//! their topics and their bytes in the store. It does no I/O.
//!
//! # Bytes in the store
//!
//! `[VERSION][CBOR of OutboxRecord]`. CBOR (as the checkpoint snapshots) keeps the records
//! self-describing, so a later version can add fields; a value that does not decode is reported
//! with what was wrong, never a panic.
//!
//! # Raw samples are referenced, not copied
//!
//! A [`OutboxRecord::Samples`] names the journal position of the arrival that carried the
//! samples; the journal keeps that record until the outbox entry is acknowledged or shed. Copying
//! every raw sample into the outbox would double the disk use of the largest thing we store. It
//! also names, as a [`FrameRef`], the block's encoding that the decide stage wrote beside the line
//! in the segment files, so that a drain copies bytes instead of reading thousands of JSON numbers
//! back (docs/decisions/0027-frames-encoded-once.md).

use serde::{Deserialize, Serialize};

mod event_cbor;
pub use event_cbor::encode_with_at as encode_event_with_at;

/// The format version: a leading byte, then the record in CBOR. The `json` fields are CBOR byte
/// strings; stores written before that held them as arrays of integers (one item per byte, ten
/// times slower to decode and up to twice the size), which still decode: both are version 1.
const VERSION: u8 = 1;

/// One record awaiting publication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OutboxRecord {
    /// An alert record (docs/contracts.md section 6), as the JSON bytes `replay` writes for it.
    /// Topic `alerts/{machine}`.
    Alert {
        machine: String,
        alert_id: String,
        revision: u32,
        #[serde(with = "serde_bytes")]
        json: Vec<u8>,
    },
    /// One accepted event (applied, late applied or too late). `json` is the event as it arrived
    /// for received events, or its serialisation for events derived from raw samples. The
    /// forwarder batches consecutive events of one sensor into one `{"events": [...]}` payload
    /// and adds `"replayed": true` when it sends them from backlog. Topic
    /// `events/{machine}/{sensor}`.
    Event {
        machine: String,
        sensor: String,
        seq: u64,
        event_id: String,
        #[serde(with = "serde_bytes")]
        json: Vec<u8>,
    },
    /// Raw samples of one sensor, carried by journal record `journal_pos` (a `samples` arrival):
    /// `n` samples from `t0_ms` at `rate_hz`. Topic `samples/{machine}/{sensor}`. `frame`: where
    /// the decide stage wrote the block's encoding (one frame of every sample,
    /// docs/samples-encoding.md) beside its line, when it could; records of older stores have
    /// none.
    Samples {
        machine: String,
        sensor: String,
        journal_pos: u64,
        t0_ms: i64,
        rate_hz: f64,
        n: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        frame: Option<FrameRef>,
    },
    /// A declared gap: data the gateway knows it will never deliver. Topic `gaps/{sensor}`.
    Gap(GapNotice),
}

/// Where a block's encoded frame lies in the store's segment files: `len` bytes at `offset` of
/// segment `segment`, with their xxh3-64 `sum`. A cache of the journal line it was encoded from:
/// bytes that are missing or fail their checksum are read from that line again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameRef {
    pub segment: u64,
    pub offset: u64,
    pub len: u32,
    pub sum: u64,
}

/// A declared gap (docs/contracts.md section 10): what will never be delivered, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GapNotice {
    pub machine: String,
    pub sensor: String,
    pub range: GapRange,
    /// `"shed"` (the retention budget removed it), `"overrun"` (the sensor's FIFO overflowed),
    /// `"sensor_fault"`, [`GapNotice::CORRUPT`], ...: a short machine-readable word.
    pub reason: String,
    /// Ingest time when the gap was declared.
    pub declared_at_ms: i64,
}

/// What a gap covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GapRange {
    /// Events of the sensor with `from_seq..=to_seq`.
    Events { from_seq: u64, to_seq: u64 },
    /// Raw samples of the sensor with event time in `[from_ms, to_ms)`.
    Samples { from_ms: i64, to_ms: i64 },
}

/// An outbox value that does not decode.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("outbox record does not decode: {0}")]
pub struct OutboxDecodeError(pub String);

/// What [`OutboxRecord::peek_bulk`] tells from the bytes alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bulk {
    Event,
    Samples,
}

impl OutboxRecord {
    /// The topic under `{prefix}/{gateway}/` (docs/contracts.md section 10).
    pub fn topic_suffix(&self) -> String {
        match self {
            OutboxRecord::Alert { machine, .. } => format!("alerts/{machine}"),
            OutboxRecord::Event { machine, sensor, .. } => format!("events/{machine}/{sensor}"),
            OutboxRecord::Samples { machine, sensor, .. } => format!("samples/{machine}/{sensor}"),
            OutboxRecord::Gap(g) => format!("gaps/{}", g.sensor),
        }
    }

    /// The bytes stored in the outbox.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            OutboxRecord::Event { machine, sensor, seq, event_id, json } => {
                event_cbor::encode(machine, sensor, *seq, event_id, &[json])
            }
            _ => super::cbor::encode(&[VERSION], self),
        }
    }

    /// The kind of the stored bytes when they are an event or raw samples, the bulk of a
    /// backlog, told without decoding them: their CBOR map opens with the variant's name.
    /// `None` for anything else, an unexpected encoding included, which must be decoded.
    pub fn peek_bulk(bytes: &[u8]) -> Option<Bulk> {
        const EVENT: &[u8] = b"\xa1\x65Event";
        const SAMPLES: &[u8] = b"\xa1\x67Samples";
        match bytes {
            [VERSION, rest @ ..] if rest.starts_with(EVENT) => Some(Bulk::Event),
            [VERSION, rest @ ..] if rest.starts_with(SAMPLES) => Some(Bulk::Samples),
            _ => None,
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<OutboxRecord, OutboxDecodeError> {
        super::cbor::decode_versioned(VERSION, "outbox record", bytes).map_err(OutboxDecodeError)
    }
}

/// An event's JSON object with `"at":AT` (the gateway's ingest time, ms) added before its closing
/// brace, as published on `events/...` (docs/contracts.md section 10); the original bytes are
/// otherwise unchanged. An event's own keys never include `at` (section 2 rejects unknown keys).
pub fn event_json_with_at(json: &[u8], at: i64) -> Vec<u8> {
    let mut tail = AtTail::default();
    with_at_parts(json, at, &mut tail).concat()
}

/// Room for `"at":`, a sign and 19 digits, and `}`.
type AtTail = [u8; 32];

/// [`event_json_with_at`]'s bytes as three parts to put one after the other: the object up to
/// its closing brace, a comma when it has members, and `"at":AT}` (written into `tail`: no
/// string of its own for every event). Not an object: `json` unchanged, then nothing.
fn with_at_parts<'a>(json: &'a [u8], at: i64, tail: &'a mut AtTail) -> [&'a [u8]; 3] {
    let Some((b'}', inner)) = json.trim_ascii_end().split_last() else { return [json, b"", b""] };
    let comma: &[u8] = if inner.trim_ascii_end().last() == Some(&b'{') { b"" } else { b"," };
    let mut w = &mut tail[..];
    // Always fits: see `AtTail`.
    let _ = std::io::Write::write_fmt(&mut w, format_args!("\"at\":{at}}}"));
    let unused = w.len();
    let n = tail.len() - unused;
    [inner, comma, &tail[..n]]
}

impl GapNotice {
    /// The reason of a gap declared by a recovery: the store held the data, damaged beyond
    /// reading (`src/store/salvage.rs`).
    pub const CORRUPT: &'static str = "corrupt";

    /// The JSON payload published on `gaps/{sensor}`.
    pub fn to_json(&self) -> Vec<u8> {
        match serde_json::to_vec(self) {
            Ok(v) => v,
            Err(e) => unreachable!("a gap notice always serialises: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_gets_its_ingest_time_before_its_closing_brace() {
        assert_eq!(
            event_json_with_at(br#"{"event_id":"e","ts_ms":5} "#, 1_700_000_000_200),
            br#"{"event_id":"e","ts_ms":5,"at":1700000000200}"#.to_vec()
        );
        assert_eq!(event_json_with_at(b"{ }", -1), br#"{ "at":-1}"#.to_vec());
        assert_eq!(event_json_with_at(b"[1]", 3), b"[1]".to_vec(), "not an object: unchanged");
    }

    fn samples() -> OutboxRecord {
        OutboxRecord::Samples {
            machine: "press-7".into(),
            sensor: "s1".into(),
            journal_pos: 42,
            t0_ms: 1_700_000_000_000,
            rate_hz: 3200.0,
            n: 3200,
            frame: Some(FrameRef { segment: 40, offset: 12_800, len: 12_833, sum: 7 }),
        }
    }

    #[test]
    fn every_kind_round_trips_and_names_its_topic() {
        let gap = GapNotice {
            machine: "press-7".into(),
            sensor: "s1".into(),
            range: GapRange::Events { from_seq: 5, to_seq: 9 },
            reason: "shed".into(),
            declared_at_ms: 7,
        };
        let cases = [
            (
                OutboxRecord::Alert {
                    machine: "press-7".into(),
                    alert_id: "a1".into(),
                    revision: 2,
                    json: b"{}".to_vec(),
                },
                "alerts/press-7",
            ),
            (
                OutboxRecord::Event {
                    machine: "press-7".into(),
                    sensor: "s1".into(),
                    seq: 3,
                    event_id: "gw.s1.3".into(),
                    json: b"{\"x\":1}".to_vec(),
                },
                "events/press-7/s1",
            ),
            (samples(), "samples/press-7/s1"),
            (OutboxRecord::Gap(gap), "gaps/s1"),
        ];
        for (rec, topic) in cases {
            assert_eq!(rec.topic_suffix(), topic);
            // The lane scans skip events and raw samples by their bytes, nothing else.
            let bulk = match rec {
                OutboxRecord::Event { .. } => Some(Bulk::Event),
                OutboxRecord::Samples { .. } => Some(Bulk::Samples),
                _ => None,
            };
            assert_eq!(OutboxRecord::peek_bulk(&rec.encode()), bulk, "{topic}");
            assert_eq!(OutboxRecord::decode(&rec.encode()), Ok(rec));
        }
        for odd in [&b""[..], &[VERSION], &[VERSION + 1, 0xa1, 0x65, b'E'], &[VERSION, 0xbf]] {
            assert_eq!(OutboxRecord::peek_bulk(odd), None, "unknown bytes are decoded: {odd:?}");
        }
    }

    /// The record as written before the `json` fields became CBOR byte strings.
    #[derive(Serialize)]
    enum Legacy {
        Event {
            machine: String,
            sensor: String,
            seq: u64,
            event_id: String,
            json: Vec<u8>,
        },
        Samples {
            machine: String,
            sensor: String,
            journal_pos: u64,
            t0_ms: i64,
            rate_hz: f64,
            n: u32,
        },
    }

    #[test]
    fn samples_of_older_stores_have_no_frame_and_without_one_are_written_as_before() {
        let legacy = Legacy::Samples {
            machine: "press-7".into(),
            sensor: "s1".into(),
            journal_pos: 42,
            t0_ms: 1_700_000_000_000,
            rate_hz: 3200.0,
            n: 3200,
        };
        let mut old = vec![VERSION];
        ciborium::into_writer(&legacy, &mut old).unwrap();
        let OutboxRecord::Samples { machine, sensor, journal_pos, t0_ms, rate_hz, n, .. } =
            samples()
        else {
            unreachable!()
        };
        let rec =
            OutboxRecord::Samples { machine, sensor, journal_pos, t0_ms, rate_hz, n, frame: None };
        assert_eq!(OutboxRecord::decode(&old), Ok(rec.clone()));
        assert_eq!(rec.encode(), old, "no frame: the bytes an older build wrote and reads");
    }

    #[test]
    fn json_is_a_byte_string_and_records_of_older_stores_still_decode() {
        let json = br#"{"event_id":"gw.s1.3","value":0.25}"#.to_vec();
        let rec = OutboxRecord::Event {
            machine: "press-7".into(),
            sensor: "s1".into(),
            seq: 3,
            event_id: "gw.s1.3".into(),
            json: json.clone(),
        };
        let new = rec.encode();
        // The JSON's bytes appear as they are: a byte string, not an array of integers.
        assert!(new.windows(json.len()).any(|w| w == json.as_slice()));
        let legacy = Legacy::Event {
            machine: "press-7".into(),
            sensor: "s1".into(),
            seq: 3,
            event_id: "gw.s1.3".into(),
            json: json.clone(),
        };
        let mut old = vec![VERSION];
        ciborium::into_writer(&legacy, &mut old).unwrap();
        assert!(old.len() > new.len() + json.len() / 2, "{} vs {}", old.len(), new.len());
        assert_eq!(OutboxRecord::decode(&old), Ok(rec));
    }

    #[test]
    fn damaged_values_are_errors_not_panics() {
        let good = samples().encode();
        assert!(OutboxRecord::decode(&[]).is_err());
        assert!(OutboxRecord::decode(&[9, 1, 2]).unwrap_err().0.contains("version 9"));
        assert!(OutboxRecord::decode(&good[..good.len() / 2]).is_err());
    }

    #[test]
    fn gap_notice_json_names_range_and_reason() {
        let g = GapNotice {
            machine: "m".into(),
            sensor: "s".into(),
            range: GapRange::Samples { from_ms: 1000, to_ms: 2000 },
            reason: "shed".into(),
            declared_at_ms: 3000,
        };
        let v: serde_json::Value = serde_json::from_slice(&g.to_json()).unwrap();
        assert_eq!(v["range"]["kind"], "samples");
        assert_eq!(v["range"]["from_ms"], 1000);
        assert_eq!(v["reason"], "shed");
    }
}
