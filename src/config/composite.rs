//! Composite rules (docs/contracts.md section 4, "Composite rules"): a `[[rule]]` table with
//! `name`, `all_of = ["A", "B", ...]` or `sequence = ["A", "B"]`, `window` and `early`, and none
//! of a measurement rule's keys. Its members are measurement rules of the same file (a composite
//! is no member: composites do not nest), each named once, at least two.
//!
//! Its `rule_version` (docs/contracts.md section 6) is xxh3-64 of this canonical text, its
//! members' versions included, so a change of a member changes the composite's version:
//!
//! ```text
//! linegate-composite-version=1
//! rule.name=bearing-and-severity
//! rule.all_of=severity-zone-C,inner-race
//! rule.window_ms=600000
//! rule.early=false
//! member.severity-zone-C=0123456789abcdef
//! member.inner-race=fedcba9876543210
//! ```
//!
//! (`rule.sequence=A,B` for a sequence; the members in their configured order, which is part of
//! the meaning: it orders the citations, and for a sequence it is the sequence.)

use std::fmt::Write as _;

use super::raw::RawRule;
use super::rules::RuleKey;
use super::{Config, Ctx, Result, RuleConfig};
use crate::rule::composite::{Combine, Spec};

/// A composite rule's table, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct CompositeConfig {
    /// Unique among all rules; an identifier.
    pub name: String,
    /// How it combines its members, the members, its window.
    pub spec: Spec,
    pub early: bool,
    /// Its table's place among the `[[rule]]` tables (for error keys).
    pub index: usize,
}

impl CompositeConfig {
    /// `all_of` or `sequence`: the key that names its members.
    pub fn kind(&self) -> &'static str {
        combine_key(self.spec.combine())
    }
}

fn combine_key(c: Combine) -> &'static str {
    match c {
        Combine::AllOf => "all_of",
        Combine::Sequence => "sequence",
    }
}

/// The key that makes `raw` a composite rule, if one does.
pub(super) fn composite_key(raw: &RawRule) -> Option<&'static str> {
    match (&raw.all_of, &raw.sequence) {
        (Some(_), _) => Some("all_of"),
        (None, Some(_)) => Some("sequence"),
        (None, None) => None,
    }
}

impl Ctx<'_> {
    /// A composite `[[rule]]` table at `index`; `rules` are the measurement rules, `names` every
    /// rule's name in file order.
    pub(super) fn validate_composite(
        &self,
        raw: RawRule,
        index: usize,
        rules: &[RuleConfig],
        names: &[String],
    ) -> Result<CompositeConfig> {
        let key = RuleKey { index: Some(index) };
        let name = raw.name.clone().unwrap_or_default();
        if !crate::event::is_identifier(&name) {
            return Err(self.err(key.bare("name"), super::not_identifier("rule name", &name)));
        }
        let k = |sub: &str| key.named(&name, sub);
        let measurement = [
            ("metric", raw.metric.is_some()),
            ("unit", raw.unit.is_some()),
            ("threshold", raw.threshold.is_some()),
            ("count", raw.count.is_some()),
            ("count_quality", raw.count_quality.is_some()),
            ("count_clock", raw.count_clock.is_some()),
            ("also_max", raw.also_max.is_some()),
            ("machines", raw.machines.is_some()),
        ];
        let kind = composite_key(&raw).unwrap_or("all_of");
        if let Some((sub, _)) = measurement.iter().find(|(_, given)| *given) {
            return Err(self.err(
                k(sub),
                format!(
                    "a composite rule ({kind}) reads no measurement of its own: leave {sub} out \
                     (its members' tables set it)"
                ),
            ));
        }
        let (combine, members) = match (raw.all_of, raw.sequence) {
            (Some(_), Some(_)) => {
                return Err(self.err(k("sequence"), "a rule has all_of or sequence, not both"))
            }
            (Some(m), None) => (Combine::AllOf, m),
            (None, Some(m)) => (Combine::Sequence, m),
            (None, None) => return Err(self.err(k("all_of"), "names no rules")),
        };
        let kind = combine_key(combine);
        match (combine, members.len()) {
            (Combine::AllOf, n) if n < 2 => {
                return Err(
                    self.err(k(kind), format!("names {n} rule(s); all_of needs two or more"))
                )
            }
            (Combine::Sequence, n) if n != 2 => {
                return Err(self.err(
                    k(kind),
                    format!("names {n} rule(s); a sequence is two rules, [first, then]"),
                ))
            }
            _ => {}
        }
        for (i, m) in members.iter().enumerate() {
            let mk = k(&format!("{kind}[{i}]"));
            if members[..i].contains(m) {
                return Err(self.err(mk, format!("rule \"{m}\" is named twice")));
            }
            if rules.iter().any(|r| r.name == *m) {
                continue;
            }
            let why = if names.contains(m) {
                format!(
                    "\"{m}\" is a composite rule; the members of a composite are measurement \
                     rules (composites do not nest)"
                )
            } else {
                let known: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
                format!("no measurement rule is named \"{m}\"; the rules are {}", known.join(", "))
            };
            return Err(self.err(mk, why));
        }
        let window_ms = self.duration(&k("window"), raw.window.as_deref(), 120_000)?;
        let spec = match combine {
            Combine::AllOf => Spec::all_of(members, window_ms),
            Combine::Sequence => {
                let mut m = members.into_iter();
                let (a, b) = (m.next().unwrap_or_default(), m.next().unwrap_or_default());
                Spec::sequence(a, b, window_ms)
            }
        }
        .map_err(|why| self.err(k("window"), why))?;
        Ok(CompositeConfig { name, spec, early: raw.early.unwrap_or(false), index })
    }
}

impl Config {
    /// The composite rule named `name`.
    pub fn composite_named(&self, name: &str) -> Option<&CompositeConfig> {
        self.composites.iter().find(|c| c.name == name)
    }
}

/// The canonical text of composite rule `c` of `config` (module documentation).
pub(super) fn canonical(config: &Config, c: &CompositeConfig) -> String {
    let mut out = String::new();
    let mut line = |k: &str, v: &dyn std::fmt::Display| {
        let _ = writeln!(out, "{k}={v}");
    };
    line("linegate-composite-version", &1);
    line("rule.name", &c.name);
    line(&format!("rule.{}", c.kind()), &c.spec.members().join(","));
    line("rule.window_ms", &c.spec.window_ms());
    line("rule.early", &c.early);
    for m in c.spec.members() {
        let version = config
            .rule_named(m)
            .map(|r| super::rule_version::rule_version_of(config, r))
            .unwrap_or_default();
        line(&format!("member.{m}"), &version);
    }
    out
}

/// The version of composite rule `c` of `config`: xxh3-64 of [`canonical`], 16 hex digits.
pub fn composite_version(config: &Config, c: &CompositeConfig) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(canonical(config, c).as_bytes()))
}

#[cfg(test)]
mod tests;
