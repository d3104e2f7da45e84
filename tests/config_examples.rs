//! Every example configuration in `config/*.toml` must load.

mod support;

use std::path::{Path, PathBuf};

use linegate::config::{Config, SourceConfig, TraceSource, WatermarkBound};
use support::{fixture, linegate, root, run};

fn config_dir() -> PathBuf {
    fixture("config")
}

fn example_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(config_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_config_loads() {
    let files = example_files();
    assert!(files.len() >= 2, "expected at least 2 example configs, found {files:?}");
    let failures: Vec<String> =
        files.iter().filter_map(|path| Config::load(path).err().map(|e| e.to_string())).collect();
    assert!(failures.is_empty(), "example configs that do not load:\n{}", failures.join("\n"));
}

#[test]
fn demo_config_is_the_contract_example() {
    let c = Config::load(&config_dir().join("demo.toml")).unwrap();
    assert_eq!(c.gateway.id, "gw-01");
    assert_eq!(c.rule.window_ms, 120_000);
    assert_eq!(c.rule.count, 3);
    assert_eq!(c.rule.threshold_for("press-7"), 0.8);
    assert_eq!(c.rule.threshold_for("press-1"), 0.5);
    assert_eq!(c.time.watermark_bound, WatermarkBound::Fixed(5_000));
    assert_eq!(c.time.allowed_lateness_ms, 600_000);
    assert_eq!(
        c.source,
        vec![SourceConfig::Trace(TraceSource {
            path: PathBuf::from("fixtures/traces/cwru.jsonl"),
            speed: 0.0,
        })]
    );
}

#[test]
fn trace_config_uses_the_auto_bound_in_real_time() {
    let c = Config::load(&config_dir().join("trace.toml")).unwrap();
    assert_eq!(c.time.watermark_bound, WatermarkBound::Auto);
    assert_eq!(
        c.source,
        vec![SourceConfig::Trace(TraceSource {
            path: PathBuf::from("fixtures/traces/cwru.jsonl"),
            speed: 1.0,
        })]
    );
}

/// The live examples measure their watermark bound (`auto`): disorder while a sensor sends, its
/// ingest delay as well while it is quiet.
#[test]
fn live_configs_use_the_auto_bound() {
    for name in ["i2c.toml", "spi.toml", "modbus-rtu.toml", "modbus-tcp.toml"] {
        let c = Config::load(&config_dir().join(name)).unwrap();
        assert!(c.configured_sensors().1, "{name} is live");
        assert_eq!(c.time.watermark_bound, WatermarkBound::Auto, "{name}");
    }
}

/// `linegate check-config` accepts every example (from the repository root, where their relative
/// paths point) and names the key and file of a trace that does not exist.
#[test]
fn check_config_accepts_the_examples_and_names_a_missing_trace() {
    let check = |config: &Path| run(linegate(&["check-config"]).arg(config).current_dir(root()));
    for name in ["demo.toml", "trace.toml"] {
        let stdout = check(&config_dir().join(name)).success();
        assert!(stdout.contains("source[0]: trace"), "{name}: {stdout}");
    }
    for path in example_files() {
        let out = check(&path);
        assert!(out.ok(), "{}: {out:?}", path.display());
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[gateway]\nid = \"gw-1\"\n\n[[source]]\nkind = \"trace\"\npath = \"no/such.jsonl\"\n",
    )
    .unwrap();
    let out = check(&bad);
    assert!(!out.ok(), "{out:?}");
    let err = &out.stderr;
    assert!(
        err.contains("bad.toml") && err.contains("source[0].path") && err.contains("no/such.jsonl"),
        "{err}"
    );
}

/// `linegate check-config` shows each machine of the asset table, the mm/s a zone threshold
/// resolves to, and a warning for the machines it does not resolve for; it refuses a sensor that
/// cannot give the rule's measurement, naming the key, the sensor and what to do.
#[test]
fn check_config_shows_assets_zones_and_warnings_and_refuses_a_slow_sensor() {
    let dir = tempfile::tempdir().unwrap();
    let rule = "[gateway]\nid = \"gw-1\"\n\n[rule]\nname = \"severity\"\nmetric = \
                \"velocity_rms\"\nthreshold = \"zone-C\"\n\n[machines.press-7]\nline = \"L3\"\n\
                iso_group = 2\nfoundation = \"rigid\"\nrpm = 1797\n\n[machines.belt-3]\nrpm = 240\n";
    let good = dir.path().join("good.toml");
    std::fs::write(&good, rule).unwrap();
    let stdout = run(linegate(&["check-config"]).arg(&good)).success();
    for want in [
        "rule severity: velocity_rms >= zone-C (ISO 20816-3, per machine)",
        "machine press-7: line L3, ISO 20816-3 group 2 rigid (zones B/C/D from 1.4/2.8/4.5 mm/s)",
        "    threshold zone-C = 2.8 mm/s",
        "machine belt-3: 240 rpm (4 Hz), velocity band 2 Hz–1000 Hz",
        "warning: rule severity: threshold zone-C resolves only for machines with iso_group and \
         foundation in the asset table (press-7 2.8 mm/s); the events of every other machine \
         never count, among them belt-3 (no ISO class)",
    ] {
        assert!(stdout.contains(want), "{want:?} missing in:\n{stdout}");
    }
    let slow = dir.path().join("slow.toml");
    let i2c = "\n[[source]]\nkind = \"i2c\"\ndevice = \"/dev/i2c-1\"\nrate_hz = 1600\n\
               machine = \"press-7\"\nsensor = \"de\"\n";
    std::fs::write(&slow, format!("{rule}{i2c}")).unwrap();
    let out = run(linegate(&["check-config"]).arg(&slow));
    assert!(!out.ok(), "{out:?}");
    assert!(
        out.stderr.contains(
            "slow.toml: key `source[0].rate_hz`: sensor de samples at 1600 Hz: \
                             Nyquist 800 Hz is below the ISO band's 1000 Hz"
        ) && out.stderr.contains("use SPI at 3200 Hz"),
        "{}",
        out.stderr
    );
}

/// The examples of several rules (`[[rule]]`): `check-config` prints one line per rule, each with
/// its version, and the zone each machine's class gives each rule.
#[test]
fn check_config_prints_every_rule_of_the_several_rule_examples() {
    let check = |name: &str| {
        run(linegate(&["check-config"]).arg(config_dir().join(name)).current_dir(root())).success()
    };
    let severity = check("iso-severity.toml");
    for want in [
        "rule severity-warning: velocity_rms >= zone-C (ISO 20816-3, per machine) (3 in 2 min",
        "rule severity-alarm: velocity_rms >= zone-D (ISO 20816-3, per machine) (3 in 2 min",
        "    severity-warning: threshold zone-C = 2.8 mm/s",
        "    severity-alarm: threshold zone-D = 11 mm/s",
    ] {
        assert!(severity.contains(want), "{want:?} missing in:\n{severity}");
    }
    let bearing = check("bearing.toml");
    for want in ["rule inner-race: env_bpfi >= 4 (dimensionless)", "rule outer-race: env_bpfo"] {
        assert!(bearing.contains(want), "{want:?} missing in:\n{bearing}");
    }
    for stdout in [&severity, &bearing] {
        let versions: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("  rule "))
            .filter_map(|l| l.rsplit_once("version ").map(|(_, v)| v))
            .collect();
        assert_eq!(versions.len(), 2, "{stdout}");
        assert!(versions.iter().all(|v| v.len() == 16) && versions[0] != versions[1], "{stdout}");
    }
}

/// The composite example (`bearing-and-severity.toml`): two measurement rules and a composite
/// `all_of` over them, which `check-config` prints with its members, window and version; its
/// version follows its members' (docs/contracts.md section 6).
#[test]
fn check_config_prints_the_composite_example_with_its_members() {
    let path = config_dir().join("bearing-and-severity.toml");
    let c = Config::load(&path).unwrap();
    let measurement: Vec<&str> = c.rules().map(|r| r.name.as_str()).collect();
    assert_eq!(measurement, ["severity-zone-C", "inner-race"]);
    let composite = c.composite_named("bearing-and-severity").expect("the composite rule");
    assert_eq!(composite.kind(), "all_of");
    assert_eq!(composite.spec.members(), ["severity-zone-C", "inner-race"]);
    assert_eq!(composite.spec.window_ms(), 600_000);
    let stdout = run(linegate(&["check-config"]).arg(&path).current_dir(root())).success();
    let version = linegate::config::rule_version::composite_version(&c, composite);
    let want = format!(
        "rule bearing-and-severity: all_of [severity-zone-C, inner-race] within 10 min 0 s, \
         version {version}"
    );
    assert!(stdout.contains(&want), "{want:?} missing in:\n{stdout}");
    let rules = stdout.lines().filter(|l| l.starts_with("  rule ")).count();
    assert_eq!(rules, 3, "{stdout}");
}
