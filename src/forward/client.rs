//! The async shell around the session core: one rumqttc client per connection attempt, its event
//! loop polled in a task of its own (it never publishes), PUBLISHes made from the driving task,
//! the session's reads and writes carried out against the store (`fetch.rs`) on blocking threads
//! and their answers fed back, bounded jittered reconnect backoff.
//!
//! Each attempt builds a fresh `AsyncClient` + `EventLoop` and drops them when the connection
//! ends, so nothing rumqttc queued or kept in flight survives into the next connection: the
//! outbox is the only truth, and a `CollisionTimeout` or a stalled connection (PUBLISHes in flight,
//! no PUBACK for `stall_ms`) ends the attempt like any other error. MQTT 3.1.1 with
//! `clean_session = true`: the broker keeps no session for us, and after every ConnAck the session
//! core sends everything still in the outbox.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rumqttc::{
    AsyncClient, ConnectionError, Event, EventLoop, LastWill, MqttOptions, NetworkOptions,
    Outgoing, Packet, QoS, TlsConfiguration, Transport,
};
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinSet;

use super::fetch::{self, FetchError};
use super::payload::{OFFLINE, STATUS};
use super::request::{Next, Write, Written};
use super::session::Session;
use super::session_config::SessionConfig;
use crate::clock::Clock;
use crate::store::SharedStore;
use crate::telemetry::ForwardStats;

/// Everything the shell needs, resolved (secrets read, TLS built).
#[derive(Debug, Clone)]
pub struct ForwarderConfig {
    pub host: String,
    pub port: u16,
    pub client_id: String,
    pub keep_alive: Duration,
    /// `(username, password)`.
    pub credentials: Option<(String, String)>,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub session: SessionConfig,
    /// Reconnect backoff: from `backoff_min`, doubling per failed attempt, at most `backoff_max`,
    /// each wait jittered down by up to a half.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
}

/// Why the forwarder stopped.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("forwarder: {0}")]
    Store(#[from] FetchError),
    #[error("forwarder: a blocking store task failed: {0}")]
    Join(String),
}

/// How one connection attempt ended.
#[derive(Debug)]
enum End {
    Shutdown,
    Lost(String),
}

/// Runs until `shutdown` turns true: connects, publishes, reconnects. `outbox_grew` is notified by
/// the pipeline after each checkpoint that added outbox records. Returns an error only when the
/// store fails (the daemon then stops with that error, and its service manager starts it again).
pub async fn run(
    cfg: ForwarderConfig,
    store: SharedStore,
    outbox_grew: Arc<Notify>,
    clock: Arc<dyn Clock>,
    mut shutdown: watch::Receiver<bool>,
    stats: Option<Arc<ForwardStats>>,
) -> Result<(), ForwardError> {
    let mut session = Session::new(cfg.session.clone());
    let mut failures: u32 = 0;
    loop {
        if *shutdown.borrow() {
            return Ok(());
        }
        if let Some(s) = &stats {
            s.attempts.fetch_add(1, Ordering::Relaxed);
        }
        let (client, eventloop) = build(&cfg);
        let (tx, rx) = mpsc::unbounded_channel();
        let poller = tokio::spawn(poll(eventloop, tx));
        let deps = Deps { outbox_grew: &outbox_grew, clock: &*clock, stats: stats.as_deref() };
        let mut work = StoreWork::new(store.clone(), clock.clone());
        let end = drive(&mut session, &client, rx, &deps, &mut shutdown, &mut work).await;
        let connected = session.connected();
        session.on_disconnect();
        if let Some(s) = &stats {
            s.session_ended(connected && !matches!(end, Ok(End::Shutdown)));
        }
        let end = match end {
            Ok(end) => work.close(&mut session).await.map(|()| end),
            Err(e) => Err(e),
        };
        match end {
            Ok(End::Shutdown) => {
                let _ = client.disconnect().await;
                let _ = tokio::time::timeout(Duration::from_secs(2), poller).await;
                return Ok(());
            }
            Ok(End::Lost(why)) => {
                poller.abort();
                failures = if connected { 1 } else { failures.saturating_add(1) };
                let wait = backoff(&cfg, failures, clock.monotonic_ms());
                tracing::warn!(broker = %format!("{}:{}", cfg.host, cfg.port), %why,
                    retry_in_ms = wait.as_millis() as u64, "MQTT connection lost or refused");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.changed() => {}
                }
            }
            Err(e) => {
                poller.abort();
                return Err(e);
            }
        }
    }
}

/// The wait before attempt `failures + 1`.
fn backoff(cfg: &ForwarderConfig, failures: u32, seed: i64) -> Duration {
    jittered_backoff(cfg.backoff_min, cfg.backoff_max, failures, seed)
}

/// The wait before attempt `failures + 1`: from `min`, doubling per failure, at most `max`, each
/// shortened by up to a half (from `seed`). Also the Sparkplug view's (`crate::sparkplug`).
pub fn jittered_backoff(min: Duration, max: Duration, failures: u32, seed: i64) -> Duration {
    let min = min.as_millis() as u64;
    let max = max.as_millis() as u64;
    let full = min.saturating_mul(1u64 << failures.saturating_sub(1).min(20)).min(max).max(1);
    let bytes = [seed.to_le_bytes(), i64::from(failures).to_le_bytes()].concat();
    let jitter = xxhash_rust::xxh3::xxh3_64(&bytes) % (full / 2 + 1);
    Duration::from_millis(full - jitter)
}

fn build(cfg: &ForwarderConfig) -> (AsyncClient, EventLoop) {
    let s = &cfg.session;
    let mut o = MqttOptions::new(&cfg.client_id, &cfg.host, cfg.port);
    o.set_keep_alive(cfg.keep_alive)
        .set_clean_session(true)
        .set_max_packet_size(s.max_packet, s.max_packet)
        .set_inflight(u16::try_from(s.inflight).unwrap_or(u16::MAX))
        .set_last_will(LastWill::new(
            format!("{}/{STATUS}", s.topic_root),
            OFFLINE.to_vec(),
            QoS::AtLeastOnce,
            true,
        ));
    if let Some((u, p)) = &cfg.credentials {
        o.set_credentials(u, p);
    }
    if let Some(tls) = &cfg.tls {
        o.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(tls.clone())));
    }
    let (client, mut eventloop) = AsyncClient::new(o, s.inflight + 64);
    eventloop.set_network_options(network_options());
    (client, eventloop)
}

/// TCP_NODELAY (rumqttc leaves Nagle's algorithm on): rumqttc already writes what it has queued
/// in one go, and an alert written behind a drain's unacknowledged segments must not wait for
/// their ACK before it leaves.
fn network_options() -> NetworkOptions {
    let mut n = NetworkOptions::new();
    n.set_tcp_nodelay(true);
    n
}

/// Polls the event loop and hands every event to the driver; stops after the first error. Also
/// the Sparkplug view's (`crate::sparkplug`).
pub async fn poll(
    mut eventloop: EventLoop,
    tx: mpsc::UnboundedSender<Result<Event, ConnectionError>>,
) {
    loop {
        let ev = eventloop.poll().await;
        let failed = ev.is_err();
        if tx.send(ev).is_err() || failed {
            return;
        }
    }
}

fn describe(e: &ConnectionError) -> String {
    match e {
        ConnectionError::ConnectionRefused(code) => format!(
            "broker refused the connection ({code:?}): check [mqtt] username, password_file and \
             the broker's ACL"
        ),
        other => other.to_string(),
    }
}

/// The session's store work for one connection, on blocking threads (`fetch.rs`), never on a
/// tokio worker: its rounds, each with the reads it asks for, and its writes, one at a time,
/// while the connection goes on.
///
/// A round's reads are carried out back to back on one blocking thread, each answer fed to the
/// session there, until it asks for none: one hop to the blocking pool per round, not per read.
/// An unpaced drain reads twice per frame (live records, then the frame's raw samples), and each
/// hop costs two thread wake-ups: with a hop per read, the drain's sample rate halved on a 2-vCPU
/// VM (docs/performance.md, "Forwarder session as a request/feed state machine"). The driving
/// task waits for the round (as it waited for the reads when they ran on it), and then handles
/// the packets that came meanwhile.
struct StoreWork {
    store: SharedStore,
    clock: Arc<dyn Clock>,
    writes: JoinSet<Result<Written, FetchError>>,
}

impl StoreWork {
    fn new(store: SharedStore, clock: Arc<dyn Clock>) -> Self {
        StoreWork { store, clock, writes: JoinSet::new() }
    }

    /// Runs a round of `session` ([`Session::poll`] at `now_ms`). It starts here; once it asks
    /// for a read, the session goes to a blocking thread and back (should that thread panic, a
    /// stand-in, disconnected and empty, is left in its place and the error ends the forwarder).
    async fn round(&self, session: &mut Session, now_ms: i64) -> Result<Next, ForwardError> {
        let mut next = session.poll(now_ms);
        let Some(first) = next.read.take() else { return Ok(next) };
        let stand_in = Session::new(session.config().clone());
        let mut s = std::mem::replace(session, stand_in);
        let (store, mut publishes) = (self.store.clone(), next.publishes);
        let task = tokio::task::spawn_blocking(move || {
            let mut read = Some(first);
            let mut next = Next::default();
            while let Some(r) = read {
                match fetch::read(&store, &r) {
                    Ok(fetched) => next = s.feed(fetched, now_ms),
                    Err(e) => return (s, Err(e)),
                }
                publishes.append(&mut next.publishes);
                read = next.read.take();
            }
            (s, Ok(Next { publishes, ..next }))
        });
        let (s, next) = task.await.map_err(|e| ForwardError::Join(e.to_string()))?;
        *session = s;
        Ok(next?)
    }

    /// Starts a write the session asked for.
    fn start(&mut self, write: Write) {
        let (store, at) = (self.store.clone(), self.clock.now_ms());
        self.writes.spawn_blocking(move || fetch::write(&store, &write, at));
    }

    /// The connection ended: waits for the write under way, then carries out the session's last
    /// writes: everything acknowledged applied (and the `Published` records still unledgered
    /// ledgered), and made durable.
    async fn close(&mut self, session: &mut Session) -> Result<(), ForwardError> {
        while let Some(r) = self.writes.join_next().await {
            session.written(joined(r)?, self.clock.monotonic_ms());
        }
        for w in session.flush() {
            self.start(w);
            if let Some(r) = self.writes.join_next().await {
                session.written(joined(r)?, self.clock.monotonic_ms());
            }
        }
        Ok(())
    }
}

/// The outcome of a finished store task.
fn joined<T>(r: Result<Result<T, FetchError>, tokio::task::JoinError>) -> Result<T, ForwardError> {
    Ok(r.map_err(|e| ForwardError::Join(e.to_string()))??)
}

/// What one connection attempt works with.
struct Deps<'a> {
    outbox_grew: &'a Notify,
    clock: &'a dyn Clock,
    stats: Option<&'a ForwardStats>,
}

async fn drive(
    session: &mut Session,
    client: &AsyncClient,
    mut rx: mpsc::UnboundedReceiver<Result<Event, ConnectionError>>,
    deps: &Deps<'_>,
    shutdown: &mut watch::Receiver<bool>,
    work: &mut StoreWork,
) -> Result<End, ForwardError> {
    let Deps { outbox_grew, clock, stats } = *deps;
    loop {
        let wake = session.wake_in_ms(clock.monotonic_ms()).unwrap_or(1000).clamp(1, 1000) as u64;
        let mut next = tokio::select! {
            ev = rx.recv() => match ev {
                Some(ev) => Some(ev),
                None => return Ok(End::Lost("event loop ended".into())),
            },
            Some(r) = work.writes.join_next(), if !work.writes.is_empty() => {
                session.written(joined(r)?, clock.monotonic_ms());
                None
            }
            _ = outbox_grew.notified() => {
                session.outbox_grew();
                None
            }
            _ = tokio::time::sleep(Duration::from_millis(wake)) => None,
            _ = shutdown.changed() => return Ok(End::Shutdown),
        };
        // Handle every packet already delivered before the session's next round.
        while let Some(ev) = next {
            let now = clock.monotonic_ms();
            match ev {
                Err(e) => return Ok(End::Lost(describe(&e))),
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    session.on_connack(now);
                    if let Some(s) = stats {
                        s.connects.fetch_add(1, Ordering::Relaxed);
                        s.connected.store(true, Ordering::Relaxed);
                    }
                    tracing::info!("MQTT connected");
                }
                Ok(Event::Incoming(Packet::PubAck(p))) => {
                    if !session.on_puback(p.pkid, now) {
                        tracing::warn!(pkid = p.pkid, "PUBACK for no PUBLISH in flight");
                    } else if let Some(s) = stats {
                        s.acknowledged.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(Event::Outgoing(Outgoing::Publish(pkid))) => {
                    if !session.on_outgoing_publish(pkid) {
                        tracing::warn!(pkid, "PUBLISH written that the session did not make");
                    }
                }
                Ok(_) => {}
            }
            next = rx.try_recv().ok();
        }
        if let Some(s) = stats {
            s.in_flight.store(session.in_flight(), Ordering::Relaxed);
        }
        let now = clock.monotonic_ms();
        if session.stalled(now) {
            return Ok(End::Lost("stalled: PUBLISHes in flight and no PUBACK".into()));
        }
        let Next { publishes, write, .. } = work.round(session, now).await?;
        // Acknowledged records (and those that needed no PUBLISH) leave in batches, made durable
        // by the next checkpoint's commit or, failing that, by a sync of our own; the write goes
        // on while the PUBLISHes are handed over.
        if let Some(w) = write {
            work.start(w);
        }
        for p in publishes {
            if let Some(s) = stats {
                s.publishes.fetch_add(1, Ordering::Relaxed);
                s.inflight_peak.fetch_max(session.in_flight(), Ordering::Relaxed);
                s.in_flight.store(session.in_flight(), Ordering::Relaxed);
            }
            if let Err(e) = client.publish(p.topic, QoS::AtLeastOnce, p.retain, p.payload).await {
                return Ok(End::Lost(format!("client request channel closed: {e}")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ForwarderConfig {
        ForwarderConfig {
            host: "h".into(),
            port: 1,
            client_id: "c".into(),
            keep_alive: Duration::from_secs(30),
            credentials: None,
            tls: None,
            session: SessionConfig {
                topic_root: "p/g".into(),
                inflight: 4,
                inflight_bytes: 1 << 20,
                max_packet: 4096,
                replay_rate: 0,
                batch_events: 10,
                buffer: 16,
                stall_ms: 1000,
                commit_acks: 100,
                commit_ms: 50,
                sync_ms: 1000,
            },
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_millis(5000),
        }
    }

    #[test]
    fn backoff_doubles_is_bounded_and_jittered() {
        let c = cfg();
        for (failures, full) in [(1u32, 100u64), (2, 200), (4, 800), (30, 5000)] {
            let waits: Vec<u64> =
                (0..50).map(|s| backoff(&c, failures, s).as_millis() as u64).collect();
            assert!(waits.iter().all(|&w| w <= full && w >= full / 2), "{failures}: {waits:?}");
            assert!(waits.iter().any(|&w| w != waits[0]), "no jitter at {failures}");
        }
    }
}
