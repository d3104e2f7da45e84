//! For unit tests: an in-memory outbox and journal that answers the session core's requests as
//! `fetch.rs` does against the store.

use std::collections::BTreeMap;

use super::request::{Fetched, Next, Publish, RawSamples, Read, Stream, Write, Written};
use super::session::Session;
use crate::records::outbox::OutboxRecord;
use crate::trace::SamplesRecord;

#[derive(Debug)]
pub(super) struct OutboxModel {
    records: BTreeMap<u64, OutboxRecord>,
    next: u64,
    journal: BTreeMap<u64, SamplesRecord>,
    /// The [`Write::Apply`]s carried out, in order: `(published, acked)`.
    pub(super) applied: Vec<(Vec<u64>, Vec<u64>)>,
    /// Records were pushed since [`OutboxModel::take_grew`] last said so.
    grew: bool,
    /// Reads of live records answered.
    pub(super) live_reads: std::cell::Cell<usize>,
}

impl OutboxModel {
    pub(super) fn new() -> Self {
        OutboxModel {
            records: BTreeMap::new(),
            next: 1,
            journal: BTreeMap::new(),
            applied: Vec::new(),
            grew: false,
            live_reads: Default::default(),
        }
    }

    /// Adds a record; returns its sequence.
    pub(super) fn push(&mut self, rec: OutboxRecord) -> u64 {
        let seq = self.next;
        self.records.insert(seq, rec);
        self.next += 1;
        self.grew = true;
        seq
    }

    /// Whether records were pushed since the last call: what the pipeline announces to the
    /// forwarder after a checkpoint.
    pub(super) fn take_grew(&mut self) -> bool {
        std::mem::take(&mut self.grew)
    }

    pub(super) fn put_samples(&mut self, journal_pos: u64, s: SamplesRecord) {
        self.journal.insert(journal_pos, s);
    }

    /// Sequences still pending.
    pub(super) fn pending_seqs(&self) -> Vec<u64> {
        self.records.keys().copied().collect()
    }

    pub(super) fn read(&self, read: &Read) -> Fetched {
        match *read {
            Read::NextSeq => Fetched::NextSeq(self.next),
            Read::Records { stream, after, limit } => {
                if stream == Stream::Live {
                    self.live_reads.set(self.live_reads.get() + 1);
                }
                let page = self.records.range(after.saturating_add(1)..).take(limit);
                let page: Vec<(u64, &OutboxRecord)> = page.map(|(s, r)| (*s, r)).collect();
                let last = page.last().map(|(s, _)| *s);
                let records = page.into_iter().filter(|(_, r)| stream.holds(r));
                let records = records.map(|(s, r)| (s, r.clone())).collect();
                Fetched::Records { records, last }
            }
            Read::Samples { journal_pos, .. } => {
                Fetched::Samples(self.journal.get(&journal_pos).cloned().map(RawSamples::Parsed))
            }
        }
    }

    pub(super) fn write(&mut self, write: &Write) -> Written {
        match write {
            Write::Apply { published, acked } => {
                for s in acked {
                    self.records.remove(s);
                }
                self.applied.push((published.clone(), acked.clone()));
                Written::Applied
            }
            Write::Sync => Written::Synced,
        }
    }

    /// Carries out what `next` asks, feeding the session each answer (and polling it after each
    /// write, as the shell does), until it asks for nothing more; returns the PUBLISHes.
    pub(super) fn serve(&mut self, s: &mut Session, next: Next, now: i64) -> Vec<Publish> {
        let mut next = next;
        let mut out = Vec::new();
        loop {
            out.append(&mut next.publishes);
            if let Some(r) = next.read.take() {
                assert_eq!(next.write, None, "writes are asked for between rounds");
                next = s.feed(self.read(&r), now);
            } else if let Some(w) = next.write.take() {
                let done = self.write(&w);
                s.written(done, now);
                next = s.poll(now);
            } else {
                return out;
            }
        }
    }

    /// Carries out the session's last writes after a connection ended ([`Session::flush`]).
    pub(super) fn flush(&mut self, s: &mut Session, now: i64) {
        for w in s.flush() {
            let done = self.write(&w);
            s.written(done, now);
        }
    }
}
