//! Corruption recovery: damaged sled files never stop the store from opening. Each case damages
//! a store holding known records (deterministically: fixed offsets, fixed bytes), then
//! [`Store::open_or_recover`] must return a store that is either intact (sled's own recovery
//! coped) or fresh with a `Recovery` ledger record naming what was moved aside and what was
//! salvaged from it; either way it keeps working (append, checkpoint, reopen).
//!
//! Salvage with the real binary: a daemon's backlog survives a damaged record (every readable
//! outbox record is acknowledged after the recovery, the lost one is a `corrupt` gap, the alert
//! rebuilt from the archive, the checkpoint's incident goes on as `replay` decides it, and
//! `reconcile` passes); a damaged checkpoint is re-derived from the journal, deciding nothing
//! twice; a store sled cannot open falls back to an empty one that says everything was lost.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use linegate::records::ledger::{LedgerEntry, Salvage};
use linegate::records::outbox::OutboxRecord;
use linegate::store::{Store, StoreOptions};
use serde_json::Value;
use support::{cli, fixture, free_port, ledger, linegate, reconciled, replay, run};

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

/// What a damaged store of [`populated`] kept, counted after [`Store::open_or_recover`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Kept {
    /// Journal records of the 200 that read back: always positions `1..=journal`, unchanged.
    journal: u64,
    /// Outbox records of the 50 that read back.
    outbox: u64,
    /// What the store says it lost.
    declared: Declared,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Declared {
    /// No `Recovery` record: sled opened the store as intact. Whatever is missing was lost
    /// silently (src/store/recovery.rs, "Known limit: silent loss inside sled").
    Nothing,
    /// A `Recovery` record whose salvage failed: everything declared lost.
    Everything,
    /// A `Recovery` record declaring these many journal and outbox records lost.
    Counted { journal: u64, outbox: u64 },
}

impl Kept {
    const ALL: Kept = Kept { journal: 200, outbox: 50, declared: Declared::Nothing };
    const NOTHING_DECLARED_EVERYTHING: Kept =
        Kept { journal: 0, outbox: 0, declared: Declared::Everything };

    /// Opened as intact with only the first `journal` records (sled's silent loss).
    const fn silently(journal: u64, outbox: u64) -> Kept {
        Kept { journal, outbox, declared: Declared::Nothing }
    }
}

/// Inclusive ranges, counted.
fn count(ranges: &[(u64, u64)]) -> u64 {
    ranges.iter().map(|(a, b)| b - a + 1).sum()
}

/// Opens with recovery, counts what the store kept and what it declares lost (a recovery's
/// counts must be those of the records that read back), and checks that it works afterwards
/// (append, checkpoint, reopen without a second recovery).
fn recovers_and_works(dir: &Path) -> Kept {
    let (mut s, rec) = Store::open_or_recover(dir, opts(), NOW).unwrap();
    let journal: Vec<(u64, Vec<u8>)> =
        s.journal_from(1).map(|r| r.unwrap()).map(|(pos, _, bytes)| (pos, bytes)).collect();
    for (i, (pos, bytes)) in journal.iter().enumerate() {
        assert_eq!(*pos, i as u64 + 1, "the journal kept is a prefix of what was written");
        assert_eq!(bytes, &vec![i as u8; 1000], "journal record {pos} unchanged");
    }
    let outbox = s.outbox_pending().collect::<Result<Vec<_>, _>>().unwrap().len() as u64;
    let declared = match &rec {
        Some(r) => {
            assert!(r.moved_to.exists(), "moved-aside copy kept: {r:?}");
            assert!(r.moved_to.file_name().unwrap().to_string_lossy().contains("corrupt-"));
            assert_eq!(recoveries(&s), vec![r.salvage.clone()], "one Recovery record");
            // "decider state" is no decider snapshot: the decide stage could not restore it.
            assert_eq!(s.last_checkpoint().unwrap(), None, "a checkpoint only when usable");
            if r.salvage.failed.is_some() {
                assert!(r.lost.starts_with("everything"), "{}", r.lost);
                Declared::Everything
            } else {
                let copied = |kind: &str| r.salvage.copied.get(kind).copied().unwrap_or(0);
                assert_eq!((copied("journal"), copied("outbox")), (journal.len() as u64, outbox));
                let journal = count(&r.salvage.lost_journal);
                Declared::Counted { journal, outbox: count(&r.salvage.lost_outbox) }
            }
        }
        None => {
            s.startup_check().unwrap();
            // The checkpoint and its 50 outbox records were one batch: both or neither.
            let checkpoint = s.last_checkpoint().unwrap().is_some();
            assert_eq!(outbox, if checkpoint { 50 } else { 0 }, "the checkpoint's batch torn");
            Declared::Nothing
        }
    };
    let pos = s.append_journal(&[(NOW, b"after".to_vec())]).unwrap();
    s.checkpoint(pos.start, b"d2", &[]).unwrap();
    drop(s);
    let (s, again) = Store::open_or_recover(dir, opts(), NOW + 1).unwrap();
    assert!(again.is_none(), "the recovered store opens cleanly: {again:?}");
    assert_eq!(s.last_checkpoint().unwrap().unwrap().decider, b"d2");
    Kept { journal: journal.len() as u64, outbox, declared }
}

/// The salvage reports of the store's `Recovery` ledger records.
fn recoveries(s: &Store) -> Vec<Salvage> {
    let entries = s.ledger_from(1).map(|r| r.unwrap().1.entry);
    entries
        .filter_map(|e| match e {
            LedgerEntry::Recovery { moved_to: Some(_), salvage, .. } => Some(salvage.unwrap()),
            _ => None,
        })
        .collect()
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

/// sled's snapshot file in the closed store `dir`; the test fails when there is none, since
/// damaging it is the point.
fn snapshot(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("snap."))
        .unwrap_or_else(|| panic!("{} has no snap.* file to damage", dir.display()))
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

// The damage below is deterministic (fixed offsets, fixed bytes) and so is what sled makes of
// it: each case names what the store keeps and declares. `Kept::silently` marks sled's known
// limit: a log record failing its checksum is taken as the torn end of the log and dropped with
// everything after it, so the store opens "intact" with less (src/store/recovery.rs).

#[test]
fn truncated_files_open_recovered_or_intact() {
    let _serial = serial();
    for (name, keep, kept) in [
        ("conf", 0, Kept::ALL),
        ("conf", 10, Kept::NOTHING_DECLARED_EVERYTHING),
        ("db", 0, Kept::silently(0, 0)),
        ("db", 100, Kept::silently(0, 0)),
        ("db", 70_000, Kept::silently(26, 0)),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = populated(tmp.path());
        truncate(&dir.join(name), keep);
        assert_eq!(recovers_and_works(&dir), kept, "{name} cut to {keep} bytes");
    }
}

/// sled refuses a store whose snapshot file is cut short, although its log is whole, and so does
/// salvage, which reads through sled: everything is declared lost.
#[test]
fn a_truncated_snapshot_is_recovered_and_everything_declared_lost() {
    let _serial = serial();
    for keep in [0, 7, 40] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = populated(tmp.path());
        // sled writes its snapshot file when it opens a store it did not just create.
        drop(Store::open(&dir, opts()).unwrap());
        truncate(&snapshot(&dir), keep);
        let kept = recovers_and_works(&dir);
        assert_eq!(kept, Kept::NOTHING_DECLARED_EVERYTHING, "snapshot cut to {keep} bytes");
    }
}

#[test]
fn bit_flips_in_the_db_file_open_recovered_or_intact() {
    let _serial = serial();
    for (offset, journal) in [
        (0, 0),
        (13, 0),
        (512, 0),
        (4096, 3),
        (65_536, 26),
        (150_000, 53),
        (262_144, 91),
        (1 << 30, 200),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = populated(tmp.path());
        flip(&dir.join("db"), offset);
        let kept = recovers_and_works(&dir);
        assert_eq!(kept, Kept::silently(journal, 0), "a bit flip at {offset}");
    }
}

#[test]
fn a_garbage_snapshot_file_is_recovered_and_everything_declared_lost() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = populated(tmp.path());
    // A newer snapshot name than any sled wrote, holding garbage (fixed bytes).
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(dir.join("snap.FFFFFFFFFFFFFFF0"), garbage).unwrap();
    assert_eq!(recovers_and_works(&dir), Kept::NOTHING_DECLARED_EVERYTHING);
}

#[test]
fn a_file_where_the_directory_should_be_is_moved_aside_and_everything_declared_lost() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    std::fs::write(&dir, b"not a database").unwrap();
    let (s, rec) = Store::open_or_recover(&dir, opts(), NOW).unwrap();
    let rec = rec.unwrap();
    assert!(rec.salvage.failed.as_ref().unwrap().contains("not a directory"), "{rec:?}");
    assert!(rec.lost.starts_with("everything"), "{}", rec.lost);
    assert_eq!(recoveries(&s), vec![rec.salvage.clone()]);
    assert_eq!((s.outbox_pending().count(), s.next_journal_pos()), (0, 1), "empty");
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(&dir, b"not a database").unwrap();
    assert_eq!(recovers_and_works(&dir), Kept::NOTHING_DECLARED_EVERYTHING);
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
    // As root (who reads them anyway) the permissions change nothing and the store opens intact;
    // as a user sled cannot open it and it is recovered, everything declared lost. Either way it
    // works afterwards.
    let readable = std::fs::read(dir.join("db")).is_ok();
    let kept = if readable { Kept::ALL } else { Kept::NOTHING_DECLARED_EVERYTHING };
    assert_eq!(recovers_and_works(&dir), kept, "files readable anyway: {readable}");
}

#[test]
fn a_record_that_does_not_decode_is_found_at_start_up_and_counted() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = populated(tmp.path());
    damage_outbox(&dir, 3);
    let (s, rec) = Store::open_or_recover(&dir, opts(), NOW).unwrap();
    let rec = rec.expect("recovered");
    assert!(rec.what.contains("o/3"), "names the record: {}", rec.what);
    assert!(rec.lost.contains("outbox sequences lost: 3..=3"), "{}", rec.lost);
    let counts = &rec.salvage.copied;
    assert_eq!((counts["journal"], counts["outbox"]), (200, 49), "{rec:?}");
    assert_eq!(rec.salvage.unreadable["outbox"], 1);
    let seqs: Vec<u64> = s.outbox_pending().map(|r| r.unwrap().0).collect();
    assert_eq!(seqs, (1..=50).filter(|&q| q != 3).collect::<Vec<_>>(), "order and numbers kept");
    assert_eq!(s.journal_from(1).count(), 200);
    assert_eq!(s.next_outbox_seq(), 51, "sequences are never reused");
}

/// Writes bytes that do not decode over outbox record `seq` of the closed store in `dir`.
fn damage_outbox(dir: &Path, seq: u64) {
    support::damage_outbox_record(dir, seq, b"\x01garbage");
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
    assert_eq!(s.outbox_pending().count(), 50, "everything readable salvaged: {}", rec.lost);
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
        assert_eq!(recoveries(&s).len(), 1, "{point}: exactly one recovery recorded");
    }
}

#[cfg(feature = "failpoints")]
#[test]
fn a_salvage_that_fails_or_panics_falls_back_to_an_empty_store() {
    let _serial = serial();
    let _fail = fail::FailScenario::setup();
    for action in ["return", "panic"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = populated(tmp.path());
        damage_outbox(&dir, 3);
        fail::cfg("store::recovery::salvage", action).unwrap();
        let (s, rec) = Store::open_or_recover(&dir, opts(), NOW).unwrap();
        fail::cfg("store::recovery::salvage", "off").unwrap();
        let rec = rec.unwrap();
        let why = rec.salvage.failed.clone().unwrap();
        assert!(why.contains("store::recovery::salvage") || why.contains("panicked"), "{why}");
        assert!(rec.lost.contains("journal positions 1..=200"), "held: {}", rec.lost);
        assert_eq!(recoveries(&s), vec![rec.salvage]);
        assert_eq!((s.outbox_pending().count(), s.next_journal_pos()), (0, 1), "{action}");
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
    assert!(rec.lost.contains("journal positions lost: 16..=32"), "{}", rec.lost);
    assert!(recovers_and_works_with(&dir, raw_opts()));
}

#[test]
fn a_missing_segment_is_found_at_start_up_and_recovered() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = populated_raw(tmp.path());
    std::fs::remove_file(segment(&dir, 193)).unwrap();
    let (s, rec) = Store::open_or_recover(&dir, raw_opts(), NOW).unwrap();
    let rec = rec.expect("recovered");
    assert!(rec.what.contains("00000000000000000193.seg"), "names the segment: {}", rec.what);
    assert!(rec.lost.contains("journal positions lost: 193..=200"), "{}", rec.lost);
    assert_eq!(rec.salvage.copied["raw_segments"], 6, "segments 1..=161 linked");
    assert_eq!(s.journal_from(1).map(|r| r.unwrap().2[0]).last(), Some(191), "record 192 last");
    assert_eq!(s.next_journal_pos(), 201, "positions of lost records are never reused");
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
    assert!(rec.lost.contains("journal positions lost: 70..=70"), "{}", rec.lost);
    assert_eq!(s.journal_from(1).count(), 199);
    s.startup_check().unwrap();
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

// ---- Salvage with the real binary

/// A daemon's store and trace in `tmp`: the first 80 lines of the CWRU trace and a poison line
/// (the machines' incidents have opened, none closed), and the whole input for `replay`.
struct TwoRuns {
    config: PathBuf,
    trace: PathBuf,
    whole: PathBuf,
    rest: String,
}

fn daemon_run_1(tmp: &Path) -> TwoRuns {
    let cwru = std::fs::read_to_string(fixture("fixtures/traces/cwru.jsonl")).unwrap();
    let lines: Vec<&str> = cwru.lines().collect();
    let first =
        format!("{}\n{{\"at\":1700000065100,\"kind\":\"bogus\"}}\n", lines[..80].join("\n"));
    let rest = format!("{}\n", lines[80..].join("\n"));
    let (trace, whole) = (tmp.join("trace.jsonl"), tmp.join("whole.jsonl"));
    std::fs::write(&trace, &first).unwrap();
    std::fs::write(&whole, format!("{first}{rest}")).unwrap();
    let cwru_config = std::fs::read_to_string(fixture("fixtures/traces/cwru.toml")).unwrap();
    let config = tmp.join("linegate.toml");
    let store = format!("[store]\npath = \"{}\"\ncommit_records = 20\n", tmp.join("db").display());
    let metrics = format!("[metrics]\nlisten = \"127.0.0.1:{}\"\n", free_port());
    let source = format!("[[source]]\nkind = \"trace\"\npath = \"{}\"\n", trace.display());
    std::fs::write(&config, format!("{cwru_config}\n{store}\n{metrics}\n{source}")).unwrap();
    run(linegate(&["run", "--exit-at-end", "--no-forward", "--config"]).arg(&config)).success();
    TwoRuns { config, trace, whole, rest }
}

impl TwoRuns {
    /// The rest of the trace arrives, and the daemon runs again, acknowledging what it sends.
    fn run_2(&self) -> Vec<Value> {
        let mut f = std::fs::OpenOptions::new().append(true).open(&self.trace).unwrap();
        std::io::Write::write_all(&mut f, self.rest.as_bytes()).unwrap();
        let mut cmd = linegate(&["run", "--exit-at-end", "--forward", "local-ack", "--config"]);
        run(cmd.arg(&self.config)).success();
        let store = Store::open(&self.config.with_file_name("db"), opts()).unwrap();
        assert_eq!(store.outbox_pending().count(), 0, "every record left was acknowledged");
        drop(store);
        ledger(&self.config)
    }

    /// The archived alert records are those `replay` of the whole input decides, each alert
    /// revision and each event ledgered once; `reconcile` passes. Returns its report.
    fn decides_as_replay(&self, ledger: &[Value]) -> String {
        let want = replay(&self.whole, &self.config, self.config.parent().unwrap());
        let alerts: BTreeSet<String> =
            cli(&["dump", "alerts"], &self.config).lines().map(String::from).collect();
        assert_eq!(alerts, want.alert_lines().into_iter().collect(), "alerts differ from replay");
        let mut ids = BTreeSet::new();
        for e in ledger.iter().filter(|e| e["kind"] == "accepted" || e["kind"] == "alert") {
            let id = format!("{} {} {}", e["event_id"], e["alert_id"], e["revision"]);
            assert!(ids.insert(id.clone()), "decided twice: {id}");
        }
        let accepted = ledger.iter().filter(|e| e["kind"] == "accepted").count();
        assert_eq!(accepted as u64, want.accepted());
        let report = reconciled(&["reconcile"], &self.config);
        assert!(report.contains("the gateway lost nothing it accepted"), "{report}");
        report
    }
}

fn salvage_of(ledger: &[Value]) -> &Value {
    let rec = ledger.iter().find(|e| e["kind"] == "recovery").expect("a recovery record");
    &rec["salvage"]
}

/// The outbox records of the closed store in `dir`: `(seq, record)`.
fn outbox_of(dir: &Path) -> Vec<(u64, OutboxRecord)> {
    let s = Store::open(dir, opts()).unwrap();
    s.outbox_pending()
        .map(|r| r.unwrap())
        .map(|(q, b)| (q, OutboxRecord::decode(&b).unwrap()))
        .collect()
}

#[test]
fn a_damaged_backlog_is_salvaged_acknowledged_and_its_incident_goes_on() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon_run_1(tmp.path());
    let outbox = outbox_of(&tmp.path().join("db"));
    let (event_seq, sensor, seq) = outbox
        .iter()
        .find_map(|(q, r)| match r {
            OutboxRecord::Event { sensor, seq, .. } => Some((*q, sensor.clone(), *seq)),
            _ => None,
        })
        .unwrap();
    let alert_seq = outbox.iter().find(|(_, r)| matches!(r, OutboxRecord::Alert { .. })).unwrap().0;
    damage_outbox(&tmp.path().join("db"), event_seq);
    damage_outbox(&tmp.path().join("db"), alert_seq);
    let ledger = d.run_2();
    let s = salvage_of(&ledger);
    assert_eq!(s["copied"]["outbox"], outbox.len() as u64 - 2, "{s}");
    assert_eq!(
        (s["copied"]["outbox_rebuilt"].as_u64(), s["unreadable"]["outbox"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(
        (s["copied"]["checkpoint"].as_u64(), s["copied"]["quarantine"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(
        s["copied"]["ledger"].as_u64().unwrap() > 0 && s["copied"]["journal"].as_u64().unwrap() > 0
    );
    assert_eq!(s["lost_outbox"], serde_json::json!([[event_seq, event_seq]]));
    let gap =
        ledger.iter().find(|e| e["kind"] == "gap_declared").expect("a gap notice")["gap"].clone();
    assert_eq!(
        (gap["reason"].as_str(), gap["sensor"].as_str()),
        (Some("corrupt"), Some(&sensor[..]))
    );
    assert_eq!(
        (gap["range"]["from_seq"].as_u64(), gap["range"]["to_seq"].as_u64()),
        (Some(seq), Some(seq))
    );
    let report = d.decides_as_replay(&ledger);
    assert!(report.contains("1 lost to a damaged store"), "{report}");
}

#[test]
fn a_damaged_checkpoint_is_re_derived_from_the_journal_deciding_nothing_twice() {
    let _serial = serial();
    // Its header damaged (the start-up check finds it), then only its payload (the header reads,
    // the decide stage could not restore it: `run` recovers the store without it).
    let payload = [&[1u8][..], &81u64.to_be_bytes(), b"\x01not cbor"].concat();
    for damage in [b"\x09broken".to_vec(), payload] {
        let tmp = tempfile::tempdir().unwrap();
        let d = daemon_run_1(tmp.path());
        let db = linegate::store::open_sled_directly(&tmp.path().join("db")).unwrap();
        db.open_tree("state").unwrap().insert("c/", damage).unwrap();
        db.flush().unwrap();
        drop(db);
        let ledger = d.run_2();
        let s = salvage_of(&ledger);
        assert_eq!(s["unreadable"]["checkpoint"], 1, "{s}");
        assert_eq!(s["decided_through"], 81, "the checkpoint's position, from its witness");
        assert!(s["copied"].get("checkpoint").is_none());
        d.decides_as_replay(&ledger);
    }
}

#[test]
fn a_store_sled_cannot_open_falls_back_to_an_empty_one_that_says_everything_was_lost() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = populated(tmp.path());
    std::fs::write(dir.join("conf"), b"garbage that is not a sled config").unwrap();
    let (s, rec) = Store::open_or_recover(&dir, opts(), NOW).unwrap();
    let rec = rec.expect("recovered");
    let why = rec.salvage.failed.clone().expect("nothing salvageable");
    assert!(why.contains("cannot open the sled database"), "{why}");
    assert!(rec.lost.starts_with("everything (nothing salvaged"), "{}", rec.lost);
    assert_eq!(recoveries(&s), vec![rec.salvage.clone()], "the record says so");
    assert_eq!((s.outbox_pending().count(), s.next_journal_pos()), (0, 1), "empty, as before");
    assert!(rec.moved_to.join("db").exists(), "the damaged store kept for diagnosis");
}
