//! The store shared by the daemon's stages, and the rules of its lock: the only place that knows
//! what the lock is and how each stage takes it.
//!
//! One [`Store`] serves every stage of `linegate run` (sled holds a file lock: one process per
//! store) behind one read-write lock, `parking_lot`'s, whose shared side may be joined while a
//! writer waits. [`SharedStore`] is the only way in, and each way in is named for who takes it:
//!
//! - **Writers** ([`SharedStore::write`]) take it exclusively: the ingest's journal appends, a
//!   checkpoint's batch, acknowledgements, declared gaps, retention, an operator's release. They
//!   hold it for sled's work in memory only: the disk's wait happens after they let go.
//! - **Commits release the lock first** ([`SharedStore::commit_released`],
//!   [`SharedStore::commit_released_if_needed`]): the caller's hold, either side, is let go before
//!   sled's flush and the fsyncs (`commit.rs`: a commit covers the writes counted when it
//!   began), so the other stages write meanwhile; the shared side is taken again only when
//!   segments left without references are due for deletion.
//! - **Urgent readers** ([`SharedStore::read_urgent`]) join a shared hold already taken even while
//!   a writer waits: the forwarder's reads of live records, of alerts and of the outbox's next
//!   sequence, so that a record the decide stage has just applied is published while its
//!   checkpoint commits. They hold it for one bounded read.
//! - **Every other reader** ([`SharedStore::read`]) takes the shared side fairly: it waits
//!   behind a waiting writer. The forwarder's backlog reads (events, raw samples), the decide
//!   stage's catch-up, the audit commands and the metrics sampler: a stream of such reads never
//!   keeps the pipeline's appends and checkpoints waiting.
//! - **Acknowledgements go in chunks** ([`SharedStore::acknowledge`]): [`ACK_CHUNK`] removals
//!   under one hold, each hold released fairly, so a writer of the pipeline waiting for the lock
//!   (the next append, a checkpoint with an alert) gets it before the next chunk; a plain unlock
//!   would let the releasing thread barge back in.
//! - A writer that must keep readers out of a half-applied state but not writers' successors out
//!   of the disk's wait **downgrades** ([`WriteGuard::downgrade`]) to the shared side without
//!   letting go, then commits.
//!
//! Nothing else in the crate names the lock's type (`tests/module_graph.rs` checks that
//! `parking_lot` appears only in `src/store/`).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::{Result, Store};
use crate::records::ledger::{LedgerEntry, LedgerRecord};

/// Removals applied under one hold of the store's lock by [`SharedStore::acknowledge`] (about
/// 3 ms of sled work).
pub const ACK_CHUNK: usize = 512;

/// The store, shared by every stage; cheap to clone. See the module documentation for the ways
/// in.
#[derive(Debug, Clone)]
pub struct SharedStore(Arc<RwLock<Store>>);

/// The store held exclusively ([`SharedStore::write`]).
#[derive(Debug)]
pub struct WriteGuard<'a>(RwLockWriteGuard<'a, Store>);

/// The store held shared ([`SharedStore::read`], [`SharedStore::read_urgent`],
/// [`WriteGuard::downgrade`]).
#[derive(Debug)]
pub struct ReadGuard<'a>(RwLockReadGuard<'a, Store>);

/// A hold of the store's lock, either side: what a commit lets go of before it waits for the
/// disk ([`SharedStore::commit_released`]).
pub trait Hold: Deref<Target = Store> {}

impl Hold for WriteGuard<'_> {}
impl Hold for ReadGuard<'_> {}

impl SharedStore {
    pub fn new(store: Store) -> SharedStore {
        SharedStore(Arc::new(RwLock::new(store)))
    }

    /// The store for writing: exclusive.
    pub fn write(&self) -> WriteGuard<'_> {
        WriteGuard(self.0.write())
    }

    /// The store for reading, fairly: waits behind a writer that waits.
    pub fn read(&self) -> ReadGuard<'_> {
        ReadGuard(self.0.read())
    }

    /// The store for an urgent read: joins a shared hold already taken even while a writer
    /// waits. For one bounded read of what was just written (see the module documentation).
    pub fn read_urgent(&self) -> ReadGuard<'_> {
        ReadGuard(self.0.read_recursive())
    }

    /// Commits the writes made so far without holding the store's lock through the disk's wait:
    /// `held` (the caller's hold, either side) is let go first, so that the other stages write
    /// meanwhile (`commit.rs`); the lock's shared side is taken again only when segments left
    /// without references are due for deletion.
    pub fn commit_released(&self, held: impl Hold) -> Result<()> {
        let committer = held.committer();
        drop(held);
        let done = committer.commit()?;
        if done.is_complete() {
            return Ok(());
        }
        self.read().after_commit(done)
    }

    /// [`SharedStore::commit_released`] when the store's writes wait for a commit (none that began
    /// after them has covered them: [`Store::needs_commit`]); returns whether it committed.
    pub fn commit_released_if_needed(&self, held: impl Hold) -> Result<bool> {
        if !held.needs_commit() {
            return Ok(false);
        }
        self.commit_released(held).map(|()| true)
    }

    /// Ledgers `Published` for `published`, then removes `acked` from the outbox with an
    /// `Acknowledged` ledger record, [`ACK_CHUNK`] removals under one hold of the lock, each hold
    /// released fairly. Not durable yet: the next commit makes all of it durable.
    ///
    /// sled takes some 6 µs per removal: 4096 of them held the lock for ~25 ms, and an alert's
    /// checkpoint waited that long. Each chunk is one batch with its own ledger record (so the
    /// ledger still describes every batch exactly); a crash before the commit leaves an applied
    /// prefix or nothing, and what is left is sent again (at least once).
    pub fn acknowledge(&self, published: &[u64], acked: &[u64], at_ms: i64) -> Result<()> {
        let mut published = published;
        for chunk in acked.chunks(ACK_CHUNK) {
            let ledger = ack_ledger(published, chunk, at_ms);
            let mut s = self.0.write();
            let r = s.outbox_ack_uncommitted(chunk, &ledger);
            RwLockWriteGuard::unlock_fair(s);
            r?;
            published = &[];
        }
        if !published.is_empty() {
            self.write().outbox_ack_uncommitted(&[], &ack_ledger(published, &[], at_ms))?;
        }
        Ok(())
    }

    /// The store itself, once no other clone of this one is left (`Err(self)` otherwise).
    pub fn into_store(self) -> std::result::Result<Store, SharedStore> {
        Arc::try_unwrap(self.0).map(RwLock::into_inner).map_err(SharedStore)
    }

    /// Whether a writer holds the lock or waits for it (tests that order readers and writers).
    #[cfg(test)]
    pub(crate) fn writer_in(&self) -> bool {
        self.0.is_locked_exclusive()
    }
}

/// `Published` then `Acknowledged`, each only when it names a record.
fn ack_ledger(published: &[u64], acked: &[u64], at_ms: i64) -> Vec<LedgerRecord> {
    let p =
        (!published.is_empty()).then(|| LedgerEntry::Published { outbox_seqs: published.to_vec() });
    let a = (!acked.is_empty()).then(|| LedgerEntry::Acknowledged { outbox_seqs: acked.to_vec() });
    p.into_iter().chain(a).map(|e| LedgerRecord::new(at_ms, e)).collect()
}

impl<'a> WriteGuard<'a> {
    /// The same hold, shared: readers join it, writers still wait; nobody writes in between.
    pub fn downgrade(self) -> ReadGuard<'a> {
        ReadGuard(RwLockWriteGuard::downgrade(self.0))
    }
}

impl Deref for WriteGuard<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.0
    }
}

impl DerefMut for WriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        &mut self.0
    }
}

impl Deref for ReadGuard<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::store::StoreOptions;

    fn shared(dir: &std::path::Path) -> SharedStore {
        let mut s = Store::open(dir, StoreOptions::default()).unwrap();
        s.append_journal(&[(1, b"x".to_vec())]).unwrap();
        s.commit().unwrap();
        SharedStore::new(s)
    }

    /// With a shared hold taken and a writer waiting for it, an urgent read joins at once, a
    /// fair read waits, and the writer goes before it once the hold is let go.
    #[test]
    fn urgent_reads_join_a_held_read_and_fair_reads_let_a_waiting_writer_go_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = shared(dir.path());
        let held = store.read();
        let (done, finished) = mpsc::channel();
        // Each thread says it is in while it still holds what it took, so the channel's order
        // is the order in which the lock let them in (not the order their threads ran on after).
        let spawn = |what: &'static str, f: fn(&SharedStore, &dyn Fn())| {
            let (store, done) = (store.clone(), done.clone());
            std::thread::spawn(move || f(&store, &|| done.send(what).unwrap()))
        };
        let writer = spawn("write", |s, say| {
            let _held = s.write();
            say();
        });
        while !store.writer_in() {
            std::thread::yield_now(); // the writer now waits for the shared hold
        }
        let urgent = spawn("urgent", |s, say| {
            let _held = s.read_urgent();
            say();
        });
        assert_eq!(finished.recv_timeout(Duration::from_secs(10)).unwrap(), "urgent");
        let fair = spawn("fair", |s, say| {
            let _held = s.read();
            say();
        });
        // A fair read that joined the hold would be done in microseconds.
        assert!(finished.recv_timeout(Duration::from_millis(200)).is_err(), "fair read waits");
        drop(held);
        let order: Vec<&str> = (0..2).map(|_| finished.recv().unwrap()).collect();
        assert_eq!(order, ["write", "fair"]);
        for t in [writer, urgent, fair] {
            t.join().unwrap();
        }
    }

    /// A commit given either hold commits what was written before it, and only when something
    /// waits for a commit.
    #[test]
    fn a_commit_released_lets_go_of_the_hold_and_commits_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = shared(dir.path());
        let mut s = store.write();
        s.append_journal(&[(2, b"y".to_vec())]).unwrap();
        let s = s.downgrade();
        assert!(store.commit_released_if_needed(s).unwrap(), "the append waited for a commit");
        assert!(!store.commit_released_if_needed(store.read()).unwrap(), "nothing left");
        let mut s = store.write();
        s.append_journal(&[(3, b"z".to_vec())]).unwrap();
        store.commit_released(s).unwrap();
        let s = store.into_store().unwrap();
        drop(s);
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        assert_eq!(s.next_journal_pos(), 4, "every append committed");
    }
}
