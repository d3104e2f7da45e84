//! The audit commands on a store that no daemon holds: `quarantine`, `explain`, `reconcile`,
//! `inspect`, `dump`. Each opens the store directly (sled's file lock: one process at a time)
//! and says so in words when a running daemon holds it.

pub mod explain;
pub mod inspect;
pub mod quarantine;
pub mod reconcile;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::records::ledger::LedgerRecord;
use crate::store::archive::ALERTS;
use crate::store::{Store, StoreError, StoreOptions};

/// Why an audit command failed.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("no store at {}: it is created by the first `linegate run`", .0.display())]
    NoStore(PathBuf),
    #[error(
        "the store at {} is in use by another process (a running `linegate run` holds sled's \
         file lock): stop it first, or use the daemon's metrics",
        .0.display()
    )]
    Locked(PathBuf),
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

/// Opens the store at `path` for an audit command.
pub fn open(path: &Path) -> Result<Store, AuditError> {
    if !path.join("db").exists() && !path.join("conf").exists() {
        return Err(AuditError::NoStore(path.to_path_buf()));
    }
    match Store::open(path, StoreOptions::default()) {
        Err(StoreError::Open { source, .. })
            if source.to_string().contains("could not acquire lock") =>
        {
            Err(AuditError::Locked(path.to_path_buf()))
        }
        other => Ok(other?),
    }
}

/// The whole ledger, in order.
pub fn ledger(store: &Store) -> Result<Vec<(u64, LedgerRecord)>, AuditError> {
    Ok(store.ledger_from(1).collect::<Result<_, _>>()?)
}

/// Every archived alert record's JSON, in alert id and revision order.
pub fn archived_alerts(store: &Store) -> Result<Vec<Vec<u8>>, AuditError> {
    store.archive_scan(ALERTS).map(|r| r.map(|(_, v)| v).map_err(AuditError::from)).collect()
}

/// `linegate dump ledger|alerts`: JSON Lines on stdout.
pub fn dump(store: &mut Store, what: &str) -> Result<bool, AuditError> {
    let mut out = std::io::stdout().lock();
    match what {
        "ledger" => {
            for (seq, r) in ledger(store)? {
                let line = serde_json::json!({"seq": seq, "at_ms": r.at_ms, "entry": r.entry});
                writeln!(out, "{line}")?;
            }
        }
        "alerts" => {
            for json in archived_alerts(store)? {
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
    Ok(true)
}
