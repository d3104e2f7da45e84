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

mod truth;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::alert::{clock_summary, AlertKind, AlertRecord, AssetTags, EvidenceItem};
use super::incidents::Incident;
use truth::Span;

/// An evidence event, shared with the member rule's incident book.
pub type Item = Arc<EvidenceItem>;

/// How a composite rule combines its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Combine {
    /// `all_of = [A, B, ...]`: every member has held within the window.
    AllOf,
    /// `sequence = [A, B]`: `B` holds, and `A` held within the window of an instant of that
    /// incident of `B`, at or before it.
    Sequence,
}

/// A composite rule: how it combines, which rules (by name, in order), within which window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    combine: Combine,
    members: Vec<String>,
    window_ms: i64,
}

impl Spec {
    /// `all_of = members` within `window_ms`: at least one member, each named once.
    pub fn all_of(members: Vec<String>, window_ms: i64) -> Result<Self, String> {
        if members.is_empty() {
            return Err("all_of names no rule".to_string());
        }
        Self::new(Combine::AllOf, members, window_ms)
    }

    /// `sequence = [first, then]` within `window_ms`: two different rules.
    pub fn sequence(first: String, then: String, window_ms: i64) -> Result<Self, String> {
        Self::new(Combine::Sequence, vec![first, then], window_ms)
    }

    fn new(combine: Combine, members: Vec<String>, window_ms: i64) -> Result<Self, String> {
        let key = match combine {
            Combine::AllOf => "all_of",
            Combine::Sequence => "sequence",
        };
        if window_ms <= 0 {
            return Err(format!("{key}: window must be positive, got {window_ms} ms"));
        }
        for (i, m) in members.iter().enumerate() {
            if members[..i].contains(m) {
                return Err(format!("{key}: rule {m:?} is named twice"));
            }
        }
        Ok(Spec { combine, members, window_ms })
    }

    pub fn combine(&self) -> Combine {
        self.combine
    }

    /// The member rules' names, in the configured order (`[A, B]` for a sequence).
    pub fn members(&self) -> &[String] {
        &self.members
    }

    pub fn window_ms(&self) -> i64 {
        self.window_ms
    }
}

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

/// A member incident a composite incident cites: in the window of its onset (for the `B` of a
/// sequence, the incident that holds at its onset).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cited {
    /// The member rule's name.
    pub rule: String,
    pub alert_id: String,
    pub onset_ms: i64,
    pub evidence: Vec<Item>,
}

/// What decides whether a cited member changed: its evidence only grows at a given onset.
type CitedKey = (String, String, i64, usize);

fn cited_keys(cited: &[Cited]) -> Vec<CitedKey> {
    cited
        .iter()
        .map(|c| (c.rule.clone(), c.alert_id.clone(), c.onset_ms, c.evidence.len()))
        .collect()
}

/// What a record last published about a composite incident; changes against it decide `amend`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    pub revision: u32,
    pub onset: i64,
    cited: Vec<CitedKey>,
    /// `Some(end)` once a record carried the end (the incident was closed).
    pub end: Option<i64>,
    pub provisional: bool,
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

/// One record of a composite alert: the whole current state of its incident (section 6), the
/// member alerts in place of the events a measurement rule's record lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompositeRecord {
    pub alert_id: String,
    pub revision: u32,
    pub kind: AlertKind,
    pub machine: String,
    pub rule: String,
    pub onset_ms: i64,
    /// Null until the machine watermark has passed the end.
    pub end_ms: Option<i64>,
    /// The cited member alerts and their evidence events.
    pub members: Vec<Cited>,
    pub superseded_by: Option<String>,
    pub caused_by: Option<String>,
    pub watermark_ms: Option<i64>,
    pub decided_at_ms: i64,
    pub provisional: bool,
}

impl CompositeRecord {
    /// Every evidence event of the cited members, once each, in `(ts_ms, event_id)` order.
    pub fn evidence(&self) -> Vec<EvidenceItem> {
        let mut all: Vec<&Item> = self.members.iter().flat_map(|m| &m.evidence).collect();
        all.sort_by(|a, b| (a.ts_ms, &a.event_id).cmp(&(b.ts_ms, &b.event_id)));
        all.dedup_by(|a, b| a.event_id == b.event_id);
        all.into_iter().map(|i| EvidenceItem::clone(i)).collect()
    }

    /// As a section 6 alert record: `evidence` is [`Self::evidence`], `also` empty, the clock
    /// fields from that evidence. The member alerts themselves are not in it.
    pub fn to_alert_record(&self, rule_version: &str, asset: Arc<AssetTags>) -> AlertRecord {
        let evidence = self.evidence();
        let (clock_trust, max_err_ms) = clock_summary(&evidence);
        AlertRecord {
            alert_id: self.alert_id.clone(),
            revision: self.revision,
            kind: self.kind,
            machine: self.machine.clone(),
            rule: self.rule.clone(),
            rule_version: rule_version.to_string(),
            asset,
            onset_ms: self.onset_ms,
            end_ms: self.end_ms,
            evidence,
            also: Vec::new(),
            also_count: 0,
            clock_trust,
            max_err_ms,
            superseded_by: self.superseded_by.clone(),
            caused_by: self.caused_by.clone(),
            watermark_ms: self.watermark_ms,
            decided_at_ms: self.decided_at_ms,
            provisional: self.provisional,
        }
    }
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
    /// The causing event arrived behind the watermark.
    pub late: bool,
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
        if !spec.members.iter().any(|m| m == member) {
            return Err(format!(
                "rule {member:?} is not a member of composite rule {:?}",
                ctx.rule
            ));
        }
        let (w, floor) = (spec.window_ms, self.floor);
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
        let (w, floor) = (spec.window_ms, self.floor);
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
        let (w, floor) = (spec.window_ms, self.floor);
        let spans_of = |m: &str| self.held(m).map(|i| (i.onset, i.end));
        match spec.combine {
            Combine::AllOf => {
                let recents: Vec<Vec<Span>> =
                    spec.members.iter().map(|m| truth::recent(spans_of(m), w, floor)).collect();
                truth::all_of(&recents)
            }
            Combine::Sequence => {
                let recent_a = truth::recent(spans_of(&spec.members[0]), w, floor);
                truth::sequence(spans_of(&spec.members[1]), &recent_a, floor)
            }
        }
    }

    /// The member incidents an incident with onset `q` cites.
    fn cite(&self, spec: &Spec, q: i64) -> Vec<Cited> {
        let w = spec.window_ms;
        let cite = |rule: &str, inc: &MemberIncident| Cited {
            rule: rule.to_string(),
            alert_id: inc.alert_id.clone(),
            onset_ms: inc.onset,
            evidence: inc.evidence.clone(),
        };
        let mut out = Vec::new();
        for (i, rule) in spec.members.iter().enumerate() {
            let held = self.members.get(rule);
            let mut upto_q = held.into_iter().flat_map(|h| h.range(..=q).map(|(_, v)| v));
            if spec.combine == Combine::Sequence && i == 1 {
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

/// The incident `[onset, end)` citing `cited`, made of the held incidents `olds` (ascending by
/// onset) that lie in it: the earliest published survives (else the earliest); the other
/// published ones are superseded.
fn merge(
    onset: i64,
    end: i64,
    mut olds: Vec<CompositeIncident>,
    cited: Vec<Cited>,
    ctx: &Ctx<'_>,
    out: &mut Vec<CompositeRecord>,
) -> CompositeIncident {
    let survivor = olds.iter().position(|i| i.published.is_some());
    let survivor = survivor.or(if olds.is_empty() { None } else { Some(0) });
    let (alert_id, published) = match survivor {
        Some(s) => {
            let sv = olds.remove(s);
            (sv.alert_id, sv.published)
        }
        None => (format!("{}/{}/{}/{}", ctx.gateway, ctx.rule, ctx.machine, onset), None),
    };
    let mut inc = CompositeIncident { alert_id, onset, end, cited, published };
    sync(&mut inc, ctx, out);
    for old in olds {
        if let Some(p) = old.published {
            let mut rec = render(&inc, AlertKind::Supersede, p.revision + 1, ctx);
            rec.alert_id = old.alert_id;
            rec.superseded_by = Some(inc.alert_id.clone());
            out.push(rec);
        }
    }
    inc
}

fn render(
    inc: &CompositeIncident,
    kind: AlertKind,
    revision: u32,
    ctx: &Ctx<'_>,
) -> CompositeRecord {
    CompositeRecord {
        alert_id: inc.alert_id.clone(),
        revision,
        kind,
        machine: ctx.machine.to_string(),
        rule: ctx.rule.to_string(),
        onset_ms: inc.onset,
        end_ms: (ctx.wm > inc.end).then_some(inc.end),
        members: inc.cited.clone(),
        superseded_by: None,
        caused_by: ctx.caused_by.map(str::to_string),
        watermark_ms: (ctx.wm != i64::MIN).then_some(ctx.wm),
        decided_at_ms: ctx.now,
        provisional: ctx.wm < inc.onset,
    }
}

/// Publishes what is due for one incident, as the measurement rule does (decision 0004):
/// `open` once the watermark reaches the onset (at once, provisional, with `early`); `close`
/// once it passes the end; `amend` when what was published changed: onset, cited members,
/// provisional, or — for a closed incident or a late cause — the end.
fn sync(inc: &mut CompositeIncident, ctx: &Ctx<'_>, out: &mut Vec<CompositeRecord>) {
    let confirmed = ctx.wm >= inc.onset;
    let end_known = (ctx.wm > inc.end).then_some(inc.end);
    let cited = cited_keys(&inc.cited);
    let (kind, revision) = match &inc.published {
        None if confirmed || ctx.early => (AlertKind::Open, 0),
        None => return,
        Some(p) if p.end.is_none() && end_known.is_some() => (AlertKind::Close, p.revision + 1),
        Some(p)
            if inc.onset != p.onset
                || cited != p.cited
                || p.provisional == confirmed
                || ((p.end.is_some() || ctx.late) && end_known != p.end) =>
        {
            (AlertKind::Amend, p.revision + 1)
        }
        Some(_) => return,
    };
    let mut rec = render(inc, kind, revision, ctx);
    if kind == AlertKind::Open {
        rec.end_ms = None;
    }
    let (end, provisional) = (rec.end_ms, rec.provisional);
    inc.published = Some(Published { revision, onset: inc.onset, cited, end, provisional });
    out.push(rec);
    if kind == AlertKind::Open {
        // The watermark may already be past the end: close right after.
        sync(inc, ctx, out);
    }
}

#[cfg(test)]
mod tests;
