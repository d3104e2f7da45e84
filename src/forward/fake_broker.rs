//! For unit tests of the session core: a fake broker that assigns packet ids in order and
//! acknowledges on request, with the settings and records the tests use. The store's part is
//! played by an [`OutboxModel`].

use super::outbox_model::OutboxModel;
use super::request::{Next, Publish, Read};
use super::session::Session;
use super::session_config::SessionConfig;
use crate::records::outbox::OutboxRecord;

pub(super) fn cfg() -> SessionConfig {
    SessionConfig {
        topic_root: "lg/gw".into(),
        inflight: 4,
        inflight_bytes: 1 << 20,
        max_packet: 4096,
        replay_rate: 0,
        batch_events: 3,
        buffer: 8,
        stall_ms: 10_000,
        commit_acks: 100,
        commit_ms: 50,
        sync_ms: 1000,
    }
}

pub(super) fn event(sensor: &str, seq: u64) -> OutboxRecord {
    let json = format!(r#"{{"event_id":"m.{sensor}.{seq}","seq":{seq},"ts_ms":{}}}"#, 1000 * seq);
    OutboxRecord::Event {
        machine: "m".into(),
        sensor: sensor.into(),
        seq,
        event_id: format!("m.{sensor}.{seq}"),
        json: json.into_bytes(),
    }
}

pub(super) fn alert(n: u32) -> OutboxRecord {
    OutboxRecord::Alert {
        machine: "m".into(),
        alert_id: format!("a{n}"),
        revision: 0,
        json: format!(r#"{{"alert_id":"a{n}","also":[]}}"#).into_bytes(),
    }
}

/// A ConnAck at `now`. The shell reads the backlog's boundary at once; the rest of the round
/// (the status PUBLISH, the next read) is returned to go on with.
pub(super) fn connack(s: &mut Session, now: i64, src: &OutboxModel) -> Next {
    s.on_connack(now);
    let mut next = s.poll(now);
    assert_eq!(next.read, Some(Read::NextSeq), "the boundary is read first");
    let rest = s.feed(src.read(&Read::NextSeq), now);
    next.publishes.extend(rest.publishes);
    Next { read: rest.read, ..next }
}

/// A broker that assigns packet ids in order and acknowledges on request.
pub(super) struct Fake {
    pub(super) s: Session,
    /// What the session asked for at the ConnAck, carried out at the next pump.
    held: Option<Next>,
    next_pkid: u16,
    /// Packet ids written and not yet acknowledged.
    pub(super) outstanding: Vec<u16>,
}

impl Fake {
    pub(super) fn connect(cfg: SessionConfig, src: &OutboxModel) -> Fake {
        let mut s = Session::new(cfg);
        let held = Some(connack(&mut s, 0, src));
        Fake { s, held, next_pkid: 1, outstanding: Vec::new() }
    }
    /// A new connection: the old one's packet ids are gone.
    pub(super) fn reconnect(&mut self, now: i64, src: &OutboxModel) {
        self.outstanding.clear();
        self.held = Some(connack(&mut self.s, now, src));
    }
    /// Polls the session, serving its requests, and reports each PUBLISH as written; returns
    /// them.
    pub(super) fn pump(&mut self, now: i64, src: &mut OutboxModel) -> Vec<(u16, Publish)> {
        if src.take_grew() {
            self.s.outbox_grew(); // as the pipeline's notification does
        }
        let next = self.held.take().unwrap_or_else(|| self.s.poll(now));
        let out = src.serve(&mut self.s, next, now);
        let mut got = Vec::new();
        for p in out {
            let pkid = self.next_pkid;
            self.next_pkid += 1;
            assert!(self.s.on_outgoing_publish(pkid));
            got.push((pkid, p));
            self.outstanding.push(pkid);
        }
        got
    }
    /// Acknowledges `pkids` and applies what is acknowledged at once.
    pub(super) fn ack_all(&mut self, pkids: &[u16], now: i64, src: &mut OutboxModel) {
        for &p in pkids {
            assert!(self.s.on_puback(p, now));
            self.outstanding.retain(|&o| o != p);
        }
        if self.s.acks_waiting() > 0 {
            src.flush(&mut self.s, now);
        }
    }
    /// Pumps and acknowledges until nothing is left to send.
    pub(super) fn drain(&mut self, src: &mut OutboxModel) -> Vec<Publish> {
        let mut all = Vec::new();
        for now in 1..10_000 {
            let got = self.pump(now, src);
            let quiet = got.is_empty() && self.s.acks_waiting() == 0;
            let pkids = self.outstanding.clone();
            self.ack_all(&pkids, now, src);
            if quiet && pkids.is_empty() {
                break;
            }
            all.extend(got.into_iter().map(|(_, p)| p));
        }
        all
    }
}

pub(super) fn events_in(p: &Publish) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_slice(&p.payload).unwrap();
    v["events"].as_array().cloned().unwrap_or_default()
}

/// Answers the session's reads until it asks for none; returns every PUBLISH and its write.
pub(super) fn reads_answered(s: &mut Session, src: &OutboxModel, next: Next, now: i64) -> Next {
    let mut next = next;
    let mut publishes = std::mem::take(&mut next.publishes);
    while let Some(r) = next.read.take() {
        next = s.feed(src.read(&r), now);
        publishes.append(&mut next.publishes);
    }
    Next { publishes, ..next }
}
