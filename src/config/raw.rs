//! The raw serde layer: exactly the TOML shape, every key optional, unknown keys rejected.
//!
//! Nothing here is validated beyond TOML types; `super::validate_*` turns these into the public
//! types. Sources are kept as plain tables here because their keys depend on `kind`
//! (see `super::validate_source`).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::event::features::{Feature, MeasureUnit};
use crate::event::{ClockState, Quality};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) gateway: Option<RawGateway>,
    /// `[rule]` or `[[rule]]`.
    pub(super) rule: Option<RawRules>,
    pub(super) time: Option<RawTime>,
    pub(super) store: Option<RawStore>,
    pub(super) mqtt: Option<RawMqtt>,
    pub(super) metrics: Option<RawMetrics>,
    pub(super) control: Option<RawControl>,
    pub(super) source: Option<Vec<toml::Table>>,
    /// The asset table (`assets.rs`).
    pub(super) machines: Option<BTreeMap<String, super::assets::RawAsset>>,
    pub(super) sparkplug: Option<super::sparkplug::RawSparkplug>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGateway {
    pub(super) id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    pub(super) name: Option<String>,
    pub(super) metric: Option<Feature>,
    pub(super) unit: Option<MeasureUnit>,
    /// A number or a zone boundary (`threshold.rs`).
    pub(super) threshold: Option<toml::Value>,
    pub(super) window: Option<String>,
    pub(super) count: Option<i64>,
    pub(super) count_quality: Option<Vec<Quality>>,
    pub(super) count_clock: Option<Vec<ClockState>>,
    pub(super) also_max: Option<i64>,
    pub(super) early: Option<bool>,
    pub(super) machines: Option<BTreeMap<String, RawMachineRule>>,
    /// A composite rule's members (`composite.rs`).
    pub(super) all_of: Option<Vec<String>>,
    pub(super) sequence: Option<Vec<String>>,
}

/// The rules as written: one `[rule]` table, or `[[rule]]` tables (`super::rules`).
#[derive(Debug)]
pub(super) enum RawRules {
    /// Boxed: a table is large beside a list.
    One(Box<RawRule>),
    Many(Vec<RawRule>),
}

impl<'de> Deserialize<'de> for RawRules {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Tables;
        impl<'de> serde::de::Visitor<'de> for Tables {
            type Value = RawRules;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a [rule] table or [[rule]] tables")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawRules, A::Error> {
                RawRule::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(|r| RawRules::One(Box::new(r)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RawRules, A::Error> {
                let mut rules = Vec::new();
                while let Some(rule) = seq.next_element::<RawRule>()? {
                    rules.push(rule);
                }
                Ok(RawRules::Many(rules))
            }
        }
        d.deserialize_any(Tables)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMachineRule {
    pub(super) threshold: Option<toml::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTime {
    pub(super) watermark_bound: Option<String>,
    pub(super) allowed_lateness: Option<String>,
    pub(super) idle_timeout: Option<String>,
    pub(super) max_future: Option<String>,
    pub(super) auto_bound_min: Option<String>,
    pub(super) auto_bound_max: Option<String>,
    pub(super) auto_bound_quantile: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    pub(super) path: Option<String>,
    pub(super) max_bytes: Option<toml::Value>,
    pub(super) cache: Option<toml::Value>,
    pub(super) commit_interval: Option<String>,
    pub(super) commit_records: Option<i64>,
    pub(super) history: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMqtt {
    pub(super) host: Option<String>,
    pub(super) port: Option<i64>,
    pub(super) prefix: Option<String>,
    // Forwarding keys (`config/mqtt.rs`).
    pub(super) client_id: Option<String>,
    pub(super) keep_alive: Option<String>,
    pub(super) username: Option<String>,
    pub(super) password_file: Option<std::path::PathBuf>,
    pub(super) tls: Option<super::mqtt::RawMqttTls>,
    pub(super) max_packet: Option<i64>,
    pub(super) inflight: Option<i64>,
    pub(super) inflight_bytes: Option<i64>,
    pub(super) replay_rate: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetrics {
    pub(super) listen: Option<String>,
    pub(super) trend_points: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawControl {
    pub(super) socket: Option<String>,
}

/// `[[source]]` with `kind = "trace"`; `kind` itself is taken out before this is deserialized.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTraceSource {
    pub(super) path: Option<String>,
    pub(super) speed: Option<f64>,
}
