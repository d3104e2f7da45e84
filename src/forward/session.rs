//! The MQTT session core: which outbox records to publish next, which PUBACK acknowledges which
//! records, and when backlog may go. No network and no clock: the shell (`client.rs`) feeds it
//! connection events and the time, and carries out what it returns. Reads go through
//! [`OutboxSource`], so unit tests drive it with a [`super::MemorySource`].
//!
//! # Rules it keeps
//!
//! - A record leaves the outbox only through [`Session::take_acks`], i.e. after the PUBACK of every
//!   PUBLISH that carried it. rumqttc's `publish` returns no packet id: PUBLISHes are handed over
//!   in order and rumqttc reports `Outgoing::Publish(pkid)` in the same order, so the n-th such
//!   report names the n-th unassigned flight.
//! - Every connection starts clean ([`Session::on_connack`]): nothing is in flight, and everything
//!   still in the outbox is sent again. Records older than the connection (sequence below the
//!   outbox's next sequence at ConnAck) are *backlog*: their events carry `"replayed": true` and
//!   they go at most `replay_rate` records per second. Younger records are *live* and go at once.
//! - Alerts first (live or backlog, unpaced); then live records; then backlog, in two lanes: its
//!   events and gap notices, then its raw samples, read only once the events are all handed
//!   over. Within the live stream and within each lane, records go in outbox order, hence per
//!   sensor in `seq` order.
//! - At most `inflight` PUBLISHes await a PUBACK, and records other than alerts are handed over
//!   only while the payloads awaiting a PUBACK total less than `inflight_bytes`: what is queued
//!   ahead of an alert in the client and the socket stays small (a window of 64 raw frames is
//!   0.8 MB, ~10 ms at loopback speed), so an alert does not wait behind a backlog drain.
//! - Records whose PUBLISH was written are reported by [`Session::take_published`], so the ledger
//!   says `Published` before (or in the same commit as) `Acknowledged`.
//! - Acknowledgements are applied to the store in batches: [`Session::commit_due`] says when,
//!   after `commit_acks` acknowledged records, `commit_ms` after the oldest one not yet applied,
//!   or as soon as nothing is in flight or waiting to go (a drain just ended), whichever comes
//!   first (the shell flushes the rest when a connection ends). Applied is not yet durable: the
//!   store's next commit makes it so, normally a checkpoint's; [`Session::sync_due`] says when
//!   the shell must commit itself, `sync_ms` after the first application no commit has covered.
//!   An acknowledged record not yet durable is still in the outbox after a crash and is simply
//!   sent again (at least once).

use std::collections::{HashMap, VecDeque};

use super::batch::{next_payloads, Item};
use super::source::{Lane, OutboxSource, SourceError};
use crate::records::outbox::OutboxRecord;

/// Settings of the session core (from `[mqtt]`).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    /// `{prefix}/{gateway}`: every topic starts with it.
    pub topic_root: String,
    /// PUBLISHes awaiting PUBACK, at most.
    pub inflight: usize,
    /// Payload bytes awaiting PUBACK above which only alerts are handed over.
    pub inflight_bytes: usize,
    /// The broker's maximum packet size, in bytes, that every PUBLISH must fit.
    pub max_packet: usize,
    /// Backlog records per second; 0 means unpaced.
    pub replay_rate: u32,
    /// Events in one `{"events": [...]}` payload, at most.
    pub batch_events: usize,
    /// Records held in memory per stream (alerts, live) and backlog lane (events, raw samples),
    /// at most.
    pub buffer: usize,
    /// With PUBLISHes in flight and no PUBACK for this long, the connection is stalled.
    pub stall_ms: i64,
    /// Acknowledged records that make applying them due at once (one batch per 512, no fsync).
    pub commit_acks: usize,
    /// Acknowledgements are applied this long after the oldest one not yet applied, at most.
    pub commit_ms: i64,
    /// Applied acknowledgements are made durable this long after the first of them, at most
    /// (unless a checkpoint's commit has done it already).
    pub sync_ms: i64,
}

/// One PUBLISH to make (QoS 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Publish {
    pub topic: String,
    pub payload: Vec<u8>,
    pub retain: bool,
}

/// A PUBLISH handed to the client, awaiting its packet id and then its PUBACK.
#[derive(Debug)]
struct Flight {
    pkid: Option<u16>,
    /// Records complete once this PUBACK arrives.
    seqs: Vec<u64>,
    /// A record split over several PUBLISHes (raw samples), complete when all are acknowledged.
    part_of: Option<u64>,
    /// Payload bytes.
    bytes: usize,
}

/// The session core. See the module documentation.
#[derive(Debug)]
pub struct Session {
    cfg: SessionConfig,
    connected: bool,
    /// Records below this sequence are backlog for the current connection.
    boundary: u64,
    alert_cursor: u64,
    backlog_cursor: u64,
    samples_cursor: u64,
    live_cursor: u64,
    alerts: VecDeque<(u64, OutboxRecord)>,
    /// The backlog's events and gap notices.
    backlog: VecDeque<(u64, OutboxRecord)>,
    /// The backlog's raw samples.
    backlog_samples: VecDeque<(u64, OutboxRecord)>,
    live: VecDeque<(u64, OutboxRecord)>,
    flights: VecDeque<Flight>,
    /// Payload bytes of `flights`.
    flight_bytes: usize,
    /// Outstanding PUBLISHes of each split record.
    parts: HashMap<u64, usize>,
    acked: Vec<u64>,
    /// When the oldest record in `acked` was acknowledged.
    acked_since_ms: Option<i64>,
    /// When acknowledgements were first applied since the last sync.
    unsynced_since_ms: Option<i64>,
    /// Records whose PUBLISH (or a part of it) was written since [`Session::take_published`].
    published: Vec<u64>,
    tokens: f64,
    refilled_ms: i64,
    progress_ms: i64,
    status_due: bool,
}

/// Topic suffix of the retained status.
pub const STATUS: &str = "status";
/// The retained status payload while connected; the last will says `offline`.
pub const ONLINE: &[u8] = br#"{"state":"online"}"#;
pub const OFFLINE: &[u8] = br#"{"state":"offline"}"#;

impl Session {
    pub fn new(cfg: SessionConfig) -> Self {
        Session {
            cfg,
            connected: false,
            boundary: 1,
            alert_cursor: 0,
            backlog_cursor: 0,
            samples_cursor: 0,
            live_cursor: 0,
            alerts: VecDeque::new(),
            backlog: VecDeque::new(),
            backlog_samples: VecDeque::new(),
            live: VecDeque::new(),
            flights: VecDeque::new(),
            flight_bytes: 0,
            parts: HashMap::new(),
            acked: Vec::new(),
            acked_since_ms: None,
            unsynced_since_ms: None,
            published: Vec::new(),
            tokens: 0.0,
            refilled_ms: 0,
            progress_ms: 0,
            status_due: false,
        }
    }

    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// The broker accepted a new connection: start over from the outbox.
    pub fn on_connack(&mut self, now_ms: i64, src: &dyn OutboxSource) -> Result<(), SourceError> {
        self.on_disconnect();
        self.boundary = src.next_seq()?;
        self.live_cursor = self.boundary - 1;
        self.connected = true;
        self.status_due = true;
        self.tokens = 1.0;
        self.refilled_ms = now_ms;
        self.progress_ms = now_ms;
        Ok(())
    }

    /// The connection is gone: nothing in flight will be acknowledged any more.
    pub fn on_disconnect(&mut self) {
        self.connected = false;
        self.alert_cursor = 0;
        self.backlog_cursor = 0;
        self.samples_cursor = 0;
        self.alerts.clear();
        self.backlog.clear();
        self.backlog_samples.clear();
        self.live.clear();
        self.flights.clear();
        self.flight_bytes = 0;
        self.parts.clear();
    }

    /// rumqttc wrote a PUBLISH with packet id `pkid`: the oldest flight without one.
    pub fn on_outgoing_publish(&mut self, pkid: u16) -> bool {
        match self.flights.iter_mut().find(|f| f.pkid.is_none()) {
            Some(f) => {
                f.pkid = Some(pkid);
                self.published.extend(f.seqs.iter().copied().chain(f.part_of));
                true
            }
            None => false,
        }
    }

    /// The broker acknowledged packet `pkid`. Returns false for an unknown packet id.
    pub fn on_puback(&mut self, pkid: u16, now_ms: i64) -> bool {
        let Some(i) = self.flights.iter().position(|f| f.pkid == Some(pkid)) else {
            return false;
        };
        let Some(f) = self.flights.remove(i) else { return false };
        self.flight_bytes -= f.bytes;
        self.progress_ms = now_ms;
        let mut done = f.seqs;
        if let Some(seq) = f.part_of {
            let left = self.parts.entry(seq).or_insert(1);
            *left -= 1;
            if *left == 0 {
                self.parts.remove(&seq);
                done.push(seq);
            }
        }
        self.acknowledged(done, now_ms);
        true
    }

    fn acknowledged(&mut self, seqs: Vec<u64>, now_ms: i64) {
        if !seqs.is_empty() && self.acked.is_empty() {
            self.acked_since_ms = Some(now_ms);
        }
        self.acked.extend(seqs);
    }

    /// Records whose publication is complete: the caller removes them from the outbox.
    pub fn take_acks(&mut self) -> Vec<u64> {
        self.acked_since_ms = None;
        std::mem::take(&mut self.acked)
    }

    /// Whether the acknowledged records should be applied to the store now: `commit_acks` of
    /// them are waiting, the oldest has waited `commit_ms`, or the session is idle (nothing in
    /// flight, nothing buffered to send: a drain has just ended, or a live record was
    /// acknowledged; applying costs no fsync).
    pub fn commit_due(&self, now_ms: i64) -> bool {
        self.commit_in_ms(now_ms) == Some(0)
    }

    /// Milliseconds until applying is due (0: now); `None` with nothing acknowledged.
    pub fn commit_in_ms(&self, now_ms: i64) -> Option<i64> {
        let since = self.acked_since_ms?;
        if self.acked.len() >= self.cfg.commit_acks || self.idle() {
            return Some(0);
        }
        Some((since + self.cfg.commit_ms - now_ms).max(0))
    }

    /// Nothing in flight and nothing buffered to send.
    fn idle(&self) -> bool {
        self.flights.is_empty()
            && self.alerts.is_empty()
            && self.live.is_empty()
            && self.backlog.is_empty()
            && self.backlog_samples.is_empty()
    }

    /// The shell applied acknowledgements to the store (not durable yet).
    pub fn applied(&mut self, now_ms: i64) {
        self.unsynced_since_ms.get_or_insert(now_ms);
    }

    /// The shell made the applied acknowledgements durable (or found a commit had).
    pub fn synced(&mut self) {
        self.unsynced_since_ms = None;
    }

    /// Whether the shell should make applied acknowledgements durable now.
    pub fn sync_due(&self, now_ms: i64) -> bool {
        self.sync_in_ms(now_ms) == Some(0)
    }

    /// Milliseconds until a sync is due (0: now); `None` with nothing applied since the last.
    pub fn sync_in_ms(&self, now_ms: i64) -> Option<i64> {
        Some((self.unsynced_since_ms? + self.cfg.sync_ms - now_ms).max(0))
    }

    /// Records whose PUBLISH was written since the last call, in sequence order, each once: the
    /// caller ledgers them as `Published` (a record sent again after a reconnect is again).
    pub fn take_published(&mut self) -> Vec<u64> {
        let mut p = std::mem::take(&mut self.published);
        p.sort_unstable();
        p.dedup();
        p
    }

    /// Records acknowledged but not yet taken, plus those that need no publication.
    pub fn acks_waiting(&self) -> usize {
        self.acked.len()
    }

    pub fn in_flight(&self) -> usize {
        self.flights.len()
    }

    pub fn connected(&self) -> bool {
        self.connected
    }

    /// PUBLISHes await a PUBACK and none came for `stall_ms`: the shell rebuilds the client.
    pub fn stalled(&self, now_ms: i64) -> bool {
        self.connected && !self.flights.is_empty() && now_ms - self.progress_ms > self.cfg.stall_ms
    }

    /// Milliseconds until the session has something to do without any input: backlog waiting
    /// only for its pace may go, or acknowledgements are due to be applied or made durable.
    pub fn wake_in_ms(&self, now_ms: i64) -> Option<i64> {
        [self.pace_in_ms(), self.commit_in_ms(now_ms), self.sync_in_ms(now_ms)]
            .into_iter()
            .flatten()
            .min()
    }

    /// Milliseconds until backlog may go again, when backlog waits only for its pace.
    pub fn pace_in_ms(&self) -> Option<i64> {
        let paced = self.cfg.replay_rate > 0 && self.tokens < 1.0;
        let waiting = self.connected && self.backlog_buffered() && self.has_byte_room();
        (paced && waiting)
            .then(|| ((1.0 - self.tokens) * 1000.0 / f64::from(self.cfg.replay_rate)).ceil() as i64)
            .map(|ms| ms.max(1))
    }

    /// Backlog records of either lane are in memory, ready to go.
    fn backlog_buffered(&self) -> bool {
        !(self.backlog.is_empty() && self.backlog_samples.is_empty())
    }

    fn has_room(&self) -> bool {
        self.flights.len() < self.cfg.inflight
    }

    /// Room for records other than alerts.
    fn has_byte_room(&self) -> bool {
        self.has_room() && self.flight_bytes < self.cfg.inflight_bytes
    }

    /// Payload bytes awaiting a PUBACK.
    pub fn in_flight_bytes(&self) -> usize {
        self.flight_bytes
    }

    fn refill(&mut self, now_ms: i64) {
        let rate = f64::from(self.cfg.replay_rate);
        let elapsed = (now_ms - self.refilled_ms).max(0) as f64;
        let burst = (rate / 10.0).max(1.0);
        self.tokens = (self.tokens + elapsed * rate / 1000.0).min(burst);
        self.refilled_ms = now_ms;
    }

    /// Loads records into the four buffers, up to `buffer` each.
    fn fill(&mut self, src: &dyn OutboxSource) -> Result<(), SourceError> {
        let n = self.cfg.buffer;
        let last_backlog = self.boundary - 1;
        // Backlog alerts: scanned ahead of the backlog lanes, a few pages per call.
        for _ in 0..16 {
            if self.alert_cursor >= last_backlog || self.alerts.len() >= n {
                break;
            }
            let (alerts, last) = src.pending_in(Lane::Alerts, self.alert_cursor, n)?;
            self.alert_cursor = last.map_or(last_backlog, |s| s.min(last_backlog));
            self.alerts.extend(alerts.into_iter().filter(|(s, _)| *s < self.boundary));
        }
        let boundary = self.boundary;
        fill_lane(src, Lane::Events, &mut self.backlog, &mut self.backlog_cursor, boundary, n)?;
        if self.backlog.is_empty() && self.backlog_cursor >= last_backlog {
            let (buf, cursor) = (&mut self.backlog_samples, &mut self.samples_cursor);
            fill_lane(src, Lane::Samples, buf, cursor, boundary, n)?;
        }
        if self.live.len() < n / 2 {
            let page = src.pending(self.live_cursor, n - self.live.len())?;
            if let Some((s, _)) = page.last() {
                self.live_cursor = *s;
            }
            for (s, r) in page {
                if is_alert(&r) {
                    self.alerts.push_back((s, r));
                } else {
                    self.live.push_back((s, r));
                }
            }
        }
        Ok(())
    }

    /// What to publish now: the retained status after a ConnAck, then alerts, live records and
    /// paced backlog while the in-flight window has room. Records needing no PUBLISH (raw samples
    /// whose journal record is gone) are acknowledged at once.
    pub fn next_publishes(
        &mut self,
        now_ms: i64,
        src: &dyn OutboxSource,
    ) -> Result<Vec<Publish>, SourceError> {
        let mut out = Vec::new();
        if !self.connected {
            return Ok(out);
        }
        if self.status_due {
            self.status_due = false;
            out.push(self.flight(STATUS, ONLINE.to_vec(), true, Vec::new(), None));
        }
        self.refill(now_ms);
        while self.has_room() {
            self.fill(src)?;
            let paced = self.cfg.replay_rate > 0;
            let bytes_room = self.has_byte_room();
            let (queue, replayed, budget) = if !self.alerts.is_empty() {
                (&mut self.alerts, false, usize::MAX)
            } else if !bytes_room {
                break;
            } else if !self.live.is_empty() {
                (&mut self.live, false, usize::MAX)
            } else if (!paced || self.tokens >= 1.0) && self.backlog_buffered() {
                let budget = if paced { self.tokens as usize } else { usize::MAX };
                match self.backlog.is_empty() {
                    false => (&mut self.backlog, true, budget),
                    true => (&mut self.backlog_samples, true, budget),
                }
            } else {
                break;
            };
            let taken = next_payloads(queue, replayed, budget, &self.cfg, src, now_ms)?;
            if paced && replayed {
                self.tokens -= taken.records as f64;
            }
            self.acknowledged(taken.unpublishable, now_ms);
            for item in taken.items {
                out.push(self.item_flight(item));
            }
        }
        Ok(out)
    }

    fn item_flight(&mut self, item: Item) -> Publish {
        let topic = format!("{}/{}", self.cfg.topic_root, item.topic_suffix);
        match item.part_of {
            Some((seq, parts)) => {
                self.parts.insert(seq, parts);
                self.flight_full(topic, item.payload, false, item.seqs, Some(seq))
            }
            None => self.flight_full(topic, item.payload, false, item.seqs, None),
        }
    }

    fn flight(
        &mut self,
        suffix: &str,
        payload: Vec<u8>,
        retain: bool,
        seqs: Vec<u64>,
        part_of: Option<u64>,
    ) -> Publish {
        let topic = format!("{}/{suffix}", self.cfg.topic_root);
        self.flight_full(topic, payload, retain, seqs, part_of)
    }

    fn flight_full(
        &mut self,
        topic: String,
        payload: Vec<u8>,
        retain: bool,
        seqs: Vec<u64>,
        part_of: Option<u64>,
    ) -> Publish {
        self.flights.push_back(Flight { pkid: None, seqs, part_of, bytes: payload.len() });
        self.flight_bytes += payload.len();
        Publish { topic, payload, retain }
    }
}

/// Tops up the buffer of one backlog lane below half of `n`: one page of `n` records scanned,
/// more only while the pages hold nothing of the lane (so that a lane whose records are sparse
/// does not look drained while its cursor is short of the backlog's end).
fn fill_lane(
    src: &dyn OutboxSource,
    lane: Lane,
    buf: &mut VecDeque<(u64, OutboxRecord)>,
    cursor: &mut u64,
    boundary: u64,
    n: usize,
) -> Result<(), SourceError> {
    let last_backlog = boundary - 1;
    let mut first = true;
    while buf.len() < n / 2 && *cursor < last_backlog && (first || buf.is_empty()) {
        first = false;
        let (page, last) = src.pending_in(lane, *cursor, n - buf.len())?;
        *cursor = last.map_or(last_backlog, |s| s.min(last_backlog));
        buf.extend(page.into_iter().filter(|(s, _)| *s < boundary));
    }
    Ok(())
}

fn is_alert(r: &OutboxRecord) -> bool {
    matches!(r, OutboxRecord::Alert { .. })
}

#[cfg(test)]
#[path = "session_tests.rs"]
#[allow(clippy::unwrap_used)]
mod tests;

#[cfg(test)]
#[path = "commit_tests.rs"]
#[allow(clippy::unwrap_used)]
mod commit_tests;
