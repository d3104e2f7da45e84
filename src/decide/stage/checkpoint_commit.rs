//! The commit of a checkpoint, run on a thread of its own while the decide stage decides the
//! next records.
//!
//! The decide stage applies a checkpoint's batch under the store's exclusive lock and hands its
//! commit (sled's flush, then the fsyncs: milliseconds of waiting on the disk) to a
//! [`CommitInFlight`], which commits on its own thread without the lock (`SharedStore::commit_released`:
//! the ingest appends and the forwarder acknowledges meanwhile). Deciding needs no lock, so the
//! next batch is decided meanwhile; the next checkpoint's batch is applied only once this commit
//! is finished, so at most one commit is in flight and checkpoints become durable in order
//! (a checkpoint due while the commit still [`CommitInFlight::running`] is put off, deciding on).
//! What must follow durability (the journal's truncation, the latency and heartbeat telemetry)
//! runs when the stage [`CommitInFlight::finish`]es it: before its next checkpoint (the
//! truncation inside that checkpoint's hold of the lock), before it waits for input, and at its
//! end.
//!
//! Nothing reads the checkpoint as durable before that: the forwarder may publish its records
//! meanwhile, as it already could while the stage committed them itself (a crash before the
//! commit decides them again, with the same ids), and an acknowledgement applied before the
//! commit is later in sled's log than the records it removes, so no crash keeps the one without
//! the other (docs/decisions/0022-the-checkpoint-commits-while-the-stage-decides.md).

use std::thread::JoinHandle;

use super::StageError;
use crate::store::{SharedStore, StoreError};

/// The last journal position a checkpoint covers and that record's ingest time.
pub(super) type Through = (u64, Option<i64>);

/// A checkpoint's commit running on its own thread.
#[derive(Debug)]
pub(super) struct CommitInFlight {
    handle: JoinHandle<Result<(), StoreError>>,
    /// The last journal position the checkpoint covers and that record's ingest time.
    through: Through,
    /// Monotonic receipt times (seconds) of the batches this checkpoint covers.
    received_s: Vec<f64>,
}

impl CommitInFlight {
    /// Starts committing `store` on a new thread.
    pub(super) fn start(
        store: &SharedStore,
        through: Through,
        received_s: Vec<f64>,
    ) -> Result<CommitInFlight, StageError> {
        let shared = store.clone();
        let handle = std::thread::Builder::new()
            .name("checkpoint-commit".into())
            .spawn(move || shared.commit_released(shared.read()))
            .map_err(StageError::Thread)?;
        Ok(CommitInFlight { handle, through, received_s })
    }

    /// Whether the commit is still running.
    pub(super) fn running(&self) -> bool {
        !self.handle.is_finished()
    }

    /// Waits until the commit is done: what it was started with, or its error if it failed
    /// (the store is poisoned then).
    pub(super) fn finish(self) -> Result<(Through, Vec<f64>), StageError> {
        match self.handle.join() {
            Ok(r) => r.map(|()| (self.through, self.received_s)).map_err(StageError::from),
            Err(_) => Err(StageError::StageGone("checkpoint-commit")),
        }
    }
}
