//! The pipeline's wiring: [`start`] builds the topology (store, decide stage, services, control
//! socket, ingest tasks, forwarder), [`Pipeline::supervise`] watches it until it is told to stop
//! or a stage ends, and [`Pipeline::stop`] takes it down in order — the decide stage checkpoints
//! what was read, the forwarder drains, retention runs once, the services go, the store closes.

use std::sync::Arc;

use tokio::sync::{mpsc, watch, Notify};
use tokio::task::{JoinHandle, JoinSet};

use super::forward::ForwardCtx;
use super::resume::{open_store, resume, source_index, Resumed};
use super::{shutdown, AppError, RunOptions};
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::decide::stage::StageError;
use crate::ingest::IngestError;
use crate::store::SharedStore;
use crate::telemetry::Telemetry;

/// How many journaled batches (each up to `[store] commit_records` lines, read and parsed) wait
/// for the decide stage: an ingest task that finds the queue full waits (a trace) or leaves the
/// batch in the journal, which the stage reads back (a live source). One batch deciding, one
/// journaling and these two are a burst's lines in memory: with 4, a realistic burst held 5.9 MB
/// of lines read and parsed at its peak, with 2, 3.0 MB
/// (docs/decisions/0069-a-bursts-memory-by-configuration.md).
pub(crate) const DECIDE_QUEUE: usize = 2;

/// The pipeline while it runs.
pub(super) struct Pipeline {
    config: Arc<Config>,
    store: SharedStore,
    telemetry: Telemetry,
    stop_tx: watch::Sender<bool>,
    stop_rx: watch::Receiver<bool>,
    decide: JoinHandle<Result<(), StageError>>,
    ingests: JoinSet<Result<(), IngestError>>,
    forward: Option<JoinHandle<Result<(), AppError>>>,
    /// The tasks beside the stages: metrics endpoint, sampler, retention, control socket,
    /// watchdog.
    services: Vec<JoinHandle<()>>,
}

/// How supervision ended.
#[derive(Debug)]
pub(super) struct Supervised {
    /// Stopped by the shutdown signal.
    signalled: bool,
    /// The first ingest task's error, if any.
    ingest: Result<(), AppError>,
    /// The forwarder's end, when it ended before the stop.
    forward_ended: Option<Result<(), AppError>>,
}

/// Opens the store, restores the decide stage and starts every task; READY=1 once they run.
pub(super) async fn start(config: Config, opts: RunOptions) -> Result<Pipeline, AppError> {
    let telemetry = Telemetry::new();
    let started_ms = SystemClock::new().now_ms();
    let metrics_listener = crate::telemetry::http::bind(&config.metrics.listen).await;
    let (store, recovered) = open_store(&config, opts.store.clone()).await?;
    telemetry.metrics.set_start(started_ms, recovered);
    telemetry.metrics.set_limits(config.store.max_bytes, config.time.allowed_lateness_ms);
    for (name, version) in crate::config::rule_version::rule_versions(&config) {
        telemetry.metrics.set_rule(&name, &version);
    }
    let store = SharedStore::new(store);
    let outbox_grew = Arc::new(Notify::new());
    let config = Arc::new(config);
    let Resumed { catchup_end, offsets, stage } = {
        let (store, grew, config) = (store.clone(), outbox_grew.clone(), config.clone());
        let t = telemetry.clone();
        tokio::task::spawn_blocking(move || resume(&config, store, grew, t)).await??
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let (tx, rx) = mpsc::channel(DECIDE_QUEUE);
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
    let mut ingests = JoinSet::new();
    for (i, source) in config.source.iter().enumerate() {
        let p = crate::ingest::Params {
            source: source_index(i),
            resume_at: offsets.get(&source_index(i)).copied().unwrap_or(0),
            commit_records: config.store.commit_records,
            commit_interval_ms: config.store.commit_interval_ms,
            telemetry: telemetry.clone(),
            raw_threshold: opts.store.raw_threshold,
        };
        let (store, tx, stop) = (store.clone(), tx.clone(), stop_rx.clone());
        ingests.spawn(crate::ingest::run(source.clone(), p, opts.exit_at_end, store, tx, stop));
    }
    drop(tx);
    let forward = opts.forward.map(|slot| {
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
    Ok(Pipeline { config, store, telemetry, stop_tx, stop_rx, decide, ingests, forward, services })
}

impl Pipeline {
    /// Runs until every ingest task has ended: they end at the stop, which `shutdown`, an ingest
    /// task's error or the forwarder's end sets (or, with `exit_at_end`, at their sources' end).
    ///
    /// A forwarder that ends before the stop (a store error) fails the daemon closed: it stops,
    /// committing what was read, and exits with that error, so the service manager restarts it
    /// with the outbox intact, rather than going on deciding with nothing forwarded.
    pub(super) async fn supervise(
        &mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Supervised {
        let mut s = Supervised { signalled: false, ingest: Ok(()), forward_ended: None };
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                joined = async { self.forward.as_mut().expect("guarded below").await },
                    if self.forward.is_some() && s.forward_ended.is_none() && !*self.stop_rx.borrow() =>
                {
                    let r = joined.map_err(AppError::from).and_then(|r| r);
                    let r = r.and(Err(AppError::StageGone("forward")));
                    if let Err(e) = &r {
                        tracing::error!(error = %e, "the forwarder stopped: stopping the daemon");
                    }
                    let _ = self.stop_tx.send(true);
                    s.forward_ended = Some(r);
                }
                _ = &mut shutdown, if !*self.stop_rx.borrow() => {
                    s.signalled = true;
                    crate::telemetry::watchdog::stopping("stopping: committing what was read");
                    let _ = self.stop_tx.send(true);
                }
                joined = self.ingests.join_next() => match joined {
                    None => return s,
                    Some(r) => {
                        let r = r.map_err(AppError::from).and_then(|r| r.map_err(AppError::from));
                        if let Err(e) = r {
                            let _ = self.stop_tx.send(true);
                            s.ingest = Err(e);
                        }
                    }
                }
            }
        }
    }

    /// Takes the pipeline down once supervision ended: the decide stage finishes (everything
    /// read is decided and checkpointed), the forwarder drains (at most
    /// [`shutdown::FORWARD_DRAIN`] after a signal), retention checks the budget once, the
    /// services stop and the store closes (within [`shutdown::STORE_CLOSE`]). The decide stage's
    /// error comes first, then an ingest task's, then the forwarder's.
    pub(super) async fn stop(self, ended: Supervised) -> Result<(), AppError> {
        let Pipeline { config, store, telemetry, stop_tx, decide, forward, services, .. } = self;
        let Supervised { signalled, ingest, forward_ended } = ended;
        let decided = decide.await.map_err(AppError::from).and_then(|r| r.map_err(AppError::from));
        let _ = stop_tx.send(true);
        let forwarded = match (forward_ended, forward) {
            (Some(ended), _) => ended,
            (None, Some(f)) if signalled => {
                shutdown::drain_forwarder(f, shutdown::FORWARD_DRAIN).await
            }
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
        if let (Err(_), Err(e)) = (&decided, &ingest) {
            if !matches!(e, AppError::Ingest(IngestError::StageGone("decide"))) {
                tracing::error!(error = %e, "an ingest task failed too");
            }
        }
        decided.and(ingest).and(forwarded)
    }
}

/// Waits for every task of `tasks` to end (aborted ones included).
async fn join_all(tasks: Vec<JoinHandle<()>>) {
    for t in tasks {
        let _ = t.await;
    }
}

/// The tasks beside the stages: the metrics endpoint, the store sampler and the retention
/// budget. They end when `stop` is set (or are aborted when `run` returns).
fn spawn_services(
    config: &Arc<Config>,
    store: &SharedStore,
    t: &Telemetry,
    metrics_listener: Option<tokio::net::TcpListener>,
    page: crate::telemetry::http::Page,
    stop: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
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
) -> Option<JoinHandle<()>> {
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
fn spawn_watchdog(t: &Telemetry, stop: &watch::Receiver<bool>) -> Option<JoinHandle<()>> {
    let heartbeat = t.heartbeat.clone();
    crate::telemetry::watchdog::spawn_systemd_watchdog(
        super::WATCHDOG_STALL_AFTER,
        heartbeat,
        stopped(stop.clone()),
    )
}

/// Completes once `stop` is set.
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
