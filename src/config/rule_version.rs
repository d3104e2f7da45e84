//! `rule_version` (docs/contracts.md section 6): a fingerprint of everything that decides, the
//! `[rule]` section with its per-machine overrides and `[time]`, computed from the validated
//! values, so that formatting, key order, comments and spelled-out defaults do not change it and
//! any change of meaning does.
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
//!   bound ignores them).
//!
//! The version is the xxh3-64 hash of that text as 16 lowercase hex digits. xxh3 and Rust's float
//! formatting are defined bit for bit, so every platform computes the same version (the ARM
//! builds replay the golden traces, whose records carry it, byte for byte).

use std::fmt::Write as _;

use super::{Config, WatermarkBound};

/// The canonical text of `config`'s rule and time sections (see the module documentation).
pub fn canonical(config: &Config) -> String {
    let r = &config.rule;
    let t = &config.time;
    let mut out = String::new();
    let mut line = |k: &str, v: &dyn std::fmt::Display| {
        let _ = writeln!(out, "{k}={v}");
    };
    line("linegate-rule-version", &1);
    line("rule.name", &r.name);
    line("rule.metric", &r.metric.as_str());
    line("rule.unit", &r.unit.as_str());
    line("rule.threshold", &number(r.threshold));
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
        if let Some(th) = over.threshold.filter(|&th| number(th) != number(r.threshold)) {
            line(&format!("rule.machines.{m}.threshold"), &number(th));
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
    out
}

/// A float as its shortest round-trip decimal; both zeros as `0`.
fn number(x: f64) -> String {
    if x == 0.0 {
        "0".to_owned()
    } else {
        format!("{x}")
    }
}

/// The rule version of `config`: xxh3-64 of [`canonical`], 16 hex digits.
pub fn rule_version(config: &Config) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(canonical(config).as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Config {
        Config::from_toml(text, "test").unwrap()
    }

    const BASE: &str = "[gateway]\nid = \"g\"\n[rule]\nthreshold = 0.5\ncount = 3\n\
                        [rule.machines.press-7]\nthreshold = 0.8\n[time]\nallowed_lateness = \"10m\"\n";

    #[test]
    fn the_canonical_form_is_the_documented_one() {
        let c = load(BASE);
        assert_eq!(
            canonical(&c),
            "linegate-rule-version=1\nrule.name=high-vibration\nrule.metric=accel_rms\nrule.unit=g\n\
             rule.threshold=0.5\nrule.window_ms=120000\nrule.count=3\n\
             rule.count_quality=good,uncertain\n\
             rule.count_clock=holdover,stepped,synced,unknown,unsynced\nrule.also_max=100\n\
             rule.early=false\nrule.machines.press-7.threshold=0.8\ntime.watermark_bound=5000\n\
             time.allowed_lateness_ms=600000\ntime.idle_timeout_ms=30000\ntime.max_future_ms=5000\n"
        );
        // Pinned: a change here changes every alert's version (and the golden fixtures).
        assert_eq!(
            rule_version(&c),
            format!("{:016x}", xxhash_rust::xxh3::xxh3_64(canonical(&c).as_bytes()))
        );
        assert_eq!(rule_version(&c).len(), 16);
    }

    #[test]
    fn formatting_order_and_spelled_out_defaults_keep_the_version() {
        let v = rule_version(&load(BASE));
        let reformatted = "[gateway]\nid = \"other-gateway\"   # not part of the rule\n\
                           [time]\nallowed_lateness = \"600s\"\nidle_timeout = \"30s\"\n\
                           [rule.machines.press-7]\nthreshold = 0.80\n\
                           [rule.machines.press-9]\nthreshold = 0.5   # the default again\n\
                           [rule]\ncount = 3\nthreshold = 5e-1\nname = \"high-vibration\"\n\
                           count_quality = [\"uncertain\", \"good\"]\n\
                           [metrics]\nlisten = \"127.0.0.1:1\"\n";
        assert_eq!(rule_version(&load(reformatted)), v);
    }

    #[test]
    fn every_change_of_meaning_changes_the_version() {
        let v = rule_version(&load(BASE));
        for change in [
            "[rule]\nthreshold = 0.6\n",
            "[rule]\ncount = 4\n",
            "[rule]\nwindow = \"3m\"\n",
            "[rule]\nname = \"other\"\n",
            "[rule]\nalso_max = 10\n",
            "[rule]\nearly = true\n",
            "[rule]\ncount_quality = [\"good\"]\n",
            "[rule]\ncount_clock = [\"synced\"]\n",
            "[rule.machines.press-7]\nthreshold = 0.9\n",
            "[rule.machines.press-8]\nthreshold = 0.9\n",
            "[time]\nwatermark_bound = \"6s\"\n",
            "[time]\nwatermark_bound = \"auto\"\n",
            "[time]\nidle_timeout = \"31s\"\n",
            "[time]\nmax_future = \"6s\"\n",
            "[time]\nallowed_lateness = \"11m\"\n",
        ] {
            let text = merge(BASE, change);
            assert_ne!(rule_version(&load(&text)), v, "{change}");
        }
        let auto = "[time]\nwatermark_bound = \"auto\"\n";
        let a = rule_version(&load(&merge(BASE, auto)));
        let q = rule_version(&load(&merge(
            BASE,
            "[time]\nwatermark_bound = \"auto\"\nauto_bound_quantile = 0.9\n",
        )));
        assert_ne!(a, q, "the quantile matters with auto");
        let fixed_q = merge(BASE, "[time]\nauto_bound_quantile = 0.9\n");
        assert_eq!(rule_version(&load(&fixed_q)), v, "and not with a fixed bound");
    }

    /// `base` with the keys of `change` set (a crude TOML merge: the tables of `change` replace
    /// or add keys of the same tables in `base`).
    fn merge(base: &str, change: &str) -> String {
        let mut doc: toml::Table = base.parse().unwrap();
        let add: toml::Table = change.parse().unwrap();
        fn deep(into: &mut toml::Table, from: toml::Table) {
            for (k, v) in from {
                match (into.get_mut(&k), v) {
                    (Some(toml::Value::Table(a)), toml::Value::Table(b)) => deep(a, b),
                    (_, v) => {
                        into.insert(k, v);
                    }
                }
            }
        }
        deep(&mut doc, add);
        toml::to_string(&doc).unwrap()
    }
}
