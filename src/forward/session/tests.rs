//! The session core's rules without a network or a store: a fake broker answers PUBLISHes in
//! order, an in-memory outbox answers the session's reads and writes.

use super::*;
use crate::event::Unit;
use crate::forward::fake_broker::{alert, cfg, event, events_in, Fake};
use crate::forward::outbox_model::OutboxModel;
use crate::records::outbox::{GapNotice, GapRange};
use crate::trace::SamplesRecord;
use std::collections::HashMap;

#[test]
fn status_first_then_alerts_then_batched_events_and_acks_only_on_puback() {
    let mut src = OutboxModel::new();
    let mut f = Fake::connect(cfg(), &src);
    for i in 1..=4 {
        src.push(event("s1", i));
    }
    src.push(alert(1));
    let got = f.pump(1, &mut src);
    assert_eq!(got[0].1.topic, "lg/gw/status");
    assert!(got[0].1.retain);
    assert_eq!(got[0].1.payload, ONLINE);
    assert_eq!(got[1].1.topic, "lg/gw/alerts/m");
    assert_eq!(got[2].1.topic, "lg/gw/events/m/s1");
    let first = events_in(&got[2].1);
    assert_eq!(first.len(), 3, "batch_events is 3");
    assert_eq!(first[0]["seq"], 1);
    assert_eq!(first[0].get("replayed"), None, "live events are not marked");
    assert_eq!(events_in(&got[3].1)[0]["seq"], 4);
    // Nothing leaves the outbox before its PUBACK; a PUBACK acknowledges exactly its records.
    assert_eq!(src.pending_seqs().len(), 5);
    f.ack_all(&[got[2].0], 2, &mut src);
    assert_eq!(src.pending_seqs(), vec![4, 5]);
    assert!(!f.s.on_puback(999, 3), "unknown packet id");
}

#[test]
fn records_pending_at_connack_are_backlog_replayed_after_live() {
    let mut src = OutboxModel::new();
    src.push(event("s1", 1));
    src.push(event("s1", 2));
    let mut f = Fake::connect(cfg(), &src);
    src.push(event("s2", 1));
    let all = f.drain(&mut src);
    let events: Vec<&Publish> = all.iter().filter(|p| p.topic.contains("/events/")).collect();
    assert_eq!(events[0].topic, "lg/gw/events/m/s2", "live goes before backlog");
    assert_eq!(events_in(events[0])[0].get("replayed"), None);
    let replayed = events_in(events[1]);
    assert_eq!(replayed.len(), 2);
    assert!(replayed.iter().all(|e| e["replayed"] == true));
    assert!(src.pending_seqs().is_empty());
}

#[test]
fn a_disconnect_resends_everything_unacknowledged_after_the_next_connack() {
    let mut src = OutboxModel::new();
    let mut f = Fake::connect(cfg(), &src);
    for i in 1..=2 {
        src.push(event("s1", i));
    }
    src.push(alert(7));
    let got = f.pump(1, &mut src);
    assert_eq!(got.len(), 3); // status, alert, one batch
    f.ack_all(&[got[1].0], 2, &mut src); // only the alert is acknowledged
    f.s.on_disconnect();
    f.outstanding.clear(); // the connection and its packet ids are gone
    assert_eq!(f.s.in_flight(), 0);
    assert!(f.pump(3, &mut src).is_empty(), "nothing while disconnected");
    f.reconnect(4, &src);
    let again = f.drain(&mut src);
    let batches: Vec<_> = again.iter().filter(|p| p.topic.contains("/events/")).collect();
    assert_eq!(batches.len(), 1);
    let evs = events_in(batches[0]);
    assert_eq!((evs[0]["seq"].clone(), evs[1]["seq"].clone()), (1.into(), 2.into()));
    assert!(evs.iter().all(|e| e["replayed"] == true));
    assert!(!again.iter().any(|p| p.topic.contains("alerts")), "acked alert not resent");
}

#[test]
fn in_flight_window_is_bounded() {
    let mut src = OutboxModel::new();
    let mut c = cfg();
    c.batch_events = 1;
    let mut f = Fake::connect(c, &src);
    for i in 1..=20 {
        src.push(event("s1", i));
    }
    let got = f.pump(1, &mut src);
    assert_eq!(got.len(), 4, "status + 3 = inflight 4");
    assert!(f.pump(2, &mut src).is_empty(), "window full");
    f.ack_all(&[got[1].0], 3, &mut src);
    assert_eq!(f.pump(4, &mut src).len(), 1);
    let all = f.drain(&mut src);
    let seqs: Vec<i64> =
        all.iter().flat_map(events_in).map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (5..=20).collect::<Vec<_>>(), "the rest, in order");
}

#[test]
fn payload_bytes_in_flight_hold_records_back_but_not_alerts() {
    let mut src = OutboxModel::new();
    let mut c = cfg();
    c.batch_events = 1;
    c.inflight = 16;
    let one = event_batch_len(&event("s1", 1));
    // Two events' payloads fit below the byte window, the third reaches it.
    c.inflight_bytes = 2 * one + ONLINE.len() + 1;
    let mut f = Fake::connect(c, &src);
    for i in 1..=6 {
        src.push(event("s1", i));
    }
    let got = f.pump(1, &mut src);
    assert_eq!(got.len(), 4, "status + 3 events: the third crosses the byte window");
    assert!(f.s.in_flight_bytes() >= f.s.config().inflight_bytes);
    assert!(f.pump(2, &mut src).is_empty(), "byte window full, count window not");
    src.push(alert(1));
    let alerts = f.pump(3, &mut src);
    assert_eq!(alerts.len(), 1, "an alert goes past a full byte window");
    assert_eq!(alerts[0].1.topic, "lg/gw/alerts/m");
    f.ack_all(&[got[0].0, got[1].0, alerts[0].0], 4, &mut src);
    let more = f.pump(5, &mut src);
    assert_eq!(more.len(), 1, "PUBACKs free bytes: one more event goes");
    assert_eq!(events_in(&more[0].1)[0]["seq"], 4);
    let all = f.drain(&mut src);
    let seqs: Vec<i64> =
        all.iter().flat_map(events_in).map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, vec![5, 6], "the rest, in order");
    assert_eq!(f.s.in_flight_bytes(), 0);
}

#[test]
fn event_batches_fill_a_share_of_the_byte_window_so_several_are_in_flight() {
    use crate::forward::batch::PIPELINE;
    let mut src = OutboxModel::new();
    let mut c = cfg();
    c.batch_events = 1000;
    c.inflight = 64;
    c.buffer = 1000;
    let one = event_batch_len(&event("s1", 100));
    // Each batch may hold about four events: far fewer than the packet limit allows.
    c.inflight_bytes = PIPELINE * 4 * one;
    let mut f = Fake::connect(c.clone(), &src);
    for i in 100..400 {
        src.push(event("s1", i));
    }
    let got = f.pump(1, &mut src);
    let batches: Vec<_> = got.iter().filter(|(_, p)| p.topic.contains("/events/")).collect();
    assert!(
        batches.len() >= PIPELINE,
        "{} batches in flight before any PUBACK, not one window-sized batch",
        batches.len()
    );
    for (_, p) in &batches {
        assert!(p.payload.len() <= c.inflight_bytes / PIPELINE, "{} bytes", p.payload.len());
        assert!(events_in(p).len() >= 3, "a batch still holds several events");
    }
    let rest = f.drain(&mut src);
    let seqs: Vec<i64> = (batches.iter().map(|(_, p)| p).chain(rest.iter()))
        .flat_map(events_in)
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, (100..400).collect::<Vec<_>>(), "every event once, in order");
}

/// Bytes of the payload of a batch holding only this event.
fn event_batch_len(r: &OutboxRecord) -> usize {
    match r {
        OutboxRecord::Event { json, .. } => br#"{"events":[]}"#.len() + json.len(),
        _ => unreachable!("an event"),
    }
}

#[test]
fn backlog_is_paced_and_live_data_is_not() {
    let mut src = OutboxModel::new();
    let mut c = cfg();
    c.replay_rate = 10; // records per second, burst 1
    c.batch_events = 10;
    c.inflight = 50;
    for i in 1..=30 {
        src.push(event("s1", i));
    }
    let mut f = Fake::connect(c, &src);
    let mut sent_by = Vec::new();
    for now in (0..=3000).step_by(100) {
        if now == 1500 {
            src.push(event("s2", 1));
        }
        let got = f.pump(now, &mut src);
        for (_, p) in &got {
            for e in events_in(p) {
                sent_by.push((now, e["event_id"].as_str().unwrap().to_owned()));
            }
        }
        let pkids: Vec<u16> = got.iter().map(|(p, _)| *p).collect();
        f.ack_all(&pkids, now, &mut src);
    }
    let backlog_by =
        |t: i64| sent_by.iter().filter(|(n, id)| *n <= t && id.contains(".s1.")).count();
    assert!(backlog_by(1000) <= 11, "10/s pace: {}", backlog_by(1000));
    assert!(backlog_by(3000) >= 25, "pace keeps going: {}", backlog_by(3000));
    let live = sent_by.iter().find(|(_, id)| id == "m.s2.1").unwrap();
    assert_eq!(live.0, 1500, "live event goes at once despite the backlog");
    assert!(f.s.pace_in_ms().is_none() || f.s.pace_in_ms().unwrap() <= 100);
}

#[test]
fn backlog_alerts_go_before_backlog_events_even_far_behind() {
    let mut src = OutboxModel::new();
    let mut c = cfg();
    c.batch_events = 1;
    c.inflight = 2;
    for i in 1..=40 {
        src.push(event("s1", i));
    }
    src.push(alert(1));
    let mut f = Fake::connect(c, &src);
    let got = f.pump(1, &mut src);
    assert_eq!(got[1].1.topic, "lg/gw/alerts/m", "alert behind 40 records (buffer 8) goes first");
}

/// A `samples` outbox record of `sensor` at journal position `pos`, with its journal record.
fn push_samples(src: &mut OutboxModel, sensor: &str, pos: u64) {
    let t0_ms = 1000 * pos as i64;
    let (machine, sensor) = ("m".to_owned(), sensor.to_owned());
    let rec = OutboxRecord::Samples {
        machine: machine.clone(),
        sensor: sensor.clone(),
        journal_pos: pos,
        t0_ms,
        rate_hz: 4.0,
        n: 4,
        frame: None,
    };
    src.push(rec);
    let data = vec![0.25; 4];
    let s = SamplesRecord {
        machine,
        sensor,
        t0_ms,
        rate_hz: 4.0,
        unit: Unit::G,
        axis: None,
        clock: None,
        data,
    };
    src.put_samples(pos, s);
}

#[test]
fn backlog_events_and_gaps_go_before_its_raw_samples_each_lane_in_order() {
    let mut src = OutboxModel::new();
    let mut c = cfg();
    c.inflight = 2;
    c.batch_events = 2;
    // Ten frames first: whole pages (buffer 8) without an event must not stall the events lane.
    for pos in 1..=10 {
        push_samples(&mut src, "s1", pos);
    }
    for i in 1..=6 {
        src.push(event("s1", i));
        push_samples(&mut src, "s2", 100 + i);
        src.push(event("s2", i));
    }
    src.push(OutboxRecord::Gap(GapNotice {
        machine: "m".into(),
        sensor: "s1".into(),
        range: GapRange::Events { from_seq: 7, to_seq: 7 },
        reason: "shed".into(),
        declared_at_ms: 0,
    }));
    push_samples(&mut src, "s1", 11);
    let mut f = Fake::connect(c, &src);
    src.push(event("s3", 1)); // live
    let all = f.drain(&mut src);
    assert!(src.pending_seqs().is_empty(), "everything acknowledged");
    let is_frame = |p: &Publish| p.topic.contains("/samples/");
    let first_frame = all.iter().position(is_frame).unwrap();
    assert!(all[first_frame..].iter().all(is_frame), "no event or gap after a backlog frame");
    assert_eq!(all[first_frame - 1].topic, "lg/gw/gaps/s1", "the gap notice with the events");
    assert_eq!(all[1].topic, "lg/gw/events/m/s3", "live first");
    let mut seqs: HashMap<String, Vec<u64>> = HashMap::new();
    for p in &all[2..first_frame - 1] {
        for e in events_in(p) {
            assert_eq!(e["replayed"], true, "{e}");
            let id = e["event_id"].as_str().unwrap().to_owned();
            seqs.entry(id[..4].to_owned()).or_default().push(e["seq"].as_u64().unwrap());
        }
    }
    assert_eq!(seqs["m.s1"], (1..=6).collect::<Vec<_>>());
    assert_eq!(seqs["m.s2"], (1..=6).collect::<Vec<_>>());
    let t0 = |sensor: &str| -> Vec<i64> {
        let topic = format!("lg/gw/samples/m/{sensor}");
        let frames = all[first_frame..].iter().filter(|p| p.topic == topic);
        frames
            .map(|p| crate::records::samples_codec::SamplesFrame::decode(&p.payload).unwrap().t0_ms)
            .collect()
    };
    assert_eq!(t0("s1"), (1..=11).map(|p| 1000 * p).collect::<Vec<_>>());
    assert_eq!(t0("s2"), (101..=106).map(|p| 1000 * p).collect::<Vec<_>>());
}

#[test]
fn per_sensor_order_holds_and_batches_stop_at_other_record_kinds() {
    let mut src = OutboxModel::new();
    let mut c = cfg();
    c.batch_events = 10;
    let mut f = Fake::connect(c, &src);
    src.push(event("s1", 1));
    src.push(event("s2", 1));
    src.push(event("s1", 2));
    src.push(OutboxRecord::Gap(GapNotice {
        machine: "m".into(),
        sensor: "s1".into(),
        range: GapRange::Events { from_seq: 3, to_seq: 3 },
        reason: "sensor_fault".into(),
        declared_at_ms: 0,
    }));
    src.push(event("s1", 4));
    let all = f.drain(&mut src);
    let topics: Vec<&str> = all.iter().map(|p| p.topic.as_str()).collect();
    assert_eq!(
        topics,
        [
            "lg/gw/status",
            "lg/gw/events/m/s1",
            "lg/gw/events/m/s2",
            "lg/gw/gaps/s1",
            "lg/gw/events/m/s1"
        ]
    );
    assert_eq!(events_in(&all[1]).len(), 2, "s1 events 1 and 2 batched across s2's");
}

#[test]
fn oversized_records_never_loop() {
    let mut src = OutboxModel::new();
    let mut f = Fake::connect(cfg(), &src);
    let big = format!(r#"{{"event_id":"m.s1.1","pad":"{}"}}"#, "x".repeat(5000));
    src.push(OutboxRecord::Event {
        machine: "m".into(),
        sensor: "s1".into(),
        seq: 1,
        event_id: "m.s1.1".into(),
        json: big.into_bytes(),
    });
    src.push(OutboxRecord::Samples {
        machine: "m".into(),
        sensor: "s1".into(),
        journal_pos: 9,
        t0_ms: 5000,
        rate_hz: 1000.0,
        n: 3000,
        frame: None,
    });
    src.put_samples(
        9,
        SamplesRecord {
            machine: "m".into(),
            sensor: "s1".into(),
            t0_ms: 5000,
            rate_hz: 1000.0,
            unit: Unit::G,
            axis: Some("z".into()),
            clock: None,
            data: (0..3000).map(|i| f64::from(i) / 1000.0).collect(),
        },
    );
    src.push(OutboxRecord::Samples {
        machine: "m".into(),
        sensor: "s9".into(),
        journal_pos: 10, // not in the journal any more
        t0_ms: 0,
        rate_hz: 1.0,
        n: 1,
        frame: None,
    });
    let all = f.drain(&mut src);
    assert!(src.pending_seqs().is_empty(), "every record left the outbox");
    let gap: serde_json::Value = serde_json::from_slice(&all[1].payload).unwrap();
    assert_eq!(all[1].topic, "lg/gw/gaps/s1");
    assert_eq!(gap["reason"], "oversized");
    assert_eq!(gap["range"]["from_seq"], 1);
    let frames: Vec<_> = all.iter().filter(|p| p.topic == "lg/gw/samples/m/s1").collect();
    assert_eq!(frames.len(), 3, "12 KB of samples in 4 KiB packets");
    assert!(all.iter().all(|p| p.payload.len() + p.topic.len() + 9 <= 4096));
    let n: usize = frames
        .iter()
        .map(|p| {
            crate::records::samples_codec::SamplesFrame::decode(&p.payload).unwrap().values.len()
        })
        .sum();
    assert_eq!(n, 3000);
}

#[test]
fn a_split_record_is_acknowledged_only_when_every_part_is() {
    let mut src = OutboxModel::new();
    let mut f = Fake::connect(cfg(), &src);
    src.push(OutboxRecord::Samples {
        machine: "m".into(),
        sensor: "s1".into(),
        journal_pos: 1,
        t0_ms: 0,
        rate_hz: 100.0,
        n: 2000,
        frame: None,
    });
    let data = vec![0.5; 2000];
    let rec = SamplesRecord {
        machine: "m".into(),
        sensor: "s1".into(),
        t0_ms: 0,
        rate_hz: 100.0,
        unit: Unit::G,
        axis: None,
        clock: None,
        data,
    };
    src.put_samples(1, rec);
    let got = f.pump(1, &mut src);
    assert_eq!(got.len(), 3, "status + 2 frames");
    f.ack_all(&[got[2].0], 2, &mut src);
    assert_eq!(src.pending_seqs(), vec![1]);
    f.ack_all(&[got[1].0], 3, &mut src);
    assert!(src.pending_seqs().is_empty());
}

#[test]
fn a_connection_without_pubacks_is_stalled() {
    let mut src = OutboxModel::new();
    let mut f = Fake::connect(cfg(), &src);
    src.push(event("s1", 1));
    f.pump(0, &mut src);
    assert!(!f.s.stalled(10_000));
    assert!(f.s.stalled(10_001));
}

/// The forward stage's span covers a take's outbox sequences; each record's event ID is traced
/// inside it, and an acknowledgement names its records.
#[test]
fn the_forward_span_names_the_outbox_sequences_and_the_events() {
    let ((), text) = crate::telemetry::captured::trace_of(|| {
        let mut src = OutboxModel::new();
        let mut f = Fake::connect(cfg(), &src);
        for i in 1..=3 {
            src.push(event("s1", i));
        }
        let got = f.pump(1, &mut src);
        f.ack_all(&[got[1].0], 2, &mut src);
    });
    assert!(
        text.contains("forward{stream=Live replayed=false first_seq=1 last_seq=3 records=3}"),
        "{text}"
    );
    assert!(text.contains("seq=2 event_id=m.s1.2"), "{text}");
    assert!(text.contains("seqs=[1, 2, 3]"), "{text}");
}

mod commit;
mod round;
