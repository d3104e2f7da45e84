//! What the forwarder needs from the store, as a small trait: the daemon passes its store
//! (`RwLock<Store>`), unit tests an in-memory [`MemorySource`].
//!
//! Reads of what is urgent (live records, where a new alert arrives, and the backlog's alerts)
//! take the store's lock with `read_recursive`: they join the shared hold of a commit in
//! progress even while a writer waits, so a record the decide stage has just applied is read
//! and published while its commit runs. Reads of the backlog's events and raw samples take it
//! with a fair `read`, which waits behind a waiting writer: a drain's stream of reads does not
//! keep the pipeline's appends and checkpoints (nor our own acknowledgements) waiting for the
//! lock. Acknowledgements take the lock exclusively and so wait for that commit: nothing is
//! removed from the outbox before it is durable.

use std::collections::BTreeMap;
use std::sync::Mutex;

use parking_lot::RwLock;

use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::records::outbox::{Bulk, OutboxRecord};
use crate::store::{Store, StoreError};
use crate::trace::parse::parse_line;
use crate::trace::{Arrival, SamplesRecord};

/// Why the forwarder could not read or acknowledge outbox records.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("outbox record {seq}: {what}")]
    BadRecord { seq: u64, what: String },
    #[error("journal record {journal_pos}, named by an outbox samples record: {what}")]
    BadSamples { journal_pos: u64, what: String },
    #[error("the store's lock is poisoned (a thread panicked while holding it)")]
    LockPoisoned,
}

/// The lanes a connection's backlog drains in, one after the other: alerts, then events and gap
/// notices, then raw samples (`Session` reads each with its own cursor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Alerts,
    /// Events and gap notices: small, and what alerts are reconciled with.
    Events,
    /// Raw samples: the bulk of a backlog, sent once its events are.
    Samples,
}

impl Lane {
    /// The lane of a decoded record.
    pub fn of(rec: &OutboxRecord) -> Lane {
        match rec {
            OutboxRecord::Alert { .. } => Lane::Alerts,
            OutboxRecord::Event { .. } | OutboxRecord::Gap(_) => Lane::Events,
            OutboxRecord::Samples { .. } => Lane::Samples,
        }
    }

    /// Whether stored bytes may hold a record of this lane: false only when their first bytes
    /// say they are an event or raw samples of another lane ([`OutboxRecord::peek_bulk`]);
    /// anything else is decoded and then sorted by [`Lane::of`].
    pub fn may_hold(self, bytes: &[u8]) -> bool {
        matches!(
            (self, OutboxRecord::peek_bulk(bytes)),
            (_, None) | (Lane::Events, Some(Bulk::Event)) | (Lane::Samples, Some(Bulk::Samples))
        )
    }
}

/// The records of one lane found by [`OutboxSource::pending_in`] and the last sequence it
/// scanned (`None`: nothing pending after `after`).
pub type LaneScan = (Vec<(u64, OutboxRecord)>, Option<u64>);

/// The outbox as the forwarder sees it.
pub trait OutboxSource: Send + Sync {
    /// At most `limit` pending records with sequence `> after`, in sequence order.
    fn pending(&self, after: u64, limit: usize) -> Result<Vec<(u64, OutboxRecord)>, SourceError>;
    /// The records of `lane` among the next `limit` pending records with sequence `> after`, in
    /// sequence order, and the last sequence scanned.
    fn pending_in(&self, lane: Lane, after: u64, limit: usize) -> Result<LaneScan, SourceError> {
        let page = self.pending(after, limit)?;
        let last = page.last().map(|(s, _)| *s);
        Ok((page.into_iter().filter(|(_, r)| Lane::of(r) == lane).collect(), last))
    }
    /// The sequence the next outbox record will get: records below it exist now or were acked.
    fn next_seq(&self) -> Result<u64, SourceError>;
    /// The raw samples of journal record `journal_pos` (`None` when it is gone: truncated).
    fn samples(&self, journal_pos: u64) -> Result<Option<SamplesRecord>, SourceError>;
    /// Ledgers `Published` for `published` (records whose PUBLISH was written since the last
    /// call), then removes the acknowledged records `acked` with an `Acknowledged` ledger record.
    /// Either list may be empty. Not durable yet: the store's next commit makes it so (a
    /// checkpoint's, or [`OutboxSource::sync`]); a crash before loses it whole, and the records
    /// are sent again (at least once).
    fn ack(&self, published: &[u64], acked: &[u64], at_ms: i64) -> Result<(), SourceError>;
    /// Makes what [`OutboxSource::ack`] applied durable, unless a commit since already has: one
    /// fsync at most. Returns whether it committed.
    fn sync(&self) -> Result<bool, SourceError>;
}

/// Removals applied under one hold of the store's lock (about 3 ms of sled work).
const ACK_CHUNK: usize = 512;

/// `Published` then `Acknowledged`, each only when it names a record.
fn ack_ledger(published: &[u64], acked: &[u64], at_ms: i64) -> Vec<LedgerRecord> {
    let p =
        (!published.is_empty()).then(|| LedgerEntry::Published { outbox_seqs: published.to_vec() });
    let a = (!acked.is_empty()).then(|| LedgerEntry::Acknowledged { outbox_seqs: acked.to_vec() });
    p.into_iter().chain(a).map(|e| LedgerRecord::new(at_ms, e)).collect()
}

/// A journal line that must be a `samples` arrival.
fn samples_of(journal_pos: u64, line: &[u8]) -> Result<SamplesRecord, SourceError> {
    match parse_line(line) {
        Ok(l) => match l.arrival {
            Arrival::Samples(s) => Ok(s),
            _ => Err(SourceError::BadSamples { journal_pos, what: "not a samples line".into() }),
        },
        Err((_, r)) => Err(SourceError::BadSamples { journal_pos, what: r.to_string() }),
    }
}

impl OutboxSource for RwLock<Store> {
    fn pending(&self, after: u64, limit: usize) -> Result<Vec<(u64, OutboxRecord)>, SourceError> {
        let raw = self.read_recursive().outbox_after(after, limit)?;
        raw.into_iter()
            .map(|(seq, b)| {
                OutboxRecord::decode(&b)
                    .map(|r| (seq, r))
                    .map_err(|e| SourceError::BadRecord { seq, what: e.to_string() })
            })
            .collect()
    }

    fn pending_in(&self, lane: Lane, after: u64, limit: usize) -> Result<LaneScan, SourceError> {
        // Events and raw samples of other lanes are told by their bytes and not decoded (a
        // backlog of an hour is scanned once per lane and connection).
        let store = match lane {
            Lane::Alerts => self.read_recursive(),
            Lane::Events | Lane::Samples => self.read(),
        };
        let (raw, last) = store.outbox_scan(after, limit, |b| lane.may_hold(b))?;
        drop(store);
        let mut found = Vec::new();
        for (seq, b) in raw {
            match OutboxRecord::decode(&b) {
                Ok(r) if Lane::of(&r) == lane => found.push((seq, r)),
                Ok(_) => {}
                Err(e) => return Err(SourceError::BadRecord { seq, what: e.to_string() }),
            }
        }
        Ok((found, last))
    }

    fn next_seq(&self) -> Result<u64, SourceError> {
        Ok(self.read_recursive().next_outbox_seq())
    }

    fn samples(&self, journal_pos: u64) -> Result<Option<SamplesRecord>, SourceError> {
        // Backlog: a fair read. The line is parsed after the lock is released: the pipeline and
        // the acknowledgement commits do not wait for the float parsing.
        let store = self.read();
        let record = store.journal_from(journal_pos).next().transpose()?;
        drop(store);
        match record {
            Some((pos, _at, line)) if pos == journal_pos => samples_of(pos, &line).map(Some),
            _ => Ok(None),
        }
    }

    fn ack(&self, published: &[u64], acked: &[u64], at_ms: i64) -> Result<(), SourceError> {
        // sled takes ~6 µs per removal: 4096 of them held the store's lock for ~25 ms, and an
        // alert's checkpoint waited that long. Each chunk is one batch with its own ledger
        // record (so the ledger still describes every batch exactly); the next commit makes all
        // durable. A crash before leaves an applied prefix or nothing: sent again, at least once.
        let mut published = published;
        for chunk in acked.chunks(ACK_CHUNK) {
            let ledger = ack_ledger(published, chunk, at_ms);
            self.write().outbox_ack_uncommitted(chunk, &ledger)?;
            published = &[];
        }
        if !published.is_empty() {
            self.write().outbox_ack_uncommitted(&[], &ack_ledger(published, &[], at_ms))?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<bool, SourceError> {
        // Shared: reads go on during the fsync, writes wait for it.
        Ok(self.read().commit_if_needed()?)
    }
}

/// An in-memory outbox and journal, for tests and benchmarks of the session core.
#[derive(Debug, Default)]
pub struct MemorySource {
    inner: Mutex<Memory>,
}

#[derive(Debug, Default)]
struct Memory {
    outbox: BTreeMap<u64, OutboxRecord>,
    next: u64,
    journal: BTreeMap<u64, SamplesRecord>,
    ledger: Vec<LedgerRecord>,
    /// Acknowledgements applied since the last sync.
    unsynced: bool,
}

impl MemorySource {
    pub fn new() -> Self {
        MemorySource { inner: Mutex::new(Memory { next: 1, ..Memory::default() }) }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Memory) -> T) -> Result<T, SourceError> {
        let mut m = self.inner.lock().map_err(|_| SourceError::LockPoisoned)?;
        Ok(f(&mut m))
    }

    /// Adds a record; returns its sequence.
    pub fn push(&self, rec: OutboxRecord) -> Result<u64, SourceError> {
        self.with(|m| {
            let seq = m.next;
            m.outbox.insert(seq, rec);
            m.next += 1;
            seq
        })
    }

    pub fn put_samples(&self, journal_pos: u64, s: SamplesRecord) -> Result<(), SourceError> {
        self.with(|m| drop(m.journal.insert(journal_pos, s)))
    }

    /// Sequences still pending.
    pub fn pending_seqs(&self) -> Result<Vec<u64>, SourceError> {
        self.with(|m| m.outbox.keys().copied().collect())
    }

    /// Ledger records written by [`OutboxSource::ack`].
    pub fn ledger(&self) -> Result<Vec<LedgerRecord>, SourceError> {
        self.with(|m| m.ledger.clone())
    }
}

impl OutboxSource for MemorySource {
    fn pending(&self, after: u64, limit: usize) -> Result<Vec<(u64, OutboxRecord)>, SourceError> {
        self.with(|m| {
            let from = after.saturating_add(1);
            m.outbox.range(from..).take(limit).map(|(s, r)| (*s, r.clone())).collect()
        })
    }

    fn next_seq(&self) -> Result<u64, SourceError> {
        self.with(|m| m.next)
    }

    fn samples(&self, journal_pos: u64) -> Result<Option<SamplesRecord>, SourceError> {
        self.with(|m| m.journal.get(&journal_pos).cloned())
    }

    fn ack(&self, published: &[u64], acked: &[u64], at_ms: i64) -> Result<(), SourceError> {
        self.with(|m| {
            for s in acked {
                m.outbox.remove(s);
            }
            m.ledger.extend(ack_ledger(published, acked, at_ms));
            m.unsynced |= !(published.is_empty() && acked.is_empty());
        })
    }

    fn sync(&self) -> Result<bool, SourceError> {
        self.with(|m| std::mem::take(&mut m.unsynced))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::StoreOptions;

    #[test]
    fn a_long_ack_is_applied_in_chunks_ledgered_exactly_and_made_durable_by_sync() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.append_journal(&[(1, b"x".to_vec())]).unwrap();
        let n = 2 * ACK_CHUNK as u64 + 7;
        let recs: Vec<Vec<u8>> = (0..n + 1).map(|i| i.to_be_bytes().to_vec()).collect();
        s.checkpoint(1, b"d", &recs).unwrap();
        let ledger_from = s.next_ledger_seq();
        let src = RwLock::new(s);
        let acked: Vec<u64> = (1..=n).collect();
        src.ack(&[1, 2, 3], &acked, 42).unwrap();
        assert!(src.read().needs_commit(), "applied, not yet durable");
        assert!(src.sync().unwrap(), "the sync commits");
        assert!(!src.read().needs_commit());
        assert!(!src.sync().unwrap(), "nothing left to commit: no fsync");
        drop(src);
        // Reopened: everything the ack named is gone for good, the one record left is not.
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        assert_eq!(
            s.outbox_after(0, 10).unwrap().into_iter().map(|r| r.0).collect::<Vec<_>>(),
            [n + 1]
        );
        let entries: Vec<LedgerEntry> =
            s.ledger_from(ledger_from).map(|r| r.unwrap().1.entry).collect();
        assert_eq!(entries[0], LedgerEntry::Published { outbox_seqs: vec![1, 2, 3] });
        let mut ledgered = Vec::new();
        for e in &entries[1..] {
            match e {
                LedgerEntry::Acknowledged { outbox_seqs } => {
                    assert!(outbox_seqs.len() <= ACK_CHUNK);
                    ledgered.extend_from_slice(outbox_seqs);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(entries.len(), 1 + 3, "three chunks");
        assert_eq!(ledgered, acked, "every acknowledged record ledgered once, in order");
    }

    /// A store in `dir` with one journal line, and an alert record not yet in its outbox.
    fn store_and_alert(dir: &std::path::Path) -> (Store, OutboxRecord) {
        let mut s = Store::open(dir, StoreOptions::default()).unwrap();
        s.append_journal(&[(1, b"x".to_vec())]).unwrap();
        let alert = OutboxRecord::Alert {
            machine: "m".into(),
            alert_id: "a".into(),
            revision: 1,
            json: b"{}".to_vec(),
        };
        (s, alert)
    }

    #[test]
    fn a_lane_scan_returns_its_records_only_and_how_far_it_read() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, alert) = store_and_alert(dir.path());
        let event = OutboxRecord::Event {
            machine: "m".into(),
            sensor: "s".into(),
            seq: 1,
            event_id: "g.s.1".into(),
            json: b"{}".to_vec(),
        };
        let gap = OutboxRecord::Gap(crate::records::outbox::GapNotice {
            machine: "m".into(),
            sensor: "s".into(),
            range: crate::records::outbox::GapRange::Events { from_seq: 2, to_seq: 3 },
            reason: "shed".into(),
            declared_at_ms: 1,
        });
        let samples = OutboxRecord::Samples {
            machine: "m".into(),
            sensor: "s".into(),
            journal_pos: 1,
            t0_ms: 0,
            rate_hz: 10.0,
            n: 3,
        };
        let recs = [&event, &alert, &gap, &samples, &alert].map(OutboxRecord::encode);
        s.checkpoint(1, b"d", &recs).unwrap();
        let src = RwLock::new(s);
        let memory = MemorySource::new();
        for r in [&event, &alert, &gap, &samples, &alert] {
            memory.push(r.clone()).unwrap();
        }
        for src in [&src as &dyn OutboxSource, &memory] {
            let scan = |lane, after, limit| src.pending_in(lane, after, limit).unwrap();
            assert_eq!(scan(Lane::Alerts, 0, 4), (vec![(2, alert.clone())], Some(4)));
            assert_eq!(scan(Lane::Alerts, 4, 4), (vec![(5, alert.clone())], Some(5)));
            assert_eq!(scan(Lane::Alerts, 5, 4), (vec![], None));
            assert_eq!(
                scan(Lane::Events, 0, 9),
                (vec![(1, event.clone()), (3, gap.clone())], Some(5))
            );
            assert_eq!(scan(Lane::Samples, 1, 2), (vec![], Some(3)));
            assert_eq!(scan(Lane::Samples, 3, 2), (vec![(4, samples.clone())], Some(5)));
        }
    }

    /// A checkpoint commit holds the lock shared while an acknowledgement (or the pipeline's next
    /// append) waits for it exclusively: a read of new records joins the commit at once, a
    /// backlog read waits until the writer has had the lock.
    #[test]
    fn backlog_reads_let_a_waiting_writer_go_first_and_reads_of_new_records_do_not_wait() {
        use std::sync::{mpsc, Arc};
        use std::time::Duration;
        let dir = tempfile::tempdir().unwrap();
        let (mut s, alert) = store_and_alert(dir.path());
        s.checkpoint(1, b"d", &[alert.encode()]).unwrap();
        let src = Arc::new(RwLock::new(s));
        let commit = src.read();
        let (done, finished) = mpsc::channel();
        let writer = {
            let (src, done) = (src.clone(), done.clone());
            std::thread::spawn(move || {
                let _exclusive = src.write();
                done.send("write").unwrap();
            })
        };
        while !src.is_locked_exclusive() {
            std::thread::yield_now(); // the writer now waits for the commit's shared hold
        }
        let reader = |what: &'static str, read: fn(&RwLock<Store>)| {
            let (src, done) = (src.clone(), done.clone());
            std::thread::spawn(move || {
                read(&src);
                done.send(what).unwrap();
            })
        };
        let urgent = [
            reader("live", |s| drop(s.pending(0, 9).unwrap())),
            reader("alerts", |s| drop(s.pending_in(Lane::Alerts, 0, 9).unwrap())),
            reader("next_seq", |s| assert!(s.next_seq().unwrap() > 1)),
        ];
        let mut joined: Vec<&str> =
            (0..3).map(|_| finished.recv_timeout(Duration::from_secs(10)).unwrap()).collect();
        joined.sort_unstable();
        assert_eq!(joined, ["alerts", "live", "next_seq"], "joined the commit's hold");
        let backlog = [
            reader("events", |s| drop(s.pending_in(Lane::Events, 0, 9).unwrap())),
            reader("samples", |s| drop(s.samples(1))),
        ];
        // A wrong (recursive) backlog read would be done in microseconds.
        assert!(finished.recv_timeout(Duration::from_millis(200)).is_err(), "backlog waits");
        drop(commit);
        let order: Vec<&str> = (0..3).map(|_| finished.recv().unwrap()).collect();
        assert_eq!(order[0], "write", "the writer went first: {order:?}");
        for t in urgent.into_iter().chain(backlog).chain([writer]) {
            t.join().unwrap();
        }
    }

    #[test]
    fn a_checkpoint_commit_makes_applied_acks_durable_and_the_sync_skips_its_fsync() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        let range = s.append_journal(&[(1, b"a".to_vec()), (2, b"b".to_vec())]).unwrap();
        s.checkpoint(range.start, b"d", &[b"r1".to_vec(), b"r2".to_vec()]).unwrap();
        let src = RwLock::new(s);
        src.ack(&[1], &[1], 5).unwrap();
        let mut s = src.into_inner();
        assert!(s.needs_commit());
        s.checkpoint(range.end - 1, b"d", &[]).unwrap();
        assert!(!s.needs_commit(), "the checkpoint's commit carried the acknowledgement");
        let src = RwLock::new(s);
        assert!(!src.sync().unwrap(), "no fsync of its own");
    }
}
