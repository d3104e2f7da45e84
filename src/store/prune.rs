//! The ledger's and the alert archive's retention (`[store] history`, docs/contracts.md section
//! 11): a prefix of the ledger older than the history horizon is removed and folded into one
//! durable summary (`s/pruned`, a `crate::records::pruned::PrunedSummary`), in one batch on tree
//! `state` together with the archived alert revisions that the pruned records made obsolete. A
//! crash keeps all of it or none.
//!
//! What is pruned, in ledger order, stopping at the first record that must stay:
//! - a decision record (accepted, duplicate, quarantined, released, alert: its time is an ingest
//!   time) whose time is at or after the horizon stays, and so does everything after it;
//! - an accepted event or alert record whose outbox record is still queued stays (the backlog of
//!   an outage keeps its ledger until it is acknowledged);
//! - other records (publication, acknowledgement, restarts, gaps) go with the decisions before
//!   them; the records after the last pruned decision stay.
//!
//! Archived alert revisions: when the ledger record of revision `r` of an alert is pruned, the
//! revisions below `r` go, and `r` itself too when it is final (`close`, `supersede`). The latest
//! revision of an incident still open stays whatever its age, so `explain` and the raw-sample
//! protection of its evidence go on working. Quarantined records are not pruned (an operator
//! releases or drops them).

use super::archive::{alert_key, alert_prefix};
use super::ledger::{decode_entries, ledger_key, raw_entries, LEDGER};
use super::{page, Result, Store, STATE};
use crate::records::ledger::LedgerEntry;
use crate::records::pruned::{is_input, owed, PrunedSummary};

/// The key of the summary in tree `state`.
pub const PRUNED: &[u8] = b"s/pruned";

/// Ledger records pruned in one batch at most.
pub const PRUNE_BATCH: usize = 20_000;

/// What one [`Store::prune_ledger`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub ledger_records: u64,
    pub alert_revisions: u64,
}

impl Store {
    /// The summary of what retention pruned (empty when nothing was).
    pub fn pruned_summary(&self) -> Result<PrunedSummary> {
        match self.state.get(PRUNED).map_err(self.sled_err("read s/pruned"))? {
            None => Ok(PrunedSummary::new()),
            Some(v) => PrunedSummary::decode(&v).map_err(|e| self.corrupt(STATE, PRUNED, e.0)),
        }
    }

    /// The ingest time of the newest decision in the ledger, if any (a backwards walk over the
    /// bookkeeping records after it).
    pub fn newest_decision_ms(&self) -> Result<Option<i64>> {
        for r in self.ledger_back() {
            let (_, rec) = r?;
            if is_input(&rec.entry) {
                return Ok(Some(rec.at_ms));
            }
        }
        Ok(None)
    }

    /// Prunes up to `max` ledger records from the start of the ledger whose decisions are older
    /// than `horizon_ms` (see the module documentation), folding them into the summary, in one
    /// batch. Durable at the next commit; a crash before it loses the pruning whole and the next
    /// call does it again.
    pub fn prune_ledger(&mut self, horizon_ms: i64, max: usize) -> Result<PruneReport> {
        self.usable()?;
        let r = self.prune_inner(horizon_ms, max);
        self.poison_on_error(r)
    }

    fn prune_inner(&mut self, horizon_ms: i64, max: usize) -> Result<PruneReport> {
        // The pruned sequences are gone from the tree: the ledger starts after them.
        let Some(last) = self.prune_through(horizon_ms, max)? else {
            return Ok(PruneReport::default());
        };
        // Decoded only when there is something to fold in (the check runs every second).
        let mut summary = self.pruned_summary()?;
        let mut batch = sled::Batch::default();
        let mut report = PruneReport::default();
        self.ledger_remove_through(&mut batch, last)?;
        // A second pass over the same records, folding them in as they are read: `&mut self`
        // keeps the ledger as the first pass found it, and no batch of decoded records is held.
        for r in self.ledger_from(1) {
            let (seq, rec) = r?;
            if seq > last {
                break;
            }
            summary.absorb(seq, &rec);
            report.ledger_records += 1;
            if let LedgerEntry::Alert { alert_id, revision, alert_kind, .. } = &rec.entry {
                let last = match alert_kind.as_str() {
                    "close" | "supersede" => Some(*revision),
                    _ => revision.checked_sub(1),
                };
                let Some(last) = last else { continue };
                let range = alert_prefix(alert_id)..=alert_key(alert_id, last);
                for k in self.state.range(range).keys() {
                    batch.remove(k.map_err(self.sled_err("iterate a/ in tree state"))?);
                    report.alert_revisions += 1;
                }
            }
        }
        batch.insert(PRUNED, summary.encode());
        failpoint!("store::prune::before_apply", crate::store::StoreError);
        self.state.apply_batch(batch).map_err(self.sled_err("apply pruning to tree state"))?;
        self.commits.wrote();
        Ok(report)
    }

    /// The sequence of the last ledger record to prune (see the module documentation): the last
    /// decision among the first `max` records before one that must stay; `None` when there is
    /// none. Reads without keeping what it read.
    fn prune_through(&self, horizon_ms: i64, max: usize) -> Result<Option<u64>> {
        let mut last = None;
        for r in self.ledger_from(1).take(max) {
            let (seq, rec) = r?;
            if is_input(&rec.entry) && rec.at_ms >= horizon_ms {
                break;
            }
            if let Some((outbox_seq, _)) = owed(&rec.entry) {
                if self.outbox_contains(outbox_seq)? {
                    break;
                }
            }
            if is_input(&rec.entry) {
                last = Some(seq);
            }
        }
        Ok(last)
    }

    /// Adds to `batch` the removal of every ledger record up to `last`, the ledger's first
    /// records: keys wholly covered go, and a page reaching past `last` is stored again, under
    /// `last + 1`, with only its records after `last`.
    pub(super) fn ledger_remove_through(&self, batch: &mut sled::Batch, last: u64) -> Result<()> {
        for kv in self.state.range(ledger_key(0)..=ledger_key(last)) {
            let (k, v) = kv.map_err(self.sled_err("iterate l/ in tree state"))?;
            batch.remove(k.clone());
            if !page::is_page(&v) {
                continue;
            }
            let corrupt = |what| self.corrupt(STATE, &k, what);
            let v = page::unpack(&v).map_err(corrupt)?;
            let records = raw_entries(&k, &v).map_err(corrupt)?;
            let rest: Vec<&[u8]> =
                records.iter().filter(|(seq, _)| *seq > last).map(|(_, r)| *r).collect();
            if !rest.is_empty() {
                batch.insert(&ledger_key(last + 1), page::value(&rest, page::Pages::Packed));
            }
        }
        Ok(())
    }

    /// Ledger records from the newest back.
    pub fn ledger_back(
        &self,
    ) -> impl Iterator<Item = Result<(u64, crate::records::ledger::LedgerRecord)>> + '_ {
        let mut above = u64::MAX;
        self.state
            .scan_prefix(LEDGER)
            .rev()
            .flat_map(move |kv| match kv {
                Ok((k, v)) => {
                    let mut records = decode_entries(&self.path, &k, &v, 0);
                    records.reverse();
                    records
                }
                Err(e) => vec![Err(self.sled_err("iterate l/ in tree state backwards")(e))],
            })
            .filter(move |r| match r {
                Ok((s, _)) if *s >= above => false,
                Ok((s, _)) => {
                    above = *s;
                    true
                }
                Err(_) => true,
            })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::records::ledger::{Acceptance, LedgerRecord};
    use crate::store::StoreOptions;

    fn accepted(at: i64, seq: u64, outbox_seq: u64) -> LedgerRecord {
        let entry = LedgerEntry::Accepted {
            event_id: format!("e{seq}"),
            machine: "m".into(),
            sensor: "s".into(),
            seq,
            ts_ms: at - 10,
            how: Acceptance::Applied,
            journal_pos: seq,
            outbox_seq,
            counted: true,
            rules: Vec::new(),
            watermark_ms: None,
        };
        LedgerRecord::new(at, entry)
    }

    fn alert(at: i64, revision: u32, kind: &str, outbox_seq: u64) -> LedgerRecord {
        let entry = LedgerEntry::Alert {
            alert_id: "a1".into(),
            revision,
            alert_kind: kind.into(),
            machine: "m".into(),
            caused_by: None,
            outbox_seq,
        };
        LedgerRecord::new(at, entry)
    }

    fn decide(s: &mut Store, ledger: &[LedgerRecord], outbox: usize, archive: &[u32]) {
        let pos = s.append_journal(&[(0, b"x".to_vec())]).unwrap().end - 1;
        let adds = vec![b"o".to_vec(); outbox];
        let puts: Vec<_> = archive.iter().map(|&r| (alert_key("a1", r), b"{}".to_vec())).collect();
        s.apply_checkpoint_with_archive(pos, b"", &adds, ledger, &puts).unwrap();
        s.commit().unwrap();
    }

    fn ack(s: &mut Store, seqs: &[u64]) {
        let rec = LedgerRecord::new(99_999, LedgerEntry::Acknowledged { outbox_seqs: seqs.into() });
        s.outbox_ack_many(seqs, &[rec]).unwrap();
    }

    fn revisions(s: &Store) -> usize {
        s.archive_scan(&alert_prefix("a1")).count()
    }

    /// A store in `dir` whose ledger was pruned: acknowledged decisions older than the horizon
    /// and a closed alert's revisions go, a young event and what follows it stay. Reopened.
    /// (`crate::audit::reconcile` checks that it reconciles as the whole ledger did.)
    pub(crate) fn pruned_ledger(dir: &std::path::Path) -> Store {
        let mut s = Store::open(dir, StoreOptions::default()).unwrap();
        // Ledger 1..=3 (outbox 1..=3), then 4: acknowledged 1 and 3.
        decide(
            &mut s,
            &[accepted(1_000, 1, 1), accepted(2_000, 2, 2), alert(2_000, 0, "open", 3)],
            3,
            &[0],
        );
        ack(&mut s, &[1, 3]);
        // Outbox 2 is still queued: only ledger record 1 can go.
        assert_eq!(s.prune_ledger(5_000, 100).unwrap().ledger_records, 1);
        assert_eq!(s.pruned_summary().unwrap().through, 1);
        // Ledger 5 (close, outbox 4) and 6 (a young event, outbox 5), then 7: the rest acknowledged.
        decide(&mut s, &[alert(3_000, 1, "close", 4), accepted(10_000, 3, 5)], 2, &[1]);
        ack(&mut s, &[2, 4, 5]);
        assert_eq!(revisions(&s), 2);
        let r = s.prune_ledger(5_000, 100).unwrap();
        // 2..=5; the young event and what follows it stay; the closed alert leaves the archive.
        assert_eq!(r, PruneReport { ledger_records: 4, alert_revisions: 2 });
        assert_eq!(revisions(&s), 0);
        assert_eq!(s.prune_ledger(5_000, 100).unwrap(), PruneReport::default());
        s.commit().unwrap();
        drop(s);
        Store::open(dir, StoreOptions::default()).unwrap()
    }

    #[test]
    fn prunes_old_acknowledged_decisions_and_final_alert_revisions() {
        let tmp = tempfile::tempdir().unwrap();
        let s = pruned_ledger(tmp.path());
        let summary = s.pruned_summary().unwrap();
        assert_eq!((summary.through, summary.records(), summary.accepted_events), (5, 5, 2));
        assert_eq!(summary.owed.keys().copied().collect::<Vec<_>>(), vec![2, 4]);
        let rest: Vec<_> = s.ledger_from(1).map(|r| r.unwrap()).collect();
        assert_eq!(rest.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), vec![6, 7]);
        assert_eq!(s.newest_decision_ms().unwrap(), Some(10_000));
    }

    #[test]
    fn an_open_incident_keeps_its_latest_revision_and_bookkeeping_waits_for_a_decision() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = Store::open(tmp.path(), StoreOptions::default()).unwrap();
        decide(&mut s, &[alert(1_000, 0, "open", 1)], 1, &[0]);
        decide(&mut s, &[alert(2_000, 1, "amend", 2)], 1, &[1]);
        ack(&mut s, &[1, 2]);
        // Both records old, the incident still open: revision 0 goes, 1 stays; the trailing
        // acknowledgement stays until a later decision is pruned after it.
        let r = s.prune_ledger(i64::MAX, 100).unwrap();
        assert_eq!(r, PruneReport { ledger_records: 2, alert_revisions: 1 });
        assert_eq!(revisions(&s), 1);
        assert_eq!(s.ledger_from(1).count(), 1);
        assert_eq!(s.pruned_summary().unwrap().owed.len(), 2);
    }
}
