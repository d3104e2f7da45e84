use super::*;

/// docs/contracts.md section 9, verbatim.
const CONTRACT_EXAMPLE: &str = r#"
[gateway]
id = "gw-01"

[rule]
name = "high-vibration"
metric = "accel_rms"
unit = "g"
threshold = 0.5
window = "2m"
count = 3
count_quality = ["good", "uncertain"]
count_clock = ["synced", "holdover", "unknown", "unsynced", "stepped"]
also_max = 100
early = false

[rule.machines.press-7]      # per-machine overrides
threshold = 0.8

# more rules: [[rule]] tables instead of the one [rule] (section 4)
# [[rule]]
# name = "severity-zone-C"
# metric = "velocity_rms"     # mm/s, computed from raw samples (section 12)
# threshold = "zone-C"        # per machine, from its asset entry
# [[rule]]
# name = "inner-race"
# metric = "env_bpfi"
# threshold = 8.0
# [[rule]]
# name = "bearing-and-severity"
# all_of = ["severity-zone-C", "inner-race"]
# window = "10m"

[machines.press-7]           # the asset table: reference data joined to every event (section 12)
line = "L3"
iso_group = 2                # ISO 20816-3 group 1 (large) or 2 (medium)
foundation = "rigid"         # or "flexible"
rpm = 1797                   # shaft speed (or a sensor channel that measures it)
bearing = { bpfo = 3.5848, bpfi = 5.4152, bsf = 2.357, ftf = 0.3983 }   # defect orders (x shaft speed)
envelope_band = ["2kHz", "5kHz"]

[time]
watermark_bound = "5s"       # or "auto"
allowed_lateness = "10m"
idle_timeout = "30s"
max_future = "5s"

[store]
path = "/var/lib/linegate"   # the sled database and nothing else
history = "24h"              # accepted input kept for export / what-if (section 11)

[control]
socket = "/run/linegate/control.sock"

[mqtt]
host = "127.0.0.1"
port = 1883
prefix = "linegate"

[metrics]
listen = "127.0.0.1:9898"    # Prometheus text at /metrics

[[source]]
kind = "trace"               # also "i2c", "spi", "modbus-rtu", "modbus-tcp": their keys are yours
path = "fixtures/traces/demo.jsonl"
speed = 0.0                  # 0: as fast as the pipeline takes it; 1.0: real time by `at`
"#;

const FILE: &str = "site-a.toml";
const MINIMAL: &str = "[gateway]\nid = \"gw-01\"\n";

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, FILE)
}

/// A minimal valid config with `extra` appended.
fn with(extra: &str) -> Result<Config, ConfigError> {
    parse(&format!("{MINIMAL}{extra}"))
}

/// Asserts `result` is an error about `key` whose Display names the file, the key and contains
/// every fragment of `why`. Returns the message.
#[track_caller]
fn assert_err(result: Result<Config, ConfigError>, key: &str, why: &[&str]) -> String {
    let err = result.expect_err("expected a config error");
    let msg = err.to_string();
    assert_eq!(err.key(), Some(key), "wrong key in: {msg}");
    assert_eq!(err.origin(), FILE);
    assert!(msg.contains(FILE), "file missing in: {msg}");
    assert!(msg.contains(&format!("`{key}`")), "key path missing in: {msg}");
    for w in why {
        assert!(msg.contains(w), "{w:?} missing in: {msg}");
    }
    msg
}

#[test]
fn contract_example_parses_exactly() {
    let c = parse(CONTRACT_EXAMPLE).unwrap();
    let mut machines = BTreeMap::new();
    machines.insert("press-7".to_owned(), MachineRule { threshold: Some(Threshold::Value(0.8)) });
    let orders = assets::DefectOrders { bpfo: 3.5848, bpfi: 5.4152, bsf: 2.357, ftf: 0.3983 };
    let press_7 = MachineAsset {
        line: Some("L3".into()),
        iso: Some(assets::IsoClass { group: 2, foundation: assets::Foundation::Rigid }),
        rpm: Some(1797.0),
        bearing: Some(assets::Bearing { orders, geometry: None }),
        envelope_band: Some(assets::Band { low_hz: 2000.0, high_hz: 5000.0 }),
        envelope: assets::EnvelopeMethod::Fixed,
        tags: BTreeMap::new(),
    };
    let expected = Config {
        gateway: GatewayConfig { id: "gw-01".into() },
        rule: RuleConfig {
            name: "high-vibration".into(),
            metric: Feature::AccelRms,
            unit: MeasureUnit::G,
            threshold: Threshold::Value(0.5),
            window_ms: 120_000,
            count: 3,
            count_quality: vec![Quality::Good, Quality::Uncertain],
            count_clock: ClockState::ALL.to_vec(),
            also_max: 100,
            early: false,
            machines,
        },
        more_rules: Vec::new(),
        rule_tables: false,
        composites: Vec::new(),
        time: TimeConfig {
            watermark_bound: WatermarkBound::Fixed(5_000),
            allowed_lateness_ms: 600_000,
            idle_timeout_ms: 30_000,
            max_future_ms: 5_000,
            auto_bound_min_ms: 1_000,
            auto_bound_max_ms: 60_000,
            auto_bound_quantile: 0.99,
        },
        store: StoreConfig { path: PathBuf::from("/var/lib/linegate"), ..StoreConfig::default() },
        mqtt: MqttConfig {
            host: "127.0.0.1".into(),
            port: 1883,
            prefix: "linegate".into(),
            forward: Default::default(),
        },
        metrics: MetricsConfig { listen: "127.0.0.1:9898".into(), trend_points: 240 },
        control: ControlConfig { socket: Some(PathBuf::from("/run/linegate/control.sock")) },
        source: vec![SourceConfig::Trace(TraceSource {
            path: PathBuf::from("fixtures/traces/demo.jsonl"),
            speed: 0.0,
        })],
        machines: BTreeMap::from([("press-7".to_owned(), press_7)]),
        sparkplug: None,
    };
    assert_eq!(c, expected);
    assert_eq!(c.rule.threshold_for("press-7"), 0.8);
    assert_eq!(c.rule.threshold_for("press-8"), 0.5);
}

#[test]
fn defaults_fill_in_and_match_for_replay_defaults() {
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c, Config::for_replay_defaults("gw-01"));
    assert_eq!(c.rule.name, "high-vibration");
    assert_eq!(c.rule.window_ms, 120_000);
    assert_eq!(c.rule.count, 3);
    assert_eq!(c.rule.threshold, 0.5);
    assert_eq!(c.rule.count_quality, vec![Quality::Good, Quality::Uncertain]);
    assert_eq!(c.time.watermark_bound, WatermarkBound::Fixed(5_000));
    assert_eq!(c.time.allowed_lateness_ms, 600_000);
    assert_eq!(c.time.idle_timeout_ms, 30_000);
    assert_eq!(c.time.max_future_ms, 5_000);
    assert_eq!(c.store.path, PathBuf::from("/var/lib/linegate"));
    assert_eq!(c.mqtt.port, 1883);
    assert_eq!(c.metrics.listen, "127.0.0.1:9898");
    assert_eq!(c.metrics.trend_points, 240);
    assert!(c.source.is_empty());
}

#[test]
fn partial_sections_keep_other_defaults() {
    let c = with("[rule]\ncount = 5\n[time]\nidle_timeout = \"500ms\"\n").unwrap();
    assert_eq!(c.rule.count, 5);
    assert_eq!(c.rule.window_ms, 120_000);
    assert_eq!(c.time.idle_timeout_ms, 500);
    assert_eq!(c.time.max_future_ms, 5_000);
}

#[test]
fn auto_bound_and_its_limits() {
    let c = with(
        "[time]\nwatermark_bound = \"auto\"\nauto_bound_min = \"500ms\"\n\
         auto_bound_max = \"2m\"\nauto_bound_quantile = 0.95\n",
    )
    .unwrap();
    assert_eq!(c.time.watermark_bound, WatermarkBound::Auto);
    assert_eq!(c.time.auto_bound_min_ms, 500);
    assert_eq!(c.time.auto_bound_max_ms, 120_000);
    assert_eq!(c.time.auto_bound_quantile, 0.95);
    let c = with("[time]\nwatermark_bound = \"0s\"\n").unwrap();
    assert_eq!(c.time.watermark_bound, WatermarkBound::Fixed(0));
    assert_err(
        with("[time]\nwatermark_bound = \"Auto\"\n"),
        "time.watermark_bound",
        &["\"Auto\"", "\"auto\""],
    );
    assert_err(
        with("[time]\nauto_bound_min = \"10s\"\nauto_bound_max = \"5s\"\n"),
        "time.auto_bound_max",
        &["auto_bound_min"],
    );
    for q in ["2.0", "0.0", "-0.5", "nan"] {
        assert_err(
            with(&format!("[time]\nauto_bound_quantile = {q}\n")),
            "time.auto_bound_quantile",
            &["(0, 1]"],
        );
    }
    assert_eq!(with("[time]\nauto_bound_quantile = 1.0\n").unwrap().time.auto_bound_quantile, 1.0);
}

#[test]
fn unknown_keys_name_full_path_and_file() {
    let msg = assert_err(
        parse(&format!("# top\ncolour = \"red\"\n{MINIMAL}")),
        "colour",
        &["unknown field `colour`"],
    );
    assert!(msg.starts_with("site-a.toml:2:"), "line missing in: {msg}");
    // A key after [gateway] belongs to [gateway].
    assert_err(with("colour = \"red\"\n"), "gateway.colour", &["unknown field"]);
    assert_err(with("[time]\nidle = \"30s\"\n"), "time.idle", &["unknown field"]);
    assert_err(
        with("[rule.machines.press-7]\nthreshold = 0.8\nthreshhold = 0.9\n"),
        "rule.machines.press-7.threshhold",
        &["unknown field"],
    );
    assert_err(
        with("[[source]]\nkind = \"trace\"\npath = \"a.jsonl\"\nsped = 1.0\n"),
        "source[0].sped",
        &["unknown field"],
    );
    assert_err(
        with("[[source]]\nkind = \"trace\"\npath = \"a.jsonl\"\n[[source]]\nkind = \"trace\"\npath = \"b.jsonl\"\nfoo = 1\n"),
        "source[1].foo",
        &["unknown field"],
    );
    assert_err(with("[gateway.extra]\nx = 1\n"), "gateway.extra", &["unknown field"]);
    assert_err(with("[mqtt]\nuser = \"x\"\n"), "mqtt.user", &["unknown field"]);
}

#[test]
fn wrong_types_name_the_key() {
    assert_err(with("[rule]\ncount = \"three\"\n"), "rule.count", &["invalid type"]);
    assert_err(with("[rule]\nmetric = \"accel\"\n"), "rule.metric", &["accel"]);
    assert_err(
        with("[rule]\ncount_quality = [\"good\", \"great\"]\n"),
        "rule.count_quality[1]",
        &["great"],
    );
    assert_err(with("[time]\nidle_timeout = 30\n"), "time.idle_timeout", &["invalid type"]);
    assert_err(
        with("[[source]]\nkind = \"trace\"\npath = \"a\"\nspeed = \"fast\"\n"),
        "source[0].speed",
        &["invalid type"],
    );
}

#[test]
fn bad_durations_name_key_file_and_text() {
    assert_err(
        with("[time]\nidle_timeout = \"30 parsecs\"\n"),
        "time.idle_timeout",
        &["\"30 parsecs\"", "invalid duration"],
    );
    assert_err(with("[rule]\nwindow = \"2\"\n"), "rule.window", &["\"2\""]);
    assert_err(with("[time]\nmax_future = \"1500us\"\n"), "time.max_future", &["milliseconds"]);
}

#[test]
fn impossible_values_are_rejected() {
    assert_err(with("[rule]\ncount = 0\n"), "rule.count", &["1 or more", "0"]);
    assert_err(with("[rule]\ncount = -2\n"), "rule.count", &["1 or more"]);
    assert_err(with("[rule]\ncount = 5000000000\n"), "rule.count", &["1 or more"]);
    assert_err(with("[rule]\nthreshold = -0.1\n"), "rule.threshold", &[">= 0", "-0.1"]);
    assert_err(with("[rule]\nthreshold = inf\n"), "rule.threshold", &["finite"]);
    assert_err(
        with("[rule.machines.press-7]\nthreshold = -1.0\n"),
        "rule.machines.press-7.threshold",
        &[">= 0"],
    );
    assert_err(
        with("[rule.machines.\"press 7\"]\nthreshold = 1.0\n"),
        "rule.machines.press 7",
        &["machine name"],
    );
    assert_err(
        with("[rule]\nunit = \"mm/s\"\n"),
        "rule.unit",
        &["\"mm/s\"", "does not fit", "\"accel_rms\""],
    );
    assert_err(
        with("[rule]\nmetric = \"velocity_rms\"\nunit = \"g\"\n"),
        "rule.unit",
        &["does not fit"],
    );
    assert_err(with("[rule]\nwindow = \"0s\"\n"), "rule.window", &["longer than 0"]);
    assert_err(with("[rule]\nname = \"\"\n"), "rule.name", &["rule name"]);
    assert_err(with("[rule]\nname = \"high vibration\"\n"), "rule.name", &["[A-Za-z0-9_.-]"]);
    assert_err(with("[rule]\ncount_quality = []\n"), "rule.count_quality", &["at least one"]);
    assert_err(
        with("[rule]\ncount_quality = [\"good\", \"bad\", \"good\"]\n"),
        "rule.count_quality[2]",
        &["\"good\"", "twice"],
    );
    assert_err(with("[rule]\ncount_clock = []\n"), "rule.count_clock", &["at least one"]);
    assert_err(
        with("[rule]\ncount_clock = [\"synced\", \"stepped\", \"synced\"]\n"),
        "rule.count_clock[2]",
        &["\"synced\"", "twice"],
    );
    assert_err(with("[rule]\ncount_clock = [\"late\"]\n"), "rule.count_clock[0]", &["late"]);
    assert_err(with("[rule]\nalso_max = -1\n"), "rule.also_max", &["-1"]);
    assert_err(with("[time]\nidle_timeout = \"0ms\"\n"), "time.idle_timeout", &["longer than 0"]);
    assert_err(with("[mqtt]\nport = 0\n"), "mqtt.port", &["1..=65535"]);
    assert_err(with("[mqtt]\nport = 70000\n"), "mqtt.port", &["70000"]);
    assert_err(with("[mqtt]\nprefix = \"a/#\"\n"), "mqtt.prefix", &["'#'"]);
    assert_err(with("[mqtt]\nhost = \"\"\n"), "mqtt.host", &["non-empty"]);
    assert_err(with("[metrics]\nlisten = \"localhost\"\n"), "metrics.listen", &["\"localhost\""]);
    assert_err(with("[metrics]\ntrend_points = 3601\n"), "metrics.trend_points", &["3601"]);
    assert_err(with("[metrics]\ntrend_points = -1\n"), "metrics.trend_points", &["got -1"]);
    assert_err(with("[store]\npath = \"\"\n"), "store.path", &["empty"]);
    assert_err(with("[store]\ncommit_interval = \"0s\"\n"), "store.commit_interval", &["0 ms"]);
    assert_err(with("[store]\ncommit_records = 0\n"), "store.commit_records", &[">= 1"]);
    assert_err(with("[store]\nmax_bytes = \"4 gigs\"\n"), "store.max_bytes", &["4 gigs"]);
    assert_err(with("[store]\nmax_bytes = 1000\n"), "store.max_bytes", &["below"]);
    assert_err(with("[store]\ncache = -5\n"), "store.cache", &["negative"]);
    assert_err(with("[store]\nhistory = \"a day\"\n"), "store.history", &["a day"]);
    let short = "[store]\nhistory = \"5m\"\n[time]\nallowed_lateness = \"10m\"\n";
    assert_err(with(short), "store.history", &["300000 ms", "allowed_lateness (600000 ms)"]);
}

#[test]
fn history_defaults_to_a_day() {
    assert_eq!(with("").unwrap().store.history_ms, 86_400_000);
    assert_eq!(with("[store]\nhistory = \"1h\"\n").unwrap().store.history_ms, 3_600_000);
}

#[test]
fn store_sizes_are_human_or_bytes() {
    let c = with("[store]\nmax_bytes = \"2GiB\"\ncache = 33554432\n").unwrap();
    assert_eq!((c.store.max_bytes, c.store.cache_bytes), (2 << 30, 32 << 20));
    let d = with("").unwrap();
    assert_eq!((d.store.max_bytes, d.store.cache_bytes), (4 << 30, 16 << 20));
}

#[test]
fn gateway_id_is_required_and_an_identifier() {
    assert_err(parse(""), "gateway.id", &["missing"]);
    assert_err(parse("[gateway]\n"), "gateway.id", &["missing"]);
    assert_err(parse("[gateway]\nid = \"gw 01\"\n"), "gateway.id", &["\"gw 01\""]);
    assert_err(parse("[gateway]\nid = \"\"\n"), "gateway.id", &["gateway id"]);
}

#[test]
fn sources() {
    let c = with(
        "[[source]]\nkind = \"trace\"\npath = \"a.jsonl\"\nspeed = 1\n\
         [[source]]\nkind = \"trace\"\npath = \"b.jsonl\"\n",
    )
    .unwrap();
    assert_eq!(
        c.source,
        vec![
            SourceConfig::Trace(TraceSource { path: "a.jsonl".into(), speed: 1.0 }),
            SourceConfig::Trace(TraceSource { path: "b.jsonl".into(), speed: 0.0 }),
        ]
    );
    assert_err(
        with("[[source]]\nkind = \"can-bus\"\nbus = 1\n"),
        "source[0].kind",
        &["source kind \"can-bus\" is not supported by this build"],
    );
    assert_err(
        with("[[source]]\nkind = \"trace\"\npath = \"a\"\n[[source]]\nkind = \"carrier-pigeon\"\n"),
        "source[1].kind",
        &["\"carrier-pigeon\" is not supported"],
    );
    assert_err(with("[[source]]\npath = \"a\"\n"), "source[0].kind", &["missing"]);
    assert_err(with("[[source]]\nkind = 1\npath = \"a\"\n"), "source[0].kind", &["string"]);
    assert_err(with("[[source]]\nkind = \"trace\"\n"), "source[0].path", &["missing"]);
    assert_err(
        with("[[source]]\nkind = \"trace\"\npath = \"a\"\nspeed = -1.0\n"),
        "source[0].speed",
        &[">= 0"],
    );
    assert_err(
        with("[[source]]\nkind = \"trace\"\npath = \"a\"\nspeed = nan\n"),
        "source[0].speed",
        &["finite"],
    );
    assert_err(
        with("[[source]]\nkind = \"trace\"\npath = \"a\"\n[[source]]\nkind = \"trace\"\npath = \"a\"\n"),
        "source[1].path",
        &["source[0]"],
    );
}

#[test]
fn velocity_rule_defaults_to_mm_per_s() {
    let c = with("[rule]\nmetric = \"velocity_rms\"\nthreshold = 4.5\n").unwrap();
    assert_eq!((c.rule.metric, c.rule.unit), (Feature::VelocityRms, MeasureUnit::MmS));
    let c = with("[rule]\nunit = \"m/s2\"\n").unwrap();
    assert_eq!((c.rule.metric, c.rule.unit), (Feature::AccelRms, MeasureUnit::Ms2));
}

#[test]
fn machine_override_without_threshold_falls_back() {
    let c = with("[rule]\nthreshold = 0.3\n[rule.machines.lathe_2]\n").unwrap();
    assert_eq!(c.rule.machines["lathe_2"], MachineRule { threshold: None });
    assert_eq!(c.rule.threshold_for("lathe_2"), 0.3);
}

#[test]
fn syntax_errors_name_file_and_line() {
    let err = parse("[gateway]\nid = \"gw-01\"\n[rule\n").unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ConfigError::Syntax { line: Some(3), .. }), "{err:?}");
    assert!(msg.starts_with("site-a.toml:3: TOML syntax error"), "{msg}");
}

#[test]
fn load_reads_files_and_names_them_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gw.toml");
    std::fs::write(&path, CONTRACT_EXAMPLE).unwrap();
    assert_eq!(Config::load(&path).unwrap().gateway.id, "gw-01");

    std::fs::write(&path, "[gateway]\nid = \"gw\"\n[time]\nbogus = 1\n").unwrap();
    let msg = Config::load(&path).unwrap_err().to_string();
    assert!(msg.contains(&path.display().to_string()) && msg.contains("time.bogus"), "{msg}");

    let missing = dir.path().join("nope.toml");
    let err = Config::load(&missing).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err:?}");
    assert!(err.to_string().contains("nope.toml"));
}

#[test]
fn the_control_socket_must_fit_a_unix_socket_address() {
    let c = with("[control]\nsocket = \"/run/linegate/control.sock\"\n").unwrap();
    assert_eq!(c.control.socket, Some(PathBuf::from("/run/linegate/control.sock")));
    let long = format!("/{}", "d".repeat(120));
    assert_err(
        with(&format!("[control]\nsocket = \"{long}\"\n")),
        "control.socket",
        &["bytes long", "at most 107"],
    );
    assert_err(
        with(&format!("[store]\npath = \"{long}\"\n")),
        "store.path",
        &["control.sock", "[control] socket"],
    );
    assert_err(with("[control]\nsocket = \"\"\n"), "control.socket", &["empty"]);
    assert_err(with("[control]\nport = 1\n"), "control.port", &["unknown field"]);
}
