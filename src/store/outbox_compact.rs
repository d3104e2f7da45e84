//! Compaction of the outbox's old pages, after a shed.
//!
//! During a long outage the outbox keeps every event (never shed) and a shed takes the raw
//! frames from between them: what is left of each checkpoint's page is a few events and the
//! empty entries of the frames, written again plain (`outbox_pages.rs`). A week of such pages is
//! hundreds of thousands of small sled values: sled's size, its time to open and the time to
//! count the outbox at a start all follow their number. So once a shed is done, the pages it
//! wrote are merged: consecutive keys become one page of at most [`page::PAGE_BYTES`] unpacked
//! (the sequences between them empty entries), packed ([`page::PACKED_HOLES`]). Each record
//! keeps its sequence and its bytes; only how they are stored changes, in one batch, so a crash
//! leaves either the old pages or the new ones. A merged page stays small enough unpacked that
//! an acknowledgement writes it again plain, as any other.

use super::page::{self, PAGE_BYTES};
use super::state::{outbox_key, OUTBOX};
use super::{Result, Store, STATE};

/// What a compaction did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    /// Outbox keys read.
    pub keys_before: u64,
    /// Outbox keys they became.
    pub keys_after: u64,
}

/// Pages being merged: the keys they were under and the entries from the first key's sequence
/// on (empty for a removed record or a sequence between two keys).
#[derive(Default)]
struct Merge {
    keys: Vec<u64>,
    first: u64,
    entries: Vec<Vec<u8>>,
    /// The plain page's size so far.
    bytes: usize,
    /// The one key merged holds a packed page (nothing to gain by writing it again).
    packed: bool,
}

impl Merge {
    /// The plain size with `slots` (from sequence `first`) added after the entries so far.
    fn bytes_with(&self, first: u64, slots: &[(u64, &[u8])]) -> usize {
        let between = first.saturating_sub(self.first + self.entries.len() as u64);
        let between = usize::try_from(between).unwrap_or(usize::MAX / 8);
        self.bytes + 4 * between + slots.iter().map(|(_, r)| 4 + r.len()).sum::<usize>()
    }

    fn add(&mut self, key: u64, slots: &[(u64, &[u8])], packed: bool) {
        if self.keys.is_empty() {
            (self.first, self.bytes) = (key, 5);
        }
        self.bytes = self.bytes_with(key, slots);
        self.packed = self.keys.is_empty() && packed;
        while self.first + (self.entries.len() as u64) < key {
            self.entries.push(Vec::new());
        }
        self.entries.extend(slots.iter().map(|(_, r)| r.to_vec()));
        self.keys.push(key);
    }

    /// Adds to `batch` what replaces the merged keys; returns the keys written (0 or 1) and
    /// empties the merge. A lone key is written again only as a plain page that packs.
    fn flush(&mut self, batch: &mut sled::Batch, out: &mut Compacted) {
        let lone = self.keys.len() == 1;
        if !self.keys.is_empty() && !(lone && (self.packed || self.entries.len() == 1)) {
            let plain = page::encode(self.entries.iter().map(Vec::as_slice));
            let value = page::pack(plain);
            if !(lone && value[0] == page::PAGE) {
                for k in &self.keys[1..] {
                    batch.remove(&outbox_key(*k));
                }
                batch.insert(&outbox_key(self.first), value);
                out.keys_after += 1;
                *self = Merge::default();
                return;
            }
        }
        out.keys_after += self.keys.len() as u64;
        *self = Merge::default();
    }
}

impl Store {
    /// Merges the outbox pages under keys `from..=to` (see the module documentation), in one
    /// batch applied to tree `state`; the next commit makes it durable (until then a crash
    /// leaves the pages as they were, which hold the same records).
    pub(super) fn outbox_compact(&self, from: u64, to: u64) -> Result<Compacted> {
        let mut out = Compacted::default();
        let (mut batch, mut merge) = (sled::Batch::default(), Merge::default());
        for kv in self.state.range(outbox_key(from)..=outbox_key(to)) {
            let (k, v) = kv.map_err(self.sled_err("iterate o/ in tree state"))?;
            out.keys_before += 1;
            let unpacked = page::unpack(&v).map_err(|what| self.corrupt(STATE, &k, what))?;
            let slots = page::keyed_slots(OUTBOX, &k, &unpacked)
                .map_err(|what| self.corrupt(STATE, &k, what))?;
            let Some(&(key, _)) = slots.first() else { continue };
            if !merge.keys.is_empty() && merge.bytes_with(key, &slots) > PAGE_BYTES {
                merge.flush(&mut batch, &mut out);
            }
            merge.add(key, &slots, page::packed_totals(&v).is_some());
        }
        merge.flush(&mut batch, &mut out);
        self.state
            .apply_batch(batch)
            .map_err(self.sled_err("apply outbox compaction to tree state"))?;
        self.commits.wrote();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::records::outbox::OutboxRecord;
    use crate::store::page;
    use crate::store::state::OUTBOX;
    use crate::store::{Store, StoreOptions};

    fn pending(s: &Store) -> Vec<(u64, Vec<u8>)> {
        s.outbox_pending().map(|r| r.unwrap()).collect()
    }

    fn keys(s: &Store) -> Vec<u64> {
        s.state
            .scan_prefix(OUTBOX)
            .keys()
            .map(|k| page::key_seq(OUTBOX, &k.unwrap()).unwrap())
            .collect()
    }

    /// Checkpoints of frames and events; the frames acknowledged (as a shed takes them): the
    /// event-only pages left merge into packed pages with holes, every record under its
    /// sequence, the depth read from the headers unchanged, and an acknowledgement afterwards
    /// writes a merged page again as any other.
    #[test]
    fn pages_left_by_a_shed_merge_and_keep_every_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        let event = |i: u64| {
            let event_id = format!("gw.s1.{i}");
            let json = format!(r#"{{"event_id":"{event_id}","machine":"m1","value":0.21}}"#);
            let (machine, sensor) = ("m1".to_string(), "s1".to_string());
            OutboxRecord::Event { machine, sensor, seq: i, event_id, json: json.into_bytes() }
        };
        let frame = |pos: u64| OutboxRecord::Samples {
            machine: "m1".into(),
            sensor: "s1".into(),
            journal_pos: pos,
            t0_ms: 0,
            rate_hz: 3200.0,
            n: 3200,
            frame: None,
        };
        let mut frames = Vec::new();
        for c in 0..40u64 {
            s.append_journal(&[(c as i64, b"x".to_vec())]).unwrap();
            let recs: Vec<Vec<u8>> = (0..8u64)
                .flat_map(|i| [frame(c + 1).encode(), event(c * 8 + i).encode()])
                .collect();
            let first = s.next_outbox;
            frames.extend((0..8).map(|i| first + 2 * i));
            s.checkpoint(c + 1, b"d", &recs).unwrap();
        }
        s.outbox_ack_many(&frames, &[]).unwrap();
        let before = pending(&s);
        let depth = s.outbox_depth().unwrap();
        assert_eq!(before.len(), 320);
        assert_eq!(keys(&s).len(), 40, "one page per checkpoint");
        let last = *keys(&s).last().unwrap();
        let done = s.outbox_compact(0, last).unwrap();
        assert_eq!(done.keys_before, 40);
        assert!(done.keys_after < 10, "{done:?}");
        assert_eq!(keys(&s).len() as u64, done.keys_after);
        assert_eq!(pending(&s), before, "every record, under its sequence");
        assert_eq!(s.outbox_depth().unwrap(), depth, "the depth by the headers");
        let v = s.state.scan_prefix(OUTBOX).values().next().unwrap().unwrap();
        assert_eq!(v[0], page::PACKED_HOLES);
        assert!(page::unpack(&v).unwrap().len() <= page::PAGE_BYTES);
        for seq in [before[0].0, before[5].0, before[319].0] {
            assert!(s.outbox_contains(seq).unwrap());
            assert!(!s.outbox_contains(seq - 1).unwrap(), "a frame's sequence stays empty");
        }
        let acked: Vec<u64> = before[..7].iter().map(|(q, _)| *q).collect();
        s.outbox_ack_many(&acked, &[]).unwrap();
        assert_eq!(pending(&s), before[7..]);
        assert_eq!(s.outbox_depth().unwrap().0, 313);
        let again = s.outbox_compact(0, u64::MAX).unwrap();
        assert!(again.keys_after <= done.keys_after, "{again:?}");
        drop(s);
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.startup_check().unwrap();
        assert_eq!(pending(&s), before[7..], "after a reopen");
    }
}
