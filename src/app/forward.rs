//! The slot the forwarder plugs into: [`mqtt`], the MQTT forwarder of `crate::forward` on the
//! shared store, or [`local_ack`], an in-process consumer for tests and `--forward local-ack`.
//!
//! A forwarder gets the shared store, a [`Notify`] woken after every checkpoint that added
//! outbox records, and a stop signal. It reads `Store::outbox_pending`, publishes, and removes
//! records only after the broker's acknowledgement, ledgering `Published` for every record whose
//! PUBLISH was written and `Acknowledged` (with the removal, one commit) after its PUBACK, so
//! `linegate reconcile` holds whatever the broker does. Without a forwarder records stay queued
//! in the store.
//!
//! Stopping: when the pipeline stops (`--exit-at-end` after the last source ended and everything
//! is checkpointed, or SIGTERM/SIGINT), the MQTT forwarder keeps publishing until the outbox is
//! empty or `drain` has passed, whichever comes first, then disconnects. What is still queued
//! then stays in the store and goes first (as backlog) after the next start.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};

use super::AppError;
use crate::clock::{Clock, SystemClock};
use crate::forward::{ForwardError, ForwarderConfig};
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::store::SharedStore;

/// What a forwarder is given.
#[derive(Debug, Clone)]
pub struct ForwardCtx {
    pub store: SharedStore,
    /// Woken whenever the outbox grew (a permit is kept if nobody waits).
    pub outbox_grew: Arc<Notify>,
    /// Becomes true when the pipeline stops: drain what can be drained quickly, then return.
    pub stop: watch::Receiver<bool>,
    /// Counters the forwarder keeps for the metrics (connection state, PUBLISHes, PUBACKs).
    pub stats: Arc<crate::telemetry::ForwardStats>,
}

/// The forwarder's task.
pub type ForwardFuture = Pin<Box<dyn Future<Output = Result<(), AppError>> + Send>>;

/// Starts a forwarder: called once by `run` with its context.
pub type ForwardSlot = Box<dyn FnOnce(ForwardCtx) -> ForwardFuture + Send>;

/// How many outbox records one acknowledgement batch removes.
const ACK_BATCH: usize = 1000;

/// An in-process consumer that "publishes" every outbox record to nowhere and acknowledges it
/// at once: `Published` then `Acknowledged` in the ledger, the removal batched (one commit per
/// batch at most, shared with a commit running at the same time). It drains the outbox once more
/// when stopped.
pub fn local_ack() -> ForwardSlot {
    Box::new(|ctx| Box::pin(run_local_ack(ctx)))
}

async fn run_local_ack(mut ctx: ForwardCtx) -> Result<(), AppError> {
    loop {
        while drain_once(&ctx.store).await? {}
        if *ctx.stop.borrow() {
            return Ok(());
        }
        tokio::select! {
            _ = ctx.outbox_grew.notified() => {}
            _ = ctx.stop.changed() => {}
        }
    }
}

/// Acknowledges up to one batch; true when there was something.
async fn drain_once(store: &SharedStore) -> Result<bool, AppError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || {
        let clock = SystemClock::new();
        let mut s = store.write();
        let seqs: Vec<u64> = s
            .outbox_pending()
            .take(ACK_BATCH)
            .map(|r| r.map(|(seq, _)| seq))
            .collect::<Result<_, _>>()?;
        if seqs.is_empty() {
            return Ok(false);
        }
        // Published and acknowledged at once (no broker): one batch, one commit.
        let now = clock.now_ms();
        let published = LedgerEntry::Published { outbox_seqs: seqs.clone() };
        let acked = LedgerEntry::Acknowledged { outbox_seqs: seqs.clone() };
        s.outbox_ack_uncommitted(
            &seqs,
            &[LedgerRecord::new(now, published), LedgerRecord::new(now, acked)],
        )?;
        // Committed without the lock, as the ingest commits its appends: a commit already
        // running (a checkpoint's, a group commit's) covers these removals when it began after
        // them, and the other stages read and write meanwhile.
        store.commit_released_if_needed(s)?;
        Ok(true)
    })
    .await?
}

/// How long a stopping pipeline waits for the outbox to drain by default (well inside systemd's
/// `TimeoutStopSec=30s`).
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(10);

/// How often a stopping pipeline looks whether the outbox is empty.
const DRAIN_POLL: Duration = Duration::from_millis(20);

/// The MQTT forwarder: publishes the outbox to the broker of `cfg`; at stop, drains for at most
/// `drain`.
pub fn mqtt(cfg: ForwarderConfig, drain: Duration) -> ForwardSlot {
    Box::new(move |ctx| Box::pin(run_mqtt(cfg, drain, ctx)))
}

async fn run_mqtt(cfg: ForwarderConfig, drain: Duration, ctx: ForwardCtx) -> Result<(), AppError> {
    let ForwardCtx { store, outbox_grew, mut stop, stats } = ctx;
    let (stop_forwarder, forwarder_stop) = watch::channel(false);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let mut task = tokio::spawn(crate::forward::run(
        cfg,
        store.clone(),
        outbox_grew,
        clock,
        forwarder_stop,
        Some(stats),
    ));
    // Until the pipeline stops; the forwarder returns by itself only when the store failed.
    tokio::select! {
        r = &mut task => return finished(r),
        _ = stopped(&mut stop) => {}
    }
    let drained = tokio::select! {
        r = &mut task => return finished(r),
        r = tokio::time::timeout(drain, until_empty(&store)) => r,
    };
    match drained {
        Ok(Ok(())) => tracing::info!("outbox drained"),
        Ok(Err(e)) => {
            let _ = stop_forwarder.send(true);
            let _ = task.await;
            return Err(e);
        }
        Err(_) => {
            let queued = depth(&store).await.unwrap_or(0);
            tracing::warn!(
                queued,
                drain_ms = drain.as_millis() as u64,
                "outbox not drained in time: the records stay queued for the next start"
            );
        }
    }
    let _ = stop_forwarder.send(true);
    finished(task.await)
}

fn finished(r: Result<Result<(), ForwardError>, tokio::task::JoinError>) -> Result<(), AppError> {
    Ok(r??)
}

/// Completes once `stop` is true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

/// Completes once the outbox is empty.
async fn until_empty(store: &SharedStore) -> Result<(), AppError> {
    loop {
        let s = store.clone();
        let empty =
            tokio::task::spawn_blocking(move || Ok::<_, AppError>(s.read().outbox_after(0, 1)?))
                .await??
                .is_empty();
        if empty {
            return Ok(());
        }
        tokio::time::sleep(DRAIN_POLL).await;
    }
}

/// Outbox records awaiting acknowledgement.
async fn depth(store: &SharedStore) -> Result<u64, AppError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || Ok(store.read().outbox_records())).await?
}

/// `inner` (the MQTT forwarder) with the Sparkplug B view beside it on the same store
/// (`crate::sparkplug`): started with it, told to stop once `inner` has drained and ended, then
/// awaited (it sends what it can within its own drain time, its NDEATH, and disconnects). The
/// view's store error stops the daemon as the forwarder's does. Its counters are
/// `crate::sparkplug::STATS`, for the status and the metrics.
pub fn with_sparkplug(inner: ForwardSlot, cfg: crate::sparkplug::ShellConfig) -> ForwardSlot {
    Box::new(move |ctx| {
        Box::pin(async move {
            let (stop_view, view_stop) = watch::channel(false);
            let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
            let mut view = tokio::spawn(crate::sparkplug::run(
                cfg,
                ctx.store.clone(),
                clock,
                view_stop,
                &crate::sparkplug::STATS,
            ));
            let mut forwarder = inner(ctx);
            let ended = tokio::select! {
                r = &mut forwarder => r,
                r = &mut view => {
                    let r = sparkplug_ended(r);
                    if let Err(e) = &r {
                        tracing::error!(error = %e, "the Sparkplug view stopped");
                    }
                    return r.and(Err(AppError::StageGone("sparkplug")));
                }
            };
            let _ = stop_view.send(true);
            ended.and(sparkplug_ended(view.await))
        })
    })
}

/// `inner` on a store whose Sparkplug view is off: the view's place and the records it had set
/// aside are removed first, so nothing is set aside for a view that no longer runs.
pub fn without_sparkplug(inner: ForwardSlot) -> ForwardSlot {
    Box::new(move |ctx| {
        Box::pin(async move {
            let store = ctx.store.clone();
            tokio::task::spawn_blocking(move || store.write().sparkplug_forget()).await??;
            inner(ctx).await
        })
    })
}

fn sparkplug_ended(
    r: Result<Result<(), crate::sparkplug::SparkplugError>, tokio::task::JoinError>,
) -> Result<(), AppError> {
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(AppError::Sparkplug(e)),
        Err(e) => Err(AppError::Task(e)),
    }
}
