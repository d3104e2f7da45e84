//! The rule core's parameters from the configuration: the one place the pure `rule` module's
//! [`Params`] meets the configuration layer, so `rule/` imports nothing of `config/`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{CompositeConfig, Config, RuleConfig, WatermarkBound};
use crate::rule::watermark::BoundMode;
use crate::rule::{CompositeParams, Params, RuleParams};

impl Params {
    /// The defaults of docs/contracts.md section 9 (as `config` defines them: one place, no
    /// drift).
    pub fn defaults(gateway: &str) -> Self {
        Params::from_config(&Config::for_replay_defaults(gateway))
    }

    /// The rules' parameters from a validated configuration.
    ///
    /// Thresholds are resolved here: a machine's override, or a zone boundary from its asset
    /// entry (docs/contracts.md section 4). A zone that does not resolve (a machine with no ISO
    /// class, or not in the asset table) becomes `f64::INFINITY`, which no value reaches: that
    /// machine's events never count (`check-config` warns of it, and refuses it for a machine
    /// named in the rule's overrides). Asset tags go to the rule core as they are carried in
    /// alert records.
    pub fn from_config(c: &Config) -> Self {
        let t = &c.time;
        let assets = c
            .machines
            .iter()
            .map(|(m, a)| (m, a.asset_tags()))
            .filter(|(_, tags)| !tags.is_empty())
            .map(|(m, tags)| (m.clone(), Arc::new(tags)))
            .collect();
        Params {
            gateway: c.gateway.id.clone(),
            rules: c.rules().map(|r| rule_params(c, r)).collect(),
            composites: c.composites.iter().map(|k| composite_params(c, k)).collect(),
            assets,
            bound: match t.watermark_bound {
                WatermarkBound::Fixed(ms) => BoundMode::Fixed(ms),
                WatermarkBound::Auto => BoundMode::Auto {
                    min_ms: t.auto_bound_min_ms,
                    max_ms: t.auto_bound_max_ms,
                    quantile: t.auto_bound_quantile,
                },
            },
            allowed_lateness_ms: t.allowed_lateness_ms,
            idle_timeout_ms: t.idle_timeout_ms,
            max_future_ms: t.max_future_ms,
        }
    }
}

/// One composite rule's parameters: its members by their index among the rules.
fn composite_params(c: &Config, k: &CompositeConfig) -> CompositeParams {
    let index = |m: &String| c.rules().position(|r| r.name == *m).unwrap_or(usize::MAX);
    CompositeParams {
        name: k.name.clone(),
        version: super::rule_version::composite_version(c, k),
        spec: k.spec.clone(),
        members: k.spec.members().iter().map(index).collect(),
        early: k.early,
    }
}

/// One rule's parameters, its thresholds resolved per machine.
fn rule_params(c: &Config, r: &RuleConfig) -> RuleParams {
    let never = f64::INFINITY;
    let threshold = r.threshold.value().unwrap_or(never);
    let named = r.machines.iter().map(|(m, o)| (m, o.threshold.is_some()));
    let listed = c.machines.keys().map(|m| (m, false));
    let mut thresholds = BTreeMap::new();
    for (m, overridden) in named.chain(listed) {
        let own = c.rule_threshold_for(r, m).unwrap_or(never);
        if overridden || own != threshold {
            thresholds.insert(m.clone(), own);
        }
    }
    RuleParams {
        name: r.name.clone(),
        version: super::rule_version::rule_version_of(c, r),
        metric: r.metric,
        unit: r.unit,
        threshold,
        thresholds,
        window_ms: r.window_ms,
        count: r.count,
        count_quality: r.count_quality.clone(),
        count_clock: r.count_clock.clone(),
        also_max: r.also_max,
        early: r.early,
    }
}
