//! Snapshots of the pure cores' state (rule engine, frame cutter) as bytes, for checkpoints.
//!
//! CBOR (self-describing: maps with composite keys, optional fields). A snapshot holds state
//! only, never configuration: restoring takes the parameters anew. The determinism contract —
//! restoring a snapshot taken after record `k` and feeding records `k+1..` decides exactly as an
//! uninterrupted run — is tested in `tests/snapshot.rs`.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// A snapshot that does not restore: what was wrong, for the store's recovery record.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The bytes are not a snapshot of this state.
    #[error("snapshot does not decode: {0}")]
    Decode(String),
    /// The bytes decode, but the state breaks one of its invariants.
    #[error("snapshot is inconsistent: {0}")]
    Invalid(String),
}

impl SnapshotError {
    /// A snapshot that decodes but breaks an invariant of the state it holds.
    pub fn invalid(what: String) -> SnapshotError {
        SnapshotError::Invalid(what)
    }
}

pub fn encode<T: Serialize>(state: &T) -> Vec<u8> {
    super::cbor::encode(&[], state)
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, SnapshotError> {
    super::cbor::decode(bytes).map_err(SnapshotError::Decode)
}
