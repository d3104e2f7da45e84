use super::*;
use crate::records::ledger::{Acceptance, LedgerEntry, LedgerRecord};
use crate::store::StoreOptions;

fn accepted(seq: u64, outbox_seq: u64) -> LedgerRecord {
    let entry = LedgerEntry::Accepted {
        event_id: format!("gw.s.{seq}"),
        machine: "m".into(),
        sensor: "s".into(),
        seq,
        ts_ms: 1000 * seq as i64,
        how: Acceptance::Applied,
        journal_pos: seq,
        outbox_seq,
        counted: false,
        rules: Vec::new(),
        watermark_ms: None,
    };
    LedgerRecord::new(seq as i64, entry)
}

fn event(seq: u64) -> Vec<u8> {
    let (machine, sensor, event_id) = ("m".into(), "s".into(), format!("gw.s.{seq}"));
    OutboxRecord::Event { machine, sensor, seq, event_id, json: b"{}".to_vec() }.encode()
}

#[test]
fn losses_tied_to_a_sensor_become_corrupt_gaps_and_nothing_is_renumbered() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let opts = StoreOptions { cache_bytes: 4 << 20, ..StoreOptions::default() };
    let ledger: Vec<LedgerRecord> = (1..=5).map(|q| accepted(q, q)).collect();
    {
        let mut s = Store::open(&dir, opts.clone()).unwrap();
        for i in 0..5u8 {
            s.append_journal(&[(i64::from(i), vec![i; 2000])]).unwrap();
        }
        let samples = OutboxRecord::Samples {
            machine: "m".into(),
            sensor: "s".into(),
            journal_pos: 2,
            t0_ms: 5000,
            rate_hz: 100.0,
            n: 150,
            frame: None,
        };
        // Journal record 4's block with its encoded frame, which stays behind in the old
        // segment files: the salvaged record names none.
        let framed = OutboxRecord::Samples {
            machine: "m".into(),
            sensor: "s".into(),
            journal_pos: 4,
            t0_ms: 7000,
            rate_hz: 100.0,
            n: 100,
            frame: Some(s.append_frame(b"a frame").unwrap().unwrap()),
        };
        let mut outbox: Vec<Vec<u8>> = (1..=5).map(event).collect();
        outbox.push(samples.encode());
        outbox.push(framed.encode());
        s.checkpoint_with_ledger(5, b"not a decider snapshot", &outbox, &ledger).unwrap();
    }
    {
        let db = crate::store::open_sled_directly(&dir).unwrap();
        let state = db.open_tree("state").unwrap();
        // Ledger record 3 accepted seq 3 (on the page of the checkpoint's five, under l/1);
        // journal record 2 is the samples' line.
        let mut records: Vec<Vec<u8>> = ledger.iter().map(LedgerRecord::encode).collect();
        records[2] = b"\x01junk".to_vec();
        let page = crate::store::page::encode(records.iter().map(Vec::as_slice));
        state.insert([&b"l/"[..], &1u64.to_be_bytes()].concat(), page).unwrap();
        let journal = db.open_tree("journal").unwrap();
        journal.insert(2u64.to_be_bytes(), &b"\x07"[..]).unwrap();
        db.flush().unwrap();
    }
    let (s, rec) = Store::open_or_recover(&dir, opts, 1).unwrap();
    let rec = rec.unwrap();
    assert_eq!(rec.salvage.lost_ledger, vec![(3, 3)]);
    assert_eq!(rec.salvage.lost_journal, vec![(2, 2)]);
    assert_eq!(rec.salvage.decided_through, Some(5), "{rec:?}");
    assert_eq!(s.decided_through().unwrap(), Some(5));
    assert_eq!(s.last_checkpoint().unwrap(), None, "not a snapshot the decide stage can use");
    assert_eq!(s.seq_high_water("m", "s").unwrap(), 5, "derived seqs go on after 5");
    let gaps: Vec<GapRange> = s
        .outbox_pending()
        .filter_map(|r| match OutboxRecord::decode(&r.unwrap().1).unwrap() {
            OutboxRecord::Gap(g) if g.reason == GapNotice::CORRUPT => Some(g.range),
            _ => None,
        })
        .collect();
    let events = GapRange::Events { from_seq: 3, to_seq: 3 };
    let samples = GapRange::Samples { from_ms: 5000, to_ms: 6500 };
    assert_eq!(gaps, vec![samples, events]);
    let seqs: Vec<u64> = s.outbox_pending().map(|r| r.unwrap().0).take(5).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5], "the events keep their sequences");
    let n = s.outbox_pending().count() as u64;
    assert_eq!(s.outbox_records(), n, "the kept count: the salvaged pages, then the gaps");
    let framed: Vec<OutboxRecord> = s
        .outbox_pending()
        .map(|r| OutboxRecord::decode(&r.unwrap().1).unwrap())
        .filter(|r| matches!(r, OutboxRecord::Samples { .. }))
        .collect();
    assert!(
        matches!(framed[..], [OutboxRecord::Samples { journal_pos: 4, frame: None, .. }]),
        "{framed:?}"
    );
    assert_eq!(s.next_journal_pos(), 6);
    assert_eq!(s.journal_from(1).count(), 4);
}

#[test]
fn ranges_join_neighbours_and_stop_at_the_cap() {
    assert_eq!(ranges([1, 2, 3, 5, 7, 8].into_iter()), vec![(1, 3), (5, 5), (7, 8)]);
    let many = ranges((0..10 * MAX_RANGES as u64).map(|n| n * 2));
    assert_eq!(many.len(), MAX_RANGES);
}

#[test]
fn touching_gaps_of_raw_samples_merge_per_sensor() {
    let gap = |sensor: &str, from_ms, to_ms| {
        corrupt_gap("m".into(), sensor.into(), GapRange::Samples { from_ms, to_ms }, 0)
    };
    let events =
        corrupt_gap("m".into(), "a".into(), GapRange::Events { from_seq: 1, to_seq: 2 }, 0);
    let gaps = vec![
        gap("a", 0, 1000),
        gap("b", 0, 1000),
        gap("a", 1000, 2000),
        events.clone(),
        gap("a", 3000, 4000),
    ];
    let want = vec![gap("a", 0, 2000), gap("b", 0, 1000), events, gap("a", 3000, 4000)];
    assert_eq!(ledger::merge_sample_gaps(gaps), want);
}

/// A salvage that keeps the checkpoint keeps the pages of the duplicate memory beside it; when
/// the caller's decoder does not read one of them, the checkpoint is not kept either (the decide
/// stage re-derives); without a decoder, the pages are copied as they are.
#[test]
fn duplicate_memory_pages_go_with_their_checkpoint() {
    // The page format is the rule's: here a made-up one, 36 bytes a page.
    let page = vec![7u8; 36];
    let reads: crate::store::PageCheck = |p| p.len() == 36;
    for (damaged_page, check) in [(false, Some(reads)), (true, Some(reads)), (true, None)] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("db");
        let opts = StoreOptions {
            cache_bytes: 4 << 20,
            dedup_page_check: check,
            ..StoreOptions::default()
        };
        {
            let mut s = Store::open(&dir, opts.clone()).unwrap();
            s.append_journal(&[(1, b"x".to_vec())]).unwrap();
            let payload = crate::records::checkpoint::CheckpointPayload {
                decider: crate::records::snapshot::encode(&1u8),
                offsets: Default::default(),
                rule_version: String::new(),
                rule_versions: Vec::new(),
            };
            let change = crate::store::DedupChange { add: vec![(1, page.clone())], remove: vec![] };
            s.apply_checkpoint_with_dedup(1, &payload.encode(), &[event(1)], &[], &[], &change)
                .unwrap();
            s.commit().unwrap();
        }
        {
            let db = crate::store::open_sled_directly(&dir).unwrap();
            let state = db.open_tree("state").unwrap();
            // An outbox record that does not decode: the start-up check fails, a salvage runs.
            state.insert([&b"o/"[..], &1u64.to_be_bytes()].concat(), &b"\x01junk"[..]).unwrap();
            if damaged_page {
                state.insert([&b"d/"[..], &1u64.to_be_bytes()].concat(), &page[..35]).unwrap();
            }
            db.flush().unwrap();
        }
        let (s, rec) = Store::open_or_recover(&dir, opts, 1).unwrap();
        assert!(rec.is_some(), "a salvage ran");
        let pages: Vec<(u64, Vec<u8>)> = s.dedup_pages().collect::<Result<_>>().unwrap();
        let kept = s.last_checkpoint().unwrap().map(|c| c.journal_pos);
        match (damaged_page, check) {
            (true, Some(_)) => assert_eq!((pages, kept), (vec![], None)),
            (true, None) => assert_eq!((pages, kept), (vec![(1, page[..35].to_vec())], Some(1))),
            (false, _) => assert_eq!((pages, kept), (vec![(1, page.clone())], Some(1))),
        }
    }
}

/// A checkpoint in several parts is kept whole by a salvage, parts and all; with a part missing
/// it is not kept (the decide stage re-derives) and its position is still read from `c/`.
#[test]
fn a_checkpoint_in_parts_is_kept_whole_or_not_at_all() {
    let mut x: u64 = 1;
    let numbers: Vec<u64> = (0..6000)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            x
        })
        .collect();
    for missing_part in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("db");
        let opts = StoreOptions { cache_bytes: 4 << 20, ..StoreOptions::default() };
        let payload = crate::records::checkpoint::CheckpointPayload {
            decider: crate::records::snapshot::encode(&numbers),
            offsets: Default::default(),
            rule_version: String::new(),
            rule_versions: Vec::new(),
        };
        {
            let mut s = Store::open(&dir, opts.clone()).unwrap();
            s.append_journal(&[(1, b"x".to_vec())]).unwrap();
            let none = crate::store::DedupChange::default();
            s.apply_checkpoint_with_dedup(1, &payload.encode(), &[event(1)], &[], &[], &none)
                .unwrap();
            s.commit().unwrap();
        }
        {
            let db = crate::store::open_sled_directly(&dir).unwrap();
            let state = db.open_tree("state").unwrap();
            let parts = state.scan_prefix(b"c/").count();
            assert!(parts >= 4, "the snapshot takes {parts} values");
            state.insert([&b"o/"[..], &1u64.to_be_bytes()].concat(), &b"\x01junk"[..]).unwrap();
            if missing_part {
                state.remove([&b"c/"[..], &2u16.to_be_bytes()].concat()).unwrap();
            }
            db.flush().unwrap();
        }
        let (s, rec) = Store::open_or_recover(&dir, opts, 1).unwrap();
        assert!(rec.is_some(), "a salvage ran");
        let kept = s.last_checkpoint().unwrap();
        if missing_part {
            assert_eq!(kept, None);
            assert_eq!(s.decided_through().unwrap(), Some(1), "the position in c/ still counts");
        } else {
            let cp = kept.expect("kept");
            assert_eq!((cp.journal_pos, cp.decider), (1, payload.encode()));
        }
    }
}

/// A page whose framing does not decode loses its records up to the next key, and no more;
/// the records of the pages around it are salvaged.
#[test]
fn a_page_whose_framing_is_damaged_loses_its_records_up_to_the_next_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let opts = StoreOptions { cache_bytes: 4 << 20, ..StoreOptions::default() };
    {
        let mut s = Store::open(&dir, opts.clone()).unwrap();
        s.append_journal(&[(1, b"x".to_vec()), (2, b"y".to_vec())]).unwrap();
        s.checkpoint(1, b"d", &[event(1), event(2), event(3)]).unwrap();
        s.checkpoint(2, b"d", &[event(4), event(5)]).unwrap();
    }
    {
        let db = crate::store::open_sled_directly(&dir).unwrap();
        let state = db.open_tree("state").unwrap();
        let key = [&b"o/"[..], &1u64.to_be_bytes()].concat();
        let page = state.get(&key).unwrap().unwrap();
        state.insert(&key, &page[..page.len() - 1]).unwrap();
        db.flush().unwrap();
    }
    let (s, rec) = Store::open_or_recover(&dir, opts, 1).unwrap();
    let rec = rec.expect("a salvage ran");
    assert_eq!(rec.salvage.lost_outbox, vec![(1, 3)], "{rec:?}");
    let seqs: Vec<u64> = s.outbox_pending().map(|r| r.unwrap().0).collect();
    assert!(seqs.ends_with(&[4, 5]) && !seqs.iter().any(|q| (1..=3).contains(q)), "{seqs:?}");
    assert!(s.next_outbox_seq() >= 6, "sequences are never reused");
}

/// The journal's pages too: a page whose framing does not decode loses its positions up to the
/// next key; the records on the pages around it are salvaged, and positions are not reused.
#[test]
fn a_journal_page_whose_framing_is_damaged_loses_its_positions_up_to_the_next_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let opts = StoreOptions { cache_bytes: 4 << 20, ..StoreOptions::default() };
    {
        let mut s = Store::open(&dir, opts.clone()).unwrap();
        for first in [1u8, 4, 7] {
            let lines: Vec<(i64, Vec<u8>)> =
                (first..first + 3).map(|i| (i64::from(i), vec![i; 10])).collect();
            s.append_journal(&lines).unwrap();
        }
        s.checkpoint(9, b"d", &[]).unwrap();
    }
    {
        let db = crate::store::open_sled_directly(&dir).unwrap();
        let journal = db.open_tree("journal").unwrap();
        let key = 4u64.to_be_bytes();
        let page = journal.get(key).unwrap().unwrap();
        journal.insert(key, &page[..page.len() - 1]).unwrap();
        db.flush().unwrap();
    }
    let (s, rec) = Store::open_or_recover(&dir, opts, 1).unwrap();
    let rec = rec.expect("a salvage ran");
    assert_eq!(rec.salvage.lost_journal, vec![(4, 6)], "{rec:?}");
    let kept: Vec<u64> = s.journal_from(1).map(|r| r.unwrap().0).collect();
    assert_eq!(kept, vec![1, 2, 3, 7, 8, 9]);
    assert!(s.next_journal_pos() >= 10, "positions are never reused");
}

#[test]
fn the_sparkplug_views_place_and_what_it_set_aside_are_salvaged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let opts = StoreOptions { cache_bytes: 4 << 20, ..StoreOptions::default() };
    {
        let mut s = Store::open(&dir, opts.clone()).unwrap();
        s.append_journal(&[(1, vec![1; 100]), (2, vec![2; 100])]).unwrap();
        assert_eq!(s.sparkplug_place().unwrap().cursor, 0);
        s.sparkplug_next_bd_seq().unwrap();
        assert_eq!(s.sparkplug_next_bd_seq().unwrap(), 1);
        let outbox: Vec<Vec<u8>> = (1..=5).map(event).collect();
        s.checkpoint(2, b"d", &outbox).unwrap();
        s.sparkplug_advance(2, b"{\"devices\":{}}").unwrap();
        // The JSON forwarder's acknowledgements of 3 and 4 set them aside for the view.
        s.outbox_ack_many(&[1, 2, 3, 4], &[]).unwrap();
        assert_eq!(s.sparkplug_held().unwrap(), 3);
    }
    {
        let db = crate::store::open_sled_directly(&dir).unwrap();
        let state = db.open_tree("state").unwrap();
        // A set-aside record that does not decode, and a damaged journal record to recover.
        state.insert([&b"p/"[..], &9u64.to_be_bytes()].concat(), &b"\x01junk"[..]).unwrap();
        db.open_tree("journal").unwrap().insert(2u64.to_be_bytes(), &b"\x07"[..]).unwrap();
        db.flush().unwrap();
    }
    let (mut s, rec) = Store::open_or_recover(&dir, opts, 1).unwrap();
    let rec = rec.unwrap();
    assert_eq!(rec.salvage.copied.get("sparkplug_place"), Some(&3), "{rec:?}");
    assert_eq!(rec.salvage.copied.get("sparkplug_set_aside"), Some(&2), "{rec:?}");
    assert_eq!(rec.salvage.unreadable.get("sparkplug_set_aside"), Some(&1), "{rec:?}");
    let place = s.sparkplug_place().unwrap();
    assert_eq!((place.cursor, place.bd_seq), (2, Some(1)));
    assert_eq!(place.table, b"{\"devices\":{}}");
    assert_eq!(s.sparkplug_next_bd_seq().unwrap(), 2, "no bdSeq used twice");
    let held: Vec<(u64, Vec<u8>)> = s.sparkplug_after(2, 10).unwrap();
    let seqs: Vec<u64> = held.iter().map(|r| r.0).collect();
    assert_eq!(seqs, [3, 4, 5], "set aside (3, 4) and still in the outbox (5), merged");
    assert_eq!(held[0].1, event(3), "record 3's bytes");
}
