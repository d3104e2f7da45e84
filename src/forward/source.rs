//! What the forwarder needs from the store, as a small trait: the daemon passes its store
//! (`Mutex<Store>`), unit tests an in-memory [`MemorySource`].

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::ledger::{LedgerEntry, LedgerRecord};
use crate::outbox::OutboxRecord;
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

/// The outbox as the forwarder sees it.
pub trait OutboxSource: Send + Sync {
    /// At most `limit` pending records with sequence `> after`, in sequence order.
    fn pending(&self, after: u64, limit: usize) -> Result<Vec<(u64, OutboxRecord)>, SourceError>;
    /// The sequence the next outbox record will get: records below it exist now or were acked.
    fn next_seq(&self) -> Result<u64, SourceError>;
    /// The raw samples of journal record `journal_pos` (`None` when it is gone: truncated).
    fn samples(&self, journal_pos: u64) -> Result<Option<SamplesRecord>, SourceError>;
    /// Ledgers `Published` for `published` (records whose PUBLISH was written since the last
    /// call), then removes the acknowledged records `acked` with an `Acknowledged` ledger record,
    /// durably (one commit). Either list may be empty.
    fn ack(&self, published: &[u64], acked: &[u64], at_ms: i64) -> Result<(), SourceError>;
}

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

impl OutboxSource for Mutex<Store> {
    fn pending(&self, after: u64, limit: usize) -> Result<Vec<(u64, OutboxRecord)>, SourceError> {
        let raw = self.lock().map_err(|_| SourceError::LockPoisoned)?.outbox_after(after, limit)?;
        raw.into_iter()
            .map(|(seq, b)| {
                OutboxRecord::decode(&b)
                    .map(|r| (seq, r))
                    .map_err(|e| SourceError::BadRecord { seq, what: e.to_string() })
            })
            .collect()
    }

    fn next_seq(&self) -> Result<u64, SourceError> {
        Ok(self.lock().map_err(|_| SourceError::LockPoisoned)?.next_outbox_seq())
    }

    fn samples(&self, journal_pos: u64) -> Result<Option<SamplesRecord>, SourceError> {
        // The line is parsed after the lock is released: the pipeline and the acknowledgement
        // commits do not wait for the float parsing.
        let store = self.lock().map_err(|_| SourceError::LockPoisoned)?;
        let record = store.journal_from(journal_pos).next().transpose()?;
        drop(store);
        match record {
            Some((pos, _at, line)) if pos == journal_pos => samples_of(pos, &line).map(Some),
            _ => Ok(None),
        }
    }

    fn ack(&self, published: &[u64], acked: &[u64], at_ms: i64) -> Result<(), SourceError> {
        let mut store = self.lock().map_err(|_| SourceError::LockPoisoned)?;
        Ok(store.outbox_ack_many(acked, &ack_ledger(published, acked, at_ms))?)
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
        })
    }
}
