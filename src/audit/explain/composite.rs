//! A composite alert (docs/contracts.md section 4, composite rules) as `explain` shows it: the
//! composite rule's line, then one line per member alert it cites, naming the member alert, its
//! onset and its evidence count, with the member rule's own line from this configuration.

use std::io::{self, Write};

use serde::Serialize;

use crate::config::Config;
use crate::rule::alert::AlertRecord;
use crate::timefmt::time;

use super::number::span;

/// The composite rule of an alert and the member alerts its latest revision cites.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompositeLine {
    pub name: String,
    /// `all_of` or `sequence`; null when the configuration has no composite rule of its name.
    pub kind: Option<&'static str>,
    /// The member rules as configured, in order.
    pub rules: Vec<String>,
    pub window_ms: Option<i64>,
    /// The version of the rule in this configuration.
    pub rule_version: Option<String>,
    pub members: Vec<MemberLine>,
}

/// One member alert a composite alert cites.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberLine {
    pub rule: String,
    pub alert_id: String,
    pub onset_ms: i64,
    /// How many evidence events the member alert had when cited.
    pub evidence: usize,
    /// The member rule's line in this configuration (`rule vib (version …): …`); null when it
    /// has none of that name.
    pub rule_line: Option<String>,
}

/// The composite view of `latest` (the alert's latest revision): `None` for a measurement
/// rule's alert, which cites no member alerts.
pub fn composite_for(config: &Config, latest: &AlertRecord) -> Option<CompositeLine> {
    if latest.members.is_empty() {
        return None;
    }
    let c = config.composite_named(&latest.rule);
    let members = latest
        .members
        .iter()
        .map(|m| MemberLine {
            rule: m.rule.clone(),
            alert_id: m.alert_id.clone(),
            onset_ms: m.onset_ms,
            evidence: m.evidence.len(),
            rule_line: super::rule::rule_for(config, &m.rule, &latest.machine)
                .map(|r| r.line.sentence()),
        })
        .collect();
    Some(CompositeLine {
        name: latest.rule.clone(),
        kind: c.map(|c| c.kind()),
        rules: c.map(|c| c.spec.members().to_vec()).unwrap_or_default(),
        window_ms: c.map(|c| c.spec.window_ms()),
        rule_version: c.map(|c| crate::config::rule_version::composite_version(config, c)),
        members,
    })
}

impl CompositeLine {
    /// `rule both (version …): all_of [vib, env] within 2 min`, then one line per member.
    pub fn write(&self, decided_under: &str, out: &mut dyn Write) -> io::Result<()> {
        match (self.kind, self.window_ms, &self.rule_version) {
            (Some(kind), Some(w), Some(version)) => {
                writeln!(
                    out,
                    "  rule {} (version {version}): {kind} [{}] within {}",
                    self.name,
                    self.rules.join(", "),
                    span(w)
                )?;
                if !decided_under.is_empty() && decided_under != version {
                    writeln!(
                        out,
                        "  decided under rule version {decided_under}: this configuration's \
                         rule differs"
                    )?;
                }
            }
            _ => writeln!(
                out,
                "  rule {}: a composite rule not in this configuration (renamed or removed \
                 since)",
                self.name
            )?,
        }
        for m in &self.members {
            writeln!(
                out,
                "  member {}: alert {}, onset {}, {} evidence event(s)",
                m.rule,
                m.alert_id,
                time(m.onset_ms),
                m.evidence
            )?;
            if let Some(line) = &m.rule_line {
                writeln!(out, "    {line}")?;
            }
        }
        Ok(())
    }
}
