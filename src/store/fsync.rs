//! A real fsync of sled's files.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// fsync calls made by this process's stores (files and directories), for the daemon's metrics.
static FSYNCS: AtomicU64 = AtomicU64::new(0);

/// fsync calls made so far by every store of this process (files and directories).
pub fn fsyncs_total() -> u64 {
    FSYNCS.load(Ordering::Relaxed)
}

/// `sync_data` on an open file (the segment files: their size changes are covered by the
/// directory's and sled's syncs), counted.
pub(super) fn sync_data(f: &File) -> io::Result<()> {
    FSYNCS.fetch_add(1, Ordering::Relaxed);
    f.sync_data()
}

/// `sync_all` on an open file or directory, counted.
pub(super) fn sync(f: &File) -> io::Result<()> {
    FSYNCS.fetch_add(1, Ordering::Relaxed);
    f.sync_all()
}

/// `sync_all` every regular file under `dir` (recursively: sled keeps large values in `blobs/`),
/// then each directory itself, so that file contents, sizes and directory entries (new snapshot
/// and blob files, renames) are on stable storage.
///
/// Why: sled 0.34's `Db::flush` writes its log with `sync_file_range(2)` on Linux
/// (`src/pagecache/iobuf.rs`), which neither flushes the disk's volatile write cache nor writes
/// file metadata (its man page says it gives no data-integrity guarantee), and sled does not fsync
/// the directory after creating files. sled issue #1452 ("Data is not written durably") and #1351
/// record this. So after every `flush` the store calls this helper; only then is a commit durable.
///
/// Returns the path that failed with its error.
/// `skip`: a subdirectory of `dir` left out (the segment files, which the store syncs itself).
pub(crate) fn fsync_dir_files(dir: &Path, skip: Option<&str>) -> Result<(), (PathBuf, io::Error)> {
    let entries = std::fs::read_dir(dir).map_err(|e| (dir.to_path_buf(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| (dir.to_path_buf(), e))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| (path.clone(), e))?;
        if kind.is_dir() && skip.is_some_and(|s| entry.file_name() == s) {
            continue;
        }
        if kind.is_dir() {
            fsync_dir_files(&path, None)?;
        } else if kind.is_file() {
            match File::open(&path).and_then(|f| sync(&f)) {
                // sled removed the file (an old blob) since the listing: nothing to sync; the
                // directory's fsync below persists the removal.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                r => r.map_err(|e| (path.clone(), e))?,
            }
        }
    }
    // On Linux a directory opened read-only can be fsynced; this persists its entries.
    File::open(dir).and_then(|d| sync(&d)).map_err(|e| (dir.to_path_buf(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncs_nested_files_and_reports_a_missing_dir() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(tmp.path().join("blobs")).expect("mkdir");
        std::fs::write(tmp.path().join("db"), b"x").expect("write");
        std::fs::write(tmp.path().join("blobs/1"), b"y").expect("write");
        let before = fsyncs_total();
        fsync_dir_files(tmp.path(), Some("raw")).expect("fsync");
        // Two files and two directories (other tests may sync at the same time: at least).
        assert!(fsyncs_total() >= before + 4);
        let missing = tmp.path().join("nope");
        let (p, _) = fsync_dir_files(&missing, None).expect_err("missing dir");
        assert_eq!(p, missing);
    }
}
