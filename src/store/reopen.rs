//! sled's page table snapshot, written by closing and reopening the database.
//!
//! sled 0.34.7 writes the snapshot of its page table only when a database opens
//! (`pagecache::snapshot::read_snapshot_or_default`; its `snapshot_after_ops` does nothing since
//! 0.31). Opening reads the last snapshot, then every log segment written after it. So the first
//! start after a week-long outage read a week of sled's log: 1.27 s on the week's store
//! (docs/performance.md, "A week-long outage"). [`Store::snapshot_sled`] closes sled and opens it
//! again while the daemon runs, which writes a snapshot as of now; a start then reads only the
//! log written since the last one. The daemon does it every
//! [`crate::retention::SLED_SNAPSHOT_EVERY`].
//!
//! It needs every sled handle closed, so:
//! - it runs under the store's exclusive lock (`&mut self`) after a commit: nothing is lost or
//!   left unsynced by closing, and what sled reads back is what a start after a crash here
//!   would read (the same open, the same recovery);
//! - iterators handed out by the store read sled without the lock (the metrics sampler and the
//!   audit walk a backlog of millions of records that way) and keep the database open while
//!   they live. Each holds a [`Reading`] token; while any token is out, the reopen is not done
//!   (`Ok(false)`) and the caller tries again at its next turn;
//! - sled's handles are swapped for those of a stand-in database in the store's directory
//!   ([`STAND_IN`], removed right after) for the moment between the close and the open. If the
//!   open fails, the store is poisoned like after any failed write: the daemon stops and the next
//!   start opens the directory as usual.

use std::sync::Arc;

use super::{open_waiting_for_lock, sled_config, Result, Store, StoreError, JOURNAL, SEQ, STATE};

/// The temporary database that holds sled's place during a reopen (a directory of the store).
pub(super) const STAND_IN: &str = "reopen.tmp";

/// An iterator over the store's sled trees that may be used without the store's lock; the
/// store does not reopen sled while one lives.
#[derive(Debug)]
pub struct Reading<I> {
    inner: I,
    _token: Arc<()>,
}

impl<I: Iterator> Iterator for Reading<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        self.inner.next()
    }
}

impl Store {
    /// `inner`, counted as a reader of sled until it is dropped.
    pub(super) fn reading<I: Iterator>(&self, inner: I) -> Reading<I> {
        Reading { inner, _token: self.readers.clone() }
    }

    /// Commits, closes sled and opens it again, so that sled writes its page table snapshot and
    /// the next start reads only the log written after this. `Ok(false)` when an iterator of the
    /// store is still out (nothing done). A failure poisons the store.
    pub fn snapshot_sled(&mut self) -> Result<bool> {
        self.usable()?;
        if Arc::strong_count(&self.readers) > 1 {
            return Ok(false);
        }
        self.commit()?;
        let r = self.reopen_sled();
        self.poison_on_error(r)?;
        // sled renamed its new snapshot into place and removed the old one without syncing the
        // directory: a commit syncs it (and the new file), as it would at the next write.
        self.commit()?;
        Ok(true)
    }

    fn reopen_sled(&mut self) -> Result<()> {
        let err = |op: &str| {
            let (path, op) = (self.path.clone(), op.to_string());
            move |source| StoreError::Sled { path, op, source }
        };
        let stand_in_dir = self.path.join(STAND_IN);
        // Not sled's `temporary`: it removes its directory when its last handle goes, which
        // sled's IO threads can delay until a commit below walks the directory; this one is
        // removed here, before that.
        remove_stand_in(&self.path);
        let stand_in = sled_config(&stand_in_dir, &self.opts)
            .open()
            .map_err(err("open the stand-in for a reopen"))?;
        let stand_in_tree = |name: &str| stand_in.open_tree(name).map_err(err("open tree"));
        let (journal, state, seq) =
            (stand_in_tree(JOURNAL)?, stand_in_tree(STATE)?, stand_in_tree(SEQ)?);
        drop(std::mem::replace(&mut self.journal, journal));
        drop(std::mem::replace(&mut self.state, state));
        drop(std::mem::replace(&mut self.seq, seq));
        drop(std::mem::replace(&mut self.db, stand_in));
        failpoint!("store::reopen::closed", crate::store::StoreError);
        let db = open_waiting_for_lock(&sled_config(&self.path, &self.opts))
            .map_err(|source| StoreError::Open { path: self.path.clone(), source })?;
        let tree = |name: &str| db.open_tree(name).map_err(err(&format!("open tree {name}")));
        let (journal, state, seq) = (tree(JOURNAL)?, tree(STATE)?, tree(SEQ)?);
        self.journal = journal;
        self.state = state;
        self.seq = seq;
        self.db = db;
        remove_stand_in(&self.path);
        Ok(())
    }
}

/// A stand-in left by a crash during a reopen: removed when the store opens.
pub(super) fn remove_stand_in(path: &std::path::Path) {
    let dir = path.join(STAND_IN);
    if dir.exists() {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "store: could not remove a reopen's stand-in");
        }
    }
}

/// Held by every test of this process that reopens sled: failpoints are global to the process,
/// so the one that makes a reopen fail would also fail another test's reopen running beside it.
#[cfg(test)]
pub(crate) static REOPEN_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
pub(crate) fn reopen_test_lock() -> std::sync::MutexGuard<'static, ()> {
    REOPEN_TESTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The newest page-table snapshot sled has written in `dir` (its name carries its log position),
/// for the tests that check a reopen wrote one.
#[cfg(test)]
pub(crate) fn newest_sled_snapshot(dir: &std::path::Path) -> Option<String> {
    let names = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name());
    names.map(|n| n.to_string_lossy().into_owned()).filter(|n| n.starts_with("snap.")).max()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::store::StoreOptions;

    fn open(dir: &Path) -> Store {
        let opts = StoreOptions {
            cache_bytes: 1 << 20,
            raw_threshold: 16,
            segment_bytes: 1024,
            ..StoreOptions::default()
        };
        Store::open(dir, opts).unwrap()
    }

    /// Journal (an event line and a raw line), checkpoint, outbox, an acknowledgement and a seq
    /// block, as `(journal, outbox, seq marks, checkpoint position)`.
    fn fill(s: &mut Store, n: u64) {
        let raw = format!("a raw samples line number {n}, long enough for a segment");
        let base = s.next_journal_pos();
        s.append_journal(&[(n as i64, format!("event {n}").into_bytes()), (0, raw.into_bytes())])
            .unwrap();
        s.checkpoint(base + 1, format!("decider {n}").as_bytes(), &[vec![n as u8], vec![1, 2]])
            .unwrap();
        let first = s.outbox_pending().next().unwrap().unwrap().0;
        s.outbox_ack(first).unwrap();
        s.allocate_seq_block("press-1", "s1", 10).unwrap();
    }

    type Seen = (Vec<(u64, i64, Vec<u8>)>, Vec<(u64, Vec<u8>)>, Vec<((String, String), u64)>);

    fn seen(s: &Store) -> (Seen, u64, u64) {
        let journal = s.journal_from(1).collect::<Result<_>>().unwrap();
        let outbox = s.outbox_pending().collect::<Result<_>>().unwrap();
        let marks = s.seq_marks().collect::<Result<_>>().unwrap();
        ((journal, outbox, marks), s.checkpoint_pos(), s.outbox_records())
    }

    #[test]
    fn a_reopen_writes_sleds_snapshot_keeps_everything_and_the_store_goes_on() {
        let _serial = reopen_test_lock();
        let tmp = tempfile::tempdir().unwrap();
        let mut s = open(tmp.path());
        for n in 1..=20 {
            fill(&mut s, n);
        }
        let before = seen(&s);
        let snap_before = newest_sled_snapshot(tmp.path());
        assert!(s.snapshot_sled().unwrap(), "no reader is out");
        let snap_after = newest_sled_snapshot(tmp.path());
        assert!(snap_after > snap_before, "a newer snapshot: {snap_before:?} -> {snap_after:?}");
        assert!(!tmp.path().join(STAND_IN).exists(), "the stand-in is gone");
        assert_eq!(seen(&s), before, "the same store after the reopen");
        for n in 21..=25 {
            fill(&mut s, n);
        }
        let after = seen(&s);
        assert_eq!(after.0 .0.len(), 50, "the journal went on");
        drop(s);
        assert_eq!(seen(&open(tmp.path())), after, "and a start reads it all back");
    }

    #[test]
    fn a_reopen_waits_until_no_iterator_of_the_store_is_out() {
        let _serial = reopen_test_lock();
        let tmp = tempfile::tempdir().unwrap();
        let mut s = open(tmp.path());
        fill(&mut s, 1);
        let walk = s.outbox_pending();
        let marks = s.seq_marks();
        assert!(!s.snapshot_sled().unwrap(), "two readers are out");
        drop(walk);
        assert!(!s.snapshot_sled().unwrap(), "one reader is out");
        assert_eq!(marks.count(), 1, "and it still reads");
        assert!(s.snapshot_sled().unwrap());
        assert_eq!(s.outbox_pending().count(), 1);
    }

    #[test]
    fn a_stand_in_left_by_a_crash_is_removed_when_the_store_opens() {
        let tmp = tempfile::tempdir().unwrap();
        fill(&mut open(tmp.path()), 1);
        let stand_in = tmp.path().join(STAND_IN);
        std::fs::create_dir(&stand_in).unwrap();
        std::fs::write(stand_in.join("db"), b"left by a crash").unwrap();
        let s = open(tmp.path());
        assert!(!stand_in.exists());
        assert_eq!(s.outbox_pending().count(), 1);
    }

    #[cfg(feature = "failpoints")]
    #[test]
    fn a_reopen_that_fails_after_the_close_poisons_the_store_and_loses_nothing() {
        let _serial = reopen_test_lock();
        let scenario = fail::FailScenario::setup();
        let tmp = tempfile::tempdir().unwrap();
        let mut s = open(tmp.path());
        for n in 1..=5 {
            fill(&mut s, n);
        }
        let before = seen(&s);
        fail::cfg("store::reopen::closed", "return").unwrap();
        match s.snapshot_sled() {
            Err(StoreError::Injected { point }) => assert_eq!(point, "store::reopen::closed"),
            other => panic!("expected the injection, got {other:?}"),
        }
        fail::remove("store::reopen::closed");
        assert!(matches!(s.commit(), Err(StoreError::Poisoned { .. })));
        drop(s);
        assert!(tmp.path().join(STAND_IN).exists(), "the stand-in is left, as after a crash");
        assert_eq!(seen(&open(tmp.path())), before, "a start finds everything");
        scenario.teardown();
    }
}
