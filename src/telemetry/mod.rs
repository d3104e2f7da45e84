//! Telemetry: what the daemon tells the people and the service manager that watch it.
//!
//! - [`metrics`]: the [`Metrics`] handle every stage updates (Prometheus families, typed methods).
//! - [`drain`]: the backlog's drain rate over a sliding window (for the replay ETA).
//! - [`exposition`]: those metrics as Prometheus text format 0.0.4.
//! - [`http`]: `GET /metrics` on `[metrics] listen`.
//! - [`logging`]: tracing to stderr, or to journald when running under systemd.
//! - [`watchdog`]: systemd notify (READY, STOPPING, STATUS) and WATCHDOG pings that stop when the
//!   pipeline stops making progress.
//! - [`Telemetry`] (`shared.rs`): what the stages of `linegate run` share to report through —
//!   the metrics, the heartbeat, the forwarder's counters ([`ForwardStats`], `broker.rs`), the
//!   machines' watermarks and the drain rate.
//!
//! Building blocks: the stages report through them, the daemon (`linegate run`) wires them in.
//! Nothing here reads the store or decides: the store's gauges come from the metrics sampler
//! (`crate::audit::sampler`), the decision counters from the decide stage.

mod broker;
#[cfg(test)]
pub(crate) mod captured;
mod families;
mod shared;

pub mod drain;
pub mod exposition;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod watchdog;

pub use broker::ForwardStats;
pub use metrics::{BrokerState, Metrics, OutboxKind, SparkplugState};
pub use shared::Telemetry;
