//! The store side of the forwarder, part of its shell: carries out the session's [`Read`]s and
//! [`Write`]s against the daemon's [`SharedStore`], on a blocking thread of the shell's
//! (`client.rs`), never on a tokio worker.
//!
//! Which way into the store each takes (the rules are the store's, `crate::store::SharedStore`):
//! reads of what is urgent (live records, where a new alert arrives, the backlog's alerts, and
//! the outbox's next sequence) are urgent reads, so a record the decide stage has just applied
//! is read and published while its commit runs; reads of the backlog's events and raw samples
//! are fair reads, so a drain's stream of reads does not keep the pipeline's appends and
//! checkpoints (nor our own acknowledgements) waiting. Acknowledgements are the store's chunked
//! acknowledgements, which take the lock exclusively and so wait for that commit: nothing is
//! removed from the outbox before it is durable. Syncs are commits that release the lock first.

use super::request::{Fetched, RawSamples, Read, Stream, Write, Written};
use crate::records::outbox::{FrameRef, OutboxRecord};
use crate::records::samples_codec::check;
use crate::store::{SharedStore, StoreError};
use crate::trace::parse::parse_line;
use crate::trace::{Arrival, SamplesRecord};

/// Why the forwarder could not read or change the outbox.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("outbox record {seq}: {what}")]
    BadRecord { seq: u64, what: String },
    #[error("journal record {journal_pos}, named by an outbox samples record: {what}")]
    BadSamples { journal_pos: u64, what: String },
}

/// Carries out a read.
pub(super) fn read(store: &SharedStore, read: &Read) -> Result<Fetched, FetchError> {
    #[cfg(feature = "failpoints")]
    fail::fail_point!("forward::fetch::read", |_| Err(FetchError::Store(StoreError::Injected {
        point: "forward::fetch::read"
    })));
    match *read {
        Read::NextSeq => Ok(Fetched::NextSeq(store.read_urgent().next_outbox_seq())),
        Read::Records { stream, after, limit } => records(store, stream, after, limit),
        Read::Samples { journal_pos, frame } => {
            samples(store, journal_pos, frame).map(Fetched::Samples)
        }
    }
}

/// Carries out a write; `at_ms` (wall clock) stamps its ledger records.
pub(super) fn write(store: &SharedStore, write: &Write, at_ms: i64) -> Result<Written, FetchError> {
    match write {
        Write::Apply { published, acked } => {
            store.acknowledge(published, acked, at_ms)?;
            Ok(Written::Applied)
        }
        Write::Sync => sync(store).map(|_| Written::Synced),
    }
}

/// Makes applied acknowledgements durable unless a commit since has; returns whether it
/// committed. Without the lock: reads and writes go on during the fsync.
fn sync(store: &SharedStore) -> Result<bool, FetchError> {
    // A test that must keep a checkpoint's batch from becoming durable through this commit
    // turns it off; acknowledgements then wait for the next checkpoint's commit.
    #[cfg(feature = "failpoints")]
    fail::fail_point!("forward::fetch::sync", |_| Ok(false));
    Ok(store.commit_released_if_needed(store.read())?)
}

/// The records of `stream` among the next `limit` with sequence `> after`. Events and raw
/// samples of other streams are told by their bytes and not decoded (a backlog of an hour is
/// scanned once per stream and connection).
fn records(
    store: &SharedStore,
    stream: Stream,
    after: u64,
    limit: usize,
) -> Result<Fetched, FetchError> {
    let guard = match stream {
        Stream::Alerts | Stream::Live => store.read_urgent(),
        Stream::Events | Stream::Samples => store.read(),
    };
    let (raw, last) = guard.outbox_scan(after, limit, |b| stream.may_hold(b))?;
    drop(guard);
    let mut records = Vec::new();
    for (seq, b) in raw {
        match OutboxRecord::decode(&b) {
            Ok(r) if stream.holds(&r) => records.push((seq, r)),
            Ok(_) => {}
            Err(e) => return Err(FetchError::BadRecord { seq, what: e.to_string() }),
        }
    }
    Ok(Fetched::Records { records, last })
}

/// The raw samples of journal record `journal_pos`: the block's encoded `frame` when it reads
/// back whole and valid (bytes copied, nothing parsed), else the journal line's (`None` when it
/// is gone: truncated).
fn samples(
    store: &SharedStore,
    journal_pos: u64,
    frame: Option<FrameRef>,
) -> Result<Option<RawSamples>, FetchError> {
    // Backlog: a fair read. The line is parsed after the lock is released: the pipeline and the
    // acknowledgement commits do not wait for the float parsing.
    let guard = store.read();
    if let Some(f) = frame {
        match guard.read_frame(&f).map(|b| check(&b).map(|()| b)) {
            Ok(Ok(bytes)) => return Ok(Some(RawSamples::Encoded(bytes))),
            Ok(Err(e)) => tracing::warn!(journal_pos, ?f, %e, "encoded frame: read from the line"),
            // Its segment went with its own lines (docs/decisions/0027-frames-encoded-once.md).
            Err(e) => tracing::debug!(journal_pos, %e, "encoded frame: read from the line"),
        }
    }
    let record = guard.journal_record(journal_pos)?;
    drop(guard);
    match record {
        Some(r) => samples_of(r.pos, &r.line).map(|s| Some(RawSamples::Parsed(s))),
        None => Ok(None),
    }
}

/// A journal line that must be a `samples` arrival.
fn samples_of(journal_pos: u64, line: &[u8]) -> Result<SamplesRecord, FetchError> {
    match parse_line(line) {
        Ok(l) => match l.arrival {
            Arrival::Samples(s) => Ok(s),
            _ => Err(FetchError::BadSamples { journal_pos, what: "not a samples line".into() }),
        },
        Err((_, r)) => Err(FetchError::BadSamples { journal_pos, what: r.to_string() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Unit;
    use crate::forward::outbox_model::OutboxModel;
    use crate::records::ledger::LedgerEntry;
    use crate::store::{Store, StoreOptions, ACK_CHUNK};

    fn apply_acks(store: &SharedStore, published: &[u64], acked: &[u64], at_ms: i64) {
        let w = Write::Apply { published: published.to_vec(), acked: acked.to_vec() };
        assert_eq!(write(store, &w, at_ms).unwrap(), Written::Applied);
    }

    #[test]
    fn a_long_ack_is_applied_in_chunks_ledgered_exactly_and_made_durable_by_sync() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.append_journal(&[(1, b"x".to_vec())]).unwrap();
        let n = 2 * ACK_CHUNK as u64 + 7;
        let recs: Vec<Vec<u8>> = (0..n + 1).map(|i| i.to_be_bytes().to_vec()).collect();
        s.checkpoint(1, b"d", &recs).unwrap();
        let ledger_from = s.next_ledger_seq();
        let src = SharedStore::new(s);
        let acked: Vec<u64> = (1..=n).collect();
        apply_acks(&src, &[1, 2, 3], &acked, 42);
        assert!(src.read().needs_commit(), "applied, not yet durable");
        assert!(sync(&src).unwrap(), "the sync commits");
        assert!(!src.read().needs_commit());
        assert!(!sync(&src).unwrap(), "nothing left to commit: no fsync");
        assert_eq!(write(&src, &Write::Sync, 43).unwrap(), Written::Synced);
        drop(src);
        // Reopened: everything the ack named is gone for good, the one record left is not.
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        assert_eq!(
            s.outbox_after(0, 10).unwrap().into_iter().map(|r| r.0).collect::<Vec<_>>(),
            [n + 1]
        );
        let entries: Vec<LedgerEntry> =
            s.ledger_from(ledger_from).map(|r| r.unwrap().1.entry).collect();
        assert_eq!(entries[0], LedgerEntry::Published { outbox_seqs: vec![1, 2, 3] });
        let mut ledgered = Vec::new();
        for e in &entries[1..] {
            match e {
                LedgerEntry::Acknowledged { outbox_seqs } => {
                    assert!(outbox_seqs.len() <= ACK_CHUNK);
                    ledgered.extend_from_slice(outbox_seqs);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(entries.len(), 1 + 3, "three chunks");
        assert_eq!(ledgered, acked, "every acknowledged record ledgered once, in order");
    }

    /// A store in `dir` with one journal line, and an alert record not yet in its outbox.
    fn store_and_alert(dir: &std::path::Path) -> (Store, OutboxRecord) {
        let mut s = Store::open(dir, StoreOptions::default()).unwrap();
        s.append_journal(&[(1, b"x".to_vec())]).unwrap();
        let alert = OutboxRecord::Alert {
            machine: "m".into(),
            alert_id: "a".into(),
            revision: 1,
            json: b"{}".to_vec(),
        };
        (s, alert)
    }

    #[test]
    fn a_lane_scan_returns_its_records_only_and_how_far_it_read() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, alert) = store_and_alert(dir.path());
        let event = OutboxRecord::Event {
            machine: "m".into(),
            sensor: "s".into(),
            seq: 1,
            event_id: "g.s.1".into(),
            json: b"{}".to_vec(),
        };
        let gap = OutboxRecord::Gap(crate::records::outbox::GapNotice {
            machine: "m".into(),
            sensor: "s".into(),
            range: crate::records::outbox::GapRange::Events { from_seq: 2, to_seq: 3 },
            reason: "shed".into(),
            declared_at_ms: 1,
        });
        let samples = OutboxRecord::Samples {
            machine: "m".into(),
            sensor: "s".into(),
            journal_pos: 1,
            t0_ms: 0,
            rate_hz: 10.0,
            n: 3,
            frame: None,
        };
        let recs = [&event, &alert, &gap, &samples, &alert].map(OutboxRecord::encode);
        s.checkpoint(1, b"d", &recs).unwrap();
        let src = SharedStore::new(s);
        let mut model = OutboxModel::new();
        for r in [&event, &alert, &gap, &samples, &alert] {
            model.push(r.clone());
        }
        let store_read = |r: &Read| read(&src, r).unwrap();
        let model_read = |r: &Read| model.read(r);
        for answer in [&store_read as &dyn Fn(&Read) -> Fetched, &model_read] {
            let scan = |stream, after, limit| match answer(&Read::Records { stream, after, limit })
            {
                Fetched::Records { records, last } => (records, last),
                other => panic!("{other:?}"),
            };
            assert_eq!(scan(Stream::Alerts, 0, 4), (vec![(2, alert.clone())], Some(4)));
            assert_eq!(scan(Stream::Alerts, 4, 4), (vec![(5, alert.clone())], Some(5)));
            assert_eq!(scan(Stream::Alerts, 5, 4), (vec![], None));
            assert_eq!(
                scan(Stream::Events, 0, 9),
                (vec![(1, event.clone()), (3, gap.clone())], Some(5))
            );
            assert_eq!(scan(Stream::Samples, 1, 2), (vec![], Some(3)));
            assert_eq!(scan(Stream::Samples, 3, 2), (vec![(4, samples.clone())], Some(5)));
            assert_eq!(
                scan(Stream::Live, 3, 2),
                (vec![(4, samples.clone()), (5, alert.clone())], Some(5))
            );
            assert_eq!(answer(&Read::NextSeq), Fetched::NextSeq(6));
        }
    }

    /// A samples read copies the block's encoded frame when its reference reads back whole, and
    /// reads the journal line otherwise (no reference, the segment gone, bytes changed): both
    /// give the same PUBLISH payloads.
    #[test]
    fn a_samples_read_copies_the_encoded_frame_else_reads_the_line() {
        use crate::forward::payload::sample_frames;
        use crate::records::samples_codec::{encode_block, split};
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        let data: Vec<String> = (0..400).map(|i| format!("{:.3}", f64::from(i) / 400.0)).collect();
        let line = format!(
            r#"{{"at":1700000000000,"kind":"samples","machine":"m","sensor":"s","t0_ms":1700000000000,"rate_hz":400,"unit":"g","axis":"z","data":[{}]}}"#,
            data.join(",")
        );
        assert_eq!(s.append_frame(b"no segment yet").unwrap(), None);
        let pos =
            s.append_journal(&[(1_700_000_000_000, line.clone().into_bytes())]).unwrap().start;
        let parsed = samples_of(pos, line.as_bytes()).unwrap();
        let block = encode_block(1_700_000_000_000, 400.0, Unit::G, "z", &parsed.data);
        let frame = s.append_frame(&block).unwrap().unwrap();
        s.commit().unwrap();
        let src = SharedStore::new(s);
        let get = |frame| match read(&src, &Read::Samples { journal_pos: pos, frame }).unwrap() {
            Fetched::Samples(got) => got,
            other => panic!("{other:?}"),
        };
        assert_eq!(get(Some(frame)), Some(RawSamples::Encoded(block.clone())));
        let from_line = Some(RawSamples::Parsed(parsed.clone()));
        assert_eq!(get(None), from_line);
        assert_eq!(get(Some(FrameRef { sum: frame.sum ^ 1, ..frame })), from_line, "changed");
        assert_eq!(get(Some(FrameRef { segment: 999, ..frame })), from_line, "segment gone");
        assert_eq!(get(Some(FrameRef { len: frame.len - 4, ..frame })), from_line, "cut short");
        for limit in [block.len(), 600, 100] {
            assert_eq!(split(&block, limit).unwrap(), sample_frames(&parsed, limit), "{limit}");
        }
    }

    /// A checkpoint commit holds the lock shared while an acknowledgement (or the pipeline's next
    /// append) waits for it exclusively: a read of new records joins the commit at once, a
    /// backlog read waits until the writer has had the lock.
    #[test]
    fn backlog_reads_let_a_waiting_writer_go_first_and_reads_of_new_records_do_not_wait() {
        use std::sync::mpsc;
        use std::time::Duration;
        let dir = tempfile::tempdir().unwrap();
        let (mut s, alert) = store_and_alert(dir.path());
        s.checkpoint(1, b"d", &[alert.encode()]).unwrap();
        let src = SharedStore::new(s);
        let commit = src.read();
        let (done, finished) = mpsc::channel();
        let writer = {
            let (src, done) = (src.clone(), done.clone());
            std::thread::spawn(move || {
                let _exclusive = src.write();
                done.send("write").unwrap();
            })
        };
        while !src.writer_in() {
            std::thread::yield_now(); // the writer now waits for the commit's shared hold
        }
        let reader = |what: &'static str, r: Read| {
            let (src, done) = (src.clone(), done.clone());
            std::thread::spawn(move || {
                drop(read(&src, &r));
                done.send(what).unwrap();
            })
        };
        let records = |stream| Read::Records { stream, after: 0, limit: 9 };
        let urgent = [
            reader("live", records(Stream::Live)),
            reader("alerts", records(Stream::Alerts)),
            reader("next_seq", Read::NextSeq),
        ];
        let mut joined: Vec<&str> =
            (0..3).map(|_| finished.recv_timeout(Duration::from_secs(10)).unwrap()).collect();
        joined.sort_unstable();
        assert_eq!(joined, ["alerts", "live", "next_seq"], "joined the commit's hold");
        let backlog = [
            reader("events", records(Stream::Events)),
            reader("samples", Read::Samples { journal_pos: 1, frame: None }),
        ];
        // A wrong (recursive) backlog read would be done in microseconds.
        assert!(finished.recv_timeout(Duration::from_millis(200)).is_err(), "backlog waits");
        drop(commit);
        let order: Vec<&str> = (0..3).map(|_| finished.recv().unwrap()).collect();
        assert_eq!(order[0], "write", "the writer went first: {order:?}");
        for t in urgent.into_iter().chain(backlog).chain([writer]) {
            t.join().unwrap();
        }
    }

    #[test]
    fn a_checkpoint_commit_makes_applied_acks_durable_and_the_sync_skips_its_fsync() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        let range = s.append_journal(&[(1, b"a".to_vec()), (2, b"b".to_vec())]).unwrap();
        s.checkpoint(range.start, b"d", &[b"r1".to_vec(), b"r2".to_vec()]).unwrap();
        let src = SharedStore::new(s);
        apply_acks(&src, &[1], &[1], 5);
        let mut s = src.into_store().unwrap();
        assert!(s.needs_commit());
        s.checkpoint(range.end - 1, b"d", &[]).unwrap();
        assert!(!s.needs_commit(), "the checkpoint's commit carried the acknowledgement");
        let src = SharedStore::new(s);
        assert!(!sync(&src).unwrap(), "no fsync of its own");
    }
}
