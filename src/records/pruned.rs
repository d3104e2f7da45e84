//! What the ledger's retention removed, kept as one durable value (docs/contracts.md section 11:
//! "what is pruned leaves a durable summary (counts per sensor and kind, last seq), so `reconcile`
//! still proves its totals over the store's whole life").
//!
//! The store prunes a *prefix* of the ledger (`src/store/prune.rs`) and folds every record it
//! removes into this summary in the same batch, with [`PrunedSummary::absorb`]. The summary keeps
//! exactly what `reconcile` needs to give the same answer as it would on the whole ledger:
//! - the totals (accepted events, alert records, how many of those were acknowledged);
//! - every pruned accepted event or alert record whose acknowledgement was not pruned with it
//!   (`owed`: normally only the last second's worth before the cut);
//! - per sensor, the seqs accepted, as runs `[from, to]` with the event time of each run's first
//!   seq (a sensor without holes is one run), so holes between pruned and kept seqs are still
//!   found and classified;
//! - declared event gaps and outbox sequences a recovery declared lost (both rare);
//! - raw-sample gaps folded per sensor and reason into a count and a span (they can be frequent:
//!   a full budget sheds every second).
//!
//! Its size grows with the number of sensors and of holes, not with time. Pure: no I/O.
//!
//! Bytes in the store: `[VERSION][CBOR]`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::records::outbox::GapRange;

const VERSION: u8 = 1;

/// The summary of every ledger record with a sequence up to `through`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PrunedSummary {
    /// Ledger sequences up to this one were pruned (0: none).
    pub through: u64,
    /// Records pruned, per ledger kind (`accepted`, `acknowledged`, ...).
    pub kinds: BTreeMap<String, u64>,
    /// The newest ingest time of a pruned accepted event (`i64::MIN` when none).
    pub newest_at_ms: i64,
    pub accepted_events: u64,
    pub alert_records: u64,
    /// Pruned accepted events and alert records whose acknowledgement was pruned too.
    pub acknowledged: u64,
    /// Outbox sequence → what it carried, for pruned accepted events and alert records whose
    /// acknowledgement is not (yet) pruned.
    pub owed: BTreeMap<u64, String>,
    /// Outbox sequences declared lost by pruned recovery records, as inclusive ranges.
    pub lost_outbox: Vec<(u64, u64)>,
    /// Per `machine/sensor`: what was accepted.
    pub sensors: BTreeMap<String, SensorRuns>,
    /// Declared event gaps: `(sensor, from_seq, to_seq, reason)`.
    pub event_gaps: Vec<(String, u64, u64, String)>,
    /// Per `machine/sensor/reason`: declared raw-sample gaps.
    pub sample_gaps: BTreeMap<String, SampleGapTotal>,
    /// Per `machine/sensor`: the last seq a pruned `source_ended` record declared its tail
    /// after, and why (empty in summaries written before it was kept).
    #[serde(default)]
    pub ended: BTreeMap<String, (u64, String)>,
}

/// Disjoint, ascending, non-adjacent runs of seqs `(from_seq, to_seq, ts_ms of from_seq)`.
pub type Runs = Vec<(u64, u64, i64)>;

/// The seqs of one sensor in pruned accepted records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SensorRuns {
    pub accepted: u64,
    /// The highest seq.
    pub last_seq: u64,
    pub runs: Runs,
    /// The newest ingest time of its accepted events (0 in summaries written before it was
    /// kept): how long the sensor has been quiet, for `reconcile`'s silent tails.
    #[serde(default)]
    pub last_at_ms: i64,
}

/// Declared raw-sample gaps of one sensor for one reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleGapTotal {
    pub count: u64,
    pub from_ms: i64,
    pub to_ms: i64,
}

/// A summary value that does not decode.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("pruned-ledger summary does not decode: {0}")]
pub struct PrunedDecodeError(pub String);

/// The ledger kind's name, as in `linegate dump ledger`.
pub fn kind_name(e: &LedgerEntry) -> &'static str {
    match e {
        LedgerEntry::Accepted { .. } => "accepted",
        LedgerEntry::Duplicate { .. } => "duplicate",
        LedgerEntry::Quarantined { .. } => "quarantined",
        LedgerEntry::Released { .. } => "released",
        LedgerEntry::Dropped { .. } => "dropped",
        LedgerEntry::Alert { .. } => "alert",
        LedgerEntry::Published { .. } => "published",
        LedgerEntry::Acknowledged { .. } => "acknowledged",
        LedgerEntry::Shed { .. } => "shed",
        LedgerEntry::GapDeclared { .. } => "gap_declared",
        LedgerEntry::ClockStep { .. } => "clock_step",
        LedgerEntry::Restart { .. } => "restart",
        LedgerEntry::RuleChanged { .. } => "rule_changed",
        LedgerEntry::Recovery { .. } => "recovery",
        LedgerEntry::SourceEnded { .. } => "source_ended",
        LedgerEntry::Checkpoint { .. } => "checkpoint",
        LedgerEntry::Reconciled { .. } => "reconciled",
        LedgerEntry::Drill { .. } => "drill",
    }
}

/// Whether the record's time is an ingest time (a decision's), which retention compares with
/// the history horizon. The others (publication, acknowledgement, restarts) carry the process's
/// wall clock and follow the decisions around them.
pub fn is_input(e: &LedgerEntry) -> bool {
    matches!(
        e,
        LedgerEntry::Accepted { .. }
            | LedgerEntry::Duplicate { .. }
            | LedgerEntry::Quarantined { .. }
            | LedgerEntry::Released { .. }
            | LedgerEntry::Alert { .. }
            | LedgerEntry::SourceEnded { .. }
            | LedgerEntry::Checkpoint { .. }
    )
}

/// The outbox sequence a record is owed an acknowledgement for, with what it carries.
pub fn owed(e: &LedgerEntry) -> Option<(u64, String)> {
    match e {
        LedgerEntry::Accepted { event_id, outbox_seq, .. } => {
            Some((*outbox_seq, format!("event {event_id}")))
        }
        LedgerEntry::Alert { alert_id, revision, outbox_seq, .. } => {
            Some((*outbox_seq, format!("alert {alert_id} revision {revision}")))
        }
        _ => None,
    }
}

impl PrunedSummary {
    /// An empty summary: nothing pruned.
    pub fn new() -> Self {
        PrunedSummary { newest_at_ms: i64::MIN, ..PrunedSummary::default() }
    }

    /// Folds ledger record `seq` into the summary; records come in ledger order.
    pub fn absorb(&mut self, seq: u64, r: &LedgerRecord) {
        self.through = self.through.max(seq);
        *self.kinds.entry(kind_name(&r.entry).to_string()).or_default() += 1;
        if let Some((outbox_seq, what)) = owed(&r.entry) {
            self.owed.insert(outbox_seq, what);
        }
        match &r.entry {
            LedgerEntry::Accepted { machine, sensor, seq, ts_ms, .. } => {
                self.accepted_events += 1;
                self.newest_at_ms = self.newest_at_ms.max(r.at_ms);
                let s = self.sensors.entry(format!("{machine}/{sensor}")).or_default();
                s.accepted += 1;
                s.last_seq = s.last_seq.max(*seq);
                s.last_at_ms = s.last_at_ms.max(r.at_ms);
                insert_run(&mut s.runs, *seq, *ts_ms);
            }
            LedgerEntry::Alert { .. } => self.alert_records += 1,
            LedgerEntry::Acknowledged { outbox_seqs } => {
                for s in outbox_seqs {
                    if self.owed.remove(s).is_some() {
                        self.acknowledged += 1;
                    }
                }
            }
            LedgerEntry::Recovery { salvage: Some(s), .. } => {
                self.lost_outbox.extend(&s.lost_outbox);
            }
            LedgerEntry::SourceEnded { reason, sensors, .. } => {
                for e in sensors {
                    let key = format!("{}/{}", e.machine, e.sensor);
                    self.ended.insert(key, (e.last_seq, reason.clone()));
                }
            }
            LedgerEntry::Shed { gap, .. } | LedgerEntry::GapDeclared { gap, .. } => match gap.range
            {
                GapRange::Events { from_seq, to_seq } => {
                    self.event_gaps.push((gap.sensor.clone(), from_seq, to_seq, gap.reason.clone()))
                }
                GapRange::Samples { from_ms, to_ms } => {
                    let key = format!("{}/{}/{}", gap.machine, gap.sensor, gap.reason);
                    let t = self.sample_gaps.entry(key).or_insert(SampleGapTotal {
                        count: 0,
                        from_ms,
                        to_ms,
                    });
                    t.count += 1;
                    t.from_ms = t.from_ms.min(from_ms);
                    t.to_ms = t.to_ms.max(to_ms);
                }
            },
            _ => {}
        }
    }

    /// Records pruned in all.
    pub fn records(&self) -> u64 {
        self.kinds.values().sum()
    }

    pub fn encode(&self) -> Vec<u8> {
        super::cbor::encode(&[VERSION], self)
    }

    pub fn decode(bytes: &[u8]) -> Result<PrunedSummary, PrunedDecodeError> {
        super::cbor::decode_versioned(VERSION, "pruned-ledger summary", bytes)
            .map_err(PrunedDecodeError)
    }
}

/// Adds `seq` (event time `ts_ms`) to disjoint ascending runs, merging neighbours. A seq that is
/// already in a run changes nothing.
pub fn insert_run(runs: &mut Runs, seq: u64, ts_ms: i64) {
    // The usual case: the next seq of the last run.
    if let Some(last) = runs.last_mut() {
        if seq == last.1 + 1 {
            last.1 = seq;
            return;
        }
    }
    let i = runs.partition_point(|r| r.1 < seq);
    if runs.get(i).is_some_and(|r| r.0 <= seq) {
        return;
    }
    let joins_prev = i > 0 && runs[i - 1].1 + 1 == seq;
    let joins_next = runs.get(i).is_some_and(|r| r.0 == seq + 1);
    match (joins_prev, joins_next) {
        (true, true) => {
            runs[i - 1].1 = runs[i].1;
            runs.remove(i);
        }
        (true, false) => runs[i - 1].1 = seq,
        (false, true) => runs[i] = (seq, runs[i].1, ts_ms),
        (false, false) => runs.insert(i, (seq, seq, ts_ms)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn runs_merge_in_any_order() {
        let mut runs = Vec::new();
        for (s, ts) in [(5, 50), (1, 10), (3, 30), (2, 20), (9, 90), (4, 40), (4, 41)] {
            insert_run(&mut runs, s, ts);
        }
        assert_eq!(runs, vec![(1, 5, 10), (9, 9, 90)]);
    }

    proptest! {
        #[test]
        fn runs_are_the_set_of_seqs(seqs in prop::collection::vec(0u64..40, 0..60)) {
            let mut runs = Vec::new();
            for &s in &seqs {
                insert_run(&mut runs, s, s as i64 * 10);
            }
            let want: std::collections::BTreeSet<u64> = seqs.iter().copied().collect();
            let got: std::collections::BTreeSet<u64> =
                runs.iter().flat_map(|&(a, b, _)| a..=b).collect();
            prop_assert_eq!(got, want);
            for w in runs.windows(2) {
                prop_assert!(w[0].1 + 1 < w[1].0, "runs {:?} touch", runs);
            }
            for &(a, _, ts) in &runs {
                prop_assert_eq!(ts, a as i64 * 10);
            }
        }
    }

    #[test]
    fn round_trips_and_damage_is_an_error() {
        let mut s = PrunedSummary::new();
        s.absorb(3, &LedgerRecord::new(5, LedgerEntry::Acknowledged { outbox_seqs: vec![1] }));
        let b = s.encode();
        assert_eq!(PrunedSummary::decode(&b), Ok(s));
        assert!(PrunedSummary::decode(&b[..b.len() - 2]).is_err());
        assert!(PrunedSummary::decode(&[9]).unwrap_err().0.contains("version 9"));
    }
}
