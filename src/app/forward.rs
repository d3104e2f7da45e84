//! The slot the forwarder plugs into (the MQTT forwarder of `src/forward/`, or the in-process
//! [`local_ack`] consumer for tests and `--forward local-ack`).
//!
//! A forwarder gets the shared store, a [`Notify`] woken after every checkpoint that added
//! outbox records, and a stop signal. It reads `Store::outbox_pending`, publishes, and removes
//! records with `Store::outbox_ack_many` only after the broker's acknowledgement, ledgering
//! `Published` and `Acknowledged`. Without a forwarder records stay queued in the store.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{watch, Notify};

use super::AppError;
use crate::clock::{Clock, SystemClock};
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
