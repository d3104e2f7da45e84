//! Telemetry: what the daemon tells the people and the service manager that watch it.
//!
//! - [`metrics`]: the [`Metrics`] handle every stage updates (Prometheus families, typed methods).
//! - [`drain`]: the backlog's drain rate over a sliding window (for the replay ETA).
//! - [`exposition`]: those metrics as Prometheus text format 0.0.4.
//! - [`http`]: `GET /metrics` on `[metrics] listen`.
//! - [`logging`]: tracing to stderr, or to journald when running under systemd.
//! - [`watchdog`]: systemd notify (READY, STOPPING, STATUS) and WATCHDOG pings that stop when the
//!   pipeline stops making progress.
//!
//! Building blocks: the daemon (`linegate run`) wires them in.

#[cfg(test)]
pub(crate) mod captured;
mod families;

pub mod drain;
pub mod exposition;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod watchdog;

pub use metrics::{BrokerState, Metrics, OutboxKind};
