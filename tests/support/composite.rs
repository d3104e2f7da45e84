//! The composite rules of a configuration, read with `toml` alone, and their final incidents by
//! brute force from the member rules' final incidents (docs/contracts.md section 4, "Composite
//! rules"): the condition evaluated at every instant where it can change, with no interval
//! arithmetic of the crate's. Used by the golden traces to hold composite alerts to the contract.

use std::path::Path;

use linegate::rule::alert::{AlertKind, AlertRecord};

use super::incidents::FinalIncident;

/// One composite `[[rule]]` table.
#[derive(Debug, Clone)]
pub struct Composite {
    pub name: String,
    /// `true` for `sequence = [A, B]`, `false` for `all_of`.
    pub sequence: bool,
    pub members: Vec<String>,
    pub window_ms: i64,
}

/// Whether a `[[rule]]` table is a composite rule's.
pub fn is_composite(table: &toml::Table) -> bool {
    table.contains_key("all_of") || table.contains_key("sequence")
}

impl Composite {
    /// The composite rules of the configuration at `path`, in file order.
    pub fn load(path: &Path) -> Vec<Composite> {
        let doc: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let Some(toml::Value::Array(tables)) = doc.get("rule") else { return Vec::new() };
        let tables = tables.iter().map(|t| t.as_table().unwrap()).filter(|t| is_composite(t));
        tables
            .map(|t| {
                let sequence = t.contains_key("sequence");
                let members = t[if sequence { "sequence" } else { "all_of" }].as_array().unwrap();
                let window = t.get("window").map_or("2m", |w| w.as_str().unwrap());
                Composite {
                    name: t["name"].as_str().unwrap().to_string(),
                    sequence,
                    members: members.iter().map(|m| m.as_str().unwrap().to_string()).collect(),
                    window_ms: humantime::parse_duration(window).unwrap().as_millis() as i64,
                }
            })
            .collect()
    }

    /// The final incidents of this composite on `machine`, given each member's final incidents
    /// (by member name; `[onset, end)`): `(onset, end, cited)`, `cited` the member incidents
    /// as `(rule, onset)` in the contract's order.
    pub fn reference(&self, members: &[(String, Vec<(i64, i64)>)]) -> Vec<CompositeIncident> {
        let w = self.window_ms;
        let of = |m: &str| members.iter().find(|(n, _)| n == m).map_or(&[][..], |(_, v)| v);
        let recent = |m: &str, t: i64| of(m).iter().any(|&(a, e)| a <= t && t < e + w);
        // Every instant where a member begins, ends or leaves the window: between two of them
        // nothing changes.
        let mut cuts: Vec<i64> =
            members.iter().flat_map(|(_, v)| v.iter().flat_map(|&(a, e)| [a, e, e + w])).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let cond = |t: i64| {
            if !self.sequence {
                return self.members.iter().all(|m| recent(m, t));
            }
            let (a, b) = (&self.members[0], &self.members[1]);
            // B holds without a break on [s, t] from an instant s at which A had held within
            // the window: s is B's onset, or an onset of A after it (where A's recency begins).
            of(b).iter().filter(|&&(x, e)| x <= t && t < e).any(|&(x, _)| {
                let starts = std::iter::once(x).chain(of(a).iter().map(|&(y, _)| y));
                starts.filter(|&s| x <= s && s <= t).any(|s| recent(a, s))
            })
        };
        let mut out = Vec::new();
        let mut onset: Option<i64> = None;
        for &t in &cuts {
            match (onset, cond(t)) {
                (None, true) => onset = Some(t),
                (Some(q), false) => {
                    out.push(self.incident(q, t, &of));
                    onset = None;
                }
                _ => {}
            }
        }
        assert!(onset.is_none(), "a composite condition true past the last cut");
        out
    }

    fn incident<'a>(
        &self,
        q: i64,
        end: i64,
        of: &dyn Fn(&str) -> &'a [(i64, i64)],
    ) -> CompositeIncident {
        let w = self.window_ms;
        let mut cited = Vec::new();
        for (i, m) in self.members.iter().enumerate() {
            let held_at_q = |&&(a, e): &&(i64, i64)| a <= q && q < e;
            let in_window = |&&(a, e): &&(i64, i64)| a <= q && q < e + w;
            let pick: Vec<&(i64, i64)> = if self.sequence && i == 1 {
                of(m).iter().filter(held_at_q).collect()
            } else {
                of(m).iter().filter(in_window).collect()
            };
            cited.extend(pick.into_iter().map(|&(a, _)| (m.clone(), a)));
        }
        CompositeIncident { onset_ms: q, end_ms: end, cited }
    }
}

/// A composite incident: `[onset, end)` and the member incidents it cites, `(rule, onset)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompositeIncident {
    pub onset_ms: i64,
    pub end_ms: i64,
    pub cited: Vec<(String, i64)>,
}

/// Each member incident as `[onset, end)`, from the reference's final incidents.
pub fn spans(incidents: &[FinalIncident], machine: &str) -> Vec<(i64, i64)> {
    let on = incidents.iter().filter(|i| i.machine == machine);
    on.map(|i| (i.onset_ms, i.end_ms.expect("a final incident has its end"))).collect()
}

/// The final composite incidents of `rule` on `machine` in alert records (the highest revision
/// of each alert not superseded), checking that each cited member alert is a record of its rule
/// with that onset.
pub fn final_composites(
    records: &[AlertRecord],
    rule: &str,
    machine: &str,
) -> Vec<CompositeIncident> {
    let mut last: std::collections::BTreeMap<&str, &AlertRecord> = Default::default();
    for r in records.iter().filter(|r| r.rule == rule && r.machine == machine) {
        let e = last.entry(&r.alert_id).or_insert(r);
        if r.revision > e.revision {
            *e = r;
        }
    }
    let mut out: Vec<CompositeIncident> = last
        .values()
        .filter(|r| r.kind != AlertKind::Supersede)
        .map(|r| {
            for m in &r.members {
                let theirs = records.iter().any(|x| x.alert_id == m.alert_id && x.rule == m.rule);
                assert!(
                    theirs,
                    "{}: cites {}, no alert of rule {}",
                    r.alert_id, m.alert_id, m.rule
                );
                for id in &m.evidence {
                    assert!(
                        r.evidence.iter().any(|e| &*e.event_id == id),
                        "{}: member evidence {id} is not in its evidence",
                        r.alert_id
                    );
                }
            }
            CompositeIncident {
                onset_ms: r.onset_ms,
                end_ms: r.end_ms.expect("a final composite alert has its end"),
                cited: r.members.iter().map(|m| (m.rule.clone(), m.onset_ms)).collect(),
            }
        })
        .collect();
    out.sort_by_key(|i| i.onset_ms);
    out
}
