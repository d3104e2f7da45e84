//! `linegate whatif`: what another rule would have decided about the gateway's history. The
//! history is exported (`audit::export`), replayed under the other configuration, and its
//! incidents compared with those the gateway archived. This module is the pure part: incidents
//! from alert records, and their difference.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::rule::alert::{AlertKind, AlertRecord};

/// An incident as its latest alert revision leaves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Incident {
    pub alert_id: String,
    pub machine: String,
    /// The rule that decided it: incidents pair only within one rule.
    pub rule: String,
    pub onset_ms: i64,
    /// Null while it is still open.
    pub end_ms: Option<i64>,
    pub rule_version: String,
    /// The ingest time of its first revision.
    pub first_decided_at_ms: i64,
}

impl Incident {
    fn overlaps(&self, other: &Incident) -> bool {
        let end = |i: &Incident| i.end_ms.unwrap_or(i64::MAX);
        self.machine == other.machine
            && self.rule == other.rule
            && self.onset_ms <= end(other)
            && other.onset_ms <= end(self)
    }
}

/// The incidents `records` leave: each alert id's latest revision, unless it was superseded
/// (merged into another), in `(machine, onset, alert_id)` order.
pub fn incidents<'a>(records: impl IntoIterator<Item = &'a AlertRecord>) -> Vec<Incident> {
    let mut by_id: BTreeMap<&str, (&AlertRecord, i64)> = BTreeMap::new();
    for r in records {
        let e = by_id.entry(&r.alert_id).or_insert((r, r.decided_at_ms));
        e.1 = e.1.min(r.decided_at_ms);
        if r.revision >= e.0.revision {
            e.0 = r;
        }
    }
    let mut out: Vec<Incident> = by_id
        .into_values()
        .filter(|(r, _)| r.kind != AlertKind::Supersede)
        .map(|(r, first)| Incident {
            alert_id: r.alert_id.clone(),
            machine: r.machine.clone(),
            rule: r.rule.clone(),
            onset_ms: r.onset_ms,
            end_ms: r.end_ms,
            rule_version: r.rule_version.clone(),
            first_decided_at_ms: first,
        })
        .collect();
    out.sort_by(|a, b| {
        (&a.machine, a.onset_ms, &a.alert_id).cmp(&(&b.machine, b.onset_ms, &b.alert_id))
    });
    out
}

/// How one incident differs between the gateway's decisions and the other rule's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// Only the other rule decides it.
    Added { incident: Incident },
    /// Only the gateway decided it.
    Removed { incident: Incident },
    /// Both decide an incident over overlapping time, with another onset or end.
    Moved { before: Incident, after: Incident },
    /// Both decide the same onset and end.
    Same { before: Incident, after: Incident },
}

impl Change {
    /// The machine and onset the change is sorted by.
    fn key(&self) -> (&str, i64) {
        match self {
            Change::Added { incident } | Change::Removed { incident } => {
                (&incident.machine, incident.onset_ms)
            }
            Change::Moved { before, .. } | Change::Same { before, .. } => {
                (&before.machine, before.onset_ms)
            }
        }
    }
}

/// Pairs each incident of `before` with the first unpaired incident of `after` of the same rule
/// on the same machine whose time overlaps it (both in onset order); what is left unpaired was added or
/// removed. Sorted by machine and onset.
pub fn diff(before: &[Incident], after: &[Incident]) -> Vec<Change> {
    let mut paired = vec![false; after.len()];
    let mut out = Vec::new();
    for b in before {
        let found = after.iter().enumerate().find(|(i, a)| !paired[*i] && a.overlaps(b));
        match found {
            Some((i, a)) => {
                paired[i] = true;
                let (before, after) = (b.clone(), a.clone());
                if a.onset_ms == b.onset_ms && a.end_ms == b.end_ms {
                    out.push(Change::Same { before, after });
                } else {
                    out.push(Change::Moved { before, after });
                }
            }
            None => out.push(Change::Removed { incident: b.clone() }),
        }
    }
    for (a, _) in after.iter().zip(&paired).filter(|(_, p)| !**p) {
        out.push(Change::Added { incident: a.clone() });
    }
    out.sort_by(|x, y| x.key().cmp(&y.key()));
    out
}

/// Counts of a diff: added, removed, moved, same.
pub fn tally(changes: &[Change]) -> (usize, usize, usize, usize) {
    changes.iter().fold((0, 0, 0, 0), |(a, r, m, s), c| match c {
        Change::Added { .. } => (a + 1, r, m, s),
        Change::Removed { .. } => (a, r + 1, m, s),
        Change::Moved { .. } => (a, r, m + 1, s),
        Change::Same { .. } => (a, r, m, s + 1),
    })
}

/// What `whatif` reports: the span of history decided again, both sides' rule versions and
/// incidents, and the changes (its `--json` form).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Ingest times of the first and last history record decided again.
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    pub records: u64,
    pub gateway_versions: Vec<String>,
    pub whatif_version: String,
    pub gateway_incidents: usize,
    pub whatif_incidents: usize,
    pub added: usize,
    pub removed: usize,
    pub moved: usize,
    pub same: usize,
    pub changes: Vec<Change>,
}

impl Report {
    pub fn new(
        span: (Option<i64>, Option<i64>, u64),
        gateway: &[Incident],
        whatif: &[Incident],
        whatif_version: String,
    ) -> Report {
        let changes = diff(gateway, whatif);
        let (added, removed, moved, same) = tally(&changes);
        let mut gateway_versions: Vec<String> =
            gateway.iter().map(|i| i.rule_version.clone()).collect();
        gateway_versions.sort();
        gateway_versions.dedup();
        Report {
            from_ms: span.0,
            to_ms: span.1,
            records: span.2,
            gateway_versions,
            whatif_version,
            gateway_incidents: gateway.len(),
            whatif_incidents: whatif.len(),
            added,
            removed,
            moved,
            same,
            changes,
        }
    }

    /// The report for people: a summary, then one line per incident that differs.
    pub fn write_text(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        use crate::timefmt::{duration, time, time_or};
        writeln!(
            out,
            "what-if over the history from {} to {} ({} records)",
            time_or(self.from_ms, "(empty)"),
            time_or(self.to_ms, "(empty)"),
            self.records
        )?;
        let versions = if self.gateway_versions.is_empty() {
            "-".into()
        } else {
            self.gateway_versions.join(", ")
        };
        writeln!(
            out,
            "  gateway:  {} incidents (rule version {versions})",
            self.gateway_incidents
        )?;
        writeln!(
            out,
            "  what-if:  {} incidents (rule version {})",
            self.whatif_incidents, self.whatif_version
        )?;
        writeln!(
            out,
            "  {} added, {} removed, {} moved, {} the same",
            self.added, self.removed, self.moved, self.same
        )?;
        let span =
            |i: &Incident| format!("{} to {}", time(i.onset_ms), time_or(i.end_ms, "(open)"));
        let shift = |from: i64, to: i64| match to.cmp(&from) {
            std::cmp::Ordering::Less => format!("{} earlier", duration(from - to)),
            std::cmp::Ordering::Greater => format!("{} later", duration(to - from)),
            std::cmp::Ordering::Equal => "unchanged".into(),
        };
        for c in &self.changes {
            match c {
                Change::Added { incident: i } => writeln!(
                    out,
                    "  + {}  added    {} (rule {}, alert {})",
                    i.machine,
                    span(i),
                    i.rule,
                    i.alert_id
                )?,
                Change::Removed { incident: i } => writeln!(
                    out,
                    "  - {}  removed  {} (rule {}, alert {})",
                    i.machine,
                    span(i),
                    i.rule,
                    i.alert_id
                )?,
                Change::Moved { before: b, after: a } => {
                    let end = match (b.end_ms, a.end_ms) {
                        (Some(x), Some(y)) => shift(x, y),
                        (x, y) if x == y => "unchanged".into(),
                        (_, y) => format!("now {}", time_or(y, "open")),
                    };
                    writeln!(
                        out,
                        "  ~ {}  moved    {} became {} (onset {}, end {}; alert {} / {})",
                        b.machine,
                        span(b),
                        span(a),
                        shift(b.onset_ms, a.onset_ms),
                        end,
                        b.alert_id,
                        a.alert_id
                    )?
                }
                Change::Same { .. } => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inc(id: &str, machine: &str, onset: i64, end: Option<i64>) -> Incident {
        Incident {
            alert_id: id.into(),
            machine: machine.into(),
            rule: "r".into(),
            onset_ms: onset,
            end_ms: end,
            rule_version: "v".into(),
            first_decided_at_ms: onset,
        }
    }

    #[test]
    fn same_moved_added_and_removed_are_told_apart() {
        let before = [
            inc("a", "m1", 0, Some(100)),
            inc("b", "m1", 1000, Some(1100)),
            inc("c", "m2", 0, Some(50)),
        ];
        let after = [
            inc("x", "m1", 0, Some(100)),
            inc("y", "m1", 1050, None),
            inc("z", "m2", 500, Some(600)),
        ];
        let d = diff(&before, &after);
        assert_eq!(tally(&d), (1, 1, 1, 1));
        assert!(matches!(&d[0], Change::Same { after, .. } if after.alert_id == "x"));
        assert!(matches!(&d[1], Change::Moved { before, after }
            if before.alert_id == "b" && after.alert_id == "y"));
        assert!(matches!(&d[2], Change::Removed { incident } if incident.alert_id == "c"));
        assert!(matches!(&d[3], Change::Added { incident } if incident.alert_id == "z"));
    }

    #[test]
    fn an_incident_on_another_machine_never_pairs() {
        let d = diff(&[inc("a", "m1", 0, Some(10))], &[inc("b", "m2", 0, Some(10))]);
        assert_eq!(tally(&d), (1, 1, 0, 0));
    }

    /// With several rules, each rule's incidents are compared with that rule's only.
    #[test]
    fn an_incident_of_another_rule_never_pairs() {
        let other = Incident { rule: "s".into(), ..inc("b", "m1", 0, Some(10)) };
        let d = diff(&[inc("a", "m1", 0, Some(10))], &[other.clone(), inc("c", "m1", 5, None)]);
        assert_eq!(tally(&d), (1, 0, 1, 0));
        assert!(matches!(&d[0], Change::Moved { after, .. } if after.alert_id == "c"), "{d:?}");
        assert!(matches!(&d[1], Change::Added { incident } if *incident == other), "{d:?}");
    }
}
