//! The durable store: journal, checkpoint, outbox and sequence marks in sled 0.34.7. This is the
//! only code that touches sled.
//!
//! # Trees and keys
//!
//! All integers in keys are big-endian, so sled's byte order is numeric order.
//!
//! | tree | key | value |
//! | --- | --- | --- |
//! | `journal` | u64 journal position (from 1) | `[1][at: i64 BE][line bytes]`, or `[2][at][source: u16 BE][end offset: u64 BE][line]`, or for a line of at least `raw_threshold` bytes `[3][at][has origin: u8][source][end offset][segment: u64 BE][offset: u64 BE][len: u32 BE][xxh3-64: u64 BE]` (the line is in `raw/`); or a page (`page.rs`) of such records from that position on, at most 8 KiB, several for one append (`journal_pages.rs`) |
//! | `state` | `c/` | the checkpoint: `[1][journal_pos: u64 BE][decider snapshot bytes]` |
//! | `state` | `o/` + u64 outbox sequence (from 1) | the outbox record's bytes, as given, or a page (`page.rs`) of the records from that sequence on (`outbox_pages.rs`); a `Samples` record may name its block's encoded frame in `raw/` (`frames.rs`) |
//! | `state` | `n/outbox_next` | u64 BE: the next outbox sequence |
//! | `state` | `n/journal_start` | u64 BE: journal positions below this are truncated |
//! | `state` | `n/source/` + u16 source index | u64 BE: the source's end offset after its last record the checkpoint covers (same batch; copied by a salvage, so a source resumes there when checkpoint and journal are gone; absent in older stores) |
//! | `state` | `n/sensors` | a `crate::records::sensors::SensorBook`: each sensor's last accepted event and declared gaps (same batch as the checkpoint; not salvaged, rebuilt as sensors send) |
//! | `state` | `n/checkpoint_pos` | u64 BE: the checkpoint's journal position again (same batch), read by a salvage when `c/` does not decode |
//! | `state` | `n/last_restart`, `n/last_recovery`, `n/starts` | u64 BE: the ledger sequences of the newest `Restart` and `Recovery`, and the journal positions of the last 16 starts, in the batch of those records (`ledger.rs`) |
//! | `state` | `n/journal_next`, `n/decided_through` | u64 BE, written by a salvage (`salvage.rs`): positions below the first were used; the second, read only while there is no checkpoint, is the last position decided before the damage |
//! | `state` | `d/` + u64 page number | the rule's duplicate memory kept outside the checkpoint's snapshot: the packed entries one checkpoint added (same batch; `dedup_pages.rs`) |
//! | `state` | `l/` + u64 ledger sequence (from 1) | a `crate::records::ledger::LedgerRecord`, or a page (`page.rs`) of the records of one batch from that sequence on |
//! | `state` | `n/ledger_next` | u64 BE: the next ledger sequence |
//! | `state` | `n/shed_size` | no longer written (an old store's value is ignored) |
//! | `state` | `s/pruned` | what retention pruned from the ledger: a `crate::records::pruned::PrunedSummary` (`prune.rs`) |
//! | `state` | `q/` + u64, `a/` + alert id + `/` + u32 revision | quarantined records, archived alert records (`archive.rs`; written in the checkpoint batch) |
//! | `seq` | u32 BE length of machine, machine, sensor (UTF-8) | u64 BE: highest seq allocated |
//!
//! Beside sled's files, `raw/{id:020}.seg` holds the raw lines (`segments.rs`): append-only,
//! rolled at `segment_bytes`, deleted whole when no journal record references them; and, beside
//! them, each block's encoded frame that an outbox `Samples` record names (`frames.rs`).
//!
//! The leading `1` in journal and checkpoint values is the format version. A value that does not
//! decode is a [`StoreError::Corrupt`] naming its tree and key, never a panic.
//!
//! # What is durable, and when
//!
//! sled's own `flush` is not a full fsync on Linux (see `fsync.rs`), so every commit here is
//! first an `fdatasync` of the segment being written (and of `raw/` and the store directory when
//! a segment was created or deleted), then `Db::flush`, then an fsync of sled's log and of every
//! other file of the sled database or directory that is new or changed since the last commit
//! (sled writes those once; `fsync.rs`). sled's background flusher is off. Commits need no lock
//! and run while writers write (`commit.rs`): a commit covers the writes counted before it began,
//! and what it may carry beyond them (a later reference to raw bytes not synced yet) is only what
//! opening cuts (a journal tail no commit covered) or reads again (a frame).
//!
//! - [`Store::append_journal`] is *not* durable by itself: many appends, then one
//!   [`Store::commit`] (group commit). After a crash the journal holds every record appended before
//!   the last commit, and possibly some later ones (a prefix of them, in position order).
//! - [`Store::checkpoint`], [`Store::outbox_ack`], [`Store::truncate_journal_before`] and
//!   [`Store::allocate_seq_block`] commit before they return, and so also make durable every
//!   append before them. A checkpoint first commits the journal it covers (unless a commit
//!   already made it durable: appends after it need not be), then writes the
//!   checkpoint, its outbox records and the next outbox sequence in **one `Batch` on one tree**
//!   (`state`): sled applies a batch on one tree atomically; we do not rely on multi-tree
//!   transactions. Ledger records describing a change go into that change's batch
//!   ([`Store::checkpoint_with_ledger`], [`Store::outbox_ack_many`]).
//!   [`Store::apply_checkpoint_with_archive`] applies that batch without the final commit, for a
//!   caller that commits with [`Store::commit`] while readers go on (the decide stage, on a
//!   thread of its own while it decides the next records). Commit calls that overlap share one
//!   flush and one round of fsyncs ([`Store::commit`]); [`Store::committer`] commits without
//!   the store's lock, so that the daemon's stages write while one waits for the disk.
//! - A write or commit that fails (an I/O error, a failed fsync, an injected fault) poisons the
//!   store: what sled holds in memory may then be ahead of the disk (after a failed fsync the
//!   page cache cannot be trusted), and retrying a checkpoint would add its outbox records twice.
//!   Every later write returns [`StoreError::Poisoned`]; the owner reopens the store and recovers
//!   from what is durable. Refused calls write nothing and poison nothing.
//! - `truncate_journal_before` commits the new start position before removing records, so a
//!   crash never lets a position be reused; records below it that a crash brings back are hidden
//!   by reads and removed by the next truncation. `outbox_ack` of an absent record commits nothing.
//! - Reads and iterators hold the database open: drop them with the store before reopening.
//!
//! `tests/store_model.rs` checks this promise: a proptest model with Restart actions, and a child
//! process killed with SIGKILL (a process crash; the page cache survives it, so it does not prove
//! the fsync against power loss). `tests/power_loss.rs` checks it against power cuts: the store
//! written through a FUSE filesystem that drops, at the cut, everything no fsync covered
//! (`tests/support/powercut/`; sled's `sync_file_range` does not reach it, only our fsyncs do).
//! - Journal positions and outbox sequences are never reused for committed records; sequence
//!   numbers handed out by [`Store::allocate_seq_block`] are never handed out again.

pub mod archive;
pub mod checkpoint_parts;
mod commit;
mod dedup_pages;
mod error;
mod frames;
mod fsync;
mod gaps;
mod history;
mod journal;
mod journal_pages;
mod ledger;
mod marker;
mod outbox_compact;
mod outbox_count;
mod outbox_pages;
mod outbox_read;
pub mod page;
mod prune;
mod recovery;
mod reopen;
mod retention;
mod salvage;
mod segments;
mod seq;
mod shared;
mod sparkplug;
mod state;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use commit::{Committed, Committer};
pub use dedup_pages::DedupChange;
pub use error::{Result, StoreError};
pub use fsync::fsyncs_total;
pub use gaps::GapCounts;
pub use history::{HistoryLines, HistoryTrim};
pub use journal::PreparedJournal;
pub use marker::{request_salvage, Damage, SALVAGE_MARKER};
pub use outbox_compact::Compacted;
pub use outbox_read::OutboxScan;
#[cfg(test)]
pub(crate) use prune::tests::pruned_ledger;
pub use prune::{PruneReport, PRUNED, PRUNE_BATCH};
pub use recovery::{Recovered, RECOVERY_SCAN};
pub use reopen::Reading;
#[cfg(test)]
pub(crate) use reopen::{newest_sled_snapshot, reopen_test_lock};
pub use retention::{frame_span_ms, low_water, Protect, ShedReport, SHED_BATCH};
pub use segments::RAW_DIR;
pub use shared::{Hold, ReadGuard, SharedStore, WriteGuard, ACK_CHUNK};
pub use sparkplug::SparkplugPlace;
pub use state::{sensor_book_put, source_position_put, Checkpoint};

/// How the store opens its database.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// sled's page cache, in bytes (sled's own default is 1 GiB, too much for a 1 GB board).
    pub cache_bytes: u64,
    /// Journal lines of at least this many bytes go to segment files, not into sled
    /// (`segments.rs`): the raw `samples` lines, not events.
    pub raw_threshold: usize,
    /// A segment file is rolled when the next line would take it past this size.
    pub segment_bytes: u64,
    /// How a salvage tells whether a page of the rule's duplicate memory (`d/`,
    /// `dedup_pages.rs`) reads back. The rule owns that format, so whoever opens the store says
    /// (the daemon gives `rule::dedup`'s decoder); without one, a salvage copies the pages as
    /// they are, and a damaged one is found when the decide stage restores its checkpoint.
    pub dedup_page_check: Option<PageCheck>,
}

/// Whether a stored page of a format the store does not own reads back (see
/// [`StoreOptions::dedup_page_check`]).
pub type PageCheck = fn(&[u8]) -> bool;

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            cache_bytes: 64 * 1024 * 1024,
            raw_threshold: 1024,
            segment_bytes: 16 * 1024 * 1024,
            dedup_page_check: None,
        }
    }
}

/// The durable store. See the module documentation for the layout and the durability promise.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    /// How it was opened (recovery opens the fresh store the same way).
    opts: StoreOptions,
    db: sled::Db,
    journal: sled::Tree,
    state: sled::Tree,
    seq: sled::Tree,
    /// The raw lines outside sled (`segments.rs`).
    segments: Arc<segments::Segments>,
    /// The position the next appended journal record gets.
    next_journal: u64,
    /// Journal positions below this were truncated.
    journal_start: u64,
    /// The sequence the next outbox record gets.
    next_outbox: u64,
    /// The records in the outbox (`outbox_count.rs`).
    outbox_records: u64,
    /// The sequence the next ledger record gets.
    next_ledger: u64,
    /// The journal position of the last checkpoint (0 when there is none).
    checkpoint_pos: u64,
    /// Journal records below this are history only: decided, checkpointed and referenced by no
    /// queued outbox record (set by the decide stage, [`Store::set_history_floor`]; 0, nothing
    /// trimmable, until it does after a start).
    history_floor: u64,
    /// No `Samples` outbox record lies below this sequence (0 until a shed has looked): they are
    /// only added at the outbox's end and only ever leave it, so a shed starts here rather than
    /// reading a week of events before the oldest frame (`retention.rs`).
    samples_from: u64,
    /// What commits share with each other and with the writers (`commit.rs`).
    commits: Arc<commit::CommitShared>,
    /// One more holder per iterator handed out and still alive (`reopen.rs`).
    readers: Arc<()>,
}

pub(crate) const JOURNAL: &str = "journal";
pub(crate) const STATE: &str = "state";
pub(crate) const SEQ: &str = "seq";

impl Store {
    /// Opens (or creates) the database in directory `path`.
    pub fn open(path: &Path, opts: StoreOptions) -> Result<Store> {
        // No background flush: only a commit may make a segment reference durable, after the
        // segment's bytes (`segments.rs`).
        reopen::remove_stand_in(path);
        let config = sled_config(path, &opts);
        let opened_with = opts.clone();
        let created = dirs_to_sync(path);
        let db = open_waiting_for_lock(&config)
            .map_err(|source| StoreError::Open { path: path.to_path_buf(), source })?;
        sync_parents(&created).map_err(|(file, source)| StoreError::Fsync {
            path: path.to_path_buf(),
            file,
            source,
        })?;
        let tree = |name: &str| {
            db.open_tree(name).map_err(|source| StoreError::Sled {
                path: path.to_path_buf(),
                op: format!("open tree {name}"),
                source,
            })
        };
        let (journal, state, seq) = (tree(JOURNAL)?, tree(STATE)?, tree(SEQ)?);
        let segments =
            segments::Segments::open(path, opts.segment_bytes).map_err(|(file, source)| {
                StoreError::Segment { path: path.to_path_buf(), file, source }
            })?;
        let mut store = Store {
            path: path.to_path_buf(),
            opts: opened_with,
            db,
            journal,
            state,
            seq,
            segments: Arc::new(segments),
            next_journal: 1,
            journal_start: 1,
            next_outbox: 1,
            outbox_records: 0,
            next_ledger: 1,
            checkpoint_pos: 0,
            history_floor: 0,
            samples_from: 0,
            commits: Arc::new(commit::CommitShared::opened()),
            readers: Arc::new(()),
        };
        store.load_positions()?;
        store.commits.found_journal(store.next_journal - 1);
        store.load_outbox_records()?;
        Ok(store)
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// sled's own size on disk (its `db` file and blobs, by length) plus what the segment files
    /// occupy. The retention budget measures [`Store::disk_usage`], which counts every file.
    pub fn size_on_disk(&self) -> Result<u64> {
        let sled = self.db.size_on_disk().map_err(self.sled_err("size on disk"))?;
        let segments = retention::dir_usage(self.segments.dir()).map_err(|(file, source)| {
            StoreError::Usage { path: self.path.clone(), file, source }
        })?;
        Ok(sled + segments)
    }

    /// Refuses every write once one has failed: see [`StoreError::Poisoned`].
    fn usable(&self) -> Result<()> {
        self.commits.usable(&self.path)
    }

    /// A failed write or commit (not a refusal, which writes nothing) poisons the store.
    fn poison_on_error<T>(&self, r: Result<T>) -> Result<T> {
        self.commits.poison_on_error(r)
    }

    fn sled_err(&self, op: impl Into<String>) -> impl FnOnce(sled::Error) -> StoreError + '_ {
        let op = op.into();
        move |source| StoreError::Sled { path: self.path.clone(), op, source }
    }

    fn segment_err(&self, (file, source): segments::FileError) -> StoreError {
        StoreError::Segment { path: self.path.clone(), file, source }
    }

    fn corrupt(&self, tree: &'static str, key: &[u8], what: impl Into<String>) -> StoreError {
        corrupt(&self.path, tree, key, what)
    }

    fn refused(&self, what: impl Into<String>) -> StoreError {
        StoreError::Refused { path: self.path.clone(), what: what.into() }
    }
}

/// The directories whose entries opening a store at `path` must make durable: each ancestor
/// of `path` that does not exist yet (sled creates it), the outermost first, and `path` itself,
/// new or not (a process killed after sled created it and before its parent was synced leaves
/// it existing and not durable).
fn dirs_to_sync(path: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .take_while(|p| !p.as_os_str().is_empty() && !p.exists())
        .map(PathBuf::from)
        .collect();
    dirs.reverse();
    dirs.push(path.to_path_buf());
    dirs
}

/// Makes the entries of `dirs` durable: an fsync of each one's parent. sled creates the store's
/// directory (and missing parents) without one, so a power cut before some other program synced
/// the parent took the whole store, committed records and all; the store's own commits sync
/// only what is inside its directory (`fsync.rs`). One fsync per open for an existing store.
/// Found by `tests/power_loss.rs` (`regression_a_new_store_survives_a_cut_after_its_first_commit`).
fn sync_parents(dirs: &[PathBuf]) -> std::result::Result<(), (PathBuf, std::io::Error)> {
    for dir in dirs {
        let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::File::open(parent)
            .and_then(|d| fsync::sync(&d))
            .map_err(|e| (parent.to_path_buf(), e))?;
    }
    Ok(())
}

/// sled's configuration for the store in `path`.
fn sled_config(path: &Path, opts: &StoreOptions) -> sled::Config {
    sled::Config::new().path(path).cache_capacity(opts.cache_bytes).flush_every_ms(None)
}

/// How many times, 10 ms apart, [`Store::open`] tries to take sled's file lock (2 s in all).
const LOCK_TRIES: u32 = 200;

/// sled opened on a closed store's directory `dir` directly, as [`Store::open`] opens it: no
/// background flusher, and waiting for the file lock that a dropped store's IO threads may still
/// hold. For tests that write into the trees to damage a store; everything else goes through
/// [`Store`].
#[doc(hidden)]
pub fn open_sled_directly(dir: &Path) -> sled::Result<sled::Db> {
    open_waiting_for_lock(&sled::Config::new().path(dir).flush_every_ms(None))
}

/// Opens sled, retrying for up to 2 s while its file lock is held. Dropping a sled 0.34 `Db`
/// does not close its file at once: tasks on sled's IO thread pool can still hold it for a
/// moment, so reopening the same directory in the same process can find the lock taken (the
/// model test's Restart did). sled's own tests block on the lock for this reason
/// (`src/config.rs`, `lock_exclusive` under its `testing` feature). Another process that holds
/// the database still makes this fail after the wait. Counts tries rather than reading a clock.
fn open_waiting_for_lock(config: &sled::Config) -> sled::Result<sled::Db> {
    let mut tries = 1;
    loop {
        match config.open() {
            Err(sled::Error::Io(e))
                if e.to_string().contains("could not acquire lock") && tries < LOCK_TRIES =>
            {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

fn corrupt(path: &Path, tree: &'static str, key: &[u8], what: impl Into<String>) -> StoreError {
    StoreError::Corrupt { path: path.to_path_buf(), tree, key: show_key(key), what: what.into() }
}

/// A key printed readably: a u64 as its number, `o/` or `l/` + u64 as `o/N`, else escaped bytes.
fn show_key(key: &[u8]) -> String {
    if let Ok(b) = <[u8; 8]>::try_from(key) {
        return u64::from_be_bytes(b).to_string();
    }
    for prefix in [&b"o/"[..], b"l/"] {
        if let Some(b) = key.strip_prefix(prefix).and_then(|r| <[u8; 8]>::try_from(r).ok()) {
            return format!("{}{}", prefix.escape_ascii(), u64::from_be_bytes(b));
        }
    }
    key.escape_ascii().to_string()
}

/// A u64 stored as exactly 8 big-endian bytes.
fn decode_u64(path: &Path, tree: &'static str, key: &[u8], value: &[u8]) -> Result<u64> {
    <[u8; 8]>::try_from(value).map(u64::from_be_bytes).map_err(|_| {
        corrupt(path, tree, key, format!("expected an 8-byte integer, found {} bytes", value.len()))
    })
}

#[cfg(test)]
mod tests;
