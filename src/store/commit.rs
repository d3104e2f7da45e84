//! Commits: what makes the writes before them durable, and what commits share with each other
//! and with the store's writers.
//!
//! A commit is an `fdatasync` of the segment being written, sled's `flush`, then an fsync of
//! sled's log and of its other new or changed files (`fsync.rs`). It needs no lock on the store:
//! [`Store::committer`] hands out what it uses (sled's handle, the segments, [`CommitShared`]),
//! so a writer can append, let go of the store's lock and wait for its commit while the next
//! writer appends (the daemon's ingest and decide stage do;
//! docs/decisions/0023-commits-without-the-store-lock.md). [`Store::commit`] is the same commit
//! run by a caller that keeps its lock.
//!
//! What a commit covers. Every call takes a number; the commit that holds the gate reads, before
//! it syncs anything, how many calls were made so far, how many writes were counted and which
//! journal position was appended last: those writes happened before those reads, so its
//! segment sync and flush carry them, and the calls waiting behind it find themselves covered
//! (one flush and one round of fsyncs for all). Writes made while it runs are not counted: they
//! wait for the next commit ([`Store::needs_commit`] stays true), and the journal positions they
//! appended are not marked durable.
//!
//! What a commit may carry beyond that. sled's flush writes whatever its buffers hold, so records
//! a writer applied after the segment sync can become durable before the raw bytes they name:
//! - a journal record of a raw line: only one that was never committed by its writer (its
//!   source never advanced past it), and only at the journal's end, after the checkpoint (the
//!   segments are written in position order and a sync covers everything written before it).
//!   Opening cuts such a torn tail (`journal.rs`, `drop_torn_tail`), as it did after a power cut
//!   that caught sled's buffer on the disk before the segment's bytes.
//! - a `Samples` outbox record's frame (`frames.rs`): a frame is a cache of its line; one that is
//!   missing or fails its checksum is read from the line again.
//!   A checkpoint never covers journal positions no commit made durable (`state.rs`).
//!
//! Deleting segments left without references must not run ahead of the removal that left them
//! so: removals are counted, a commit reads the count when it begins, and the deletion runs
//! afterwards, under the store's lock (no writer meanwhile), only if no removal came since
//! ([`Store::after_commit`]); otherwise a later commit's does.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{fsync, segments, Result, Store, StoreError, RAW_DIR};

/// What a store's commits share with each other and with its writers.
#[derive(Debug, Default)]
pub(super) struct CommitShared {
    /// Held for a whole commit.
    gate: Mutex<CommitGate>,
    /// Commit calls so far (each takes the next number).
    calls: AtomicU64,
    /// Writes that need a commit, counted after each is applied: journal appends, acknowledgements,
    /// a checkpoint applied without its commit, ledger prunes, outbox compactions.
    writes: AtomicU64,
    /// The writes counted before the last successful commit began.
    synced_writes: AtomicU64,
    /// The last journal position appended (as of this open: the last one found).
    journal_written: AtomicU64,
    /// The last journal position a commit made durable (as of this open: the last one found).
    journal_durable: AtomicU64,
    /// Removals of references to segments so far (from 1: segments a crash left unreferenced
    /// go at the first commit).
    removals: AtomicU64,
    /// The removals the last deletion of segments left without references followed; held while
    /// one runs.
    collected: Mutex<u64>,
    /// A write or commit failed: what is in memory may be ahead of what is durable.
    poisoned: AtomicBool,
}

/// What earlier commits made durable and covered.
#[derive(Debug, Default)]
struct CommitGate {
    synced: fsync::Synced,
    /// Commit calls up to this number were made before a commit that succeeded began.
    covered: u64,
}

impl CommitShared {
    /// A store's, as it opens.
    pub(super) fn opened() -> CommitShared {
        let s = CommitShared::default();
        s.removals.store(1, Ordering::Release);
        s
    }

    /// The journal positions up to `last` were found on opening: durable as far as this
    /// process knows.
    pub(super) fn found_journal(&self, last: u64) {
        self.journal_written.fetch_max(last, Ordering::AcqRel);
        self.journal_durable.fetch_max(last, Ordering::AcqRel);
    }

    /// Counts a write, after it was applied, as waiting for a commit.
    pub(super) fn wrote(&self) {
        self.writes.fetch_add(1, Ordering::AcqRel);
    }

    /// Counts a journal append through position `last`, after it was applied.
    pub(super) fn appended(&self, last: u64) {
        self.journal_written.fetch_max(last, Ordering::AcqRel);
        self.wrote();
    }

    /// Counts a removal of references to segments, after it was applied: the segments left
    /// without any are deleted once it is durable.
    pub(super) fn removed_references(&self) {
        self.removals.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether journal position `pos` was made durable by a commit (or found on opening).
    pub(super) fn journal_durable_through(&self, pos: u64) -> bool {
        pos <= self.journal_durable.load(Ordering::Acquire)
    }

    /// Refuses every write and commit once one has failed: see [`StoreError::Poisoned`].
    pub(super) fn usable(&self, path: &Path) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(StoreError::Poisoned { path: path.to_path_buf() });
        }
        Ok(())
    }

    /// A failed write or commit (not a refusal, which writes nothing) poisons the store.
    pub(super) fn poison_on_error<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if !matches!(e, StoreError::Refused { .. }) {
                self.poisoned.store(true, Ordering::Release);
            }
        }
        r
    }

    fn needs_commit(&self) -> bool {
        self.writes.load(Ordering::Acquire) > self.synced_writes.load(Ordering::Acquire)
    }
}

/// A commit's handle on a store, usable without the store's lock ([`Store::committer`]). While
/// one lives the store does not reopen sled (it holds a reader's token, `reopen.rs`).
#[derive(Debug)]
pub struct Committer {
    path: PathBuf,
    db: sled::Db,
    segments: Arc<segments::Segments>,
    shared: Arc<CommitShared>,
    _reading: Arc<()>,
}

/// A commit done; hand it to [`Store::after_commit`] under the store's lock.
#[derive(Debug)]
#[must_use = "segments left without references are deleted by Store::after_commit"]
pub struct Committed {
    /// The removals of references this commit made durable, when segments are due for
    /// deletion after them (0: none are, or it covered another's).
    removals: u64,
}

impl Committed {
    /// Whether [`Store::after_commit`] has nothing to do (no deletion of segments is due).
    pub fn is_complete(&self) -> bool {
        self.removals == 0
    }
}

impl Committer {
    /// Makes every write counted before it began durable (see the module documentation); a
    /// failure poisons the store.
    pub fn commit(&self) -> Result<Committed> {
        // The store commit's span: the writes it makes durable and the last journal position
        // among them, or that a commit that began after this call covered it.
        let span = tracing::debug_span!(
            "commit",
            writes = tracing::field::Empty,
            journal_to = tracing::field::Empty,
            covered = tracing::field::Empty
        );
        let _entered = span.enter();
        self.shared.usable(&self.path)?;
        let done = run(&self.path, &self.db, &self.segments, &self.shared, &span);
        self.shared.poison_on_error(done)
    }
}

/// One commit, or none when a commit that began after this call covered it; what it covers is
/// recorded on `span`.
fn run(
    path: &Path,
    db: &sled::Db,
    segments: &segments::Segments,
    shared: &CommitShared,
    span: &tracing::Span,
) -> Result<Committed> {
    let call = shared.calls.fetch_add(1, Ordering::AcqRel) + 1;
    let mut gate = shared.gate.lock().unwrap_or_else(|p| p.into_inner());
    if gate.covered >= call {
        // A commit that began after this call (and after the caller's writes) covered it.
        span.record("covered", true);
        return Ok(Committed { removals: 0 });
    }
    // What this commit covers, read before anything is synced.
    let covers = shared.calls.load(Ordering::Acquire);
    let writes = shared.writes.load(Ordering::Acquire);
    let journal_through = shared.journal_written.load(Ordering::Acquire);
    let removals = shared.removals.load(Ordering::Acquire);
    span.record("writes", writes.saturating_sub(shared.synced_writes.load(Ordering::Acquire)));
    span.record("journal_to", journal_through);
    failpoint!("store::segments::before_fsync", crate::store::StoreError);
    let seg_err = |(file, source)| StoreError::Segment { path: path.to_path_buf(), file, source };
    segments.sync().map_err(seg_err)?;
    db.flush().map_err(|source| StoreError::Sled {
        path: path.to_path_buf(),
        op: "flush".into(),
        source,
    })?;
    failpoint!("store::commit::before_fsync", crate::store::StoreError);
    fsync::fsync_dir_files(path, Some(RAW_DIR), &mut gate.synced)
        .map_err(|(file, source)| StoreError::Fsync { path: path.to_path_buf(), file, source })?;
    gate.covered = covers;
    shared.synced_writes.fetch_max(writes, Ordering::AcqRel);
    shared.journal_durable.fetch_max(journal_through, Ordering::AcqRel);
    drop(gate);
    let due = removals > *shared.collected.lock().unwrap_or_else(|p| p.into_inner());
    Ok(Committed { removals: if due { removals } else { 0 } })
}

impl Store {
    /// Makes everything written so far durable: the segment's fdatasync, sled's flush, then a
    /// real fsync of its files (`commit.rs`), and deletes the segments left without references
    /// if that was due.
    ///
    /// Takes `&self`: commits may run while others read, write (through [`Store::committer`],
    /// without the lock) or commit. A call that finds another commit running waits for it, and
    /// is done when that commit began after this call: two threads that commit at once cost one
    /// flush and one round of fsyncs, not two in a row. A commit that fails covers nobody.
    pub fn commit(&self) -> Result<()> {
        let done = self.committer().commit()?;
        self.after_commit(done)
    }

    /// A handle that commits without the store's lock: a writer lets go of the lock and commits,
    /// then calls [`Store::after_commit`] under the lock (shared or exclusive).
    pub fn committer(&self) -> Committer {
        Committer {
            path: self.path.clone(),
            db: self.db.clone(),
            segments: self.segments.clone(),
            shared: self.commits.clone(),
            _reading: self.readers.clone(),
        }
    }

    /// What follows a commit under the store's lock: the segments left without references are
    /// deleted, if that was due when the commit began and no reference was removed since (then
    /// the next commit does it, once that removal is durable too). The caller's lock keeps
    /// writers out meanwhile.
    pub fn after_commit(&self, done: Committed) -> Result<()> {
        let mut collected = self.commits.collected.lock().unwrap_or_else(|p| p.into_inner());
        if done.removals <= *collected
            || self.commits.removals.load(Ordering::Acquire) != done.removals
        {
            return Ok(());
        }
        let r = self.collect_segments().and_then(|()| {
            // The deletions' directory entries: durable now, not at some later commit.
            self.segments.sync().map_err(|e| self.segment_err(e))
        });
        if r.is_ok() {
            *collected = done.removals;
        }
        self.poison_on_error(r)
    }

    /// Whether writes (journal appends, acknowledgements, an applied checkpoint, a prune, a
    /// compaction) wait for a commit.
    pub fn needs_commit(&self) -> bool {
        self.commits.needs_commit()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::store::{Store, StoreOptions, RAW_DIR};

    fn open(dir: &Path) -> Store {
        let opts = StoreOptions {
            cache_bytes: 1 << 20,
            raw_threshold: 4,
            segment_bytes: 64,
            ..StoreOptions::default()
        };
        Store::open(dir, opts).unwrap()
    }

    fn segments(dir: &Path) -> usize {
        std::fs::read_dir(dir.join(RAW_DIR)).unwrap().count()
    }

    /// Raw lines `from..to` (13 bytes each: four to a 64-byte segment).
    fn raw(from: i64, to: i64) -> Vec<(i64, Vec<u8>)> {
        (from..to).map(|i| (i, format!("raw line {i:04}").into_bytes())).collect()
    }

    /// A commit deletes the segments a removal left without references only if no removal came
    /// after it began: one counted since (as a truncation or a shed applied while it ran) leaves
    /// them to a later commit, which deletes them once that removal is durable too.
    #[test]
    fn segments_are_deleted_only_after_every_removal_before_is_durable() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = open(tmp.path());
        s.append_journal(&raw(0, 40)).unwrap();
        s.checkpoint(40, b"", &[]).unwrap();
        assert_eq!(segments(tmp.path()), 10);
        // Records 1..=8 go (segments 1 and 5); the removal is durable with the next commit.
        s.truncate_journal_before(9).unwrap();
        assert_eq!(segments(tmp.path()), 10, "not before the removal is durable");
        let done = s.committer().commit().unwrap();
        assert!(!done.is_complete(), "the deletion is due");
        s.commits.removed_references();
        s.after_commit(done).unwrap();
        assert_eq!(segments(tmp.path()), 10, "a removal came after the commit began");
        s.commit().unwrap();
        assert_eq!(segments(tmp.path()), 8);
        // Nothing removed since: the next commit has nothing to delete and says so.
        s.append_journal(&raw(40, 41)).unwrap();
        assert!(s.committer().commit().unwrap().is_complete());
        let now = segments(tmp.path());
        // The next removal's (segments 9 and 13) go with the commit after it.
        s.truncate_journal_before(17).unwrap();
        assert_eq!(segments(tmp.path()), now);
        s.commit().unwrap();
        assert_eq!(segments(tmp.path()), now - 2);
    }

    /// A write made while a commit runs is not covered by it: it still needs a commit, and the
    /// journal position it appended is not durable, so a checkpoint that covers it commits first.
    #[cfg(feature = "failpoints")]
    #[test]
    fn a_write_during_a_commit_waits_for_the_next() {
        use std::sync::mpsc;
        let _serial = crate::store::reopen_test_lock();
        let scenario = fail::FailScenario::setup();
        let tmp = tempfile::tempdir().unwrap();
        let mut s = open(tmp.path());
        s.append_journal(&[(1, b"a".to_vec()), (2, b"raw two".to_vec())]).unwrap();
        let (inside, entered) = mpsc::sync_channel::<()>(0);
        let (go, wait) = mpsc::sync_channel::<()>(0);
        let wait = std::sync::Mutex::new(wait);
        fail::cfg_callback("store::commit::before_fsync", move || {
            inside.send(()).unwrap();
            wait.lock().unwrap().recv().unwrap();
        })
        .unwrap();
        let committer = s.committer();
        let commit = std::thread::spawn(move || committer.commit().map(|d| d.is_complete()));
        entered.recv().unwrap();
        // The commit has counted what it covers and flushed sled: this append comes after.
        s.append_journal(&[(3, b"raw three".to_vec())]).unwrap();
        fail::remove("store::commit::before_fsync");
        go.send(()).unwrap();
        commit.join().unwrap().unwrap();
        assert!(s.needs_commit(), "the append during the commit waits for the next");
        assert!(s.commits.journal_durable_through(2));
        assert!(!s.commits.journal_durable_through(3));
        // A checkpoint through position 3 makes the journal durable before it applies.
        s.apply_checkpoint_with_archive(3, b"d", &[], &[], &[]).unwrap();
        assert!(s.commits.journal_durable_through(3));
        s.commit().unwrap();
        assert!(!s.needs_commit());
        drop(s);
        let s = open(tmp.path());
        let lines: Vec<Vec<u8>> = s.journal_from(1).map(|r| r.unwrap().2).collect();
        assert_eq!(lines, [b"a".to_vec(), b"raw two".to_vec(), b"raw three".to_vec()]);
        scenario.teardown();
    }

    /// The store commit's span names the writes it makes durable and the last journal position.
    #[test]
    fn the_commit_span_names_what_the_commit_covers() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path());
        s.append_journal(&[(1, b"a".to_vec()), (2, b"b".to_vec())]).unwrap();
        let (r, text) = crate::telemetry::captured::trace_of(|| s.commit());
        r.unwrap();
        assert!(text.contains("commit{writes=1 journal_to=2}"), "{text}");
    }
}
