//! What the stages of `linegate run` share for telemetry ([`Telemetry`]): the [`Metrics`]
//! handle, the watchdog [`Heartbeat`], the MQTT forwarder's counters, each machine's latest
//! watermark, the outbox's drain rate and the decider's trends. The stages report through it
//! where the work happens: the decide stage after every checkpoint (decision counters, rule
//! state, watermarks, trends, processing latency), the journal's group commits their duration
//! ([`Telemetry::journal_committed`]), bus sources their FIFO overruns, the metrics sampler what
//! only the store knows.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::watchdog::Heartbeat;
use super::{ForwardStats, Metrics};
use crate::trend::TrendBook;

/// What the stages share for telemetry. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Telemetry {
    pub metrics: Metrics,
    pub heartbeat: Heartbeat,
    /// The MQTT forwarder's counters (it updates them; the sampler publishes them).
    pub forward: Arc<ForwardStats>,
    /// Each machine's latest watermark (event time, ms), as of the last checkpoint.
    watermarks: Arc<Mutex<BTreeMap<String, i64>>>,
    /// The outbox's drain rate (records per second, as f64 bits), as of the last look.
    drain_rate: Arc<AtomicU64>,
    /// The decider's trends (`crate::trend`), as of the last checkpoint, for the status page.
    trends: Arc<Mutex<TrendBook>>,
}

impl Telemetry {
    pub fn new() -> Self {
        Self::default()
    }

    /// One journal group commit (append, flush, fsync) took `seconds`.
    pub fn journal_committed(&self, seconds: f64) {
        self.metrics.observe_journal_commit(seconds.max(0.0));
    }

    /// Outbox records removed per second over the last 30 s, as of the last look.
    pub fn drain_rate(&self) -> f64 {
        f64::from_bits(self.drain_rate.load(Ordering::Relaxed))
    }

    /// The sampler's latest drain rate.
    pub fn set_drain_rate(&self, rate: f64) {
        self.drain_rate.store(rate.to_bits(), Ordering::Relaxed);
    }

    /// The trends as of the last checkpoint (empty before the first).
    pub fn trends(&self) -> TrendBook {
        self.trends.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Keeps a copy of the decider's trends.
    pub fn publish_trends(&self, book: &TrendBook) {
        if let Ok(mut t) = self.trends.lock() {
            t.copy_from(book);
        }
    }

    /// Each machine's latest watermark.
    pub fn watermarks(&self) -> BTreeMap<String, i64> {
        self.watermarks.lock().map(|w| w.clone()).unwrap_or_default()
    }

    /// Keeps the watermarks of the machines that have one (as `Decider::watermarks` yields them).
    pub fn note_watermarks<'a>(
        &self,
        watermarks: impl IntoIterator<Item = (&'a str, Option<i64>)>,
    ) {
        if let Ok(mut w) = self.watermarks.lock() {
            for (machine, wm) in watermarks {
                if let Some(wm) = wm {
                    w.insert(machine.to_owned(), wm);
                }
            }
        }
    }
}
