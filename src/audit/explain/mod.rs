//! `linegate explain ALERT_ID`: an alert told to the maintenance engineer who reads it. The rule
//! (metric, threshold with its unit, window, count; for an envelope indicator the bearing defect
//! it points at), every event of the machine in the window that ends at the onset and in the
//! incident after it, each marked counted, below threshold, not counted (quality, clock) or too
//! late, with value and unit; every revision with the watermark then and one sentence of reason;
//! then, as before, the evidence with its raw-sample references and every ledger transition
//! concerning the alert: accepted, duplicate, the alert records themselves, published,
//! acknowledged, and shed or declared gaps of the evidence sensors. With a page number it also
//! lists, from the ledger, the incident's whole membership that `also` cuts at `also_max`: every
//! event that counted for the rule on the alert's machine inside the incident
//! (docs/contracts.md section 4), a page at a time.
//!
//! Cut in four: [`gather`] reads the store, [`window`] and [`reason`] are the pure model (the
//! window view and the sentences), [`text`] renders it for people; `--json` is the same model
//! serialized (times as integer ms). [`rule`] finds the alert's rule in the configuration, and
//! [`number`] writes numbers at a sensible precision.

pub mod composite;
pub mod gather;
pub mod number;
pub mod reason;
pub mod rule;
pub mod text;
pub mod window;

use std::collections::{BTreeSet, HashMap};
use std::io::Write;

use serde::Serialize;

use super::view::View;
use super::AuditError;
use crate::config::Config;
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::rule::alert::{AlertRecord, EvidenceItem};
use reason::{Merged, Named};
use rule::{Rule, RuleLine};
use window::{Accepted, Contents, Window};

/// What `explain` prints.
#[derive(Debug, Serialize)]
pub struct Explanation {
    pub alert_id: String,
    pub machine: String,
    /// The alert's rule as this configuration gives it for the machine; null when the
    /// configuration has no rule of the alert's name.
    pub rule: Option<RuleLine>,
    /// A composite rule's alert only: its rule and one line per member alert it cites.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub composite: Option<composite::CompositeLine>,
    pub revisions: Vec<Revision>,
    /// The events around the onset.
    pub window: Window,
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

/// One revision: the alert record as archived, and why it was written.
#[derive(Debug, Serialize)]
pub struct Revision {
    #[serde(flatten)]
    pub record: AlertRecord,
    pub reason: String,
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

/// Every ledger transition concerning the alert (its revisions in order) or its events.
pub fn transitions(
    alert_id: &str,
    revisions: &[AlertRecord],
    ledger: &[(u64, LedgerRecord)],
) -> Vec<(u64, LedgerRecord)> {
    let events: BTreeSet<&str> = revisions
        .iter()
        .flat_map(|a| {
            a.evidence.iter().map(|e| &*e.event_id).chain(a.also.iter().map(String::as_str))
        })
        .collect();
    let sensors: BTreeSet<&str> =
        revisions.last().iter().flat_map(|a| a.evidence.iter().map(|e| &*e.sensor)).collect();
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
    transitions
}

/// What the explanation is assembled from, read by [`gather`].
#[derive(Debug)]
pub struct Input<'a> {
    pub alert_id: &'a str,
    /// Every revision, in order.
    pub revisions: Vec<AlertRecord>,
    pub ledger: &'a [(u64, LedgerRecord)],
    pub rule: Option<Rule>,
    /// The machine's accepted events.
    pub accepted: &'a [Accepted],
    pub names: &'a HashMap<String, Named>,
    /// Events re-derived from the history (the evidence is added here).
    pub contents: Contents,
    pub merged: &'a [Merged],
    /// For a composite rule's alert, its members ([`composite::composite_for`]).
    pub composite: Option<composite::CompositeLine>,
}

/// Assembles the explanation, pure; `None` without a revision.
pub fn assemble(input: Input<'_>) -> Option<Explanation> {
    let Input {
        alert_id,
        revisions,
        ledger,
        rule,
        accepted,
        names,
        mut contents,
        merged,
        composite,
    } = input;
    let latest = revisions.last()?;
    for e in revisions.iter().flat_map(|a| &a.evidence) {
        contents.evidence.insert(e.event_id.to_string(), e.clone());
    }
    let window = window::window(latest, rule.as_ref(), accepted, &contents);
    let cx = reason::Ctx { rule: rule.as_ref().map(|r| &r.line), names, merged };
    let reasons = reason::reasons(&revisions, &cx);
    Some(Explanation {
        alert_id: alert_id.to_string(),
        machine: latest.machine.clone(),
        rule: rule.map(|r| r.line),
        composite,
        evidence: latest.evidence.clone(),
        also: latest.also.clone(),
        window,
        transitions: transitions(alert_id, &revisions, ledger),
        revisions: revisions
            .into_iter()
            .zip(reasons)
            .map(|(record, reason)| Revision { record, reason })
            .collect(),
        members: None,
    })
}

/// How much earlier than the window's start (ingest time) the history is read from: a frame is
/// a second of event time, and its samples arrive at most `max_future` before their time.
const HISTORY_MARGIN_MS: i64 = 2000;

/// `linegate explain`: exit 0, or an error when the alert is unknown. `members`: the page of
/// the incident's membership to add. `config`: the rule and asset table the alert is read
/// against, and the feature settings the history's events are derived again with.
pub fn explain(
    view: &mut View<'_>,
    config: &Config,
    alert_id: &str,
    json: bool,
    members: Option<usize>,
    out: &mut dyn Write,
) -> Result<u8, AuditError> {
    let revisions = gather::revisions(view, alert_id)?;
    let not_found = || AuditError::NotFound(format!("no alert {alert_id} in the archive"));
    let latest = revisions.last().ok_or_else(not_found)?;
    let ledger = view.ledger()?.records;
    let rule = rule::rule_for(config, &latest.rule, &latest.machine);
    let (accepted, names) = gather::accepted(&ledger, &latest.machine);
    let merged = gather::merged_into(view, &ledger, latest)?;
    let mut contents = Contents::default();
    // The listed events whose content no alert record carries come from the history.
    let evidence: BTreeSet<&str> =
        revisions.iter().flat_map(|a| a.evidence.iter().map(|e| &*e.event_id)).collect();
    let (listed, ..) = window::listed(latest, rule.as_ref(), &accepted);
    let missing = listed.iter().filter(|(a, _)| !evidence.contains(a.event_id.as_str()));
    if let Some(last_at) = missing.map(|(a, _)| a.at_ms).max() {
        let from = window::start(latest, rule.as_ref())
            .saturating_sub(HISTORY_MARGIN_MS + config.time.max_future_ms);
        let range = (from, last_at.saturating_add(1));
        gather::history(view, config, &latest.machine, range, &mut contents)?;
    }
    let page = members.map(|p| self::members(latest, &ledger, p));
    let composite = composite::composite_for(config, latest);
    let input = Input {
        alert_id,
        revisions,
        ledger: &ledger,
        rule,
        accepted: &accepted,
        names: &names,
        contents,
        merged: &merged,
        composite,
    };
    let x = Explanation { members: page, ..assemble(input).ok_or_else(not_found)? };
    if json {
        let text = serde_json::to_string_pretty(&x).map_err(std::io::Error::other)?;
        writeln!(out, "{text}")?;
    } else {
        text::write(&x, out)?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests;
