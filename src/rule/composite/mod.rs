//! Composite rules, `all_of` and `sequence`, exactly as docs/contracts.md section 4 ("Composite
//! rules") defines them: a pure state machine per composite rule and machine, fed with its
//! member rules' incidents as the members decided them and with the machine watermark, which
//! emits the composite's incidents as records (`open`, `amend`, `close`, `supersede`) citing the
//! member alerts. No I/O, no clock.
//!
//! The book holds each member's incidents on the machine (whole states, as [`MemberIncident`]),
//! and recomputes the composite spans from them whenever one changes (`truth`), from `floor` on:
//! the composite before `floor` is decided and forgotten. The new spans are matched against the
//! incidents it holds: members' incidents only grow and merge, so each old incident lies inside
//! one new span, and the spans that took in several merge (the earliest published survives; the
//! others are superseded), as the measurement rule's incidents do (decision 0004).
//!
//! Wiring, per composite rule and machine: after a member rule has decided an event, pass that
//! member's incidents on the machine to [`CompositeBook::apply`] (all of them, or only those
//! that changed), with the event as `caused_by`; after the machine watermark moved (an event or
//! a tick), call [`CompositeBook::advance`]. `spec` holds the rule, `record` what it publishes
//! and when, `truth` the conditions as interval arithmetic.

mod record;
mod spec;
mod truth;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::alert::EvidenceItem;
use super::incidents::Incident;
use record::{merge, sync};
pub use record::{Cited, CompositeRecord, Published};
pub use spec::{Combine, Spec};
use truth::Span;

/// An evidence event, shared with the member rule's incident book.
pub type Item = Arc<EvidenceItem>;

/// One incident of a member rule on the machine, as the member decided it so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberIncident {
    /// The member's alert for it; stable while the incident lives, the survivor's after a merge.
    pub alert_id: String,
    pub onset: i64,
    /// Its end so far: the first instant after the onset at which the member's condition is
    /// false given the events applied until now (the member book's `Incident::end`, never an
    /// open end: it only moves later as events arrive).
    pub end: i64,
    /// The member's evidence events, in `(ts_ms, event_id)` order.
    pub evidence: Vec<Item>,
}

impl MemberIncident {
    /// The state of a measurement rule's incident.
    pub fn of(inc: &Incident) -> Self {
        MemberIncident {
            alert_id: inc.alert_id.clone(),
            onset: inc.onset,
            end: inc.end,
            evidence: inc.evidence.values().cloned().collect(),
        }
    }

    /// Whether `other` is this state again (the evidence of an onset only grows).
    fn same(&self, other: &Self) -> bool {
        self.alert_id == other.alert_id
            && self.onset == other.onset
            && self.end == other.end
            && self.evidence.len() == other.evidence.len()
    }
}

/// One composite incident: a maximal interval `[onset, end)` of the composite condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompositeIncident {
    pub alert_id: String,
    pub onset: i64,
    pub end: i64,
    /// The member incidents of the onset's window, by member (in the rule's order), then onset.
    pub cited: Vec<Cited>,
    pub published: Option<Published>,
}

/// Everything a decision needs besides the book and the rule.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    pub gateway: &'a str,
    /// The composite rule's name.
    pub rule: &'a str,
    pub machine: &'a str,
    pub early: bool,
    /// The machine watermark; `i64::MIN` before there is one.
    pub wm: i64,
    /// Ingest time of the decision.
    pub now: i64,
    /// The event whose arrival changed the members; `None` for the passage of ingest time.
    pub caused_by: Option<&'a str>,
}

/// One composite rule's state on one machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompositeBook {
    /// Each member's incidents, by rule name, keyed by onset (disjoint, never touching).
    members: BTreeMap<String, BTreeMap<i64, MemberIncident>>,
    /// Disjoint, keyed by onset.
    incidents: BTreeMap<i64, CompositeIncident>,
    /// The composite before this instant is decided: no incident of it is held, no event
    /// within allowed lateness can change it, and spans are computed from here on.
    floor: i64,
}

impl Default for CompositeBook {
    fn default() -> Self {
        CompositeBook { members: BTreeMap::new(), incidents: BTreeMap::new(), floor: i64::MIN }
    }
}

impl CompositeBook {
    pub fn incidents(&self) -> impl Iterator<Item = &CompositeIncident> {
        self.incidents.values()
    }

    /// Member incidents held.
    pub fn member_len(&self) -> usize {
        self.members.values().map(BTreeMap::len).sum()
    }

    /// Takes in the current state of some incidents of `member` (a rule of `spec`): new ones,
    /// grown ones, and the survivors of merges (a held incident that a new state overlaps or
    /// touches was merged into it). Incidents not given are unchanged; giving an unchanged one
    /// again does nothing, so a caller may pass all of a member's incidents after each event.
    /// Emits what changes for the composite. An error names a rule that is not a member.
    pub fn apply(
        &mut self,
        spec: &Spec,
        member: &str,
        states: impl IntoIterator<Item = MemberIncident>,
        ctx: &Ctx<'_>,
        out: &mut Vec<CompositeRecord>,
    ) -> Result<(), String> {
        if !spec.members().iter().any(|m| m == member) {
            return Err(format!(
                "rule {member:?} is not a member of composite rule {:?}",
                ctx.rule
            ));
        }
        let (w, floor) = (spec.window_ms(), self.floor);
        let held = self.members.entry(member.to_string()).or_default();
        let mut changed = false;
        for inc in states {
            // An empty incident is no member's; one that ended a window before the floor
            // cannot reach the composite any more.
            if inc.end > inc.onset && inc.end.saturating_add(w) > floor {
                changed |= upsert(held, inc);
            }
        }
        if changed {
            self.reconcile(spec, ctx, out);
        }
        Ok(())
    }

    /// The watermark or the ingest time moved: open, confirm and close what is due, then forget
    /// what no event within allowed lateness can change: closed incidents that ended before the
    /// horizon (`wm - allowed_lateness_ms`), and member incidents that ended a window before
    /// the new floor.
    pub fn advance(
        &mut self,
        spec: &Spec,
        ctx: &Ctx<'_>,
        allowed_lateness_ms: i64,
        out: &mut Vec<CompositeRecord>,
    ) {
        // Due: not yet published, provisional, or open with its end behind the watermark.
        let due = |i: &CompositeIncident| {
            i.published
                .as_ref()
                .is_none_or(|p| p.provisional || (p.end.is_none() && ctx.wm > i.end))
        };
        for inc in self.incidents.range_mut(..=ctx.wm).map(|(_, v)| v).filter(|i| due(i)) {
            sync(inc, ctx, out);
        }
        if ctx.wm == i64::MIN {
            return;
        }
        let horizon = ctx.wm.saturating_sub(allowed_lateness_ms);
        while self.incidents.first_key_value().is_some_and(|(_, i)| {
            i.end < horizon && i.published.as_ref().is_some_and(|p| p.end.is_some())
        }) {
            self.incidents.pop_first();
        }
        // Composite truth before the horizon is final; the first held incident starts at or
        // after every forgotten one's end.
        let first = self.incidents.keys().next().copied().unwrap_or(i64::MAX);
        self.floor = self.floor.max(first.min(horizon));
        let (w, floor) = (spec.window_ms(), self.floor);
        for held in self.members.values_mut() {
            held.retain(|_, i| i.end.saturating_add(w) > floor);
        }
    }

    /// Checks what a restored snapshot must hold: incidents keyed by their onsets, not empty,
    /// disjoint, at or after the floor; member incidents likewise.
    pub fn check(&self) -> Result<(), String> {
        let mut last_end = self.floor;
        for (&key, inc) in &self.incidents {
            if key != inc.onset || inc.end <= inc.onset || inc.onset < last_end {
                return Err(format!(
                    "composite incident {} (onset {}, end {}): its key, end or place does not fit",
                    inc.alert_id, inc.onset, inc.end
                ));
            }
            last_end = inc.end;
        }
        for (rule, held) in &self.members {
            let mut last_end = i64::MIN;
            for (&key, inc) in held {
                if key != inc.onset || inc.end <= inc.onset || inc.onset <= last_end {
                    return Err(format!(
                        "member incident {} of {rule} (onset {}, end {}): its key, end or place \
                         does not fit",
                        inc.alert_id, inc.onset, inc.end
                    ));
                }
                last_end = inc.end;
            }
        }
        Ok(())
    }

    fn held(&self, member: &str) -> impl DoubleEndedIterator<Item = &MemberIncident> {
        self.members.get(member).into_iter().flat_map(|h| h.values())
    }

    /// The composite's spans from the floor on.
    fn spans(&self, spec: &Spec) -> Vec<Span> {
        let (w, floor) = (spec.window_ms(), self.floor);
        let spans_of = |m: &str| self.held(m).map(|i| (i.onset, i.end));
        match spec.combine() {
            Combine::AllOf => {
                let recents: Vec<Vec<Span>> =
                    spec.members().iter().map(|m| truth::recent(spans_of(m), w, floor)).collect();
                truth::all_of(&recents)
            }
            Combine::Sequence => {
                // `Spec::sequence` makes exactly two members.
                let [a, b] = spec.members() else { return Vec::new() };
                let recent_a = truth::recent(spans_of(a), w, floor);
                truth::sequence(spans_of(b), &recent_a, floor)
            }
        }
    }

    /// The member incidents an incident with onset `q` cites.
    fn cite(&self, spec: &Spec, q: i64) -> Vec<Cited> {
        let w = spec.window_ms();
        let cite = |rule: &str, inc: &MemberIncident| Cited {
            rule: rule.to_string(),
            alert_id: inc.alert_id.clone(),
            onset_ms: inc.onset,
            evidence: inc.evidence.clone(),
        };
        let mut out = Vec::new();
        for (i, rule) in spec.members().iter().enumerate() {
            let held = self.members.get(rule);
            let mut upto_q = held.into_iter().flat_map(|h| h.range(..=q).map(|(_, v)| v));
            if spec.combine() == Combine::Sequence && i == 1 {
                // The incident of B that holds at q.
                out.extend(upto_q.next_back().filter(|inc| inc.end > q).map(|inc| cite(rule, inc)));
            } else {
                // Ordered by onset and disjoint, so ends ascend too.
                let from = out.len();
                let window =
                    upto_q.rev().take_while(|inc| truth::in_window((inc.onset, inc.end), q, w));
                out.extend(window.map(|inc| cite(rule, inc)));
                out[from..].reverse();
            }
        }
        out
    }

    /// Recomputes the spans and brings the incidents to them.
    fn reconcile(&mut self, spec: &Spec, ctx: &Ctx<'_>, out: &mut Vec<CompositeRecord>) {
        let spans = self.spans(spec);
        let mut olds = std::mem::take(&mut self.incidents);
        for (onset, end) in spans {
            let within: Vec<i64> =
                olds.range(..end).filter(|(_, i)| i.end > onset).map(|(&k, _)| k).collect();
            let group: Vec<CompositeIncident> =
                within.iter().filter_map(|k| olds.remove(k)).collect();
            let cited = self.cite(spec, onset);
            let inc = merge(onset, end, group, cited, ctx, out);
            self.incidents.insert(onset, inc);
        }
        // Only a member whose incidents shrank (no rule's do: section 4) leaves an incident
        // outside every span: what was published stays, never retracted.
        for (onset, inc) in olds {
            if inc.published.is_some() {
                self.incidents.insert(onset, inc);
            }
        }
    }
}

/// Puts `inc` in place of the held incident with its alert id and of those it overlaps or
/// touches (merged into it); whether anything changed.
fn upsert(held: &mut BTreeMap<i64, MemberIncident>, inc: MemberIncident) -> bool {
    if held.get(&inc.onset).is_some_and(|h| h.same(&inc)) {
        return false;
    }
    let gone: Vec<i64> = held
        .values()
        .filter(|h| h.alert_id == inc.alert_id || (h.onset <= inc.end && h.end >= inc.onset))
        .map(|h| h.onset)
        .collect();
    for k in gone {
        held.remove(&k);
    }
    held.insert(inc.onset, inc);
    true
}

#[cfg(test)]
mod tests;
