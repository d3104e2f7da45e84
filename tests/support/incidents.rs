//! The contract's incidents (docs/contracts.md section 4) computed by brute force, and the final
//! incidents read back from alert records.

use std::collections::BTreeMap;

use linegate::rule::alert::{AlertKind, AlertRecord};

/// One incident as the contract defines it; ids sorted by (ts, id).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FinalIncident {
    pub machine: String,
    pub onset_ms: i64,
    pub end_ms: Option<i64>,
    pub evidence: Vec<String>,
    pub also: Vec<String>,
    /// How many further high events the incident has; `also` may list fewer (`also_max`).
    pub also_count: u64,
}

impl FinalIncident {
    /// As an alert record lists it: only the first `also_max` further events.
    pub fn listing(mut self, also_max: usize) -> Self {
        self.also.truncate(also_max);
        self
    }
}

/// Brute force over every breakpoint: `high` is (ts, event_id) of one machine's high events.
pub fn reference(machine: &str, high: &[(i64, String)], w: i64, n: usize) -> Vec<FinalIncident> {
    let mut h = high.to_vec();
    h.sort();
    h.dedup();
    let c = |tau: i64| h.iter().filter(|(t, _)| tau - w < *t && *t <= tau).count() >= n;
    let mut cuts: Vec<i64> = h.iter().flat_map(|(t, _)| [*t, *t + w]).collect();
    cuts.sort();
    cuts.dedup();
    let mut out = Vec::new();
    let mut onset: Option<i64> = None;
    for &p in &cuts {
        match (onset, c(p)) {
            (None, true) => onset = Some(p),
            (Some(o), false) => {
                out.push(incident(machine, &h, o, p, w));
                onset = None;
            }
            _ => {}
        }
    }
    assert!(onset.is_none(), "C true past the last breakpoint is impossible");
    out
}

fn incident(machine: &str, h: &[(i64, String)], onset: i64, end: i64, w: i64) -> FinalIncident {
    let also: Vec<String> =
        h.iter().filter(|(t, _)| onset < *t && *t < end).map(|x| x.1.clone()).collect();
    FinalIncident {
        machine: machine.to_string(),
        onset_ms: onset,
        end_ms: Some(end),
        evidence: h
            .iter()
            .filter(|(t, _)| onset - w < *t && *t <= onset)
            .map(|x| x.1.clone())
            .collect(),
        also_count: also.len() as u64,
        also,
    }
}

/// The truth of each alert: its highest revision; superseded alerts are dropped.
pub fn final_incidents(records: &[AlertRecord]) -> Vec<FinalIncident> {
    let mut last: BTreeMap<&str, &AlertRecord> = BTreeMap::new();
    for r in records {
        let e = last.entry(&r.alert_id).or_insert(r);
        if r.revision > e.revision {
            *e = r;
        }
    }
    let mut out: Vec<FinalIncident> = last
        .values()
        .filter(|r| r.kind != AlertKind::Supersede)
        .map(|r| FinalIncident {
            machine: r.machine.clone(),
            onset_ms: r.onset_ms,
            end_ms: r.end_ms,
            evidence: r.evidence.iter().map(|e| e.event_id.to_string()).collect(),
            also: r.also.clone(),
            also_count: r.also_count,
        })
        .collect();
    out.sort();
    out
}

/// Revisions of every alert are 0, 1, 2, … in emission order, and `open` comes first.
pub fn check_revisions(records: &[AlertRecord]) {
    let mut next: BTreeMap<&str, u32> = BTreeMap::new();
    for r in records {
        let n = next.entry(&r.alert_id).or_insert(0);
        assert_eq!(r.revision, *n, "revision order of {}", r.alert_id);
        assert_eq!(r.kind == AlertKind::Open, r.revision == 0, "open is revision 0: {r:?}");
        *n += 1;
    }
}
