//! The app room: `linegate run`'s wiring and nothing else — which stage runs where, what they
//! share, how the daemon starts, watches itself and stops (docs/architecture.md: sources →
//! journal → decide → outbox → forward). The stages are their rooms' own:
//!
//! - one ingest task per source (`crate::ingest`) journals lines with group commit and hands
//!   committed batches to the decide stage over a bounded channel (a live source without ever
//!   waiting for it);
//! - the decide stage (`crate::decide::stage`), a dedicated thread, decides them and checkpoints
//!   decider state, outbox, ledger, quarantine and alert archive in one batch;
//! - a forwarder plugs into a slot ([`forward`]: the MQTT forwarder of `crate::forward`, or an
//!   in-process consumer) and is woken when the outbox grows;
//! - beside them: the metrics endpoint and sampler (`crate::telemetry`, `crate::audit::sampler`),
//!   the retention budget (`crate::retention`), the control socket (`crate::control`, answering
//!   with `crate::audit`) and systemd's watchdog.
//!
//! All of them share one store (`crate::store::SharedStore`: sled holds a file lock, so one
//! process; the rules of its lock are the store's). Sled work runs on blocking threads, never on
//! the reactor.
//!
//! - `resume.rs`: the store opened with `Store::open_or_recover`
//!   (what a damaged database still holds is salvaged into a fresh one, the damaged one moved
//!   aside, and the daemon goes on), the decide stage restored from its checkpoint, a `Restart`
//!   ledgered, each source's resume position.
//! - `pipeline.rs`: `start` (the topology; READY=1 to systemd once the store is open and the
//!   sources started), `Pipeline::supervise` (until the stop: a signal, every source's end with
//!   `exit_at_end`, an ingest task's error or the forwarder's end) and `Pipeline::stop` (the
//!   decide stage checkpoints what was read, the forwarder drains, the store closes).
//! - [`shutdown`]: stopping within a bounded time after SIGTERM or SIGINT (STOPPING=1), and
//!   failing fast on a panic.
//!
//! Nothing outside `cli`, `demo` and `main` imports this room (`tests/module_graph.rs`).

pub mod forward;
mod pipeline;
mod resume;
pub mod shutdown;

use crate::config::Config;
use crate::store::{StoreError, StoreOptions};

pub use forward::{ForwardCtx, ForwardSlot};

/// What can stop the pipeline.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Decide(#[from] crate::decide::stage::StageError),
    #[error(transparent)]
    Ingest(#[from] crate::ingest::IngestError),
    #[error("the {0} stage stopped unexpectedly")]
    StageGone(&'static str),
    #[error(transparent)]
    Forward(#[from] crate::forward::ForwardError),
    #[error(transparent)]
    Sparkplug(#[from] crate::sparkplug::SparkplugError),
    #[error("a pipeline task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("fault injected at failpoint {point}")]
    Injected { point: &'static str },
    #[error("shutdown did not finish within {after:?} of the signal; the next start resumes from the store")]
    ShutdownTimeout { after: std::time::Duration },
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
///
/// A stored record found damaged while running ([`AppError::store_damage`]) stops the daemon
/// like any store error, and first asks the next start to salvage the store (a marker in its
/// directory, `crate::store::request_salvage`): restarted, it salvages rather than stopping on
/// the same record again (fail closed, never a crash loop).
pub async fn run(
    config: Config,
    opts: RunOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), AppError> {
    let path = config.store.path.clone();
    let r = run_pipeline(config, opts, shutdown).await;
    if let Some(damage) = r.as_ref().err().and_then(AppError::store_damage) {
        match crate::store::request_salvage(&path, &damage) {
            Ok(marker) => tracing::error!(
                tree = %damage.tree,
                key = %damage.key,
                error = %damage.error,
                marker = %marker.display(),
                "a stored record is damaged: the store is marked for salvage at the next start; stopping"
            ),
            Err(e) => tracing::error!(
                error = %damage.error,
                "a stored record is damaged, and the salvage marker could not be written: {e}"
            ),
        }
    }
    r
}

impl AppError {
    /// The stored record this error found damaged (one that does not decode), if any: a store
    /// error `Corrupt` from any stage, or an outbox or journal record the decide stage or the
    /// forwarder could not decode.
    pub fn store_damage(&self) -> Option<crate::store::Damage> {
        use crate::decide::stage::StageError;
        use crate::forward::FetchError;
        use crate::ingest::IngestError;
        use crate::store::Damage;
        let named = |tree: &str, key: String| {
            Some(Damage { tree: tree.into(), key, error: self.to_string() })
        };
        match self {
            AppError::Store(e)
            | AppError::Decide(StageError::Store(e))
            | AppError::Ingest(IngestError::Store(e)) => Damage::of(e),
            AppError::Decide(StageError::Outbox { seq, .. }) => named("state", format!("o/{seq}")),
            AppError::Forward(crate::forward::ForwardError::Store(f)) => match f {
                FetchError::Store(e) => Damage::of(e),
                FetchError::BadRecord { seq, .. } => named("state", format!("o/{seq}")),
                FetchError::BadSamples { journal_pos, .. } => {
                    named("journal", journal_pos.to_string())
                }
            },
            _ => None,
        }
    }
}

async fn run_pipeline(
    config: Config,
    opts: RunOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), AppError> {
    let mut pipeline = pipeline::start(config, opts).await?;
    let ended = pipeline.supervise(shutdown).await;
    pipeline.stop(ended).await
}

/// Work pending and no progress for this long: the watchdog stops pinging (systemd restarts the
/// service once its `WatchdogSec` runs out).
pub const WATCHDOG_STALL_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// Completes on SIGTERM or SIGINT (or at once if the handlers cannot be installed, so the
/// pipeline stops cleanly rather than becoming unkillable). The handlers are installed when this
/// is called, not when the future is first polled: a SIGTERM right after READY=1 must not find
/// the default action (death) still in place. Call it inside the runtime.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let (term, int) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()));
    async move {
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
}
