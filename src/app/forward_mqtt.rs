//! The MQTT forwarder of `src/forward/` in the pipeline's forwarder slot: [`mqtt`] runs
//! `forward::run` on the shared store, woken by the pipeline's `outbox_grew`.
//!
//! Ledger: the forwarder ledgers `Published` for every record whose PUBLISH was written and
//! `Acknowledged` (with the removal, one commit) after its PUBACK, so `linegate reconcile` holds
//! whatever the broker does.
//!
//! Stopping: when the pipeline stops (`--exit-at-end` after the last source ended and everything
//! is checkpointed, or SIGTERM/SIGINT), the forwarder keeps publishing until the outbox is empty
//! or `drain` has passed, whichever comes first, then disconnects. What is still queued then
//! stays in the store and goes first (as backlog) after the next start.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{AppError, ForwardCtx, ForwardSlot};
use crate::clock::{Clock, SystemClock};
use crate::forward::{ForwardError, ForwarderConfig};
use crate::store::SharedStore;

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
