//! Archive records in tree `state`, written in the checkpoint batch of the decision that made
//! them: quarantined records under `q/` + u64 (the sequence of the ledger record that quarantined
//! them) and every alert record revision under `a/` + alert id + `/` + u32 revision (the outbox
//! copy disappears on acknowledgement; `linegate explain` reads this one). Values are opaque
//! bytes here; `crate::audit` gives them meaning.

use std::path::PathBuf;

use super::{Result, Store, StoreError};
use crate::records::ledger::LedgerRecord;

/// Key prefix of quarantined records.
pub const QUARANTINE: &[u8] = b"q/";
/// Key prefix of archived alert records.
pub const ALERTS: &[u8] = b"a/";

/// The key of quarantined record `id`.
pub fn quarantine_key(id: u64) -> Vec<u8> {
    [QUARANTINE, &id.to_be_bytes()[..]].concat()
}

/// The key of revision `revision` of alert `alert_id`; revisions of one alert sort in order.
pub fn alert_key(alert_id: &str, revision: u32) -> Vec<u8> {
    [ALERTS, alert_id.as_bytes(), b"/", &revision.to_be_bytes()[..]].concat()
}

/// The prefix under which every revision of `alert_id` lies.
pub fn alert_prefix(alert_id: &str) -> Vec<u8> {
    [ALERTS, alert_id.as_bytes(), b"/"].concat()
}

fn is_archive_key(k: &[u8]) -> bool {
    k.starts_with(QUARANTINE)
        || k.starts_with(ALERTS)
        || k.starts_with(super::state::SOURCE_POS)
        || k == super::state::SENSORS
}

impl Store {
    /// [`Store::checkpoint_with_ledger`] with archive records (`q/`, `a/` keys) and source
    /// positions (`crate::store::source_position_put`) in the same batch (refused when a key lies
    /// outside those prefixes), and without its final commit: the
    /// batch is applied (after a commit of the appends it covers, when there are any) and
    /// readable, and the caller's [`Store::commit`] makes it durable. Until then a crash loses
    /// the batch whole, never part of it (one batch on one tree), and the journal it covers is
    /// durable. The decide stage commits without the lock ([`Store::committer`]) so that the
    /// forwarder can read the new outbox records, and publish an alert, while that commit runs.
    pub fn apply_checkpoint_with_archive(
        &mut self,
        journal_pos: u64,
        decider: &[u8],
        outbox_adds: &[Vec<u8>],
        ledger_adds: &[LedgerRecord],
        archive_puts: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<()> {
        let none = super::DedupChange::default();
        self.apply_checkpoint_with_dedup(
            journal_pos,
            decider,
            outbox_adds,
            ledger_adds,
            archive_puts,
            &none,
        )
    }

    /// [`Store::apply_checkpoint_with_archive`] that also adds and removes pages of the rule's
    /// duplicate memory (`dedup_pages.rs`) in the same batch.
    pub fn apply_checkpoint_with_dedup(
        &mut self,
        journal_pos: u64,
        decider: &[u8],
        outbox_adds: &[Vec<u8>],
        ledger_adds: &[LedgerRecord],
        archive_puts: &[(Vec<u8>, Vec<u8>)],
        dedup: &super::DedupChange,
    ) -> Result<()> {
        self.usable()?;
        if let Some((k, _)) = archive_puts.iter().find(|(k, _)| !is_archive_key(k)) {
            return Err(self.refused(format!(
                "archive key {} is not under q/, a/ or n/source/",
                k.escape_ascii()
            )));
        }
        let r = self.checkpoint_apply(
            journal_pos,
            decider,
            outbox_adds,
            ledger_adds,
            archive_puts,
            dedup,
        );
        self.poison_on_error(r)
    }

    /// Archive records `(key, value)` whose key starts with `prefix`, in key order.
    pub fn archive_scan(&self, prefix: &[u8]) -> impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> {
        let path: PathBuf = self.path.clone();
        self.reading(self.state.scan_prefix(prefix).map(move |kv| {
            kv.map(|(k, v)| (k.to_vec(), v.to_vec())).map_err(|source| StoreError::Sled {
                path: path.clone(),
                op: "iterate archive keys in tree state".into(),
                source,
            })
        }))
    }

    /// The archive record under `key`, if any.
    pub fn archive_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let v = self.state.get(key).map_err(self.sled_err("read an archive key of tree state"))?;
        Ok(v.map(|v| v.to_vec()))
    }

    /// Removes archive record `key` and adds `ledger` records in one batch, then commits.
    pub fn archive_remove(&mut self, key: &[u8], ledger: &[LedgerRecord]) -> Result<()> {
        self.usable()?;
        if !is_archive_key(key) {
            return Err(self
                .refused(format!("key {} is not under q/, a/ or n/source/", key.escape_ascii())));
        }
        let r = self.archive_remove_inner(key, ledger);
        self.poison_on_error(r)
    }

    fn archive_remove_inner(&mut self, key: &[u8], ledger: &[LedgerRecord]) -> Result<()> {
        let mut batch = sled::Batch::default();
        batch.remove(key);
        let next = self.batch_ledger(&mut batch, ledger);
        failpoint!("store::archive::before_remove", crate::store::StoreError);
        self.state
            .apply_batch(batch)
            .map_err(self.sled_err("apply archive removal to tree state"))?;
        self.next_ledger = next;
        self.commit()
    }

    /// The number of outbox records and their bytes, without decoding them. A packed page is
    /// counted by its header, without unpacking it: only a checkpoint packs an outbox page, and it
    /// holds no empty entry (a page written again after removals is plain).
    pub fn outbox_depth(&self) -> Result<(u64, u64)> {
        let mut n = (0, 0);
        for kv in self.state.scan_prefix(super::state::OUTBOX) {
            let (k, v) = kv.map_err(self.sled_err("iterate o/ in tree state"))?;
            if let Some((records, bytes)) = super::page::packed_totals(&v) {
                n.0 += records;
                n.1 += bytes;
                continue;
            }
            let (records, bytes) = super::outbox_pages::outbox_entries(&k, &v, |rs| {
                (rs.len() as u64, rs.iter().map(|(_, r)| r.len() as u64).sum::<u64>())
            })
            .map_err(|what| self.corrupt(super::STATE, &k, what))?;
            n.0 += records;
            n.1 += bytes;
        }
        Ok(n)
    }

    /// Outbox records awaiting acknowledgement from sequence `seq` on, in sequence order.
    pub fn outbox_pending_from(&self, seq: u64) -> impl Iterator<Item = Result<(u64, Vec<u8>)>> {
        self.reading(self.outbox_from(seq))
    }

    /// The journal position of the last checkpoint (0 when there is none).
    pub fn checkpoint_pos(&self) -> u64 {
        self.checkpoint_pos
    }
}
