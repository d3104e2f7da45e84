//! Refusals across sections, one accepted configuration of each kind, and the warnings.

use super::super::{Config, ConfigError};
use crate::rule::Params;

const FILE: &str = "line3.toml";

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(&format!("[gateway]\nid = \"gw\"\n{text}"), FILE)
}

#[track_caller]
fn refused(text: &str, key: &str, why: &[&str]) -> String {
    let err = parse(text).expect_err(text);
    let msg = err.to_string();
    assert_eq!(err.key(), Some(key), "{msg}");
    assert!(msg.starts_with(FILE), "{msg}");
    for w in why {
        assert!(msg.contains(w), "{w:?} missing in: {msg}");
    }
    msg
}

fn bus(kind: &str, rate: u32, machine: &str) -> String {
    format!(
        "[[source]]\nkind = \"{kind}\"\ndevice = \"/dev/x\"\nrate_hz = {rate}\nmachine = \
         \"{machine}\"\nsensor = \"s1\"\n"
    )
}

fn modbus(unit: &str) -> String {
    format!(
        "[[source]]\nkind = \"modbus-tcp\"\nhost = \"10.0.0.9\"\nmachine = \"press-7\"\n\
         poll_rate = 50\n[[source.block]]\nfunction = \"holding\"\naddress = 0\n\
         [[source.block.channel]]\nsensor = \"p7\"\noffset = 0\ntype = \"f32\"\nunit = \"{unit}\"\n"
    )
}

const VELOCITY: &str = "[rule]\nmetric = \"velocity_rms\"\nthreshold = 4.5\n";
const INNER_RACE: &str = "[rule]\nname = \"inner-race\"\nmetric = \"env_bpfi\"\nthreshold = 8.0\n";
const PRESS_7: &str = "[machines.press-7]\niso_group = 2\nfoundation = \"rigid\"\nrpm = 1797\n\
                       bearing = { bpfo = 3.5848, bpfi = 5.4152, bsf = 2.357, ftf = 0.3983 }\n\
                       envelope_band = [\"500Hz\", \"1500Hz\"]\n";

#[test]
fn a_velocity_rule_needs_sensors_fast_enough_for_the_iso_band() {
    let msg = refused(
        &format!("{VELOCITY}{}", bus("i2c", 1600, "press-7")),
        "source[0].rate_hz",
        &["sensor s1 samples at 1600 Hz: Nyquist 800 Hz is below the ISO band's 1000 Hz"],
    );
    assert!(msg.ends_with("use SPI at 3200 Hz"), "{msg}");
    refused(
        &format!("{VELOCITY}{}", bus("spi", 1600, "press-7")),
        "source[0].rate_hz",
        &["set rate_hz = 3200"],
    );
    refused(
        &format!("{VELOCITY}{}", modbus("g")),
        "source[0].poll_rate",
        &["sensor p7 samples at 50 Hz", "unit = \"mm/s\""],
    );
    // Accepted: SPI at 3200 Hz (also for a slow machine, whose band is 2-1000 Hz), a Modbus
    // channel that measures velocity itself, and an acceleration rule on I2C.
    let slow = "[machines.press-7]\nrpm = 300\n";
    parse(&format!("{VELOCITY}{slow}{}", bus("spi", 3200, "press-7"))).unwrap();
    parse(&format!("{VELOCITY}{}", modbus("mm/s"))).unwrap();
    parse(&bus("i2c", 1600, "press-7")).unwrap();
}

#[test]
fn an_envelope_rule_needs_rpm_bearing_and_band_for_its_machines() {
    let spi = bus("spi", 3200, "press-7");
    refused(
        &format!("{INNER_RACE}{spi}"),
        "source[0].machine",
        &["rule inner-race reads env_bpfi", "missing: rpm, bearing, envelope_band"],
    );
    refused(
        &format!("{INNER_RACE}{spi}[machines.press-7]\nrpm = 1797\n"),
        "machines.press-7.bearing",
        &["missing: bearing, envelope_band"],
    );
    refused(
        &format!("{INNER_RACE}[rule.machines.mill-2]\nthreshold = 9.0\n"),
        "rule.machines.mill-2",
        &["machine mill-2", "[machines.mill-2]"],
    );
    let c = parse(&format!("{INNER_RACE}{spi}{PRESS_7}")).unwrap();
    assert_eq!(c.rule.unit.as_str(), "1");
    assert!(c.warnings()[0].contains("(press-7)"), "{:?}", c.warnings());
}

#[test]
fn an_envelope_band_must_fit_under_the_sensors_nyquist() {
    let wide = PRESS_7.replace("[\"500Hz\", \"1500Hz\"]", "[\"2kHz\", \"5kHz\"]");
    refused(
        &format!("{}{wide}", bus("spi", 3200, "press-7")),
        "machines.press-7.envelope_band",
        &["top 5000 Hz is above the Nyquist frequency 1600 Hz of sensor s1", "source[0].rate_hz"],
    );
    // Another machine's sensor is no concern of this band; a trace declares no rate.
    parse(&format!("{}{wide}", bus("spi", 3200, "mill-2"))).unwrap();
    parse(&format!("[[source]]\nkind = \"trace\"\npath = \"t.jsonl\"\n{wide}")).unwrap();
}

#[test]
fn zone_thresholds_are_for_velocity_and_resolve_per_machine() {
    refused(
        "[rule]\nthreshold = \"zone-C\"\n",
        "rule.threshold",
        &["zone-C is an ISO 20816-3 velocity boundary", "\"accel_rms\""],
    );
    refused(
        "[rule.machines.press-7]\nthreshold = \"zone-D\"\n",
        "rule.machines.press-7.threshold",
        &["velocity_rms"],
    );
    refused("[rule]\nthreshold = \"zone-A\"\n", "rule.threshold", &["zone A"]);
    refused("[rule]\nthreshold = \"high\"\n", "rule.threshold", &["\"high\"", "zone-B"]);
    refused("[rule]\nthreshold = true\n", "rule.threshold", &["boolean"]);
    let zone = "[rule]\nmetric = \"velocity_rms\"\nthreshold = \"zone-C\"\n";
    refused(
        &format!("{zone}[rule.machines.mill-2]\n"),
        "rule.machines.mill-2",
        &["zone-C", "add [machines.mill-2] with iso_group and foundation"],
    );
    refused(
        &format!("{zone}[rule.machines.mill-2]\nthreshold = \"zone-D\"\n[machines.mill-2]\nline = \"L\"\n"),
        "rule.machines.mill-2.threshold",
        &["give machines.mill-2.iso_group and machines.mill-2.foundation"],
    );
    let flexible = "[machines.fan-1]\niso_group = 1\nfoundation = \"flexible\"\n[machines.belt]\n";
    let text = format!(
        "{zone}{PRESS_7}{flexible}[rule.machines.press-7]\nthreshold = \"zone-D\"\n\
         [rule.machines.belt]\nthreshold = 2.0\n"
    );
    let c = parse(&text).unwrap();
    assert_eq!(c.threshold_for("press-7"), Some(4.5)); // group 2 rigid, zone D
    assert_eq!(c.threshold_for("fan-1"), Some(7.1)); // group 1 flexible, zone C
    assert_eq!(c.threshold_for("belt"), Some(2.0)); // its own number
    assert_eq!(c.threshold_for("other"), None);
    let p = Params::from_config(&c);
    assert_eq!(p.rule().threshold, f64::INFINITY, "a machine outside the table never counts");
    assert_eq!(p.rule().thresholds["press-7"], 4.5);
    assert_eq!(p.rule().thresholds["fan-1"], 7.1);
    assert_eq!(p.rule().thresholds["belt"], 2.0);
    assert_eq!(p.rule().thresholds.len(), 3);
    let w = c.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("threshold zone-C resolves only for machines"), "{}", w[0]);
    assert!(w[0].contains("(fan-1 7.1 mm/s)"), "{}", w[0]);
    assert!(w[0].contains("every other machine never count"), "{}", w[0]);
}

#[test]
fn numeric_thresholds_and_accel_rules_give_no_warning_and_the_old_params() {
    let c = parse(&format!("{PRESS_7}[rule.machines.press-7]\nthreshold = 0.8\n")).unwrap();
    assert!(c.warnings().is_empty());
    let p = Params::from_config(&c);
    assert_eq!(p.rule().threshold, 0.5);
    assert_eq!(p.rule().thresholds.len(), 1);
    assert_eq!(p.rule().thresholds["press-7"], 0.8);
    let tags = serde_json::to_string(&*p.assets["press-7"]).unwrap();
    assert_eq!(tags, r#"{"iso_group":2,"foundation":"rigid"}"#);
}

#[test]
fn dimensionless_features_take_no_unit() {
    refused(
        "[rule]\nmetric = \"kurtosis\"\nunit = \"g\"\n",
        "rule.unit",
        &["\"kurtosis\" is dimensionless: leave unit out (or write unit = \"1\")"],
    );
    refused(
        "[rule]\nmetric = \"crest_factor\"\nunit = \"mm/s\"\n",
        "rule.unit",
        &["dimensionless"],
    );
    refused("[rule]\nmetric = \"velocity_rms\"\nunit = \"1\"\n", "rule.unit", &["\"1\""]);
    for text in ["[rule]\nmetric = \"kurtosis\"\n", "[rule]\nmetric = \"kurtosis\"\nunit = \"1\"\n"]
    {
        assert_eq!(parse(text).unwrap().rule.unit.as_str(), "1");
    }
    refused("[rule]\nmetric = \"env_bpf\"\n", "rule.metric", &["env_bpf", "env_bpfi"]);
}
