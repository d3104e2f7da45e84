//! linegate: an edge gateway for industrial vibration monitoring.
//!
//! The route of a sample (docs/architecture.md): `source` (buses, Modbus) or `trace` (recorded
//! input) → `stamp` (sequence numbers, clock evidence, features) → the store's journal (`store`)
//! → `decider` (the pure decision path over `rule`) → the store's outbox → `forward` (MQTT).
//! `app` wires these into `linegate run`; `replay` runs the decision path alone over a trace.
//! `event` and `records` hold the vocabularies every stage shares (docs/contracts.md); `config`
//! the configuration; `clock` the one time source; `telemetry` metrics, logs and systemd.
#![deny(unsafe_code)]
// exceptions: `source::clock_quality::read_adjtimex` (adjtimex FFI), `memory` (mallopt, malloc_trim)
#![deny(rust_2018_idioms, unused_must_use)]
#![warn(
    missing_debug_implementations,
    unreachable_pub,
    clippy::dbg_macro,
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::todo,
    clippy::unimplemented
)]

/// A named fault-injection point (the `fail` crate) with the `failpoints` feature; nothing
/// without it. Configured with a `return` action, the enclosing function returns
/// `Err($error::Injected { point })`, `$error` (a path from the crate root) being that
/// function's error type; `panic` and `sleep` work as the `fail` crate defines them. Tests name
/// the points (`store::…`, `app::…`).
macro_rules! failpoint {
    ($name:literal, $($error:ident)::+) => {
        #[cfg(feature = "failpoints")]
        fail::fail_point!($name, |_| Err($($error)::+::Injected { point: $name }));
    };
}

pub mod app;
pub mod audit;
pub mod capture;
pub mod clock;
pub mod config;
pub mod control;
pub mod decide;
#[cfg(feature = "demo")]
pub mod demo;
pub mod driver;
pub mod event;
pub mod features;
pub mod forward;
pub mod ingest;
pub mod memory;
pub mod records;
pub mod replay;
pub mod retention;
pub mod rule;
pub mod source;
pub mod stamp;
pub mod store;
pub mod synth;
pub mod telemetry;
pub mod timefmt;
pub mod trace;
pub mod whatif;
