//! Payload bytes for each topic (docs/contracts.md section 10), sized against the broker's maximum
//! packet size. Pure.

use crate::records::outbox::{GapNotice, GapRange};
use crate::records::samples_codec::{encode_block, split};
use crate::trace::SamplesRecord;

/// Topic suffix of the retained status.
pub const STATUS: &str = "status";
/// The retained status payload while connected; the last will says `offline`.
pub const ONLINE: &[u8] = br#"{"state":"online"}"#;
pub const OFFLINE: &[u8] = br#"{"state":"offline"}"#;

/// Bytes of a QoS 1 PUBLISH that are not payload: fixed header (at most 5), topic length (2),
/// the topic, packet id (2).
pub(super) fn publish_overhead(topic: &str) -> usize {
    5 + 2 + topic.len() + 2
}

/// The largest payload a PUBLISH on `topic` may carry under `max_packet`.
pub(super) fn payload_limit(max_packet: usize, topic: &str) -> usize {
    max_packet.saturating_sub(publish_overhead(topic))
}

const REPLAYED: &[u8] = br#""replayed":true"#;
const BATCH_OPEN: &[u8] = br#"{"events":["#;
const BATCH_CLOSE: &[u8] = b"]}";

/// Size of one event inside a batch: its bytes, the `replayed` key when added, a separator.
pub(super) fn event_cost(json: &[u8], replayed: bool) -> usize {
    json.len() + if replayed { REPLAYED.len() + 1 } else { 0 } + 1
}

/// Size of an empty batch.
pub(super) const BATCH_BASE: usize = BATCH_OPEN.len() + BATCH_CLOSE.len();

/// Appends an event's JSON object, with `"replayed":true` inserted before its closing brace when
/// `replayed` (the original bytes otherwise unchanged).
fn push_event(out: &mut Vec<u8>, json: &[u8], replayed: bool) {
    let body = json.trim_ascii_end();
    match (replayed, body.split_last()) {
        (true, Some((b'}', inner))) => {
            out.extend_from_slice(inner);
            if inner.trim_ascii_end().last() != Some(&b'{') {
                out.push(b',');
            }
            out.extend_from_slice(REPLAYED);
            out.push(b'}');
        }
        _ => out.extend_from_slice(body),
    }
}

/// `{"events": [...]}` of the given events, in the given order.
pub(super) fn event_batch<'a>(
    events: impl IntoIterator<Item = &'a [u8]>,
    replayed: bool,
) -> Vec<u8> {
    let mut out = BATCH_OPEN.to_vec();
    for (i, e) in events.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_event(&mut out, e, replayed);
    }
    out.extend_from_slice(BATCH_CLOSE);
    out
}

/// The gap notice that replaces an event too large for any packet: consumers learn that this
/// `seq` will never arrive, and why.
pub(super) fn oversized_event_gap(machine: &str, sensor: &str, seq: u64, now_ms: i64) -> Vec<u8> {
    GapNotice {
        machine: machine.to_owned(),
        sensor: sensor.to_owned(),
        range: GapRange::Events { from_seq: seq, to_seq: seq },
        reason: "oversized".into(),
        declared_at_ms: now_ms,
    }
    .to_json()
}

/// What to publish for an alert: its bytes when they fit; else the record with `also` emptied,
/// `"also_truncated": N` (how many IDs were removed) added; else `None` (even the evidence alone
/// does not fit: the caller logs and parks it).
pub(super) fn alert_payload(json: &[u8], limit: usize) -> Option<Vec<u8>> {
    if json.len() <= limit {
        return Some(json.to_vec());
    }
    let mut v: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(json).ok()?;
    let n = v.get("also").and_then(|a| a.as_array()).map_or(0, |a| a.len());
    v.insert("also".into(), serde_json::Value::Array(Vec::new()));
    v.insert("also_truncated".into(), n.into());
    let trimmed = serde_json::to_vec(&v).ok()?;
    (trimmed.len() <= limit).then_some(trimmed)
}

/// Raw samples as binary frames of at most `limit` bytes each, in sample order. Empty when not
/// even one sample fits (the caller logs it). The same bytes as [`split`] of the block's encoding
/// that the decide stage keeps beside its line, which is what a drain reads when it can.
pub(super) fn sample_frames(s: &SamplesRecord, limit: usize) -> Vec<Vec<u8>> {
    let axis = s.axis.as_deref().unwrap_or_default();
    let block = encode_block(s.t0_ms, s.rate_hz, s.unit, axis, &s.data);
    split(&block, limit).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Unit;
    use crate::records::samples_codec::{encoded_len, SamplesFrame};

    #[test]
    fn replayed_is_inserted_into_each_event_and_nothing_else_changes() {
        let a = br#"{"event_id":"a","ts_ms":5}"#;
        let b = b"{ }  ";
        let live = event_batch([&a[..], &b[..]], false);
        assert_eq!(live, br#"{"events":[{"event_id":"a","ts_ms":5},{ }]}"#);
        let replayed = event_batch([&a[..], &b[..]], true);
        assert_eq!(
            replayed,
            br#"{"events":[{"event_id":"a","ts_ms":5,"replayed":true},{ "replayed":true}]}"#
        );
        let v: serde_json::Value = serde_json::from_slice(&replayed).unwrap();
        assert_eq!(v["events"][0]["ts_ms"], 5);
        // The cost is an upper bound (no comma is added inside an empty object).
        let bound = BATCH_BASE + event_cost(a, true) + event_cost(b.trim_ascii_end(), true) - 1;
        assert_eq!(replayed.len() + 1, bound);
    }

    #[test]
    fn oversized_alert_is_trimmed_then_refused() {
        let alert = br#"{"alert_id":"x","also":["a1","a2","a3","a4","a5","a6"],"revision":0}"#;
        assert_eq!(alert_payload(alert, 1000).unwrap(), alert.to_vec());
        let t = alert_payload(alert, 60).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&t).unwrap();
        assert_eq!(v["also_truncated"], 6);
        assert_eq!(v["also"], serde_json::json!([]));
        assert_eq!(v["alert_id"], "x");
        assert!(alert_payload(alert, 10).is_none());
    }

    #[test]
    fn samples_split_into_frames_that_fit_and_keep_their_times() {
        let s = SamplesRecord {
            machine: "m".into(),
            sensor: "s".into(),
            t0_ms: 1_000,
            rate_hz: 100.0,
            unit: Unit::G,
            axis: Some("x".into()),
            clock: None,
            data: (0..25).map(f64::from).collect(),
        };
        let frames = sample_frames(&s, encoded_len(1, 10));
        assert_eq!(frames.len(), 3);
        let last = SamplesFrame::decode(&frames[2]).unwrap();
        assert_eq!(last.first_index, 20);
        assert_eq!(last.values, vec![20.0, 21.0, 22.0, 23.0, 24.0]);
        assert_eq!(last.time_ms(0), 1_200.0);
        assert!(frames.iter().all(|f| f.len() <= encoded_len(1, 10)));
        assert!(sample_frames(&s, 20).is_empty());
    }

    #[test]
    fn limit_accounts_for_the_topic() {
        assert_eq!(payload_limit(100, "abc"), 88);
        assert_eq!(payload_limit(5, "abc"), 0);
    }
}
