//! Composite `[[rule]]` tables: what is accepted, what is refused (naming the rule and key), and
//! the version with its members'.

use super::*;
use crate::config::ConfigError;

const FILE: &str = "plant.toml";

const MEMBERS: &str = "[[rule]]\nname = \"severity\"\nmetric = \"velocity_rms\"\nthreshold = 7.1\n\
                       [[rule]]\nname = \"inner-race\"\nmetric = \"env_bpfi\"\nthreshold = 8.0\n";

/// `text` after the member rules, with a gateway.
fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(&format!("{MEMBERS}{text}\n[gateway]\nid = \"gw\"\n"), FILE)
}

/// The error `text` is refused with must name `key` and say `why`.
#[track_caller]
fn refused(text: &str, key: &str, why: &str) {
    match parse(text) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => {
            let (named, said) = (e.key().map(str::to_owned), e.to_string());
            assert!(named.as_deref() == Some(key) && said.contains(why), "{key} {why:?}: {said}");
        }
    }
}

#[test]
fn a_composite_table_is_a_composite_rule_beside_its_members() {
    let c = parse(
        "[[rule]]\nname = \"both\"\nall_of = [\"severity\", \"inner-race\"]\nwindow = \"10m\"\n\
         [[rule]]\nname = \"then\"\nsequence = [\"inner-race\", \"severity\"]\n",
    )
    .unwrap();
    let measurement: Vec<&str> = c.rules().map(|r| r.name.as_str()).collect();
    assert_eq!(measurement, ["severity", "inner-race"]);
    let both = c.composite_named("both").unwrap();
    assert_eq!(
        both.spec,
        Spec::all_of(vec!["severity".into(), "inner-race".into()], 600_000).unwrap()
    );
    assert_eq!((both.kind(), both.index, both.early), ("all_of", 2, false));
    let then = c.composite_named("then").unwrap();
    assert_eq!(then.spec.combine(), Combine::Sequence);
    assert_eq!(then.spec.window_ms(), 120_000, "the default window");
    // Every rule has a version, the composites after the measurement rules.
    let names: Vec<String> =
        crate::config::rule_version::rule_versions(&c).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["severity", "inner-race", "both", "then"]);
}

#[test]
fn a_measurement_rule_after_a_composite_keeps_its_table_index_in_errors() {
    let text = "[[rule]]\nname = \"both\"\nall_of = [\"severity\", \"inner-race\"]\n\
                [[rule]]\nname = \"late\"\nmetric = \"velocity_rms\"\nthreshold = \"zone-C\"\n\
                [rule.machines.press-7]\n";
    refused(text, "rule[3] (late).machines.press-7", "iso_group");
}

#[test]
fn refusals_name_the_rule_and_the_key() {
    let both = "[[rule]]\nname = \"both\"\n";
    refused(
        &format!("{both}all_of = [\"severity\", \"gone\"]\n"),
        "rule[2] (both).all_of[1]",
        "no measurement rule is named \"gone\"",
    );
    refused(
        &format!("{both}all_of = [\"severity\", \"inner-race\"]\n[[rule]]\nname = \"nest\"\nall_of = [\"severity\", \"both\"]\n"),
        "rule[3] (nest).all_of[1]",
        "composites do not nest",
    );
    refused(
        &format!("{both}all_of = [\"severity\", \"both\"]\n"),
        "rule[2] (both).all_of[1]",
        "composites do not nest",
    );
    refused(
        &format!("{both}all_of = [\"severity\", \"inner-race\"]\nsequence = [\"severity\", \"inner-race\"]\n"),
        "rule[2] (both).sequence",
        "not both",
    );
    refused(&format!("{both}all_of = [\"severity\"]\n"), "rule[2] (both).all_of", "two or more");
    refused(
        &format!("{both}sequence = [\"severity\", \"inner-race\", \"x\"]\n"),
        "rule[2] (both).sequence",
        "two rules",
    );
    refused(
        &format!("{both}all_of = [\"severity\", \"severity\"]\n"),
        "rule[2] (both).all_of[1]",
        "named twice",
    );
    refused(
        &format!("{both}all_of = [\"severity\", \"inner-race\"]\nmetric = \"accel_rms\"\n"),
        "rule[2] (both).metric",
        "reads no measurement",
    );
    refused(
        &format!("{both}all_of = [\"severity\", \"inner-race\"]\nthreshold = 3\n"),
        "rule[2] (both).threshold",
        "leave threshold out",
    );
    refused(
        &format!("{both}all_of = [\"severity\", \"inner-race\"]\nwindow = \"0s\"\n"),
        "rule[2] (both).window",
        "positive",
    );
    refused(
        "[[rule]]\nname = \"severity\"\nall_of = [\"inner-race\", \"x\"]\n",
        "rule[2].name",
        "unique",
    );
    // One [rule] table has no members beside it.
    let one = Config::from_toml("[rule]\nall_of = [\"a\", \"b\"]\n[gateway]\nid = \"gw\"\n", FILE)
        .expect_err("a lone composite");
    assert_eq!(one.key(), Some("rule.all_of"), "{one}");
}

#[test]
fn the_version_is_the_documented_text_and_follows_its_members() {
    let text =
        "[[rule]]\nname = \"both\"\nall_of = [\"severity\", \"inner-race\"]\nwindow = \"10m\"\n";
    let c = parse(text).unwrap();
    let both = c.composite_named("both").unwrap();
    let severity =
        crate::config::rule_version::rule_version_of(&c, c.rule_named("severity").unwrap());
    let inner =
        crate::config::rule_version::rule_version_of(&c, c.rule_named("inner-race").unwrap());
    assert_eq!(
        canonical(&c, both),
        format!(
            "linegate-composite-version=1\nrule.name=both\nrule.all_of=severity,inner-race\n\
             rule.window_ms=600000\nrule.early=false\nmember.severity={severity}\n\
             member.inner-race={inner}\n"
        )
    );
    let version = composite_version(&c, both);
    assert_eq!(version.len(), 16);
    // Formatting does not change it; a member's threshold, the window or the order does.
    let spaced =
        parse(&text.replace("window = \"10m\"", "window   =  \"600s\"  # ten minutes")).unwrap();
    assert_eq!(composite_version(&spaced, spaced.composite_named("both").unwrap()), version);
    let changed = [
        Config::from_toml(
            &format!("{}{text}\n[gateway]\nid = \"gw\"\n", MEMBERS.replace("7.1", "7.2")),
            FILE,
        )
        .unwrap(),
        parse(&text.replace("10m", "11m")).unwrap(),
        parse(&text.replace("[\"severity\", \"inner-race\"]", "[\"inner-race\", \"severity\"]"))
            .unwrap(),
    ];
    for c in &changed {
        assert_ne!(composite_version(c, c.composite_named("both").unwrap()), version);
    }
}
