//! Acknowledgement commits in batches (by count and by time), which records each one ledgers
//! `Published`, and what a crash before a commit means: the record is sent again (at least once).

use super::*;
use crate::event::Unit;
use crate::forward::fake_broker::{cfg, connack, event, events_in, Fake};
use crate::forward::outbox_model::OutboxModel;
use crate::trace::SamplesRecord;

/// Five events of five sensors: five PUBLISHes of one record each (after the status).
fn five_sensors(src: &mut OutboxModel) {
    for i in 1..=5 {
        src.push(event(&format!("s{i}"), 1));
    }
}

fn commit_cfg() -> SessionConfig {
    SessionConfig { inflight: 8, commit_acks: 3, commit_ms: 50, ..cfg() }
}

/// Acknowledges `pkids` without committing (the shell decides when).
fn puback(f: &mut Fake, pkids: &[u16], now: i64) {
    for &p in pkids {
        assert!(f.s.on_puback(p, now));
        f.outstanding.retain(|&o| o != p);
    }
}

#[test]
fn acks_commit_after_commit_ms_since_the_oldest_one() {
    let mut src = OutboxModel::new();
    five_sensors(&mut src);
    let mut f = Fake::connect(commit_cfg(), &src);
    let got = f.pump(0, &mut src);
    assert_eq!(got.len(), 6, "status + 5 events");
    assert_eq!(f.s.commit_in_ms(5), None, "nothing acknowledged, nothing due");
    puback(&mut f, &[got[0].0, got[1].0], 10); // status (no record) + s1's event
    assert_eq!(f.s.acks_waiting(), 1);
    assert!(!f.s.commit_due(10));
    assert_eq!(f.s.commit_in_ms(10), Some(50));
    assert_eq!(f.s.wake_in_ms(30), Some(30), "the loop wakes for the commit");
    puback(&mut f, &[got[2].0], 40); // a younger ack does not push the deadline back
    assert!(!f.s.commit_due(59));
    assert!(f.s.commit_due(60));
    assert!(f.pump(60, &mut src).is_empty());
    assert_eq!(src.applied, [(vec![1, 2, 3, 4, 5], vec![1, 2])], "applied with what was written");
    assert_eq!(f.s.commit_in_ms(60), None, "applied: the clock restarts with the next ack");
    puback(&mut f, &[got[3].0], 70);
    assert_eq!(f.s.commit_in_ms(70), Some(50));
}

#[test]
fn acks_commit_at_once_after_commit_acks_records() {
    let mut src = OutboxModel::new();
    five_sensors(&mut src);
    let mut f = Fake::connect(commit_cfg(), &src);
    let got = f.pump(0, &mut src);
    puback(&mut f, &[got[1].0, got[2].0], 1);
    assert!(!f.s.commit_due(1));
    puback(&mut f, &[got[3].0], 2);
    assert!(f.s.commit_due(2), "3 records = commit_acks");
    f.pump(2, &mut src);
    assert_eq!(src.applied[0].1, vec![1, 2, 3]);
    assert!(!f.s.commit_due(2));
}

#[test]
fn a_disconnect_keeps_unapplied_acks_for_the_final_flush() {
    let mut src = OutboxModel::new();
    five_sensors(&mut src);
    let mut f = Fake::connect(commit_cfg(), &src);
    let got = f.pump(0, &mut src);
    puback(&mut f, &[got[1].0, got[4].0], 1);
    assert!(!f.s.commit_due(1), "neither count nor time reached, three in flight");
    f.s.on_disconnect();
    assert!(f.s.commit_due(2), "nothing in flight any more: due at once");
    // The shell flushes whatever is acknowledged when the connection ends.
    let apply = Write::Apply { published: vec![1, 2, 3, 4, 5], acked: vec![1, 4] };
    let writes = f.s.flush();
    assert_eq!(writes, [apply, Write::Sync]);
    for w in &writes {
        f.s.written(src.write(w), 2);
    }
    assert_eq!(src.pending_seqs(), vec![2, 3, 5]);
}

#[test]
fn acks_apply_at_once_when_the_last_publish_is_acknowledged() {
    let mut src = OutboxModel::new();
    five_sensors(&mut src);
    let mut f = Fake::connect(SessionConfig { commit_acks: 100, ..commit_cfg() }, &src);
    let got = f.pump(0, &mut src);
    let all: Vec<u16> = got.iter().map(|(p, _)| *p).collect();
    puback(&mut f, &all[..5], 1);
    assert!(!f.s.commit_due(1), "one PUBLISH still in flight");
    puback(&mut f, &all[5..], 2);
    assert!(f.s.commit_due(2), "idle: the drain's last acknowledgements go at once");
    assert_eq!(f.pump(2, &mut src), vec![], "nothing left to send");
    assert_eq!(src.applied[0].1, vec![1, 2, 3, 4, 5]);
    assert!(src.pending_seqs().is_empty());
}

#[test]
fn applied_acks_are_synced_sync_ms_after_the_first_unless_synced() {
    let mut src = OutboxModel::new();
    let mut s = Session::new(SessionConfig { sync_ms: 1000, ..commit_cfg() });
    let next = connack(&mut s, 0, &src);
    assert_eq!(src.serve(&mut s, next, 0).len(), 1, "the status");
    assert_eq!(s.sync_in_ms(0), None, "nothing applied");
    s.written(Written::Applied, 100);
    s.written(Written::Applied, 600); // a later application does not push the deadline back
    assert_eq!(s.sync_in_ms(600), Some(500));
    assert_eq!(s.wake_in_ms(600), Some(500), "the loop wakes for the sync");
    assert!(!s.sync_due(1099));
    assert!(s.sync_due(1100));
    s.written(Written::Synced, 1100);
    assert_eq!(s.sync_in_ms(1100), None);
    assert_eq!(s.wake_in_ms(1100), None);
}

#[test]
fn a_crash_between_puback_and_commit_sends_the_record_again() {
    let mut src = OutboxModel::new();
    five_sensors(&mut src);
    let mut f = Fake::connect(commit_cfg(), &src);
    let got = f.pump(0, &mut src);
    let all: Vec<u16> = got.iter().map(|(p, _)| *p).collect();
    puback(&mut f, &all, 1);
    assert_eq!(f.s.acks_waiting(), 5, "all acknowledged by the broker");
    drop(f); // the process dies before the commit: nothing reached the store
    assert_eq!(src.pending_seqs(), vec![1, 2, 3, 4, 5]);
    assert!(src.applied.is_empty());
    let mut restarted = Fake::connect(commit_cfg(), &src);
    let again = restarted.drain(&mut src);
    let events: Vec<_> = again.iter().filter(|p| p.topic.contains("/events/")).collect();
    assert_eq!(events.len(), 5, "every record sent again");
    assert!(events.iter().all(|p| events_in(p)[0]["replayed"] == true));
    assert!(src.pending_seqs().is_empty());
}

#[test]
fn events_batch_across_their_sensors_raw_samples() {
    let mut src = OutboxModel::new();
    let samples = |journal_pos: u64, t0_ms: i64| OutboxRecord::Samples {
        machine: "m".into(),
        sensor: "s1".into(),
        journal_pos,
        t0_ms,
        rate_hz: 100.0,
        n: 100,
        frame: None,
    };
    for second in 1..=3u64 {
        src.push(event("s1", second));
        src.push(samples(second, 1000 * second as i64));
        let rec = SamplesRecord {
            machine: "m".into(),
            sensor: "s1".into(),
            t0_ms: 1000 * second as i64,
            rate_hz: 100.0,
            unit: Unit::G,
            axis: None,
            clock: None,
            data: vec![0.25; 100],
        };
        src.put_samples(second, rec);
    }
    let mut f = Fake::connect(SessionConfig { batch_events: 10, ..commit_cfg() }, &src);
    let all = f.drain(&mut src);
    let topics: Vec<&str> = all.iter().map(|p| p.topic.as_str()).collect();
    assert_eq!(
        topics,
        [
            "lg/gw/status",
            "lg/gw/events/m/s1",
            "lg/gw/samples/m/s1",
            "lg/gw/samples/m/s1",
            "lg/gw/samples/m/s1"
        ]
    );
    let seqs: Vec<_> = events_in(&all[1]).iter().map(|e| e["seq"].clone()).collect();
    assert_eq!(seqs, [1, 2, 3], "one batch, in seq order");
    let t0s: Vec<_> = all[2..]
        .iter()
        .map(|p| crate::records::samples_codec::SamplesFrame::decode(&p.payload).unwrap().t0_ms)
        .collect();
    assert_eq!(t0s, [1000, 2000, 3000], "frames keep their order");
    assert!(src.pending_seqs().is_empty());
}

#[test]
fn written_records_are_ledgered_published_once_and_re_sent_ones_again() {
    let mut src = OutboxModel::new();
    for i in 1..=4 {
        src.push(event("s1", i));
    }
    let mut s = Session::new(cfg());
    let next = connack(&mut s, 0, &src);
    let n = src.serve(&mut s, next, 1).len(); // status, events 1..=3, event 4
    assert_eq!(s.flush(), [Write::Sync], "handed over is not yet written");
    for pkid in 1..=n as u16 {
        assert!(s.on_outgoing_publish(pkid));
    }
    let written = Write::Apply { published: vec![1, 2, 3, 4], acked: vec![] };
    assert_eq!(s.flush(), [written, Write::Sync]);
    assert_eq!(s.flush(), [Write::Sync], "each once");
    // The connection drops before any PUBACK: the next one writes them again.
    let next = connack(&mut s, 2, &src);
    let n = src.serve(&mut s, next, 3).len();
    for pkid in 1..=n as u16 {
        assert!(s.on_outgoing_publish(pkid));
    }
    assert!(s.on_puback(2, 4));
    // One write: `Published` with (fetch.rs: before) `Acknowledged`.
    let both = Write::Apply { published: vec![1, 2, 3, 4], acked: vec![1, 2, 3] };
    assert_eq!(s.flush(), [both, Write::Sync]);
}
