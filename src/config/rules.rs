//! Several rules (docs/contracts.md section 4): one `[rule]` table is one rule; `[[rule]]` tables
//! are one rule each, in file order, each with its own `name` (required there, unique), metric,
//! threshold, window, count, filters and `[rule.machines.NAME]` overrides (inside its entry, as
//! TOML nests them: `[[rule]]` then `[rule.machines.press-7]`).
//!
//! Errors name the rule: `rule.threshold` for the one `[rule]`, `rule[1] (inner-race).threshold`
//! for the second `[[rule]]` (`rule[1].name` while the name itself is what is wrong).

use super::composite::{self, CompositeConfig};
use super::raw::{RawRule, RawRules};
use super::{Config, ConfigError, Ctx, Result, RuleConfig};

/// How a rule's keys are named in errors.
pub(super) struct RuleKey {
    /// `None` for the one `[rule]` table; the index of a `[[rule]]` table.
    pub(super) index: Option<usize>,
}

impl RuleKey {
    /// The key `sub` of the rule before its name is known (or when the name is wrong).
    pub(super) fn bare(&self, sub: &str) -> String {
        match self.index {
            None => format!("rule.{sub}"),
            Some(i) => format!("rule[{i}].{sub}"),
        }
    }

    /// The key `sub` of the rule named `name`.
    pub(super) fn named(&self, name: &str, sub: &str) -> String {
        match self.index {
            None => format!("rule.{sub}"),
            Some(i) => format!("rule[{i}] ({name}).{sub}"),
        }
    }
}

impl Config {
    /// Every rule, in configuration order: [`Config::rule`], then [`Config::more_rules`].
    pub fn rules(&self) -> impl Iterator<Item = &RuleConfig> {
        std::iter::once(&self.rule).chain(&self.more_rules)
    }

    /// The rule named `name`.
    pub fn rule_named(&self, name: &str) -> Option<&RuleConfig> {
        self.rules().find(|r| r.name == name)
    }

    /// How rule `rule` (one of [`Config::rules`]) is named in messages about its key `sub`:
    /// `rule.sub`, or `rule[i] (name).sub` when the rules are `[[rule]]` tables.
    pub fn rule_key(&self, rule: &RuleConfig, sub: &str) -> String {
        let index = self.rule_tables.then(|| self.rules().position(|r| r.name == rule.name));
        // Its table's place in the file: the composites' tables are among them.
        let taken = |i: &usize| self.composites.iter().any(|c| c.index == *i);
        let index = index.flatten().and_then(|p| (0..).filter(|i| !taken(i)).nth(p));
        RuleKey { index }.named(&rule.name, sub)
    }

    /// The threshold of `machine` for `rule`, in the rule's unit: its override or the rule's, a
    /// zone resolved from the machine's asset entry; `None` when a zone does not resolve (its
    /// events never count for that rule).
    pub fn rule_threshold_for(&self, rule: &RuleConfig, machine: &str) -> Option<f64> {
        rule.threshold_for(machine).resolve(self.machines.get(machine))
    }
}

impl Ctx<'_> {
    /// `[rule]` or `[[rule]]` (absent: the default rule): the first measurement rule, the
    /// others, whether they were written as `[[rule]]` tables, and the composite rules.
    pub(super) fn validate_rules(
        &self,
        raw: Option<RawRules>,
    ) -> Result<(RuleConfig, Vec<RuleConfig>, bool, Vec<CompositeConfig>)> {
        let tables = match raw {
            None => {
                let rule = self.validate_rule(RawRule::default(), &RuleKey { index: None })?;
                return Ok((rule, Vec::new(), false, Vec::new()));
            }
            Some(RawRules::One(raw)) => {
                let key = RuleKey { index: None };
                if let Some(sub) = composite::composite_key(&raw) {
                    return Err(self.err(
                        key.bare(sub),
                        "a composite rule is one of several [[rule]] tables, beside the rules \
                         it combines",
                    ));
                }
                return Ok((self.validate_rule(*raw, &key)?, Vec::new(), false, Vec::new()));
            }
            Some(RawRules::Many(tables)) => tables,
        };
        if tables.is_empty() {
            return Err(self.err("rule", "no [[rule]] table; give at least one rule"));
        }
        let mut rules: Vec<RuleConfig> = Vec::with_capacity(tables.len());
        let mut composite_tables = Vec::new();
        let mut names: Vec<String> = Vec::with_capacity(tables.len());
        for (i, raw) in tables.into_iter().enumerate() {
            let key = RuleKey { index: Some(i) };
            let Some(name) = raw.name.clone() else {
                return Err(self.err(
                    key.bare("name"),
                    "missing; each [[rule]] needs a name of its own, written into its alerts",
                ));
            };
            if let Some(j) = names.iter().position(|n| *n == name) {
                return Err(self.err(
                    key.bare("name"),
                    format!("\"{name}\" is the name of rule[{j}] too; rule names are unique"),
                ));
            }
            names.push(name);
            if composite::composite_key(&raw).is_some() {
                composite_tables.push((i, raw));
            } else {
                rules.push(self.validate_rule(raw, &key)?);
            }
        }
        let composites = composite_tables
            .into_iter()
            .map(|(i, raw)| self.validate_composite(raw, i, &rules, &names))
            .collect::<Result<Vec<_>>>()?;
        if rules.is_empty() {
            return Err(
                self.err("rule", "every [[rule]] is a composite; give the rules they combine")
            );
        }
        let first = rules.remove(0);
        Ok((first, rules, true, composites))
    }
}

/// A serde error at a key of a `[[rule]]` table (`rule[1].threshhold`), with the rule's name
/// added when the text gives it (`rule[1] (inner-race).threshhold`).
pub(super) fn name_rule_in_error(e: ConfigError, text: &str) -> ConfigError {
    let ConfigError::Invalid { origin, key, line, reason } = e else { return e };
    let named = (|| {
        let rest = key.strip_prefix("rule[")?;
        let (index, sub) = rest.split_once(']')?;
        let table: toml::Table = toml::from_str(text).ok()?;
        let rule = table.get("rule")?.as_array()?.get(index.parse::<usize>().ok()?)?;
        let name = rule.get("name")?.as_str()?;
        Some(format!("rule[{index}] ({name}){sub}"))
    })();
    ConfigError::Invalid { origin, key: named.unwrap_or(key), line, reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::features::Feature;

    const FILE: &str = "plant.toml";

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(&format!("{text}\n[gateway]\nid = \"gw\"\n"), FILE)
    }

    #[track_caller]
    fn refused(text: &str, key: &str, why: &str) {
        let err = parse(text).expect_err(text);
        let msg = err.to_string();
        assert_eq!(err.key(), Some(key), "{msg}");
        assert!(msg.contains(why), "{why:?} missing in: {msg}");
    }

    const TWO: &str = "[[rule]]\nname = \"severity\"\nmetric = \"velocity_rms\"\nthreshold = 7.1\n\
                       [rule.machines.press-7]\nthreshold = 4.5\n\
                       [[rule]]\nname = \"inner-race\"\nmetric = \"env_bpfi\"\nthreshold = 8.0\n\
                       count = 2\nwindow = \"10m\"\n";

    #[test]
    fn rule_tables_are_rules_each_with_its_own_overrides() {
        let c = parse(TWO).unwrap();
        let rules: Vec<(&str, Feature)> = c.rules().map(|r| (r.name.as_str(), r.metric)).collect();
        assert_eq!(rules, [("severity", Feature::VelocityRms), ("inner-race", Feature::EnvBpfi)]);
        assert!(c.rule_tables);
        let inner = c.rule_named("inner-race").unwrap();
        assert_eq!((inner.count, inner.window_ms), (2, 600_000));
        assert!(inner.machines.is_empty(), "the override belongs to the rule before it");
        assert_eq!(c.rule_threshold_for(&c.rule, "press-7"), Some(4.5));
        assert_eq!(c.rule_threshold_for(inner, "press-7"), Some(8.0));
        assert_eq!(c.rule_key(inner, "threshold"), "rule[1] (inner-race).threshold");
        // One [rule] stays one rule, with its default name and its keys as before.
        let one = parse("[rule]\nthreshold = 0.7\n").unwrap();
        assert_eq!(one.rules().count(), 1);
        assert_eq!(one.rule.name, "high-vibration");
        assert_eq!(one.rule_key(&one.rule, "threshold"), "rule.threshold");
    }

    #[test]
    fn each_rule_has_the_version_it_would_have_alone() {
        use crate::config::rule_version::{rule_version, rule_versions};
        let c = parse(TWO).unwrap();
        let versions = rule_versions(&c);
        let alone = |table: &str| rule_version(&parse(table).unwrap());
        let severity = alone(
            "[rule]\nname = \"severity\"\nmetric = \"velocity_rms\"\nthreshold = 7.1\n\
             [rule.machines.press-7]\nthreshold = 4.5\n",
        );
        let inner =
            alone("[[rule]]\nname = \"inner-race\"\nmetric = \"env_bpfi\"\nthreshold = 8.0\ncount = 2\nwindow = \"10m\"\n");
        assert_eq!(versions, [("severity".to_owned(), severity), ("inner-race".to_owned(), inner)]);
        assert_ne!(versions[0].1, versions[1].1);
    }

    #[test]
    fn errors_name_the_rule_by_index_and_name() {
        let second = "[[rule]]\nname = \"a\"\n[[rule]]\nname = \"inner-race\"\n";
        refused(&format!("{second}threshold = -1\n"), "rule[1] (inner-race).threshold", ">= 0");
        refused(&format!("{second}threshhold = 1\n"), "rule[1] (inner-race).threshhold", "unknown");
        refused(&format!("{second}count = 0\n"), "rule[1] (inner-race).count", "1 or more");
        refused(
            &format!("{second}[rule.machines.\"press 7\"]\nthreshold = 1\n"),
            "rule[1] (inner-race).machines.press 7",
            "machine name",
        );
        refused("[[rule]]\nname = \"a\"\n[[rule]]\nname = \"a\"\n", "rule[1].name", "unique");
        refused("[[rule]]\nname = \"a\"\n[[rule]]\ncount = 2\n", "rule[1].name", "missing");
        refused("[[rule]]\nname = \"a b\"\n", "rule[0].name", "rule name");
        refused("rule = []\n", "rule", "at least one rule");
        refused("rule = 3\n", "rule", "[rule] table or [[rule]] tables");
        // Checks across sections name the rule too.
        refused(
            "[[rule]]\nname = \"a\"\n[[rule]]\nname = \"zones\"\nmetric = \"velocity_rms\"\n\
             threshold = \"zone-C\"\n[rule.machines.press-7]\n",
            "rule[1] (zones).machines.press-7",
            "iso_group",
        );
    }
}
