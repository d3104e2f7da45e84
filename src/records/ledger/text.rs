//! Ledger records in words, for the text output of the commands (docs/contracts.md section 11):
//! times as RFC 3339 UTC with milliseconds, kinds as words, never Rust's debug notation.

use super::{Acceptance, LedgerEntry, Salvage};
use crate::records::outbox::{GapNotice, GapRange};
use crate::timefmt::time;

/// Sequence numbers as a list, runs of consecutive ones as ranges: `4 to 7, 9`.
fn seqs(v: &[u64]) -> String {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &n in v {
        match runs.last_mut() {
            Some((_, last)) if last.checked_add(1) == Some(n) => *last = n,
            _ => runs.push((n, n)),
        }
    }
    let run = |&(a, b): &(u64, u64)| if a == b { a.to_string() } else { format!("{a} to {b}") };
    runs.iter().map(run).collect::<Vec<_>>().join(", ")
}

/// A gap notice: whose, what span, why.
fn gap(g: &GapNotice) -> String {
    let span = match g.range {
        GapRange::Events { from_seq, to_seq } => format!("events seq {from_seq} to {to_seq}"),
        GapRange::Samples { from_ms, to_ms } => {
            format!("raw samples from {} to {}", time(from_ms), time(to_ms))
        }
    };
    format!(
        "{}/{} {span}, reason {}, declared at {}",
        g.machine,
        g.sensor,
        g.reason,
        time(g.declared_at_ms)
    )
}

fn counts(m: &std::collections::BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "nothing".into();
    }
    m.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
}

fn salvage(s: &Salvage) -> String {
    let mut text = format!("copied {}; unreadable {}", counts(&s.copied), counts(&s.unreadable));
    if let Some(why) = &s.failed {
        text += &format!("; salvage failed: {why}");
    }
    text
}

/// A signed duration in ms, in human units (`-1m 30s`).
fn signed_duration(ms: i64) -> String {
    let d = humantime::format_duration(std::time::Duration::from_millis(ms.unsigned_abs()));
    if ms < 0 {
        format!("-{d}")
    } else {
        d.to_string()
    }
}

/// The rules that counted an event, in words: `severity (incident ALERT_ID), bearing`.
fn touched(rules: &[super::RuleTouch]) -> String {
    let one = |r: &super::RuleTouch| match &r.alert_id {
        Some(id) => format!("{} (incident {id})", r.rule),
        None => r.rule.clone(),
    };
    rules.iter().map(one).collect::<Vec<_>>().join(", ")
}

impl LedgerEntry {
    /// The record in words, for people.
    pub fn describe(&self) -> String {
        match self {
            LedgerEntry::Accepted {
                event_id,
                machine,
                sensor,
                seq,
                ts_ms,
                how,
                journal_pos,
                outbox_seq,
                counted,
                rules,
                watermark_ms,
            } => {
                let how = match how {
                    Acceptance::Applied => "applied",
                    Acceptance::LateApplied => "late, applied",
                    Acceptance::TooLate => "too late, not applied",
                };
                let counted = match (rules.is_empty(), counted) {
                    (false, _) => format!(", counted by {}", touched(rules)),
                    (true, true) => ", counted for the rule".to_string(),
                    (true, false) => String::new(),
                };
                let watermark =
                    watermark_ms.map_or(String::new(), |w| format!(", watermark then {}", time(w)));
                format!(
                    "accepted event {event_id} ({machine}/{sensor} seq {seq} at {}): {how}{counted}; \
                     journal record {journal_pos}, outbox record {outbox_seq}{watermark}",
                    time(*ts_ms)
                )
            }
            LedgerEntry::Duplicate { event_id, journal_pos } => {
                format!("duplicate of event {event_id} (journal record {journal_pos}), not counted again")
            }
            LedgerEntry::Quarantined { reason, journal_pos, quarantine_key } => format!(
                "quarantined as {reason}: journal record {journal_pos}, quarantine id {quarantine_key}"
            ),
            LedgerEntry::Released { quarantine_key, journal_pos, by } => format!(
                "quarantined record {quarantine_key} released as journal record {journal_pos}{}",
                operator(by)
            ),
            LedgerEntry::Dropped { quarantine_key, by } => {
                format!("quarantined record {quarantine_key} dropped{}", operator(by))
            }
            LedgerEntry::Alert { alert_id, revision, alert_kind, machine, caused_by, outbox_seq } => {
                let cause = caused_by.as_ref().map_or(String::new(), |e| format!(", caused by event {e}"));
                format!(
                    "alert {alert_id} revision {revision} {alert_kind} on {machine}{cause}; outbox record {outbox_seq}"
                )
            }
            LedgerEntry::Published { outbox_seqs } => {
                format!("published to the broker: outbox records {}", seqs(outbox_seqs))
            }
            LedgerEntry::Acknowledged { outbox_seqs } => {
                format!("acknowledged by the broker: outbox records {}", seqs(outbox_seqs))
            }
            LedgerEntry::Shed { gap: g, journal_positions, bytes, outbox_seq } => format!(
                "shed by the retention budget: {}; {bytes} bytes, journal records {}; gap notice outbox record {outbox_seq}",
                gap(g),
                seqs(journal_positions)
            ),
            LedgerEntry::GapDeclared { gap: g, outbox_seq } => {
                format!("gap declared: {}; outbox record {outbox_seq}", gap(g))
            }
            LedgerEntry::ClockStep { from_ms, to_ms, step_ms } => format!(
                "wall clock stepped by {} (from {} to {})",
                signed_duration(*step_ms),
                time(*from_ms),
                time(*to_ms)
            ),
            LedgerEntry::RuleChanged { from, to, journal_pos, rule } => {
                let name = rule.as_deref().map(|r| format!(" {r}")).unwrap_or_default();
                match (from.is_empty(), to.is_empty()) {
                    (true, _) => format!(
                        "rule{name} added, version {to}: it decides from journal record \
                         {journal_pos} on, from no state"
                    ),
                    (_, true) => format!(
                        "rule{name} removed (version {from}): it decides nothing from journal \
                         record {journal_pos} on"
                    ),
                    _ => format!(
                        "rule{name} changed from version {from} to {to}: the new rule decides \
                         from journal record {journal_pos} on, on the state decided so far"
                    ),
                }
            }
            LedgerEntry::Restart { checkpoint_pos, journal_next, outbox_pending } => format!(
                "restart: checkpoint at journal record {checkpoint_pos}, next journal record \
                 {journal_next}, {outbox_pending} outbox record(s) pending"
            ),
            LedgerEntry::Recovery { what, moved_to, lost, salvage: s } => {
                let moved = moved_to.as_ref().map_or(String::new(), |m| format!(", moved to {m}"));
                let copied = s.as_ref().map_or(String::new(), |s| format!("; {}", salvage(s)));
                format!("recovery: {what}{moved}; lost {lost}{copied}")
            }
            LedgerEntry::SourceEnded { source, reason, journal_pos, sensors } => {
                let tails: Vec<String> = sensors
                    .iter()
                    .map(|s| format!("{}/{} after seq {}", s.machine, s.sensor, s.last_seq))
                    .collect();
                format!(
                    "source ended ({}): {source} declares its tails after journal record \
                     {journal_pos}: {}",
                    reason.replace('_', " "),
                    tails.join(", ")
                )
            }
            LedgerEntry::Checkpoint { journal_pos, records, rule_versions, outbox } => {
                let rules: Vec<String> =
                    rule_versions.iter().map(|(n, v)| format!("{n} {v}")).collect();
                let queued = match outbox {
                    Some((a, b)) if a == b => format!("outbox record {a}"),
                    Some((a, b)) => format!("outbox records {a} to {b}"),
                    None => "no outbox record".to_string(),
                };
                format!(
                    "checkpoint through journal record {journal_pos} ({records} record(s) \
                     decided), rule {}; {queued}",
                    rules.join(", ")
                )
            }
            LedgerEntry::Reconciled {
                accepted_events,
                alert_records,
                acknowledged,
                queued,
                unaccounted,
                gaps,
                undeclared_gaps,
                missing_tails,
                exit,
                by,
                ..
            } => format!(
                "reconciled (exit {exit}): {accepted_events} accepted events, {alert_records} \
                 alert records, {acknowledged} acknowledged, {queued} queued, {unaccounted} \
                 unaccounted; {gaps} gap(s), {undeclared_gaps} undeclared; {missing_tails} \
                 missing tail(s){}",
                operator(by)
            ),
            LedgerEntry::Drill { name, phase, by } => {
                format!("drill {name} {}{}", phase.as_str(), operator(by))
            }
        }
    }
}

/// `, by uid 1000 (gid 1000, pid 4242) through the control socket`, or nothing when unknown.
fn operator(by: &Option<super::Operator>) -> String {
    let Some(o) = by else { return String::new() };
    let pid = o.pid.map_or(String::new(), |p| format!(", pid {p}"));
    let how = if o.via_socket { "through the control socket" } else { "on the stopped store" };
    format!(", by uid {} (gid {}{pid}) {how}", o.uid, o.gid)
}

#[cfg(test)]
mod tests {
    use super::super::RuleTouch;
    use super::*;

    #[test]
    fn entries_in_words_with_rfc3339_times() {
        let accepted = LedgerEntry::Accepted {
            event_id: "gw.s.1".into(),
            machine: "m".into(),
            sensor: "s".into(),
            seq: 1,
            ts_ms: 1_700_000_125_000,
            how: Acceptance::LateApplied,
            journal_pos: 3,
            outbox_seq: 4,
            counted: true,
            rules: Vec::new(),
            watermark_ms: None,
        };
        assert_eq!(
            accepted.describe(),
            "accepted event gw.s.1 (m/s seq 1 at 2023-11-14T22:15:25.000Z): late, applied, \
             counted for the rule; journal record 3, outbox record 4"
        );
        let mut by_rules = accepted.clone();
        if let LedgerEntry::Accepted { rules, watermark_ms, .. } = &mut by_rules {
            *rules = vec![
                RuleTouch { rule: "severity".into(), alert_id: Some("gw.severity.m.7".into()) },
                RuleTouch { rule: "bearing".into(), alert_id: None },
            ];
            *watermark_ms = Some(1_700_000_120_000);
        }
        assert_eq!(
            by_rules.describe(),
            "accepted event gw.s.1 (m/s seq 1 at 2023-11-14T22:15:25.000Z): late, applied, \
             counted by severity (incident gw.severity.m.7), bearing; journal record 3, outbox \
             record 4, watermark then 2023-11-14T22:15:20.000Z"
        );
        let range = GapRange::Samples { from_ms: 0, to_ms: 1000 };
        let (machine, sensor, reason) = ("m".to_string(), "s".to_string(), "shed".to_string());
        let gap = GapNotice { machine, sensor, range, reason, declared_at_ms: 5 };
        assert_eq!(
            LedgerEntry::GapDeclared { gap, outbox_seq: 6 }.describe(),
            "gap declared: m/s raw samples from 1970-01-01T00:00:00.000Z to \
             1970-01-01T00:00:01.000Z, reason shed, declared at 1970-01-01T00:00:00.005Z; \
             outbox record 6"
        );
        let step = LedgerEntry::ClockStep { from_ms: 90_000, to_ms: 0, step_ms: -90_000 };
        assert!(
            step.describe().starts_with("wall clock stepped by -1m 30s (from "),
            "{}",
            step.describe()
        );
        let alert = LedgerEntry::Alert {
            alert_id: "a1".into(),
            revision: 1,
            alert_kind: "amend".into(),
            machine: "m".into(),
            caused_by: Some("e2".into()),
            outbox_seq: 4,
        };
        assert_eq!(
            alert.describe(),
            "alert a1 revision 1 amend on m, caused by event e2; outbox record 4"
        );
        let published = LedgerEntry::Published { outbox_seqs: vec![29, 30, 31, 40, 42, 43] };
        assert_eq!(
            published.describe(),
            "published to the broker: outbox records 29 to 31, 40, 42 to 43"
        );
        for e in [accepted, alert, step] {
            let text = e.describe();
            assert!(!text.contains("Some(") && !text.contains('{'), "{text}");
        }
    }
}
