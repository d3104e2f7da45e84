//! The retention budget: shedding the oldest raw sample frames, and what stays.
//!
//! A model of the outbox (sequence → record) is kept beside the store; after every shed and every
//! restart the store's outbox must equal the model with exactly the shed frames replaced by gaps.

use std::collections::BTreeMap;

use linegate::records::ledger::LedgerEntry;
use linegate::records::outbox::{GapRange, OutboxRecord};
use linegate::store::{Store, StoreOptions};

const FRAME_BYTES: usize = 12_800;

/// Failpoints are process-wide: tests that shed run one at a time so none meets another's fault.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
const T0: i64 = 1_700_000_000_000;

fn opts() -> StoreOptions {
    StoreOptions { cache_bytes: 4 << 20, segment_bytes: 1 << 20, ..StoreOptions::default() }
}

/// The outbox as the test expects it.
type Model = BTreeMap<u64, OutboxRecord>;

fn outbox(s: &Store) -> Model {
    s.outbox_pending()
        .map(|r| {
            let (seq, bytes) = r.unwrap();
            (seq, OutboxRecord::decode(&bytes).unwrap())
        })
        .collect()
}

/// Appends `seconds` one-second frames for each sensor of machine `m1` (sensors `s0..sensors`),
/// each followed by an event, plus one alert, and checkpoints them. `second` counts on.
fn fill(s: &mut Store, model: &mut Model, second: &mut i64, seconds: i64, sensors: u32) {
    let mut adds = Vec::new();
    for _ in 0..seconds {
        for k in 0..sensors {
            let t0 = T0 + *second * 1000;
            let mut line = vec![(k as u8).wrapping_add(*second as u8); FRAME_BYTES];
            line[0] = b'S';
            let pos = s.append_journal(&[(t0 + 1000, line)]).unwrap().start;
            // Its encoded frame beside it, as the decide stage writes one (bytes of that size).
            let frame = s.append_frame(&vec![b'F'; FRAME_BYTES / 2]).unwrap();
            adds.push(OutboxRecord::Samples {
                machine: "m1".into(),
                sensor: format!("s{k}"),
                journal_pos: pos,
                t0_ms: t0,
                rate_hz: 3200.0,
                n: 3200,
                frame,
            });
            adds.push(OutboxRecord::Event {
                machine: "m1".into(),
                sensor: format!("s{k}"),
                seq: *second as u64,
                event_id: format!("gw.s{k}.{second}"),
                json: b"{}".to_vec(),
            });
        }
        *second += 1;
    }
    adds.push(OutboxRecord::Alert {
        machine: "m1".into(),
        alert_id: format!("a{second}"),
        revision: 0,
        json: b"{}".to_vec(),
    });
    let first = s.next_outbox_seq();
    let bytes: Vec<Vec<u8>> = adds.iter().map(OutboxRecord::encode).collect();
    let pos = s.next_journal_pos() - 1;
    s.checkpoint(pos, b"decider", &bytes).unwrap();
    for (i, r) in adds.into_iter().enumerate() {
        model.insert(first + i as u64, r);
    }
}

/// Frames of sensor s1 in event time `[T0 + 20 s, T0 + 25 s)` are alert evidence.
fn protect(_m: &str, sensor: &str, from: i64, to: i64) -> bool {
    sensor == "s1" && from < T0 + 25_000 && to > T0 + 20_000
}

/// Applies a shed's effect to the model: the store's outbox minus the model must be exactly the
/// new gaps, the model minus the store exactly Samples frames, each covered by one new gap of its
/// sensor, never a protected one.
fn check_shed(s: &Store, model: &mut Model) -> u64 {
    let now = outbox(s);
    assert_eq!(s.outbox_records(), now.len() as u64, "the outbox's kept record count");
    let removed: Vec<(u64, OutboxRecord)> =
        model.iter().filter(|(k, _)| !now.contains_key(k)).map(|(k, v)| (*k, v.clone())).collect();
    let added: Vec<&OutboxRecord> =
        now.iter().filter(|(k, _)| !model.contains_key(k)).map(|(_, v)| v).collect();
    for (_, r) in &removed {
        let OutboxRecord::Samples { machine, sensor, t0_ms, .. } = r else {
            panic!("shed something other than raw samples: {r:?}");
        };
        assert!(!protect(machine, sensor, *t0_ms, t0_ms + 1000), "protected frame shed: {r:?}");
        let covering = added.iter().filter(|g| match g {
            OutboxRecord::Gap(g) => {
                let GapRange::Samples { from_ms, to_ms } = g.range else { return false };
                g.sensor == *sensor
                    && g.reason == "shed"
                    && from_ms <= *t0_ms
                    && t0_ms + 1000 <= to_ms
            }
            _ => false,
        });
        assert_eq!(covering.count(), 1, "frame {r:?} not declared by exactly one gap");
    }
    assert!(added.iter().all(|r| matches!(r, OutboxRecord::Gap(_))));
    *model = now;
    removed.len() as u64
}

/// The ledger's Shed records from `from` on: (gap, journal positions).
fn shed_ledger(s: &Store, from: u64) -> Vec<(OutboxRecord, Vec<u64>)> {
    s.ledger_from(from)
        .filter_map(|r| match r.unwrap().1.entry {
            LedgerEntry::Shed { gap, journal_positions, outbox_seq, .. } => {
                Some((OutboxRecord::Gap(gap), journal_positions)).filter(|_| outbox_seq > 0)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn shedding_declares_every_frame_keeps_the_rest_and_survives_restarts() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let max = 16 << 20;
    let (mut model, mut second) = (Model::new(), 0);
    let mut s = Store::open(&dir, opts()).unwrap();
    let (mut shed_frames, mut sheds, mut ledger_from) = (0, 0, 1);
    for round in 0..24 {
        fill(&mut s, &mut model, &mut second, 30, 4);
        let before = model.clone();
        let report = s.shed_to_budget(max, T0 + second * 1000, &protect).unwrap();
        assert_eq!(report.frames, check_shed(&s, &mut model), "round {round}: {report:?}");
        // One ledger record per gap, naming exactly the journal records of the frames it covers,
        // and those journal records are gone.
        let ledger = shed_ledger(&s, ledger_from);
        ledger_from = s.next_ledger_seq();
        assert_eq!(ledger.len(), report.gaps.len());
        let positions: Vec<u64> = ledger.iter().flat_map(|(_, p)| p.clone()).collect();
        assert_eq!(positions.len() as u64, report.frames);
        for (gap, _) in &ledger {
            assert!(model.values().any(|r| r == gap), "ledger names a gap not in the outbox");
        }
        let journal: Vec<u64> = s.journal_from(1).map(|r| r.unwrap().0).collect();
        assert!(positions.iter().all(|p| !journal.contains(p)), "shed journal record kept");
        let samples_left = before
            .values()
            .filter(|r| matches!(r, OutboxRecord::Samples { journal_pos, .. } if !positions.contains(journal_pos)))
            .count();
        assert_eq!(journal.len(), samples_left, "every kept frame keeps its journal record");
        shed_frames += report.frames;
        sheds += u64::from(report.triggered);
        if round % 5 == 2 {
            drop(s);
            s = Store::open(&dir, opts()).unwrap();
            assert_eq!(outbox(&s), model, "outbox after restart");
        }
    }
    assert!(sheds >= 3, "the budget was cycled: {sheds} sheds");
    assert!(shed_frames > 0);
    // Events, alerts and protected frames all survive; the oldest unprotected frames went first.
    let kinds = |m: &Model, f: fn(&OutboxRecord) -> bool| m.values().filter(|r| f(r)).count();
    assert_eq!(kinds(&model, |r| matches!(r, OutboxRecord::Event { .. })), (second * 4) as usize);
    assert_eq!(kinds(&model, |r| matches!(r, OutboxRecord::Alert { .. })), 24);
    let protected = model
        .values()
        .filter(|r| matches!(r, OutboxRecord::Samples { sensor, t0_ms, .. } if protect("m1", sensor, *t0_ms, t0_ms + 1000)))
        .count();
    assert_eq!(protected, 5, "the five protected frames of s1 stay");
}

#[test]
fn within_budget_nothing_is_shed_and_over_it_the_size_really_falls() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let (mut model, mut second) = (Model::new(), 0);
    let small_segments = StoreOptions { segment_bytes: 128 << 10, ..opts() };
    let mut s = Store::open(tmp.path(), small_segments).unwrap();
    fill(&mut s, &mut model, &mut second, 40, 2);
    let size = s.disk_usage().unwrap();
    let r = s.shed_to_budget(size + (1 << 20), 0, &|_, _, _, _| false).unwrap();
    assert!(!r.triggered && r.frames == 0, "{r:?}");
    // Half the budget: the oldest frames go, their segments are deleted, the size falls at once.
    let r = s.shed_to_budget(size / 2, 0, &|_, _, _, _| false).unwrap();
    assert!(r.triggered && r.frames > 0, "{r:?}");
    assert!(r.line_bytes >= size - size / 2 * 3 / 4, "shed enough line bytes: {r:?}");
    assert!(r.size_after < r.size_before - (512 << 10), "the size fell: {r:?}");
    // Within budget now: a second call sheds nothing.
    let again = s.shed_to_budget(r.size_after.max(size / 2), 0, &|_, _, _, _| false).unwrap();
    assert_eq!(again.frames, 0, "{again:?}");
    // Everything protected: nothing can be shed, and the report says so.
    let tmp2 = tempfile::tempdir().unwrap();
    let mut s2 = Store::open(tmp2.path(), opts()).unwrap();
    fill(&mut s2, &mut Model::new(), &mut 0, 10, 2);
    let r = s2.shed_to_budget(1, 0, &|_, _, _, _| true).unwrap();
    assert_eq!((r.frames, r.protected, r.exhausted), (0, 20, true), "{r:?}");
}

/// The segment files of the store in `dir`.
fn segments(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join(linegate::store::RAW_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_budget_is_kept_under_sustained_inflow_and_old_segments_are_deleted() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (max, segment) = (6u64 << 20, 1u64 << 20);
    let (mut model, mut second) = (Model::new(), 0);
    let mut s = Store::open(&dir, opts()).unwrap();
    let mut first_segments = Vec::new();
    let (mut peak, mut last) = (0, linegate::store::ShedReport::default());
    // 80 rounds of 10 s of 4 sensors (40 frames, 512 KB): 41 MB in all, nothing acknowledged.
    for round in 0..80 {
        fill(&mut s, &mut model, &mut second, 10, 4);
        if round == 2 {
            first_segments = segments(&dir);
        }
        let r = s.shed_to_budget(max, T0 + second * 1000, &protect).unwrap();
        check_shed(&s, &mut model);
        peak = peak.max(r.size_before);
        // Within the budget and one segment (the one being written) after every check.
        assert!(
            r.size_after <= max + segment,
            "round {round}: {} bytes on disk for a budget of {max}: {r:?}",
            r.size_after
        );
        if r.triggered {
            last = r;
        }
        if round % 20 == 19 {
            drop(s);
            s = Store::open(&dir, opts()).unwrap();
            assert_eq!(outbox(&s), model, "outbox after restart");
        }
    }
    let now = segments(&dir);
    let gone = first_segments.iter().filter(|n| !now.contains(n)).count();
    assert!(gone + 1 >= first_segments.len(), "old segments deleted: {first_segments:?} {now:?}");
    // A shed aims at three quarters of the budget, not at nothing.
    assert!(last.size_after >= max * 3 / 4 - segment, "shed too deep: {last:?}");
    assert!(peak > max, "the budget was reached");
    // Every frame still queued can be read back.
    for r in model.values() {
        if let OutboxRecord::Samples { journal_pos, .. } = r {
            let (_, _, line) = s.journal_from(*journal_pos).next().unwrap().unwrap();
            assert_eq!(line.len(), FRAME_BYTES);
        }
    }
}

#[cfg(feature = "failpoints")]
#[test]
fn a_crash_between_the_outbox_and_the_journal_leaves_records_truncation_removes() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let (mut model, mut second) = (Model::new(), 0);
    let mut s = Store::open(tmp.path(), opts()).unwrap();
    fill(&mut s, &mut model, &mut second, 20, 2);
    let before: Vec<u64> = s.journal_from(1).map(|r| r.unwrap().0).collect();
    let scenario = fail::FailScenario::setup();
    fail::cfg("store::shed::before_journal_remove", "return").unwrap();
    let err = s.shed_to_budget(1, 5, &|_, _, _, _| false).unwrap_err();
    assert!(err.to_string().contains("store::shed::before_journal_remove"), "{err}");
    fail::cfg("store::shed::before_journal_remove", "off").unwrap();
    scenario.teardown();
    drop(s);
    let mut s = Store::open(tmp.path(), opts()).unwrap();
    // The outbox step committed: frames replaced by gaps; their journal records are still there.
    let shed = check_shed(&s, &mut model);
    assert!(shed > 0);
    let after: Vec<u64> = s.journal_from(1).map(|r| r.unwrap().0).collect();
    assert_eq!(after, before, "journal untouched by the crashed shed");
    // Unreferenced and below the checkpoint: the next truncation removes them.
    let referenced: Vec<u64> = model
        .values()
        .filter_map(|r| match r {
            OutboxRecord::Samples { journal_pos, .. } => Some(*journal_pos),
            _ => None,
        })
        .collect();
    let first_kept = referenced.iter().min().copied().unwrap_or(s.next_journal_pos());
    s.truncate_journal_before(first_kept).unwrap();
    let left: Vec<u64> = s.journal_from(1).map(|r| r.unwrap().0).collect();
    assert_eq!(left, referenced, "only referenced journal records remain");
}

#[cfg(feature = "failpoints")]
#[test]
fn a_crash_before_the_outbox_batch_sheds_nothing() {
    let _serial = serial();
    for point in ["store::shed::before_apply", "store::shed::after_apply"] {
        let tmp = tempfile::tempdir().unwrap();
        let (mut model, mut second) = (Model::new(), 0);
        let mut s = Store::open(tmp.path(), opts()).unwrap();
        fill(&mut s, &mut model, &mut second, 10, 2);
        let scenario = fail::FailScenario::setup();
        fail::cfg(point, "return").unwrap();
        assert!(s.shed_to_budget(1, 5, &|_, _, _, _| false).is_err());
        fail::cfg(point, "off").unwrap();
        scenario.teardown();
        assert!(s.append_journal(&[(1, vec![])]).is_err(), "poisoned after a failed shed");
        drop(s);
        let s = Store::open(tmp.path(), opts()).unwrap();
        let now = outbox(&s);
        // before_apply: nothing; after_apply: applied but not committed — sled may or may not
        // have written it, but it is all or nothing (one batch).
        if now != model {
            check_shed(&s, &mut model);
        }
        assert_eq!(now, model);
    }
}

/// A crash after the shed's pages were merged, before the commit: whether sled kept the merge
/// or not, every record left is there under its sequence.
#[cfg(feature = "failpoints")]
#[test]
fn a_crash_after_the_pages_are_merged_loses_no_record() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let (mut model, mut second) = (Model::new(), 0);
    let mut s = Store::open(tmp.path(), opts()).unwrap();
    fill(&mut s, &mut model, &mut second, 20, 2);
    let scenario = fail::FailScenario::setup();
    fail::cfg("store::shed::after_compact", "return").unwrap();
    assert!(s.shed_to_budget(1, 5, &|_, _, _, _| false).is_err());
    fail::cfg("store::shed::after_compact", "off").unwrap();
    scenario.teardown();
    drop(s);
    let s = Store::open(tmp.path(), opts()).unwrap();
    s.startup_check().unwrap();
    assert!(check_shed(&s, &mut model) > 0, "the shed itself committed");
    assert_eq!(outbox(&s), model);
}

#[cfg(feature = "failpoints")]
#[test]
fn a_failure_before_segments_are_deleted_leaves_them_to_the_next_commit() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let o = StoreOptions { segment_bytes: 128 << 10, ..opts() };
    let (mut model, mut second) = (Model::new(), 0);
    let mut s = Store::open(tmp.path(), o.clone()).unwrap();
    fill(&mut s, &mut model, &mut second, 40, 2);
    let before = segments(tmp.path());
    let half = s.disk_usage().unwrap() / 2;
    let scenario = fail::FailScenario::setup();
    fail::cfg("store::segments::before_delete", "return").unwrap();
    let err = s.shed_to_budget(half, 5, &|_, _, _, _| false).unwrap_err();
    fail::cfg("store::segments::before_delete", "off").unwrap();
    scenario.teardown();
    assert!(matches!(err, linegate::store::StoreError::Injected { .. }), "{err}");
    drop(s);
    assert_eq!(segments(tmp.path()), before, "nothing deleted yet");
    // The shed itself was durable; the first commit after the restart deletes the segments.
    let s = Store::open(tmp.path(), o).unwrap();
    let samples =
        |m: &Model| m.values().filter(|r| matches!(r, OutboxRecord::Samples { .. })).count();
    let now = outbox(&s);
    assert!(samples(&now) < samples(&model), "the shed is durable");
    model = now;
    s.commit().unwrap();
    let after = segments(tmp.path());
    assert!(after.len() + 3 <= before.len(), "{before:?} -> {after:?}");
    for r in model.values() {
        if let OutboxRecord::Samples { journal_pos, .. } = r {
            let (_, _, line) = s.journal_from(*journal_pos).next().unwrap().unwrap();
            assert_eq!(line.len(), FRAME_BYTES, "a kept frame's line is still there");
        }
    }
}
