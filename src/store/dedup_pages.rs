//! The rule's duplicate memory beside the checkpoint (`crate::rule::dedup`, kept outside the
//! decider's snapshot): `d/` + u64 page number → packed entries one checkpoint added (a few
//! kilobytes a page). Pages are added and removed in the checkpoint's own batch, so the snapshot
//! and the pages it needs are durable together; a restore absorbs every page in number order. The
//! decide stage removes a page once every entry on it is behind its machine's horizon.

use std::path::PathBuf;

use super::{Result, Store, StoreError};

/// Key prefix of duplicate-memory pages.
pub(super) const DEDUP: &[u8] = b"d/";

/// The key of page `n`.
pub(super) fn dedup_key(n: u64) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[..2].copy_from_slice(DEDUP);
    k[2..].copy_from_slice(&n.to_be_bytes());
    k
}

/// What a checkpoint changes among the pages: some added (the entries it added, on pages of a
/// few kilobytes), some removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DedupChange {
    pub add: Vec<(u64, Vec<u8>)>,
    pub remove: Vec<u64>,
}

impl DedupChange {
    pub(super) fn write(&self, batch: &mut sled::Batch) {
        for &n in &self.remove {
            batch.remove(&dedup_key(n));
        }
        for (n, page) in &self.add {
            batch.insert(&dedup_key(*n), page.as_slice());
        }
    }
}

impl Store {
    /// The duplicate-memory pages `(number, packed entries)`, in number order.
    pub fn dedup_pages(&self) -> impl Iterator<Item = Result<(u64, Vec<u8>)>> {
        let path: PathBuf = self.path.clone();
        self.reading(self.state.scan_prefix(DEDUP).map(move |kv| {
            let (k, v) = kv.map_err(|source| StoreError::Sled {
                path: path.clone(),
                op: "iterate d/ in tree state".into(),
                source,
            })?;
            let n = k
                .strip_prefix(DEDUP)
                .and_then(|r| <[u8; 8]>::try_from(r).ok())
                .map(u64::from_be_bytes)
                .ok_or_else(|| {
                    super::corrupt(&path, super::STATE, &k, "key is not d/ + 8 bytes")
                })?;
            Ok((n, v.to_vec()))
        }))
    }
}
