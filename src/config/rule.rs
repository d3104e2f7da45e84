//! The rule core's parameters from the configuration: the one place the pure `rule` module's
//! [`Params`] meets the configuration layer, so `rule/` imports nothing of `config/`.

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
    pub fn from_config(c: &Config) -> Self {
        let t = &c.time;
        Params {
            gateway: c.gateway.id.clone(),
            rule_name: c.rule.name.clone(),
            rule_version: super::rule_version::rule_version(c),
            metric: c.rule.metric,
            unit: c.rule.unit,
            threshold: c.rule.threshold,
            thresholds: c
                .rule
                .machines
                .iter()
                .filter_map(|(m, r)| Some((m.clone(), r.threshold?)))
                .collect(),
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
