//! The ledger: one record per transition of every record the gateway handles (docs/architecture.md),
//! so that `linegate explain` and `linegate reconcile` can prove from the store alone that nothing
//! was lost or doubled, and tell delayed data from missing data.
//!
//! The store keeps ledger records in the same tree and the same batch as the state change they
//! describe (a checkpoint's accepted events and alerts; an acknowledgement's removal from the
//! outbox), so the ledger can never disagree with the outbox after a crash. This module is the
//! pure vocabulary; it does no I/O.
//!
//! Bytes in the store: `[VERSION][CBOR of LedgerRecord]`. New variants may be added; existing ones
//! never change meaning.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::records::outbox::GapNotice;

mod accepted_cbor;
mod text;

const VERSION: u8 = 1;

/// One ledger record: when (ingest time for decisions, wall-clock time of the process for
/// publication, restarts and recoveries) and what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerRecord {
    pub at_ms: i64,
    pub entry: LedgerEntry,
}

/// Who asked for a mutation: the process credentials of the control socket's peer
/// (`SO_PEERCRED`), or of the command itself when it opened a stopped store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operator {
    pub uid: u32,
    pub gid: u32,
    /// The peer's process id (absent when the kernel did not say).
    pub pid: Option<i32>,
    /// Through the control socket (true) or directly on a stopped store (false).
    pub via_socket: bool,
}

impl Operator {
    /// This process, on a store it opened itself.
    pub fn this_process() -> Operator {
        use std::os::unix::fs::MetadataExt;
        // /proc/self belongs to the process's effective user and group.
        let (uid, gid) =
            std::fs::metadata("/proc/self").map_or((u32::MAX, u32::MAX), |m| (m.uid(), m.gid()));
        let pid = i32::try_from(std::process::id()).ok();
        Operator { uid, gid, pid, via_socket: false }
    }
}

/// How an accepted event was taken by the rule (docs/contracts.md section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Acceptance {
    Applied,
    LateApplied,
    TooLate,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LedgerEntry {
    /// An event passed validation and was not a duplicate; `outbox_seq` is the outbox record that
    /// carries it to MQTT.
    Accepted {
        event_id: String,
        machine: String,
        sensor: String,
        seq: u64,
        ts_ms: i64,
        how: Acceptance,
        journal_pos: u64,
        outbox_seq: u64,
        /// Applied and counting for the rule: `explain` finds an incident's members by it.
        /// Records written before it existed read as `false`.
        #[serde(default)]
        counted: bool,
    },
    /// The same `event_id` with the same content again: counted, never re-counted.
    Duplicate { event_id: String, journal_pos: u64 },
    /// A rejected record, kept in quarantine under `quarantine_key` with its reason.
    Quarantined { reason: String, journal_pos: u64, quarantine_key: u64 },
    /// Quarantined record `quarantine_key` was re-ingested as journal record `journal_pos`, by
    /// `by` (the control socket's peer, or the user of a command on a stopped store; records
    /// written before it existed read as `None`).
    Released {
        quarantine_key: u64,
        journal_pos: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<Operator>,
    },
    /// Quarantined record `quarantine_key` was dropped by an operator (`by`, as for `Released`).
    Dropped {
        quarantine_key: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<Operator>,
    },
    /// An alert record was produced (`open`, `amend`, `close`, `supersede`).
    Alert {
        alert_id: String,
        revision: u32,
        alert_kind: String,
        machine: String,
        caused_by: Option<String>,
        outbox_seq: u64,
    },
    /// Outbox records handed to the broker (QoS 1 PUBLISH sent).
    Published { outbox_seqs: Vec<u64> },
    /// The broker acknowledged outbox records; they left the outbox in the same batch.
    Acknowledged { outbox_seqs: Vec<u64> },
    /// The retention budget removed raw samples; a gap notice declares them (`outbox_seq`).
    Shed { gap: GapNotice, journal_positions: Vec<u64>, bytes: u64, outbox_seq: u64 },
    /// A gap declared for another reason (sensor overrun, fault).
    GapDeclared { gap: GapNotice, outbox_seq: u64 },
    /// The wall clock stepped (detected by comparing monotonic and real-time clocks).
    ClockStep { from_ms: i64, to_ms: i64, step_ms: i64 },
    /// The process started on an existing store.
    Restart { checkpoint_pos: u64, journal_next: u64, outbox_pending: u64 },
    /// The process started with a rule (`[rule]`, `[time]`) other than the one its checkpoint was
    /// decided under: `from` and `to` are their `rule_version`s; the new rule decides from journal
    /// record `journal_pos` on (docs/decisions/0057-a-rule-change-at-start-up.md). `rule` names
    /// the rule (absent in records written before there were several rules); `from` is empty
    /// for a rule added, `to` for a rule removed.
    RuleChanged {
        from: String,
        to: String,
        journal_pos: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
    },
    /// The store could not be opened or a record did not decode: what was moved aside and lost,
    /// and what was copied from it into the fresh store (`salvage`; absent in records written
    /// before salvage existed, which lost everything).
    Recovery {
        what: String,
        moved_to: Option<String>,
        lost: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        salvage: Option<Salvage>,
    },
}

/// What a recovery copied from the damaged store into the fresh one (`src/store/salvage.rs`),
/// and what it could not read. Kinds: `journal`, `raw_segments`, `outbox`, `outbox_rebuilt`
/// (alert records rebuilt from the alert archive), `ledger`, `quarantine`, `alert_archive`, `pruned_summary`,
/// `seq_marks`, `checkpoint`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Salvage {
    /// Records copied, per kind.
    pub copied: BTreeMap<String, u64>,
    /// Records that could not be read and were skipped, per kind.
    pub unreadable: BTreeMap<String, u64>,
    /// Outbox sequences lost, as inclusive ranges: what `reconcile` counts as declared lost.
    pub lost_outbox: Vec<(u64, u64)>,
    /// Journal positions lost, as inclusive ranges.
    pub lost_journal: Vec<(u64, u64)>,
    /// Ledger sequences lost, as inclusive ranges.
    pub lost_ledger: Vec<(u64, u64)>,
    /// Gap notices declared with reason `corrupt`.
    pub gaps: u64,
    /// Set when the checkpoint was not salvaged: journal positions up to this one were decided
    /// before the damage, so the decide stage re-derives its state from them without output.
    pub decided_through: Option<u64>,
    /// Why salvage itself failed, when it did: the fresh store then holds nothing of the old one.
    pub failed: Option<String>,
}

/// A ledger value that does not decode.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("ledger record does not decode: {0}")]
pub struct LedgerDecodeError(pub String);

impl LedgerRecord {
    pub fn new(at_ms: i64, entry: LedgerEntry) -> Self {
        LedgerRecord { at_ms, entry }
    }

    /// The bytes stored in the ledger.
    pub fn encode(&self) -> Vec<u8> {
        accepted_cbor::encode(&[VERSION], self)
            .unwrap_or_else(|| super::cbor::encode(&[VERSION], self))
    }

    pub fn decode(bytes: &[u8]) -> Result<LedgerRecord, LedgerDecodeError> {
        super::cbor::decode_versioned(VERSION, "ledger record", bytes).map_err(LedgerDecodeError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::outbox::GapRange;

    #[test]
    fn records_round_trip() {
        let gap = GapNotice {
            machine: "m".into(),
            sensor: "s".into(),
            range: GapRange::Samples { from_ms: 0, to_ms: 1000 },
            reason: "shed".into(),
            declared_at_ms: 5,
        };
        let entries = [
            LedgerEntry::Accepted {
                event_id: "gw.s.1".into(),
                machine: "m".into(),
                sensor: "s".into(),
                seq: 1,
                ts_ms: 1000,
                how: Acceptance::LateApplied,
                journal_pos: 3,
                outbox_seq: 4,
                counted: false,
            },
            LedgerEntry::Acknowledged { outbox_seqs: vec![4, 5] },
            LedgerEntry::Shed { gap, journal_positions: vec![1, 2], bytes: 99, outbox_seq: 6 },
            LedgerEntry::Recovery {
                what: "x".into(),
                moved_to: None,
                lost: "y".into(),
                salvage: None,
            },
            LedgerEntry::Recovery {
                what: "x".into(),
                moved_to: Some("z".into()),
                lost: "y".into(),
                salvage: Some(Salvage {
                    copied: [("outbox".to_string(), 3)].into(),
                    lost_outbox: vec![(4, 4)],
                    decided_through: Some(9),
                    ..Salvage::default()
                }),
            },
        ];
        for e in entries {
            let r = LedgerRecord::new(7, e);
            assert_eq!(LedgerRecord::decode(&r.encode()), Ok(r));
        }
    }

    #[test]
    fn damaged_values_are_errors() {
        let r =
            LedgerRecord::new(1, LedgerEntry::Duplicate { event_id: "e".into(), journal_pos: 2 });
        let b = r.encode();
        assert!(LedgerRecord::decode(&b[..b.len() - 3]).is_err());
        assert!(LedgerRecord::decode(&[2, 0]).unwrap_err().0.contains("version 2"));
        assert!(LedgerRecord::decode(&[]).is_err());
    }
}
