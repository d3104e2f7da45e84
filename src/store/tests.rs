use super::*;
use crate::records::journal::Origin;

fn small() -> StoreOptions {
    StoreOptions {
        cache_bytes: 1 << 20,
        raw_threshold: 4,
        segment_bytes: 64,
        ..StoreOptions::default()
    }
}

fn open(dir: &Path) -> Store {
    Store::open(dir, small()).unwrap()
}

/// Writes `value` under `key` in `tree` with sled directly (the store closed), opened as the
/// store opens it (sled's IO threads can hold the file lock a moment after the store was dropped:
/// a flake of this test under load).
fn poke(dir: &Path, tree: &str, key: &[u8], value: &[u8]) {
    let db = open_sled_directly(dir).unwrap();
    db.open_tree(tree).unwrap().insert(key, value).unwrap();
    db.flush().unwrap();
}

fn journal(s: &Store) -> Vec<(u64, i64, Vec<u8>)> {
    s.journal_from(1).collect::<Result<_>>().unwrap()
}

#[test]
fn round_trip_across_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let mut s = open(tmp.path());
        assert_eq!(s.append_journal(&[(5, b"a".to_vec()), (-7, vec![])]).unwrap(), 1..3);
        assert_eq!(s.append_journal(&[]).unwrap(), 3..3);
        s.checkpoint(2, b"dec", &[b"x".to_vec(), b"y".to_vec()]).unwrap();
        s.outbox_ack(1).unwrap();
        s.outbox_ack(1).unwrap();
        s.outbox_ack(99).unwrap();
    }
    let mut s = open(tmp.path());
    assert_eq!(journal(&s), vec![(1, 5, b"a".to_vec()), (2, -7, vec![])]);
    assert_eq!(
        s.last_checkpoint().unwrap(),
        Some(Checkpoint { journal_pos: 2, decider: b"dec".to_vec() })
    );
    let pending: Vec<_> = s.outbox_pending().collect::<Result<_>>().unwrap();
    assert_eq!(pending, vec![(2, b"y".to_vec())]);
    s.checkpoint(2, b"dec2", &[b"z".to_vec()]).unwrap();
    let seqs: Vec<u64> = s.outbox_pending().map(|r| r.unwrap().0).collect();
    assert_eq!(seqs, vec![2, 3], "outbox sequences continue after reopen");
}

#[test]
fn truncation_never_lets_a_position_be_reused() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let mut s = open(tmp.path());
        s.append_journal(&[(1, b"a".to_vec()), (2, b"b".to_vec())]).unwrap();
        s.checkpoint(2, b"", &[]).unwrap();
        s.truncate_journal_before(3).unwrap();
        assert!(journal(&s).is_empty());
    }
    let mut s = open(tmp.path());
    assert!(journal(&s).is_empty());
    assert_eq!(s.append_journal(&[(3, b"c".to_vec())]).unwrap(), 3..4);
}

#[test]
fn refuses_what_would_break_invariants() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = open(tmp.path());
    s.append_journal(&[(1, b"a".to_vec())]).unwrap();
    let past_end = s.checkpoint(2, b"", &[]).unwrap_err();
    assert!(matches!(past_end, StoreError::Refused { .. }), "{past_end}");
    s.checkpoint(1, b"", &[]).unwrap();
    assert!(matches!(s.checkpoint(0, b"", &[]), Err(StoreError::Refused { .. })));
    s.append_journal(&[(2, b"b".to_vec())]).unwrap();
    let uncovered = s.truncate_journal_before(3).unwrap_err();
    assert!(matches!(uncovered, StoreError::Refused { .. }), "{uncovered}");
    assert_eq!(journal(&s).len(), 2);
}

#[test]
fn seq_blocks_are_never_reused_across_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    for round in 0..4u64 {
        let mut s = open(tmp.path());
        seen.extend(s.allocate_seq_block("m1", "s1", 10 + round).unwrap());
        seen.extend(s.allocate_seq_block("m1", "s1", 3).unwrap());
        // Another sensor, and a machine/sensor split that concatenates to the same text.
        assert_eq!(s.allocate_seq_block("m", "1s1", 2).unwrap(), 2 * round + 1..2 * round + 3);
        assert_eq!(s.allocate_seq_block("m1", "s1", 0).unwrap().count(), 0);
    }
    let expected: Vec<u64> = (1..=seen.len() as u64).collect();
    assert_eq!(seen, expected, "consecutive, from 1, no repeats");
    let s = open(tmp.path());
    assert_eq!(s.seq_high_water("m1", "s1").unwrap(), seen.len() as u64);
    let marks: Vec<_> = s.seq_marks().collect::<Result<_>>().unwrap();
    assert_eq!(
        marks,
        vec![(("m".into(), "1s1".into()), 8), (("m1".into(), "s1".into()), seen.len() as u64)]
    );
}

fn assert_corrupt(e: StoreError, tree: &str, key: &str) {
    let text = e.to_string();
    match e {
        StoreError::Corrupt { tree: t, key: k, .. } => {
            assert_eq!((t, k.as_str()), (tree, key), "{text}");
            assert!(text.contains(&format!("tree {tree}, key {key}")), "{text}");
        }
        other => panic!("expected Corrupt, got {other}"),
    }
}

#[test]
fn a_garbage_journal_value_is_an_error_naming_tree_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let mut s = open(tmp.path());
        // Two appends: two keys (one append's records share a page, tested in journal_pages).
        s.append_journal(&[(1, b"a".to_vec())]).unwrap();
        s.append_journal(&[(2, b"b".to_vec())]).unwrap();
        s.commit().unwrap();
    }
    poke(tmp.path(), "journal", &2u64.to_be_bytes(), b"\x01bad");
    let s = open(tmp.path());
    let mut it = s.journal_from(1);
    assert_eq!(it.next().unwrap().unwrap(), (1, 1, b"a".to_vec()));
    assert_corrupt(it.next().unwrap().unwrap_err(), "journal", "2");
    // An iterator holds the database open: drop it and the store before writing with sled.
    drop(it);
    drop(s);
    poke(tmp.path(), "journal", &2u64.to_be_bytes(), b"\x07123456789");
    let s = open(tmp.path());
    assert_corrupt(s.journal_from(2).next().unwrap().unwrap_err(), "journal", "2");
}

#[test]
fn garbage_in_state_and_seq_is_an_error_naming_tree_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let mut s = open(tmp.path());
        s.allocate_seq_block("m", "s", 4).unwrap();
    }
    poke(tmp.path(), "seq", &seq_key_for_test("m", "s"), b"abc");
    let s = open(tmp.path());
    assert_corrupt(s.seq_high_water("m", "s").unwrap_err(), "seq", "\\x00\\x00\\x00\\x01ms");
    drop(s);

    poke(tmp.path(), "state", b"c/", b"\x01short");
    assert_corrupt(Store::open(tmp.path(), small()).unwrap_err(), "state", "c/");
    poke(tmp.path(), "state", b"c/", b"\x01\x00\x00\x00\x00\x00\x00\x00\x00");
    poke(tmp.path(), "state", b"n/outbox_next", b"\xff");
    assert_corrupt(Store::open(tmp.path(), small()).unwrap_err(), "state", "n/outbox_next");
    poke(tmp.path(), "state", b"n/outbox_next", &1u64.to_be_bytes());
    poke(tmp.path(), "state", b"o/x", b"");
    assert_corrupt(Store::open(tmp.path(), small()).unwrap_err(), "state", "o/x");
}

fn seq_key_for_test(machine: &str, sensor: &str) -> Vec<u8> {
    let mut k = (machine.len() as u32).to_be_bytes().to_vec();
    k.extend_from_slice(machine.as_bytes());
    k.extend_from_slice(sensor.as_bytes());
    k
}

#[test]
fn a_failed_commit_poisons_the_store_until_reopened() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let moved = tmp.path().join("moved");
    let mut s = open(&dir);
    s.append_journal(&[(1, b"a".to_vec())]).unwrap();
    s.commit().unwrap();
    s.append_journal(&[(2, b"b".to_vec())]).unwrap();
    // The directory vanishes under the store: sled's open files still work, our fsync does not.
    std::fs::rename(&dir, &moved).unwrap();
    let failed = s.commit().unwrap_err();
    assert!(matches!(failed, StoreError::Fsync { .. }), "{failed}");
    for e in [
        s.append_journal(&[(3, b"c".to_vec())]).map(drop).unwrap_err(),
        s.checkpoint(1, b"", &[b"o".to_vec()]).unwrap_err(),
        s.outbox_ack(1).unwrap_err(),
        s.allocate_seq_block("m", "s", 1).map(drop).unwrap_err(),
        s.commit().unwrap_err(),
    ] {
        assert!(matches!(e, StoreError::Poisoned { .. }), "{e}");
    }
    // A refusal writes nothing and does not poison.
    let tmp2 = tempfile::tempdir().unwrap();
    let mut t = open(tmp2.path());
    assert!(matches!(t.checkpoint(5, b"", &[]), Err(StoreError::Refused { .. })));
    t.append_journal(&[(1, b"a".to_vec())]).unwrap();
    drop(s);
    let s = open(&moved);
    assert_eq!(journal(&s).first(), Some(&(1, 1, b"a".to_vec())));
}

#[cfg(feature = "failpoints")]
#[test]
fn failpoints_fail_the_call_at_each_boundary() {
    let _serial = reopen_test_lock();
    let scenario = fail::FailScenario::setup();
    let tmp = tempfile::tempdir().unwrap();
    // (failpoint, what to call): each injection poisons the store, so each gets a fresh open.
    type Call = fn(&mut Store) -> Result<()>;
    let calls: [(&str, Call); 7] = [
        ("store::journal::after_append", |s| s.append_journal(&[(1, b"x".to_vec())]).map(drop)),
        ("store::segments::after_write", |s| {
            s.append_journal(&[(1, b"raw line".to_vec())]).map(drop)
        }),
        ("store::segments::before_fsync", |s| s.commit()),
        ("store::commit::before_fsync", |s| s.commit()),
        ("store::checkpoint::before_apply", |s| s.checkpoint(1, b"d", &[b"o".to_vec()])),
        ("store::checkpoint::after_apply", |s| s.checkpoint(1, b"d", &[b"o".to_vec()])),
        ("store::outbox::before_ack", |s| s.outbox_ack(1)),
    ];
    {
        let mut s = open(tmp.path());
        s.append_journal(&[(1, b"a".to_vec())]).unwrap();
        s.commit().unwrap();
    }
    for (point, call) in calls {
        let mut s = open(tmp.path());
        if point == "store::outbox::before_ack" {
            s.checkpoint(1, b"d", &[b"o".to_vec()]).unwrap();
        }
        let pending = s.outbox_pending().count();
        fail::cfg(point, "return").unwrap();
        match call(&mut s) {
            Err(StoreError::Injected { point: p }) => assert_eq!(p, point),
            other => panic!("expected injection at {point}, got {other:?}"),
        }
        fail::remove(point);
        assert!(matches!(s.commit(), Err(StoreError::Poisoned { .. })));
        if point == "store::segments::after_write" {
            assert!(journal(&s).iter().all(|r| r.2 != b"raw line"), "no reference inserted");
        }
        if point == "store::checkpoint::before_apply" {
            assert_eq!(s.last_checkpoint().unwrap(), None, "nothing applied");
        }
        if point == "store::outbox::before_ack" {
            assert_eq!(s.outbox_pending().count(), pending, "not acknowledged");
        }
    }
    scenario.teardown();
}

#[test]
fn ledger_records_commit_with_their_change_and_survive_reopen() {
    use crate::records::ledger::{LedgerEntry, LedgerRecord};
    let tmp = tempfile::tempdir().unwrap();
    let dup =
        |j| LedgerRecord::new(1, LedgerEntry::Duplicate { event_id: "e".into(), journal_pos: j });
    {
        let mut s = open(tmp.path());
        s.append_journal(&[(1, b"a".to_vec()), (2, b"b".to_vec())]).unwrap();
        assert_eq!(s.next_outbox_seq(), 1);
        s.checkpoint_with_ledger(2, b"d", &[b"x".to_vec(), b"y".to_vec()], &[dup(1), dup(2)])
            .unwrap();
        assert_eq!(s.next_outbox_seq(), 3);
        let ack = LedgerRecord::new(9, LedgerEntry::Acknowledged { outbox_seqs: vec![1, 2, 77] });
        s.outbox_ack_many(&[1, 2, 77], std::slice::from_ref(&ack)).unwrap();
        assert_eq!(s.outbox_pending().count(), 0);
        assert_eq!(s.next_ledger_seq(), 4);
    }
    let mut s = open(tmp.path());
    let ledger: Vec<_> = s.ledger_from(1).collect::<Result<_>>().unwrap();
    assert_eq!(ledger.iter().map(|(k, _)| *k).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(ledger[1].1, dup(2));
    assert_eq!(s.ledger_from(3).count(), 1);
    s.append_ledger(&[dup(3)]).unwrap();
    assert_eq!(s.ledger_from(4).map(|r| r.unwrap().0).collect::<Vec<_>>(), vec![4]);
}

/// The ledger records of one batch are one sled value (a page), read back record by record:
/// from the middle of a page, backwards, after a reopen, and after pruning part of it.
#[test]
fn a_batch_of_ledger_records_is_one_page_read_record_by_record() {
    use crate::records::ledger::{LedgerEntry, LedgerRecord};
    let tmp = tempfile::tempdir().unwrap();
    let dup = |j| {
        LedgerRecord::new(j as i64, LedgerEntry::Duplicate { event_id: "e".into(), journal_pos: j })
    };
    let seqs = |it: &mut dyn Iterator<Item = Result<(u64, LedgerRecord)>>| -> Vec<u64> {
        it.map(|r| r.unwrap().0).collect()
    };
    {
        let mut s = open(tmp.path());
        s.append_ledger(&[dup(1)]).unwrap();
        s.append_ledger(&(2..=6).map(dup).collect::<Vec<_>>()).unwrap();
        s.append_ledger(&[dup(7), dup(8)]).unwrap();
        let keys = s.state.scan_prefix(super::ledger::LEDGER).count();
        assert_eq!(keys, 3, "one key per batch");
        let second = s.state.get(super::ledger::ledger_key(2)).unwrap().unwrap();
        assert_eq!(second[0], super::page::PACKED, "the ledger's pages are packed");
    }
    let s = open(tmp.path());
    assert_eq!(s.next_ledger_seq(), 9, "the last page's records count");
    assert_eq!(seqs(&mut s.ledger_from(1)), (1..=8).collect::<Vec<_>>());
    assert_eq!(seqs(&mut s.ledger_from(4)), (4..=8).collect::<Vec<_>>());
    assert_eq!(s.ledger_from(4).next().unwrap().unwrap().1, dup(4));
    assert_eq!(seqs(&mut s.ledger_back()), (1..=8).rev().collect::<Vec<_>>());
    // Pruning through 3 keeps 4..=6 of the second page, under 4.
    let mut batch = sled::Batch::default();
    s.ledger_remove_through(&mut batch, 3).unwrap();
    s.state.apply_batch(batch).unwrap();
    assert_eq!(seqs(&mut s.ledger_from(1)), (4..=8).collect::<Vec<_>>());
    assert_eq!(s.ledger_from(5).next().unwrap().unwrap().1, dup(5));
    let mut batch = sled::Batch::default();
    s.ledger_remove_through(&mut batch, 5).unwrap();
    s.state.apply_batch(batch).unwrap();
    assert_eq!(seqs(&mut s.ledger_from(1)), vec![6, 7, 8]);
    s.commit().unwrap();
    drop(s);
    let s = open(tmp.path());
    assert_eq!(seqs(&mut s.ledger_from(1)), vec![6, 7, 8]);
    assert_eq!(s.next_ledger_seq(), 9);
}

/// A record on a page that does not decode is reported with the page's key and its own
/// sequence; the records around it still read.
#[test]
fn a_damaged_record_on_a_ledger_page_names_the_page_and_the_record() {
    use crate::records::ledger::{LedgerEntry, LedgerRecord};
    let tmp = tempfile::tempdir().unwrap();
    let dup =
        |j| LedgerRecord::new(1, LedgerEntry::Duplicate { event_id: "e".into(), journal_pos: j });
    {
        let mut s = open(tmp.path());
        s.append_ledger(&[dup(1), dup(2), dup(3)]).unwrap();
    }
    let recs = [dup(1).encode(), vec![1, 0xff], dup(3).encode()];
    let mut key = b"l/".to_vec();
    key.extend_from_slice(&1u64.to_be_bytes());
    poke(tmp.path(), STATE, &key, &super::page::encode(recs.iter().map(Vec::as_slice)));
    let s = open(tmp.path());
    let all: Vec<_> = s.ledger_from(1).collect();
    assert_eq!(all.len(), 3);
    let err = all[1].as_ref().unwrap_err().to_string();
    assert!(err.contains("key l/2") && err.contains("on the page under l/1"), "{err}");
    assert_eq!(all[2].as_ref().unwrap().0, 3);
}

#[test]
fn a_ledger_value_that_does_not_decode_names_its_key() {
    let tmp = tempfile::tempdir().unwrap();
    open(tmp.path());
    let mut key = b"l/".to_vec();
    key.extend_from_slice(&5u64.to_be_bytes());
    poke(tmp.path(), STATE, &key, &[1, 0xff]);
    let s = open(tmp.path());
    assert_eq!(s.next_ledger_seq(), 6, "a damaged record's sequence is never reused");
    let err = s.ledger_from(1).next().unwrap().unwrap_err().to_string();
    assert!(err.contains("key l/5") && err.contains("ledger record"), "{err}");
}

/// Records with an origin (format version 2, what `linegate run` writes) pass the start-up check:
/// it once accepted only version 1 at the journal's end, and moved every such store aside.
#[test]
fn journal_records_with_an_origin_pass_the_startup_check() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("db");
    {
        let mut s = open(&path);
        let origin = Origin { source: 0, end_offset: 42 };
        s.append_journal_from(&[(5, origin, b"line".to_vec())]).unwrap();
        s.commit().unwrap();
        s.startup_check().unwrap();
    }
    let (s, recovered) = Store::open_or_recover(&path, small(), 0).unwrap();
    assert_eq!(recovered, None);
    assert_eq!(s.journal_last_offset(0, 0).unwrap(), Some(42));
}

/// Records prepared outside the store (as the ingest does before it takes the lock) are
/// journaled exactly as `append_journal_from` journals them, across pages and a reopen; a line
/// long enough for a segment file is left to `append_journal_from`.
#[test]
fn a_prepared_journal_is_written_as_the_store_writes_it() {
    let opts = StoreOptions { raw_threshold: 64, ..small() };
    let records: Vec<(i64, Origin, Vec<u8>)> = (0..900)
        .map(|i| (i, Origin { source: 1, end_offset: 10 * i as u64 }, format!("line {i}").into()))
        .collect();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let written = |dir: &Path, prepared: bool| {
        {
            let mut s = Store::open(dir, opts.clone()).unwrap();
            s.append_journal(&[(0, b"before".to_vec())]).unwrap();
            let range = if prepared {
                let p = PreparedJournal::new(&records, opts.raw_threshold).unwrap();
                s.append_prepared_journal(p).unwrap()
            } else {
                s.append_journal_from(&records).unwrap()
            };
            assert_eq!(range, 2..902);
            assert!(s.journal.len() > 2, "more than one page");
            s.commit().unwrap();
        }
        let s = Store::open(dir, opts.clone()).unwrap();
        assert_eq!(s.next_journal_pos(), 902);
        let pages: Vec<_> = s.journal.iter().collect::<sled::Result<_>>().unwrap();
        (s.journal_records_from(1).collect::<Result<Vec<_>>>().unwrap(), pages)
    };
    let (by_store, by_prepared) = (written(a.path(), false), written(b.path(), true));
    assert_eq!(by_store.0.len(), 901);
    assert_eq!(by_prepared, by_store, "the same records under the same keys and values");
    let long = [(0, Origin { source: 1, end_offset: 1 }, vec![b'x'; 64])];
    assert!(PreparedJournal::new(&long, opts.raw_threshold).is_none());
}

#[test]
fn raw_lines_live_in_segments_and_whole_segments_go_when_unreferenced() {
    let tmp = tempfile::tempdir().unwrap();
    let seg_files = |dir: &Path| std::fs::read_dir(dir.join(RAW_DIR)).unwrap().count();
    let lines: Vec<(i64, Vec<u8>)> =
        (0..40).map(|i| (i, format!("raw line {i:04}").into_bytes())).collect();
    {
        let mut s = open(tmp.path());
        s.append_journal(&lines).unwrap();
        s.append_journal(&[(99, b"ev".to_vec())]).unwrap();
        s.commit().unwrap();
        // 13-byte lines, 64-byte segments: 4 lines each.
        assert_eq!(seg_files(tmp.path()), 10);
        let all = journal(&s);
        assert_eq!(all.len(), 41);
        assert_eq!(all[7], (8, 7, b"raw line 0007".to_vec()));
    }
    let mut s = open(tmp.path());
    assert_eq!(journal(&s)[39], (40, 39, b"raw line 0039".to_vec()));
    s.checkpoint(41, b"", &[]).unwrap();
    // Records 1..=10 go: segments 1 and 5 (records 1-8) are unreferenced, segment 9 (9-12) is not.
    s.truncate_journal_before(11).unwrap();
    s.commit().unwrap();
    let mut ids: Vec<String> = std::fs::read_dir(tmp.path().join(RAW_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    assert_eq!(ids.len(), 8, "{ids:?}");
    assert_eq!(ids[0], "00000000000000000009.seg");
    assert_eq!(journal(&s)[0], (11, 10, b"raw line 0010".to_vec()));
}

#[test]
fn a_reference_past_its_segment_after_the_checkpoint_is_dropped_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let mut s = open(tmp.path());
        s.append_journal(&[(1, b"raw one".to_vec()), (2, b"raw two".to_vec())]).unwrap();
        s.checkpoint(1, b"", &[]).unwrap();
    }
    // A power loss that kept sled's reference to record 2 but not its bytes.
    let seg = tmp.path().join(RAW_DIR).join("00000000000000000001.seg");
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(7).unwrap();
    drop(f);
    let mut s = open(tmp.path());
    assert_eq!(journal(&s), vec![(1, 1, b"raw one".to_vec())]);
    assert_eq!(s.append_journal(&[(3, b"raw three".to_vec())]).unwrap(), 2..3);
    s.commit().unwrap();
    assert_eq!(journal(&s)[1], (2, 3, b"raw three".to_vec()));
}

#[test]
fn an_applied_checkpoint_is_readable_at_once_and_durable_after_its_commit() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let mut s = open(tmp.path());
        s.append_journal(&[(1, b"a".to_vec()), (2, b"b".to_vec())]).unwrap();
        assert!(s.needs_commit());
        s.apply_checkpoint_with_archive(2, b"d", &[b"alert".to_vec()], &[], &[]).unwrap();
        // The appends it covers were committed first; the batch itself waits for a commit.
        assert!(s.needs_commit(), "applied, not yet durable");
        assert_eq!(s.outbox_after(0, 9).unwrap(), vec![(1, b"alert".to_vec())]);
        assert_eq!(s.last_checkpoint().unwrap().map(|c| c.journal_pos), Some(2));
        assert!(matches!(
            s.apply_checkpoint_with_archive(2, b"d", &[], &[], &[(b"x/1".to_vec(), vec![])]),
            Err(StoreError::Refused { .. })
        ));
        // A commit takes `&self`: here on another thread while this one reads.
        std::thread::scope(|t| {
            let committing = t.spawn(|| s.commit());
            assert_eq!(s.outbox_after(0, 9).unwrap().len(), 1);
            committing.join().unwrap().unwrap();
        });
        assert!(!s.needs_commit());
    }
    let s = open(tmp.path());
    assert_eq!(s.outbox_after(0, 9).unwrap(), vec![(1, b"alert".to_vec())]);
    assert_eq!(
        s.last_checkpoint().unwrap(),
        Some(Checkpoint { journal_pos: 2, decider: b"d".to_vec() })
    );
}

#[test]
fn source_positions_go_in_the_checkpoint_batch_and_an_old_store_has_none() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let mut s = open(tmp.path());
        assert!(s.source_positions().unwrap().is_empty(), "absent in a store without them");
        s.append_journal(&[(1, b"a".to_vec())]).unwrap();
        let puts = [super::source_position_put(0, 120), super::source_position_put(3, 7)];
        s.apply_checkpoint_with_archive(1, b"d", &[], &[], &puts).unwrap();
        s.commit().unwrap();
    }
    let s = open(tmp.path());
    assert_eq!(s.source_positions().unwrap().into_iter().collect::<Vec<_>>(), [(0, 120), (3, 7)]);
    drop(s);
    poke(tmp.path(), "state", b"n/source/\x00\x01", b"\x01");
    let s = open(tmp.path());
    assert_corrupt(s.startup_check().unwrap_err(), "state", "n/source/\\x00\\x01");
}

#[test]
fn the_last_restart_recovery_and_start_positions_are_kept_beside_the_ledger() {
    use crate::records::ledger::{LedgerEntry, LedgerRecord};
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(s.last_restart_and_recovery().unwrap(), None, "nothing kept yet: callers walk");
    assert!(s.start_positions().is_empty());
    let restart = |journal_next| {
        let e = LedgerEntry::Restart { checkpoint_pos: 0, journal_next, outbox_pending: 0 };
        LedgerRecord::new(journal_next as i64, e)
    };
    let recovery = LedgerRecord::new(
        7,
        LedgerEntry::Recovery { what: "w".into(), moved_to: None, lost: "l".into(), salvage: None },
    );
    s.append_ledger(&[recovery.clone(), restart(1)]).unwrap();
    for p in 2..=20 {
        s.append_ledger(&[restart(p * 10)]).unwrap();
    }
    let (r, v) = s.last_restart_and_recovery().unwrap().unwrap();
    assert_eq!(r, Some(restart(200)));
    assert_eq!(v, Some(recovery));
    assert_eq!(s.start_positions(), (5..=20).map(|p| p * 10).collect::<Vec<u64>>());
    drop(s);
    let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(s.start_positions().len(), 16, "durable");
}
