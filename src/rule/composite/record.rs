//! What a composite incident publishes and when (docs/contracts.md section 6, decision 0004):
//! its records, which incident survives a merge, and what decides `open`, `amend`, `close`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{CompositeIncident, Ctx, Item};
use crate::rule::alert::{
    clock_summary, AlertKind, AlertRecord, AssetTags, EvidenceItem, MemberAlert,
};

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

impl Cited {
    /// As an alert record lists it.
    pub fn member_alert(&self) -> MemberAlert {
        MemberAlert {
            rule: self.rule.clone(),
            alert_id: self.alert_id.clone(),
            onset_ms: self.onset_ms,
            evidence: self.evidence.iter().map(|e| e.event_id.to_string()).collect(),
        }
    }
}

/// What decides whether a cited member changed: its evidence only grows at a given onset.
pub(super) type CitedKey = (String, String, i64, usize);

pub(super) fn cited_keys(cited: &[Cited]) -> Vec<CitedKey> {
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

    /// As a section 6 alert record: `evidence` is [`Self::evidence`], `members` the cited
    /// member alerts with their evidence events' ids, `also` empty, the clock fields from that
    /// evidence.
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
            members: self.members.iter().map(Cited::member_alert).collect(),
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

/// The incident `[onset, end)` citing `cited`, made of the held incidents `olds` (ascending by
/// onset) that lie in it: the earliest published survives (else the earliest); the other
/// published ones are superseded.
pub(super) fn merge(
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
/// provisional, or the end of a closed incident. (An open incident's end is not published,
/// so a late change of it is nothing to amend, unlike a measurement incident's `also`.)
pub(super) fn sync(inc: &mut CompositeIncident, ctx: &Ctx<'_>, out: &mut Vec<CompositeRecord>) {
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
                || (p.end.is_some() && end_known != p.end) =>
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
