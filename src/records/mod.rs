//! The records the pipeline keeps in the store, and their encodings: pure values, no I/O.
//!
//! - [`journal`]: a journal record (position, ingest time, origin, line);
//! - [`outbox`]: what waits for the broker (alerts, events, raw-sample frames, gap notices);
//! - [`ledger`]: every state transition, for `explain` and `reconcile`;
//! - [`pruned`]: the durable summary of the ledger records retention removed;
//! - [`sensors`]: what the gateway knows of each sensor, and its state (live, idle, silent);
//! - [`checkpoint`]: the checkpoint's payload and quarantined records as stored;
//! - [`counts`]: what the decider counted (kept in its snapshot, `replay --summary`, the metrics);
//! - [`snapshot`]: the pure cores' state as bytes, for checkpoints;
//! - [`samples_codec`]: the raw-sample frame published on `samples/...`;
//! - [`cbor`]: the one versioned-CBOR encoding the stored records share (`cbor_write`: the
//!   same items written by hand, for the two records made once per event).

pub mod cbor;
pub(crate) mod cbor_write;
pub mod checkpoint;
pub mod counts;
pub mod journal;
pub mod ledger;
pub mod outbox;
pub mod pruned;
pub mod samples_codec;
pub mod sensors;
pub mod snapshot;
