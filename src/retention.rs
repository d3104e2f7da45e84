//! The retention room: the store's budget kept in the daemon. Every [`RETENTION_INTERVAL`], and
//! once more when the pipeline stops, a task takes the store's lock and, when the directory is
//! over `[store] max_bytes`, calls [`Store::shed_to_budget`] (`store/retention.rs`: oldest raw
//! sample frames first, each shed range a `Shed` ledger record and a declared gap in the outbox).
//! A shell of its own rather than part of `crate::store`: it decides what may go from the
//! configuration, the archived alerts and the machines' watermarks (the telemetry's), which the
//! store does not know; the store carries it out.
//!
//! What is protected ([`Evidence`]): raw samples are never shed when they are, or may still
//! become, alert evidence —
//! - frames that overlap the raw samples of any evidence event of any archived alert revision:
//!   its `samples` reference `[from_ms, to_ms]` when it has one, else the 1-second frame that
//!   ends at its `ts_ms` (a derived event's `ts_ms` is its frame's end);
//! - frames of a machine that end after its watermark minus the rule window and the allowed
//!   lateness: events there can still join an incident (late ones included).
//!
//! The same check first prunes the ledger's and the alert archive's history ([`prune`]), and
//! over the budget trims the input's history (`store/history.rs`) before it sheds any frame.
//! Every hour it also has sled write its page table snapshot ([`SLED_SNAPSHOT_EVERY`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::rule::alert::AlertRecord;
use crate::store::archive::ALERTS;
use crate::store::{SharedStore, ShedReport, Store, StoreError};
use crate::telemetry::Telemetry;

/// Why a check failed: logged, and the next check tries again.
#[derive(Debug, thiserror::Error)]
enum CheckError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("a pipeline task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// How often the budget is checked (the check is a walk of the store's directory).
pub const RETENTION_INTERVAL: Duration = Duration::from_secs(1);

/// The raw samples that must be kept: see the module documentation. Pure.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Evidence {
    /// Per (machine, sensor), the raw-sample span `[from, to]` of every evidence event.
    events: BTreeMap<(String, String), Vec<(i64, i64)>>,
    /// Per machine, frames ending after this are kept.
    recent_from: BTreeMap<String, i64>,
}

impl Evidence {
    /// From archived alert revisions and each machine's watermark; `keep_ms` is how far behind
    /// the watermark events can still join an incident.
    pub fn new<'a>(
        alerts: impl IntoIterator<Item = &'a AlertRecord>,
        watermarks: &BTreeMap<String, i64>,
        keep_ms: i64,
    ) -> Evidence {
        let mut events: BTreeMap<(String, String), Vec<(i64, i64)>> = BTreeMap::new();
        for a in alerts {
            for e in &a.evidence {
                let span =
                    e.samples.map_or((e.ts_ms - 1000, e.ts_ms - 1), |r| (r.from_ms, r.to_ms));
                events.entry((a.machine.clone(), e.sensor.to_string())).or_default().push(span);
            }
        }
        for ts in events.values_mut() {
            ts.sort_unstable();
            ts.dedup();
        }
        let recent_from =
            watermarks.iter().map(|(m, &wm)| (m.clone(), wm.saturating_sub(keep_ms))).collect();
        Evidence { events, recent_from }
    }

    /// Whether raw samples of `machine`/`sensor` in `[from_ms, to_ms)` must be kept.
    pub fn protects(&self, machine: &str, sensor: &str, from_ms: i64, to_ms: i64) -> bool {
        if self.recent_from.get(machine).is_some_and(|&since| to_ms > since) {
            return true;
        }
        let key = (machine.to_owned(), sensor.to_owned());
        let spans = self.events.get(&key).map_or(&[][..], Vec::as_slice);
        spans.iter().any(|&(from, to)| from < to_ms && to >= from_ms)
    }
}

/// Every archived alert revision.
fn archived_alerts(store: &Store) -> Result<Vec<AlertRecord>, StoreError> {
    let mut out = Vec::new();
    for kv in store.archive_scan(ALERTS) {
        let (key, value) = kv?;
        match serde_json::from_slice::<AlertRecord>(&value) {
            Ok(a) => out.push(a),
            Err(e) => tracing::warn!(
                key = %key.escape_ascii(),
                error = %e,
                "retention: an archived alert record does not decode; its evidence is not protected"
            ),
        }
    }
    Ok(out)
}

/// One check of the budget: sheds when the store is over it. `None` when within budget.
pub fn enforce(
    store: &SharedStore,
    config: &Config,
    telemetry: &Telemetry,
) -> Result<Option<ShedReport>, StoreError> {
    let max = config.store.max_bytes;
    // The retention stage's span, one per pass: the budget, the ledger records pruned, the
    // store's size, and what went over the budget (history records trimmed, frames shed).
    let span = tracing::debug_span!(
        "retention",
        max_bytes = max,
        pruned = tracing::field::Empty,
        size = tracing::field::Empty,
        trimmed = tracing::field::Empty,
        shed_frames = tracing::field::Empty
    );
    let _entered = span.enter();
    // A batch at a time, the lock released between them, until the history is caught up.
    let mut pruned = 0;
    loop {
        let n = prune(&mut store.write(), config, telemetry)?;
        pruned += n;
        if n != PRUNE_PER_CHECK as u64 {
            break;
        }
    }
    span.record("pruned", pruned);
    let mut s = store.write();
    let size = s.disk_usage()?;
    span.record("size", size);
    if size <= max {
        return Ok(None);
    }
    // History first: input already decided and delivered (store/history.rs).
    let trim = s.trim_history(size - crate::store::low_water(max))?;
    span.record("trimmed", trim.records);
    if trim.records > 0 {
        tracing::info!(
            size,
            max_bytes = max,
            records = trim.records,
            bytes = trim.bytes,
            history_start = trim.start,
            "retention: over budget, trimmed the oldest history"
        );
        telemetry.metrics.history_trimmed(trim.records);
        if s.disk_usage()? <= max {
            return Ok(None);
        }
    }
    // The longest window of any rule: every rule's evidence is protected.
    let window_ms = config.rules().map(|r| r.window_ms).max().unwrap_or(config.rule.window_ms);
    let keep_ms = window_ms.saturating_add(config.time.allowed_lateness_ms);
    let evidence = Evidence::new(&archived_alerts(&s)?, &telemetry.watermarks(), keep_ms);
    let protect =
        |m: &str, sensor: &str, from: i64, to: i64| evidence.protects(m, sensor, from, to);
    let report = s.shed_to_budget(max, SystemClock::new().now_ms(), &protect)?;
    drop(s);
    span.record("shed_frames", report.frames);
    if report.triggered {
        tracing::info!(
            size = report.size_before,
            max_bytes = max,
            frames = report.frames,
            sample_bytes = report.bytes,
            protected = report.protected,
            gaps = report.gaps.len(),
            "retention: over budget, shed the oldest raw sample frames"
        );
        if report.frames == 0 {
            tracing::warn!(
                "retention: nothing could be shed (events, alerts and alert evidence are kept)"
            );
        }
        telemetry.metrics.set_store_bytes(report.size_after);
    }
    Ok(Some(report))
}

/// The ledger's and the alert archive's history: folds the ledger records whose decisions are
/// older than `[store] history` before the newest decision into the pruned summary
/// (`store/prune.rs`), at most [`PRUNE_PER_CHECK`] at once; returns how many. The horizon
/// follows ingest time, not the wall clock, so a trace replayed at speed keeps the same history
/// as the live gateway.
pub fn prune(s: &mut Store, config: &Config, telemetry: &Telemetry) -> Result<u64, StoreError> {
    let Some(newest) = s.newest_decision_ms()? else { return Ok(0) };
    let report = s.prune_ledger(newest.saturating_sub(config.store.history_ms), PRUNE_PER_CHECK)?;
    if report.ledger_records > 0 {
        tracing::debug!(
            ledger_records = report.ledger_records,
            alert_revisions = report.alert_revisions,
            "retention: pruned the ledger's history"
        );
        telemetry.metrics.ledger_pruned(report.ledger_records);
    }
    Ok(report.ledger_records)
}

/// Ledger records pruned in one batch, under one hold of the store's lock: few enough to hold
/// it briefly (the decide stage waits meanwhile).
pub const PRUNE_PER_CHECK: usize = 5_000;

/// How often the daemon has sled write its page table snapshot by closing and reopening it
/// (`store/reopen.rs`): a start then reads at most this long a stretch of sled's log. It holds
/// the store's lock for 0.14–0.21 s (median per simulated day of a week's outage; 0.47 s at most:
/// docs/performance.md, "A week-long outage").
pub const SLED_SNAPSHOT_EVERY: Duration = Duration::from_secs(3600);

/// Checks the budget every [`RETENTION_INTERVAL`] until `stop`, and every
/// [`SLED_SNAPSHOT_EVERY`] has sled write its snapshot (at the first check after that when an
/// iterator of the store was out). A failed check is logged and tried again (a store that failed
/// a write is poisoned and stops the decide stage anyway).
pub async fn retention_loop(
    store: SharedStore,
    config: Arc<Config>,
    telemetry: Telemetry,
    mut stop: watch::Receiver<bool>,
) {
    let mut since_snapshot = Duration::ZERO;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(RETENTION_INTERVAL) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        run_once(&store, &config, &telemetry).await;
        since_snapshot += RETENTION_INTERVAL;
        if since_snapshot >= SLED_SNAPSHOT_EVERY && snapshot_sled(&store).await {
            since_snapshot = Duration::ZERO;
        }
    }
}

/// One [`Store::snapshot_sled`] on a blocking thread; whether it is done for this period (it
/// was, or it failed: the store is then poisoned and the pipeline stops).
async fn snapshot_sled(store: &SharedStore) -> bool {
    let store = store.clone();
    let r = tokio::task::spawn_blocking(move || {
        let clock = SystemClock::new();
        let done = store.write().snapshot_sled()?;
        Ok::<_, crate::store::StoreError>(done.then(|| clock.monotonic_ms()))
    })
    .await;
    match r.map_err(CheckError::from).and_then(|r| r.map_err(CheckError::from)) {
        Ok(Some(took_ms)) => {
            tracing::info!(
                took_ms,
                "store: sled closed and reopened to write its page table snapshot"
            );
            true
        }
        Ok(None) => {
            tracing::debug!("store: a reader of the store is out; sled's snapshot waits");
            false
        }
        Err(e) => {
            tracing::error!(error = %e, "store: closing and reopening sled failed");
            true
        }
    }
}

/// One [`enforce`] on a blocking thread; errors are logged.
pub async fn run_once(store: &SharedStore, config: &Arc<Config>, telemetry: &Telemetry) {
    let (store, config, t) = (store.clone(), config.clone(), telemetry.clone());
    let r = tokio::task::spawn_blocking(move || enforce(&store, &config, &t)).await;
    if let Err(e) = r.map_err(CheckError::from).and_then(|r| r.map_err(CheckError::from)) {
        tracing::error!(error = %e, "retention: the budget check failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::store::newest_sled_snapshot as newest_snapshot;

    #[tokio::test(start_paused = true)]
    #[allow(clippy::await_holding_lock)] // one thread, and the lock only orders tests
    async fn the_loop_has_sled_write_its_snapshot_every_hour() {
        let _serial = crate::store::reopen_test_lock();
        let tmp = tempfile::tempdir().unwrap();
        let mut s = Store::open(tmp.path(), crate::store::StoreOptions::default()).unwrap();
        s.append_journal(&[(1, b"a line".to_vec())]).unwrap();
        s.checkpoint(1, b"decider", &[b"a record".to_vec()]).unwrap();
        let store = SharedStore::new(s);
        let config = Arc::new(Config::for_replay_defaults("gw"));
        let (stop_tx, stop) = watch::channel(false);
        let opened = newest_snapshot(tmp.path());
        let task =
            tokio::spawn(retention_loop(store.clone(), config, Telemetry::new(), stop.clone()));
        tokio::time::sleep(SLED_SNAPSHOT_EVERY - RETENTION_INTERVAL / 2).await;
        assert_eq!(newest_snapshot(tmp.path()), opened, "not yet");
        tokio::time::sleep(RETENTION_INTERVAL).await;
        let first = newest_snapshot(tmp.path());
        assert!(first > opened, "an hour: {opened:?} -> {first:?}");
        // An iterator out holds the next one back; it follows at the first check after.
        store.write().checkpoint(1, b"decider 2", &[b"another".to_vec()]).unwrap();
        let walk = store.read().outbox_pending();
        tokio::time::sleep(SLED_SNAPSHOT_EVERY + RETENTION_INTERVAL * 5).await;
        assert_eq!(newest_snapshot(tmp.path()), first, "held back by the walk");
        assert_eq!(walk.count(), 2);
        tokio::time::sleep(RETENTION_INTERVAL).await;
        assert!(newest_snapshot(tmp.path()) > first, "after the walk");
        assert_eq!(store.read().outbox_pending().count(), 2);
        stop_tx.send(true).unwrap();
        task.await.unwrap();
    }

    fn alert(machine: &str, evidence: &[(&str, i64)]) -> AlertRecord {
        let ev: Vec<_> = evidence
            .iter()
            .map(|(s, ts)| {
                serde_json::json!({"event_id": format!("{s}.{ts}"), "sensor": s, "seq": 1,
                    "ts_ms": ts, "value": 0.9, "unit": "g", "quality": "good",
                    "clock": {"state": "synced", "err_ms": 1}, "samples": null})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "alert_id": "a1", "revision": 0, "kind": "open", "machine": machine,
            "rule": "r", "onset_ms": 0, "end_ms": null, "evidence": ev, "also": [],
            "superseded_by": null, "caused_by": null, "watermark_ms": 0,
            "decided_at_ms": 0, "provisional": false
        }))
        .unwrap()
    }

    #[test]
    fn evidence_frames_and_recent_frames_are_protected() {
        let a = alert("m", &[("s1", 10_000), ("s1", 12_000)]);
        let wm = BTreeMap::from([("m".to_owned(), 100_000)]);
        let e = Evidence::new([&a], &wm, 30_000);
        // The evidence frames [9000, 10000) and [11000, 12000), and nothing else old.
        assert!(e.protects("m", "s1", 9_000, 10_000));
        assert!(e.protects("m", "s1", 9_999, 10_500));
        assert!(e.protects("m", "s1", 0, 20_000), "a long frame around the evidence");
        assert!(!e.protects("m", "s1", 10_000, 11_000), "between the evidence frames");
        assert!(!e.protects("m", "s1", 8_000, 9_000), "ends where evidence starts");
        assert!(!e.protects("m", "s2", 9_000, 10_000), "another sensor");
        assert!(!e.protects("n", "s1", 9_000, 10_000), "another machine");
        // Recent: ends after watermark - keep = 70 000.
        assert!(!e.protects("m", "s2", 69_000, 70_000));
        assert!(e.protects("m", "s2", 69_500, 70_500));
        assert!(!e.protects("n", "s2", 99_000, 100_000), "no watermark: not recent");
    }

    /// The retention stage's span, one per pass: the budget, what was pruned, the size found,
    /// and, over the budget, what was trimmed and shed.
    #[test]
    fn the_retention_span_names_the_budget_and_what_the_pass_did() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = Store::open(tmp.path(), crate::store::StoreOptions::default()).unwrap();
        s.append_journal(&[(1, b"a line".to_vec())]).unwrap();
        s.checkpoint(1, b"decider", &[]).unwrap();
        let store = SharedStore::new(s);
        let mut config = Config::for_replay_defaults("gw");
        config.store.max_bytes = 1;
        let telemetry = Telemetry::new();
        let (r, text) =
            crate::telemetry::captured::trace_of(|| enforce(&store, &config, &telemetry));
        assert!(r.unwrap().is_some_and(|report| report.triggered), "over a budget of 1 byte");
        assert!(text.contains("retention{max_bytes=1 pruned=0 size="), "{text}");
        assert!(text.contains(" trimmed=0 shed_frames=0}"), "nothing to trim or shed: {text}");
    }
}
