//! `linegate run`: the durable pipeline, an async shell around the pure cores (docs/architecture.md:
//! sources → journal → decide → outbox → forward).
//!
//! - One ingest task per source (`crate::ingest`) journals lines with group commit and hands
//!   committed batches to the decide stage over a bounded channel (a live source without ever
//!   waiting for it).
//! - The decide stage (`crate::decide::stage`), a dedicated thread, decides them and checkpoints
//!   decider state, outbox, ledger, quarantine and alert archive in one batch.
//! - A forwarder ([`forward`]) plugs into a slot and is woken when the outbox grows.
//!
//! All stages share one [`Store`] ([`SharedStore`]: sled holds a file lock, so one process; the
//! rules of its lock are the store's). Sled work runs on blocking threads, never on the reactor. A start on an existing store ledgers a
//! `Restart` and resumes: the decide stage from its checkpoint (journal records after it are
//! decided again, exactly as before), each source right after its last journaled record or its position kept beside the
//! checkpoint (`n/source/`), whichever is further.
//! Stopping (SIGTERM, SIGINT, or the end of every source with `exit_at_end`) commits what was
//! read, decides and checkpoints it, lets the forwarder drain, and returns ([`shutdown`]: within
//! a bounded time after a signal).
//!
//! Around the stages: the store opens with `Store::open_or_recover` (what a damaged database
//! still holds is salvaged into a fresh one, the damaged one moved aside, and the daemon goes on),
//! the metrics sampler (`crate::audit::sampler`) feeds the metrics served on `[metrics] listen`,
//! `crate::retention` keeps the store within `[store] max_bytes`, and systemd hears READY=1 once the
//! store is open and the sources started, WATCHDOG=1 while the decide stage makes progress
//! (`crate::telemetry::watchdog`), STOPPING=1 when a signal stops it.

pub mod forward;
pub mod forward_mqtt;
pub mod shutdown;

use std::sync::Arc;

use tokio::sync::{mpsc, watch, Notify};

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::store::{SharedStore, Store, StoreError, StoreOptions};

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
    #[error("outbox record {seq} does not decode: {why}")]
    Outbox { seq: u64, why: String },
    #[error("the {0} stage stopped unexpectedly")]
    StageGone(&'static str),
    #[error(transparent)]
    Forward(#[from] crate::forward::ForwardError),
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
    let telemetry = crate::telemetry::Telemetry::new();
    let started_ms = SystemClock::new().now_ms();
    let metrics_listener = crate::telemetry::http::bind(&config.metrics.listen).await;
    let (store, recovered) = open_store(&config, opts.store.clone()).await?;
    telemetry.metrics.set_start(started_ms, recovered);
    telemetry.metrics.set_limits(config.store.max_bytes, config.time.allowed_lateness_ms);
    let version = crate::config::rule_version::rule_version(&config);
    telemetry.metrics.set_rule(&config.rule.name, &version);
    let store = SharedStore::new(store);
    let outbox_grew = Arc::new(Notify::new());
    let config = Arc::new(config);
    let (catchup_end, offsets, stage) = {
        let (store, grew, config) = (store.clone(), outbox_grew.clone(), config.clone());
        let t = telemetry.clone();
        tokio::task::spawn_blocking(move || start(&config, store, grew, t)).await??
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let (tx, rx) = mpsc::channel(4);
    let control = crate::control::server::Daemon {
        store: store.clone(),
        config: config.clone(),
        decide: tx.downgrade(),
        telemetry: telemetry.clone(),
        started_ms,
    };
    let page: crate::telemetry::http::Page = {
        let d = control.clone();
        Arc::new(move || crate::control::server::status_page(&d))
    };
    let mut services =
        spawn_services(&config, &store, &telemetry, metrics_listener, page, &stop_rx);
    services.extend(spawn_control(control, &stop_rx));
    let decide = tokio::task::spawn_blocking(move || stage.run(catchup_end, rx));
    let mut ingests = tokio::task::JoinSet::new();
    for (i, source) in config.source.iter().enumerate() {
        let index = u16::try_from(i).unwrap_or(crate::records::journal::Origin::RELEASED - 1);
        let offset = offsets.get(&index).copied().unwrap_or(0);
        let (store, tx, stop) = (store.clone(), tx.clone(), stop_rx.clone());
        let p = crate::ingest::Params {
            source: index,
            resume_at: offset,
            commit_records: config.store.commit_records,
            commit_interval_ms: config.store.commit_interval_ms,
            telemetry: telemetry.clone(),
            raw_threshold: opts.store.raw_threshold,
        };
        let task = crate::ingest::run(source.clone(), p, opts.exit_at_end, store, tx, stop);
        ingests.spawn(async move { task.await.map_err(AppError::from) });
    }
    drop(tx);
    let mut forward = opts.forward.map(|slot| {
        let ctx = ForwardCtx {
            store: store.clone(),
            outbox_grew,
            stop: stop_rx.clone(),
            stats: telemetry.forward.clone(),
        };
        tokio::spawn(slot(ctx))
    });
    crate::telemetry::watchdog::ready("running: store open, sources started");
    // Pings only after READY=1: systemd ignores WATCHDOG=1 before it.
    services.extend(spawn_watchdog(&telemetry, &stop_rx));
    let mut signalled = false;
    // A forwarder that ends before the stop (a store error) fails the daemon closed: it stops,
    // committing what was read, and exits with that error, so the service manager restarts it
    // with the outbox intact, rather than going on deciding with nothing forwarded.
    let mut forward_ended: Option<Result<(), AppError>> = None;
    let ingest_result = {
        tokio::pin!(shutdown);
        let mut result = Ok(());
        loop {
            tokio::select! {
                joined = async { forward.as_mut().expect("guarded below").await },
                    if forward.is_some() && forward_ended.is_none() && !*stop_rx.borrow() =>
                {
                    let r = joined.map_err(AppError::from).and_then(|r| r);
                    let r = r.and(Err(AppError::StageGone("forward")));
                    if let Err(e) = &r {
                        tracing::error!(error = %e, "the forwarder stopped: stopping the daemon");
                    }
                    let _ = stop_tx.send(true);
                    forward_ended = Some(r);
                }
                _ = &mut shutdown, if !*stop_rx.borrow() => {
                    signalled = true;
                    crate::telemetry::watchdog::stopping("stopping: committing what was read");
                    let _ = stop_tx.send(true);
                }
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
    let decided = decide.await.map_err(AppError::from).and_then(|r| r.map_err(AppError::from));
    let _ = stop_tx.send(true);
    let forwarded = match (forward_ended, forward) {
        (Some(ended), _) => ended,
        (None, Some(f)) if signalled => shutdown::drain_forwarder(f, shutdown::FORWARD_DRAIN).await,
        (None, Some(f)) => f.await.map_err(AppError::from).and_then(|r| r),
        (None, None) => Ok(()),
    };
    if decided.is_ok() {
        crate::retention::run_once(&store, &config, &telemetry).await;
    }
    for s in &services {
        s.abort();
    }
    // The aborted tasks' clones of the store go before the close below, within its bound.
    let _ = tokio::time::timeout(shutdown::STORE_CLOSE, join_all(services)).await;
    shutdown::close_store(store, shutdown::STORE_CLOSE).await;
    // The decide stage's own error explains an ingest task's `StageGone`: report it first; an
    // ingest task's error of another kind is logged rather than lost.
    if let (Err(_), Err(e)) = (&decided, &ingest_result) {
        if !matches!(e, AppError::Ingest(crate::ingest::IngestError::StageGone("decide"))) {
            tracing::error!(error = %e, "an ingest task failed too");
        }
    }
    decided.and(ingest_result).and(forwarded)
}

/// Waits for every task of `tasks` to end (aborted ones included).
async fn join_all(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for t in tasks {
        let _ = t.await;
    }
}

/// On a store that holds anything, ledgers a `Restart`. Returns the journal position this start
/// begins at, where each source resumes, and the decide stage restored from its checkpoint.
fn start(
    config: &Config,
    store: SharedStore,
    grew: Arc<Notify>,
    telemetry: crate::telemetry::Telemetry,
) -> Result<(u64, std::collections::BTreeMap<u16, u64>, crate::decide::stage::DecideStage), AppError>
{
    let stage = crate::decide::stage::DecideStage::restore(config, store.clone(), grew, telemetry)?;
    let mut offsets = stage.offsets().clone();
    let mut s = store.write();
    let journal_next = s.next_journal_pos();
    // The checkpoint's offsets cover every record up to its position: only later ones can be ahead.
    let covered = s.checkpoint_pos();
    for i in 0..config.source.len() {
        let i = u16::try_from(i).unwrap_or(crate::records::journal::Origin::RELEASED - 1);
        if let Some(o) = s.journal_last_offset(i, covered)? {
            let e = offsets.entry(i).or_insert(0);
            *e = (*e).max(o);
        }
    }
    if journal_next > 1 || s.next_ledger_seq() > 1 {
        let outbox_pending = s.outbox_records();
        let entry = LedgerEntry::Restart {
            checkpoint_pos: s.checkpoint_pos(),
            journal_next,
            outbox_pending,
        };
        let mut records = vec![LedgerRecord::new(SystemClock::new().now_ms(), entry)];
        if let Some(from) = &stage.rule_changed {
            let to = crate::config::rule_version::rule_version(config);
            let from = from.clone();
            tracing::warn!(%from, %to, "the rule changed since the checkpoint: the new rule decides from here on");
            let entry = LedgerEntry::RuleChanged { from, to, journal_pos: s.checkpoint_pos() + 1 };
            records.push(LedgerRecord::new(SystemClock::new().now_ms(), entry));
        }
        s.append_ledger(&records)?;
    }
    failpoint!("app::start::after_restart", crate::app::AppError);
    Ok((journal_next, offsets, stage))
}

/// Opens the store, recovering from a damaged one (what can be read is salvaged into a fresh
/// store, the damaged one moved aside, a `Recovery` ledger record): the daemon keeps running
/// rather than crash-looping. A checkpoint the decide stage cannot restore is such damage too:
/// the store is recovered without it, and the decide stage re-derives its state.
async fn open_store(config: &Config, opts: StoreOptions) -> Result<(Store, bool), AppError> {
    use crate::decide::stage::StageError;
    let path = config.store.path.clone();
    let opts = StoreOptions { dedup_page_check: Some(crate::rule::dedup::page_reads), ..opts };
    let now_ms = SystemClock::new().now_ms();
    let (store, recovered) = tokio::task::spawn_blocking(move || {
        shutdown::panics_caught(|| Store::open_or_recover(&path, opts, now_ms))
    })
    .await??;
    log_recovery(recovered.as_ref());
    let Err(StageError::Checkpoint(why)) = crate::decide::stage::check_checkpoint(config, &store)
    else {
        return Ok((store, recovered.is_some()));
    };
    let cause = StoreError::Corrupt {
        path: config.store.path.clone(),
        tree: "state",
        key: "c/".into(),
        what: format!("the checkpoint does not restore: {why}"),
    };
    let (store, recovered) = tokio::task::spawn_blocking(move || {
        shutdown::panics_caught(|| store.recover(&cause, now_ms))
    })
    .await??;
    log_recovery(Some(&recovered));
    Ok((store, true))
}

fn log_recovery(recovered: Option<&crate::store::Recovered>) {
    if let Some(r) = recovered {
        tracing::error!(
            what = %r.what,
            moved_to = %r.moved_to.display(),
            lost = %r.lost,
            "the store was damaged: moved aside, going on with what could be salvaged"
        );
    }
}

/// The tasks beside the stages: the metrics endpoint, the store sampler and the retention
/// budget. They end when `stop` is set (or are aborted when `run` returns).
fn spawn_services(
    config: &Arc<Config>,
    store: &SharedStore,
    t: &crate::telemetry::Telemetry,
    metrics_listener: Option<tokio::net::TcpListener>,
    page: crate::telemetry::http::Page,
    stop: &watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    if let Some(listener) = metrics_listener {
        let serve = crate::telemetry::http::serve(
            listener,
            t.metrics.clone(),
            Some(page),
            stopped(stop.clone()),
        );
        tasks.push(tokio::spawn(async move {
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "metrics endpoint stopped");
            }
        }));
    }
    let sample =
        crate::audit::sampler::sample_loop(store.clone(), t.clone(), config.clone(), stop.clone());
    tasks.push(tokio::spawn(sample));
    let retention =
        crate::retention::retention_loop(store.clone(), config.clone(), t.clone(), stop.clone());
    tasks.push(tokio::spawn(retention));
    tasks
}

/// The control socket (`crate::control`), served until `stop` is set. A socket that cannot be
/// bound is logged, not fatal: the data path matters more than the operator's window on it.
fn spawn_control(
    daemon: crate::control::server::Daemon,
    stop: &watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<()>> {
    let path = crate::control::socket_path(&daemon.config);
    match crate::control::server::bind(&path) {
        Ok(listener) => {
            tracing::info!(socket = %path.display(), "control socket listening");
            let serve =
                crate::control::server::serve(listener, path, daemon, stopped(stop.clone()));
            Some(tokio::spawn(serve))
        }
        Err(e) => {
            tracing::error!(socket = %path.display(), error = %e, "control socket not served: cannot bind");
            None
        }
    }
}

/// systemd's watchdog pings (with `WATCHDOG_USEC` set), until `stop` is set.
fn spawn_watchdog(
    t: &crate::telemetry::Telemetry,
    stop: &watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<()>> {
    let heartbeat = t.heartbeat.clone();
    crate::telemetry::watchdog::spawn_systemd_watchdog(
        WATCHDOG_STALL_AFTER,
        heartbeat,
        stopped(stop.clone()),
    )
}

/// Completes once `stop` is set.
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
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
