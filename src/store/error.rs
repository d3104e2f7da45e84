//! What can go wrong in the store, always naming the database path and what failed.

use std::path::PathBuf;

/// An error from the store. Every variant names the database directory; a record that does not
/// decode also names its tree and key (so recovery can say what was lost).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// sled could not open the database.
    #[error("store {path}: cannot open the sled database: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: sled::Error,
    },
    /// A sled operation failed (`op` says which, e.g. "apply batch to tree journal").
    #[error("store {path}: {op} failed: {source}")]
    Sled {
        path: PathBuf,
        op: String,
        #[source]
        source: sled::Error,
    },
    /// Syncing a file or directory of the database to disk failed.
    #[error("store {path}: fsync of {file} failed: {source}")]
    Fsync {
        path: PathBuf,
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Writing, syncing, listing or deleting a segment file of raw lines failed.
    #[error("store {path}: segment file {file}: {source}")]
    Segment {
        path: PathBuf,
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A stored value (or key) that does not decode.
    #[error("store {path}: tree {tree}, key {key}: {what}")]
    Corrupt {
        path: PathBuf,
        tree: &'static str,
        /// The key, printed readably (prefix text and big-endian integers decoded where possible).
        key: String,
        what: String,
    },
    /// Reading the size of a file of the database (for the retention budget) failed.
    #[error("store {path}: cannot measure the size of {file}: {source}")]
    Usage {
        path: PathBuf,
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Moving a damaged database aside, or opening a fresh one after that, failed: recovery
    /// gives up with this rather than trying again (no crash loop).
    #[error("store {path}: recovery failed: {what}")]
    Recovery { path: PathBuf, what: String },
    /// A call the store refuses because it would break its invariants (the caller's bug).
    #[error("store {path}: {what}")]
    Refused { path: PathBuf, what: String },
    /// An earlier write or commit failed, so this store refuses further writes: reopen it.
    #[error("store {path}: an earlier write or commit failed; reopen the store to recover")]
    Poisoned { path: PathBuf },
    /// A fault injected at a named failpoint (only with the `failpoints` feature).
    #[error("store: fault injected at failpoint {point}")]
    Injected { point: &'static str },
}

/// The store's result type.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
