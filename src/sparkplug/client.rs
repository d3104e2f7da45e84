//! The async shell around the Sparkplug session core: one rumqttc client per connection attempt
//! (its will the connection's NDEATH), the store's reads and writes on blocking threads, reconnect
//! backoff. Like the JSON forwarder it keeps nothing rumqttc queued across connections: the
//! store's cursor is the only truth.
//!
//! Delivery: Sparkplug B sends DDATA at QoS 0, which the broker never acknowledges. The shell
//! counts a message as sent once rumqttc has written it to the connection (its
//! `Outgoing::Publish` event), and moves the stored cursor past a batch only when every message
//! of it was written. A crash, a kill or a lost connection before that sends the batch again (as
//! historical): a value is repeated only when its message may not have left the gateway. A QoS 0
//! message the broker or a subscriber drops after that is lost to the Sparkplug view; the JSON
//! topics (QoS 1, removed from the outbox only on PUBACK) still carry it.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rumqttc::{
    AsyncClient, ConnectionError, Event, EventLoop, LastWill, MqttOptions, Outgoing, Packet, QoS,
    TlsConfiguration, Transport,
};
use tokio::sync::{mpsc, watch};

use super::session::{Publish, Session, SessionConfig};
use super::stats::Stats;
use super::table::Table;
use crate::clock::Clock;
use crate::forward::{jittered_backoff, poll, ForwarderConfig};
use crate::records::outbox::{Bulk, OutboxRecord};
use crate::store::{SharedStore, StoreError};

/// Everything the shell needs, resolved.
#[derive(Debug, Clone)]
pub struct ShellConfig {
    /// The broker, credentials, TLS, keep-alive, largest packet and backoff: the JSON
    /// forwarder's, under a client id of the view's own.
    pub broker: ForwarderConfig,
    pub session: SessionConfig,
    /// Outbox records read (and handed to the session) at most at a time.
    pub read_limit: usize,
    /// How often the outbox is looked at when the last read found nothing.
    pub idle_poll: Duration,
    /// At a stop, how long the view may go on sending what it holds before its NDEATH (the
    /// pipeline gives the forwarder slot 3 s in all, `app::shutdown::FORWARD_DRAIN`).
    pub drain: Duration,
}

/// Why the view stopped.
#[derive(Debug, thiserror::Error)]
pub enum SparkplugError {
    #[error("sparkplug: {0}")]
    Store(#[from] StoreError),
    #[error("sparkplug: a blocking store task failed: {0}")]
    Join(String),
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, SparkplugError> {
    Ok(tokio::task::spawn_blocking(f).await.map_err(|e| SparkplugError::Join(e.to_string()))??)
}

/// How one connection attempt ended.
enum End {
    Shutdown,
    Lost(String),
    /// The primary host went offline after the births: the session ended with NDEATH and
    /// DISCONNECT; a new one waits for its `STATE` online.
    HostOffline,
}

/// Runs until `shutdown` turns true (then drains for at most `cfg.drain` while connected, sends
/// NDEATH and disconnects). Returns an error only when the store fails.
pub async fn run(
    cfg: ShellConfig,
    store: SharedStore,
    clock: Arc<dyn Clock>,
    mut shutdown: watch::Receiver<bool>,
    stats: &'static Stats,
) -> Result<(), SparkplugError> {
    let place = {
        let s = store.clone();
        blocking(move || s.write().sparkplug_place()).await?
    };
    let mut session = Session::new(cfg.session.clone(), Table::decode(&place.table), place.cursor);
    let mut failures: u32 = 0;
    loop {
        if *shutdown.borrow() {
            return Ok(());
        }
        let bd_seq = {
            let s = store.clone();
            blocking(move || s.write().sparkplug_next_bd_seq()).await?
        };
        let will = session.begin(bd_seq, clock.now_ms());
        stats.bd_seq.store(u64::from(bd_seq), Ordering::Relaxed);
        let (client, eventloop) = build(&cfg, &will);
        let (tx, rx) = mpsc::unbounded_channel();
        let poller = tokio::spawn(poll(eventloop, tx));
        let mut shell = Shell { cfg: &cfg, store: &store, clock: &*clock, stats, client };
        let end = shell.drive(&mut session, rx, &mut shutdown).await;
        let connected = stats.online.swap(false, Ordering::Relaxed);
        session.on_disconnect();
        let b = &cfg.broker;
        let wait = match end? {
            End::Shutdown => {
                let _ = tokio::time::timeout(Duration::from_secs(2), poller).await;
                return Ok(());
            }
            End::HostOffline => {
                // The NDEATH and the DISCONNECT are written before the next connection.
                let _ = tokio::time::timeout(Duration::from_secs(2), poller).await;
                failures = 1;
                tracing::info!("sparkplug: session ended (primary host offline); connecting again");
                jittered_backoff(b.backoff_min, b.backoff_max, failures, clock.monotonic_ms())
            }
            End::Lost(why) => {
                poller.abort();
                failures = if connected { 1 } else { failures.saturating_add(1) };
                let wait =
                    jittered_backoff(b.backoff_min, b.backoff_max, failures, clock.monotonic_ms());
                tracing::warn!(broker = %format!("{}:{}", b.host, b.port), %why,
                    retry_in_ms = wait.as_millis() as u64, "sparkplug: connection lost or refused");
                wait
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => {}
        }
    }
}

fn build(cfg: &ShellConfig, will: &Publish) -> (AsyncClient, EventLoop) {
    let b = &cfg.broker;
    let mut o = MqttOptions::new(&b.client_id, &b.host, b.port);
    o.set_keep_alive(b.keep_alive)
        .set_clean_session(true)
        .set_max_packet_size(b.session.max_packet, b.session.max_packet)
        .set_last_will(LastWill::new(&will.topic, will.payload.clone(), QoS::AtLeastOnce, false));
    if let Some((u, p)) = &b.credentials {
        o.set_credentials(u, p);
    }
    if let Some(tls) = &b.tls {
        o.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(tls.clone())));
    }
    let (client, mut eventloop) = AsyncClient::new(o, 256);
    let mut n = rumqttc::NetworkOptions::new();
    n.set_tcp_nodelay(true);
    eventloop.set_network_options(n);
    (client, eventloop)
}

/// One connection's work.
struct Shell<'a> {
    cfg: &'a ShellConfig,
    store: &'a SharedStore,
    clock: &'a dyn Clock,
    stats: &'a Stats,
    client: AsyncClient,
}

/// What a connection is in the middle of.
#[derive(Default)]
struct Progress {
    /// Messages handed to rumqttc and not yet written.
    unwritten: usize,
    /// The cursor to store once they are written.
    advance_to: Option<u64>,
    /// The last read filled its limit: read again at once.
    more: bool,
    /// Stopping: drain until caught up (or the drain time passed), then NDEATH.
    stopping_at: Option<i64>,
    /// When the held records were last counted (for the status and the metrics).
    held_at_ms: i64,
}

/// How often the records the view holds are counted: a count reads them all.
const HELD_EVERY_MS: i64 = 1000;
/// Records read at a time by the scan for devices with held records.
const SCAN_CHUNK: usize = 4096;

impl Shell<'_> {
    async fn next_outbox(&self) -> Result<u64, SparkplugError> {
        let s = self.store.clone();
        blocking(move || Ok(s.read().next_outbox_seq())).await
    }

    async fn drive(
        &mut self,
        session: &mut Session,
        mut rx: mpsc::UnboundedReceiver<Result<Event, ConnectionError>>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<End, SparkplugError> {
        let mut p = Progress { held_at_ms: i64::MIN / 2, ..Progress::default() };
        let ncmd = session.ncmd_topic();
        let state = session.state_topic();
        loop {
            let idle = if p.more && p.unwritten == 0 { Duration::ZERO } else { self.cfg.idle_poll };
            let mut next = tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => Some(ev),
                    None => return Ok(End::Lost("event loop ended".into())),
                },
                _ = tokio::time::sleep(idle) => None,
                _ = shutdown.changed(), if p.stopping_at.is_none() => {
                    p.stopping_at = Some(self.clock.monotonic_ms());
                    None
                }
            };
            if p.stopping_at.is_none() && *shutdown.borrow() {
                p.stopping_at = Some(self.clock.monotonic_ms());
            }
            while let Some(ev) = next {
                let now = self.clock.now_ms();
                let out = match ev {
                    Err(e) => return Ok(End::Lost(e.to_string())),
                    Ok(Event::Incoming(Packet::ConnAck(_))) => {
                        tracing::info!("sparkplug: connected");
                        self.stats.online.store(true, Ordering::Relaxed);
                        let subscribe = [Some(ncmd.clone()), state.clone()];
                        for topic in subscribe.into_iter().flatten() {
                            if let Err(e) = self.client.subscribe(topic, QoS::AtLeastOnce).await {
                                return Ok(End::Lost(format!(
                                    "client request channel closed: {e}"
                                )));
                            }
                        }
                        // Nothing of an earlier connection is pending any more.
                        p.unwritten = 0;
                        p.advance_to = None;
                        session.on_connack(self.next_outbox().await?, now)
                    }
                    Ok(Event::Incoming(Packet::Publish(m))) if m.topic == ncmd => {
                        session.on_ncmd(&m.payload, self.next_outbox().await?, now)
                    }
                    Ok(Event::Incoming(Packet::Publish(m))) if Some(&m.topic) == state.as_ref() => {
                        session.on_state(&m.payload, self.next_outbox().await?, now)
                    }
                    Ok(Event::Outgoing(Outgoing::Publish(_))) => {
                        p.unwritten = p.unwritten.saturating_sub(1);
                        Vec::new()
                    }
                    Ok(_) => Vec::new(),
                };
                if let Some(end) = self.publish(out, &mut p).await {
                    return Ok(end);
                }
                if session.take_end() {
                    self.close(session, &mut rx).await;
                    return Ok(End::HostOffline);
                }
                next = rx.try_recv().ok();
            }
            if p.unwritten == 0 {
                if let Some(to) = p.advance_to.take() {
                    let (s, table) = (self.store.clone(), session.table().encode());
                    blocking(move || s.write().sparkplug_advance(to, &table)).await?;
                    session.stored(to);
                }
            }
            if session.live() && p.unwritten == 0 && p.advance_to.is_none() {
                let out = self.round(session, &mut p).await?;
                if let Some(end) = self.publish(out, &mut p).await {
                    return Ok(end);
                }
            } else if !session.live() {
                p.more = false;
            }
            if let Some(since) = p.stopping_at {
                let caught_up = session.live() && !p.more && p.unwritten == 0;
                let out_of_time =
                    self.clock.monotonic_ms() - since > self.cfg.drain.as_millis() as i64;
                if caught_up && p.advance_to.is_none() || out_of_time || !session.live() {
                    return Ok(self.close(session, &mut rx).await);
                }
            }
            let now = self.clock.monotonic_ms();
            if now - p.held_at_ms >= HELD_EVERY_MS {
                p.held_at_ms = now;
                let s = self.store.clone();
                let held = blocking(move || s.read().sparkplug_held()).await?;
                self.stats.held.store(held, Ordering::Relaxed);
            }
        }
    }

    /// One round of reads: after the births, the scan for devices with held records; then the
    /// records after the cursor (as many as the pace of held records allows), and while held
    /// records drain, the live ones of devices with nothing held. Returns what to publish.
    async fn round(
        &self,
        session: &mut Session,
        p: &mut Progress,
    ) -> Result<Vec<Publish>, SparkplugError> {
        if let Some((after, before)) = session.scan_due() {
            let last = self.scan(after, before).await?;
            session.scanned(last);
        }
        let mut out = Vec::new();
        p.more = false;
        let limit = self.cfg.read_limit;
        if let Some(budget) = session.read_budget(self.clock.now_ms()) {
            let mut records = self.read(session.cursor(), limit).await?;
            // A read the pace cut short waits for the next tick, not a read at once.
            let cut = within_budget(&mut records, budget);
            p.more = !cut && records.len() >= limit;
            if let Some(last) = records.last().map(|r| r.0) {
                out = session.take(&decode(records), self.clock.now_ms());
                session.pass(last);
                p.advance_to = Some(session.cursor());
            }
        }
        if let Some(after) = session.live_after() {
            let records = self.read(after, limit).await?;
            p.more |= records.len() >= limit;
            if let Some(last) = records.last().map(|r| r.0) {
                out.extend(session.take_live(&decode(records), last, self.clock.now_ms()));
                p.advance_to = Some(session.cursor());
            }
        }
        Ok(out)
    }

    /// At most `limit` records after `cursor`, raw samples left out without decoding.
    async fn read(&self, cursor: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, SparkplugError> {
        let s = self.store.clone();
        blocking(move || s.read().sparkplug_after(cursor, limit)).await
    }

    /// Per device, the last outbox sequence of it in `(after, before)`: where held records are.
    async fn scan(&self, after: u64, before: u64) -> Result<BTreeMap<String, u64>, SparkplugError> {
        let s = self.store.clone();
        blocking(move || {
            let mut last = BTreeMap::new();
            let mut from = after;
            loop {
                let chunk = s.read().sparkplug_after(from, SCAN_CHUNK)?;
                let (len, end) = (chunk.len(), chunk.last().map_or(before, |r| r.0));
                for (seq, record) in decode(chunk).into_iter().filter(|r| r.0 < before) {
                    if let Some(d) = super::values::device(&record) {
                        last.insert(d.to_owned(), seq);
                    }
                }
                if len < SCAN_CHUNK || end >= before {
                    return Ok(last);
                }
                from = end;
            }
        })
        .await
    }

    /// Hands `out` to rumqttc; `Some` when the connection's request channel is gone.
    async fn publish(&self, out: Vec<Publish>, p: &mut Progress) -> Option<End> {
        for m in out {
            self.stats.sent(&m);
            let qos = if m.qos1() { QoS::AtLeastOnce } else { QoS::AtMostOnce };
            p.unwritten += 1;
            if let Err(e) = self.client.publish(m.topic, qos, false, m.payload).await {
                return Some(End::Lost(format!("client request channel closed: {e}")));
            }
        }
        None
    }

    /// A clean end: the NDEATH (the broker sends the will only when a connection breaks), then
    /// DISCONNECT, waited for (at most half a second: a stop's drain is short) until written: a
    /// connection dropped before it would have the broker send the will, a second NDEATH.
    async fn close(
        &self,
        session: &Session,
        rx: &mut mpsc::UnboundedReceiver<Result<Event, ConnectionError>>,
    ) -> End {
        let death = session.death(self.clock.now_ms());
        self.stats.sent(&death);
        let _ = self.client.publish(death.topic, QoS::AtLeastOnce, false, death.payload).await;
        let _ = self.client.disconnect().await;
        let written = async {
            while let Some(Ok(ev)) = rx.recv().await {
                if matches!(ev, Event::Outgoing(Outgoing::Disconnect)) {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_millis(500), written).await;
        End::Shutdown
    }
}

/// `records` cut after the `budget`-th one that is not raw samples (those carry no metric values
/// and cost the pace nothing); true when something was cut.
fn within_budget(records: &mut Vec<(u64, Vec<u8>)>, budget: usize) -> bool {
    let mut counted = 0;
    for (i, (_, bytes)) in records.iter().enumerate() {
        if OutboxRecord::peek_bulk(bytes) != Some(Bulk::Samples) {
            counted += 1;
            if counted == budget {
                let cut = i + 1 < records.len();
                records.truncate(i + 1);
                return cut;
            }
        }
    }
    false
}

/// The records decoded; one that does not decode is left out with a warning (the JSON
/// forwarder reports it too), raw samples without decoding.
fn decode(records: Vec<(u64, Vec<u8>)>) -> Vec<(u64, OutboxRecord)> {
    records
        .into_iter()
        .filter(|(_, bytes)| OutboxRecord::peek_bulk(bytes) != Some(Bulk::Samples))
        .filter_map(|(seq, bytes)| match OutboxRecord::decode(&bytes) {
            Ok(r) => Some((seq, r)),
            Err(e) => {
                tracing::warn!(seq, %e, "sparkplug: an outbox record does not decode: left out");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, samples: bool) -> (u64, Vec<u8>) {
        let (machine, sensor) = ("m".to_owned(), "s".to_owned());
        let r = if samples {
            OutboxRecord::Samples {
                machine,
                sensor,
                journal_pos: seq,
                t0_ms: 0,
                rate_hz: 100.0,
                n: 10,
                frame: None,
            }
        } else {
            let json = b"{}".to_vec();
            OutboxRecord::Event { machine, sensor, seq, event_id: seq.to_string(), json }
        };
        (seq, r.encode())
    }

    #[test]
    fn the_pace_counts_records_with_values_not_raw_samples() {
        let all = [record(1, true), record(2, false), record(3, true), record(4, false)];
        let seqs = |r: &[(u64, Vec<u8>)]| r.iter().map(|r| r.0).collect::<Vec<_>>();
        let mut r = all.to_vec();
        assert!(within_budget(&mut r, 1));
        assert_eq!(seqs(&r), [1, 2], "cut after the first event, samples before it kept");
        let mut r = all.to_vec();
        assert!(!within_budget(&mut r, 2), "the second event is the last record");
        assert_eq!(seqs(&r), [1, 2, 3, 4]);
        let mut r = all.to_vec();
        assert!(!within_budget(&mut r, usize::MAX));
        assert_eq!(r.len(), 4);
    }
}
