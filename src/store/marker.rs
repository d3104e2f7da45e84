//! The salvage request: a record found damaged while the daemon runs cannot be salvaged around in
//! that process (every stage holds the store), so the daemon writes [`SALVAGE_MARKER`] into the
//! store's directory, durably, and exits non-zero; the next start sees it and salvages as for a
//! failed start-up check ([`super::Store::open_or_recover`]). The marker names the damage, for
//! the `Recovery` ledger record. It goes away with the damaged directory (moved aside whole), so
//! a start that salvages leaves none behind, and a crash before the fresh store is moved in
//! leaves it in place for the next start.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::StoreError;

/// The marker's file name, in the store's directory.
pub const SALVAGE_MARKER: &str = "salvage-needed";

/// A record found damaged while running: what the marker holds (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Damage {
    /// The tree and key of the record that does not decode (`state`, `o/17`).
    pub tree: String,
    pub key: String,
    /// The error as the daemon reported it.
    pub error: String,
}

impl Damage {
    /// The damage a store error reports: a record that does not decode.
    pub fn of(e: &StoreError) -> Option<Damage> {
        match e {
            StoreError::Corrupt { tree, key, .. } => {
                Some(Damage { tree: (*tree).to_string(), key: key.clone(), error: e.to_string() })
            }
            _ => None,
        }
    }

    /// Whether the damaged record is the checkpoint (a salvage then does not copy it).
    pub fn is_checkpoint(&self) -> bool {
        self.tree == super::STATE && self.key == "c/"
    }

    /// In words, for the `Recovery` record and the log.
    pub fn describe(&self) -> String {
        format!(
            "damage found while running in tree {}, key {} (salvage requested): {}",
            self.tree, self.key, self.error
        )
    }
}

/// Writes the marker into the store directory `path` and makes it durable (written beside,
/// fsynced, renamed, the directory fsynced): the next start salvages. Returns the marker's path.
pub fn request_salvage(path: &Path, damage: &Damage) -> std::io::Result<PathBuf> {
    let (marker, tmp) = (path.join(SALVAGE_MARKER), path.join(format!("{SALVAGE_MARKER}.tmp")));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&serde_json::to_vec(damage).map_err(std::io::Error::other)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, &marker)?;
    std::fs::File::open(path)?.sync_all()?;
    Ok(marker)
}

/// The damage a marker in store directory `path` names, if there is one. A marker that does not
/// parse still asks for the salvage.
pub(super) fn requested(path: &Path) -> Option<Damage> {
    let bytes = std::fs::read(path.join(SALVAGE_MARKER)).ok()?;
    Some(serde_json::from_slice(&bytes).unwrap_or_else(|e| Damage {
        tree: String::new(),
        key: String::new(),
        error: format!("a salvage marker that does not parse ({e})"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_round_trips_and_an_unparsable_one_still_asks() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(requested(dir.path()), None);
        let d = Damage { tree: "state".into(), key: "c/".into(), error: "bad".into() };
        let marker = request_salvage(dir.path(), &d).unwrap();
        assert_eq!(requested(dir.path()), Some(d.clone()));
        assert!(d.is_checkpoint());
        std::fs::write(marker, b"{").unwrap();
        let got = requested(dir.path()).unwrap();
        assert!(got.error.contains("does not parse") && !got.is_checkpoint(), "{got:?}");
    }
}
