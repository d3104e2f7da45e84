//! The power-cut harness (`tests/support/powercut/`) against its documented model, through real
//! system calls on the mount: what survives a cut and what does not.

mod support;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use support::powercut::model::PAGE;
use support::powercut::PowerCut;

/// The harness mounted over an empty backing directory, both in a fresh temporary directory.
fn mounted() -> (tempfile::TempDir, PathBuf, PathBuf, PowerCut) {
    let tmp = tempfile::tempdir().unwrap();
    let (backing, mnt) = (tmp.path().join("backing"), tmp.path().join("mnt"));
    std::fs::create_dir(&backing).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    let pc = PowerCut::mount(&backing, &mnt);
    (tmp, backing, mnt, pc)
}

fn sync_dir(dir: &Path) {
    File::open(dir).unwrap().sync_all().unwrap();
}

/// `name` in the mount: created, written, the file and the directory synced.
fn durable_file(mnt: &Path, name: &str, bytes: &[u8]) {
    let mut f = File::create(mnt.join(name)).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
    sync_dir(mnt);
}

#[test]
fn a_write_without_fsync_is_gone_after_the_cut_and_a_synced_one_survives() {
    let (_tmp, backing, mnt, pc) = mounted();
    durable_file(&mnt, "synced", b"one");
    durable_file(&mnt, "unsynced", b"two");
    let mut f = OpenOptions::new().append(true).open(mnt.join("unsynced")).unwrap();
    f.write_all(b" and more").unwrap();
    assert_eq!(std::fs::read(mnt.join("unsynced")).unwrap(), b"two and more", "visible before");
    drop(f);
    let cut = pc.cut(None);
    assert!(cut.unsynced_write, "{cut:?}");
    assert_eq!(std::fs::read(backing.join("synced")).unwrap(), b"one");
    assert_eq!(std::fs::read(backing.join("unsynced")).unwrap(), b"two", "the append is gone");

    // The next mount starts from what survived; fdatasync covers an append too.
    let pc = PowerCut::mount(&backing, &mnt);
    let f = OpenOptions::new().write(true).open(mnt.join("unsynced")).unwrap();
    f.write_all_at(b"TWO, then three", 0).unwrap();
    f.sync_data().unwrap();
    f.set_len(3).unwrap(); // a truncation not synced
    drop(f);
    pc.cut(None);
    assert_eq!(std::fs::read(backing.join("unsynced")).unwrap(), b"TWO, then three");
}

#[test]
fn a_created_file_synced_without_its_directory_loses_its_name() {
    let (_tmp, backing, mnt, pc) = mounted();
    let mut g = File::create(mnt.join("named-only")).unwrap();
    g.write_all(b"never synced").unwrap();
    sync_dir(&mnt);
    std::fs::create_dir(mnt.join("sub")).unwrap();
    let mut f = File::create(mnt.join("sub/file")).unwrap();
    f.write_all(b"data").unwrap();
    f.sync_all().unwrap();
    sync_dir(&mnt.join("sub")); // `sub` itself is not named durably in the root
    drop((f, g)); // the cut wants no file open on the mount
    pc.cut(None);
    let names: Vec<_> =
        std::fs::read_dir(&backing).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["named-only"], "`sub` was created after the root's last fsync");
    assert_eq!(std::fs::read(backing.join("named-only")).unwrap(), b"", "its data was not synced");

    let pc = PowerCut::mount(&backing, &mnt);
    std::fs::create_dir(mnt.join("sub")).unwrap();
    sync_dir(&mnt);
    durable_file(&mnt.join("sub"), "file", b"data");
    pc.cut(None);
    assert_eq!(std::fs::read(backing.join("sub/file")).unwrap(), b"data");
}

/// Writes `a.tmp` beside `a` and syncs it, renames it over `a`, removes `b`: no directory fsync.
fn replace_a_remove_b(mnt: &Path) {
    let mut t = File::create(mnt.join("a.tmp")).unwrap();
    t.write_all(b"new a").unwrap();
    t.sync_all().unwrap();
    drop(t);
    std::fs::rename(mnt.join("a.tmp"), mnt.join("a")).unwrap();
    std::fs::remove_file(mnt.join("b")).unwrap();
}

#[test]
fn a_rename_or_an_unlink_is_durable_only_with_its_directory() {
    let (_tmp, backing, mnt, pc) = mounted();
    durable_file(&mnt, "a", b"old a");
    durable_file(&mnt, "b", b"old b");
    // A file written beside, synced, renamed over `a`: without the directory's fsync, `a` is
    // the old one after the cut, and `a.tmp` is gone with its name never synced.
    durable_file(&mnt, "keep", b"k");
    replace_a_remove_b(&mnt);
    assert_eq!(std::fs::read(mnt.join("a")).unwrap(), b"new a");
    pc.cut(None);
    assert_eq!(std::fs::read(backing.join("a")).unwrap(), b"old a");
    assert_eq!(std::fs::read(backing.join("b")).unwrap(), b"old b", "the unlink is undone");
    assert!(!backing.join("a.tmp").exists());

    let pc = PowerCut::mount(&backing, &mnt);
    replace_a_remove_b(&mnt);
    sync_dir(&mnt);
    pc.cut(None);
    assert_eq!(std::fs::read(backing.join("a")).unwrap(), b"new a");
    assert!(!backing.join("b").exists() && !backing.join("a.tmp").exists());
}

#[test]
fn a_torn_write_keeps_a_page_aligned_prefix() {
    let (_tmp, backing, mnt, pc) = mounted();
    durable_file(&mnt, "log", &[b'a'; 1000]);
    let f = OpenOptions::new().write(true).open(mnt.join("log")).unwrap();
    // Bytes 1000..13288 cross the boundaries 4096, 8192 and 12288. The kernel may hand the
    // write over in pieces (the first page's part alone, say): the tear applies to the last.
    let write = vec![b'b'; 3 * PAGE as usize];
    f.write_all_at(&write, 1000).unwrap();
    drop(f);
    let cut = pc.cut(Some(1));
    let at = cut.torn_at.expect("a write crossing page boundaries is torn") as usize;
    assert!(at.is_multiple_of(PAGE as usize) && at > 1000 && at < 13288, "{cut:?}");
    let got = std::fs::read(backing.join("log")).unwrap();
    assert_eq!(got.len(), at, "the durable size grows to the boundary");
    assert!(got[..1000].iter().all(|&b| b == b'a'), "the synced bytes are kept");
    assert!(got[at - PAGE as usize..].iter().all(|&b| b == b'b'), "the torn prefix is kept");

    // A write inside one page has no boundary to tear at: it is simply lost.
    let pc = PowerCut::mount(&backing, &mnt);
    let f = OpenOptions::new().write(true).open(mnt.join("log")).unwrap();
    f.write_all_at(b"cc", 10).unwrap();
    drop(f);
    let cut = pc.cut(Some(7));
    assert_eq!((cut.unsynced_write, cut.torn_at), (true, None));
    assert_eq!(std::fs::read(backing.join("log")).unwrap(), got);
}

#[test]
fn a_harness_dropped_with_a_file_still_open_leaves_no_mount_behind() {
    let (_tmp, _backing, mnt, pc) = mounted();
    let f = File::create(mnt.join("open")).unwrap();
    drop(pc); // a failing test's unwinding: the file is still open
    drop(f);
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let needle = format!(" {} ", mnt.display());
    assert!(!mounts.contains(&needle), "still mounted: {mounts}");
}

#[test]
fn the_tear_takes_the_newest_write_still_unsynced_when_a_later_one_was_synced() {
    let (_tmp, backing, mnt, pc) = mounted();
    durable_file(&mnt, "a", b"");
    durable_file(&mnt, "b", b"");
    let a = OpenOptions::new().write(true).open(mnt.join("a")).unwrap();
    a.write_all_at(&vec![b'a'; 2 * PAGE as usize], 0).unwrap();
    drop(a);
    // A later write to another file, synced: the write to `a` is still the one pending.
    let b = OpenOptions::new().write(true).open(mnt.join("b")).unwrap();
    b.write_all_at(b"b", 0).unwrap();
    b.sync_data().unwrap();
    drop(b);
    let cut = pc.cut(Some(0));
    assert_eq!((cut.unsynced_write, cut.torn_at), (true, Some(PAGE)), "{cut:?}");
    assert_eq!(std::fs::read(backing.join("a")).unwrap(), vec![b'a'; PAGE as usize]);
    assert_eq!(std::fs::read(backing.join("b")).unwrap(), b"b");
}
