//! Modbus RTU and TCP sources: poll a configured register map and yield sample blocks.
//!
//! - the register map and its decoding are configuration vocabulary ([`crate::config::modbus_map`]);
//! - [`block`]: poll outcomes cut into [`trace::SamplesRecord`](crate::trace::SamplesRecord)s
//!   and quality-`bad` readings (pure);
//! - [`link`]: one connection (TCP or serial) and one block read with a timeout;
//! - [`poller`]: the async loop with reconnect and backoff, sending on a bounded channel;
//! - [`probe`]: `linegate probe` for modbus sources, with failures explained.
pub mod block;
pub mod link;
pub mod poller;
pub mod probe;
pub mod wire;

pub use block::{BadReadings, ModbusOutput};
pub use poller::{run, PollStats, StatsSnapshot};
pub use probe::{probe, probe_async, ChannelSpread, ProbeReport};
