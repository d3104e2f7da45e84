//! One machine's high events and incidents, exactly as docs/contracts.md section 4 defines them.
//!
//! `C(τ) = |{h in H : τ - W < h.ts <= τ}| >= N`; an incident is a maximal interval `[onset, end)`
//! on which `C` holds. Adding an event at `t` can only turn `C` true on `[t, t + W)`, so the new
//! incidents are the old ones united with the true part `R` of `[t, t + W)`: incidents touching
//! `R` merge. Each incident keeps its *members* — the high events in `(onset - W, end)` — so that
//! evidence (`ts <= onset`) and `also` (`ts > onset`) survive the eviction of old high events.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::alert::{AlertKind, AlertRecord, EvidenceItem};

/// High events and members are ordered by event time, then event id: the order of `evidence`.
/// The id is always `Some`; `(t, None)` sorts before every key of time `t`, a free range bound.
/// Events are shared (`Arc`) between the high-event index and the incidents they belong to.
pub type Key = (i64, Option<Arc<str>>);
type Item = Arc<EvidenceItem>;

const fn at_or_after(t: i64) -> Key {
    (t, None)
}

/// What a record last published about an incident; changes against it decide `amend`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    pub revision: u32,
    pub onset: i64,
    pub n_evidence: usize,
    pub n_also: usize,
    /// `Some(end)` once a record carried the end (the incident was closed).
    pub end: Option<i64>,
    pub provisional: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Incident {
    pub alert_id: String,
    pub onset: i64,
    pub end: i64,
    pub members: BTreeMap<Key, Item>,
    pub published: Option<Published>,
}

impl Incident {
    fn n_evidence(&self) -> usize {
        self.members.range(..at_or_after(self.onset + 1)).count()
    }
}

/// Everything a decision needs besides the book itself.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    pub gateway: &'a str,
    pub rule: &'a str,
    pub machine: &'a str,
    pub window_ms: i64,
    pub count: usize,
    pub early: bool,
    /// The machine watermark; `i64::MIN` before there is one.
    pub wm: i64,
    /// Ingest time of the decision.
    pub now: i64,
    pub caused_by: Option<&'a str>,
    /// The causing event arrived behind the watermark.
    pub late: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IncidentBook {
    high: BTreeMap<Key, Item>,
    /// Disjoint, keyed by onset.
    incidents: BTreeMap<i64, Incident>,
}

fn range_keys(lo_incl: i64, hi_incl: i64) -> std::ops::Range<Key> {
    at_or_after(lo_incl)..at_or_after(hi_incl.saturating_add(1))
}

impl IncidentBook {
    pub fn high_len(&self) -> usize {
        self.high.len()
    }

    pub fn incidents(&self) -> impl Iterator<Item = &Incident> {
        self.incidents.values()
    }

    /// Members held by incidents (counts shared events once per incident).
    pub fn member_len(&self) -> usize {
        self.incidents.values().map(|i| i.members.len()).sum()
    }

    /// Applies one high event and emits what it changes.
    pub fn add(&mut self, item: EvidenceItem, ctx: &Ctx<'_>, out: &mut Vec<AlertRecord>) {
        let t = item.ts_ms;
        let key = (t, Some(Arc::<str>::from(item.event_id.as_str())));
        self.high.insert(key.clone(), Arc::new(item));
        let regions = self.true_regions_from(t, ctx.window_ms, ctx.count);
        let (Some(first), Some(last)) = (regions.first(), regions.last()) else { return };
        let (lo, hi) = (first.0, last.1);
        if regions.len() == 1 && self.extend_in_place(&key, lo, hi, ctx, out) {
            return;
        }

        // Incidents that intersect or touch [lo, hi]: ordered by onset, disjoint, so ends ascend too.
        let touched: Vec<i64> = self
            .incidents
            .range(..=hi)
            .rev()
            .take_while(|(_, inc)| inc.end >= lo)
            .map(|(&onset, _)| onset)
            .collect();
        let mut spans: Vec<(i64, i64, Option<i64>)> =
            regions.iter().map(|&(a, b)| (a, b, None)).collect();
        for onset in touched {
            let end = self.incidents[&onset].end;
            spans.push((onset, end, Some(onset)));
        }
        spans.sort_by_key(|s| (s.0, s.1));

        let mut groups: Vec<(i64, i64, Vec<i64>)> = Vec::new();
        for (a, b, inc) in spans {
            match groups.last_mut() {
                Some(g) if a <= g.1 => {
                    g.1 = g.1.max(b);
                    g.2.extend(inc);
                }
                _ => groups.push((a, b, inc.into_iter().collect())),
            }
        }
        for (onset, end, olds) in groups {
            let olds: Vec<Incident> =
                olds.iter().filter_map(|o| self.incidents.remove(o)).collect();
            self.merge(onset, end, olds, &key, ctx, out);
        }
    }

    /// The common case, done without rebuilding anything: the event lies inside one incident
    /// (`onset <= t < end`) and `C`'s new true part is one interval `[lo, hi)` that reaches no
    /// other incident. The incident gains the event, a later end if `hi` is past it, and with it
    /// the high events already known in `[old end, new end)`.
    fn extend_in_place(
        &mut self,
        key: &Key,
        lo: i64,
        hi: i64,
        ctx: &Ctx<'_>,
        out: &mut Vec<AlertRecord>,
    ) -> bool {
        let t = key.0;
        let Some((&onset, inc)) = self.incidents.range(..=t).next_back() else { return false };
        if inc.end <= t || lo < onset {
            return false;
        }
        let new_end = inc.end.max(hi);
        // A next incident starting at or before the new end would merge (adjacent intervals too).
        if self.incidents.range(onset + 1..).next().is_some_and(|(&next, _)| next <= new_end) {
            return false;
        }
        let Some(item) = self.high.get(key).cloned() else { return false };
        let mut gained = BTreeMap::new();
        if new_end > inc.end {
            self.copy_high(inc.end, new_end - 1, &mut gained);
        }
        let Some(inc) = self.incidents.get_mut(&onset) else { return false };
        inc.end = new_end;
        inc.members.insert(key.clone(), item);
        inc.members.append(&mut gained);
        sync(inc, ctx, out);
        true
    }

    fn merge(
        &mut self,
        onset: i64,
        end: i64,
        mut olds: Vec<Incident>,
        new_key: &Key,
        ctx: &Ctx<'_>,
        out: &mut Vec<AlertRecord>,
    ) {
        olds.sort_by_key(|i| i.onset);
        let survivor = olds.iter().position(|i| i.published.is_some()).or(if olds.is_empty() {
            None
        } else {
            Some(0)
        });
        let w = ctx.window_ms;
        // Members: the old members, the high events of the span that no old member range covered,
        // and the new event. Merging only moves the onset earlier and the end later, so every old
        // member stays inside the new span and the survivor's map is extended in place.
        let (span_lo, span_hi) = (onset - w + 1, end - 1);
        let mut gaps = Vec::new();
        let mut cursor = span_lo;
        for old in &olds {
            let (a, b) = (old.onset - w + 1, old.end - 1);
            if a > cursor {
                gaps.push((cursor, a - 1));
            }
            cursor = cursor.max(b + 1);
        }
        if cursor <= span_hi {
            gaps.push((cursor, span_hi));
        }
        let (alert_id, published, mut members) = match survivor {
            Some(s) => {
                let sv = olds.swap_remove(s);
                (sv.alert_id, sv.published, sv.members)
            }
            None => (
                format!("{}/{}/{}/{}", ctx.gateway, ctx.rule, ctx.machine, onset),
                None,
                BTreeMap::new(),
            ),
        };
        for (lo, hi) in gaps {
            self.copy_high(lo, hi, &mut members);
        }
        if new_key.0 >= span_lo && new_key.0 <= span_hi {
            if let Some(item) = self.high.get(new_key) {
                members.insert(new_key.clone(), item.clone());
            }
        }
        let mut absorbed = Vec::new();
        for old in olds {
            members.extend(old.members);
            absorbed.push((old.alert_id, old.published));
        }
        debug_assert!(members.keys().all(|k| k.0 >= span_lo && k.0 <= span_hi));
        let mut inc = Incident { alert_id, onset, end, members, published };
        sync(&mut inc, ctx, out);
        absorbed.sort_by_key(|a| a.1.as_ref().map(|p| p.onset));
        for (id, published) in absorbed {
            if let Some(p) = published {
                let mut rec = render(&inc, AlertKind::Supersede, p.revision + 1, ctx);
                rec.alert_id = id;
                rec.superseded_by = Some(inc.alert_id.clone());
                out.push(rec);
            }
        }
        self.incidents.insert(onset, inc);
    }

    fn copy_high(&self, lo: i64, hi: i64, into: &mut BTreeMap<Key, Item>) {
        for (k, v) in self.high.range(range_keys(lo, hi)) {
            into.insert(k.clone(), v.clone());
        }
    }

    /// The maximal intervals of `[t, t + W)` on which `C` holds, ascending and disjoint.
    fn true_regions_from(&self, t: i64, w: i64, n: usize) -> Vec<(i64, i64)> {
        let n = n.max(1);
        let later = self.high.range(at_or_after(t + 1)..).next().is_some();
        if !later {
            // Nothing after t: the count on [t, t + W) only falls, so C holds up to d_N + W,
            // with d_N the N-th latest event time.
            let nth = self.high.range(..at_or_after(t + 1)).rev().nth(n - 1);
            return match nth {
                Some(((d, _), _)) if *d > t - w => vec![(t, d + w)],
                _ => Vec::new(),
            };
        }
        // Inside an incident, C already holds from t to its end: scan only past it. (At the tail
        // of an incident that is a handful of events, not the whole window.)
        let (mut from, mut regions) = (t, Vec::new());
        if let Some((_, inc)) = self.incidents.range(..=t).next_back() {
            if inc.end > t {
                from = inc.end.min(t + w);
                regions.push((t, from));
            }
        }
        if from < t + w {
            for r in self.scan(from, t + w, w, n) {
                match regions.last_mut() {
                    Some(last) if last.1 == r.0 => last.1 = r.1,
                    _ => regions.push(r),
                }
            }
        }
        regions
    }

    /// The maximal intervals of `[from, to)` on which `C` holds, evaluated at every breakpoint
    /// (an event time, or an event time + W) inside it.
    fn scan(&self, from: i64, to: i64, w: i64, n: usize) -> Vec<(i64, i64)> {
        let ts: Vec<i64> =
            self.high.range(range_keys(from - w + 1, to - 1)).map(|(k, _)| k.0).collect();
        let mut cuts: Vec<i64> = vec![from];
        cuts.extend(ts.iter().copied().filter(|&x| x > from && x < to));
        cuts.extend(ts.iter().map(|&x| x + w).filter(|&x| x > from && x < to));
        cuts.sort_unstable();
        cuts.dedup();
        let (mut upto_p, mut upto_pw) = (0usize, 0usize);
        let mut regions: Vec<(i64, i64)> = Vec::new();
        for (i, &p) in cuts.iter().enumerate() {
            while upto_p < ts.len() && ts[upto_p] <= p {
                upto_p += 1;
            }
            while upto_pw < ts.len() && ts[upto_pw] <= p - w {
                upto_pw += 1;
            }
            if upto_p - upto_pw >= n {
                let next = cuts.get(i + 1).copied().unwrap_or(to);
                match regions.last_mut() {
                    Some(r) if r.1 == p => r.1 = next,
                    _ => regions.push((p, next)),
                }
            }
        }
        regions
    }

    /// The watermark or the ingest time moved: open, confirm and close what is due, then forget
    /// what no event within allowed lateness can touch any more.
    pub fn advance(&mut self, ctx: &Ctx<'_>, allowed_lateness_ms: i64, out: &mut Vec<AlertRecord>) {
        for inc in self.incidents.range_mut(..=ctx.wm).map(|(_, v)| v) {
            let due = match &inc.published {
                None => true,
                Some(p) => p.provisional || (p.end.is_none() && ctx.wm > inc.end),
            };
            if due {
                sync(inc, ctx, out);
            }
        }
        if ctx.wm == i64::MIN {
            return;
        }
        let horizon = ctx.wm.saturating_sub(allowed_lateness_ms);
        let keep_from = horizon.saturating_sub(ctx.window_ms);
        while self.high.first_key_value().is_some_and(|(k, _)| k.0 <= keep_from) {
            self.high.pop_first();
        }
        while self.incidents.first_key_value().is_some_and(|(_, i)| {
            i.end < horizon && i.published.as_ref().is_some_and(|p| p.end.is_some())
        }) {
            self.incidents.pop_first();
        }
    }
}

fn render(inc: &Incident, kind: AlertKind, revision: u32, ctx: &Ctx<'_>) -> AlertRecord {
    let split = at_or_after(inc.onset + 1);
    AlertRecord {
        alert_id: inc.alert_id.clone(),
        revision,
        kind,
        machine: ctx.machine.to_string(),
        rule: ctx.rule.to_string(),
        onset_ms: inc.onset,
        end_ms: (ctx.wm > inc.end).then_some(inc.end),
        evidence: inc.members.range(..split.clone()).map(|(_, v)| EvidenceItem::clone(v)).collect(),
        also: inc.members.range(split..).map(|(_, v)| v.event_id.clone()).collect(),
        superseded_by: None,
        caused_by: ctx.caused_by.map(str::to_string),
        watermark_ms: (ctx.wm != i64::MIN).then_some(ctx.wm),
        decided_at_ms: ctx.now,
        provisional: ctx.wm < inc.onset,
    }
}

/// Publishes what is due for one incident: `open` once the watermark reaches the onset (at once,
/// provisional, with `early`); `close` once it passes the end; `amend` when what was published
/// changed: onset, evidence, provisional, or — for a closed incident or a late cause — end and
/// `also`. On-time growth of an open incident (`also`, a later end) waits for `close`.
fn sync(inc: &mut Incident, ctx: &Ctx<'_>, out: &mut Vec<AlertRecord>) {
    let confirmed = ctx.wm >= inc.onset;
    let Some(p) = inc.published.clone() else {
        if confirmed || ctx.early {
            let mut rec = render(inc, AlertKind::Open, 0, ctx);
            rec.end_ms = None;
            inc.published = Some(Published {
                revision: 0,
                onset: inc.onset,
                n_evidence: rec.evidence.len(),
                n_also: rec.also.len(),
                end: None,
                provisional: rec.provisional,
            });
            out.push(rec);
            // The watermark may already be past the end: close right after.
            sync(inc, ctx, out);
        }
        return;
    };
    let end_known = (ctx.wm > inc.end).then_some(inc.end);
    let n_evidence = inc.n_evidence();
    let n_also = inc.members.len() - n_evidence;
    let closed_before = p.end.is_some();
    let changed = inc.onset != p.onset
        || n_evidence != p.n_evidence
        || p.provisional == confirmed
        || ((closed_before || ctx.late) && (n_also != p.n_also || end_known != p.end));
    let closing = !closed_before && end_known.is_some();
    if !changed && !closing {
        return;
    }
    let kind = if closing { AlertKind::Close } else { AlertKind::Amend };
    let rec = render(inc, kind, p.revision + 1, ctx);
    inc.published = Some(Published {
        revision: rec.revision,
        onset: inc.onset,
        n_evidence,
        n_also,
        end: rec.end_ms,
        provisional: rec.provisional,
    });
    out.push(rec);
}
