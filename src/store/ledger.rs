//! The ledger in tree `state`: `l/` + u64 sequence → `LedgerRecord` bytes, or a page of the
//! records from that sequence on (`page.rs`: the records of one batch, two or more, in one sled
//! value), and `n/ledger_next`. Ledger records are written in the same batch as the change they
//! describe.

use std::path::{Path, PathBuf};

use super::{corrupt, decode_u64, page, Result, Store, StoreError, STATE};
use crate::records::ledger::{LedgerEntry, LedgerRecord};

pub(super) const LEDGER: &[u8] = b"l/";
pub(super) const LEDGER_NEXT: &[u8] = b"n/ledger_next";
/// The sequence of the newest `Restart` and of the newest `Recovery` ledger record (u64 BE),
/// and the journal positions of the last [`STARTS_KEPT`] starts (u64 BE each, oldest first):
/// written in the batch of the record itself, so `inspect`, `status` and the decide stage's
/// restore find them without walking the ledger. Absent in stores written before they were kept
/// (and right after a salvage, until its own `Recovery` and `Restart`).
pub(super) const LAST_RESTART: &[u8] = b"n/last_restart";
pub(super) const LAST_RECOVERY: &[u8] = b"n/last_recovery";
pub(super) const STARTS: &[u8] = b"n/starts";
/// How many start positions [`STARTS`] keeps.
pub(super) const STARTS_KEPT: usize = 16;

pub(super) fn ledger_key(seq: u64) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[..2].copy_from_slice(LEDGER);
    k[2..].copy_from_slice(&seq.to_be_bytes());
    k
}

impl Store {
    /// Adds `records` to `batch` from the next ledger sequence on; returns the sequence after
    /// them. The caller sets `next_ledger` to it only once the batch is applied.
    pub(super) fn batch_ledger(&self, batch: &mut sled::Batch, records: &[LedgerRecord]) -> u64 {
        let mut seq = self.next_ledger;
        let encoded: Vec<Vec<u8>> = records.iter().map(LedgerRecord::encode).collect();
        let encoded: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
        for (i, run) in page::runs(&encoded) {
            batch.insert(&ledger_key(seq + i as u64), page::value(run, page::Pages::Packed));
        }
        for r in records {
            match r.entry {
                LedgerEntry::Restart { journal_next, .. } => {
                    batch.insert(LAST_RESTART, &seq.to_be_bytes());
                    let mut starts = self.start_positions();
                    starts.push(journal_next);
                    let keep = starts.len().saturating_sub(STARTS_KEPT);
                    let bytes: Vec<u8> =
                        starts[keep..].iter().flat_map(|p| p.to_be_bytes()).collect();
                    batch.insert(STARTS, bytes);
                }
                LedgerEntry::Recovery { .. } => batch.insert(LAST_RECOVERY, &seq.to_be_bytes()),
                _ => {}
            }
            seq += 1;
        }
        if seq != self.next_ledger {
            batch.insert(LEDGER_NEXT, &seq.to_be_bytes());
        }
        seq
    }

    /// Appends ledger records (a restart, a recovery, a clock step) in one batch and commits.
    pub fn append_ledger(&mut self, records: &[LedgerRecord]) -> Result<()> {
        self.usable()?;
        let r = self.append_ledger_inner(records);
        self.poison_on_error(r)
    }

    fn append_ledger_inner(&mut self, records: &[LedgerRecord]) -> Result<()> {
        let mut batch = sled::Batch::default();
        let next = self.batch_ledger(&mut batch, records);
        self.state.apply_batch(batch).map_err(self.sled_err("apply ledger batch to tree state"))?;
        self.next_ledger = next;
        self.commit()
    }

    /// Removes acknowledged outbox records and adds `ledger` records (typically one
    /// `Acknowledged`) in one batch, then commits: one fsync for many acknowledgements. Sequences
    /// not in the outbox (acknowledged already) are ignored.
    pub fn outbox_ack_many(&mut self, seqs: &[u64], ledger: &[LedgerRecord]) -> Result<()> {
        self.outbox_ack_uncommitted(seqs, ledger)?;
        self.commit()
    }

    /// [`Store::outbox_ack_many`] without the commit: the removals and `ledger` are applied in
    /// one batch, durable at the next [`Store::commit`] (or lost together in a crash before it,
    /// and then simply sent again). Lets a caller apply a long list in chunks, releasing its lock
    /// between them, and commit once, or leave the commit to the next checkpoint's
    /// ([`Store::needs_commit`] is then false).
    pub fn outbox_ack_uncommitted(&mut self, seqs: &[u64], ledger: &[LedgerRecord]) -> Result<()> {
        self.usable()?;
        let r = self.outbox_ack_apply(seqs, ledger);
        self.poison_on_error(r)
    }

    fn outbox_ack_apply(&mut self, seqs: &[u64], ledger: &[LedgerRecord]) -> Result<()> {
        failpoint!("store::outbox::before_ack", crate::store::StoreError);
        let mut batch = sled::Batch::default();
        let removed = self.outbox_remove(&mut batch, seqs)?;
        let records = self.batch_outbox_records(&mut batch, 0, removed);
        let next = self.batch_ledger(&mut batch, ledger);
        self.state.apply_batch(batch).map_err(self.sled_err("apply ack batch to tree state"))?;
        self.set_outbox_records(records);
        self.commits.wrote();
        self.next_ledger = next;
        Ok(())
    }

    /// The journal positions at which the last [`STARTS_KEPT`] starts began (from their
    /// `Restart` records), oldest first; empty on a store written before they were kept. A read
    /// error counts as none: the positions only let the decide stage declare `gateway_down` gaps.
    pub fn start_positions(&self) -> Vec<u64> {
        let v = self.state.get(STARTS).ok().flatten().unwrap_or_default();
        v.chunks_exact(8)
            .filter_map(|c| <[u8; 8]>::try_from(c).ok())
            .map(u64::from_be_bytes)
            .collect()
    }

    /// The newest `Restart` and `Recovery` records still in the ledger (retention may have pruned
    /// them), found by their kept sequences; `None` for the pair on a store that has no such keys
    /// (written before they were kept), where the caller walks the ledger instead.
    pub fn last_restart_and_recovery(
        &self,
    ) -> Result<Option<(Option<LedgerRecord>, Option<LedgerRecord>)>> {
        let seq = |key: &[u8]| -> Result<Option<u64>> {
            match self.state.get(key).map_err(self.sled_err("read n/last_"))? {
                None => Ok(None),
                Some(v) => decode_u64(&self.path, STATE, key, &v).map(Some),
            }
        };
        let (restart, recovery) = (seq(LAST_RESTART)?, seq(LAST_RECOVERY)?);
        if restart.is_none() && recovery.is_none() {
            return Ok(None);
        }
        let record = |seq: Option<u64>| -> Result<Option<LedgerRecord>> {
            let Some(seq) = seq else { return Ok(None) };
            match self.ledger_from(seq).next().transpose()? {
                Some((s, r)) if s == seq => Ok(Some(r)),
                _ => Ok(None),
            }
        };
        Ok(Some((record(restart)?, record(recovery)?)))
    }

    /// The sequence the next ledger record gets.
    pub fn next_ledger_seq(&self) -> u64 {
        self.next_ledger
    }

    /// Ledger records `(sequence, record)` from `seq` on, in order. A sequence met twice (a
    /// single record under a key a page also covers, which only damage leaves) is given once.
    pub fn ledger_from(&self, seq: u64) -> impl Iterator<Item = Result<(u64, LedgerRecord)>> {
        let path: PathBuf = self.path.clone();
        let (start, from) = (page::covering_seq(&self.state, LEDGER, seq), seq);
        self.reading(
            self.state
                .range(ledger_key(start)..ledger_key(u64::MAX))
                .flat_map(move |kv| match kv {
                    Ok((k, v)) => decode_entries(&path, &k, &v, seq),
                    Err(source) => vec![Err(StoreError::Sled {
                        path: path.clone(),
                        op: "iterate l/ in tree state".into(),
                        source,
                    })],
                })
                .filter(page::ascending_from(from)),
        )
    }

    /// On open: the next ledger sequence.
    pub(super) fn load_ledger_position(&mut self) -> Result<()> {
        let stored =
            match self.state.get(LEDGER_NEXT).map_err(self.sled_err("read n/ledger_next"))? {
                None => 1,
                Some(v) => decode_u64(&self.path, STATE, LEDGER_NEXT, &v)?,
            };
        let last = page::last_seq(&self.state, LEDGER)
            .map_err(self.sled_err("read last l/ key of tree state"))?
            .unwrap_or(0);
        self.next_ledger = stored.max(last.saturating_add(1)).max(1);
        Ok(())
    }
}

/// The records `(sequence, bytes)` under one `l/` key (one, or a page's), or what is wrong with
/// the key or the page's framing.
pub(super) fn raw_entries<'v>(
    k: &[u8],
    v: &'v [u8],
) -> std::result::Result<Vec<(u64, &'v [u8])>, String> {
    page::keyed_entries(LEDGER, k, v)
}

/// The records `(sequence, record)` under one `l/` key from sequence `from` on; a
/// [`StoreError::Corrupt`] naming the key (and the record's sequence on a page) for what does
/// not decode.
pub(super) fn decode_entries(
    path: &Path,
    k: &[u8],
    v: &[u8],
    from: u64,
) -> Vec<Result<(u64, LedgerRecord)>> {
    let unpacked = match page::unpack(v) {
        Ok(u) => u,
        Err(what) => return vec![Err(corrupt(path, STATE, k, what))],
    };
    let records = match raw_entries(k, &unpacked) {
        Ok(r) => r,
        Err(what) => return vec![Err(corrupt(path, STATE, k, what))],
    };
    let paged = records.len() > 1 || page::is_page(v);
    records
        .into_iter()
        .filter(|(seq, _)| *seq >= from)
        .map(|(seq, bytes)| {
            let rec = LedgerRecord::decode(bytes).map_err(|e| match paged {
                true => {
                    let what = format!("{e} (on the page under {})", super::show_key(k));
                    corrupt(path, STATE, &ledger_key(seq), what)
                }
                false => corrupt(path, STATE, k, e.to_string()),
            })?;
            Ok((seq, rec))
        })
        .collect()
}
