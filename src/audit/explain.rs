//! `linegate explain ALERT_ID`: every revision of the alert (from the archive), its evidence
//! events with their raw-sample references, and every ledger transition concerning them:
//! accepted, duplicate, the alert records themselves, published, acknowledged, and shed or
//! declared gaps of the evidence sensors. With a page number it also lists, from the ledger, the
//! incident's whole membership that `also` cuts at `also_max`: every event that counted for the
//! rule on the alert's machine inside the incident (docs/contracts.md section 4), a page at a
//! time.

use std::collections::BTreeSet;
use std::io::Write;

use serde::Serialize;

use super::view::View;
use super::AuditError;
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::rule::alert::{AlertKind, AlertRecord, EvidenceItem};
use crate::store::archive::alert_prefix;
use crate::timefmt::time;

/// What `explain` prints.
#[derive(Debug, Serialize)]
pub struct Explanation {
    pub alert_id: String,
    pub revisions: Vec<AlertRecord>,
    /// The evidence of the latest revision (each with its raw-sample reference).
    pub evidence: Vec<EvidenceItem>,
    /// Ids in `also` of the latest revision.
    pub also: Vec<String>,
    /// `(ledger sequence, record)` of every transition concerning the alert or its events.
    pub transitions: Vec<(u64, LedgerRecord)>,
    /// One page of the incident's further high events, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members: Option<Members>,
}

/// Event IDs on one page of [`members`].
pub const MEMBERS_PAGE: usize = 1000;

/// One page of an incident's further high events (those after its onset, before its end), in
/// `(ts_ms, event_id)` order: `also` is the start of this list.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Members {
    /// How many the ledger holds.
    pub total: usize,
    /// This page's number, from 0; [`MEMBERS_PAGE`] IDs a page.
    pub page: usize,
    pub event_ids: Vec<String>,
}

/// Page `page` of the further high events of `alert`'s incident, from the ledger's accepted
/// events that counted.
pub fn members(alert: &AlertRecord, ledger: &[(u64, LedgerRecord)], page: usize) -> Members {
    let mut ids: Vec<(i64, &str)> = ledger
        .iter()
        .filter_map(|(_, r)| match &r.entry {
            LedgerEntry::Accepted { event_id, machine, ts_ms, counted: true, .. }
                if *machine == alert.machine
                    && *ts_ms > alert.onset_ms
                    && alert.end_ms.is_none_or(|end| *ts_ms < end) =>
            {
                Some((*ts_ms, event_id.as_str()))
            }
            _ => None,
        })
        .collect();
    ids.sort_unstable();
    let event_ids =
        ids.iter().skip(page * MEMBERS_PAGE).take(MEMBERS_PAGE).map(|(_, id)| id.to_string());
    Members { total: ids.len(), page, event_ids: event_ids.collect() }
}

/// Assembles the explanation from the alert's revisions (in order) and the whole ledger.
pub fn assemble(
    alert_id: &str,
    revisions: Vec<AlertRecord>,
    ledger: &[(u64, LedgerRecord)],
) -> Explanation {
    let latest = revisions.last();
    let evidence = latest.map(|a| a.evidence.clone()).unwrap_or_default();
    let also = latest.map(|a| a.also.clone()).unwrap_or_default();
    let events: BTreeSet<&str> = revisions
        .iter()
        .flat_map(|a| {
            a.evidence.iter().map(|e| &*e.event_id).chain(a.also.iter().map(String::as_str))
        })
        .collect();
    let sensors: BTreeSet<&str> = evidence.iter().map(|e| &*e.sensor).collect();
    let mut outbox = BTreeSet::new();
    let mut transitions = Vec::new();
    for (seq, r) in ledger {
        let hit = match &r.entry {
            LedgerEntry::Accepted { event_id, outbox_seq, .. }
                if events.contains(event_id.as_str()) =>
            {
                outbox.insert(*outbox_seq);
                true
            }
            LedgerEntry::Duplicate { event_id, .. } => events.contains(event_id.as_str()),
            LedgerEntry::Alert { alert_id: a, outbox_seq, .. } if a == alert_id => {
                outbox.insert(*outbox_seq);
                true
            }
            LedgerEntry::Published { outbox_seqs } | LedgerEntry::Acknowledged { outbox_seqs } => {
                outbox_seqs.iter().any(|s| outbox.contains(s))
            }
            LedgerEntry::Shed { gap, .. } | LedgerEntry::GapDeclared { gap, .. } => {
                sensors.contains(gap.sensor.as_str())
            }
            _ => false,
        };
        if hit {
            transitions.push((*seq, r.clone()));
        }
    }
    Explanation {
        alert_id: alert_id.to_string(),
        revisions,
        evidence,
        also,
        transitions,
        members: None,
    }
}

/// `linegate explain`: `Ok(false)` (exit 1) when the alert is unknown. `members`: the page of
/// the incident's membership to add.
pub fn explain(
    view: &mut View<'_>,
    alert_id: &str,
    json: bool,
    members: Option<usize>,
    out: &mut dyn Write,
) -> Result<u8, AuditError> {
    let revisions = view.read(|store| -> Result<Vec<AlertRecord>, AuditError> {
        let mut revisions = Vec::new();
        for r in store.archive_scan(&alert_prefix(alert_id)) {
            revisions.push(super::decode_alert(r?)?);
        }
        Ok(revisions)
    })?;
    if revisions.is_empty() {
        return Err(AuditError::NotFound(format!("no alert {alert_id} in the archive")));
    }
    let ledger = view.ledger()?.records;
    let page = members.map(|p| self::members(&revisions[revisions.len() - 1], &ledger, p));
    let x = Explanation { members: page, ..assemble(alert_id, revisions, &ledger) };
    if json {
        let text = serde_json::to_string_pretty(&x).map_err(std::io::Error::other)?;
        writeln!(out, "{text}")?;
        return Ok(0);
    }
    writeln!(out, "alert {} ({} revision(s))", x.alert_id, x.revisions.len())?;
    for a in &x.revisions {
        writeln!(out, "  {}", revision(a))?;
    }
    writeln!(out, "evidence")?;
    for e in &x.evidence {
        let samples = e.samples.map_or("no raw samples".to_string(), |s| {
            format!("raw samples block {}, {} to {}", s.block_seq, time(s.from_ms), time(s.to_ms))
        });
        writeln!(
            out,
            "  {} {}#{} at {} value {} ({samples})",
            e.event_id,
            e.sensor,
            e.seq,
            time(e.ts_ms),
            e.value
        )?;
    }
    if !x.also.is_empty() {
        writeln!(out, "also: {}", x.also.join(", "))?;
    }
    if let Some(m) = &x.members {
        let first = m.page * MEMBERS_PAGE;
        writeln!(
            out,
            "members {}..{} of {} (page {} of {} per page): {}",
            first.min(m.total),
            first + m.event_ids.len(),
            m.total,
            m.page,
            MEMBERS_PAGE,
            m.event_ids.join(", ")
        )?;
    }
    writeln!(out, "transitions")?;
    for (seq, r) in &x.transitions {
        writeln!(out, "  #{seq} at {}: {}", time(r.at_ms), r.entry.describe())?;
    }
    Ok(0)
}

/// One revision of an alert in words: `revision 1 amend: machine press-7, onset …, still open,
/// caused by event e9, decided at …`.
fn revision(a: &AlertRecord) -> String {
    let kind = match a.kind {
        AlertKind::Open => "open",
        AlertKind::Amend => "amend",
        AlertKind::Close => "close",
        AlertKind::Supersede => "supersede",
    };
    let end = a.end_ms.map_or("still open".to_string(), |e| format!("end {}", time(e)));
    let cause = a.caused_by.as_ref().map_or(String::new(), |e| format!(", caused by event {e}"));
    let provisional = if a.provisional { ", provisional" } else { "" };
    let version = match a.rule_version.as_str() {
        "" => String::new(),
        v => format!(" version {v}"),
    };
    format!(
        "revision {} {kind}: machine {}, onset {}, {end}{cause}{provisional}, decided at {} by rule {}{version}",
        a.revision,
        a.machine,
        time(a.onset_ms),
        time(a.decided_at_ms),
        a.rule
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ledger::Acceptance;

    fn alert(revision: u32, evidence: &[&str]) -> AlertRecord {
        let ev = |id: &str| {
            serde_json::json!({"event_id": id, "sensor": "s1", "seq": 1, "ts_ms": 5, "value": 0.7,
                "unit": "g", "quality": "good", "clock": {"state": "synced", "err_ms": 2},
                "samples": {"block_seq": 3, "from_ms": 0, "to_ms": 1000}})
        };
        serde_json::from_value(serde_json::json!({
            "alert_id": "a1", "revision": revision, "kind": "open", "machine": "m", "rule": "r",
            "onset_ms": 0, "end_ms": null, "evidence": evidence.iter().map(|e| ev(e)).collect::<Vec<_>>(),
            "also": [], "superseded_by": null, "caused_by": null, "watermark_ms": 0,
            "decided_at_ms": 9, "provisional": false
        }))
        .unwrap()
    }

    fn accepted(id: &str, outbox_seq: u64) -> LedgerEntry {
        LedgerEntry::Accepted {
            event_id: id.into(),
            machine: "m".into(),
            sensor: "s1".into(),
            seq: 1,
            ts_ms: 5,
            how: Acceptance::Applied,
            journal_pos: 1,
            outbox_seq,
            counted: true,
        }
    }

    #[test]
    fn gathers_revisions_evidence_and_their_transitions_only() {
        let a = |e| LedgerRecord::new(1, e);
        let ledger: Vec<(u64, LedgerRecord)> = [
            a(accepted("e1", 1)),
            a(accepted("other", 2)),
            a(accepted("e2", 3)),
            a(LedgerEntry::Alert {
                alert_id: "a1".into(),
                revision: 0,
                alert_kind: "open".into(),
                machine: "m".into(),
                caused_by: Some("e2".into()),
                outbox_seq: 4,
            }),
            a(LedgerEntry::Published { outbox_seqs: vec![2] }),
            a(LedgerEntry::Acknowledged { outbox_seqs: vec![3, 4] }),
            a(LedgerEntry::Duplicate { event_id: "e1".into(), journal_pos: 9 }),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, r)| (i as u64 + 1, r))
        .collect();
        let x = assemble("a1", vec![alert(0, &["e1", "e2"])], &ledger);
        let seqs: Vec<u64> = x.transitions.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, vec![1, 3, 4, 6, 7]);
        assert_eq!(x.evidence.len(), 2);
        assert_eq!(x.evidence[0].samples.unwrap().block_seq, 3);
    }

    #[test]
    fn a_revision_in_words() {
        let mut a = alert(0, &["e1"]);
        assert_eq!(
            revision(&a),
            "revision 0 open: machine m, onset 1970-01-01T00:00:00.000Z, still open, \
             decided at 1970-01-01T00:00:00.009Z by rule r"
        );
        a.rule_version = "4f22f4bf85848a88".into();
        assert!(revision(&a).ends_with("by rule r version 4f22f4bf85848a88"), "{}", revision(&a));
        a.end_ms = Some(1_700_000_125_000);
        a.caused_by = Some("e2".into());
        assert!(revision(&a).contains(", end 2023-11-14T22:15:25.000Z, caused by event e2,"));
    }
}
