//! `linegate run`: the durable pipeline, an async shell around the pure cores (ARCHITECTURE.md:
//! sources → journal → decide → outbox → forward).
//!
//! - One ingest task per `kind = "trace"` source ([`ingest`]) journals lines with group commit
//!   and hands committed batches to the decide stage over a bounded channel.
//! - The decide stage ([`stage`]), a dedicated thread, decides them and checkpoints decider
//!   state, outbox, ledger, quarantine and alert archive in one batch ([`outputs`]).
//! - A forwarder ([`forward`]) plugs into a slot and is woken when the outbox grows.
//!
//! All stages share one [`Store`] behind a mutex (sled holds a file lock: one process); sled work
//! runs on blocking threads, never on the reactor. A start on an existing store ledgers a
//! `Restart` and resumes: the decide stage from its checkpoint (journal records after it are
//! decided again, exactly as before), each source right after its last journaled record.
//! Stopping (SIGTERM, SIGINT, or the end of every source with `exit_at_end`) commits what was
//! read, decides and checkpoints it, lets the forwarder drain, and returns.

pub mod audit;
pub mod forward;
pub mod forward_mqtt;
mod ingest;
pub mod outputs;
pub mod records;
mod stage;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{mpsc, watch, Notify};

use crate::clock::{Clock, SystemClock};
use crate::config::{Config, SourceConfig};
use crate::ledger::{LedgerEntry, LedgerRecord};
use crate::store::{Store, StoreError, StoreOptions};

pub use forward::{ForwardCtx, ForwardSlot};

/// The store, shared by every stage.
pub type SharedStore = Arc<Mutex<Store>>;

/// A named fault-injection point of the pipeline (`failpoints` feature): a `return` action makes
/// the enclosing function fail with [`AppError::Injected`].
macro_rules! failpoint {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        fail::fail_point!($name, |_| Err($crate::app::AppError::Injected { point: $name }));
    };
}
pub(crate) use failpoint;

/// What can stop the pipeline.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the checkpoint's payload does not decode: {0}")]
    Checkpoint(String),
    #[error("outbox record {seq} does not decode: {why}")]
    Outbox { seq: u64, why: String },
    #[error("the {0} stage stopped unexpectedly")]
    StageGone(&'static str),
    #[error(transparent)]
    Forward(#[from] crate::forward::ForwardError),
    #[error("a pipeline task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("the store's lock was poisoned by a panic in another stage")]
    LockPoisoned,
    #[error("fault injected at failpoint {point}")]
    Injected { point: &'static str },
    #[error("source {index} (kind {kind}): `linegate run` reads trace sources only so far; `linegate probe` reads this one")]
    UnsupportedSource { index: usize, kind: &'static str },
}

/// Locks the shared store.
pub fn lock(store: &SharedStore) -> Result<MutexGuard<'_, Store>, AppError> {
    store.lock().map_err(|_| AppError::LockPoisoned)
}

/// How `run` runs.
#[derive(Default)]
pub struct RunOptions {
    /// Stop once every source is at its end and everything read is decided and checkpointed.
    pub exit_at_end: bool,
    /// The forwarder; `None` leaves records queued.
    pub forward: Option<ForwardSlot>,
    pub store: StoreOptions,
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("exit_at_end", &self.exit_at_end)
            .field("forward", &self.forward.is_some())
            .finish()
    }
}

/// Runs the pipeline until `shutdown` completes (or, with `exit_at_end`, every source ends).
pub async fn run(
    config: Config,
    opts: RunOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), AppError> {
    if let Some((index, source)) =
        config.source.iter().enumerate().find(|(_, s)| !matches!(s, SourceConfig::Trace(_)))
    {
        return Err(AppError::UnsupportedSource { index, kind: source.kind() });
    }
    let path = config.store.path.clone();
    let store_opts = opts.store.clone();
    let store = tokio::task::spawn_blocking(move || Store::open(&path, store_opts)).await??;
    let store: SharedStore = Arc::new(Mutex::new(store));
    let outbox_grew = Arc::new(Notify::new());
    let config = Arc::new(config);
    let (catchup_end, offsets, stage) = {
        let (store, grew, config) = (store.clone(), outbox_grew.clone(), config.clone());
        tokio::task::spawn_blocking(move || start(&config, store, grew)).await??
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let (tx, rx) = mpsc::channel(4);
    let decide = tokio::task::spawn_blocking(move || stage.run(catchup_end, rx));
    let mut ingests = tokio::task::JoinSet::new();
    for (i, source) in config.source.iter().enumerate() {
        let SourceConfig::Trace(trace) = source else { continue };
        let source = u16::try_from(i).unwrap_or(crate::store::Origin::RELEASED - 1);
        let p = ingest::IngestParams {
            source,
            trace: trace.clone(),
            offset: offsets.get(&source).copied().unwrap_or(0),
            commit_records: config.store.commit_records,
            commit_interval_ms: config.store.commit_interval_ms,
            exit_at_end: opts.exit_at_end,
        };
        ingests.spawn(ingest::ingest(p, store.clone(), tx.clone(), stop_rx.clone()));
    }
    drop(tx);
    let forward = opts.forward.map(|slot| {
        let ctx = ForwardCtx { store: store.clone(), outbox_grew, stop: stop_rx.clone() };
        tokio::spawn(slot(ctx))
    });
    let ingest_result = {
        tokio::pin!(shutdown);
        let mut result = Ok(());
        loop {
            tokio::select! {
                _ = &mut shutdown, if !*stop_rx.borrow() => { let _ = stop_tx.send(true); }
                joined = ingests.join_next() => match joined {
                    None => break,
                    Some(r) => if let Err(e) = r.map_err(AppError::from).and_then(|r| r) {
                        let _ = stop_tx.send(true);
                        result = Err(e);
                    }
                }
            }
        }
        result
    };
    let decided = decide.await.map_err(AppError::from).and_then(|r| r);
    let _ = stop_tx.send(true);
    let forwarded = match forward {
        Some(f) => f.await.map_err(AppError::from).and_then(|r| r),
        None => Ok(()),
    };
    // The decide stage's own error explains an ingest task's `StageGone`: report it first.
    decided.and(ingest_result).and(forwarded)
}

/// On a store that holds anything, ledgers a `Restart`. Returns the journal position this start
/// begins at, where each source resumes, and the decide stage restored from its checkpoint.
fn start(
    config: &Config,
    store: SharedStore,
    grew: Arc<Notify>,
) -> Result<(u64, std::collections::BTreeMap<u16, u64>, stage::DecideStage), AppError> {
    let stage = stage::DecideStage::restore(config, store.clone(), grew)?;
    let mut offsets = stage.offsets().clone();
    let mut s = lock(&store)?;
    let journal_next = s.next_journal_pos();
    for i in 0..config.source.len() {
        let i = u16::try_from(i).unwrap_or(crate::store::Origin::RELEASED - 1);
        if let Some(o) = s.journal_last_offset(i)? {
            let e = offsets.entry(i).or_insert(0);
            *e = (*e).max(o);
        }
    }
    if journal_next > 1 || s.next_ledger_seq() > 1 {
        let (outbox_pending, _) = s.outbox_depth()?;
        let entry = LedgerEntry::Restart {
            checkpoint_pos: s.checkpoint_pos(),
            journal_next,
            outbox_pending,
        };
        s.append_ledger(&[LedgerRecord::new(SystemClock::new().now_ms(), entry)])?;
    }
    failpoint!("app::start::after_restart");
    Ok((journal_next, offsets, stage))
}

/// Completes on SIGTERM or SIGINT (or at once if the handlers cannot be installed, so the
/// pipeline stops cleanly rather than becoming unkillable).
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (term, int) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()));
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: finishing the current batch"),
                _ = int.recv() => tracing::info!("SIGINT: finishing the current batch"),
            }
        }
        (Err(e), _) | (_, Err(e)) => tracing::error!("cannot install signal handlers: {e}"),
    }
}
