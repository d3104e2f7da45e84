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

use super::view::View;
use super::AuditError;
use crate::config::Config;
use crate::records::ledger::{DrillPhase, LedgerEntry, LedgerRecord};
use crate::records::outbox::GapRange;
use crate::records::pruned::{insert_run, owed as owed_by, PrunedSummary, Runs};
use crate::timefmt::time;

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
    /// Ledger records that retention folded into its summary (`[store] history`); the totals
    /// above include them.
    pub pruned_records: u64,
    /// Declared raw-sample gaps among them, per sensor and reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pruned_sample_gaps: Vec<PrunedSampleGaps>,
    /// Sensors that have sent nothing for `idle_timeout` or longer (section 11): what they may
    /// still send after their last seq is a gap like any other, delayed or missing.
    pub silent_tails: Vec<SilentTail>,
    /// The first question: did the gateway lose anything it accepted?
    pub gateway_lost_nothing: bool,
    /// The second: is source data missing that nobody declared (a hole past allowed lateness, a
    /// silent sensor's tail)? Declared gaps are accounted for, with their reasons.
    pub source_complete: bool,
    /// Failures injected on purpose (`linegate drill`), with what the ledger recorded while
    /// each was on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drills: Vec<DrillReport>,
}

/// One drill: from its `start` record to its `end` (`None`: still on), and what the ledger
/// recorded meanwhile (gaps declared by reason, alert records by kind, restarts, recoveries,
/// quarantined records, late and too-late events, duplicates), as `(what, count)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DrillReport {
    pub name: String,
    pub start_ms: Option<i64>,
    pub end_ms: Option<i64>,
    pub during: BTreeMap<String, u64>,
}

/// What a ledger record counts for in a drill's report, if anything.
fn drill_note(e: &LedgerEntry) -> Option<String> {
    use crate::records::ledger::Acceptance;
    Some(match e {
        LedgerEntry::GapDeclared { gap, .. } | LedgerEntry::Shed { gap, .. } => {
            format!("gap declared ({})", gap.reason)
        }
        LedgerEntry::Alert { alert_kind, .. } => format!("alert {alert_kind}"),
        LedgerEntry::Restart { .. } => "restart".into(),
        LedgerEntry::Recovery { .. } => "recovery".into(),
        LedgerEntry::Quarantined { reason, .. } => format!("quarantined ({reason})"),
        LedgerEntry::Duplicate { .. } => "duplicate".into(),
        LedgerEntry::ClockStep { .. } => "clock step".into(),
        LedgerEntry::RuleChanged { .. } => "rule changed".into(),
        LedgerEntry::SourceEnded { reason, .. } => format!("source ended ({reason})"),
        LedgerEntry::Accepted { how: Acceptance::LateApplied, .. } => "late event applied".into(),
        LedgerEntry::Accepted { how: Acceptance::TooLate, .. } => "too-late event".into(),
        _ => return None,
    })
}

/// The tail of a sensor that went quiet: everything after `last_seq`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SilentTail {
    pub machine: String,
    pub sensor: String,
    /// `None`: configured, never heard from.
    pub last_seq: Option<u64>,
    /// Ingest time since its last accepted event, at the newest ingest time decided.
    pub quiet_ms: Option<i64>,
    #[serde(flatten)]
    pub status: TailStatus,
    /// For an ended tail: why (`end_of_trace`, `removed_from_configuration`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a quiet sensor's tail is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum TailStatus {
    /// Idle: quiet for `idle_timeout`, within allowed lateness: what it sends may still count.
    Delayed,
    /// Silent: quiet past allowed lateness (or never heard from).
    Missing,
    /// Declared: its source ended after its last seq (a `source_ended` record).
    Ended,
}

/// Exit status of `reconcile`: nothing lost and no undeclared source data missing.
pub const EXIT_OK: u8 = 0;
/// Exit status: the gateway lost something it had accepted.
pub const EXIT_GATEWAY_LOST: u8 = 1;
/// Exit status: the gateway lost nothing, but source data is missing undeclared.
pub const EXIT_SOURCE_MISSING: u8 = 3;

/// Declared raw-sample gaps of one sensor for one reason in the pruned part of the ledger: how
/// many, and the span of event time they lie in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrunedSampleGaps {
    pub machine: String,
    pub sensor: String,
    pub reason: String,
    pub count: u64,
    pub from_ms: i64,
    pub to_ms: i64,
}

impl Reconciliation {
    /// True when everything is accounted for: nothing lost, nothing missing undeclared.
    pub fn ok(&self) -> bool {
        self.gateway_lost_nothing && self.source_complete
    }

    /// [`EXIT_OK`], [`EXIT_GATEWAY_LOST`] (whatever the source did) or [`EXIT_SOURCE_MISSING`].
    pub fn exit_code(&self) -> u8 {
        match (self.gateway_lost_nothing, self.source_complete) {
            (false, _) => EXIT_GATEWAY_LOST,
            (true, false) => EXIT_SOURCE_MISSING,
            (true, true) => EXIT_OK,
        }
    }
}

/// What reconcile needs of the configuration.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    pub allowed_lateness_ms: i64,
    pub idle_timeout_ms: i64,
    /// Sensors configured on live sources: never heard from, they are silent.
    pub configured: Vec<(String, String)>,
}

impl Limits {
    pub fn of(config: &Config) -> Limits {
        Limits {
            allowed_lateness_ms: config.time.allowed_lateness_ms,
            idle_timeout_ms: config.time.idle_timeout_ms,
            configured: config.configured_sensors().0,
        }
    }
}

/// Reconciles `ledger` (in order, what retention left after `pruned`) against the outbox
/// sequences still `queued`. The answer is the one the whole ledger would give: `pruned` carries
/// the totals, the pruned records still owed an acknowledgement and each sensor's seq runs.
pub fn reconcile_ledger<'a>(
    pruned: &PrunedSummary,
    ledger: impl IntoIterator<Item = &'a LedgerRecord>,
    queued: &BTreeSet<u64>,
    limits: &Limits,
) -> Reconciliation {
    let allowed_lateness_ms = limits.allowed_lateness_ms;
    // Per sensor: the highest seq and the newest ingest time of its accepted events.
    let mut last: BTreeMap<(String, String), (u64, i64)> = pruned
        .sensors
        .iter()
        .filter_map(|(k, s)| {
            let (m, sensor) = k.split_once('/')?;
            Some(((m.to_string(), sensor.to_string()), (s.last_seq, s.last_at_ms)))
        })
        .collect();
    let mut acked = BTreeSet::new();
    let mut owed: Vec<(String, u64)> =
        pruned.owed.iter().map(|(seq, what)| (what.clone(), *seq)).collect();
    // Per sensor: runs of seqs `(from, to, ts_ms of from)`, the pruned ones first.
    let mut seqs: BTreeMap<(String, String), Runs> = pruned
        .sensors
        .iter()
        .filter_map(|(k, s)| {
            let (m, sensor) = k.split_once('/')?;
            Some(((m.to_string(), sensor.to_string()), s.runs.clone()))
        })
        .collect();
    let mut declared = pruned.event_gaps.clone();
    let mut newest = pruned.newest_at_ms;
    let mut lost = pruned.lost_outbox.clone();
    // Per sensor: the last seq a `source_ended` record declared its tail after, and why.
    let mut ended: BTreeMap<(String, String), (u64, String)> = pruned
        .ended
        .iter()
        .filter_map(|(k, v)| {
            let (m, sensor) = k.split_once('/')?;
            Some(((m.to_string(), sensor.to_string()), v.clone()))
        })
        .collect();
    // Indexes into `r.drills` of the drills on.
    let mut on: Vec<usize> = Vec::new();
    let mut r = Reconciliation {
        accepted_events: pruned.accepted_events,
        alert_records: pruned.alert_records,
        acknowledged: pruned.acknowledged,
        pruned_records: pruned.records(),
        pruned_sample_gaps: pruned
            .sample_gaps
            .iter()
            .filter_map(|(k, t)| {
                let mut parts = k.splitn(3, '/');
                Some(PrunedSampleGaps {
                    machine: parts.next()?.to_string(),
                    sensor: parts.next()?.to_string(),
                    reason: parts.next()?.to_string(),
                    count: t.count,
                    from_ms: t.from_ms,
                    to_ms: t.to_ms,
                })
            })
            .collect(),
        ..Reconciliation::default()
    };
    for rec in ledger {
        if let Some((seq, what)) = owed_by(&rec.entry) {
            owed.push((what, seq));
        }
        if let Some(note) = drill_note(&rec.entry).filter(|_| !on.is_empty()) {
            for &i in &on {
                *r.drills[i].during.entry(note.clone()).or_default() += 1;
            }
        }
        match &rec.entry {
            LedgerEntry::SourceEnded { reason, sensors, .. } => {
                for e in sensors {
                    let key = (e.machine.clone(), e.sensor.clone());
                    ended.insert(key, (e.last_seq, reason.clone()));
                }
            }
            LedgerEntry::Drill { name, phase, .. } => {
                drill(&mut r.drills, &mut on, name, *phase, rec.at_ms)
            }
            LedgerEntry::Accepted { machine, sensor, seq, ts_ms, .. } => {
                r.accepted_events += 1;
                newest = newest.max(rec.at_ms);
                let runs = seqs.entry((machine.clone(), sensor.clone())).or_default();
                insert_run(runs, *seq, *ts_ms);
                let l = last.entry((machine.clone(), sensor.clone())).or_insert((0, i64::MIN));
                *l = (l.0.max(*seq), l.1.max(rec.at_ms));
            }
            LedgerEntry::Alert { .. } => r.alert_records += 1,
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
    for ((machine, sensor), runs) in seqs {
        for w in runs.windows(2) {
            let (from_seq, to_seq, ts) = (w[0].1 + 1, w[1].0 - 1, w[1].2);
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
    }
    for (m, s) in &limits.configured {
        last.entry((m.clone(), s.clone())).or_insert((0, i64::MIN));
    }
    for ((machine, sensor), (seq, at)) in last {
        let heard = at != i64::MIN;
        let quiet_ms = heard.then(|| newest.saturating_sub(at));
        let reason = ended
            .remove(&(machine.clone(), sensor.clone()))
            .filter(|(after, _)| heard && *after >= seq)
            .map(|(_, why)| why);
        let status = match quiet_ms {
            _ if reason.is_some() => TailStatus::Ended,
            None => TailStatus::Missing,
            Some(q) if q > allowed_lateness_ms => TailStatus::Missing,
            Some(q) if q >= limits.idle_timeout_ms => TailStatus::Delayed,
            Some(_) => continue,
        };
        let last_seq = heard.then_some(seq);
        r.silent_tails.push(SilentTail { machine, sensor, last_seq, quiet_ms, status, reason });
    }
    r.gateway_lost_nothing = r.unaccounted.is_empty();
    r.source_complete = !r.gaps.iter().any(|g| matches!(g.status, GapStatus::Undeclared { .. }))
        && !r.silent_tails.iter().any(|t| t.status == TailStatus::Missing);
    r
}

/// A drill's `start` opens its report (a second start of one on restarts it); its `end` closes
/// the last one of that name still on, or stands alone when none is.
fn drill(
    drills: &mut Vec<DrillReport>,
    on: &mut Vec<usize>,
    name: &str,
    phase: DrillPhase,
    at: i64,
) {
    let open = on.iter().position(|&i| drills[i].name == name);
    match (phase, open) {
        (DrillPhase::Start, Some(k)) => {
            drills[on[k]].start_ms = Some(at);
        }
        (DrillPhase::Start, None) => {
            on.push(drills.len());
            let during = BTreeMap::new();
            drills.push(DrillReport {
                name: name.into(),
                start_ms: Some(at),
                end_ms: None,
                during,
            });
        }
        (DrillPhase::End, Some(k)) => {
            drills[on.remove(k)].end_ms = Some(at);
        }
        (DrillPhase::End, None) => {
            let during = BTreeMap::new();
            drills.push(DrillReport {
                name: name.into(),
                start_ms: None,
                end_ms: Some(at),
                during,
            });
        }
    }
}

/// `linegate reconcile`: prints the report (text or JSON); the exit status answers its two
/// questions ([`Reconciliation::exit_code`]).
pub fn reconcile(
    view: &mut View<'_>,
    config: &Config,
    json: bool,
    out: &mut dyn Write,
) -> Result<u8, AuditError> {
    reconcile_with(view, config, json, false, out)
}

/// [`reconcile`]; with `record` (`linegate reconcile --record`), the verdict is also written into
/// the ledger (a `reconciled` record naming who asked), through the daemon when one holds the
/// store.
pub fn reconcile_with(
    view: &mut View<'_>,
    config: &Config,
    json: bool,
    record: bool,
    out: &mut dyn Write,
) -> Result<u8, AuditError> {
    let (snapshot, queued) = view.ledger_and_queue()?;
    let r = reconcile_ledger(
        &snapshot.pruned,
        snapshot.records.iter().map(|(_, r)| r),
        &queued,
        &Limits::of(config),
    );
    let code = r.exit_code();
    if record {
        let entry = verdict(&r, Some(view.operator()));
        let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock::new());
        view.write(|s| s.append_ledger(&[LedgerRecord::new(now, entry)]))?;
    }
    print(&r, json, out)?;
    if record && !json {
        writeln!(out, "reconcile: verdict recorded in the ledger")?;
    }
    Ok(code)
}

/// The `reconciled` ledger record of a report.
pub fn verdict(r: &Reconciliation, by: Option<crate::records::ledger::Operator>) -> LedgerEntry {
    let undeclared = r.gaps.iter().filter(|g| matches!(g.status, GapStatus::Undeclared { .. }));
    LedgerEntry::Reconciled {
        accepted_events: r.accepted_events,
        alert_records: r.alert_records,
        acknowledged: r.acknowledged,
        queued: r.queued,
        declared_lost: r.declared_lost,
        unaccounted: r.unaccounted.len() as u64,
        gaps: r.gaps.len() as u64,
        undeclared_gaps: undeclared.count() as u64,
        missing_tails: r.silent_tails.iter().filter(|t| t.status == TailStatus::Missing).count()
            as u64,
        exit: r.exit_code(),
        by,
    }
}

/// The report, as text or JSON.
fn print(r: &Reconciliation, json: bool, out: &mut dyn Write) -> Result<(), AuditError> {
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
        if r.pruned_records > 0 {
            writeln!(
                out,
                "  {} older ledger records are folded into the history summary ([store] history)",
                r.pruned_records
            )?;
        }
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
                    "delayed (still coming: {} behind, within allowed lateness)",
                    super::status::words(*behind_ms)
                ),
                GapStatus::Missing { reason } => format!("missing (declared: {reason})"),
                GapStatus::Undeclared { behind_ms } => {
                    format!(
                        "MISSING AND UNDECLARED ({} behind, past allowed lateness)",
                        super::status::words(*behind_ms)
                    )
                }
            };
            let seqs = match g.to_seq - g.from_seq {
                0 => format!("seq {}", g.from_seq),
                _ => format!("seqs {} to {}", g.from_seq, g.to_seq),
            };
            writeln!(out, "  gap {}/{} {seqs}: {what}", g.machine, g.sensor)?;
        }
        for g in &r.sample_gaps {
            writeln!(
                out,
                "  gap {}/{} samples [{}, {}): missing (declared: {})",
                g.machine,
                g.sensor,
                time(g.from_ms),
                time(g.to_ms),
                g.reason
            )?;
        }
        for g in &r.pruned_sample_gaps {
            writeln!(
                out,
                "  {} gaps {}/{} samples within [{}, {}): missing (declared: {}; pruned history)",
                g.count,
                g.machine,
                g.sensor,
                time(g.from_ms),
                time(g.to_ms),
                g.reason
            )?;
        }
        for t in &r.silent_tails {
            let last = match (t.last_seq, t.quiet_ms) {
                (Some(seq), Some(q)) => {
                    format!("after seq {seq}, quiet for {}", super::status::words(q))
                }
                _ => "configured, never heard from".to_string(),
            };
            let what = match t.status {
                TailStatus::Delayed => "delayed (idle, still within allowed lateness)".into(),
                TailStatus::Missing => "MISSING (silent past allowed lateness)".into(),
                TailStatus::Ended => format!(
                    "ended (declared: {})",
                    t.reason.as_deref().unwrap_or("source ended").replace('_', " ")
                ),
            };
            writeln!(out, "  tail {}/{} {last}: {what}", t.machine, t.sensor)?;
        }
        for d in &r.drills {
            let from = d.start_ms.map_or("(no start recorded)".into(), time);
            let to = d.end_ms.map_or("still on".into(), |t| format!("to {}", time(t)));
            let during = if d.during.is_empty() {
                "nothing recorded meanwhile".to_string()
            } else {
                let parts: Vec<String> =
                    d.during.iter().map(|(what, n)| format!("{n} {what}")).collect();
                format!("meanwhile {}", parts.join(", "))
            };
            writeln!(out, "  drill {} from {from} {to}: {during}", d.name)?;
        }
        let lost = if r.gateway_lost_nothing {
            "the gateway lost nothing it accepted"
        } else {
            "THE GATEWAY LOST RECORDS IT ACCEPTED"
        };
        let source = if r.source_complete {
            "no source data missing beyond what is declared"
        } else {
            "SOURCE DATA IS MISSING, undeclared (see the gaps and tails above)"
        };
        writeln!(out, "reconcile: {lost}; {source}")?;
        let verdict = match r.exit_code() {
            EXIT_OK => "reconcile: ok",
            EXIT_SOURCE_MISSING => "reconcile: source data missing (exit 3)",
            _ => "reconcile: FAILED (exit 1)",
        };
        writeln!(out, "{verdict}")?;
    }
    Ok(())
}

/// Limits with `allowed_lateness_ms` and an idle timeout as long (no idle tails on their own).
#[cfg(test)]
fn lim(allowed_lateness_ms: i64) -> Limits {
    Limits { allowed_lateness_ms, idle_timeout_ms: allowed_lateness_ms, configured: Vec::new() }
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
                rules: Vec::new(),
                watermark_ms: None,
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
        let r = reconcile_ledger(&PrunedSummary::new(), &ledger, &queued, &lim(10_000));
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
        let r = reconcile_ledger(&PrunedSummary::new(), &ledger, &[2].into(), &lim(10_000));
        assert!(r.ok());
        assert_eq!((r.acknowledged, r.queued), (1, 1));
        let r = reconcile_ledger(&PrunedSummary::new(), &ledger, &BTreeSet::new(), &lim(10_000));
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
        let r = reconcile_ledger(&PrunedSummary::new(), &ledger, &BTreeSet::new(), &lim(10_000));
        assert!(r.ok(), "{r:?}");
        assert_eq!((r.acknowledged, r.declared_lost), (1, 1));
    }
}

/// Declared tails and drills.
#[cfg(test)]
mod ledger_facts_tests {
    use super::*;
    use crate::records::ledger::{Acceptance, EndedSensor};

    fn accepted(sensor: &str, seq: u64, at: i64) -> LedgerRecord {
        let entry = LedgerEntry::Accepted {
            event_id: format!("{sensor}.{seq}"),
            machine: "m".into(),
            sensor: sensor.into(),
            seq,
            ts_ms: at - 100,
            how: Acceptance::Applied,
            journal_pos: seq,
            outbox_seq: seq,
            counted: false,
            rules: Vec::new(),
            watermark_ms: None,
        };
        LedgerRecord::new(at, entry)
    }

    fn ended(sensor: &str, last_seq: u64) -> LedgerRecord {
        let sensors = vec![EndedSensor { machine: "m".into(), sensor: sensor.into(), last_seq }];
        let entry = LedgerEntry::SourceEnded {
            source: "trace t.jsonl".into(),
            reason: "end_of_trace".into(),
            journal_pos: 9,
            sensors,
        };
        LedgerRecord::new(0, entry)
    }

    fn drill(phase: DrillPhase, at: i64) -> LedgerRecord {
        LedgerRecord::new(at, LedgerEntry::Drill { name: "pull".into(), phase, by: None })
    }

    /// A silent sensor's tail is missing until its source declares it ended after its last seq;
    /// an event after the declaration makes it due again.
    #[test]
    fn a_declared_tail_is_ended_not_missing() {
        let mut ledger = vec![accepted("a", 1, 1_000), accepted("b", 1, 900_000)];
        let queued: BTreeSet<u64> = [1, 2].into();
        let r = reconcile_ledger(&PrunedSummary::new(), &ledger, &queued, &lim(600_000));
        assert_eq!(r.exit_code(), EXIT_SOURCE_MISSING);
        ledger.push(ended("a", 1));
        let r = reconcile_ledger(&PrunedSummary::new(), &ledger, &queued, &lim(600_000));
        assert_eq!(r.exit_code(), EXIT_OK, "{r:?}");
        assert_eq!(r.silent_tails[0].status, TailStatus::Ended);
        assert_eq!(r.silent_tails[0].reason.as_deref(), Some("end_of_trace"));
        let mut summary = PrunedSummary::new();
        for (i, rec) in ledger.iter().enumerate() {
            summary.absorb(i as u64 + 1, rec);
        }
        let r = reconcile_ledger(&summary, &[], &queued, &lim(600_000));
        assert_eq!(r.exit_code(), EXIT_OK, "a pruned declaration still holds: {r:?}");
        ledger.push(accepted("a", 2, 2_000));
        let r = reconcile_ledger(&PrunedSummary::new(), &ledger, &[1, 2, 2].into(), &lim(600_000));
        assert_eq!(r.exit_code(), EXIT_SOURCE_MISSING, "seq 2 came after the declaration");
        let verdict = verdict(&r, None);
        assert!(matches!(verdict, LedgerEntry::Reconciled { missing_tails: 1, exit: 3, .. }));
    }

    /// A drill counts what the ledger recorded between its start and its end.
    #[test]
    fn a_drill_shows_what_happened_while_it_was_on() {
        let dup =
            LedgerRecord::new(5, LedgerEntry::Duplicate { event_id: "a.1".into(), journal_pos: 2 });
        let ledger = vec![
            dup.clone(),
            drill(DrillPhase::Start, 10),
            dup.clone(),
            dup.clone(),
            accepted("a", 1, 20),
            drill(DrillPhase::End, 30),
            dup,
            drill(DrillPhase::Start, 40),
        ];
        let r = reconcile_ledger(&PrunedSummary::new(), &ledger, &[1].into(), &lim(600_000));
        let want = DrillReport {
            name: "pull".into(),
            start_ms: Some(10),
            end_ms: Some(30),
            during: [("duplicate".to_string(), 2)].into(),
        };
        assert_eq!(r.drills[0], want);
        assert_eq!((r.drills[1].start_ms, r.drills[1].end_ms), (Some(40), None));
        let mut text = Vec::new();
        print(&r, false, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("drill pull from 1970-01-01T00:00:00.010Z to 1970-01-01T00:00:00.030Z: meanwhile 2 duplicate"), "{text}");
        assert!(text.contains("still on"), "{text}");
    }
}

/// Reconciling what retention left with its summary gives the answer of the whole ledger, for a
/// cut anywhere: the property `[store] history` rests on.
#[cfg(test)]
mod pruned_tests {
    use super::*;

    fn lim5() -> Limits {
        lim(5_000)
    }
    use crate::records::ledger::{Acceptance, Salvage};
    use crate::records::outbox::GapNotice;
    use proptest::prelude::*;

    /// Ledger record `i` (from 0): accepted events and alert records use outbox sequence `i + 1`,
    /// unique as in a store.
    fn record(i: usize, op: (u8, u8, u64, u64)) -> LedgerRecord {
        let (kind, sensor, a, b) = op;
        let own = i as u64 + 1;
        let sensor = format!("s{}", sensor % 2);
        let entry = match kind % 6 {
            0 | 1 => LedgerEntry::Accepted {
                event_id: format!("{sensor}.{a}"),
                machine: "m".into(),
                sensor,
                seq: a,
                ts_ms: a as i64 * 1000,
                how: Acceptance::Applied,
                journal_pos: a,
                outbox_seq: own,
                counted: false,
                rules: Vec::new(),
                watermark_ms: None,
            },
            // An acknowledgement follows what it acknowledges.
            2 => LedgerEntry::Acknowledged { outbox_seqs: vec![1 + a % own, 1 + b % own] },
            3 => LedgerEntry::Alert {
                alert_id: format!("a{a}"),
                revision: 0,
                alert_kind: "open".into(),
                machine: "m".into(),
                caused_by: None,
                outbox_seq: own,
            },
            4 => {
                let gap = GapNotice {
                    machine: "m".into(),
                    sensor,
                    range: if a % 2 == 0 {
                        GapRange::Events { from_seq: a.min(b), to_seq: a.max(b) }
                    } else {
                        GapRange::Samples { from_ms: a as i64, to_ms: b as i64 }
                    },
                    reason: "overrun".into(),
                    declared_at_ms: 0,
                };
                LedgerEntry::GapDeclared { gap, outbox_seq: 1000 + a }
            }
            _ => LedgerEntry::Recovery {
                what: "x".into(),
                moved_to: None,
                lost: "y".into(),
                salvage: Some(Salvage {
                    lost_outbox: vec![(a.min(b), a.max(b))],
                    ..Salvage::default()
                }),
            },
        };
        LedgerRecord::new((a * 1000) as i64, entry)
    }

    proptest! {
        #[test]
        fn a_pruned_prefix_and_its_summary_reconcile_as_the_whole_ledger(
            ops in prop::collection::vec((0u8..6, 0u8..2, 1u64..60, 1u64..60), 0..60),
            queued in prop::collection::btree_set(1u64..60, 0..20),
            cut in 0usize..60,
        ) {
            let ledger: Vec<LedgerRecord> = ops.into_iter().enumerate().map(|(i, op)| record(i, op)).collect();
            let cut = cut.min(ledger.len());
            let whole = reconcile_ledger(&PrunedSummary::new(), &ledger, &queued, &lim5());
            let mut summary = PrunedSummary::new();
            for (i, r) in ledger[..cut].iter().enumerate() {
                summary.absorb(i as u64 + 1, r);
            }
            let summary = PrunedSummary::decode(&summary.encode()).unwrap();
            let part = reconcile_ledger(&summary, &ledger[cut..], &queued, &lim5());
            prop_assert_eq!(part.pruned_records, cut as u64);
            let pruned_gaps: u64 = part.pruned_sample_gaps.iter().map(|g| g.count).sum();
            prop_assert_eq!(pruned_gaps as usize + part.sample_gaps.len(), whole.sample_gaps.len());
            let strip = |r: Reconciliation| Reconciliation {
                pruned_records: 0,
                pruned_sample_gaps: Vec::new(),
                sample_gaps: Vec::new(),
                unaccounted: { let mut u = r.unaccounted; u.sort(); u },
                ..r
            };
            prop_assert_eq!(strip(part), strip(whole));
        }
    }

    /// A ledger pruned by the store (`crate::store::pruned_ledger`) reconciles from its summary
    /// and the records after it: nothing lost, every decision and acknowledgement counted.
    #[test]
    fn a_store_s_pruned_ledger_reconciles_as_the_whole_one() {
        let tmp = tempfile::tempdir().unwrap();
        let s = crate::store::pruned_ledger(tmp.path());
        let summary = s.pruned_summary().unwrap();
        let rest: Vec<_> = s.ledger_from(1).map(|r| r.unwrap()).collect();
        let limits = Limits { allowed_lateness_ms: 1, idle_timeout_ms: 1, configured: Vec::new() };
        let r = reconcile_ledger(&summary, rest.iter().map(|(_, r)| r), &BTreeSet::new(), &limits);
        assert!(r.gateway_lost_nothing, "{r:?}");
        assert_eq!((r.accepted_events, r.alert_records, r.acknowledged), (3, 2, 5));
        assert!(r.gaps.is_empty(), "{:?}", r.gaps);
    }
}
