//! The pipeline's own records in the store: the checkpoint's payload (decider snapshot plus each
//! source's position) and quarantined records. Pure encoding; versioned CBOR like the ledger.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The format version: a leading byte, then CBOR. Byte fields are CBOR byte strings; values written
/// before that held them as arrays of integers, which still decode (both are version 1).
const VERSION: u8 = 1;

/// What the checkpoint holds besides its journal position: the decider's snapshot and, per
/// source index, the byte offset after the last record consumed (a restart resumes there when
/// the journal no longer holds that source's records).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointPayload {
    #[serde(with = "serde_bytes")]
    pub decider: Vec<u8>,
    pub offsets: BTreeMap<u16, u64>,
    /// The `rule_version` the state was decided under (docs/contracts.md section 11; empty in
    /// checkpoints written before it was kept).
    #[serde(default)]
    pub rule_version: String,
    /// Every rule's name and `rule_version`, in configuration order, when there are several
    /// (empty for one rule, whose version is `rule_version`, and in checkpoints written before
    /// there were several).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rule_versions: Vec<(String, String)>,
}

/// One rejected record kept in quarantine (tree `state`, `q/` + id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuarantineEntry {
    /// docs/contracts.md section 7 reason, e.g. `malformed_json`.
    pub reason: String,
    /// The sentence naming what was wrong and where.
    pub detail: String,
    /// Ingest time, when it could be read.
    pub at_ms: Option<i64>,
    /// The journal record it came from.
    pub journal_pos: u64,
    /// An event derived from that record's raw samples (then `raw` is the event's JSON).
    pub derived: bool,
    /// The original bytes.
    #[serde(with = "serde_bytes")]
    pub raw: Vec<u8>,
}

/// A stored value that does not decode.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{what} does not decode: {why}")]
pub struct RecordDecodeError {
    pub what: &'static str,
    pub why: String,
}

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    super::cbor::encode(&[VERSION], v)
}

fn decode<T: for<'de> Deserialize<'de>>(
    what: &'static str,
    bytes: &[u8],
) -> Result<T, RecordDecodeError> {
    super::cbor::decode_versioned(VERSION, what, bytes)
        .map_err(|why| RecordDecodeError { what, why })
}

impl CheckpointPayload {
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordDecodeError> {
        decode("checkpoint payload", bytes)
    }
}

impl QuarantineEntry {
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordDecodeError> {
        decode("quarantine entry", bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_an_error() {
        let p = CheckpointPayload {
            decider: vec![1, 2],
            offsets: [(0, 77)].into(),
            rule_version: "v".into(),
            rule_versions: Vec::new(),
        };
        assert_eq!(CheckpointPayload::decode(&p.encode()).unwrap(), p);
        let q = QuarantineEntry {
            reason: "malformed_json".into(),
            detail: "line is not JSON".into(),
            at_ms: Some(5),
            journal_pos: 3,
            derived: false,
            raw: b"{oops".to_vec(),
        };
        let b = q.encode();
        assert_eq!(QuarantineEntry::decode(&b).unwrap(), q);
        assert!(QuarantineEntry::decode(&b[..b.len() - 2]).is_err());
        assert!(QuarantineEntry::decode(&[9]).unwrap_err().why.contains("version 9"));
    }

    /// The checkpoint payload as written before its bytes became a CBOR byte string.
    #[derive(Serialize)]
    struct LegacyPayload {
        decider: Vec<u8>,
        offsets: BTreeMap<u16, u64>,
    }

    #[test]
    fn bytes_are_byte_strings_and_older_payloads_still_decode() {
        let decider: Vec<u8> = (0..=255).collect();
        let p = CheckpointPayload {
            decider: decider.clone(),
            offsets: [(1, 9)].into(),
            rule_version: String::new(),
            rule_versions: Vec::new(),
        };
        let new = p.encode();
        assert!(new.windows(decider.len()).any(|w| w == decider.as_slice()));
        let old = encode(&LegacyPayload { decider, offsets: [(1, 9)].into() });
        assert!(old.len() > new.len() + 100, "{} vs {}", old.len(), new.len());
        assert_eq!(CheckpointPayload::decode(&old).unwrap(), p);
    }
}
