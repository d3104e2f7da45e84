//! A real fsync of sled's files.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
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

/// What the store's earlier commits made durable under its directory: each file's length when
/// it was synced, and each directory's entries.
#[derive(Debug, Default)]
pub(crate) struct Synced {
    files: HashMap<PathBuf, u64>,
    dirs: HashMap<PathBuf, BTreeSet<OsString>>,
}

/// The one file sled rewrites in place: its log. Every other file it writes once under a name of
/// its own and never changes after (sled 0.34.7: `conf` is written when the database is created,
/// `snap.*` is written as `*.generating`, synced by sled and renamed, `blobs/*` are opened with
/// `create_new`), so a file synced before at its current length needs no fsync again.
const REWRITTEN_IN_PLACE: &str = "db";

/// Makes every regular file under `dir` (recursively: sled keeps large values in `blobs/`) and
/// each directory's entries (new snapshot and blob files, renames, removals) durable, with an
/// fsync of what may have changed since `synced` was last updated: the log always, any other file
/// that is new or has another length, a directory whose entries differ. Returns how many fsyncs
/// it made.
///
/// Why: sled 0.34's `Db::flush` writes its log with `sync_file_range(2)` on Linux
/// (`src/pagecache/iobuf.rs`), which neither flushes the disk's volatile write cache nor writes
/// file metadata (its man page says it gives no data-integrity guarantee), and sled does not fsync
/// the directory after creating files. sled issue #1452 ("Data is not written durably") and #1351
/// record this. So after every `flush` the store calls this helper; only then is a commit durable.
/// Each fsync, even of an unchanged file, can cost the disk a cache flush: a commit used to make
/// four (log, `conf`, snapshot, directory) where one is needed.
///
/// Returns the path that failed with its error; `synced` is then left as it was.
/// `skip`: a subdirectory of `dir` left out (the segment files, which the store syncs itself).
pub(crate) fn fsync_dir_files(
    dir: &Path,
    skip: Option<&str>,
    synced: &mut Synced,
) -> Result<usize, (PathBuf, io::Error)> {
    let mut now = Synced::default();
    let n = walk(dir, skip, synced, &mut now)?;
    *synced = now;
    Ok(n)
}

/// One directory of [`fsync_dir_files`]: what it finds durable goes into `now`.
fn walk(
    dir: &Path,
    skip: Option<&str>,
    before: &Synced,
    now: &mut Synced,
) -> Result<usize, (PathBuf, io::Error)> {
    let mut n = 0;
    let mut names = BTreeSet::new();
    let entries = std::fs::read_dir(dir).map_err(|e| (dir.to_path_buf(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| (dir.to_path_buf(), e))?;
        let path = entry.path();
        names.insert(entry.file_name());
        let kind = entry.file_type().map_err(|e| (path.clone(), e))?;
        if kind.is_dir() && skip.is_some_and(|s| entry.file_name() == s) {
            continue;
        }
        if kind.is_dir() {
            match walk(&path, None, before, now) {
                // Removed since the listing (sled's blobs, a reopen's stand-in): nothing in it
                // to sync; this directory's fsync below persists the removal.
                Err((p, e)) if e.kind() == io::ErrorKind::NotFound && p == path => {}
                r => n += r?,
            }
        } else if kind.is_file() {
            let len = match entry.metadata() {
                Ok(m) => m.len(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err((path, e)),
            };
            let unchanged = before.files.get(&path) == Some(&len);
            if unchanged && entry.file_name() != REWRITTEN_IN_PLACE {
                now.files.insert(path, len);
                continue;
            }
            match File::open(&path).and_then(|f| sync(&f)) {
                // sled removed the file (an old blob) since the listing: nothing to sync; the
                // directory's fsync below persists the removal.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err((path, e)),
                Ok(()) => {
                    n += 1;
                    now.files.insert(path, len);
                }
            }
        }
    }
    if before.dirs.get(dir) != Some(&names) {
        // On Linux a directory opened read-only can be fsynced; this persists its entries.
        File::open(dir).and_then(|d| sync(&d)).map_err(|e| (dir.to_path_buf(), e))?;
        n += 1;
    }
    now.dirs.insert(dir.to_path_buf(), names);
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncs_what_may_have_changed_since_the_last_time_and_reports_a_missing_dir() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        std::fs::create_dir(dir.join("blobs")).expect("mkdir");
        std::fs::create_dir(dir.join("raw")).expect("mkdir");
        std::fs::write(dir.join("db"), b"x").expect("write");
        std::fs::write(dir.join("conf"), b"c").expect("write");
        std::fs::write(dir.join("blobs/1"), b"y").expect("write");
        std::fs::write(dir.join("raw/0"), b"r").expect("write");
        let mut synced = Synced::default();
        let sync = |s: &mut Synced| fsync_dir_files(dir, Some("raw"), s).expect("fsync");
        assert_eq!(
            sync(&mut synced),
            5,
            "first: db, conf, blobs/1 and both directories (raw/ is skipped)"
        );
        assert_eq!(sync(&mut synced), 1, "nothing changed: the log alone");
        std::fs::write(dir.join("blobs/2"), b"z").expect("write");
        assert_eq!(sync(&mut synced), 3, "a new blob: the log, the blob and blobs/");
        std::fs::write(dir.join("blobs/2"), b"zz").expect("write");
        assert_eq!(sync(&mut synced), 2, "a file of another length: the log and that file");
        std::fs::remove_file(dir.join("blobs/1")).expect("rm");
        assert_eq!(sync(&mut synced), 2, "a removal: the log and blobs/");
        std::fs::write(dir.join("raw/1"), b"r").expect("write");
        assert_eq!(
            sync(&mut synced),
            1,
            "raw/ is skipped (the store syncs it) and its entry is unchanged: the log alone"
        );
        std::fs::write(dir.join("snap.1"), b"s").expect("write");
        assert_eq!(sync(&mut synced), 3, "a new snapshot: the log, the snapshot and the directory");
        let missing = dir.join("nope");
        let (p, _) = fsync_dir_files(&missing, None, &mut synced).expect_err("missing dir");
        assert_eq!(p, missing);
        assert_eq!(sync(&mut synced), 1, "a failure leaves what was synced as it was");
    }
}
