//! Corruption recovery: damaged sled files never stop the store from opening. Each case damages
//! a store holding known records (deterministically: fixed offsets, fixed bytes), then
//! [`Store::open_or_recover`] must return a store that is either intact (sled's own recovery
//! coped) or fresh with a `Recovery` ledger record naming what was moved aside; either way it
//! keeps working (append, checkpoint, reopen).

use std::path::{Path, PathBuf};

use linegate::records::ledger::LedgerEntry;
use linegate::records::outbox::OutboxRecord;
use linegate::store::{Store, StoreOptions};

const NOW: i64 = 1_700_000_000_000;

/// Failpoints are process-wide: the tests recover one at a time so none meets another's fault.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn opts() -> StoreOptions {
    StoreOptions { cache_bytes: 4 << 20, ..StoreOptions::default() }
}

/// A store in `dir/db` with 200 journal records, a checkpoint and 50 outbox records.
fn populated(tmp: &Path) -> PathBuf {
    let dir = tmp.join("db");
    let mut s = Store::open(&dir, opts()).unwrap();
    for i in 0..200u32 {
        s.append_journal(&[(i64::from(i), vec![i as u8; 1000])]).unwrap();
    }
    let adds: Vec<Vec<u8>> = (0..50)
        .map(|i| {
            OutboxRecord::Event {
                machine: "m".into(),
                sensor: "s".into(),
                seq: i,
                event_id: format!("gw.s.{i}"),
                json: b"{}".to_vec(),
            }
            .encode()
        })
        .collect();
    s.checkpoint(200, b"decider state", &adds).unwrap();
    dir
}

/// Opens with recovery and checks the store works; returns whether it was recovered.
fn recovers_and_works(dir: &Path) -> bool {
    let (mut s, rec) = Store::open_or_recover(dir, opts(), NOW).unwrap();
    if let Some(r) = &rec {
        assert!(r.moved_to.exists(), "moved-aside copy kept: {r:?}");
        assert!(r.moved_to.file_name().unwrap().to_string_lossy().contains("corrupt-"));
        let ledger: Vec<_> = s.ledger_from(1).map(|r| r.unwrap().1.entry).collect();
        assert!(
            matches!(&ledger[..], [LedgerEntry::Recovery { moved_to: Some(_), .. }]),
            "{ledger:?}"
        );
        assert_eq!(s.last_checkpoint().unwrap(), None, "starts clean");
    } else {
        // Intact: whatever sled kept decodes. sled treats a record failing its checksum as the
        // torn end of its log and silently drops it and all after it: after a bit flip the store
        // often opens "intact" with fewer records (see src/store/recovery.rs).
        s.startup_check().unwrap();
    }
    let pos = s.append_journal(&[(NOW, b"after".to_vec())]).unwrap();
    s.checkpoint(pos.start, b"d2", &[]).unwrap();
    drop(s);
    let (s, again) = Store::open_or_recover(dir, opts(), NOW + 1).unwrap();
    assert!(again.is_none(), "the recovered store opens cleanly: {again:?}");
    assert_eq!(s.last_checkpoint().unwrap().unwrap().decider, b"d2");
    rec.is_some()
}

fn truncate(file: &Path, keep: u64) {
    std::fs::OpenOptions::new().write(true).open(file).unwrap().set_len(keep).unwrap();
}

fn flip(file: &Path, offset: u64) {
    let mut bytes = std::fs::read(file).unwrap();
    let i = (offset as usize).min(bytes.len() - 1);
    bytes[i] ^= 0xFF;
    std::fs::write(file, bytes).unwrap();
}

fn snapshot(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("snap."))
}

#[test]
fn an_intact_store_opens_without_recovery() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = populated(tmp.path());
    let (s, rec) = Store::open_or_recover(&dir, opts(), NOW).unwrap();
    assert!(rec.is_none());
    assert_eq!(s.outbox_pending().count(), 50);
}

#[test]
fn truncated_files_open_recovered_or_intact() {
    let _serial = serial();
    for (name, keep) in [("conf", 0), ("conf", 10), ("db", 0), ("db", 100), ("db", 70_000)] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = populated(tmp.path());
        truncate(&dir.join(name), keep);
        recovers_and_works(&dir);
    }
}

#[test]
fn a_truncated_snapshot_opens_recovered_or_intact() {
    let _serial = serial();
    for keep in [0, 7, 40] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = populated(tmp.path());
        if let Some(snap) = snapshot(&dir) {
            truncate(&snap, keep);
        }
        recovers_and_works(&dir);
    }
}

#[test]
fn bit_flips_in_the_db_file_open_recovered_or_intact() {
    let _serial = serial();
    for offset in [0, 13, 512, 4096, 65_536, 150_000, 262_144, 1 << 30] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = populated(tmp.path());
        flip(&dir.join("db"), offset);
        recovers_and_works(&dir);
    }
}

#[test]
fn a_garbage_snapshot_file_opens_recovered_or_intact() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = populated(tmp.path());
    // A newer snapshot name than any sled wrote, holding garbage (fixed bytes).
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(dir.join("snap.FFFFFFFFFFFFFFF0"), garbage).unwrap();
    recovers_and_works(&dir);
}

#[test]
fn a_file_where_the_directory_should_be_is_moved_aside() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    std::fs::write(&dir, b"not a database").unwrap();
    assert!(recovers_and_works(&dir));
    assert!(std::fs::read_dir(tmp.path()).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("db.corrupt-")));
}

#[test]
fn unreadable_files_open_recovered_or_intact() {
    let _serial = serial();
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = populated(tmp.path());
    for f in ["db", "conf"] {
        std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o000)).unwrap();
    }
    // As root the permissions change nothing and the store opens intact; as a user it is
    // recovered. Either way it works afterwards.
    recovers_and_works(&dir);
}

#[test]
fn a_record_that_does_not_decode_is_found_at_start_up_and_counted() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = populated(tmp.path());
    {
        let db = linegate::store::open_sled_directly(&dir).unwrap();
        let mut key = b"o/".to_vec();
        key.extend_from_slice(&3u64.to_be_bytes());
        db.open_tree("state").unwrap().insert(key, &b"\x01garbage"[..]).unwrap();
        db.flush().unwrap();
    }
    let (_s, rec) = Store::open_or_recover(&dir, opts(), NOW).unwrap();
    let rec = rec.expect("recovered");
    assert!(rec.what.contains("o/3"), "names the record: {}", rec.what);
    assert!(rec.lost.contains("journal positions 1..=200"), "{}", rec.lost);
    assert!(rec.lost.contains("outbox sequences 1..=50"), "{}", rec.lost);
}

#[test]
fn a_runtime_decode_failure_recovers_into_a_fresh_store() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = populated(tmp.path());
    let s = Store::open(&dir, opts()).unwrap();
    let cause = s.outbox_pending().next().unwrap().map(|_| ()).err();
    let cause = cause.unwrap_or_else(|| linegate::store::StoreError::Refused {
        path: dir.clone(),
        what: "test cause".into(),
    });
    let (s, rec) = s.recover(&cause, NOW).unwrap();
    assert!(rec.lost.contains("outbox sequences 1..=50"), "{}", rec.lost);
    assert_eq!(s.outbox_pending().count(), 0);
    assert!(rec.moved_to.join("db").exists());
}

#[cfg(feature = "failpoints")]
#[test]
fn a_crash_during_recovery_is_finished_by_the_next_start() {
    let _serial = serial();
    let _fail = fail::FailScenario::setup();
    for point in [
        "store::recovery::before_fresh",
        "store::recovery::before_move_aside",
        "store::recovery::before_move_in",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("db");
        std::fs::write(&dir, b"not a database").unwrap();
        fail::cfg(point, "return").unwrap();
        let err = Store::open_or_recover(&dir, opts(), NOW).unwrap_err();
        assert!(err.to_string().contains(point), "{err}");
        fail::cfg(point, "off").unwrap();
        let (s, _) = Store::open_or_recover(&dir, opts(), NOW + 1).unwrap();
        let recoveries = s
            .ledger_from(1)
            .filter(|r| matches!(r.as_ref().unwrap().1.entry, LedgerEntry::Recovery { .. }))
            .count();
        assert_eq!(recoveries, 1, "{point}: exactly one recovery recorded");
    }
}

#[test]
fn a_second_failure_is_a_clear_error_not_a_loop() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    // The parent of the store is a file: neither the store nor its fresh sibling can be created.
    let parent = tmp.path().join("file");
    std::fs::write(&parent, b"x").unwrap();
    let err = Store::open_or_recover(&parent.join("db"), opts(), NOW).unwrap_err();
    assert!(err.to_string().contains("recovery failed"), "{err}");
}

/// A store in `dir/db` whose 200 journal records (2000 bytes each) are in segment files of
/// 64 KiB (32 records each: segments 1, 33, 65, ..., 193), all covered by a checkpoint.
fn populated_raw(tmp: &Path) -> PathBuf {
    let dir = tmp.join("db");
    let mut s = Store::open(&dir, raw_opts()).unwrap();
    for i in 0..200u32 {
        s.append_journal(&[(i64::from(i), vec![i as u8; 2000])]).unwrap();
    }
    s.checkpoint(200, b"decider state", &[]).unwrap();
    dir
}

fn raw_opts() -> StoreOptions {
    StoreOptions { segment_bytes: 64 << 10, ..opts() }
}

fn segment(dir: &Path, id: u64) -> PathBuf {
    dir.join(linegate::store::RAW_DIR).join(format!("{id:020}.seg"))
}

#[test]
fn a_truncated_segment_is_found_at_start_up_and_recovered() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = populated_raw(tmp.path());
    truncate(&segment(&dir, 1), 30_000);
    let rec = Store::open_or_recover(&dir, raw_opts(), NOW).unwrap().1;
    let rec = rec.expect("recovered");
    assert!(rec.what.contains("tree journal, key 16"), "names the first record cut: {}", rec.what);
    assert!(rec.what.contains("00000000000000000001.seg"), "names the segment: {}", rec.what);
    assert!(rec.lost.contains("journal positions 1..=200"), "{}", rec.lost);
    assert!(recovers_and_works_with(&dir, raw_opts()));
}

#[test]
fn a_missing_segment_is_found_at_start_up_and_recovered() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = populated_raw(tmp.path());
    std::fs::remove_file(segment(&dir, 193)).unwrap();
    let (_s, rec) = Store::open_or_recover(&dir, raw_opts(), NOW).unwrap();
    let rec = rec.expect("recovered");
    assert!(rec.what.contains("00000000000000000193.seg"), "names the segment: {}", rec.what);
}

#[test]
fn a_bit_flip_in_a_segment_fails_its_checksum_when_read_and_recovers() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = populated_raw(tmp.path());
    // Record 70 is the 6th of segment 65: past the records the bounded start-up check reads.
    flip(&segment(&dir, 65), 5 * 2000 + 17);
    let (s, rec) = Store::open_or_recover(&dir, raw_opts(), NOW).unwrap();
    assert!(rec.is_none(), "checksums are checked when read, not at start-up: {rec:?}");
    let err = s.journal_from(70).next().unwrap().unwrap_err();
    let text = err.to_string();
    assert!(text.contains("key 70") && text.contains("checksum"), "{text}");
    assert!(s.journal_from(71).next().unwrap().is_ok(), "its neighbours read fine");
    let (s, rec) = s.recover(&err, NOW).unwrap();
    assert!(rec.lost.contains("journal positions 1..=200"), "{}", rec.lost);
    assert_eq!(s.last_checkpoint().unwrap(), None, "starts clean");
}

/// [`recovers_and_works`] with other options.
fn recovers_and_works_with(dir: &Path, o: StoreOptions) -> bool {
    let (mut s, rec) = Store::open_or_recover(dir, o.clone(), NOW).unwrap();
    s.startup_check().unwrap();
    let pos = s.append_journal(&[(NOW, vec![7; 3000])]).unwrap();
    s.checkpoint(pos.start, b"d2", &[]).unwrap();
    drop(s);
    let (s, again) = Store::open_or_recover(dir, o, NOW + 1).unwrap();
    assert!(again.is_none(), "the recovered store opens cleanly: {again:?}");
    assert_eq!(s.journal_from(pos.start).next().unwrap().unwrap().2, vec![7; 3000]);
    rec.is_none()
}
