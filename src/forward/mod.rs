//! MQTT store-and-forward (issue 4, docs/contracts.md section 10): the outbox drained to a broker with
//! QoS 1, each record removed only after its PUBACK. The only code that touches rumqttc.
//!
//! The core, pure (no I/O, no clock):
//! - `session`: the session core, a request/feed state machine: what to publish, PUBACK
//!   correlation, pace, priority, and what it needs of the store, said as values
//!   ([`Next`]: PUBLISHes, a [`Read`], a [`Write`]) and answered by the shell ([`Fetched`],
//!   [`Written`]). Its parts: `request` (the vocabulary between core and shell), `streams` (the
//!   records held in memory per stream and the reads that top them up), `flights` (PUBLISHes
//!   awaiting a PUBACK), `acks` (when acknowledgements are applied and made durable), `pace`
//!   (the backlog's token bucket); `session_config` its settings; `batch` and `payload` build
//!   the payloads; `samples_codec` (in `crate::records`) encodes raw frames.
//!
//! The shell:
//! - `client`: the async shell (rumqttc event loop, reconnect backoff); it carries out the
//!   session's reads (a round's back to back) and writes on blocking threads, with
//! - `fetch`: those reads and writes against the daemon's `SharedStore` (which way in each takes).
//! - `security`: secrets files and TLS (rustls with ring).
//!
//! Unit tests of the core answer its requests from `outbox_model` (an in-memory outbox and
//! journal) and play the broker with `fake_broker`.
//!
//! Wiring: the daemon hands over its shared store (`crate::store::SharedStore`), builds a
//! [`ForwarderConfig`] with [`ForwarderConfig::from_config`], and spawns [`run`] with a
//! `tokio::sync::Notify` it calls `notify_one()` on after every checkpoint that added outbox
//! records. The forwarder keeps
//! nothing the store does not: restarted on the same store, it sends everything still pending.

mod acks;
mod batch;
mod client;
#[cfg(test)]
mod fake_broker;
mod fetch;
mod flights;
#[cfg(test)]
mod outbox_model;
mod pace;
mod payload;
mod request;
mod security;
mod session;
mod session_config;
mod streams;

use std::path::Path;
use std::time::Duration;

pub use client::{jittered_backoff, poll, run, ForwardError, ForwarderConfig};
pub use fetch::FetchError;
pub(crate) use pace::Pace;
pub use payload::{OFFLINE, ONLINE, STATUS};
pub use request::{Fetched, Next, Publish, Read, Stream, Write, Written};
pub use security::{client_config, read_password, read_secret, secret_path, SecurityError};
pub use session::Session;
pub use session_config::SessionConfig;

use crate::config::Config;

/// Outbox records held in memory per stream (alerts, live, backlog): enough for event batches of
/// a few hundred per sensor behind the raw-sample records between them; a record in memory is
/// small (raw samples stay in the journal until their PUBLISH is built).
const BUFFER_RECORDS: usize = 2048;

/// Acknowledged records applied to the store together at most (removals, no fsync), and the
/// longest an acknowledgement waits to be applied. The store takes an application in chunks
/// with its lock released between them (`SharedStore::acknowledge`), so its size does not hold a checkpoint
/// back; in a drain the 100 ms decide, and the count only bounds what is held (16 bytes a
/// record: 512 KiB). Applying every 1024 records made a drain's events wait on the store's lock
/// and halved their rate (docs/performance.md, MQTT drain, figures of 2026-12-06 13:04).
pub const COMMIT_ACKS: usize = 32 * 1024;
pub const COMMIT_MS: i64 = 100;
/// The longest applied acknowledgements wait to be made durable when no checkpoint commits
/// meanwhile (while sensors report, the pipeline commits every `[store] commit_interval`, and
/// those commits carry them: a drain adds no fsync of its own).
pub const SYNC_MS: i64 = 1000;

impl ForwarderConfig {
    /// The forwarder's settings from the configuration: reads the password file and the TLS
    /// files (secrets refused when group or others can read them). `credentials_dir` is
    /// `$CREDENTIALS_DIRECTORY` when systemd set it.
    pub fn from_config(
        config: &Config,
        credentials_dir: Option<&Path>,
    ) -> Result<ForwarderConfig, SecurityError> {
        let m = &config.mqtt;
        let f = &m.forward;
        let credentials = match (&f.username, &f.password_file) {
            (Some(u), Some(p)) => {
                Some((u.clone(), read_password(&secret_path(p, credentials_dir))?))
            }
            (Some(u), None) => Some((u.clone(), String::new())),
            _ => None,
        };
        let tls = f.tls.as_ref().map(|t| client_config(t, credentials_dir)).transpose()?;
        let keep_alive = Duration::from_millis(f.keep_alive_ms.unsigned_abs());
        Ok(ForwarderConfig {
            host: m.host.clone(),
            port: m.port,
            client_id: f
                .client_id
                .clone()
                .unwrap_or_else(|| format!("linegate-{}", config.gateway.id)),
            keep_alive,
            credentials,
            tls,
            session: SessionConfig {
                topic_root: format!("{}/{}", m.prefix, config.gateway.id),
                inflight: usize::from(f.inflight),
                inflight_bytes: f.inflight_bytes,
                max_packet: f.max_packet,
                replay_rate: f.replay_rate,
                batch_events: 1000,
                buffer: BUFFER_RECORDS.max(2 * usize::from(f.inflight)),
                stall_ms: 2 * f.keep_alive_ms,
                commit_acks: COMMIT_ACKS,
                commit_ms: COMMIT_MS,
                sync_ms: SYNC_MS,
            },
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
        })
    }
}
