//! The `state` tree: checkpoint, outbox and counters, which commit together in one batch.

use super::{checkpoint_parts, decode_u64, Result, Store, STATE};
use crate::records::ledger::LedgerRecord;

pub(super) const CHECKPOINT: &[u8] = b"c/";
pub(super) const OUTBOX: &[u8] = b"o/";
pub(super) const OUTBOX_NEXT: &[u8] = b"n/outbox_next";
pub(super) const JOURNAL_START: &[u8] = b"n/journal_start";
/// Journal positions below this were used (by a store a recovery salvaged from): never reused.
pub(super) const JOURNAL_NEXT: &[u8] = b"n/journal_next";
/// The checkpoint's journal position again, written in every checkpoint batch: a witness a
/// salvage reads when the checkpoint's own value does not decode (`salvage.rs`).
pub(super) const CHECKPOINT_POS: &[u8] = b"n/checkpoint_pos";
/// Written by a salvage that could not keep the checkpoint: the last journal position decided
/// before the damage (`salvage.rs`).
pub(super) const DECIDED_THROUGH: &[u8] = b"n/decided_through";
/// Prefix of each source's last committed position: `n/source/` + u16 BE source index → u64 BE
/// end offset, written in the checkpoint batch beside the checkpoint (which holds the same
/// offsets): a salvage copies these even when the checkpoint is lost, so a source whose lines all
/// left the journal resumes where it was, not from its start.
pub(super) const SOURCE_POS: &[u8] = b"n/source/";
/// What the gateway knows of each sensor (`crate::records::sensors::SensorBook`), written in the
/// checkpoint batch. Not salvaged: it is rebuilt as the sensors send again.
pub(super) const SENSORS: &[u8] = b"n/sensors";

/// The `state` put that records source `source`'s last committed position `end_offset`, for the
/// checkpoint batch ([`Store::apply_checkpoint_with_archive`]).
pub fn source_position_put(source: u16, end_offset: u64) -> (Vec<u8>, Vec<u8>) {
    ([SOURCE_POS, &source.to_be_bytes()[..]].concat(), end_offset.to_be_bytes().to_vec())
}

/// The `state` put that keeps `book` in the checkpoint batch.
pub fn sensor_book_put(book: &crate::records::sensors::SensorBook) -> (Vec<u8>, Vec<u8>) {
    (SENSORS.to_vec(), book.encode())
}

/// A source position's key and value decoded: `(source, end offset)`.
pub(super) fn decode_source_position(key: &[u8], value: &[u8]) -> Option<(u16, u64)> {
    let source = <[u8; 2]>::try_from(key.strip_prefix(SOURCE_POS)?).ok()?;
    let offset = <[u8; 8]>::try_from(value).ok()?;
    Some((u16::from_be_bytes(source), u64::from_be_bytes(offset)))
}

/// The decide stage's state and the journal position it reached (the last position consumed;
/// records after it are replayed on restart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub journal_pos: u64,
    pub decider: Vec<u8>,
}

pub(super) fn outbox_key(seq: u64) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[..2].copy_from_slice(OUTBOX);
    k[2..].copy_from_slice(&seq.to_be_bytes());
    k
}

impl Store {
    /// Commits the decide stage's progress: the checkpoint (`journal_pos`, the last journal
    /// position consumed, and the decider snapshot), the outbox records it adds, and the next
    /// outbox sequence — one batch on tree `state` — then commits. Appends not yet committed are
    /// committed first, so a durable checkpoint never covers records a crash could lose.
    ///
    /// Refused when `journal_pos` is past the last appended record or before the last checkpoint.
    pub fn checkpoint(
        &mut self,
        journal_pos: u64,
        decider: &[u8],
        outbox_adds: &[Vec<u8>],
    ) -> Result<()> {
        self.checkpoint_with_ledger(journal_pos, decider, outbox_adds, &[])
    }

    /// [`Store::checkpoint`] with ledger records in the same batch. Outbox record `i` of
    /// `outbox_adds` gets sequence `next_outbox_seq() + i`, which ledger records may name.
    pub fn checkpoint_with_ledger(
        &mut self,
        journal_pos: u64,
        decider: &[u8],
        outbox_adds: &[Vec<u8>],
        ledger_adds: &[LedgerRecord],
    ) -> Result<()> {
        self.usable()?;
        let none = super::DedupChange::default();
        let r = self.checkpoint_apply(journal_pos, decider, outbox_adds, ledger_adds, &[], &none);
        self.poison_on_error(r)?;
        self.commit()
    }

    /// The sequence the next outbox record gets.
    pub fn next_outbox_seq(&self) -> u64 {
        self.next_outbox
    }

    /// Applies the checkpoint batch, after committing the appends it covers; not durable until
    /// the next commit ([`Store::needs_commit`] is true until then). `puts`: further `state` keys
    /// written in the same batch (archive records, `archive.rs`).
    pub(super) fn checkpoint_apply(
        &mut self,
        journal_pos: u64,
        decider: &[u8],
        outbox_adds: &[Vec<u8>],
        ledger_adds: &[LedgerRecord],
        puts: &[(Vec<u8>, Vec<u8>)],
        dedup: &super::DedupChange,
    ) -> Result<()> {
        if journal_pos >= self.next_journal || journal_pos < self.checkpoint_pos {
            return Err(self.refused(format!(
                "checkpoint at journal position {journal_pos}: must lie in {}..={}",
                self.checkpoint_pos,
                self.next_journal - 1
            )));
        }
        // An empty record would read as one taken out of its page (`page.rs`).
        if let Some(i) = outbox_adds.iter().position(Vec::is_empty) {
            return Err(self.refused(format!("outbox record {i} of the checkpoint is empty")));
        }
        // The journal it covers must be durable first (its raw bytes above all); a later append
        // waiting for its own group commit need not be.
        if !self.commits.journal_durable_through(journal_pos) {
            self.commit()?;
        }
        // The parts the last checkpoint took, from its first value's header.
        let old_parts = self
            .state
            .get(CHECKPOINT)
            .map_err(self.sled_err("read c/ from tree state"))?
            .map_or(0, |v| checkpoint_parts::parts(&v));
        let mut batch = sled::Batch::default();
        checkpoint_parts::write(&mut batch, journal_pos, decider, old_parts);
        batch.insert(CHECKPOINT_POS, &journal_pos.to_be_bytes());
        Store::batch_outbox_adds(&mut batch, self.next_outbox, outbox_adds);
        let seq = self.next_outbox + outbox_adds.len() as u64;
        batch.insert(OUTBOX_NEXT, &seq.to_be_bytes());
        let records = self.batch_outbox_records(&mut batch, outbox_adds.len(), 0);
        let next_ledger = self.batch_ledger(&mut batch, ledger_adds);
        for (k, v) in puts {
            batch.insert(k.as_slice(), v.as_slice());
        }
        dedup.write(&mut batch);
        failpoint!("store::checkpoint::before_apply", crate::store::StoreError);
        self.state
            .apply_batch(batch)
            .map_err(self.sled_err("apply checkpoint batch to tree state"))?;
        self.next_outbox = seq;
        self.set_outbox_records(records);
        self.next_ledger = next_ledger;
        self.checkpoint_pos = journal_pos;
        self.commits.wrote();
        failpoint!("store::checkpoint::after_apply", crate::store::StoreError);
        Ok(())
    }

    /// The last committed checkpoint, if any.
    pub fn last_checkpoint(&self) -> Result<Option<Checkpoint>> {
        checkpoint_parts::read(&self.path, &self.state)
    }

    /// Outbox records awaiting acknowledgement, `(sequence, bytes)` in sequence order.
    pub fn outbox_pending(&self) -> impl Iterator<Item = Result<(u64, Vec<u8>)>> {
        self.reading(self.outbox_from(0))
    }

    /// Removes outbox record `seq` once its publication is acknowledged, and commits. Acking a
    /// record that is not there (already acked) does nothing.
    pub fn outbox_ack(&mut self, seq: u64) -> Result<()> {
        self.usable()?;
        let r = self.outbox_ack_inner(seq);
        self.poison_on_error(r)
    }

    fn outbox_ack_inner(&mut self, seq: u64) -> Result<()> {
        failpoint!("store::outbox::before_ack", crate::store::StoreError);
        let mut batch = sled::Batch::default();
        let removed = self.outbox_remove(&mut batch, &[seq])?;
        if removed > 0 {
            let records = self.batch_outbox_records(&mut batch, 0, removed);
            self.state
                .apply_batch(batch)
                .map_err(self.sled_err("remove outbox record from tree state"))?;
            self.set_outbox_records(records);
            self.commit()?;
        }
        Ok(())
    }

    /// On open: counters, the checkpoint's position, and the journal's next position.
    pub(super) fn load_positions(&mut self) -> Result<()> {
        let read = |key: &[u8]| -> Result<Option<u64>> {
            match self.state.get(key).map_err(self.sled_err("read a counter from tree state"))? {
                None => Ok(None),
                Some(v) => decode_u64(&self.path, STATE, key, &v).map(Some),
            }
        };
        let outbox_next = read(OUTBOX_NEXT)?.unwrap_or(1);
        let journal_start = read(JOURNAL_START)?.unwrap_or(1);
        let journal_next = read(JOURNAL_NEXT)?.unwrap_or(1);
        let last_outbox = self.outbox_last_seq()?;
        self.next_outbox = outbox_next.max(last_outbox.saturating_add(1)).max(1);
        self.journal_start = journal_start.max(1);
        self.checkpoint_pos = self.last_checkpoint()?.map_or(0, |c| c.journal_pos);
        self.load_ledger_position()?;
        self.load_journal_position()?;
        // Shedding can remove the newest journal records a checkpoint covers: those positions
        // were used all the same.
        self.next_journal = self.next_journal.max(self.checkpoint_pos.saturating_add(1));
        self.next_journal = self.next_journal.max(journal_next);
        Ok(())
    }

    /// Each source's last committed position (`n/source/`), by source index; empty on a store
    /// written before they were kept.
    pub fn source_positions(&self) -> Result<std::collections::BTreeMap<u16, u64>> {
        let mut out = std::collections::BTreeMap::new();
        for kv in self.state.scan_prefix(SOURCE_POS) {
            let (k, v) = kv.map_err(self.sled_err("iterate n/source/ in tree state"))?;
            let (source, offset) = decode_source_position(&k, &v).ok_or_else(|| {
                self.corrupt(STATE, &k, "a source position is not n/source/ + u16 → u64")
            })?;
            out.insert(source, offset);
        }
        Ok(out)
    }

    /// What the gateway knows of each sensor, as of the last checkpoint (empty on a store
    /// written before it was kept, or after a salvage).
    pub fn sensor_book(&self) -> Result<crate::records::sensors::SensorBook> {
        match self.state.get(SENSORS).map_err(self.sled_err("read n/sensors"))? {
            None => Ok(Default::default()),
            Some(v) => crate::records::sensors::SensorBook::decode(&v)
                .map_err(|e| self.corrupt(STATE, SENSORS, e)),
        }
    }

    /// The last journal position decided before a salvage that could not keep the checkpoint
    /// (`salvage.rs`), `None` when no salvage wrote one: the decide stage re-derives its state
    /// from the journal records up to it without output. Positions only grow, so once a
    /// checkpoint lies past it, it no longer matters.
    pub fn decided_through(&self) -> Result<Option<u64>> {
        match self.state.get(DECIDED_THROUGH).map_err(self.sled_err("read n/decided_through"))? {
            None => Ok(None),
            Some(v) => decode_u64(&self.path, STATE, DECIDED_THROUGH, &v).map(Some),
        }
    }
}
