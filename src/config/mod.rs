//! Configuration (docs/contracts.md section 9): a TOML file turned into validated, typed settings.
//!
//! Two layers. `raw` is exactly the TOML shape (every key optional, unknown keys rejected by
//! serde); the `validate_*` functions below turn each section into the public types, filling in
//! defaults and rejecting impossible values. Every error names the file, the dotted key path
//! (`time.idle_timeout`, `rule.machines.press-7.threshold`, `source[0].speed`) and why.
//!
//! Durations are human strings (`"500ms"`, `"5s"`, `"2m"`) stored as whole milliseconds.
//! Relative paths (`store.path`, `source[i].path`) are kept as written: they are relative to the
//! daemon's working directory, not to the config file.

pub mod assets;
mod checks;
mod composite;
mod duration;
mod frequency;
pub mod modbus_map;
mod mqtt;
mod raw;
mod record_size;
mod rule;
pub mod rule_version;
mod rules;
mod size;
mod source_bus;
mod source_modbus;
mod sparkplug;
mod threshold;

pub use assets::{Foundation, IsoClass, MachineAsset};
pub use composite::CompositeConfig;
pub use source_bus::{Axis, BusSensor, I2cSource, SpiSource};
pub use threshold::Threshold;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::event::features::{Feature, MeasureUnit, Quantity};
use crate::event::{is_identifier, ClockState, Quality};
pub use mqtt::{MqttForwardConfig, MqttTls};
use raw::{
    RawConfig, RawControl, RawGateway, RawMachineRule, RawMetrics, RawMqtt, RawRule, RawStore,
    RawTime, RawTraceSource,
};
pub use source_modbus::{ModbusSource, ModbusTransport, Parity, RtuPort};
pub use sparkplug::SparkplugConfig;

/// The whole validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub gateway: GatewayConfig,
    /// The first rule: the one `[rule]`, or the first `[[rule]]` (`rules.rs`).
    pub rule: RuleConfig,
    /// The further `[[rule]]` tables, in file order; every rule is [`Config::rules`].
    pub more_rules: Vec<RuleConfig>,
    /// The rules were written as `[[rule]]` tables (error keys then say `rule[1] (name)`).
    pub rule_tables: bool,
    /// The composite rules (`all_of`, `sequence`), in file order, after every measurement rule
    /// (`composite.rs`); not among [`Config::rules`].
    pub composites: Vec<CompositeConfig>,
    pub time: TimeConfig,
    pub store: StoreConfig,
    pub mqtt: MqttConfig,
    pub metrics: MetricsConfig,
    pub control: ControlConfig,
    /// `[[source]]` entries in file order; may be empty.
    pub source: Vec<SourceConfig>,
    /// `[machines.NAME]`, the asset table (`assets.rs`), by name; may be empty.
    pub machines: BTreeMap<String, MachineAsset>,
    /// `[sparkplug]` when enabled (`sparkplug.rs`).
    pub sparkplug: Option<SparkplugConfig>,
}

/// `[gateway]`.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayConfig {
    /// Required; an identifier (`[A-Za-z0-9_.-]`, 1..=64 bytes).
    pub id: String,
}

/// `[rule]` (docs/contracts.md section 4).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleConfig {
    /// The rule's name as written into alert records; an identifier.
    pub name: String,
    /// Any feature (docs/contracts.md section 4): an event's `value` when its `metric` is this
    /// one, else its `features[metric]`.
    pub metric: Feature,
    /// The unit `threshold` is in; fits `metric` (`"1"` for a dimensionless feature).
    pub unit: MeasureUnit,
    /// Default threshold; see [`RuleConfig::threshold_for`]. A zone only for `velocity_rms`.
    pub threshold: Threshold,
    /// Key `window`; > 0.
    pub window_ms: i64,
    /// >= 1.
    pub count: u32,
    /// The qualities that count; non-empty, no duplicates.
    pub count_quality: Vec<Quality>,
    /// The clock states whose events count (docs/contracts.md section 3); non-empty, no
    /// duplicates. An event in another state is accepted, forwarded and ledgered, never counted.
    pub count_clock: Vec<ClockState>,
    /// How many further high events an alert record lists in `also`, at most
    /// (docs/contracts.md section 4); `also_count` says how many there are in all.
    pub also_max: u32,
    pub early: bool,
    /// `[rule.machines.NAME]` overrides; every NAME is an identifier.
    pub machines: BTreeMap<String, MachineRule>,
}

/// `[rule.machines.NAME]`.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineRule {
    /// Overrides `rule.threshold` for this machine.
    pub threshold: Option<Threshold>,
}

impl RuleConfig {
    /// The threshold for `machine` as written: its override, or the rule's default (a zone is
    /// resolved by [`Config::threshold_for`]).
    pub fn threshold_for(&self, machine: &str) -> Threshold {
        self.machines.get(machine).and_then(|m| m.threshold).unwrap_or(self.threshold)
    }
}

impl Default for RuleConfig {
    fn default() -> Self {
        RuleConfig {
            name: "high-vibration".to_owned(),
            metric: Feature::AccelRms,
            unit: MeasureUnit::G,
            threshold: Threshold::Value(0.5),
            window_ms: 120_000,
            count: 3,
            count_quality: vec![Quality::Good, Quality::Uncertain],
            count_clock: ClockState::ALL.to_vec(),
            also_max: 100,
            early: false,
            machines: BTreeMap::new(),
        }
    }
}

/// `time.watermark_bound`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatermarkBound {
    /// A fixed bound in milliseconds (>= 0).
    Fixed(i64),
    /// Measured lateness quantile, clamped to `[auto_bound_min, auto_bound_max]`.
    Auto,
}

/// `[time]` (docs/contracts.md section 5). All durations in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeConfig {
    pub watermark_bound: WatermarkBound,
    pub allowed_lateness_ms: i64,
    /// > 0.
    pub idle_timeout_ms: i64,
    pub max_future_ms: i64,
    pub auto_bound_min_ms: i64,
    /// >= `auto_bound_min_ms`.
    pub auto_bound_max_ms: i64,
    /// In (0, 1].
    pub auto_bound_quantile: f64,
}

impl Default for TimeConfig {
    fn default() -> Self {
        TimeConfig {
            watermark_bound: WatermarkBound::Fixed(5_000),
            allowed_lateness_ms: 600_000,
            idle_timeout_ms: 30_000,
            max_future_ms: 5_000,
            auto_bound_min_ms: 1_000,
            auto_bound_max_ms: 60_000,
            auto_bound_quantile: 0.99,
        }
    }
}

/// `[store]`.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    /// The store's directory; non-empty.
    pub path: PathBuf,
    /// `max_bytes`: the retention budget, the directory's real size on disk (default 4 GiB, for
    /// a Raspberry Pi with an SD card); the oldest raw samples are shed above it.
    pub max_bytes: u64,
    /// `cache`: sled's page cache in bytes (default 16 MiB; sled's own default is 1 GiB). The
    /// largest term of a burst's memory that configuration sets: at 64 MiB a 1M-line burst
    /// peaked 91 MB (docs/performance.md, "A burst through `run`").
    pub cache_bytes: u64,
    /// Group commit: journal appends are made durable at least this often (`commit_interval`,
    /// default 100 ms; > 0) ...
    pub commit_interval_ms: i64,
    /// ... or every this many records (`commit_records`, default 1000; >= 1), whichever first.
    pub commit_records: usize,
    /// `history`: how long the ledger and the alert archive keep what they record, by ingest
    /// time (default 24 h; at least `[time] allowed_lateness`); older records are folded into
    /// a durable summary (docs/contracts.md section 11, `src/store/prune.rs`).
    pub history_ms: i64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            path: PathBuf::from("/var/lib/linegate"),
            max_bytes: 4 << 30,
            cache_bytes: 16 << 20,
            commit_interval_ms: 100,
            commit_records: 1000,
            history_ms: 24 * 3600 * 1000,
        }
    }
}

/// `[mqtt]` (docs/contracts.md section 10).
#[derive(Debug, Clone, PartialEq)]
pub struct MqttConfig {
    /// Non-empty, no whitespace.
    pub host: String,
    /// 1..=65535.
    pub port: u16,
    /// Topic prefix: non-empty, no `+`, `#`, NUL, no leading or trailing `/`.
    pub prefix: String,
    /// Session, security and pace of the forwarder (`config/mqtt.rs`).
    pub forward: MqttForwardConfig,
}

impl Default for MqttConfig {
    fn default() -> Self {
        MqttConfig {
            host: "127.0.0.1".to_owned(),
            port: 1883,
            prefix: "linegate".to_owned(),
            forward: MqttForwardConfig::default(),
        }
    }
}

/// `[metrics]`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsConfig {
    /// Parses as a `SocketAddr` (checked at load).
    pub listen: String,
    /// Buckets per hour of the status page's trends (`crate::trend`), 0..=3600; 0: no trends.
    pub trend_points: u32,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            listen: "127.0.0.1:9898".to_owned(),
            trend_points: crate::trend::DEFAULT_POINTS,
        }
    }
}

/// `[control]` (docs/contracts.md section 11).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ControlConfig {
    /// The control socket's path; `None`: `control.sock` in the store's directory
    /// (`crate::control::socket_path`). Under systemd, `/run/linegate/control.sock`.
    pub socket: Option<PathBuf>,
}

/// One `[[source]]`, tagged by its `kind` key.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceConfig {
    /// `kind = "trace"`: a recorded trace file (docs/contracts.md section 8).
    Trace(TraceSource),
    /// `kind = "modbus-tcp"` or `"modbus-rtu"`: a polled Modbus device (`source_modbus.rs`).
    Modbus(ModbusSource),
    /// `kind = "i2c"`: an ADXL345 on an I2C bus (`source_bus`).
    I2c(I2cSource),
    /// `kind = "spi"`: an ADXL345 on an SPI device (`source_bus`).
    Spi(SpiSource),
}

impl SourceConfig {
    /// The `kind` key that selected this variant.
    pub fn kind(&self) -> &'static str {
        match self {
            SourceConfig::Trace(_) => "trace",
            SourceConfig::Modbus(m) => m.kind(),
            SourceConfig::I2c(_) => "i2c",
            SourceConfig::Spi(_) => "spi",
        }
    }
}

/// `[[source]]` with `kind = "trace"`.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSource {
    /// Required, non-empty.
    pub path: PathBuf,
    /// 0: as fast as the pipeline takes it; 1.0: real time by `at`. Finite, >= 0.
    pub speed: f64,
}

/// Why a configuration could not be loaded. Display names the file, the key path and why.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{origin}: cannot read config file: {source}")]
    Read {
        origin: String,
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid TOML.
    #[error("{origin}{}: TOML syntax error: {message}", line_suffix(*.line))]
    Syntax { origin: String, line: Option<usize>, message: String },
    /// A key is unknown, has the wrong type, is missing, or has an impossible value.
    #[error("{origin}{}: key `{key}`: {reason}", line_suffix(*.line))]
    Invalid { origin: String, key: String, line: Option<usize>, reason: String },
}

fn line_suffix(line: Option<usize>) -> String {
    line.map(|l| format!(":{l}")).unwrap_or_default()
}

impl ConfigError {
    /// The file (or other origin) the error is about.
    pub fn origin(&self) -> &str {
        match self {
            ConfigError::Read { origin, .. }
            | ConfigError::Syntax { origin, .. }
            | ConfigError::Invalid { origin, .. } => origin,
        }
    }

    /// The dotted key path, for errors about a key.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key),
            ConfigError::Read { .. } | ConfigError::Syntax { .. } => None,
        }
    }
}

impl Config {
    /// Reads and validates the TOML file at `path`; errors name the path as given.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { origin: origin.clone(), source })?;
        Config::from_toml(&text, &origin)
    }

    /// Parses and validates TOML `text`; `origin` (a file name) is used in error messages.
    pub fn from_toml(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let ctx = Ctx { origin };
        let raw: RawConfig = ctx
            .deserialize(toml::Deserializer::new(text), "", Some(text))
            .map_err(|e| rules::name_rule_in_error(e, text))?;
        ctx.validate(raw)
    }

    /// Every default, with gateway `gateway_id` (not checked here) and no sources. Equal to what
    /// `from_toml` yields for a file holding only `[gateway] id = ...`.
    pub fn for_replay_defaults(gateway_id: &str) -> Config {
        Config {
            gateway: GatewayConfig { id: gateway_id.to_owned() },
            rule: RuleConfig::default(),
            more_rules: Vec::new(),
            rule_tables: false,
            composites: Vec::new(),
            time: TimeConfig::default(),
            store: StoreConfig::default(),
            mqtt: MqttConfig::default(),
            metrics: MetricsConfig::default(),
            control: ControlConfig::default(),
            source: Vec::new(),
            machines: BTreeMap::new(),
            sparkplug: None,
        }
    }
}

/// Source kinds this build supports.
const SUPPORTED_SOURCE_KINDS: &[&str] = &["trace", "modbus-tcp", "modbus-rtu", "i2c", "spi"];

struct Ctx<'a> {
    origin: &'a str,
}

type Result<T, E = ConfigError> = std::result::Result<T, E>;

impl Ctx<'_> {
    fn err(&self, key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            origin: self.origin.to_owned(),
            key: key.into(),
            line: None,
            reason: reason.into(),
        }
    }

    /// Deserializes a raw struct, turning serde's error into one with the full key path
    /// (`prefix` + the path inside) and, when `text` is the source and toml knows the span, a line.
    fn deserialize<'de, D, T>(&self, de: D, prefix: &str, text: Option<&str>) -> Result<T>
    where
        D: serde::Deserializer<'de, Error = toml::de::Error>,
        T: Deserialize<'de>,
    {
        serde_path_to_error::deserialize(de).map_err(|e| {
            let key = join_path(prefix, e.path());
            let inner = e.into_inner();
            let line = text.zip(inner.span()).map(|(t, span)| line_of(t, span.start));
            let message = inner.message().trim_end().replace('\n', "; ");
            if key.is_empty() {
                ConfigError::Syntax { origin: self.origin.to_owned(), line, message }
            } else {
                ConfigError::Invalid { origin: self.origin.to_owned(), key, line, reason: message }
            }
        })
    }

    fn validate(&self, raw: RawConfig) -> Result<Config> {
        let time = self.validate_time(raw.time.unwrap_or_default())?;
        let store = self.validate_store(raw.store.unwrap_or_default())?;
        // Late events still amend incidents within the allowed lateness: their ledger must stay.
        if store.history_ms < time.allowed_lateness_ms {
            return Err(self.err(
                "store.history",
                format!(
                    "{} ms is shorter than [time] allowed_lateness ({} ms)",
                    store.history_ms, time.allowed_lateness_ms
                ),
            ));
        }
        let control = self.validate_control(raw.control.unwrap_or_default(), &store.path)?;
        let (rule, more_rules, rule_tables, composites) = self.validate_rules(raw.rule)?;
        let config = Config {
            gateway: self.validate_gateway(raw.gateway)?,
            rule,
            more_rules,
            rule_tables,
            composites,
            time,
            store,
            mqtt: self.validate_mqtt(raw.mqtt.unwrap_or_default())?,
            metrics: self.validate_metrics(raw.metrics.unwrap_or_default())?,
            control,
            source: self.validate_sources(raw.source.unwrap_or_default())?,
            machines: self.validate_assets(raw.machines.unwrap_or_default())?,
            sparkplug: self.validate_sparkplug(raw.sparkplug)?,
        };
        self.check_feasible(&config)?;
        self.check_record_sizes(&config)?;
        Ok(config)
    }

    fn validate_gateway(&self, raw: Option<RawGateway>) -> Result<GatewayConfig> {
        let Some(id) = raw.and_then(|g| g.id) else {
            return Err(self.err("gateway.id", "missing; every gateway needs an id"));
        };
        if !is_identifier(&id) {
            return Err(self.err("gateway.id", not_identifier("gateway id", &id)));
        }
        Ok(GatewayConfig { id })
    }

    /// One rule's table; `key` names it in errors (`rule`, or `rule[1] (inner-race)` once the
    /// name is known: `rules.rs`).
    fn validate_rule(&self, raw: RawRule, key: &rules::RuleKey) -> Result<RuleConfig> {
        let d = RuleConfig::default();
        let name = raw.name.unwrap_or(d.name);
        if !is_identifier(&name) {
            return Err(self.err(key.bare("name"), not_identifier("rule name", &name)));
        }
        let k = |sub: &str| key.named(&name, sub);
        let metric = raw.metric.unwrap_or(d.metric);
        // Velocity is only ever in mm/s and the other features have no unit, so only an
        // acceleration's unit need be spelled out (default g).
        let unit = raw.unit.unwrap_or(metric.default_unit());
        if !metric.fits(unit) {
            let why = match metric.quantity() {
                Quantity::Dimensionless => format!(
                    "metric \"{metric}\" is dimensionless: leave unit out (or write unit = \"1\")"
                ),
                Quantity::Acceleration | Quantity::Velocity => format!(
                    "unit \"{}\" does not fit metric \"{metric}\" (acceleration is in \"g\" or \
                     \"m/s2\", velocity in \"mm/s\", the other features in \"1\")",
                    unit.as_str()
                ),
            };
            return Err(self.err(k("unit"), why));
        }
        let threshold = match &raw.threshold {
            None => d.threshold,
            Some(v) => self.threshold(&k("threshold"), v)?,
        };
        self.zone_needs_velocity(&k("threshold"), threshold, metric)?;
        let window_ms = self.duration(&k("window"), raw.window.as_deref(), d.window_ms)?;
        if window_ms <= 0 {
            return Err(self.err(k("window"), "must be longer than 0"));
        }
        let count = match raw.count {
            None => d.count,
            Some(c) => u32::try_from(c)
                .ok()
                .filter(|&c| c >= 1)
                .ok_or_else(|| self.err(k("count"), format!("must be 1 or more, got {c}")))?,
        };
        let count_quality = raw.count_quality.unwrap_or(d.count_quality);
        if count_quality.is_empty() {
            return Err(self.err(k("count_quality"), "must list at least one quality"));
        }
        let mut seen = BTreeSet::new();
        for (i, q) in count_quality.iter().enumerate() {
            if !seen.insert(*q) {
                return Err(self.err(
                    k(&format!("count_quality[{i}]")),
                    format!("quality \"{}\" is listed twice", quality_name(*q)),
                ));
            }
        }
        let count_clock = raw.count_clock.unwrap_or(d.count_clock);
        if count_clock.is_empty() {
            return Err(self.err(k("count_clock"), "must list at least one clock state"));
        }
        let mut seen = BTreeSet::new();
        for (i, c) in count_clock.iter().enumerate() {
            if !seen.insert(c.distrust()) {
                return Err(self.err(
                    k(&format!("count_clock[{i}]")),
                    format!("clock state \"{}\" is listed twice", c.as_str()),
                ));
            }
        }
        let also_max = match raw.also_max {
            None => d.also_max,
            Some(n) => u32::try_from(n).map_err(|_| {
                self.err(k("also_max"), format!("must be between 0 and {}, got {n}", u32::MAX))
            })?,
        };
        let mut machines = BTreeMap::new();
        for (machine, RawMachineRule { threshold }) in raw.machines.unwrap_or_default() {
            let key = k(&format!("machines.{machine}"));
            if !is_identifier(&machine) {
                return Err(self.err(key, not_identifier("machine name", &machine)));
            }
            let key = format!("{key}.threshold");
            let threshold = threshold.map(|t| self.threshold(&key, &t)).transpose()?;
            if let Some(t) = threshold {
                self.zone_needs_velocity(&key, t, metric)?;
            }
            machines.insert(machine, MachineRule { threshold });
        }
        Ok(RuleConfig {
            name,
            metric,
            unit,
            threshold,
            window_ms,
            count,
            count_quality,
            count_clock,
            also_max,
            early: raw.early.unwrap_or(d.early),
            machines,
        })
    }

    fn validate_time(&self, raw: RawTime) -> Result<TimeConfig> {
        let d = TimeConfig::default();
        let watermark_bound = match raw.watermark_bound.as_deref() {
            None => d.watermark_bound,
            Some("auto") => WatermarkBound::Auto,
            Some(text) => WatermarkBound::Fixed(
                duration::parse_ms(text)
                    .map_err(|e| self.err("time.watermark_bound", format!("{e}, or \"auto\"")))?,
            ),
        };
        let allowed_lateness_ms = self.duration(
            "time.allowed_lateness",
            raw.allowed_lateness.as_deref(),
            d.allowed_lateness_ms,
        )?;
        let idle_timeout_ms =
            self.duration("time.idle_timeout", raw.idle_timeout.as_deref(), d.idle_timeout_ms)?;
        if idle_timeout_ms <= 0 {
            return Err(self.err("time.idle_timeout", "must be longer than 0"));
        }
        let max_future_ms =
            self.duration("time.max_future", raw.max_future.as_deref(), d.max_future_ms)?;
        let auto_bound_min_ms = self.duration(
            "time.auto_bound_min",
            raw.auto_bound_min.as_deref(),
            d.auto_bound_min_ms,
        )?;
        let auto_bound_max_ms = self.duration(
            "time.auto_bound_max",
            raw.auto_bound_max.as_deref(),
            d.auto_bound_max_ms,
        )?;
        if auto_bound_max_ms < auto_bound_min_ms {
            return Err(self.err(
                "time.auto_bound_max",
                format!(
                    "must not be shorter than time.auto_bound_min ({auto_bound_max_ms} ms < \
                     {auto_bound_min_ms} ms)"
                ),
            ));
        }
        let auto_bound_quantile = raw.auto_bound_quantile.unwrap_or(d.auto_bound_quantile);
        if !(auto_bound_quantile > 0.0 && auto_bound_quantile <= 1.0) {
            return Err(self.err(
                "time.auto_bound_quantile",
                format!("must be in (0, 1], got {auto_bound_quantile}"),
            ));
        }
        Ok(TimeConfig {
            watermark_bound,
            allowed_lateness_ms,
            idle_timeout_ms,
            max_future_ms,
            auto_bound_min_ms,
            auto_bound_max_ms,
            auto_bound_quantile,
        })
    }

    fn validate_store(&self, raw: RawStore) -> Result<StoreConfig> {
        let d = StoreConfig::default();
        let path = match raw.path {
            None => d.path,
            Some(p) if p.is_empty() => return Err(self.err("store.path", "must not be empty")),
            Some(p) => PathBuf::from(p),
        };
        let size = |key: &str, v: Option<toml::Value>, default: u64, min: u64| match v {
            None => Ok(default),
            Some(v) => match size::parse_bytes(&v) {
                Ok(n) if n < min => Err(self.err(key, format!("{n} bytes is below {min}"))),
                Ok(n) => Ok(n),
                Err(e) => Err(self.err(key, e)),
            },
        };
        // Below 1 MiB sled's own files (one segment is 512 KiB) would always be over budget.
        let max_bytes = size("store.max_bytes", raw.max_bytes, d.max_bytes, 1 << 20)?;
        let cache_bytes = size("store.cache", raw.cache, d.cache_bytes, 1 << 20)?;
        let commit_interval_ms =
            self.duration("store.commit_interval", raw.commit_interval.as_deref(), 100)?;
        if commit_interval_ms <= 0 {
            return Err(self.err("store.commit_interval", "must be longer than 0 ms"));
        }
        let commit_records = match raw.commit_records {
            None => d.commit_records,
            Some(n) if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
            Some(n) => {
                return Err(self.err("store.commit_records", format!("must be >= 1, got {n}")))
            }
        };
        let history_ms = self.duration("store.history", raw.history.as_deref(), d.history_ms)?;
        Ok(StoreConfig {
            path,
            max_bytes,
            cache_bytes,
            commit_interval_ms,
            commit_records,
            history_ms,
        })
    }

    fn validate_mqtt(&self, raw: RawMqtt) -> Result<MqttConfig> {
        let d = MqttConfig::default();
        let host = raw.host.unwrap_or(d.host);
        if host.is_empty() || host.chars().any(char::is_whitespace) {
            return Err(self.err(
                "mqtt.host",
                format!("must be a non-empty host name or address without spaces, got {host:?}"),
            ));
        }
        let port = match raw.port {
            None => d.port,
            Some(p) => u16::try_from(p)
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| self.err("mqtt.port", format!("must be in 1..=65535, got {p}")))?,
        };
        let prefix = raw.prefix.unwrap_or(d.prefix);
        if prefix.is_empty()
            || prefix.starts_with('/')
            || prefix.ends_with('/')
            || prefix.contains(['+', '#', '\0'])
        {
            return Err(self.err(
                "mqtt.prefix",
                format!(
                    "must be a non-empty MQTT topic prefix without '+', '#' or a leading or \
                     trailing '/', got {prefix:?}"
                ),
            ));
        }
        let forward = self.validate_mqtt_forward(mqtt::RawMqttForward {
            client_id: raw.client_id,
            keep_alive: raw.keep_alive,
            username: raw.username,
            password_file: raw.password_file,
            tls: raw.tls,
            max_packet: raw.max_packet,
            inflight: raw.inflight,
            inflight_bytes: raw.inflight_bytes,
            replay_rate: raw.replay_rate,
        })?;
        Ok(MqttConfig { host, port, prefix, forward })
    }

    fn validate_metrics(&self, raw: RawMetrics) -> Result<MetricsConfig> {
        let listen = raw.listen.unwrap_or(MetricsConfig::default().listen);
        if let Err(e) = listen.parse::<SocketAddr>() {
            return Err(self.err(
                "metrics.listen",
                format!("{listen:?} is not an address:port like \"127.0.0.1:9898\" ({e})"),
            ));
        }
        let max = crate::trend::MAX_POINTS;
        let trend_points = match raw.trend_points {
            None => MetricsConfig::default().trend_points,
            Some(n) => u32::try_from(n).ok().filter(|&n| n <= max).ok_or_else(|| {
                self.err(
                    "metrics.trend_points",
                    format!("must be between 0 (no trends) and {max} (one a second), got {n}"),
                )
            })?,
        };
        Ok(MetricsConfig { listen, trend_points })
    }

    fn validate_control(&self, raw: RawControl, store: &std::path::Path) -> Result<ControlConfig> {
        let socket = raw.socket.map(PathBuf::from);
        let effective = socket.clone().unwrap_or_else(|| store.join("control.sock"));
        // sun_path holds 108 bytes, the terminating NUL included.
        let len = effective.as_os_str().len();
        if len > 107 {
            let key = if socket.is_some() { "control.socket" } else { "store.path" };
            return Err(self.err(
                key,
                format!(
                    "the control socket {} is {len} bytes long; a Unix socket path holds at most \
                     107: set [control] socket to a shorter path",
                    effective.display()
                ),
            ));
        }
        if socket.as_ref().is_some_and(|s| s.as_os_str().is_empty()) {
            return Err(self.err("control.socket", "is empty".to_string()));
        }
        Ok(ControlConfig { socket })
    }

    fn validate_sources(&self, raw: Vec<toml::Table>) -> Result<Vec<SourceConfig>> {
        let mut out = Vec::with_capacity(raw.len());
        for (i, table) in raw.into_iter().enumerate() {
            let source = self.validate_source(i, table)?;
            let SourceConfig::Trace(TraceSource { path, .. }) = &source else {
                out.push(source);
                continue;
            };
            if let Some(j) = out
                .iter()
                .position(|s: &SourceConfig| matches!(s, SourceConfig::Trace(t) if &t.path == path))
            {
                return Err(self.err(
                    format!("source[{i}].path"),
                    format!("the same trace as source[{j}]: {}", path.display()),
                ));
            }
            out.push(source);
        }
        Ok(out)
    }

    fn validate_source(&self, i: usize, mut table: toml::Table) -> Result<SourceConfig> {
        let prefix = format!("source[{i}]");
        let kind = match table.remove("kind") {
            None => {
                return Err(self.err(
                    format!("{prefix}.kind"),
                    format!(
                        "missing; every source needs a kind, one of {SUPPORTED_SOURCE_KINDS:?}"
                    ),
                ))
            }
            Some(toml::Value::String(k)) => k,
            Some(other) => {
                return Err(self.err(
                    format!("{prefix}.kind"),
                    format!("must be a string, got a {}", other.type_str()),
                ))
            }
        };
        match kind.as_str() {
            "trace" => {
                let raw: RawTraceSource =
                    self.deserialize(toml::Value::Table(table), &prefix, None)?;
                let path = match raw.path {
                    None => {
                        return Err(self.err(
                            format!("{prefix}.path"),
                            "missing; a trace source needs the trace file's path",
                        ))
                    }
                    Some(p) if p.is_empty() => {
                        return Err(self.err(format!("{prefix}.path"), "must not be empty"))
                    }
                    Some(p) => PathBuf::from(p),
                };
                let speed =
                    self.non_negative(&format!("{prefix}.speed"), raw.speed.unwrap_or(0.0))?;
                Ok(SourceConfig::Trace(TraceSource { path, speed }))
            }
            "modbus-tcp" => self.validate_modbus(&prefix, true, table),
            "modbus-rtu" => self.validate_modbus(&prefix, false, table),
            "i2c" => {
                let raw = self.deserialize(toml::Value::Table(table), &prefix, None)?;
                Ok(SourceConfig::I2c(self.validate_i2c(&prefix, raw)?))
            }
            "spi" => {
                let raw = self.deserialize(toml::Value::Table(table), &prefix, None)?;
                Ok(SourceConfig::Spi(self.validate_spi(&prefix, raw)?))
            }
            other => Err(self.err(
                format!("{prefix}.kind"),
                format!(
                    "source kind {other:?} is not supported by this build (supported: {})",
                    SUPPORTED_SOURCE_KINDS.join(", ")
                ),
            )),
        }
    }

    /// `text` parsed as a duration in ms, or `default` when the key is absent.
    fn duration(&self, key: &str, text: Option<&str>, default: i64) -> Result<i64> {
        match text {
            None => Ok(default),
            Some(t) => duration::parse_ms(t).map_err(|e| self.err(key, e)),
        }
    }

    fn non_negative(&self, key: &str, v: f64) -> Result<f64> {
        if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(self.err(key, format!("must be a finite number >= 0, got {v}")))
        }
    }
}

fn quality_name(q: Quality) -> &'static str {
    match q {
        Quality::Good => "good",
        Quality::Uncertain => "uncertain",
        Quality::Bad => "bad",
    }
}

fn not_identifier(what: &str, value: &str) -> String {
    format!("{what} {value:?} must be 1..=64 characters of [A-Za-z0-9_.-]")
}

/// `prefix` + serde's path, as `a.b[0].c`.
fn join_path(prefix: &str, path: &serde_path_to_error::Path) -> String {
    let mut s = prefix.to_owned();
    for segment in path {
        match segment {
            serde_path_to_error::Segment::Seq { index } => {
                let _ = write!(s, "[{index}]");
            }
            serde_path_to_error::Segment::Map { key }
            | serde_path_to_error::Segment::Enum { variant: key } => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(key);
            }
            serde_path_to_error::Segment::Unknown => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push('?');
            }
        }
    }
    s
}

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests;

impl Config {
    /// Every `(machine, sensor)` a live source is configured with (trace sources name none), and
    /// whether any live source is configured (its ingest time is then the wall clock).
    pub fn configured_sensors(&self) -> (Vec<(String, String)>, bool) {
        let mut out = Vec::new();
        let mut live = false;
        for s in &self.source {
            match s {
                SourceConfig::Trace(_) => {}
                SourceConfig::Modbus(m) => {
                    live = true;
                    for b in &m.blocks {
                        out.extend(
                            b.channels.iter().map(|c| (m.machine.clone(), c.sensor.clone())),
                        );
                    }
                }
                SourceConfig::I2c(b) => {
                    live = true;
                    out.push((b.sensor.machine.clone(), b.sensor.sensor.clone()));
                }
                SourceConfig::Spi(b) => {
                    live = true;
                    out.push((b.sensor.machine.clone(), b.sensor.sensor.clone()));
                }
            }
        }
        (out, live)
    }
}
