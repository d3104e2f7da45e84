//! A power-cut harness: a FUSE filesystem (the `fuser` crate, no libfuse) mounted in the test
//! process over a directory, which holds in a volatile layer everything no `fsync` has made
//! durable yet, and which can "cut the power": drop that layer and leave in the backing directory
//! exactly what a disk would hold after the cut. Modelled on what LazyFS (the Jepsen project's
//! tool) does, reduced to what the store's tests need.
//!
//! # The model
//!
//! At [`PowerCut::mount`] the backing directory's tree is read into memory, all of it durable.
//! While mounted, every request is served from memory (the volatile view), and beside it the
//! harness keeps the durable layer: what a power cut would leave.
//!
//! - **Volatile until synced:** `write`, `truncate`/`ftruncate` (and `O_TRUNC`), `create`,
//!   `mkdir`, `link`, `rename`, `unlink`, `rmdir`.
//! - **`fsync` or `fdatasync` of a file** makes that inode's data and size durable (the two are
//!   the same here: `fdatasync` also covers a size change, as it must to make appended data
//!   retrievable). Not any name of the file.
//! - **`fsync` of a directory** makes its entries durable as they are: creations, renames into
//!   and out of it, links and removals. Not the data of the files they name, and not the
//!   directory's own name in its parent (that needs the parent's fsync). A new directory's
//!   entries are empty until it is synced itself.
//! - **The cut** ([`PowerCut::cut`]): the caller has killed every writer (SIGKILL), so no request
//!   comes after it; the volatile view is dropped, the filesystem unmounted, and the backing
//!   directory rewritten from the durable layer: from the root, each durably named entry, each
//!   file with its durable data (a file named durably but never synced is empty).
//! - **A torn write** (optional at the cut): the last write that no fsync of its file has covered
//!   since, if it crosses a 4 KiB boundary of the file, keeps its bytes up to one of those
//!   boundaries (chosen by the caller's random number) in the durable layer, and the file's
//!   durable size grows to that boundary if it was smaller. What a disk that writes pages in
//!   order can leave of a multi-page write.
//!
//! Not modelled: reordering or partial persistence of what one fsync covers (an fsync either
//! happened entirely or not: it returned before the cut); tears of any write but the last;
//! metadata timestamps (all are the epoch); permissions beyond the mode bits kept in memory;
//! symbolic links, special files, extended attributes, `fallocate` (ENOSYS, which glibc's
//! `posix_fallocate` emulates with writes); hard links after a cut (each durable name is written
//! as a file of its own, with the same contents); `sync_file_range(2)` (the kernel does not pass
//! it to FUSE, so sled's own `flush` makes nothing durable here: only real fsyncs count, the
//! harsh case). Everything lives in memory: stores in tests are small.
//!
//! The kernel passes each `write` through at once (no writeback cache), so a SIGKILLed process
//! leaves nothing in flight.

mod fuse;
pub mod model;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use model::Counts;
use model::Model;

/// A mounted harness over one backing directory.
pub struct PowerCut {
    model: Arc<Mutex<Model>>,
    session: Option<fuser::BackgroundSession>,
    backing: PathBuf,
    mountpoint: PathBuf,
}

/// What a cut did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Requests while mounted.
    pub counts: Counts,
    /// A write no fsync had covered was pending at the cut (its file had unsynced bytes).
    pub unsynced_write: bool,
    /// The torn write's boundary (file offset) when one was applied.
    pub torn_at: Option<u64>,
}

impl PowerCut {
    /// Reads `backing` and mounts the harness on `mountpoint` (an empty directory).
    pub fn mount(backing: &Path, mountpoint: &Path) -> PowerCut {
        let model = Model::load(backing)
            .unwrap_or_else(|e| panic!("powercut: reading {}: {e}", backing.display()));
        let model = Arc::new(Mutex::new(model));
        let mut config = fuser::Config::default();
        config.mount_options =
            vec![fuser::MountOption::FSName("powercut".into()), fuser::MountOption::RW];
        let session = fuser::spawn_mount(fuse::PowerCutFs(model.clone()), mountpoint, &config)
            .unwrap_or_else(|e| {
                panic!("powercut: mounting on {} (needs /dev/fuse): {e}", mountpoint.display())
            });
        PowerCut {
            model,
            session: Some(session),
            backing: backing.to_path_buf(),
            mountpoint: mountpoint.to_path_buf(),
        }
    }

    /// Where the filesystem is mounted.
    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    /// Cuts the power: see the module documentation. Every process writing through the mount
    /// must be dead (and reaped) first. `tear`: tear the last unsynced write, at the boundary
    /// this number picks.
    pub fn cut(mut self, tear: Option<u64>) -> Cut {
        // The kernel releases closed files asynchronously; unmounting before it has would fail
        // with EBUSY. (A file still open stays open: the unmount then fails, as it should.)
        use linegate::clock::Clock as _;
        let clock = linegate::clock::SystemClock::new();
        let handles = || self.model.lock().unwrap_or_else(|p| p.into_inner()).handles;
        while handles() > 0 && clock.monotonic_ms() < 5_000 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let cut = {
            let mut m = self.model.lock().unwrap_or_else(|p| p.into_inner());
            m.cut = true;
            let unsynced_write = m.last_unsynced_write().is_some();
            let torn_at = m.tear(tear);
            Cut { counts: m.counts, unsynced_write, torn_at }
        };
        self.unmount().unwrap_or_else(|e| {
            panic!("powercut: unmounting {} (a file still open?): {e}", self.mountpoint.display())
        });
        let m = self.model.lock().unwrap_or_else(|p| p.into_inner());
        m.write_durable(&self.backing)
            .unwrap_or_else(|e| panic!("powercut: writing {}: {e}", self.backing.display()));
        cut
    }

    /// Unmounts and waits for the filesystem's thread. When that fails (a file still open on
    /// the mount) the mount is detached lazily (`umount -l`), so that no stale mount outlives
    /// the test, and the error returned.
    fn unmount(&mut self) -> std::io::Result<()> {
        let Some(s) = self.session.take() else { return Ok(()) };
        s.umount_and_join().inspect_err(|_| {
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.mountpoint).status();
        })
    }
}

impl Drop for PowerCut {
    /// A harness dropped without a cut (a failing test) is unmounted; the backing directory is
    /// left as it was at the mount.
    fn drop(&mut self) {
        let _ = self.unmount();
    }
}
