//! The rule core's parameters from the configuration: the one place the pure `rule` module's
//! [`Params`] meets the configuration layer, so `rule/` imports nothing of `config/`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Config, WatermarkBound};
use crate::rule::watermark::BoundMode;
use crate::rule::Params;

impl Params {
    /// The defaults of docs/contracts.md section 9 (as `config` defines them: one place, no
    /// drift).
    pub fn defaults(gateway: &str) -> Self {
        Params::from_config(&Config::for_replay_defaults(gateway))
    }

    /// The rule's parameters from a validated configuration.
    ///
    /// Thresholds are resolved here: a machine's override, or a zone boundary from its asset
    /// entry (docs/contracts.md section 4). A zone that does not resolve (a machine with no ISO
    /// class, or not in the asset table) becomes `f64::INFINITY`, which no value reaches: that
    /// machine's events never count (`check-config` warns of it, and refuses it for a machine
    /// named in the rule's overrides). Asset tags go to the rule core as they are carried in
    /// alert records.
    pub fn from_config(c: &Config) -> Self {
        let t = &c.time;
        let never = f64::INFINITY;
        let threshold = c.rule.threshold.value().unwrap_or(never);
        let named = c.rule.machines.iter().map(|(m, r)| (m, r.threshold.is_some()));
        let listed = c.machines.keys().map(|m| (m, false));
        let mut thresholds = BTreeMap::new();
        for (m, overridden) in named.chain(listed) {
            let own = c.threshold_for(m).unwrap_or(never);
            if overridden || own != threshold {
                thresholds.insert(m.clone(), own);
            }
        }
        let assets = c
            .machines
            .iter()
            .map(|(m, a)| (m, a.asset_tags()))
            .filter(|(_, tags)| !tags.is_empty())
            .map(|(m, tags)| (m.clone(), Arc::new(tags)))
            .collect();
        Params {
            gateway: c.gateway.id.clone(),
            rule_name: c.rule.name.clone(),
            rule_version: super::rule_version::rule_version(c),
            metric: c.rule.metric,
            unit: c.rule.unit,
            threshold,
            thresholds,
            assets,
            window_ms: c.rule.window_ms,
            count: c.rule.count,
            count_quality: c.rule.count_quality.clone(),
            count_clock: c.rule.count_clock.clone(),
            also_max: c.rule.also_max,
            early: c.rule.early,
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
