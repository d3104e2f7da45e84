//! The salvage's reading and writing helpers: bounded batches into the fresh store, checked
//! reads of the damaged store's raw lines, the bitmap of journal positions copied, and bringing a
//! segment file over.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::{failed, Result, BATCH_BYTES, BATCH_RECORDS};
use crate::store::segments::segment_path;

/// The journal positions copied, one bit each from the first (a sled lookup per `Samples`
/// record cost a second for a 1 GB store). Past [`MAX_HELD_BITS`] it stops and answers `None`.
#[derive(Debug, Default)]
pub(super) struct Held {
    first: Option<u64>,
    bits: Vec<u64>,
    full: bool,
}

/// 64 MiB of bits: journal positions, not bytes, so a store of 2^29 records.
const MAX_HELD_BITS: u64 = 1 << 29;

impl Held {
    pub(super) fn set(&mut self, pos: u64) {
        let i = pos - *self.first.get_or_insert(pos);
        if i >= MAX_HELD_BITS {
            self.full = true;
            return;
        }
        let word = (i / 64) as usize;
        if self.bits.len() <= word {
            self.bits.resize(word + 1, 0);
        }
        self.bits[word] |= 1 << (i % 64);
    }

    pub(super) fn has(&self, pos: u64) -> Option<bool> {
        if self.full {
            return None;
        }
        let Some(i) = self.first.and_then(|f| pos.checked_sub(f)) else { return Some(false) };
        let word = self.bits.get((i / 64) as usize).copied().unwrap_or(0);
        Some(word & (1 << (i % 64)) != 0)
    }
}

/// Writes into one tree of the fresh store in bounded batches.
pub(super) struct Batcher<'a> {
    tree: &'a sled::Tree,
    path: &'a Path,
    batch: sled::Batch,
    records: usize,
    bytes: usize,
}

impl<'a> Batcher<'a> {
    pub(super) fn new(tree: &'a sled::Tree, path: &'a Path) -> Self {
        Batcher { tree, path, batch: sled::Batch::default(), records: 0, bytes: 0 }
    }

    pub(super) fn put(&mut self, k: &[u8], v: &[u8]) -> Result<()> {
        self.batch.insert(k, v);
        self.records += 1;
        self.bytes += k.len() + v.len();
        if self.records >= BATCH_RECORDS || self.bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    pub(super) fn u64(&mut self, k: &[u8], n: u64) -> Result<()> {
        self.put(k, &n.to_be_bytes())
    }

    pub(super) fn flush(&mut self) -> Result<()> {
        let batch = std::mem::take(&mut self.batch);
        (self.records, self.bytes) = (0, 0);
        self.tree.apply_batch(batch).map_err(|e| failed(self.path, e))
    }
}

/// Reads raw lines of the damaged store's segments, one file open at a time.
pub(super) struct RawReader {
    pub(super) dir: std::path::PathBuf,
    pub(super) open: Option<(u64, File)>,
}

impl RawReader {
    /// Whether the line is there and matches its checksum.
    pub(super) fn check(&mut self, id: u64, offset: u64, len: u32, sum: u64) -> bool {
        if self.open.as_ref().map(|o| o.0) != Some(id) {
            self.open = File::open(segment_path(&self.dir, id)).ok().map(|f| (id, f));
        }
        let Some((_, file)) = &self.open else { return false };
        let mut buf = vec![0u8; len as usize];
        file.read_exact_at(&mut buf, offset).is_ok() && xxhash_rust::xxh3::xxh3_64(&buf) == sum
    }
}

/// A hard link (same filesystem: no copy, no extra space), else a synced copy.
pub(super) fn link_or_copy(from: &Path, into: &Path) -> std::io::Result<()> {
    if std::fs::hard_link(from, into).is_ok() {
        return Ok(());
    }
    std::fs::copy(from, into)?;
    File::open(into)?.sync_all()
}
