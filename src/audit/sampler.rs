//! The metrics sampler ([`sample_loop`]), the read side's window for Prometheus: every
//! [`SAMPLE_INTERVAL`] (less often while a large outbox makes a look long), what only the store
//! knows — outbox depth by kind (records and bytes), the backlog's drain rate and ETA, each
//! sensor's state, the quarantine, the store's bytes on disk and its fsync count — the MQTT
//! forwarder's counters (`crate::telemetry::ForwardStats`: connection state, attempts, sessions,
//! PUBLISHes, PUBACKs, in flight), and the gateway clock's state from the kernel (`adjtimex`).
//! It is part of the read side because it tells people what `status` tells them (the same sensor
//! rows), as gauges.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::clock::{Clock, SystemClock};
use crate::records::outbox::{Bulk, OutboxRecord};
use crate::store::{SharedStore, StoreError};
use crate::telemetry::drain::DrainRate;
use crate::telemetry::{OutboxKind, Telemetry};

/// How often [`sample_loop`] reads the store and the kernel clock.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// Why a look at the store failed: logged, and the next look tries again.
#[derive(Debug, thiserror::Error)]
enum LookError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("outbox record {seq} does not decode: {why}")]
    Outbox { seq: u64, why: String },
    #[error("a pipeline task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// The drain rate's sliding window.
const DRAIN_WINDOW_MS: i64 = 30_000;

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
fn sample_store(store: &SharedStore) -> Result<StoreSample, LookError> {
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
) -> Result<StoreSample, LookError> {
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
                    .map_err(|e| LookError::Outbox { seq, why: e.to_string() })?,
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

/// Updates the store and clock gauges every [`SAMPLE_INTERVAL`] until `stop`. A failed look is
/// logged and tried again at the next interval (a broken store stops the decide stage anyway).
pub async fn sample_loop(
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
                Some(s.map_err(LookError::from).and_then(|r| r))
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
                telemetry.set_drain_rate(rate);
                m.set_replay_progress(backlog, rate);
                m.set_store_bytes(s.disk_bytes);
                m.set_journal_undecided(s.undecided);
                m.set_quarantine(s.quarantine.0, s.quarantine.1);
                let wall = SystemClock::new().now_ms();
                let now = super::status::reference_time(&s.sensors, &config, Some(wall));
                for r in super::status::sensor_rows(&s.sensors, &config, now) {
                    m.set_sensor(&r.machine, &r.sensor, r.state.as_str(), r.last_ts_ms);
                }
            }
            Some(Err(e)) => tracing::warn!(error = %e, "metrics: cannot read the store"),
        }
        let m = &telemetry.metrics;
        m.set_fsyncs(crate::store::fsyncs_total());
        m.set_broker(&telemetry.forward.state());
        if config.sparkplug.is_some() {
            let s = crate::sparkplug::STATS.snapshot();
            m.set_sparkplug(&crate::telemetry::SparkplugState {
                online: s.online,
                nbirth: s.nbirth,
                dbirth: s.dbirth,
                ddata: s.ddata,
                ndeath: s.ndeath,
                historical: s.historical,
                held: s.held,
            });
        }
        m.set_clock_state(crate::source::clock_quality::kernel_clock_state());
        crate::memory::release_free_memory();
        tokio::select! {
            _ = tokio::time::sleep(SAMPLE_INTERVAL) => {}
            _ = stop.wait_for(|s| *s) => return,
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
        let store = SharedStore::new(s);
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
}
