//! `rule_version` (docs/contracts.md section 6): a fingerprint of everything that decides one
//! rule, its `[rule]` (or `[[rule]]`) table with its per-machine overrides, `[time]`, and the asset table's settings the
//! rule's measurement depends on, computed from the validated values, so that formatting, key
//! order, comments and spelled-out defaults do not change it and any change of meaning does.
//!
//! The canonical form (version 1 of the form) is UTF-8 text, one `key=value` line each, ending
//! in `\n`, in this order:
//!
//! ```text
//! linegate-rule-version=1
//! rule.name=high-vibration
//! rule.metric=accel_rms
//! rule.unit=g
//! rule.threshold=0.5
//! rule.window_ms=120000
//! rule.count=3
//! rule.count_quality=good,uncertain
//! rule.count_clock=holdover,stepped,synced,unknown,unsynced
//! rule.also_max=100
//! rule.early=false
//! rule.machines.press-7.threshold=0.8
//! time.watermark_bound=5000
//! time.allowed_lateness_ms=600000
//! time.idle_timeout_ms=30000
//! time.max_future_ms=5000
//! ```
//!
//! - numbers: integers in decimal; thresholds and the quantile as Rust's shortest decimal that
//!   reads back to the same `f64` (`0.5`, `0.8`, `1250`), `0` for zero of either sign;
//! - sets (`count_quality`, `count_clock`) sorted by their contract spelling, joined by `,`;
//! - `rule.machines.NAME.threshold` for each machine whose threshold differs from the rule's, by
//!   NAME in byte order (an override equal to the default means nothing and is left out);
//! - `time.watermark_bound` is the fixed bound in ms, or `auto`; only with `auto` follow
//!   `time.auto_bound_min_ms`, `time.auto_bound_max_ms` and `time.auto_bound_quantile` (a fixed
//!   bound ignores them);
//! - `rule.unit` is `1` for a dimensionless feature; a zone threshold is written `zone-C`.
//!
//! Then, only where they matter, lines of the asset table (`[machines.NAME]`), machine by machine
//! in byte order of NAME, each machine's lines in this order:
//!
//! ```text
//! asset.mill-2.velocity_band=2,1000
//! asset.mill-2.threshold=2.8
//! asset.press-7.rpm=1797
//! asset.press-7.bearing=3.5848,5.4152,2.357,0.3983
//! asset.press-7.envelope_band=2000,5000
//! asset.press-7.envelope=fixed
//! ```
//!
//! - for a `velocity_rms` rule: `velocity_band` (low and high in Hz) of each machine whose band
//!   is not the default 10–1000 Hz (at most 600 rpm gives 2–1000 Hz), and `threshold`, the mm/s a
//!   zone threshold resolves to, of each machine (in the table or named in the overrides) whose
//!   threshold is a zone that resolves (one that does not resolve never counts, as for a machine
//!   not in the table);
//! - for an `env_*` rule: of each machine that gives envelope indicators (rpm, bearing and
//!   envelope band all given), `rpm`, `bearing` (the defect orders BPFO, BPFI, BSF, FTF, computed
//!   from the geometry when that is what was given), `envelope_band` (Hz) and `envelope`;
//! - no line for any other rule, so a rule over `accel_*` keeps the version it had before the
//!   asset table existed, whatever the table holds (its tags reach the alert records, not the
//!   decisions).
//!
//! A composite rule (`all_of`, `sequence`) has a version of another form, which includes its
//! members' versions (`src/config/composite.rs`).
//!
//! Each rule of several (`[[rule]]`) has its own version, of the same form with its own table's
//! lines and the asset lines its own metric needs: a rule's version is the one it would have
//! alone in a configuration, so adding or removing another rule changes no version.
//!
//! The version is the xxh3-64 hash of that text as 16 lowercase hex digits. xxh3 and Rust's float
//! formatting are defined bit for bit, so every platform computes the same version (the ARM
//! builds replay the golden traces, whose records carry it, byte for byte).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::assets::{velocity_band, Band};
pub use super::composite::composite_version;
use super::{Config, RuleConfig, Threshold, WatermarkBound};
use crate::event::features::Quantity;

/// The canonical text of `config`'s first rule and time sections (see the module documentation).
pub fn canonical(config: &Config) -> String {
    canonical_of(config, &config.rule)
}

/// The canonical text of `rule` (one of `config`'s rules) and the time section.
pub fn canonical_of(config: &Config, rule: &RuleConfig) -> String {
    let r = rule;
    let t = &config.time;
    let mut out = String::new();
    let mut line = |k: &str, v: &dyn std::fmt::Display| {
        let _ = writeln!(out, "{k}={v}");
    };
    line("linegate-rule-version", &1);
    line("rule.name", &r.name);
    line("rule.metric", &r.metric.as_str());
    line("rule.unit", &r.unit.as_str());
    line("rule.threshold", &threshold(r.threshold));
    line("rule.window_ms", &r.window_ms);
    line("rule.count", &r.count);
    let mut q: Vec<&str> = r.count_quality.iter().map(|q| q.as_str()).collect();
    q.sort_unstable();
    q.dedup();
    line("rule.count_quality", &q.join(","));
    let mut c: Vec<&str> = r.count_clock.iter().map(|c| c.as_str()).collect();
    c.sort_unstable();
    c.dedup();
    line("rule.count_clock", &c.join(","));
    line("rule.also_max", &r.also_max);
    line("rule.early", &r.early);
    for (m, over) in &r.machines {
        if let Some(th) = over.threshold.filter(|&th| threshold(th) != threshold(r.threshold)) {
            line(&format!("rule.machines.{m}.threshold"), &threshold(th));
        }
    }
    match t.watermark_bound {
        WatermarkBound::Fixed(ms) => line("time.watermark_bound", &ms),
        WatermarkBound::Auto => line("time.watermark_bound", &"auto"),
    }
    line("time.allowed_lateness_ms", &t.allowed_lateness_ms);
    line("time.idle_timeout_ms", &t.idle_timeout_ms);
    line("time.max_future_ms", &t.max_future_ms);
    if t.watermark_bound == WatermarkBound::Auto {
        line("time.auto_bound_min_ms", &t.auto_bound_min_ms);
        line("time.auto_bound_max_ms", &t.auto_bound_max_ms);
        line("time.auto_bound_quantile", &number(t.auto_bound_quantile));
    }
    asset_lines(config, r, &mut out);
    out
}

/// The asset table's lines (module documentation) for rule `r`, appended to `out`.
fn asset_lines(config: &Config, r: &RuleConfig, out: &mut String) {
    let velocity = r.metric.quantity() == Quantity::Velocity;
    let envelope = r.metric.is_envelope();
    if !velocity && !envelope {
        return;
    }
    let names: BTreeSet<&String> = config.machines.keys().chain(r.machines.keys()).collect();
    for m in names {
        let mut line = |k: &str, v: &dyn std::fmt::Display| {
            let _ = writeln!(out, "asset.{m}.{k}={v}");
        };
        let asset = config.machines.get(m.as_str());
        if velocity {
            let band = velocity_band(asset);
            if band != Band::ISO {
                line("velocity_band", &format!("{},{}", number(band.low_hz), number(band.high_hz)));
            }
            if matches!(r.threshold_for(m), Threshold::Zone(_)) {
                if let Some(th) = config.rule_threshold_for(r, m) {
                    line("threshold", &number(th));
                }
            }
        }
        let gives = asset.and_then(|a| Some((a, a.rpm?, a.bearing?, a.envelope_band?)));
        let Some((a, rpm, b, band)) = gives.filter(|_| envelope) else { continue };
        let o = b.orders;
        line("rpm", &number(rpm));
        let orders = [o.bpfo, o.bpfi, o.bsf, o.ftf].map(number);
        line("bearing", &orders.join(","));
        line("envelope_band", &format!("{},{}", number(band.low_hz), number(band.high_hz)));
        line("envelope", &a.envelope.as_str());
    }
}

/// A threshold as the canonical text writes it: a number by [`number`], a zone as `zone-C`.
fn threshold(t: Threshold) -> String {
    match t {
        Threshold::Value(v) => number(v),
        Threshold::Zone(_) => t.to_string(),
    }
}

/// A float as its shortest round-trip decimal; both zeros as `0`.
fn number(x: f64) -> String {
    if x == 0.0 {
        "0".to_owned()
    } else {
        format!("{x}")
    }
}

/// The rule version of `config`'s first rule: xxh3-64 of [`canonical`], 16 hex digits.
pub fn rule_version(config: &Config) -> String {
    rule_version_of(config, &config.rule)
}

/// The rule version of `rule`, one of `config`'s rules: xxh3-64 of [`canonical_of`].
pub fn rule_version_of(config: &Config, rule: &RuleConfig) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(canonical_of(config, rule).as_bytes()))
}

/// Every rule's name and version, in configuration order: the measurement rules, then the
/// composite rules (`super::composite`, whose versions include their members').
pub fn rule_versions(config: &Config) -> Vec<(String, String)> {
    let composites =
        config.composites.iter().map(|c| (c.name.clone(), composite_version(config, c)));
    config.rules().map(|r| (r.name.clone(), rule_version_of(config, r))).chain(composites).collect()
}

#[cfg(test)]
mod tests;
