//! linegate: an edge gateway for industrial vibration monitoring.
//!
//! Stages, as in ARCHITECTURE.md: `trace` (a recorded source) → `stamp` (sequence numbers, feature
//! extraction) → `rule` (the pure decision core) → outputs. `event` and `quarantine` hold the
//! contracts every stage shares; `config` the configuration.
#![deny(unsafe_code)]
// exceptions: `source::clock_quality::read_adjtimex` (adjtimex FFI), `app::memory` (mallopt, malloc_trim)
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

pub mod app;
pub mod clock;
pub mod config;
pub mod decide;
#[cfg(feature = "demo")]
pub mod demo;
pub mod driver;
pub mod event;
pub mod forward;
pub mod ledger;
pub mod outbox;
pub mod quarantine;
pub mod replay;
pub mod rule;
pub mod samples_codec;
pub mod snapshot;
pub mod source;
pub mod stamp;
pub mod store;
pub mod synth;
pub mod telemetry;
pub mod trace;
