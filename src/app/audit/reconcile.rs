//! `linegate reconcile`: proves from the ledger that every accepted event and every alert record
//! was acknowledged or is still queued, and classifies every sequence gap.
//!
//! A gap is a run of seq numbers of one sensor missing between the lowest and the highest it has
//! accepted. It is *missing* when a `Shed` or `GapDeclared` record declares it (with the reason),
//! *delayed* when it may still come: the event after it is within `allowed_lateness` of the
//! newest ingest time in the ledger, so the missing events would still be applied. Any other gap
//! is missing and undeclared: a failure, as is an accepted event or alert record neither
//! acknowledged nor queued, unless a recovery's `Recovery` record lists its outbox record as lost
//! (counted as declared lost). Raw samples declared missing (shed by the retention budget, lost to a
//! sensor overrun) are listed as missing ranges of event time, with the reason.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use serde::Serialize;

use super::AuditError;
use crate::config::Config;
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::records::outbox::GapRange;
use crate::store::Store;

/// What a gap is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum GapStatus {
    /// May still arrive: the event after it is `behind_ms` behind the newest ingest time.
    Delayed { behind_ms: i64 },
    /// Declared: will never be delivered, for `reason`.
    Missing { reason: String },
    /// Not declared and no longer expected: a failure.
    Undeclared { behind_ms: i64 },
}

/// One gap of one sensor: seqs `from_seq..=to_seq`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gap {
    pub machine: String,
    pub sensor: String,
    pub from_seq: u64,
    pub to_seq: u64,
    #[serde(flatten)]
    pub status: GapStatus,
}

/// Raw samples of one sensor in `[from_ms, to_ms)` of event time, declared missing for `reason`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SampleGap {
    pub machine: String,
    pub sensor: String,
    pub from_ms: i64,
    pub to_ms: i64,
    pub reason: String,
}

/// The report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reconciliation {
    pub accepted_events: u64,
    pub alert_records: u64,
    pub acknowledged: u64,
    pub queued: u64,
    /// Accepted events or alert records whose outbox record a recovery could not read (listed
    /// in its `Recovery` ledger record, declared as `corrupt` gaps where attributable).
    pub declared_lost: u64,
    /// Accepted events or alert records neither acknowledged nor queued.
    pub unaccounted: Vec<String>,
    pub gaps: Vec<Gap>,
    /// Declared raw-sample gaps, in ledger order.
    pub sample_gaps: Vec<SampleGap>,
}

impl Reconciliation {
    /// True when everything is accounted for.
    pub fn ok(&self) -> bool {
        self.unaccounted.is_empty()
            && !self.gaps.iter().any(|g| matches!(g.status, GapStatus::Undeclared { .. }))
    }
}

/// Reconciles `ledger` (in order) against the outbox sequences still `queued`.
pub fn reconcile_ledger<'a>(
    ledger: impl IntoIterator<Item = &'a LedgerRecord>,
    queued: &BTreeSet<u64>,
    allowed_lateness_ms: i64,
) -> Reconciliation {
    let mut acked = BTreeSet::new();
    let mut owed: Vec<(String, u64)> = Vec::new();
    let mut seqs: BTreeMap<(String, String), BTreeMap<u64, i64>> = BTreeMap::new();
    let mut declared: Vec<(String, u64, u64, String)> = Vec::new();
    let mut newest = i64::MIN;
    let mut lost: Vec<(u64, u64)> = Vec::new();
    let mut r = Reconciliation::default();
    for rec in ledger {
        match &rec.entry {
            LedgerEntry::Accepted { event_id, machine, sensor, seq, ts_ms, outbox_seq, .. } => {
                r.accepted_events += 1;
                newest = newest.max(rec.at_ms);
                owed.push((format!("event {event_id}"), *outbox_seq));
                seqs.entry((machine.clone(), sensor.clone())).or_default().insert(*seq, *ts_ms);
            }
            LedgerEntry::Alert { alert_id, revision, outbox_seq, .. } => {
                r.alert_records += 1;
                owed.push((format!("alert {alert_id} revision {revision}"), *outbox_seq));
            }
            LedgerEntry::Acknowledged { outbox_seqs } => acked.extend(outbox_seqs.iter().copied()),
            LedgerEntry::Recovery { salvage: Some(s), .. } => lost.extend(&s.lost_outbox),
            LedgerEntry::Shed { gap, .. } | LedgerEntry::GapDeclared { gap, .. } => match gap.range
            {
                GapRange::Events { from_seq, to_seq } => {
                    declared.push((gap.sensor.clone(), from_seq, to_seq, gap.reason.clone()));
                }
                GapRange::Samples { from_ms, to_ms } => r.sample_gaps.push(SampleGap {
                    machine: gap.machine.clone(),
                    sensor: gap.sensor.clone(),
                    from_ms,
                    to_ms,
                    reason: gap.reason.clone(),
                }),
            },
            _ => {}
        }
    }
    for (what, seq) in owed {
        if acked.contains(&seq) {
            r.acknowledged += 1;
        } else if queued.contains(&seq) {
            r.queued += 1;
        } else if lost.iter().any(|&(from, to)| from <= seq && seq <= to) {
            r.declared_lost += 1;
        } else {
            r.unaccounted
                .push(format!("{what} (outbox record {seq}): neither acknowledged nor queued"));
        }
    }
    for ((machine, sensor), got) in seqs {
        let mut prev: Option<u64> = None;
        for (&seq, &ts) in &got {
            if let Some(p) = prev.filter(|&p| seq > p + 1) {
                let (from_seq, to_seq) = (p + 1, seq - 1);
                let behind_ms = newest.saturating_sub(ts);
                let reason = declared
                    .iter()
                    .find(|(s, f, t, _)| *s == sensor && *f <= from_seq && to_seq <= *t)
                    .map(|d| d.3.clone());
                let status = match reason {
                    Some(reason) => GapStatus::Missing { reason },
                    None if behind_ms <= allowed_lateness_ms => GapStatus::Delayed { behind_ms },
                    None => GapStatus::Undeclared { behind_ms },
                };
                r.gaps.push(Gap {
                    machine: machine.clone(),
                    sensor: sensor.clone(),
                    from_seq,
                    to_seq,
                    status,
                });
            }
            prev = Some(seq);
        }
    }
    r
}

/// `linegate reconcile`: prints the report (text or JSON); `Ok(false)` when it fails.
pub fn reconcile(store: &mut Store, config: &Config, json: bool) -> Result<bool, AuditError> {
    let ledger = super::ledger(store)?;
    let queued: BTreeSet<u64> =
        store.outbox_pending().map(|r| r.map(|(s, _)| s)).collect::<Result<_, _>>()?;
    let r =
        reconcile_ledger(ledger.iter().map(|(_, r)| r), &queued, config.time.allowed_lateness_ms);
    let mut out = std::io::stdout().lock();
    if json {
        let text = serde_json::to_string_pretty(&r).map_err(std::io::Error::other)?;
        writeln!(out, "{text}")?;
    } else {
        writeln!(
            out,
            "{} accepted events, {} alert records: {} acknowledged, {} queued, {} unaccounted",
            r.accepted_events,
            r.alert_records,
            r.acknowledged,
            r.queued,
            r.unaccounted.len()
        )?;
        if r.declared_lost > 0 {
            writeln!(
                out,
                "  {} lost to a damaged store (declared by its recovery)",
                r.declared_lost
            )?;
        }
        for u in &r.unaccounted {
            writeln!(out, "  UNACCOUNTED {u}")?;
        }
        for g in &r.gaps {
            let what = match &g.status {
                GapStatus::Delayed { behind_ms } => format!(
                    "delayed (still coming: {behind_ms} ms behind, within allowed lateness)"
                ),
                GapStatus::Missing { reason } => format!("missing (declared: {reason})"),
                GapStatus::Undeclared { behind_ms } => {
                    format!("MISSING AND UNDECLARED ({behind_ms} ms behind, past allowed lateness)")
                }
            };
            writeln!(
                out,
                "  gap {}/{} seq {}..={}: {what}",
                g.machine, g.sensor, g.from_seq, g.to_seq
            )?;
        }
        for g in &r.sample_gaps {
            writeln!(
                out,
                "  gap {}/{} samples [{}, {}) ms: missing (declared: {})",
                g.machine, g.sensor, g.from_ms, g.to_ms, g.reason
            )?;
        }
        writeln!(out, "{}", if r.ok() { "reconcile: ok" } else { "reconcile: FAILED" })?;
    }
    Ok(r.ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ledger::Acceptance;
    use crate::records::outbox::GapNotice;

    fn accepted(seq: u64, at: i64, outbox_seq: u64) -> LedgerRecord {
        LedgerRecord::new(
            at,
            LedgerEntry::Accepted {
                event_id: format!("e{seq}"),
                machine: "m".into(),
                sensor: "s".into(),
                seq,
                ts_ms: at - 100,
                how: Acceptance::Applied,
                journal_pos: seq,
                outbox_seq,
                counted: false,
            },
        )
    }

    fn declared(from_seq: u64, to_seq: u64) -> LedgerRecord {
        let gap = GapNotice {
            machine: "m".into(),
            sensor: "s".into(),
            range: GapRange::Events { from_seq, to_seq },
            reason: "overrun".into(),
            declared_at_ms: 0,
        };
        LedgerRecord::new(0, LedgerEntry::GapDeclared { gap, outbox_seq: 99 })
    }

    #[test]
    fn gaps_are_delayed_missing_or_undeclared() {
        let ledger = vec![
            accepted(1, 1_000, 1),
            accepted(3, 2_000, 2),   // 2 is missing, long ago: undeclared
            accepted(6, 3_000, 3),   // 4..=5 declared
            accepted(9, 100_000, 4), // 7..=8 just before the newest: delayed
            declared(4, 5),
        ];
        let queued = [1, 2, 3, 4].into();
        let r = reconcile_ledger(&ledger, &queued, 10_000);
        let st: Vec<_> = r.gaps.iter().map(|g| (g.from_seq, g.to_seq, g.status.clone())).collect();
        assert_eq!(
            st,
            vec![
                (2, 2, GapStatus::Undeclared { behind_ms: 98_100 }),
                (4, 5, GapStatus::Missing { reason: "overrun".into() }),
                (7, 8, GapStatus::Delayed { behind_ms: 100 }),
            ]
        );
        assert!(!r.ok());
    }

    #[test]
    fn every_record_must_be_acknowledged_or_queued() {
        let ledger = vec![
            accepted(1, 1_000, 1),
            accepted(2, 1_100, 2),
            LedgerRecord::new(5, LedgerEntry::Acknowledged { outbox_seqs: vec![1] }),
        ];
        let r = reconcile_ledger(&ledger, &[2].into(), 10_000);
        assert!(r.ok());
        assert_eq!((r.acknowledged, r.queued), (1, 1));
        let r = reconcile_ledger(&ledger, &BTreeSet::new(), 10_000);
        assert!(!r.ok());
        assert!(r.unaccounted[0].contains("event e2"));
        let salvage =
            crate::records::ledger::Salvage { lost_outbox: vec![(2, 3)], ..Default::default() };
        let recovery = LedgerEntry::Recovery {
            what: "o/2 does not decode".into(),
            moved_to: None,
            lost: "outbox sequences 2..=3".into(),
            salvage: Some(salvage),
        };
        let mut ledger = ledger;
        ledger.push(LedgerRecord::new(6, recovery));
        let r = reconcile_ledger(&ledger, &BTreeSet::new(), 10_000);
        assert!(r.ok(), "{r:?}");
        assert_eq!((r.acknowledged, r.declared_lost), (1, 1));
    }
}
