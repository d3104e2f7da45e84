//! One machine's high events and incidents, exactly as docs/contracts.md section 4 defines them.
//!
//! `C(τ) = |{h in H : τ - W < h.ts <= τ}| >= N`; an incident is a maximal interval `[onset, end)`
//! on which `C` holds. Adding an event at `t` can only turn `C` true on `[t, t + W)`, so the new
//! incidents are the old ones united with the true part `R` of `[t, t + W)`: incidents touching
//! `R` merge.
//!
//! An incident's state is bounded (docs/contracts.md section 4): it keeps its *evidence* — every
//! high event in `(onset - W, onset]`, a window's worth — the first `also_max` keys of the further
//! high events in `(onset, end)` and their count, so that a machine above threshold for a day is
//! one incident of bounded size. Merging only moves an onset earlier and an end later, and every
//! span a merge adds that no old incident covered lies within `W` of the new event, where the
//! high-event index still holds every event; so the count and the first `also_max` keys of a
//! merged incident are exact: the old counts, plus what the index holds in the spans between.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::alert::{clock_summary, AlertKind, AlertRecord, AssetTags, EvidenceItem};
use super::high_index::HighIndex;

/// High events and members are ordered by event time, then event id: the order of `evidence`.
/// The id is always `Some`; `(t, None)` sorts before every key of time `t`, a free range bound.
/// Events are shared (`Arc`) between the high-event index and the incidents they belong to.
pub type Key = (i64, Option<Arc<str>>);
pub(super) type Item = Arc<EvidenceItem>;

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
#[serde(from = "StoredIncident")]
pub struct Incident {
    pub alert_id: String,
    pub onset: i64,
    pub end: i64,
    /// Every high event in `(onset - W, onset]`.
    pub evidence: BTreeMap<Key, Item>,
    /// The first `also_max` keys of the high events in `(onset, end)`.
    pub also: BTreeSet<Key>,
    /// How many high events lie in `(onset, end)`.
    pub also_count: u64,
    pub published: Option<Published>,
}

/// An incident as a checkpoint holds it: as [`Incident`], or as written before incidents were
/// bounded, with every member (evidence and `also`) in one map. Such an `also` is exact and is
/// cut to `also_max` by the next record or event.
#[derive(Deserialize)]
struct StoredIncident {
    alert_id: String,
    onset: i64,
    end: i64,
    #[serde(default)]
    evidence: BTreeMap<Key, Item>,
    #[serde(default)]
    also: BTreeSet<Key>,
    #[serde(default)]
    also_count: u64,
    #[serde(default)]
    members: Option<BTreeMap<Key, Item>>,
    published: Option<Published>,
}

impl From<StoredIncident> for Incident {
    fn from(s: StoredIncident) -> Self {
        let StoredIncident { alert_id, onset, end, mut evidence, mut also, mut also_count, .. } = s;
        if let Some(mut members) = s.members {
            let later = members.split_off(&at_or_after(onset + 1));
            also_count = later.len() as u64;
            also = later.into_keys().collect();
            evidence = members;
        }
        Incident { alert_id, onset, end, evidence, also, also_count, published: s.published }
    }
}

impl Incident {
    /// One more high event in `(onset, end)`; the list keeps its first `also_max` keys.
    fn add_also(&mut self, key: Key, also_max: usize) {
        self.also_count += 1;
        // A full list keeps its first keys: a later one would be inserted and cut again at once
        // (the common case of a machine that stays above threshold).
        if self.also.len() >= also_max && self.also.last().is_some_and(|last| *last < key) {
            return;
        }
        self.also.insert(key);
        trim(&mut self.also, also_max);
    }
}

fn trim(also: &mut BTreeSet<Key>, also_max: usize) {
    while also.len() > also_max {
        also.pop_last();
    }
}

/// Everything a decision needs besides the book itself.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    pub gateway: &'a str,
    pub rule: &'a str,
    pub rule_version: &'a str,
    pub machine: &'a str,
    /// The machine's asset tags, copied into its records.
    pub asset: &'a Arc<AssetTags>,
    pub window_ms: i64,
    pub count: usize,
    /// `also` lists at most this many event IDs.
    pub also_max: usize,
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
    high: HighIndex,
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

    /// Checks what a restored snapshot must hold and the code asserts when it merges incidents:
    /// each incident is keyed by its onset, its evidence lies in `(onset - window_ms, onset]`
    /// and its `also` in `(onset, end)`. A snapshot that breaks this (damaged, or not ours) is
    /// refused rather than trip an assertion later. Every high event and evidence item is also
    /// checked as the parser checks an event (a finite value) and against its key (its time and
    /// id): a damaged value would otherwise reach alert records as `null`.
    pub fn check(&self, window_ms: i64) -> Result<(), String> {
        for (&key, inc) in &self.incidents {
            let (onset, end) = (inc.onset, inc.end);
            let bad = |what: &str| {
                format!("incident {} (onset {onset}, end {end}): {what}", inc.alert_id)
            };
            if key != onset || end < onset {
                return Err(bad("its key or end does not fit its onset"));
            }
            if !inc.evidence.keys().all(|k| k.0 > onset.saturating_sub(window_ms) && k.0 <= onset) {
                return Err(bad("evidence outside the window before its onset"));
            }
            if !inc.also.iter().all(|k| k.0 > onset && k.0 < end && k.1.is_some()) {
                return Err(bad("a further member outside (onset, end), or without an id"));
            }
        }
        let items = self.high.iter().chain(self.incidents.values().flat_map(|i| &i.evidence));
        for (key, item) in items {
            if !item.value.is_finite() {
                return Err(format!(
                    "high event {}: value {} is not finite",
                    item.event_id, item.value
                ));
            }
            if key.0 != item.ts_ms || key.1.as_deref() != Some(&*item.event_id) {
                return Err(format!(
                    "high event {} at {}: kept under another key ({}, {:?})",
                    item.event_id, item.ts_ms, key.0, key.1
                ));
            }
        }
        Ok(())
    }

    /// The alert id of the incident a high event at `t` belongs to: the one it lies in
    /// (`onset <= t < end`), else the first beginning within `window_ms` after it, of whose
    /// evidence it is.
    pub fn incident_of(&self, t: i64, window_ms: i64) -> Option<&str> {
        let within = self.incidents.range(..=t).next_back().filter(|(_, i)| i.end > t);
        let after = || {
            let next = self.incidents.range(t.saturating_add(1)..).next();
            next.filter(|(&onset, _)| onset.saturating_sub(window_ms) < t)
        };
        within.or_else(after).map(|(_, i)| i.alert_id.as_str())
    }

    /// The incidents that begin before `to` and end after `from`, by onset.
    pub fn incidents_within(&self, from: i64, to: i64) -> impl Iterator<Item = &Incident> {
        let before = self.incidents.range(..to).rev();
        let within: Vec<&Incident> =
            before.take_while(|(_, i)| i.end > from).map(|(_, i)| i).collect();
        within.into_iter().rev()
    }

    /// Events held by incidents: evidence and listed `also` (shared events once per incident).
    pub fn member_len(&self) -> usize {
        self.incidents.values().map(|i| i.evidence.len() + i.also.len()).sum()
    }

    /// Applies one high event and emits what it changes.
    pub fn add(&mut self, item: EvidenceItem, ctx: &Ctx<'_>, out: &mut Vec<AlertRecord>) {
        let t = item.ts_ms;
        let key = (t, Some(item.event_id.clone()));
        let item = Arc::new(item);
        self.high.insert(key.clone(), item.clone());
        let regions = self.true_regions_from(t, ctx.window_ms, ctx.count);
        let (Some(first), Some(last)) = (regions.first(), regions.last()) else { return };
        let (lo, hi) = (first.0, last.1);
        if regions.len() == 1 && self.extend_in_place(&key, item, lo, hi, ctx, out) {
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
    /// other incident. The incident gains the event (as evidence when it is at the onset), a
    /// later end if `hi` is past it, and with it the high events already known in
    /// `[old end, new end)`.
    fn extend_in_place(
        &mut self,
        key: &Key,
        item: Item,
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
        let gained: Vec<Key> = if new_end > inc.end {
            self.high.range(range_keys(inc.end, new_end - 1)).map(|(k, _)| k.clone()).collect()
        } else {
            Vec::new()
        };
        let Some(inc) = self.incidents.get_mut(&onset) else { return false };
        inc.end = new_end;
        if t == onset {
            inc.evidence.insert(key.clone(), item);
        } else {
            inc.add_also(key.clone(), ctx.also_max);
        }
        for k in gained {
            inc.add_also(k, ctx.also_max);
        }
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
        let (w, t) = (ctx.window_ms, new_key.0);
        // Evidence: the first old incident's when the onset stays (with the new event if it
        // falls in the evidence window), else the high events of the new onset's window.
        let evidence = match olds.first_mut() {
            Some(first) if first.onset == onset => {
                let mut ev = std::mem::take(&mut first.evidence);
                if t > onset - w && t <= onset {
                    if let Some(item) = self.high.get(new_key) {
                        ev.insert(new_key.clone(), item.clone());
                    }
                }
                ev
            }
            _ => self
                .high
                .range(range_keys(onset - w + 1, onset))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        };
        // `also`: each old incident's `(onset, end)`, and the high events of the spans between
        // and around them (its onset, a gap, the new true part), the new event among them.
        let mut also = BTreeSet::new();
        let mut also_count = 0u64;
        let mut spans = Vec::new();
        let mut from = onset + 1;
        for old in &mut olds {
            also_count += old.also_count;
            also.append(&mut old.also);
            if old.onset >= from {
                spans.push((from, old.onset));
            }
            from = from.max(old.end);
        }
        if from < end {
            spans.push((from, end - 1));
        }
        for (lo, hi) in spans {
            for (k, _) in self.high.range(range_keys(lo, hi)) {
                also_count += 1;
                also.insert(k.clone());
            }
        }
        if olds.iter().any(|o| o.onset < t && t < o.end) {
            also_count += 1;
            also.insert(new_key.clone());
        }
        trim(&mut also, ctx.also_max);
        let (alert_id, published) = match survivor {
            Some(s) => {
                let sv = olds.swap_remove(s);
                (sv.alert_id, sv.published)
            }
            None => (format!("{}/{}/{}/{}", ctx.gateway, ctx.rule, ctx.machine, onset), None),
        };
        let mut absorbed = Vec::new();
        for old in olds {
            absorbed.push((old.alert_id, old.published));
        }
        debug_assert!(evidence.keys().all(|k| k.0 > onset - w && k.0 <= onset));
        debug_assert!(also.iter().all(|k| k.0 > onset && k.0 < end));
        let mut inc = Incident { alert_id, onset, end, evidence, also, also_count, published };
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

    /// The maximal intervals of `[t, t + W)` on which `C` holds, ascending and disjoint.
    fn true_regions_from(&self, t: i64, w: i64, n: usize) -> Vec<(i64, i64)> {
        let n = n.max(1);
        // The last key tells whether any event lies after t, without a search from the root.
        let later = self.high.last_key().is_some_and(|k| k.0 > t);
        if !later {
            // Nothing after t: the count on [t, t + W) only falls, so C holds up to d_N + W,
            // with d_N the N-th latest event time (every key is at or before t).
            let nth = self.high.iter().rev().nth(n - 1);
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
        while self.high.first_key().is_some_and(|k| k.0 <= keep_from) {
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
    let (clock_trust, max_err_ms) = clock_summary(inc.evidence.values().map(|v| &**v));
    AlertRecord {
        alert_id: inc.alert_id.clone(),
        revision,
        kind,
        machine: ctx.machine.to_string(),
        rule: ctx.rule.to_string(),
        rule_version: ctx.rule_version.to_string(),
        asset: Arc::clone(ctx.asset),
        onset_ms: inc.onset,
        end_ms: (ctx.wm > inc.end).then_some(inc.end),
        evidence: inc.evidence.values().map(|v| EvidenceItem::clone(v)).collect(),
        members: Vec::new(),
        also: (inc.also.iter().take(ctx.also_max))
            .filter_map(|(_, id)| id.as_deref().map(str::to_owned))
            .collect(),
        also_count: inc.also_count,
        clock_trust,
        max_err_ms,
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
    let n_evidence = inc.evidence.len();
    let n_also = usize::try_from(inc.also_count).unwrap_or(usize::MAX);
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
