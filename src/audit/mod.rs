//! The audit room, the operator's read side: what the gateway holds, told to people. The
//! commands `quarantine`, `explain`, `reconcile`, `inspect`, `status`, `dump` and `export`, the
//! status page (`GET /` on the metrics listener), and the metrics sampler ([`sampler`]), which
//! publishes the same facts as gauges.
//!
//! Each command works on a [`view::View`]: the store opened directly when no daemon holds it
//! (sled's file lock: one process at a time), or the running daemon's store through the control
//! socket (`crate::control`), given as the daemon's `crate::store::SharedStore` and the decide
//! stage's input (a released record is handed to it). It never reaches into the daemon's wiring
//! (`app`). Each writes its output to the writer it is given and returns its exit status,
//! so the answers are the same either way. Reads only, except the quarantine's release and drop,
//! `drill` and `reconcile --record`, which are ledgered with the operator who asked.

pub mod drill;
pub mod explain;
pub mod export;
pub mod inspect;
pub mod quarantine;
pub mod reconcile;
pub mod sampler;
pub mod status;
pub mod status_asset;
pub mod status_page;
pub mod status_trends;
pub mod trend_svg;
pub mod view;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::store::archive::ALERTS;
use crate::store::{Store, StoreError, StoreOptions};

/// Why an audit command failed.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("no store at {}: it is created by the first `linegate run`", .0.display())]
    NoStore(PathBuf),
    #[error(
        "the store at {} is in use by another process (a running `linegate run` holds sled's \
         file lock), but no daemon answers on the control socket {}: is it still starting, or \
         is its [control] socket set differently from this configuration's?",
        .0.display(),
        .1.display()
    )]
    Locked(PathBuf, PathBuf),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{what} {key}: {why}")]
    Decode { what: &'static str, key: String, why: String },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Usage(String),
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
}

/// Opens the store at `path` for an audit command (`socket`: where its daemon would answer).
pub fn open(path: &Path, socket: &Path) -> Result<Store, AuditError> {
    if !path.join("db").exists() && !path.join("conf").exists() {
        return Err(AuditError::NoStore(path.to_path_buf()));
    }
    match Store::open(path, StoreOptions::default()) {
        Err(StoreError::Open { source, .. })
            if source.to_string().contains("could not acquire lock") =>
        {
            Err(AuditError::Locked(path.to_path_buf(), socket.to_path_buf()))
        }
        other => Ok(other?),
    }
}

/// An archived alert revision `(key, JSON)` decoded.
pub fn decode_alert(
    (key, json): (Vec<u8>, Vec<u8>),
) -> Result<crate::rule::alert::AlertRecord, AuditError> {
    serde_json::from_slice(&json).map_err(|e| AuditError::Decode {
        what: "archived alert",
        key: key.escape_ascii().to_string(),
        why: e.to_string(),
    })
}

/// Every archived alert record's JSON, in alert id and revision order.
pub fn archived_alerts(store: &Store) -> Result<Vec<Vec<u8>>, AuditError> {
    store.archive_scan(ALERTS).map(|r| r.map(|(_, v)| v).map_err(AuditError::from)).collect()
}

/// `linegate dump ledger|alerts`: JSON Lines (times as integer ms, as every `--json`).
pub fn dump(view: &mut view::View<'_>, what: &str, out: &mut dyn Write) -> Result<u8, AuditError> {
    match what {
        "ledger" => {
            for (seq, r) in view.ledger()?.records {
                let line = serde_json::json!({"seq": seq, "at_ms": r.at_ms, "entry": r.entry});
                writeln!(out, "{line}")?;
            }
        }
        "alerts" => {
            for json in view.read(archived_alerts)? {
                out.write_all(&json)?;
                out.write_all(b"\n")?;
            }
        }
        other => {
            return Err(AuditError::Usage(format!(
                "dump {other:?}: what to dump is `ledger` or `alerts`"
            )))
        }
    }
    Ok(0)
}
