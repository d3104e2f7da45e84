//! One sentence of reason per alert revision, pure: what the rule saw and what changed since the
//! revision before (docs/decisions/0004-incidents-and-alert-records.md says when each kind is
//! written).

use std::collections::HashMap;

use crate::event::features::MeasureUnit;
use crate::records::ledger::Acceptance;
use crate::rule::alert::{AlertKind, AlertRecord, EvidenceItem};
use crate::timefmt::time;

use super::number::span;
use super::rule::RuleLine;

/// An accepted event as a sentence names it: sensor, seq, event time, how it was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    pub sensor: String,
    pub seq: u64,
    pub ts_ms: i64,
    pub how: Acceptance,
}

/// Another alert of the machine merged into this one: a `supersede` naming this alert as the
/// survivor, written in the same decision as this alert's `amend`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    pub alert_id: String,
    pub caused_by: Option<String>,
    pub decided_at_ms: i64,
}

/// What the sentences know beyond the revisions.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub rule: Option<&'a RuleLine>,
    /// The machine's accepted events by id.
    pub names: &'a HashMap<String, Named>,
    pub merged: &'a [Merged],
}

/// The reason of each revision, in order.
pub fn reasons(revisions: &[AlertRecord], cx: &Ctx<'_>) -> Vec<String> {
    let mut prev: Option<&AlertRecord> = None;
    let mut out = Vec::with_capacity(revisions.len());
    for a in revisions {
        out.push(match a.kind {
            AlertKind::Open => open(a, cx),
            AlertKind::Amend => amend(prev, a, cx),
            AlertKind::Supersede => supersede(a, cx),
            AlertKind::Close => close(a, cx),
        });
        prev = Some(a);
    }
    out
}

/// `s1#88 at 2023-11-14T22:13:20.000Z`.
fn item(e: &EvidenceItem) -> String {
    format!("{}#{} at {}", e.sensor, e.seq, time(e.ts_ms))
}

/// The event that caused a record: `late event s1#95 at …`, `event s1#95 at …`, or by id.
fn cause(a: &AlertRecord, cx: &Ctx<'_>) -> String {
    let Some(id) = &a.caused_by else {
        return "ingest time passed (no event)".into();
    };
    match cx.names.get(id) {
        Some(n) => {
            let late = if n.how == Acceptance::LateApplied { "late event" } else { "event" };
            format!("{late} {}#{} at {}", n.sensor, n.seq, time(n.ts_ms))
        }
        None => format!("event {id}"),
    }
}

/// `≥ 0.5 g`, or for a dimensionless measurement `with env_bpfi ≥ 3`.
fn at_least(r: &RuleLine) -> String {
    match r.unit {
        MeasureUnit::One => format!("with {} ≥ {}", r.metric, r.threshold_text()),
        _ => format!("≥ {}", r.threshold_text()),
    }
}

/// `3 events ≥ 0.5 g within 2 min on m`, or without the rule `3 events on m`.
fn condition(n: usize, a: &AlertRecord, cx: &Ctx<'_>) -> String {
    match cx.rule {
        Some(r) => {
            format!("{n} events {} within {} on {}", at_least(r), span(r.window_ms), a.machine)
        }
        None => format!("{n} events on {}", a.machine),
    }
}

/// A composite alert's member alerts: `vib gw/vib/m/1 (onset …), env …`.
fn members(a: &AlertRecord) -> String {
    let cited =
        a.members.iter().map(|m| format!("{} {} (onset {})", m.rule, m.alert_id, time(m.onset_ms)));
    cited.collect::<Vec<_>>().join(", ")
}

fn open(a: &AlertRecord, cx: &Ctx<'_>) -> String {
    let evidence: Vec<String> = a.evidence.iter().map(item).collect();
    let mut s = match a.members.is_empty() {
        true => format!("{}: {}", condition(evidence.len(), a, cx), evidence.join(", ")),
        false => format!("member alerts on {}: {}", a.machine, members(a)),
    };
    if a.caused_by
        .as_ref()
        .and_then(|id| cx.names.get(id))
        .is_some_and(|n| n.how == Acceptance::LateApplied)
    {
        s = format!("{} completed the window; {s}", cause(a, cx));
    }
    if a.provisional {
        s.push_str(" → open early, provisional until the watermark reaches the onset");
    } else {
        s.push_str(" → open (the watermark reached the onset)");
    }
    if let Some(end) = a.end_ms {
        s.push_str(&format!(", already over: the condition is false from {}", time(end)));
    }
    s
}

fn amend(prev: Option<&AlertRecord>, a: &AlertRecord, cx: &Ctx<'_>) -> String {
    let mut parts = Vec::new();
    if let Some(p) = prev {
        if p.provisional && !a.provisional {
            parts.push("the watermark reached the onset: confirmed".to_string());
        }
        if p.onset_ms != a.onset_ms {
            parts.push(format!("onset moved from {} to {}", time(p.onset_ms), time(a.onset_ms)));
        }
        if p.members != a.members {
            parts.push(format!("member alerts now {}", members(a)));
        }
        let had: Vec<&str> = p.evidence.iter().map(|e| &*e.event_id).collect();
        let added: Vec<String> =
            a.evidence.iter().filter(|e| !had.contains(&&*e.event_id)).map(item).collect();
        if !added.is_empty() || had.len() != a.evidence.len() {
            let with = if added.is_empty() {
                String::new()
            } else {
                format!(", with {}", added.join(", "))
            };
            parts.push(format!("evidence now {} events{with}", a.evidence.len()));
        }
        match (p.end_ms, a.end_ms) {
            (Some(e), None) => parts.push(format!("open again past its end {}", time(e))),
            (None, Some(e)) => parts.push(format!("ends at {}", time(e))),
            (Some(x), Some(y)) if x != y => {
                parts.push(format!("end moved from {} to {}", time(x), time(y)))
            }
            _ => {}
        }
        if p.also_count != a.also_count {
            parts.push(format!(
                "{} further events in the incident (were {})",
                a.also_count, p.also_count
            ));
        }
    }
    let merged: Vec<&str> = cx
        .merged
        .iter()
        .filter(|m| m.caused_by == a.caused_by && m.decided_at_ms == a.decided_at_ms)
        .map(|m| m.alert_id.as_str())
        .collect();
    if !merged.is_empty() {
        parts
            .push(format!("merged with {} (superseded; this alert carries on)", merged.join(", ")));
    }
    if parts.is_empty() {
        parts.push("the incident changed".into());
    }
    format!("{}: {} → amend", cause(a, cx), parts.join("; "))
}

fn supersede(a: &AlertRecord, cx: &Ctx<'_>) -> String {
    let into = a.superseded_by.as_deref().unwrap_or("another alert");
    format!(
        "{} joined this incident and {into}'s into one: merged into {into}, which carries it on → supersede",
        cause(a, cx)
    )
}

fn close(a: &AlertRecord, cx: &Ctx<'_>) -> String {
    let end = a.end_ms.map_or("its end".into(), time);
    let fewer = match cx.rule {
        None if !a.members.is_empty() => "its member alerts no longer meet it".into(),
        Some(r) => format!(
            "fewer than {} events {} within {} up to it",
            r.count,
            at_least(r),
            span(r.window_ms)
        ),
        None => "too few events within the window up to it".into(),
    };
    let by = match &a.caused_by {
        Some(_) => format!(" ({})", cause(a, cx)),
        None => String::new(),
    };
    format!("condition false from {end}: {fewer}; the watermark passed it{by} → close")
}
