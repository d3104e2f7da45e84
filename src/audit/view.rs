//! Where an audit command reads and writes: a store it opened itself (no daemon runs), or the
//! running daemon's shared store, reached through the control socket (`crate::control`).
//!
//! On the daemon's store every read takes the store's lock shared and fairly (a waiting writer
//! goes first), for one bounded piece of work at a time: a command never holds up the pipeline
//! for longer than one page of the ledger. The view is consistent: what one command reads is a
//! state the daemon committed, as of the moment it began (records decided later are left out),
//! and when retention prunes the ledger under a long read, the read starts again from the new
//! summary rather than miss the pruned records.

use std::collections::BTreeSet;

use tokio::sync::mpsc;

use super::AuditError;
use crate::records::journal::{JournalRecord, Origin};
use crate::records::ledger::{LedgerRecord, Operator};
use crate::records::pruned::PrunedSummary;
use crate::store::SharedStore;
use crate::store::Store;

/// Ledger records read under one hold of the lock.
pub const LEDGER_PAGE: usize = 4096;

/// How often a ledger read starts again when retention prunes under it.
const PRUNE_RETRIES: usize = 5;

/// The store an audit command works on.
#[derive(Debug)]
pub enum View<'a> {
    /// A store the command opened (sled's file lock: no daemon holds it).
    Own(&'a mut Store),
    /// The running daemon's store.
    Daemon(DaemonView<'a>),
}

/// The running daemon's store, and what a mutation needs from the daemon.
#[derive(Debug)]
pub struct DaemonView<'a> {
    pub store: &'a SharedStore,
    /// The decide stage's input: a released record is handed to it once journaled. Weak, so the
    /// control socket never keeps the decide stage alive at the end of a run.
    pub decide: &'a mpsc::WeakSender<crate::decide::input::DecideBatch>,
    /// The control socket's peer.
    pub peer: Operator,
}

/// The ledger as of one moment: what retention folded into its summary, and every record after.
#[derive(Debug)]
pub struct LedgerSnapshot {
    pub pruned: PrunedSummary,
    pub records: Vec<(u64, LedgerRecord)>,
}

impl View<'_> {
    /// Runs `f` on the store (the daemon's under its lock, taken shared and fairly).
    pub fn read<R>(&self, f: impl FnOnce(&Store) -> R) -> R {
        match self {
            View::Own(s) => f(s),
            View::Daemon(d) => f(&d.store.read()),
        }
    }

    /// Runs `f` on the store for writing (the daemon's under its exclusive lock).
    pub fn write<R>(&mut self, f: impl FnOnce(&mut Store) -> R) -> R {
        match self {
            View::Own(s) => f(s),
            View::Daemon(d) => f(&mut d.store.write()),
        }
    }

    /// Who is asking: the socket's peer, or this process.
    pub fn operator(&self) -> Operator {
        match self {
            View::Own(_) => Operator::this_process(),
            View::Daemon(d) => d.peer,
        }
    }

    /// The pruned summary and every ledger record after it, and the outbox sequences queued, as
    /// one consistent view. The queue is walked without the lock (a backlog of a day is a million
    /// records), then the ledger is read to its end as of after the walk: a record the walk missed
    /// because it was acknowledged meanwhile has its acknowledgement in that ledger, and one
    /// created after the walk began (sequence at or above the outbox's next at its start) is
    /// counted as queued unless the ledger says it was acknowledged.
    pub fn ledger_and_queue(&self) -> Result<(LedgerSnapshot, BTreeSet<u64>), AuditError> {
        for _ in 0..PRUNE_RETRIES {
            let (pruned, records, next) = self.read(|s| -> Result<_, AuditError> {
                Ok((s.pruned_summary()?, s.outbox_pending(), s.next_outbox_seq()))
            })?;
            let mut queued = BTreeSet::new();
            for r in records {
                let (q, _) = r?;
                if q >= next {
                    break;
                }
                queued.insert(q);
            }
            let (end, now_next) = self.read(|s| (s.next_ledger_seq(), s.next_outbox_seq()));
            queued.extend(next..now_next);
            if let Some(records) = self.ledger_pages(pruned.through, end)? {
                return Ok((LedgerSnapshot { pruned, records }, queued));
            }
        }
        Err(AuditError::Usage(
            "retention pruned the ledger faster than it could be read: try again".into(),
        ))
    }

    /// The ledger as of this call (see [`View::ledger_and_queue`]).
    pub fn ledger(&self) -> Result<LedgerSnapshot, AuditError> {
        for _ in 0..PRUNE_RETRIES {
            let (pruned, end) = self.read(|s| -> Result<_, AuditError> {
                Ok((s.pruned_summary()?, s.next_ledger_seq()))
            })?;
            if let Some(records) = self.ledger_pages(pruned.through, end)? {
                return Ok(LedgerSnapshot { pruned, records });
            }
        }
        Err(AuditError::Usage(
            "retention pruned the ledger faster than it could be read: try again".into(),
        ))
    }

    /// Ledger records after `through` and before `end`, a page per hold of the lock; `None` when
    /// retention pruned past the next record to read meanwhile (records were missed).
    fn ledger_pages(
        &self,
        through: u64,
        end: u64,
    ) -> Result<Option<Vec<(u64, LedgerRecord)>>, AuditError> {
        let mut out = Vec::new();
        let mut next = through + 1;
        let own = matches!(self, View::Own(_));
        while next < end {
            let page = self.read(|s| -> Result<Option<Vec<_>>, AuditError> {
                if !own && s.pruned_summary()?.through >= next {
                    return Ok(None);
                }
                let page =
                    s.ledger_from(next).take_while(|r| r.as_ref().map_or(true, |(q, _)| *q < end));
                Ok(Some(page.take(LEDGER_PAGE).collect::<Result<Vec<_>, _>>()?))
            })?;
            let Some(page) = page else { return Ok(None) };
            let Some(&(last, _)) = page.last() else { break };
            next = last + 1;
            out.extend(page);
        }
        Ok(Some(out))
    }

    /// Journals `line` (a quarantined record released by an operator) and commits it; on the
    /// daemon's store, hands it to the decide stage too. Returns its journal position.
    pub fn journal_release(
        &mut self,
        at: i64,
        origin: Origin,
        line: Vec<u8>,
    ) -> Result<u64, AuditError> {
        match self {
            View::Own(s) => {
                let pos = s.append_journal_from(&[(at, origin, line)])?.start;
                s.commit()?;
                Ok(pos)
            }
            View::Daemon(d) => {
                let mut s = d.store.write();
                let pos = s.append_journal_from(&[(at, origin, line)])?.start;
                let s = s.downgrade();
                s.commit()?;
                drop(s);
                Ok(pos)
            }
        }
    }

    /// On the daemon's store: hands the released record to the decide stage (which would also
    /// find it in the journal with the next batch). False when the decide stage is stopping.
    pub fn decide_now(&self, record: JournalRecord) -> bool {
        match self {
            View::Own(_) => false,
            View::Daemon(d) => match d.decide.upgrade() {
                Some(tx) => tx.blocking_send(vec![record].into()).is_ok(),
                None => false,
            },
        }
    }

    /// True on the daemon's store.
    pub fn is_daemon(&self) -> bool {
        matches!(self, View::Daemon(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ledger::LedgerEntry;
    use crate::store::StoreOptions;

    fn store_with_ledger(dir: &std::path::Path, n: u64) -> Store {
        let mut s = Store::open(dir, StoreOptions::default()).unwrap();
        let recs: Vec<LedgerRecord> = (0..n)
            .map(|i| {
                let entry = LedgerEntry::Duplicate { event_id: format!("e{i}"), journal_pos: i };
                LedgerRecord::new(i as i64, entry)
            })
            .collect();
        s.append_ledger(&recs).unwrap();
        s
    }

    #[test]
    fn the_daemons_ledger_read_a_page_at_a_time_equals_a_direct_read() {
        let dir = tempfile::tempdir().unwrap();
        let n = LEDGER_PAGE as u64 * 2 + 17;
        let mut s = store_with_ledger(dir.path(), n);
        let direct = View::Own(&mut s).ledger().unwrap().records;
        assert_eq!(direct.len() as u64, n);
        assert_eq!(direct.iter().map(|(q, _)| *q).collect::<Vec<_>>(), (1..=n).collect::<Vec<_>>());
        let shared: SharedStore = SharedStore::new(s);
        let (tx, _rx) = mpsc::channel(1);
        let weak = tx.downgrade();
        let peer = Operator { uid: 1, gid: 1, pid: None, via_socket: true };
        let view = View::Daemon(DaemonView { store: &shared, decide: &weak, peer });
        let paged = view.ledger().unwrap().records;
        assert_eq!(paged, direct);
        let (snap, queued) = view.ledger_and_queue().unwrap();
        assert_eq!(snap.records, direct);
        assert!(queued.is_empty());
    }

    #[test]
    fn a_read_that_retention_overtook_is_refused_and_started_again() {
        let dir = tempfile::tempdir().unwrap();
        let n = LEDGER_PAGE as u64 + 10;
        let mut s = store_with_ledger(dir.path(), n);
        // Retention prunes the first half while a reader thinks nothing was pruned.
        s.prune_ledger(i64::MAX, (n / 2) as usize).unwrap();
        let through = s.pruned_summary().unwrap().through;
        assert!(through > 0);
        let shared: SharedStore = SharedStore::new(s);
        let (tx, _rx) = mpsc::channel(1);
        let weak = tx.downgrade();
        let peer = Operator { uid: 1, gid: 1, pid: None, via_socket: true };
        let view = View::Daemon(DaemonView { store: &shared, decide: &weak, peer });
        assert!(view.ledger_pages(0, n + 1).unwrap().is_none(), "records were missed");
        let again = view.ledger().unwrap();
        assert_eq!(again.pruned.through, through);
        assert_eq!(again.records.first().map(|r| r.0), Some(through + 1));
        assert_eq!(again.records.len() as u64, n - through);
    }
}
