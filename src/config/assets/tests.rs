//! The asset table: keys, validation, bearing orders, ISO zones, velocity bands, tags.

use super::super::{Config, ConfigError};
use super::*;

const FILE: &str = "plant.toml";

fn parse(machines: &str) -> std::result::Result<Config, ConfigError> {
    Config::from_toml(&format!("[gateway]\nid = \"gw\"\n{machines}"), FILE)
}

/// The asset of `press-7` from `body` (the lines of its table).
fn asset(body: &str) -> MachineAsset {
    let c = parse(&format!("[machines.press-7]\n{body}")).unwrap();
    c.machines["press-7"].clone()
}

#[track_caller]
fn refused(body: &str, key: &str, why: &[&str]) {
    let err = parse(&format!("[machines.press-7]\n{body}")).expect_err(body);
    let msg = err.to_string();
    assert_eq!(err.key(), Some(key), "{msg}");
    assert!(msg.starts_with(FILE), "{msg}");
    for w in why {
        assert!(msg.contains(w), "{w:?} missing in: {msg}");
    }
}

#[test]
fn every_key_is_read() {
    let a = asset(
        "line = \"L3\"\niso_group = 2\nfoundation = \"rigid\"\nrpm = 1797\n\
         bearing = { bpfo = 3.5848, bpfi = 5.4152, bsf = 2.357, ftf = 0.3983 }\n\
         envelope_band = [\"2kHz\", 5000]\nenvelope = \"kurtogram\"\n\
         tags = { cell = \"north\", owner = \"maint-2\" }\n",
    );
    assert_eq!(a.line.as_deref(), Some("L3"));
    assert_eq!(a.iso, Some(IsoClass { group: 2, foundation: Foundation::Rigid }));
    assert_eq!(a.rpm, Some(1797.0));
    assert_eq!(a.shaft_hz(), Some(29.95));
    let o = a.bearing.unwrap().orders;
    assert_eq!((o.bpfo, o.bpfi, o.bsf, o.ftf), (3.5848, 5.4152, 2.357, 0.3983));
    assert_eq!(a.envelope_band, Some(Band { low_hz: 2000.0, high_hz: 5000.0 }));
    assert_eq!(a.envelope, EnvelopeMethod::Kurtogram);
    assert_eq!(a.tags.len(), 2);
    assert!(a.envelope_missing().is_empty());
    let s = a.summary();
    for part in ["line L3", "group 2 rigid", "1.4/2.8/4.5 mm/s", "29.95 Hz", "BPFI 5.4152"] {
        assert!(s.contains(part), "{part:?} missing in {s}");
    }
}

#[test]
fn an_empty_entry_is_a_machine_without_data() {
    let a = asset("");
    assert_eq!(a, MachineAsset::default());
    assert_eq!(a.envelope, EnvelopeMethod::Fixed);
    assert_eq!(a.envelope_missing(), ["rpm", "bearing", "envelope_band"]);
    assert!(a.asset_tags().is_empty());
}

#[test]
fn the_skf_6205_orders_follow_from_its_geometry() {
    let a = asset("bearing = { balls = 9, ball_diameter = 7.94, pitch_diameter = 39.04 }");
    let b = a.bearing.unwrap();
    let o = b.orders;
    // The 6205's published orders, to the precision they are published with.
    for (got, want) in [(o.bpfo, 3.585), (o.bpfi, 5.415), (o.bsf, 2.357), (o.ftf, 0.398)] {
        assert!((got - want).abs() < 5e-4, "{got} vs {want}");
    }
    // Exactly the formulas: r = d/D cos(0).
    let r = 7.94 / 39.04;
    assert_eq!(o.bpfo, 4.5 * (1.0 - r));
    assert_eq!(o.bpfi, 4.5 * (1.0 + r));
    assert_eq!(o.bsf, 39.04 / (2.0 * 7.94) * (1.0 - r * r));
    assert_eq!(o.ftf, (1.0 - r) / 2.0);
    assert_eq!(o.bpfo + o.bpfi, 9.0);
    let g = b.geometry.unwrap();
    assert_eq!((g.balls, g.contact_angle_deg), (9, 0.0));
    // A contact angle shortens the effective ratio.
    let angled = asset(
        "bearing = { balls = 9, ball_diameter = 7.94, pitch_diameter = 39.04, contact_angle = 15 }",
    );
    assert!(angled.bearing.unwrap().orders.bpfo > o.bpfo);
}

#[test]
fn iso_zones_and_their_boundaries() {
    let class = |group, foundation| IsoClass { group, foundation };
    assert_eq!(class(1, Foundation::Rigid).boundaries(), [2.3, 4.5, 7.1]);
    assert_eq!(class(1, Foundation::Flexible).boundaries(), [3.5, 7.1, 11.0]);
    assert_eq!(class(2, Foundation::Rigid).boundaries(), [1.4, 2.8, 4.5]);
    assert_eq!(class(2, Foundation::Flexible).boundaries(), [2.3, 4.5, 7.1]);
    let c = class(2, Foundation::Rigid);
    assert_eq!(c.zone(0.0), Zone::A);
    assert_eq!(c.zone(1.39), Zone::A);
    assert_eq!(c.zone(1.4), Zone::B);
    assert_eq!(c.zone(2.8), Zone::C);
    assert_eq!(c.zone(4.49), Zone::C);
    assert_eq!(c.zone(4.5), Zone::D);
    assert_eq!(c.zone(99.0), Zone::D);
    assert_eq!((c.boundary(Zone::A), c.boundary(Zone::C)), (0.0, 2.8));
}

#[test]
fn slow_machines_have_the_wider_velocity_band() {
    assert_eq!(velocity_band(None), Band::ISO);
    assert_eq!(velocity_band(Some(&asset(""))), Band::ISO);
    assert_eq!(velocity_band(Some(&asset("rpm = 1797"))), Band { low_hz: 10.0, high_hz: 1000.0 });
    assert_eq!(velocity_band(Some(&asset("rpm = 600"))), Band { low_hz: 2.0, high_hz: 1000.0 });
    assert_eq!(velocity_band(Some(&asset("rpm = 601.5"))), Band::ISO);
}

#[test]
fn asset_tags_in_their_order() {
    let a = asset(
        "tags = { zone = \"z\", area = \"a\" }\nfoundation = \"flexible\"\niso_group = 1\n\
         line = \"L3\"\n",
    );
    let json = serde_json::to_string(&a.asset_tags()).unwrap();
    assert_eq!(
        json,
        r#"{"line":"L3","iso_group":1,"foundation":"flexible","area":"a","zone":"z"}"#
    );
    let back: AssetTags = serde_json::from_str(&json).unwrap();
    assert_eq!(back, a.asset_tags());
}

#[test]
fn unknown_keys_name_the_key_and_the_file() {
    refused("colour = \"red\"\n", "machines.press-7.colour", &["unknown field `colour`", FILE]);
    refused(
        "bearing = { bpfo = 1, bpfi = 2, bsf = 3, ftf = 0.4, cage = 1 }\n",
        "machines.press-7.bearing.cage",
        &["unknown field"],
    );
    let err = parse("[machines.\"press 7\"]\nline = \"L\"\n").unwrap_err();
    assert_eq!(err.key(), Some("machines.press 7"));
    assert!(err.to_string().contains("[A-Za-z0-9_.-]"), "{err}");
}

#[test]
fn impossible_values_are_refused() {
    refused("line = \"\"\n", "machines.press-7.line", &["empty"]);
    refused("iso_group = 3\nfoundation = \"rigid\"\n", "machines.press-7.iso_group", &["1 ", "2 "]);
    refused("iso_group = 2\n", "machines.press-7.foundation", &["missing", "rigid"]);
    refused("foundation = \"rigid\"\n", "machines.press-7.iso_group", &["missing"]);
    refused(
        "iso_group = 2\nfoundation = \"concrete\"\n",
        "machines.press-7.foundation",
        &["\"concrete\"", "\"flexible\""],
    );
    refused("rpm = 0\n", "machines.press-7.rpm", &["> 0"]);
    refused("rpm = -1500.0\n", "machines.press-7.rpm", &["> 0"]);
    refused("rpm = \"fast\"\n", "machines.press-7.rpm", &["invalid type"]);
    refused(
        "envelope = \"best\"\n",
        "machines.press-7.envelope",
        &["unknown variant", "kurtogram"],
    );
    refused("tags = { line = \"L4\" }\n", "machines.press-7.tags.line", &["asset key"]);
    refused("tags = { \"a b\" = \"x\" }\n", "machines.press-7.tags.a b", &["tag name"]);
    refused("tags = { a = 1 }\n", "machines.press-7.tags.a", &["invalid type"]);
}

#[test]
fn bearings_come_as_orders_or_geometry() {
    refused("bearing = {}\n", "machines.press-7.bearing", &["empty"]);
    refused("bearing = { bpfo = 3.5 }\n", "machines.press-7.bearing.bpfi", &["all four"]);
    refused(
        "bearing = { bpfo = 3.5, bpfi = 5.4, bsf = 2.3, ftf = 0 }\n",
        "machines.press-7.bearing.ftf",
        &["> 0"],
    );
    refused("bearing = { bpfo = 3.5, balls = 9 }\n", "machines.press-7.bearing", &["not both"]);
    refused("bearing = { balls = 9 }\n", "machines.press-7.bearing.ball_diameter", &["missing"]);
    refused(
        "bearing = { balls = 0, ball_diameter = 1, pitch_diameter = 5 }\n",
        "machines.press-7.bearing.balls",
        &[">= 1"],
    );
    refused(
        "bearing = { balls = 9, ball_diameter = 40, pitch_diameter = 39 }\n",
        "machines.press-7.bearing.ball_diameter",
        &["smaller than pitch_diameter"],
    );
    refused(
        "bearing = { balls = 9, ball_diameter = 7, pitch_diameter = 39, contact_angle = 90 }\n",
        "machines.press-7.bearing.contact_angle",
        &["degrees"],
    );
}

#[test]
fn envelope_bands_are_two_frequencies_low_then_high() {
    refused("envelope_band = [\"2kHz\"]\n", "machines.press-7.envelope_band", &["two frequencies"]);
    refused(
        "envelope_band = [\"5kHz\", \"2kHz\"]\n",
        "machines.press-7.envelope_band",
        &["low end (5000 Hz)", "high end (2000 Hz)"],
    );
    refused(
        "envelope_band = [\"2 kilohertz\", \"5kHz\"]\n",
        "machines.press-7.envelope_band[0]",
        &["\"2 kilohertz\""],
    );
    refused("envelope_band = [0, 500]\n", "machines.press-7.envelope_band[0]", &["> 0"]);
    let a = asset("envelope_band = [812.5, \"1.5 kHz\"]\n");
    assert_eq!(a.envelope_band, Some(Band { low_hz: 812.5, high_hz: 1500.0 }));
}
