//! Model test of the durable store (`linegate::store`), in the style of sled's own: random
//! action sequences run against the real `Store` (in a temporary directory) and against an
//! in-memory model; after every action the store's observable state must equal the model's.
//!
//! # The promise checked
//!
//! - Between restarts, every read (journal from position 1, last checkpoint, pending outbox in
//!   order, every sensor's seq high-water mark, the next journal position) equals the model
//!   exactly, including appends not yet committed; the outbox's kept record count equals its
//!   length.
//! - A *committing* call — `commit`, a successful `checkpoint`, an `outbox_ack` that removed a
//!   record, a `truncate_journal_before` that truncated, an `allocate_seq_block` with block > 0 —
//!   makes durable everything before it. Refused calls change nothing.
//! - After Restart (drop the store, reopen the directory): checkpoint, outbox, seq marks and the
//!   truncation point are exactly as last committed (they are committed by the calls that change
//!   them); the journal holds every record appended before the last committing call, then a
//!   prefix (in position order, possibly empty) of the records appended after it; the next
//!   journal position follows the last surviving record (never below the truncation point).
//!   Records appended after the last commit that did not survive are dropped from the model.
//!
//! An in-process restart lets sled flush on drop, so here the uncommitted records always
//! survive; the prefix rule is what the store promises after a real crash.

use std::collections::BTreeMap;
use std::path::Path;

use linegate::store::{Checkpoint, Store, StoreError, StoreOptions};
use proptest::prelude::*;

const SENSORS: [(&str, &str); 3] = [("m1", "s1"), ("m1", "s2"), ("m", "1s1")];

#[derive(Debug, Clone)]
enum Action {
    Append(Vec<(i64, Vec<u8>)>),
    Commit,
    /// `pos`: a selector mapped into the valid range unless `raw`.
    Checkpoint {
        pos: u64,
        raw: bool,
        decider: Vec<u8>,
        adds: Vec<Vec<u8>>,
    },
    /// `sel`: an index into the pending outbox unless `raw` (then a sequence, maybe absent).
    Ack {
        sel: u64,
        raw: bool,
    },
    TruncateBefore(u64),
    AllocateSeq {
        sensor: usize,
        block: u64,
    },
    Restart,
    /// sled closed and opened again under the running store (`Store::snapshot_sled`).
    SnapshotSled,
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => proptest::collection::vec((any::<i64>(), bytes(12)), 0..5).prop_map(Action::Append),
        2 => Just(Action::Commit),
        3 => (any::<u64>(), prop::bool::weighted(0.15), bytes(24), proptest::collection::vec(bytes(8), 0..4))
            .prop_map(|(pos, raw, decider, adds)| Action::Checkpoint { pos, raw, decider, adds }),
        3 => (any::<u64>(), prop::bool::weighted(0.2)).prop_map(|(sel, raw)| Action::Ack { sel, raw }),
        1 => any::<u64>().prop_map(Action::TruncateBefore),
        2 => (0..SENSORS.len(), 0u64..5).prop_map(|(sensor, block)| Action::AllocateSeq { sensor, block }),
        2 => Just(Action::Restart),
        1 => Just(Action::SnapshotSled),
    ]
}

#[derive(Debug, Clone, PartialEq, Default)]
struct Observed {
    journal: Vec<(u64, i64, Vec<u8>)>,
    next_journal: u64,
    checkpoint: Option<Checkpoint>,
    outbox: Vec<(u64, Vec<u8>)>,
    /// The outbox's kept record count (`n/outbox_records`), which must equal its length.
    outbox_records: u64,
    seq: Vec<((String, String), u64)>,
}

#[derive(Debug)]
struct Model {
    journal: BTreeMap<u64, (i64, Vec<u8>)>,
    /// Positions below this were appended before the last committing call.
    committed_next: u64,
    next: u64,
    start: u64,
    checkpoint: Option<Checkpoint>,
    outbox: BTreeMap<u64, Vec<u8>>,
    next_outbox: u64,
    seq: BTreeMap<(String, String), u64>,
}

impl Model {
    fn new() -> Model {
        Model {
            journal: BTreeMap::new(),
            committed_next: 1,
            next: 1,
            start: 1,
            checkpoint: None,
            outbox: BTreeMap::new(),
            next_outbox: 1,
            seq: BTreeMap::new(),
        }
    }

    fn committed(&mut self) {
        self.committed_next = self.next;
    }

    fn checkpoint_pos(&self) -> u64 {
        self.checkpoint.as_ref().map_or(0, |c| c.journal_pos)
    }

    fn observed(&self) -> Observed {
        Observed {
            journal: self.journal.iter().map(|(p, (at, l))| (*p, *at, l.clone())).collect(),
            next_journal: self.next,
            checkpoint: self.checkpoint.clone(),
            outbox: self.outbox.iter().map(|(s, r)| (*s, r.clone())).collect(),
            outbox_records: self.outbox.len() as u64,
            seq: self.seq.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        }
    }
}

fn observe(s: &Store) -> Observed {
    Observed {
        journal: s.journal_from(1).collect::<Result<_, _>>().unwrap(),
        next_journal: s.next_journal_pos(),
        checkpoint: s.last_checkpoint().unwrap(),
        outbox: s.outbox_pending().collect::<Result<_, _>>().unwrap(),
        outbox_records: s.outbox_records(),
        seq: s.seq_marks().collect::<Result<_, _>>().unwrap(),
    }
}

/// Lines of 6 bytes and more go to segment files of at most 40 bytes: appends of up to 11 bytes
/// exercise inline records, segment references and rolls alike.
fn opts() -> StoreOptions {
    StoreOptions {
        cache_bytes: 1 << 20,
        raw_threshold: 6,
        segment_bytes: 40,
        ..StoreOptions::default()
    }
}

fn refused<T: std::fmt::Debug>(r: Result<T, StoreError>) {
    assert!(matches!(r, Err(StoreError::Refused { .. })), "expected a refusal, got {r:?}");
}

/// Applies one action to the store and the model; checks the store against the model.
fn step(dir: &Path, store: &mut Option<Store>, m: &mut Model, a: &Action) {
    let s = store.as_mut().unwrap();
    match a {
        Action::Append(records) => {
            let r = s.append_journal(records).unwrap();
            assert_eq!(r, m.next..m.next + records.len() as u64);
            for (at, line) in records {
                m.journal.insert(m.next, (*at, line.clone()));
                m.next += 1;
            }
        }
        Action::Commit => {
            s.commit().unwrap();
            m.committed();
        }
        Action::Checkpoint { pos, raw, decider, adds } => {
            let low = m.checkpoint_pos();
            let pos = if *raw { pos % (m.next + 2) } else { low + pos % (m.next - low) };
            // An empty outbox record is refused: it would read as one taken out of its page.
            if pos >= m.next || pos < low || adds.iter().any(Vec::is_empty) {
                refused(s.checkpoint(pos, decider, adds));
            } else {
                s.checkpoint(pos, decider, adds).unwrap();
                m.checkpoint = Some(Checkpoint { journal_pos: pos, decider: decider.clone() });
                for add in adds {
                    m.outbox.insert(m.next_outbox, add.clone());
                    m.next_outbox += 1;
                }
                m.committed();
            }
        }
        Action::Ack { sel, raw } => {
            let seq = match m.outbox.keys().nth((*sel as usize) % m.outbox.len().max(1)) {
                Some(k) if !raw => *k,
                _ => sel % (m.next_outbox + 2),
            };
            s.outbox_ack(seq).unwrap();
            if m.outbox.remove(&seq).is_some() {
                m.committed();
            }
        }
        Action::TruncateBefore(sel) => {
            let pos = sel % (m.checkpoint_pos() + 4);
            if pos > m.checkpoint_pos() + 1 {
                refused(s.truncate_journal_before(pos));
            } else {
                s.truncate_journal_before(pos).unwrap();
                if pos > m.start {
                    m.start = pos;
                    m.journal = m.journal.split_off(&pos);
                    m.committed();
                }
            }
        }
        Action::AllocateSeq { sensor, block } => {
            let (machine, sensor) = SENSORS[*sensor];
            let high = s.seq_high_water(machine, sensor).unwrap();
            let r = s.allocate_seq_block(machine, sensor, *block).unwrap();
            let model_high =
                m.seq.get(&(machine.to_string(), sensor.to_string())).copied().unwrap_or(0);
            assert_eq!(high, model_high);
            assert_eq!(r, model_high + 1..model_high + 1 + block);
            if *block > 0 {
                m.seq.insert((machine.into(), sensor.into()), model_high + block);
                m.committed();
            }
        }
        Action::SnapshotSled => {
            assert!(s.snapshot_sled().unwrap(), "no iterator of the store is out");
            m.committed();
        }
        Action::Restart => {
            drop(store.take());
            let s = Store::open(dir, opts()).unwrap();
            let got = observe(&s);
            // Committed records exactly; then a prefix of the uncommitted ones.
            let committed: Vec<_> = m
                .observed()
                .journal
                .into_iter()
                .filter(|(p, _, _)| *p < m.committed_next)
                .collect();
            assert!(
                got.journal.starts_with(&committed),
                "committed journal records lost: {committed:?} vs {:?}",
                got.journal
            );
            let uncommitted: Vec<_> = m
                .observed()
                .journal
                .into_iter()
                .filter(|(p, _, _)| *p >= m.committed_next)
                .collect();
            let extra = &got.journal[committed.len()..];
            assert!(
                uncommitted.starts_with(extra),
                "journal after restart is not committed + a prefix of the rest: {extra:?} vs \
                 {uncommitted:?}"
            );
            m.journal = m.journal.split_off(&m.start);
            let survivors: Vec<u64> = got.journal.iter().map(|(p, _, _)| *p).collect();
            m.journal.retain(|p, _| survivors.contains(p));
            m.next = m.journal.last_key_value().map_or(m.start, |(p, _)| (p + 1).max(m.start));
            *store = Some(s);
        }
    }
    let got = observe(store.as_ref().unwrap());
    assert_eq!(got, m.observed(), "after {a:?}");
}

fn run(actions: &[Action]) {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Some(Store::open(tmp.path(), opts()).unwrap());
    let mut model = Model::new();
    for a in actions {
        step(tmp.path(), &mut store, &mut model, a);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn store_matches_model(actions in proptest::collection::vec(action(), 1..60)) {
        run(&actions);
    }
}

#[test]
fn restart_right_after_truncating_everything_keeps_positions() {
    run(&[
        Action::Append(vec![(1, b"a".to_vec()), (2, b"b".to_vec())]),
        Action::Checkpoint { pos: 2, raw: false, decider: vec![], adds: vec![b"o".to_vec()] },
        Action::TruncateBefore(3),
        Action::Restart,
        Action::Append(vec![(3, b"c".to_vec())]),
        Action::Restart,
    ]);
}

// ---- A real crash: the store in a child process, killed with SIGKILL at moments of our choice.

const CHILD_ENV: &str = "LINEGATE_STORE_MODEL_CHILD_DIR";

/// The record at journal position `p` (the child writes a function of the position, so the
/// parent knows what every surviving record must be).
fn record_at(p: u64) -> (i64, Vec<u8>) {
    (p as i64 * 7 - 1000, format!("line {p}").into_bytes())
}

/// The child: appends forever from where the store stands; commits every other batch and then
/// prints what is durable; checkpoints, allocates sequence numbers and has sled write its
/// snapshot (a close and an open under the running store) now and then.
fn child(dir: &Path) -> ! {
    use std::io::Write;
    let mut s = Store::open(dir, opts()).unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0u64.. {
        let first = s.next_journal_pos();
        let batch: Vec<_> = (first..first + 3).map(record_at).collect();
        s.append_journal(&batch).unwrap();
        if i % 2 == 0 {
            s.commit().unwrap();
            writeln!(out, "committed {}", s.next_journal_pos() - 1).unwrap();
        }
        if i % 7 == 3 {
            // sled closed and opened again: everything before it is committed by it.
            assert!(s.snapshot_sled().unwrap());
            writeln!(out, "committed {}", s.next_journal_pos() - 1).unwrap();
        }
        if i % 5 == 0 {
            let pos = s.next_journal_pos() - 1;
            s.checkpoint(pos, &pos.to_be_bytes(), &[pos.to_be_bytes().to_vec()]).unwrap();
            writeln!(out, "checkpoint {pos}").unwrap();
            let r = s.allocate_seq_block("m1", "s1", 4).unwrap();
            writeln!(out, "seq {}", r.end - 1).unwrap();
        }
        out.flush().unwrap();
    }
    unreachable!()
}

/// Kills the child when the parent's test ends, however it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sigkill_keeps_every_committed_record_and_reuses_no_seq() {
    use std::io::BufRead;
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        child(Path::new(&dir));
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut seq_seen = 0;
    for (round, kill_after) in [3usize, 40, 1, 120, 17].into_iter().enumerate() {
        let mut proc = Killed(
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "sigkill_keeps_every_committed_record_and_reuses_no_seq",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, tmp.path())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let stdout = proc.0.stdout.take().unwrap();
        let (mut committed, mut checkpoint, mut seq) = (0u64, 0u64, 0u64);
        let mut seen = 0;
        // Kept open until the child is killed, so that it never writes into a closed pipe.
        let mut lines = std::io::BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            let line = line.unwrap();
            // The test harness may print its own text before ours on the same line.
            let mut words = line.split(' ').rev();
            let (n, what) = (words.next().and_then(|n| n.parse().ok()), words.next());
            match (what, n) {
                (Some("committed"), Some(n)) => committed = n,
                (Some("checkpoint"), Some(n)) => checkpoint = n,
                (Some("seq"), Some(n)) => seq = n,
                _ => continue,
            }
            seen += 1;
            if seen >= kill_after {
                break;
            }
        }
        assert_eq!(seen, kill_after, "round {round}: the child stopped early");
        assert!(committed > 0, "round {round}: the child committed nothing");
        drop(proc); // SIGKILL, mid-write or not
        drop(lines);
        let mut s = Store::open(tmp.path(), opts()).unwrap();
        let journal: Vec<_> = s.journal_from(1).collect::<Result<_, _>>().unwrap();
        assert!(
            journal.len() as u64 >= committed,
            "round {round}: committed up to {committed}, found {} records",
            journal.len()
        );
        for (i, (p, at, line)) in journal.iter().enumerate() {
            assert_eq!(*p, i as u64 + 1, "round {round}: positions are contiguous from 1");
            assert_eq!((*at, line.clone()), record_at(*p), "round {round}: record {p}");
        }
        let cp = s.last_checkpoint().unwrap().map_or(0, |c| c.journal_pos);
        assert!(cp >= checkpoint, "round {round}: checkpoint {cp} < reported {checkpoint}");
        assert!(cp < s.next_journal_pos(), "round {round}: checkpoint past the journal");
        let high = s.seq_high_water("m1", "s1").unwrap();
        assert!(high >= seq && high >= seq_seen, "round {round}: seq high-water went back");
        let fresh = s.allocate_seq_block("m1", "s1", 1).unwrap();
        assert!(fresh.start > high, "round {round}: a seq was reused");
        seq_seen = fresh.start;
    }
}

/// From the only failure the model test found (flaky, so it shrank no further than "commit, then
/// Restart"): reopening right after dropping the store found sled's file lock still held, as a
/// dropped sled `Db` can release its file a moment later. `Store::open` now waits for the lock.
/// A race: without that wait this fails in about one run of three (256 restarts each).
#[test]
fn regression_restart_right_after_a_commit_waits_for_the_lock() {
    let mut actions = Vec::new();
    for i in 0..=255u8 {
        actions.push(Action::Append(vec![(i64::from(i), vec![i])]));
        actions.push(Action::Checkpoint {
            pos: u64::MAX,
            raw: false,
            decider: vec![i; 8],
            adds: vec![vec![i]],
        });
        actions.push(Action::Ack { sel: 0, raw: false });
        actions.push(Action::Restart);
    }
    run(&actions);
}
