//! The control socket (docs/contracts.md section 11, docs/operations.md "The control socket"): a
//! Unix domain socket on which the running daemon answers `inspect`, `status`, `explain`,
//! `reconcile`, `quarantine`, `dump` and `export`, so that a person at the gateway sees and audits it
//! without stopping it. [`protocol`] is the wire format (pure), [`server`] the daemon's side,
//! [`client`] the CLI's. The commands themselves are the read side's (`crate::audit`): [`run`]
//! gives a command the same view whether the daemon or the CLI opened the store.

pub mod client;
pub mod protocol;
pub mod server;

use std::path::PathBuf;

use std::io::Write;

use crate::audit::status::Live;
use crate::audit::view::View;
use crate::audit::{self, AuditError};
use crate::config::Config;
use protocol::Command;

/// Where the control socket of the daemon running `config` is: `[control] socket`, or by default
/// `control.sock` inside the store's directory.
pub fn socket_path(config: &Config) -> PathBuf {
    config.control.socket.clone().unwrap_or_else(|| config.store.path.join("control.sock"))
}

/// Runs `command` on `view`, writing its output to `out`: the same call whether the daemon
/// answers through the socket or the CLI opened the store itself. `live`: what only the running
/// daemon knows (`status`).
pub fn run(
    view: &mut View<'_>,
    config: &Config,
    live: Option<&Live>,
    command: &Command,
    out: &mut dyn Write,
) -> Result<u8, AuditError> {
    match command {
        Command::Inspect { json } => audit::inspect::inspect(view, config, *json, out),
        Command::Status { json } => audit::status::status(view, config, live, *json, out),
        Command::Explain { alert_id, json, members } => {
            audit::explain::explain(view, config, alert_id, *json, *members, out)
        }
        Command::Reconcile { json, record } => {
            audit::reconcile::reconcile_with(view, config, *json, *record, out)
        }
        Command::Drill { phase, name } => audit::drill::drill(view, *phase, name, out),
        Command::Quarantine { action } => action.run(view, out),
        Command::Dump { what } => audit::dump(view, what, out),
        Command::Export { span } => audit::export::run(view, span, out),
    }
}
