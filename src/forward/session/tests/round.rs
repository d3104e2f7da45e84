//! Rounds: the session asks for one read at a time and waits for its answer, and asks for
//! writes between rounds, one at a time.

use super::*;
use crate::forward::fake_broker::{cfg, connack, event, events_in, reads_answered};
use crate::forward::outbox_model::OutboxModel;

#[test]
fn a_poll_while_a_read_is_under_way_asks_nothing_and_another_round_follows() {
    let mut src = OutboxModel::new();
    let mut s = Session::new(cfg());
    let next = connack(&mut s, 0, &src);
    let live = |after| Read::Records { stream: Stream::Live, after, limit: 8 };
    assert_eq!((next.publishes.len(), &next.read), (1, &Some(live(0))), "status; no backlog");
    let answer = src.read(&live(0));
    src.push(event("s1", 1)); // the outbox grows after the read, before its answer is fed
    s.outbox_grew();
    assert_eq!(s.poll(1), Next::default(), "nothing more is asked while a read is under way");
    assert_eq!(s.wake_in_ms(1), None, "its answer comes first");
    let next = s.feed(answer, 2);
    assert_eq!(next.read, Some(live(0)), "that round found nothing; the next one reads again");
    let next = reads_answered(&mut s, &src, next, 2);
    assert_eq!(next.publishes.len(), 1, "the new event");
    assert_eq!(events_in(&next.publishes[0])[0].get("replayed"), None, "live");
    let reads = src.live_reads.get();
    assert_eq!(reads, 3, "the empty page, the event's page, and the empty page after it");
    assert_eq!(s.poll(3), Next::default(), "nothing announced: no read");
    assert_eq!(src.live_reads.get(), reads);
}

/// A round at `now` with its reads answered: its PUBLISHes.
fn round(s: &mut Session, src: &OutboxModel, now: i64) -> Vec<Publish> {
    let next = s.poll(now);
    reads_answered(s, src, next, now).publishes
}

#[test]
fn live_records_are_read_when_announced_or_after_the_rescan_interval() {
    let mut src = OutboxModel::new();
    let mut s = Session::new(cfg());
    let next = connack(&mut s, 0, &src);
    assert_eq!(reads_answered(&mut s, &src, next, 0).publishes.len(), 1, "the status");
    src.push(event("s1", 1)); // not announced
    assert!(round(&mut s, &src, 1).is_empty(), "not announced, not read");
    assert!(round(&mut s, &src, LIVE_RESCAN_MS - 1).is_empty());
    assert_eq!(round(&mut s, &src, LIVE_RESCAN_MS).len(), 1, "the safety net's read finds it");
    src.push(event("s1", 2));
    s.outbox_grew();
    assert_eq!(round(&mut s, &src, LIVE_RESCAN_MS + 1).len(), 1, "announced: read at once");
}

#[test]
fn an_answer_nobody_waits_for_is_dropped() {
    let mut src = OutboxModel::new();
    src.push(event("s1", 1));
    let mut s = Session::new(cfg());
    let next = connack(&mut s, 0, &src);
    let read = next.read.unwrap();
    s.on_disconnect();
    assert_eq!(s.feed(src.read(&read), 1), Next::default());
    assert_eq!(s.poll(1), Next::default(), "disconnected: nothing to do");
    let next = connack(&mut s, 2, &src);
    assert_eq!(src.serve(&mut s, next, 3).len(), 2, "the status and the event, once");
}

#[test]
fn one_write_at_a_time_and_none_while_a_read_is_under_way() {
    let mut src = OutboxModel::new();
    src.push(event("s1", 1));
    let mut s = Session::new(SessionConfig { commit_acks: 1, ..cfg() });
    let next = connack(&mut s, 0, &src);
    assert_eq!(src.serve(&mut s, next, 1).len(), 2, "the status and the event");
    assert!(s.on_outgoing_publish(1) && s.on_outgoing_publish(2));
    assert!(s.on_puback(2, 2));
    s.outbox_grew();
    let next = s.poll(3);
    assert!(next.read.is_some(), "a fill pass");
    assert_eq!((&next.write, s.wake_in_ms(3)), (&None, None), "due, but the round reads");
    let next = reads_answered(&mut s, &src, next, 3);
    let first = Write::Apply { published: vec![1], acked: vec![1] };
    assert_eq!(next.write, Some(first.clone()), "between rounds");
    // While it is under way, another acknowledgement becomes due but is not asked for.
    src.push(event("s1", 2));
    s.outbox_grew();
    let next = s.poll(4);
    let next = reads_answered(&mut s, &src, next, 4);
    assert_eq!((next.publishes.len(), &next.write), (1, &None));
    assert!(s.on_outgoing_publish(3) && s.on_puback(3, 5));
    assert!(s.commit_due(5));
    let next = s.poll(5);
    assert_eq!(reads_answered(&mut s, &src, next, 5).write, None, "one write at a time");
    assert_eq!(s.wake_in_ms(5), None, "nothing to wake for before it is done");
    s.written(src.write(&first), 6);
    let next = s.poll(6);
    let next = reads_answered(&mut s, &src, next, 6);
    assert_eq!(next.write, Some(Write::Apply { published: vec![2], acked: vec![2] }));
}
