//! The canonical text and the version: the documented form, what keeps it, what changes it.

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

const PRESS_7: &str = "[machines.press-7]\nline = \"L3\"\niso_group = 2\nfoundation = \"rigid\"\n\
                       rpm = 1797\nbearing = { bpfo = 3.5848, bpfi = 5.4152, bsf = 2.357, ftf = \
                       0.3983 }\nenvelope_band = [\"2kHz\", \"5kHz\"]\ntags = { cell = \"n\" }\n";

#[test]
fn an_acceleration_rule_keeps_its_text_whatever_the_asset_table_holds() {
    let plain = canonical(&load(BASE));
    for table in [PRESS_7, "[machines.mill-2]\nrpm = 300\n[machines.fan]\n"] {
        assert_eq!(canonical(&load(&format!("{BASE}{table}"))), plain, "{table}");
    }
    // Nor does a velocity rule over machines with the default band and numeric thresholds.
    let velocity = "[rule]\nmetric = \"velocity_rms\"\nthreshold = 4.5\n";
    let without = canonical(&load(&merge(BASE, velocity)));
    assert!(!without.contains("asset."), "{without}");
    let with_table = format!("{}{PRESS_7}", merge(BASE, velocity));
    assert_eq!(canonical(&load(&with_table)), without);
}

#[test]
fn a_velocity_rule_covers_bands_and_resolved_zones() {
    let rule = "[rule]\nmetric = \"velocity_rms\"\nthreshold = \"zone-C\"\n";
    let base = format!("{}{PRESS_7}[machines.mill-2]\nrpm = 300\n", merge(BASE, rule));
    // press-7's override of 0.8 mm/s is a number; mill-2 has no ISO class: nothing resolves
    // but the band of the slow mill.
    let text = canonical(&load(&base));
    assert!(text.contains("rule.unit=mm/s\nrule.threshold=zone-C\n"), "{text}");
    assert!(
        text.ends_with("time.max_future_ms=5000\nasset.mill-2.velocity_band=2,1000\n"),
        "{text}"
    );
    let zoned = merge(&base, "[rule.machines.press-7]\nthreshold = \"zone-D\"\n");
    let text = canonical(&load(&zoned));
    assert!(text.contains("rule.machines.press-7.threshold=zone-D\n"), "{text}");
    assert!(
        text.ends_with("asset.mill-2.velocity_band=2,1000\nasset.press-7.threshold=4.5\n"),
        "{text}"
    );
    let v = rule_version(&load(&zoned));
    for change in [
        "[machines.press-7]\nfoundation = \"flexible\"\n",
        "[machines.press-7]\niso_group = 1\n",
        "[machines.mill-2]\nrpm = 900\n",
        "[machines.mill-2]\niso_group = 2\nfoundation = \"rigid\"\n",
    ] {
        assert_ne!(rule_version(&load(&merge(&zoned, change))), v, "{change}");
    }
    for same in [
        "[machines.press-7]\nline = \"L4\"\ntags = { cell = \"s\" }\n",
        "[machines.press-7]\nrpm = 1500\nenvelope = \"kurtogram\"\n",
        "[machines.mill-2]\nrpm = 450\n",
    ] {
        assert_eq!(rule_version(&load(&merge(&zoned, same))), v, "{same}");
    }
}

#[test]
fn an_envelope_rule_covers_speed_bearing_band_and_method() {
    let rule = "[rule]\nmetric = \"env_bpfi\"\nthreshold = 8.0\n";
    let base = format!("{}{PRESS_7}[machines.mill-2]\nrpm = 300\n", merge(BASE, rule));
    let text = canonical(&load(&base));
    assert!(text.contains("rule.unit=1\nrule.threshold=8\n"), "{text}");
    assert!(
        text.ends_with(
            "asset.press-7.rpm=1797\nasset.press-7.bearing=3.5848,5.4152,2.357,0.3983\n\
             asset.press-7.envelope_band=2000,5000\nasset.press-7.envelope=fixed\n"
        ),
        "{text}"
    );
    let v = rule_version(&load(&base));
    for change in [
        "[machines.press-7]\nrpm = 1796\n",
        "[machines.press-7]\nbearing = { bpfo = 3.5, bpfi = 5.4152, bsf = 2.357, ftf = 0.3983 }\n",
        "[machines.press-7]\nenvelope_band = [\"2kHz\", \"4kHz\"]\n",
        "[machines.press-7]\nenvelope = \"whitened\"\n",
        "[machines.mill-2]\nbearing = { balls = 9, ball_diameter = 7.94, pitch_diameter = \
         39.04 }\nenvelope_band = [500, 1500]\n",
    ] {
        assert_ne!(rule_version(&load(&merge(&base, change))), v, "{change}");
    }
    for same in
        ["[machines.press-7]\niso_group = 1\nline = \"L9\"\n", "[machines.mill-2]\nrpm = 301\n"]
    {
        assert_eq!(rule_version(&load(&merge(&base, same))), v, "{same}");
    }
}
