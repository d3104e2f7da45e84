//! The daemon's telemetry around the pipeline (`crate::telemetry` has the building blocks):
//!
//! - [`Telemetry`]: the [`Metrics`] handle, the watchdog [`Heartbeat`] and the machines' latest
//!   watermarks, shared by the stages. The decide stage reports after every checkpoint
//!   ([`Telemetry::checkpointed`]): the decision counters (records, duplicates, late and too late,
//!   rejected by reason, alerts), the rule state, each machine's watermark and lag, and the
//!   processing latency of the batches the checkpoint covers.
//! - [`sample_loop`]: every [`SAMPLE_INTERVAL`], what only the store knows — outbox depth by kind
//!   (records and bytes), the backlog's drain rate and ETA, the store's bytes on disk and its
//!   fsync count — the MQTT forwarder's counters ([`ForwardStats`]: connection state, attempts,
//!   sessions, PUBLISHes, PUBACKs, in flight), and the gateway clock's state from the kernel
//!   (`adjtimex`).
//! - Where the work happens: the journal's group commits time themselves
//!   ([`Telemetry::journal_committed`]), and bus sources count their FIFO overruns
//!   (`super::live_bus`).
//! - [`bind_metrics`] and [`crate::telemetry::http::serve`]: `GET /metrics` on `[metrics] listen`.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use super::{lock, AppError, SharedStore};
use crate::clock::{Clock, SystemClock};
use crate::decide::Decider;
use crate::event::ClockState;
use crate::forward::ForwardStats;
use crate::outbox::{Bulk, OutboxRecord};
use crate::store::Store;
use crate::telemetry::drain::DrainRate;
use crate::telemetry::watchdog::Heartbeat;
use crate::telemetry::{BrokerState, Metrics, OutboxKind};

/// How often [`sample_loop`] reads the store and the kernel clock.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// The drain rate's sliding window.
const DRAIN_WINDOW_MS: i64 = 30_000;

/// What the stages share for telemetry. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Telemetry {
    pub metrics: Metrics,
    pub heartbeat: Heartbeat,
    /// The MQTT forwarder's counters (it updates them; [`sample_loop`] publishes them).
    pub forward: Arc<ForwardStats>,
    /// Each machine's latest watermark (event time, ms), as of the last checkpoint.
    watermarks: Arc<Mutex<BTreeMap<String, i64>>>,
}

impl Telemetry {
    pub fn new() -> Self {
        Self::default()
    }

    /// The decide stage wrote a checkpoint: `ingest_ms` is the ingest time of the last record it
    /// decided, `latencies_s` the time each batch it covers waited from its receipt to now.
    pub(super) fn checkpointed(
        &self,
        decider: &Decider,
        ingest_ms: Option<i64>,
        latencies_s: &[f64],
    ) {
        let m = &self.metrics;
        m.apply_counts(decider.counts());
        let (size, open_frames) = decider.state_size();
        m.set_rule_state(&size, open_frames);
        if let Some(at) = ingest_ms {
            m.set_watermarks(at, decider.watermarks());
        }
        if let Ok(mut w) = self.watermarks.lock() {
            for (machine, wm) in decider.watermarks() {
                if let Some(wm) = wm {
                    w.insert(machine.to_owned(), wm);
                }
            }
        }
        for &s in latencies_s {
            m.observe_processing_latency(s);
        }
    }

    /// One journal group commit (append, flush, fsync) took `seconds`.
    pub(super) fn journal_committed(&self, seconds: f64) {
        self.metrics.observe_journal_commit(seconds.max(0.0));
    }

    /// Each machine's latest watermark.
    pub(super) fn watermarks(&self) -> BTreeMap<String, i64> {
        self.watermarks.lock().map(|w| w.clone()).unwrap_or_default()
    }
}

/// What one look at the store found.
#[derive(Debug, Default, PartialEq)]
struct StoreSample {
    /// Records and bytes waiting in the outbox, by kind.
    outbox: BTreeMap<OutboxKind, (u64, u64)>,
    /// Outbox records ever removed (acknowledged or shed): sequences handed out minus pending.
    removed_total: u64,
    disk_bytes: u64,
}

fn sample_store(store: &Store) -> Result<StoreSample, AppError> {
    let mut s = StoreSample::default();
    let mut pending = 0u64;
    for r in store.outbox_pending() {
        let (seq, bytes) = r?;
        // Events and raw samples, the bulk of a backlog, are told by their bytes: this runs
        // every second under the store's lock, and decoding an hour of backlog took long.
        let kind = match OutboxRecord::peek_bulk(&bytes) {
            Some(Bulk::Event) => OutboxKind::Event,
            Some(Bulk::Samples) => OutboxKind::Samples,
            None => OutboxKind::of(
                &OutboxRecord::decode(&bytes)
                    .map_err(|e| AppError::Outbox { seq, why: e.to_string() })?,
            ),
        };
        let e = s.outbox.entry(kind).or_insert((0, 0));
        e.0 += 1;
        e.1 += bytes.len() as u64;
        pending += 1;
    }
    s.removed_total = store.next_outbox_seq().saturating_sub(1).saturating_sub(pending);
    s.disk_bytes = store.disk_usage()?;
    Ok(s)
}

/// The forwarder's counters as the metrics take them.
fn broker_state(f: &ForwardStats) -> BrokerState {
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    BrokerState {
        connected: f.connected.load(Ordering::Relaxed),
        attempts: n(&f.attempts),
        connects: n(&f.connects),
        disconnects: n(&f.disconnects),
        publishes: n(&f.publishes),
        acknowledged: n(&f.acknowledged),
        in_flight: f.in_flight.load(Ordering::Relaxed) as u64,
    }
}

/// The gateway clock's state from the kernel: synced while NTP disciplines it.
fn kernel_clock_state() -> ClockState {
    match crate::source::clock_quality::read_adjtimex() {
        Ok(k) if k.synchronised() => ClockState::Synced,
        Ok(_) => ClockState::Unsynced,
        Err(_) => ClockState::Unknown,
    }
}

/// Updates the store and clock gauges every [`SAMPLE_INTERVAL`] until `stop`. A failed look is
/// logged and tried again at the next interval (a broken store stops the decide stage anyway).
pub(super) async fn sample_loop(
    store: SharedStore,
    telemetry: Telemetry,
    mut stop: watch::Receiver<bool>,
) {
    let clock = SystemClock::new();
    let mut drain = DrainRate::new(DRAIN_WINDOW_MS);
    loop {
        let shared = store.clone();
        let sampled = tokio::task::spawn_blocking(move || sample_store(&*lock(&shared)?)).await;
        match sampled.map_err(AppError::from).and_then(|r| r) {
            Ok(s) => {
                let m = &telemetry.metrics;
                let mut backlog = 0;
                for kind in OutboxKind::ALL {
                    let (records, bytes) = s.outbox.get(&kind).copied().unwrap_or((0, 0));
                    m.set_outbox(kind, records, bytes);
                    backlog += records;
                }
                let rate = drain.observe(clock.monotonic_ms(), s.removed_total);
                m.set_replay_progress(backlog, rate);
                m.set_store_bytes(s.disk_bytes);
            }
            Err(e) => tracing::warn!(error = %e, "metrics: cannot read the store"),
        }
        let m = &telemetry.metrics;
        m.set_fsyncs(crate::store::fsyncs_total());
        m.set_broker(&broker_state(&telemetry.forward));
        m.set_clock_state(kernel_clock_state());
        super::memory::release_free_memory();
        tokio::select! {
            _ = tokio::time::sleep(SAMPLE_INTERVAL) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Binds `[metrics] listen`. A failure is logged, not fatal: the gateway's data path matters more
/// than its scrape endpoint (and a second instance, or a test, may hold the port).
pub(super) async fn bind_metrics(listen: &str) -> Option<TcpListener> {
    match TcpListener::bind(listen).await {
        Ok(l) => {
            let addr = l.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| listen.into());
            tracing::info!(%addr, "metrics at http://{addr}/metrics");
            Some(l)
        }
        Err(e) => {
            tracing::error!(listen, error = %e, "metrics endpoint not served: cannot bind");
            None
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::StoreOptions;

    #[test]
    fn a_sample_counts_the_outbox_by_kind_and_what_left_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("db"), StoreOptions::default()).unwrap();
        let samples = OutboxRecord::Samples {
            machine: "m".into(),
            sensor: "s".into(),
            journal_pos: 1,
            t0_ms: 0,
            rate_hz: 100.0,
            n: 100,
        };
        let alert = OutboxRecord::Alert {
            machine: "m".into(),
            alert_id: "a".into(),
            revision: 0,
            json: b"{}".to_vec(),
        };
        let recs = [samples.encode(), samples.encode(), alert.encode()];
        s.append_journal(&[(0, b"x".to_vec())]).unwrap();
        s.checkpoint(1, b"", &recs).unwrap();
        s.outbox_ack(1).unwrap();
        let got = sample_store(&s).unwrap();
        let n = |k| got.outbox.get(&k).copied().unwrap_or((0, 0));
        assert_eq!(n(OutboxKind::Samples), (1, recs[0].len() as u64));
        assert_eq!(n(OutboxKind::Alert), (1, recs[2].len() as u64));
        assert_eq!(n(OutboxKind::Event), (0, 0));
        assert_eq!(got.removed_total, 1);
        assert!(got.disk_bytes > 0);
    }

    #[test]
    fn the_forwarders_counters_become_the_broker_state() {
        let f = ForwardStats::default();
        f.attempts.store(2, Ordering::Relaxed);
        f.connects.store(1, Ordering::Relaxed);
        f.connected.store(true, Ordering::Relaxed);
        f.publishes.store(9, Ordering::Relaxed);
        f.acknowledged.store(7, Ordering::Relaxed);
        f.in_flight.store(2, Ordering::Relaxed);
        let want = BrokerState {
            connected: true,
            attempts: 2,
            connects: 1,
            disconnects: 0,
            publishes: 9,
            acknowledged: 7,
            in_flight: 2,
        };
        assert_eq!(broker_state(&f), want);
    }
}
