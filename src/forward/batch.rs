//! Turns the record at the head of a stream into PUBLISH payloads: the events of one sensor in
//! the stream's buffer (up to a gap notice of that sensor) batched into one `{"events": [...]}`, raw samples split into frames that fit, oversized
//! records handled so that none can loop. Pure: the raw samples of a record are read beforehand.

use std::collections::VecDeque;

use super::payload::{
    alert_payload, event_batch, event_cost, oversized_event_gap, payload_limit, sample_frames,
    BATCH_BASE,
};
use super::request::RawSamples;
use super::session_config::SessionConfig;
use crate::records::outbox::OutboxRecord;
use crate::records::samples_codec::split;

/// PUBLISHes of events that fit in the byte window (`inflight_bytes`) together: an events batch
/// is at most this share of it. Whole windows of one or two batches made a drain wait for each
/// PUBACK in turn (a round trip per window); several smaller batches keep the link busy while
/// the first are acknowledged, and what waits ahead of an alert is no larger.
pub(super) const PIPELINE: usize = 8;

/// One PUBLISH's content and the records it completes.
#[derive(Debug)]
pub(super) struct Item {
    pub(super) topic_suffix: String,
    pub(super) payload: Vec<u8>,
    pub(super) seqs: Vec<u64>,
    /// `(record, number of PUBLISHes)` when one record is split over several.
    pub(super) part_of: Option<(u64, usize)>,
}

/// What [`next_payloads`] took from the stream.
#[derive(Debug, Default)]
pub(super) struct Taken {
    pub(super) items: Vec<Item>,
    /// Records taken (the pace counts records, not PUBLISHes).
    pub(super) records: usize,
    /// Records that cannot be published and leave the outbox with an error logged.
    pub(super) unpublishable: Vec<u64>,
}

fn item(topic_suffix: String, payload: Vec<u8>, seq: u64) -> Item {
    Item { topic_suffix, payload, seqs: vec![seq], part_of: None }
}

/// One record taken, at trace level inside the forward stage's span: its outbox sequence and
/// what the record itself names (no payload is decoded for it).
fn trace_record(seq: u64, rec: &OutboxRecord) {
    match rec {
        OutboxRecord::Event { event_id, .. } => tracing::trace!(seq, %event_id, "event"),
        OutboxRecord::Samples { journal_pos, .. } => tracing::trace!(seq, journal_pos, "samples"),
        OutboxRecord::Alert { alert_id, revision, .. } => {
            tracing::trace!(seq, %alert_id, revision, "alert")
        }
        OutboxRecord::Gap(_) => tracing::trace!(seq, "gap"),
    }
}

/// Takes the head record of `queue` (with the events batched behind it, at most `budget` records
/// in all) and returns its PUBLISHes. `queue` must not be empty for anything to happen. When the
/// head is a `Samples` record, `samples` are its raw samples (`None`: gone from the journal).
pub(super) fn next_payloads(
    queue: &mut VecDeque<(u64, OutboxRecord)>,
    replayed: bool,
    budget: usize,
    cfg: &SessionConfig,
    samples: Option<RawSamples>,
    now_ms: i64,
) -> Taken {
    let mut taken = Taken::default();
    let Some((seq, rec)) = queue.pop_front() else { return taken };
    trace_record(seq, &rec);
    taken.records = 1;
    let suffix = rec.topic_suffix();
    let limit = payload_limit(cfg.max_packet, &format!("{}/{suffix}", cfg.topic_root));
    match rec {
        OutboxRecord::Alert { alert_id, revision, json, .. } => match alert_payload(&json, limit) {
            Some(p) => taken.items.push(item(suffix, p, seq)),
            None => {
                tracing::error!(
                    seq, %alert_id, revision, bytes = json.len(), limit,
                    "alert does not fit the broker's maximum packet even with `also` emptied: \
                     not published, removed from the outbox (raise [mqtt] max_packet)"
                );
                taken.unpublishable.push(seq);
            }
        },
        OutboxRecord::Gap(g) => taken.items.push(item(suffix, g.to_json(), seq)),
        OutboxRecord::Samples { journal_pos, .. } => match samples {
            None => {
                tracing::warn!(seq, journal_pos, "raw samples no longer in the journal: skipped");
                taken.unpublishable.push(seq);
            }
            Some(s) => {
                let frames = match s {
                    RawSamples::Parsed(s) => sample_frames(&s, limit),
                    RawSamples::Encoded(b) => split(&b, limit).unwrap_or_else(|e| {
                        tracing::error!(seq, journal_pos, %e, "encoded frame does not split");
                        Vec::new()
                    }),
                };
                let parts = frames.len();
                match parts {
                    0 => {
                        tracing::error!(seq, journal_pos, limit, "no sample fits a packet");
                        taken.unpublishable.push(seq);
                    }
                    1 => {
                        taken.items.extend(frames.into_iter().map(|f| item(suffix.clone(), f, seq)))
                    }
                    _ => taken.items.extend(frames.into_iter().map(|payload| Item {
                        topic_suffix: suffix.clone(),
                        payload,
                        seqs: Vec::new(),
                        part_of: Some((seq, parts)),
                    })),
                }
            }
        },
        OutboxRecord::Event { machine, sensor, json, seq: event_seq, .. } => {
            let mut cost = BATCH_BASE + event_cost(&json, replayed);
            if cost > limit {
                tracing::error!(seq, %machine, %sensor, bytes = json.len(), limit,
                    "event does not fit the broker's maximum packet: a gap notice replaces it");
                let payload = oversized_event_gap(&machine, &sensor, event_seq, now_ms);
                taken.items.push(item(format!("gaps/{sensor}"), payload, seq));
                return taken;
            }
            // A batch fills at most a share of the byte window, so that several PUBLISHes are in
            // flight within it; one event always goes, alone if need be.
            let batch_limit = limit.min(cfg.inflight_bytes / PIPELINE);
            let mut seqs = vec![seq];
            let mut bodies = vec![json];
            let mut picked = Vec::new();
            for (i, (s, r)) in queue.iter().enumerate() {
                if seqs.len() >= cfg.batch_events.min(budget) {
                    break;
                }
                let same = |m: &str, se: &str| m == machine && se == sensor;
                match r {
                    OutboxRecord::Event { machine: m, sensor: se, json: j, .. } if same(m, se) => {
                        let c = event_cost(j, replayed);
                        if cost + c > batch_limit {
                            break;
                        }
                        cost += c;
                        trace_record(*s, r);
                        seqs.push(*s);
                        bodies.push(j.clone());
                        picked.push(i);
                    }
                    // Raw samples go on a topic of their own: events batch across them. A gap
                    // notice names event `seq`s, so it keeps its place between them.
                    OutboxRecord::Gap(g) if same(&g.machine, &g.sensor) => break,
                    _ => {}
                }
            }
            // `picked` is ascending: one pass removes them all.
            let mut i = 0;
            queue.retain(|_| {
                let keep = picked.binary_search(&i).is_err();
                i += 1;
                keep
            });
            taken.records = seqs.len();
            let payload = event_batch(bodies.iter().map(|b| b.as_slice()), replayed);
            taken.items.push(Item { topic_suffix: suffix, payload, seqs, part_of: None });
        }
    }
    taken
}
