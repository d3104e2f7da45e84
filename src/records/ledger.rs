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

/// One rule that counted an accepted event: its name, and the alert id of the incident the
/// event joined (as a member, or as evidence of one that begins within the window after it);
/// absent while it belongs to none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleTouch {
    pub rule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_id: Option<String>,
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
        /// Each rule that counted it, with the incident it joined (absent when it counted for
        /// none; records written before several rules read as empty).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        rules: Vec<RuleTouch>,
        /// Its machine's watermark right after it was decided (absent while the machine has
        /// none, and in records written before it existed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        watermark_ms: Option<i64>,
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
    /// A source declares its sensors' tails (docs/contracts.md section 11): nothing after each
    /// `last_seq` will come from it. `reason` is `end_of_trace` (a trace source read to its end)
    /// or `removed_from_configuration` (a live sensor the configuration no longer names, at a
    /// start); `source` names it (`trace PATH`, or `configuration`). Written in the checkpoint
    /// batch after journal record `journal_pos`, at that record's ingest time, and only for
    /// sensors with an event since their last declaration.
    SourceEnded { source: String, reason: String, journal_pos: u64, sensors: Vec<EndedSensor> },
    /// A checkpoint: the decide stage's state through journal record `journal_pos` (`records`
    /// decided since the last one), under `rule_versions` (rule name → `rule_version`), with
    /// outbox records `outbox` (inclusive; `None` when it queued none). Written in the
    /// checkpoint's own batch, so it is in the ledger exactly when the checkpoint is durable.
    Checkpoint {
        journal_pos: u64,
        records: u64,
        rule_versions: BTreeMap<String, String>,
        outbox: Option<(u64, u64)>,
    },
    /// `linegate reconcile --record`: its verdict, `by` whom.
    Reconciled {
        accepted_events: u64,
        alert_records: u64,
        acknowledged: u64,
        queued: u64,
        declared_lost: u64,
        unaccounted: u64,
        /// Sequence gaps: all, and those missing undeclared.
        gaps: u64,
        undeclared_gaps: u64,
        /// Sensors' tails missing (silent past allowed lateness, not declared ended).
        missing_tails: u64,
        exit: u8,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<Operator>,
    },
    /// `linegate drill start|end NAME`: a failure injected on purpose begins or ends, `by` whom.
    Drill {
        name: String,
        phase: DrillPhase,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<Operator>,
    },
}

/// A sensor whose tail a [`LedgerEntry::SourceEnded`] declares: its last accepted seq.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedSensor {
    pub machine: String,
    pub sensor: String,
    pub last_seq: u64,
}

/// The two ends of a drill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum DrillPhase {
    Start,
    End,
}

impl DrillPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            DrillPhase::Start => "start",
            DrillPhase::End => "end",
        }
    }
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
                rules: Vec::new(),
                watermark_ms: None,
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
            LedgerEntry::SourceEnded {
                source: "trace t.jsonl".into(),
                reason: "end_of_trace".into(),
                journal_pos: 3,
                sensors: vec![EndedSensor { machine: "m".into(), sensor: "s".into(), last_seq: 9 }],
            },
            LedgerEntry::Checkpoint {
                journal_pos: 3,
                records: 3,
                rule_versions: [("r".to_string(), "00ff".to_string())].into(),
                outbox: Some((4, 6)),
            },
            LedgerEntry::Drill { name: "pull".into(), phase: DrillPhase::End, by: None },
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
