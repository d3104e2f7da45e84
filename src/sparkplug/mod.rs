//! Sparkplug B 3.0 (docs/contracts.md section 10): the gateway as an edge node, a second view of
//! the outbox beside the JSON topics, which stay as they are.
//!
//! Edge node id = gateway id; one device per machine. Metric names and types: `values.rs` and
//! docs/operations.md, "Sparkplug B and SCADA".
//!
//! The core, pure (no I/O, no clock):
//! - `session`: births and deaths, `seq` and `bdSeq`, aliases, historical flags, the primary
//!   host's `STATE`, the rebirth command; fed events, returns messages to publish.
//! - `values`: an outbox record → metric values; `table`: the declared metrics (aliases, types,
//!   last values), kept in the store; `proto`: the payload types generated from the official
//!   `sparkplug_b.proto` (Eclipse Tahu, EPL-2.0, `proto/`) by prost in `build.rs`.
//!
//! The shell: `client`, one rumqttc connection per attempt with NDEATH as its will, the store's
//! Sparkplug place (`crate::store`'s `sparkplug.rs`: cursor, `bdSeq`, metric table, records
//! set aside) read and written on blocking threads.
//!
//! Wiring: [`ShellConfig::from_config`], then [`run`] beside the JSON forwarder on the same
//! store (`crate::app::forward::with_sparkplug`).

mod client;
pub mod proto;
mod session;
mod stats;
mod table;
mod values;

use std::collections::BTreeMap;
use std::time::Duration;

pub use client::{run, ShellConfig, SparkplugError};
pub use session::{Kind, Publish, Session, SessionConfig, BD_SEQ, NAMESPACE, REBIRTH};
pub use stats::{Snapshot, Stats, STATS};
pub use table::Table;
pub use values::{updates, Quality, Update, Value};

use crate::config::Config;
use crate::forward::ForwarderConfig;

/// Outbox records read at a time: a DDATA per machine per read, each value a few tens of bytes.
pub const READ_LIMIT: usize = 512;

impl ShellConfig {
    /// The view's settings from the configuration and the JSON forwarder's resolved broker
    /// settings (the same broker, credentials and TLS; client id `{its id}-spb`). `None` when
    /// `[sparkplug]` is off.
    pub fn from_config(config: &Config, mqtt: &ForwarderConfig) -> Option<ShellConfig> {
        let s = config.sparkplug.as_ref()?;
        let iso = (config.machines.iter())
            .filter_map(|(m, a)| Some((m.clone(), a.iso?)))
            .collect::<BTreeMap<_, _>>();
        let broker =
            ForwarderConfig { client_id: format!("{}-spb", mqtt.client_id), ..mqtt.clone() };
        Some(ShellConfig {
            broker,
            session: SessionConfig {
                group_id: s.group_id.clone(),
                node_id: config.gateway.id.clone(),
                primary_host: s.primary_host.clone(),
                iso,
                replay_rate: mqtt.session.replay_rate,
            },
            read_limit: READ_LIMIT,
            idle_poll: Duration::from_millis(100),
            drain: Duration::from_secs(1),
        })
    }
}
