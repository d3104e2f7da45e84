//! linegate: an edge gateway for industrial vibration monitoring.
//!
//! The route of a sample (docs/architecture.md): `source` (buses, Modbus) or `trace` (recorded
//! input) → `ingest` (journal records, group commit into the store's journal, `store`) →
//! `decide` (the pure decider over `stamp` and `rule`, and the decide stage that checkpoints its
//! outputs) → the store's outbox → `forward` (MQTT). `app` wires these into `linegate run` and
//! nothing imports it but `cli`, `demo` and `main`; `replay` runs the decider alone over a trace.
//! Beside the route: `audit` (the operator's read side: status, inspect, explain, reconcile,
//! quarantine, export, the status page, the metrics sampler), `control` (the control socket that
//! serves it), `retention` (the store's budget), `telemetry` (metrics, logs, systemd), `memory`
//! (the allocator's settings). `event` and `records` hold the vocabularies every stage shares
//! (docs/contracts.md); `config` the configuration; `clock` the one time source. The rooms form
//! no cycle (`tests/module_graph.rs`).
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
pub mod sparkplug;
pub mod stamp;
pub mod store;
pub mod synth;
pub mod telemetry;
pub mod timefmt;
pub mod trace;
pub mod trend;
pub mod whatif;
