//! The daemon's telemetry around the pipeline (`crate::telemetry` has the building blocks):
//!
//! - [`Telemetry`]: the [`Metrics`] handle, the watchdog [`Heartbeat`] and the machines' latest
//!   watermarks, shared by the stages. The decide stage reports after every checkpoint
//!   ([`Telemetry::checkpointed`]): the decision counters (records, duplicates, late and too late,
//!   rejected by reason, alerts), the rule state, each machine's watermark and lag, and the
//!   processing latency of the batches the checkpoint covers.
//! - [`sample_loop`]: every [`SAMPLE_INTERVAL`] (less often while a large outbox makes a look
//!   long), what only the store knows — outbox depth by kind (records and bytes), the backlog's
//!   drain rate and ETA, the store's bytes on disk and its fsync count — the MQTT forwarder's
//!   counters ([`ForwardStats`]: connection state, attempts, sessions, PUBLISHes, PUBACKs, in
//!   flight), and the gateway clock's state from the kernel (`adjtimex`).
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

use super::AppError;
use crate::clock::{Clock, SystemClock};
use crate::decider::Decider;
use crate::event::ClockState;
use crate::forward::ForwardStats;
use crate::records::outbox::{Bulk, OutboxRecord};
use crate::store::SharedStore;
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
    /// The outbox's drain rate (records per second, as f64 bits), as of the last look.
    drain_rate: Arc<std::sync::atomic::AtomicU64>,
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
        // Before the counts: a scrape that sees a record counted sees its bound.
        m.set_watermark_bounds(decider.bounds());
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

    /// Outbox records removed per second over the last 30 s, as of the last look.
    pub fn drain_rate(&self) -> f64 {
        f64::from_bits(self.drain_rate.load(Ordering::Relaxed))
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
    /// Journal records written and not yet decided (nor checkpointed).
    undecided: u64,
    /// Quarantined records and their bytes.
    quarantine: (u64, u64),
    sensors: crate::records::sensors::SensorBook,
}

/// Looks at the store: under its lock only long enough to start the outbox iterator and read
/// the outbox's next sequence and the disk use; the outbox is then walked without the lock (sled
/// is safe to read beside writers), up to the records that existed while it was held. A backlog of
/// a day is over a million records: walking it held the pipeline's checkpoints for most of
/// every second.
fn sample_store(store: &SharedStore) -> Result<StoreSample, AppError> {
    let (records, next, disk_bytes, undecided, quarantine, sensors) = {
        let s = store.read();
        let undecided = s.next_journal_pos().saturating_sub(1).saturating_sub(s.checkpoint_pos());
        (
            s.outbox_pending(),
            s.next_outbox_seq(),
            s.disk_usage()?,
            undecided,
            s.archive_scan(crate::store::archive::QUARANTINE),
            s.sensor_book_with_gaps()?,
        )
    };
    let mut q = (0, 0);
    for r in quarantine {
        let (_, v) = r?;
        q = (q.0 + 1, q.1 + v.len() as u64);
    }
    let sample = tally_outbox(records, next, disk_bytes)?;
    Ok(StoreSample { undecided, quarantine: q, sensors, ..sample })
}

/// Counts `records` below sequence `next` by kind; see [`sample_store`].
fn tally_outbox(
    records: impl Iterator<Item = Result<(u64, Vec<u8>), crate::store::StoreError>>,
    next: u64,
    disk_bytes: u64,
) -> Result<StoreSample, AppError> {
    let mut s = StoreSample { disk_bytes, ..StoreSample::default() };
    let mut pending = 0u64;
    for r in records {
        let (seq, bytes) = r?;
        if seq >= next {
            break; // written since: the next look counts it
        }
        // Events and raw samples, the bulk of a backlog, are told by their bytes.
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
    // Records removed while walking were removed: the total only grows from one look to the next.
    s.removed_total = next.saturating_sub(1).saturating_sub(pending);
    Ok(s)
}

/// When the store may be looked at again after a look that began at `started_ms` and took
/// `took_ms`: the next interval, or later when looks get long (a large backlog), so that they take
/// at most a `1 / LOOK_DUTY` share of the time.
fn next_look_ms(started_ms: i64, took_ms: i64) -> i64 {
    started_ms + (took_ms * LOOK_DUTY).max(SAMPLE_INTERVAL.as_millis() as i64)
}

/// See [`next_look_ms`].
const LOOK_DUTY: i64 = 20;

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
pub fn kernel_clock_state() -> ClockState {
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
    config: Arc<crate::config::Config>,
    mut stop: watch::Receiver<bool>,
) {
    let clock = SystemClock::new();
    let mut drain = DrainRate::new(DRAIN_WINDOW_MS);
    let mut look_at_ms = i64::MIN;
    loop {
        let started = clock.monotonic_ms();
        let sampled = match started >= look_at_ms {
            true => {
                let shared = store.clone();
                let s = tokio::task::spawn_blocking(move || sample_store(&shared)).await;
                look_at_ms = next_look_ms(started, clock.monotonic_ms() - started);
                Some(s.map_err(AppError::from).and_then(|r| r))
            }
            false => None, // the last look's gauges stand
        };
        match sampled {
            None => {}
            Some(Ok(s)) => {
                let m = &telemetry.metrics;
                let mut backlog = 0;
                for kind in OutboxKind::ALL {
                    let (records, bytes) = s.outbox.get(&kind).copied().unwrap_or((0, 0));
                    m.set_outbox(kind, records, bytes);
                    backlog += records;
                }
                let rate = drain.observe(clock.monotonic_ms(), s.removed_total);
                telemetry.drain_rate.store(rate.to_bits(), Ordering::Relaxed);
                m.set_replay_progress(backlog, rate);
                m.set_store_bytes(s.disk_bytes);
                m.set_journal_undecided(s.undecided);
                m.set_quarantine(s.quarantine.0, s.quarantine.1);
                let wall = SystemClock::new().now_ms();
                let now = super::audit::status::reference_time(&s.sensors, &config, Some(wall));
                for r in super::audit::status::sensor_rows(&s.sensors, &config, now) {
                    m.set_sensor(&r.machine, &r.sensor, r.state.as_str(), r.last_ts_ms);
                }
            }
            Some(Err(e)) => tracing::warn!(error = %e, "metrics: cannot read the store"),
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
mod tests {
    use super::*;
    use crate::store::{Store, StoreOptions};

    #[test]
    fn a_sample_counts_the_outbox_by_kind_and_what_left_it() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("db"), StoreOptions::default()).unwrap();
        let store: SharedStore = SharedStore::new(s);
        let samples = OutboxRecord::Samples {
            machine: "m".into(),
            sensor: "s".into(),
            journal_pos: 1,
            t0_ms: 0,
            rate_hz: 100.0,
            n: 100,
            frame: None,
        };
        let alert = OutboxRecord::Alert {
            machine: "m".into(),
            alert_id: "a".into(),
            revision: 0,
            json: b"{}".to_vec(),
        };
        let recs = [samples.encode(), samples.encode(), alert.encode()];
        {
            let mut s = store.write();
            s.append_journal(&[(0, b"x".to_vec())]).unwrap();
            s.checkpoint(1, b"", &recs).unwrap();
            s.outbox_ack(1).unwrap();
        }
        let got = sample_store(&store).unwrap();
        let n = |k| got.outbox.get(&k).copied().unwrap_or((0, 0));
        assert_eq!(n(OutboxKind::Samples), (1, recs[0].len() as u64));
        assert_eq!(n(OutboxKind::Alert), (1, recs[2].len() as u64));
        assert_eq!(n(OutboxKind::Event), (0, 0));
        assert_eq!(got.removed_total, 1);
        assert!(got.disk_bytes > 0);
    }

    #[test]
    fn a_walk_counts_only_what_existed_under_the_lock_and_what_left_meanwhile_as_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("db"), StoreOptions::default()).unwrap();
        let alert = |n: u32| {
            let json = b"{}".to_vec();
            OutboxRecord::Alert {
                machine: "m".into(),
                alert_id: format!("a{n}"),
                revision: 0,
                json,
            }
        };
        s.append_journal(&[(0, b"x".to_vec()), (0, b"y".to_vec())]).unwrap();
        s.checkpoint(1, b"", &[alert(1).encode(), alert(2).encode(), alert(3).encode()]).unwrap();
        // The look starts (under the lock), then the pipeline and the forwarder go on.
        let (records, next) = (s.outbox_pending(), s.next_outbox_seq());
        s.outbox_ack(1).unwrap();
        s.checkpoint(2, b"", &[alert(4).encode()]).unwrap();
        let got = tally_outbox(records, next, 0).unwrap();
        let (pending, _) = got.outbox[&OutboxKind::Alert];
        assert_eq!(pending, 2, "records 2 and 3: sled's iterator reads as it goes");
        assert_eq!(got.removed_total, 1, "record 4 is neither pending nor removed");
    }

    #[test]
    fn looks_at_a_large_outbox_are_spaced_by_their_cost() {
        assert_eq!(next_look_ms(10_000, 3), 11_000, "a quick look: the next interval");
        assert_eq!(next_look_ms(10_000, 50), 11_000);
        assert_eq!(next_look_ms(10_000, 400), 18_000, "a 400 ms look: 1/20 of the time");
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
