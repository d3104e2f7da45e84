//! The ingest room: one task per configured source of `linegate run`, each turning what its
//! source yields into journal records, group-committing them, and only then handing them to the
//! decide stage (docs/architecture.md, "The checkpoint boundary": journal first). The shell
//! between a source and the store; it never decides.
//!
//! - [`trace`]: a `kind = "trace"` source, read from its resume offset, waiting for room in the
//!   decide stage's channel (a slow decide stage stops the reading).
//! - [`live`]: the live sources' common task: blocks of raw samples become trace `samples`
//!   lines (so live and recorded data are decided the same way), declared gaps go to the outbox,
//!   clock steps to the ledger, and batches are offered to the decide stage without waiting (the
//!   journal absorbs what it cannot take yet). Its adapters: [`bus`] (an ADXL345 over I2C or SPI,
//!   the FIFO read loop of `crate::source::bus` on its own thread) and [`modbus`] (the poller of
//!   `crate::source::modbus`).
//! - [`journal`]: the group commit every task uses (one fsync per batch, the `journal` span, the
//!   commit's duration to the telemetry).
//!
//! Each task is started by [`run`] with the same [`Params`]. What touches devices is
//! `crate::source`'s; what touches sled is `crate::store`'s (through `SharedStore`).

pub mod bus;
pub mod live;
pub mod modbus;
pub mod trace;

use tokio::sync::{mpsc, watch};

use crate::clock::{Clock, SystemClock};
use crate::config::SourceConfig;
use crate::decide::input::DecideBatch;
use crate::records::journal::{JournalRecord, Origin};
use crate::store::{PreparedJournal, SharedStore, StoreError};
use crate::telemetry::Telemetry;

/// What stops an ingest task.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the {0} stage stopped unexpectedly")]
    StageGone(&'static str),
    #[error("a pipeline task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("source {index} (kind {kind}) was handed to an ingest task for another kind")]
    UnsupportedSource { index: usize, kind: &'static str },
    #[error("fault injected at failpoint {point}")]
    Injected { point: &'static str },
}

/// How an ingest task runs, whatever its source's kind.
#[derive(Debug, Clone)]
pub struct Params {
    /// The source index (the journal origin).
    pub source: u16,
    /// Where the source resumes: a trace's byte offset after its last journaled line, a live
    /// source's count of lines journaled (origins count on from there).
    pub resume_at: u64,
    pub commit_records: usize,
    pub commit_interval_ms: i64,
    /// Where the group commits report their duration, and bus sources their overruns.
    pub telemetry: Telemetry,
    /// The store's `raw_threshold` (a line this long goes to a segment file).
    pub raw_threshold: usize,
}

/// Runs the ingest task of `source` until it ends (a trace at its end with `exit_at_end`) or
/// `stop` is set; batches go to the decide stage on `tx`.
pub async fn run(
    source: SourceConfig,
    p: Params,
    exit_at_end: bool,
    store: SharedStore,
    tx: mpsc::Sender<DecideBatch>,
    stop: watch::Receiver<bool>,
) -> Result<(), IngestError> {
    match source {
        SourceConfig::Trace(t) => trace::ingest(p, t, exit_at_end, store, tx, stop).await,
        SourceConfig::Modbus(m) => modbus::ingest(p, m, store, tx, stop).await,
        SourceConfig::I2c(_) | SourceConfig::Spi(_) => {
            bus::ingest(p, source, store, tx, stop).await
        }
    }
}

/// One line read: `(at, origin, bytes)` as the journal takes it.
pub(crate) type Line = (i64, Origin, Vec<u8>);

/// Appends `lines` to the journal and commits: one group commit, one fsync for the batch, its
/// duration (append, flush, fsync) reported to `telemetry`. Returns the
/// records as the decide stage takes them, their lines parsed (after the commit, on this
/// thread: `crate::decide::input`).
pub(crate) async fn journal(
    store: &SharedStore,
    telemetry: &Telemetry,
    raw_threshold: usize,
    lines: Vec<Line>,
) -> Result<DecideBatch, IngestError> {
    let store = store.clone();
    let (records, took_s) = tokio::task::spawn_blocking(move || {
        // A fresh clock: its monotonic reading is the time since this line.
        let clock = SystemClock::new();
        // Encoded and packed before the lock is taken: the decide stage's checkpoints and the
        // forwarder wait for sled's batch alone.
        let prepared = PreparedJournal::new(&lines, raw_threshold);
        let mut s = store.write();
        let range = match prepared {
            Some(p) => s.append_prepared_journal(p)?,
            None => s.append_journal_from(&lines)?,
        };
        // The journal stage's span: which positions this group commit made durable.
        let _span = tracing::debug_span!(
            "journal",
            journal_from = range.start,
            journal_to = range.end.saturating_sub(1),
            lines = lines.len()
        )
        .entered();
        // Committed without the lock: the other stages read and write meanwhile.
        store.commit_released(s)?;
        let took_s = clock.monotonic_s();
        let records: Vec<JournalRecord> = range
            .zip(lines)
            .map(|(pos, (at, origin, line))| JournalRecord { pos, at, origin: Some(origin), line })
            .collect();
        Ok::<_, IngestError>((DecideBatch::parsed(records), took_s))
    })
    .await??;
    telemetry.journal_committed(took_s);
    failpoint!("app::ingest::after_commit", crate::ingest::IngestError);
    Ok(records)
}
