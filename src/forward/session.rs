//! The MQTT session core: which outbox records to publish next, which PUBACK acknowledges which
//! records, when backlog may go, and what to ask of the store. No I/O and no clock: the shell
//! (`client.rs`) feeds it connection events and the time, and carries out what it returns. It
//! reads nothing itself: it says what it needs as a value, a [`Next`] (the PUBLISHes to make, a
//! [`Read`], a [`Write`]), and is fed the answers ([`Session::feed`], [`Session::written`]).
//! Unit tests answer from an in-memory outbox.
//!
//! # Rounds
//!
//! [`Session::poll`], called whenever something happened (a packet, the outbox grew, a timer, a
//! write done), starts a *round*, as the shell's one pass of work: the retained status after a
//! ConnAck, then, while the in-flight window has room, a fill pass (`streams.rs`, reads that top
//! up the buffers) and the PUBLISHes of the next record (`batch.rs`; raw samples are read first).
//! A round that needs a read stops and goes on when the answer is fed; a poll meanwhile only
//! notes that another round follows. Writes are asked for between rounds, one at a time.
//!
//! # Rules it keeps
//!
//! - A record leaves the outbox only through a [`Write::Apply`], i.e. after the PUBACK of every
//!   PUBLISH that carried it (`flights.rs` matches PUBACKs to records).
//! - Every connection starts clean ([`Session::on_connack`]): nothing is in flight, and everything
//!   still in the outbox is sent again. Records older than the connection (sequence below the
//!   outbox's next sequence, [`Read::NextSeq`], read first) are *backlog*: their events carry
//!   `"replayed": true` and they go at most `replay_rate` records per second (`pace.rs`).
//!   Younger records are *live* and go at once.
//! - Alerts first (live or backlog, unpaced); then live records; then backlog, in two lanes: its
//!   events and gap notices, then its raw samples, read only once the events are all handed
//!   over. Within the live stream and within each lane, records go in outbox order, hence per
//!   sensor in `seq` order.
//! - At most `inflight` PUBLISHes await a PUBACK, and records other than alerts are handed over
//!   only while the payloads awaiting a PUBACK total less than `inflight_bytes`: what is queued
//!   ahead of an alert in the client and the socket stays small (a window of 64 raw frames is
//!   0.8 MB, ~10 ms at loopback speed), so an alert does not wait behind a backlog drain.
//! - Records whose PUBLISH was written are ledgered `Published` by the same [`Write::Apply`] that
//!   removes them, or an earlier one: the ledger says `Published` before `Acknowledged`.
//! - Acknowledgements are applied to the store in batches (`acks.rs`): [`Session::commit_due`]
//!   says when, after `commit_acks` acknowledged records, `commit_ms` after the oldest one not
//!   yet applied, or as soon as nothing is in flight or waiting to go (a drain just ended),
//!   whichever comes first ([`Session::flush`] takes the rest when a connection ends). Applied
//!   is not yet durable: the store's next commit makes it so, normally a checkpoint's;
//!   [`Session::sync_due`] says when a [`Write::Sync`] is due, `sync_ms` after the first
//!   application no commit has covered. An acknowledged record not yet durable is still in the
//!   outbox after a crash and is simply sent again (at least once).

use super::acks::Acks;
use super::batch::{next_payloads, Item};
use super::flights::Flights;
use super::pace::Pace;
use super::payload::{ONLINE, STATUS};
use super::request::{Fetched, Next, Publish, RawSamples, Read, Stream, Write, Written};
use super::session_config::SessionConfig;
use super::streams::Streams;
use crate::records::outbox::OutboxRecord;

/// Where a round stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The outbox's next sequence is read first (the first round after a ConnAck).
    Boundary,
    /// With room for one more PUBLISH, a fill pass starts.
    Room,
    /// A fill pass is under way.
    Fill,
    /// The next record is picked and its PUBLISHes built.
    Pick,
}

/// The read a round waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awaiting {
    NextSeq,
    Records,
    /// The raw samples of the record with this sequence, at the head of its stream.
    Samples(u64),
}

/// The session core. See the module documentation.
#[derive(Debug)]
pub struct Session {
    cfg: SessionConfig,
    connected: bool,
    /// The backlog's boundary is known for the current connection.
    bounded: bool,
    streams: Streams,
    flights: Flights,
    acks: Acks,
    /// The round under way.
    round: Option<Step>,
    waiting: Option<Awaiting>,
    /// Something happened while the round waited: another round follows it.
    again: bool,
    /// Raw samples read for record `.0` (`None`: gone from the journal).
    loaded: Option<(u64, Option<RawSamples>)>,
    /// A write is under way.
    writing: bool,
    pace: Pace,
    progress_ms: i64,
    status_due: bool,
    /// When a round last made sure live records would be read without being told.
    live_read_ms: i64,
}

/// Live records are read at least this often even when nobody said the outbox grew: a safety
/// net, should a writer of the outbox not announce its records.
pub(super) const LIVE_RESCAN_MS: i64 = 1000;

impl Session {
    pub fn new(cfg: SessionConfig) -> Self {
        Session {
            streams: Streams::new(cfg.buffer),
            pace: Pace::new(cfg.replay_rate),
            cfg,
            connected: false,
            bounded: false,
            flights: Flights::default(),
            acks: Acks::default(),
            round: None,
            waiting: None,
            again: false,
            loaded: None,
            writing: false,
            progress_ms: 0,
            status_due: false,
            live_read_ms: 0,
        }
    }

    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// The broker accepted a new connection: start over from the outbox.
    pub fn on_connack(&mut self, now_ms: i64) {
        self.on_disconnect();
        self.connected = true;
        self.bounded = false;
        self.status_due = true;
        self.pace.restart(now_ms);
        self.progress_ms = now_ms;
        self.live_read_ms = now_ms;
    }

    /// The connection is gone: nothing in flight will be acknowledged any more, and the answer
    /// to a read asked for before is not wanted (the shell drops it).
    pub fn on_disconnect(&mut self) {
        self.connected = false;
        self.streams.clear();
        self.flights.clear();
        self.round = None;
        self.waiting = None;
        self.again = false;
        self.loaded = None;
    }

    /// rumqttc wrote a PUBLISH with packet id `pkid`: the oldest flight without one.
    pub fn on_outgoing_publish(&mut self, pkid: u16) -> bool {
        self.flights.written(pkid).map(|seqs| self.acks.published(seqs)).is_some()
    }

    /// The broker acknowledged packet `pkid`. Returns false for an unknown packet id.
    pub fn on_puback(&mut self, pkid: u16, now_ms: i64) -> bool {
        let Some(done) = self.flights.acknowledged(pkid) else { return false };
        let _span = tracing::trace_span!("forward", pkid).entered();
        tracing::trace!(seqs = ?done, "acknowledged");
        self.progress_ms = now_ms;
        self.acks.acknowledged(done, now_ms);
        true
    }

    /// The outbox may have grown (the pipeline appended records): the next round reads live
    /// records. Without it, a round reads them only while earlier reads found some, or when
    /// `LIVE_RESCAN_MS` (1 s) have passed since the last read of them.
    pub fn outbox_grew(&mut self) {
        self.streams.grew();
    }

    /// Starts a round (see the module documentation), unless one waits for a read.
    pub fn poll(&mut self, now_ms: i64) -> Next {
        let mut out = Vec::new();
        let read = if self.waiting.is_some() {
            self.again = true;
            None
        } else {
            self.start_round(now_ms, &mut out);
            self.run(now_ms, &mut out)
        };
        self.next(now_ms, out, read)
    }

    /// The answer to the last [`Read`]: the round goes on (and another follows it when
    /// [`Session::poll`] was called meanwhile). An answer nobody waits for is dropped.
    pub fn feed(&mut self, fetched: Fetched, now_ms: i64) -> Next {
        match (self.waiting.take(), fetched) {
            (None, _) => return self.next(now_ms, Vec::new(), None),
            (Some(Awaiting::NextSeq), Fetched::NextSeq(next)) => {
                self.streams.begin(next);
                self.bounded = true;
                self.round = Some(Step::Room);
            }
            (Some(Awaiting::Records), Fetched::Records { records, last }) => {
                self.streams.feed(records, last);
            }
            (Some(Awaiting::Samples(seq)), Fetched::Samples(samples)) => {
                self.loaded = Some((seq, samples));
            }
            (Some(waiting), fetched) => {
                tracing::error!(?waiting, ?fetched, "a read answered with another kind: dropped");
                self.round = None;
            }
        }
        let mut out = Vec::new();
        let mut read = self.run(now_ms, &mut out);
        if read.is_none() && std::mem::take(&mut self.again) {
            self.start_round(now_ms, &mut out);
            read = self.run(now_ms, &mut out);
        }
        self.next(now_ms, out, read)
    }

    /// The last [`Write`] is done. The shell then polls, as after any other event.
    pub fn written(&mut self, done: Written, now_ms: i64) {
        self.writing = false;
        match done {
            Written::Applied => self.acks.applied(now_ms),
            Written::Synced => self.acks.synced(),
        }
    }

    /// The connection has ended and no write is under way: the last writes, to be carried out
    /// in order (each reported to [`Session::written`]): everything acknowledged applied (and
    /// every written record ledgered), then made durable.
    pub fn flush(&mut self) -> Vec<Write> {
        self.acks.take().into_iter().chain([Write::Sync]).collect()
    }

    fn start_round(&mut self, now_ms: i64, out: &mut Vec<Publish>) {
        if !self.connected {
            return;
        }
        if self.status_due {
            self.status_due = false;
            let topic = format!("{}/{STATUS}", self.cfg.topic_root);
            self.flights.push(ONLINE.len(), Vec::new(), None);
            out.push(Publish { topic, payload: ONLINE.to_vec(), retain: true });
        }
        self.pace.refill(now_ms);
        if now_ms - self.live_read_ms >= LIVE_RESCAN_MS {
            self.live_read_ms = now_ms;
            self.streams.grew();
        }
        self.round = Some(if self.bounded { Step::Room } else { Step::Boundary });
    }

    /// Runs the round until it needs a read (returned) or ends.
    fn run(&mut self, now_ms: i64, out: &mut Vec<Publish>) -> Option<Read> {
        while let Some(step) = self.round {
            match step {
                Step::Boundary => return self.wait(Awaiting::NextSeq, Read::NextSeq),
                Step::Room if self.has_room() => {
                    self.streams.start_pass();
                    self.round = Some(Step::Fill);
                }
                Step::Room => self.round = None,
                Step::Fill => match self.streams.next_read() {
                    Some(read) => return self.wait(Awaiting::Records, read),
                    None => self.round = Some(Step::Pick),
                },
                Step::Pick => {
                    let Some((stream, replayed, budget)) = self.pick() else {
                        self.round = None;
                        continue;
                    };
                    // Raw samples at the head are read first.
                    let mut samples = None;
                    if let Some((seq, OutboxRecord::Samples { journal_pos, frame, .. })) =
                        self.streams.head(stream)
                    {
                        let (seq, journal_pos, frame) = (*seq, *journal_pos, *frame);
                        match self.loaded.take() {
                            Some((s, loaded)) if s == seq => samples = loaded,
                            _ => {
                                let read = Read::Samples { journal_pos, frame };
                                return self.wait(Awaiting::Samples(seq), read);
                            }
                        }
                    }
                    self.take(stream, replayed, budget, samples, now_ms, out);
                    self.round = Some(Step::Room);
                }
            }
        }
        None
    }

    fn wait(&mut self, waiting: Awaiting, read: Read) -> Option<Read> {
        self.waiting = Some(waiting);
        Some(read)
    }

    /// The stream to take the next record from, whether it is backlog, and how many records the
    /// pace lets it take: alerts; then, while the byte window has room, live records; then
    /// backlog (events and gap notices before raw samples) when the pace allows.
    fn pick(&self) -> Option<(Stream, bool, usize)> {
        if self.streams.has_alerts() {
            return Some((Stream::Alerts, false, usize::MAX));
        }
        if !self.has_byte_room() {
            return None;
        }
        if self.streams.has_live() {
            return Some((Stream::Live, false, usize::MAX));
        }
        let budget = self.pace.budget()?;
        self.streams.backlog_lane().map(|lane| (lane, true, budget))
    }

    /// Takes the head record of `stream` (with the events batched behind it) and hands over its
    /// PUBLISHes. Records needing no PUBLISH (raw samples whose journal record is gone) are
    /// acknowledged at once.
    fn take(
        &mut self,
        stream: Stream,
        replayed: bool,
        budget: usize,
        samples: Option<RawSamples>,
        now_ms: i64,
        out: &mut Vec<Publish>,
    ) {
        // The forward stage's span: one per take (an alert, a batch of one sensor's events, a
        // record of raw samples), with the outbox sequences it covers; each record's own fields
        // (event ID, journal position of raw samples, alert ID) are trace events inside it.
        let span = tracing::trace_span!(
            "forward",
            ?stream,
            replayed,
            first_seq = tracing::field::Empty,
            last_seq = tracing::field::Empty,
            records = tracing::field::Empty
        );
        let _entered = span.enter();
        let queue = self.streams.buffer(stream);
        let taken = next_payloads(queue, replayed, budget, &self.cfg, samples, now_ms);
        if !span.is_disabled() {
            let seqs = (taken.items.iter())
                .flat_map(|i| i.seqs.iter().copied().chain(i.part_of.map(|(seq, _)| seq)))
                .chain(taken.unpublishable.iter().copied());
            let (first, last) = seqs.fold((u64::MAX, 0), |(lo, hi), s| (lo.min(s), hi.max(s)));
            span.record("first_seq", first);
            span.record("last_seq", last);
            span.record("records", taken.records);
        }
        if replayed {
            self.pace.spend(taken.records);
        }
        self.acks.acknowledged(taken.unpublishable, now_ms);
        for Item { topic_suffix, payload, seqs, part_of } in taken.items {
            let topic = format!("{}/{topic_suffix}", self.cfg.topic_root);
            self.flights.push(payload.len(), seqs, part_of);
            out.push(Publish { topic, payload, retain: false });
        }
    }

    /// What the shell is to do now; between rounds, the write that is due, if none is under way.
    fn next(&mut self, now_ms: i64, publishes: Vec<Publish>, read: Option<Read>) -> Next {
        let mut write = None;
        if self.waiting.is_none() && !self.writing {
            if self.commit_due(now_ms) {
                write = self.acks.take();
            } else if self.sync_due(now_ms) {
                write = Some(Write::Sync);
            }
            self.writing = write.is_some();
        }
        Next { publishes, read, write }
    }

    /// Whether the acknowledged records should be applied to the store now (see `acks.rs`).
    pub fn commit_due(&self, now_ms: i64) -> bool {
        self.commit_in_ms(now_ms) == Some(0)
    }

    /// Milliseconds until applying is due (0: now); `None` with nothing acknowledged.
    pub fn commit_in_ms(&self, now_ms: i64) -> Option<i64> {
        let idle = self.flights.is_empty() && self.streams.is_empty();
        self.acks.commit_in_ms(now_ms, idle, self.cfg.commit_acks, self.cfg.commit_ms)
    }

    /// Whether applied acknowledgements should be made durable now.
    pub fn sync_due(&self, now_ms: i64) -> bool {
        self.sync_in_ms(now_ms) == Some(0)
    }

    /// Milliseconds until a sync is due (0: now); `None` with nothing applied since the last.
    pub fn sync_in_ms(&self, now_ms: i64) -> Option<i64> {
        self.acks.sync_in_ms(now_ms, self.cfg.sync_ms)
    }

    /// Records acknowledged but not yet applied, plus those that need no publication.
    pub fn acks_waiting(&self) -> usize {
        self.acks.waiting()
    }

    pub fn in_flight(&self) -> usize {
        self.flights.len()
    }

    /// Payload bytes awaiting a PUBACK.
    pub fn in_flight_bytes(&self) -> usize {
        self.flights.bytes()
    }

    pub fn connected(&self) -> bool {
        self.connected
    }

    /// PUBLISHes await a PUBACK and none came for `stall_ms`: the shell rebuilds the client.
    pub fn stalled(&self, now_ms: i64) -> bool {
        self.connected && !self.flights.is_empty() && now_ms - self.progress_ms > self.cfg.stall_ms
    }

    /// Milliseconds until the session has something to do without any input: backlog waiting
    /// only for its pace may go, or a write is due (unless one is under way). `None` while a
    /// read is under way: its answer comes first.
    pub fn wake_in_ms(&self, now_ms: i64) -> Option<i64> {
        if self.waiting.is_some() {
            return None;
        }
        let writes = match self.writing {
            true => [None, None],
            false => [self.commit_in_ms(now_ms), self.sync_in_ms(now_ms)],
        };
        writes.into_iter().chain([self.pace_in_ms()]).flatten().min()
    }

    /// Milliseconds until backlog may go again, when backlog waits only for its pace.
    pub fn pace_in_ms(&self) -> Option<i64> {
        let buffered = self.streams.backlog_lane().is_some();
        let waiting = self.connected && buffered && self.has_byte_room();
        self.pace.wait_ms().filter(|_| waiting)
    }

    fn has_room(&self) -> bool {
        self.flights.len() < self.cfg.inflight
    }

    /// Room for records other than alerts.
    fn has_byte_room(&self) -> bool {
        self.has_room() && self.flights.bytes() < self.cfg.inflight_bytes
    }
}

#[cfg(test)]
mod tests;
