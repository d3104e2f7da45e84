//! Stopping the daemon within a bounded time, and failing fast.
//!
//! On SIGTERM or SIGINT, [`run_until_signal`] tells the pipeline to stop: ingest stops reading,
//! what was read is committed, decided and checkpointed, and the forwarder gets at most
//! [`FORWARD_DRAIN`] to drain (what it does not send stays queued in the store). If all of that
//! has not finished [`SHUTDOWN_TIMEOUT`] after the signal (closing the store included, itself
//! bounded by [`STORE_CLOSE`]), `run` gives up with
//! [`AppError::ShutdownTimeout`]: nothing is lost (journal and outbox are durable), the next start
//! resumes, and systemd's own `TimeoutStopSec` is never reached.
//!
//! [`abort_on_panic`] makes every later panic abort the process (after the default message), so
//! systemd's `Restart=on-failure` restarts a daemon rather than leaving it half-dead with a
//! stage's thread gone. It is a panic hook rather than `panic = "abort"` in the release profile:
//! opening the store catches sled's panics on a damaged database to recover from it
//! (`Store::open_or_recover`), which an abort-on-panic build could not do.

use std::time::Duration;

use tokio::sync::watch;

use super::{run, AppError, RunOptions};
use crate::config::Config;

/// From the signal to the end of `run`, at most.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// What the forwarder gets to drain after the last checkpoint when stopped by a signal.
pub const FORWARD_DRAIN: Duration = Duration::from_secs(3);

/// [`run`] stopped by SIGTERM or SIGINT ([`super::shutdown_signal`]) within [`SHUTDOWN_TIMEOUT`].
pub async fn run_until_signal(config: Config, opts: RunOptions) -> Result<(), AppError> {
    let (signalled_tx, mut signalled) = watch::channel(false);
    let signal = super::shutdown_signal();
    let shutdown = async move {
        signal.await;
        let _ = signalled_tx.send(true);
    };
    let give_up = async move {
        if signalled.wait_for(|s| *s).await.is_ok() {
            tokio::time::sleep(SHUTDOWN_TIMEOUT).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        r = run(config, opts, shutdown) => r,
        () = give_up => Err(AppError::ShutdownTimeout { after: SHUTDOWN_TIMEOUT }),
    }
}

/// What dropping the store at the end of `run` may take before `run` returns without it.
pub const STORE_CLOSE: Duration = Duration::from_secs(3);

/// Drops `store` on a blocking thread and waits at most `limit` for it.
///
/// Everything is durable before this (every commit ends in an fsync), but sled 0.34 flushes
/// again when its last handle drops, and that flush has been seen to hang for good (its issues
/// #1412 and #1308; here once in seven benchmark runs, the main thread stuck in
/// `Tree::drop` → `iobuf::flush`). Dropped on the runtime's thread, that would hold SIGTERM's
/// bounded shutdown up forever; here the runtime abandons the thread (`main` shuts the runtime
/// down with a short timeout) and the process exits.
pub(super) async fn close_store(store: crate::store::SharedStore, limit: Duration) {
    let closing = tokio::task::spawn_blocking(move || {
        #[cfg(feature = "failpoints")]
        fail::fail_point!("app::close_store");
        drop(store);
    });
    if tokio::time::timeout(limit, closing).await.is_err() {
        tracing::warn!(?limit, "the store did not close in time; exiting without waiting for it");
    }
}

/// Waits for the forwarder after a signal: at most `limit`, then abandons it (aborts the task);
/// its records stay queued in the store.
pub(super) async fn drain_forwarder(
    mut forwarder: tokio::task::JoinHandle<Result<(), AppError>>,
    limit: Duration,
) -> Result<(), AppError> {
    match tokio::time::timeout(limit, &mut forwarder).await {
        Ok(joined) => joined.map_err(AppError::from).and_then(|r| r),
        Err(_) => {
            forwarder.abort();
            tracing::warn!(?limit, "forwarder still draining at shutdown; the rest stays queued");
            Ok(())
        }
    }
}

thread_local! {
    /// Set while this thread runs code that catches panics on purpose ([`panics_caught`]).
    static CATCHING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with panics on this thread left to `f`'s own `catch_unwind` (the store's recovery
/// from a sled panic on a damaged database) instead of aborting.
pub(super) fn panics_caught<T>(f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CATCHING.with(|c| c.set(false));
        }
    }
    CATCHING.with(|c| c.set(true));
    let _reset = Reset;
    f()
}

/// Installs a panic hook that prints the panic as usual, then aborts the process (except inside
/// [`panics_caught`]).
pub fn abort_on_panic() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        if CATCHING.with(|c| c.get()) {
            return;
        }
        tracing::error!("panic: {info}; aborting so that the service manager restarts linegate");
        std::process::abort();
    }));
}
