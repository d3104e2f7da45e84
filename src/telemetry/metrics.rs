//! The daemon's metrics: one [`Metrics`] handle that every stage updates through typed methods,
//! and that the `/metrics` endpoint encodes (see `exposition` for the text format).
//!
//! Built on `prometheus-client`. Every family is registered up front, and every fixed label value
//! (rejection reasons, alert kinds, outbox kinds, clock states) is created at 0, so a dashboard
//! sees the whole set from the first scrape. Label values that come from data (machine and sensor
//! names) appear once a stage reports them. Units are Prometheus base units and are part of the
//! names: seconds, bytes, records.
//!
//! The README's "Metrics" section lists every family; `tests/metrics_promtool.rs` checks the real
//! output with `promtool check metrics`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::families::{
    Families, KindLabel, MachineLabel, MachineSensorLabel, OriginLabel, OutcomeLabel, PartLabel,
    ReasonLabel, RuleLabel, SensorLabel, SensorStateLabel, StateLabel,
};

use crate::event::rejection::Reason;
use crate::event::ClockState;
use crate::records::counts::Counts;
use crate::records::outbox::OutboxRecord;
use crate::rule::StateSize;

/// What an outbox record is, as the `kind` label of the outbox depth gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OutboxKind {
    Alert,
    Event,
    Samples,
    Gap,
}

impl OutboxKind {
    pub const ALL: [OutboxKind; 4] =
        [OutboxKind::Alert, OutboxKind::Event, OutboxKind::Samples, OutboxKind::Gap];

    pub fn of(record: &OutboxRecord) -> OutboxKind {
        match record {
            OutboxRecord::Alert { .. } => OutboxKind::Alert,
            OutboxRecord::Event { .. } => OutboxKind::Event,
            OutboxRecord::Samples { .. } => OutboxKind::Samples,
            OutboxRecord::Gap(_) => OutboxKind::Gap,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OutboxKind::Alert => "alert",
            OutboxKind::Event => "event",
            OutboxKind::Samples => "samples",
            OutboxKind::Gap => "gap",
        }
    }
}

/// Every clock state with its label value (`linegate_clock_state{state}`).
const CLOCK_STATES: [(ClockState, &str); 5] = [
    (ClockState::Synced, "synced"),
    (ClockState::Holdover, "holdover"),
    (ClockState::Unsynced, "unsynced"),
    (ClockState::Stepped, "stepped"),
    (ClockState::Unknown, "unknown"),
];

/// The alert record kinds counted in `Counts::alerts`.
const ALERT_KINDS: [&str; 4] = ["open", "amend", "close", "supersede"];

/// The MQTT forwarder as its counters say it: totals since the process started (what
/// [`super::ForwardStats`] holds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BrokerState {
    /// A session is up (ConnAck received, not lost since).
    pub connected: bool,
    pub attempts: u64,
    pub connects: u64,
    pub disconnects: u64,
    pub publishes: u64,
    pub acknowledged: u64,
    pub in_flight: u64,
}

/// The handle the stages update and the endpoint encodes. Cheap to clone: all clones share the
/// same registry.
#[derive(Clone, Debug)]
pub struct Metrics {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    registry: Registry,
    families: Families,
}

fn milliseconds_to_seconds(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

/// Raises a counter to `value` (the decider's counts are totals; a counter never goes back).
fn raise_to(counter: &Counter, value: u64) {
    counter.inner().fetch_max(value, Ordering::Relaxed);
}

fn gauge_from_u64(gauge: &Gauge, value: u64) {
    gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every family registered and every fixed label value at 0.
    pub fn new() -> Self {
        let families = Families::new();
        let mut registry = Registry::with_prefix("linegate");
        families.register(&mut registry);
        let i = &families;
        for reason in Reason::ALL {
            drop(i.rejected.get_or_create(&ReasonLabel { reason: reason.as_str().to_owned() }));
        }
        for origin in ["received", "derived"] {
            drop(i.events.get_or_create(&OriginLabel { origin: origin.to_owned() }));
        }
        for kind in ALERT_KINDS {
            drop(i.alert_records.get_or_create(&KindLabel { kind: kind.to_owned() }));
        }
        for kind in OutboxKind::ALL {
            let label = KindLabel { kind: kind.as_str().to_owned() };
            drop(i.outbox_records.get_or_create(&label));
            drop(i.outbox_bytes.get_or_create(&label));
        }
        let metrics = Metrics { inner: Arc::new(Inner { registry, families }) };
        // Unknown until the clock stage says otherwise.
        metrics.set_clock_state(ClockState::Unknown);
        metrics
    }

    /// The registry, for the text encoder.
    pub(super) fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// One machine's watermark (event time, Unix milliseconds) and its lag behind ingest time
    /// (`ingest_ms - watermark_ms`), both published in seconds.
    pub fn set_machine_time(&self, machine: &str, ingest_ms: i64, watermark_ms: i64) {
        let label = MachineLabel { machine: machine.to_owned() };
        self.inner
            .families
            .watermark
            .get_or_create(&label)
            .set(milliseconds_to_seconds(watermark_ms));
        let lag = milliseconds_to_seconds(ingest_ms.saturating_sub(watermark_ms));
        self.inner.families.lag.get_or_create(&label).set(lag);
    }

    /// Every machine's watermark at ingest time `ingest_ms`, as `Decider::watermarks` yields them;
    /// a machine without a watermark yet is skipped.
    pub fn set_watermarks<'a>(
        &self,
        ingest_ms: i64,
        watermarks: impl IntoIterator<Item = (&'a str, Option<i64>)>,
    ) {
        for (machine, wm) in watermarks {
            if let Some(wm) = wm {
                self.set_machine_time(machine, ingest_ms, wm);
            }
        }
    }

    /// Each sensor's watermark bound (ms), as `Decider::bounds` yields them, published in
    /// seconds.
    pub fn set_watermark_bounds<'a>(
        &self,
        bounds: impl IntoIterator<Item = (&'a str, &'a str, i64)>,
    ) {
        for (machine, sensor, bound_ms) in bounds {
            let label =
                MachineSensorLabel { machine: machine.to_owned(), sensor: sensor.to_owned() };
            self.inner
                .families
                .watermark_bound
                .get_or_create(&label)
                .set(milliseconds_to_seconds(bound_ms));
        }
    }

    /// Sets the decision counters from the decider's counts. They are totals since the store was
    /// created (the counts travel in the checkpoint), so the counters start where the last run
    /// stopped; a counter is never lowered.
    pub fn apply_counts(&self, counts: &Counts) {
        let i = &self.inner.families;
        raise_to(&i.records, counts.records);
        raise_to(&i.accepted, counts.accepted);
        raise_to(&i.duplicates, counts.duplicates);
        raise_to(&i.late_applied, counts.late_applied);
        raise_to(&i.too_late, counts.too_late);
        raise_to(&i.samples_records, counts.samples_records);
        raise_to(&i.ticks, counts.ticks);
        for (origin, n) in
            [("received", counts.events_received), ("derived", counts.events_derived)]
        {
            raise_to(&i.events.get_or_create(&OriginLabel { origin: origin.to_owned() }), n);
        }
        for (reason, &n) in &counts.quarantined {
            raise_to(&i.rejected.get_or_create(&ReasonLabel { reason: reason.clone() }), n);
        }
        for (kind, &n) in &counts.alerts {
            raise_to(&i.alert_records.get_or_create(&KindLabel { kind: kind.clone() }), n);
        }
        gauge_from_u64(&i.rule_state_peak, counts.peak_state);
    }

    /// The rule's state now (`Engine::state_size`) and the open frames of the frame cutter.
    pub fn set_rule_state(&self, size: &StateSize, open_frames: usize) {
        let parts = [
            ("machines", size.machines),
            ("sensors", size.sensors),
            ("high_events", size.high_events),
            ("incidents", size.incidents),
            ("members", size.members),
            ("dedup_ids", size.dedup_ids),
            ("open_frames", open_frames),
        ];
        for (part, n) in parts {
            let gauge =
                self.inner.families.rule_state.get_or_create(&PartLabel { part: part.to_owned() });
            gauge_from_u64(&gauge, n as u64);
        }
    }

    /// Time from a record's arrival at the gateway to its decision being committed.
    pub fn observe_processing_latency(&self, seconds: f64) {
        self.inner.families.processing_latency.observe(seconds);
    }

    /// How long one journal group commit (write, flush and fsync) took.
    pub fn observe_journal_commit(&self, seconds: f64) {
        self.inner.families.journal_commit_latency.observe(seconds);
    }

    /// The store has made `total` fsync calls so far (files and directories).
    pub fn set_fsyncs(&self, total: u64) {
        raise_to(&self.inner.families.fsyncs, total);
    }

    /// Records and bytes of one kind waiting in the outbox.
    pub fn set_outbox(&self, kind: OutboxKind, records: u64, bytes: u64) {
        let label = KindLabel { kind: kind.as_str().to_owned() };
        gauge_from_u64(&self.inner.families.outbox_records.get_or_create(&label), records);
        gauge_from_u64(&self.inner.families.outbox_bytes.get_or_create(&label), bytes);
    }

    /// Replay of the backlog after an outage: records remaining and the measured drain rate.
    /// The ETA is `backlog / rate`: 0 with nothing left, +Inf while records remain and nothing
    /// drains (the broker is away).
    pub fn set_replay_progress(&self, backlog_records: u64, drain_rate_per_s: f64) {
        let i = &self.inner.families;
        gauge_from_u64(&i.replay_backlog, backlog_records);
        let rate = if drain_rate_per_s.is_finite() { drain_rate_per_s.max(0.0) } else { 0.0 };
        i.replay_drain_rate.set(rate);
        let eta = match (backlog_records, rate > 0.0) {
            (0, _) => 0.0,
            (n, true) => n as f64 / rate,
            (_, false) => f64::INFINITY,
        };
        i.replay_eta.set(eta);
    }

    /// The MQTT forwarder's state and counters.
    pub fn set_broker(&self, b: &BrokerState) {
        let i = &self.inner.families;
        i.broker_connected.set(i64::from(b.connected));
        raise_to(&i.broker_attempts, b.attempts);
        raise_to(&i.broker_connects, b.connects);
        raise_to(&i.broker_disconnects, b.disconnects);
        raise_to(&i.broker_publishes, b.publishes);
        raise_to(&i.broker_acknowledged, b.acknowledged);
        gauge_from_u64(&i.broker_in_flight, b.in_flight);
    }

    /// Bytes the store's files take on disk.
    pub fn set_store_bytes(&self, bytes: u64) {
        gauge_from_u64(&self.inner.families.store_bytes, bytes);
    }

    /// The gateway's clock state: its gauge is 1, every other state's 0.
    pub fn set_clock_state(&self, current: ClockState) {
        for (state, label) in CLOCK_STATES {
            let gauge = self
                .inner
                .families
                .clock_state
                .get_or_create(&StateLabel { state: label.to_owned() });
            gauge.set(i64::from(state == current));
        }
    }

    /// `n` sample FIFO overruns (samples lost in the sensor) on `sensor`; with `n = 0` the
    /// sensor's counter appears at 0.
    pub fn sensor_overruns(&self, sensor: &str, n: u64) {
        self.inner
            .families
            .sensor_overruns
            .get_or_create(&SensorLabel { sensor: sensor.to_owned() })
            .inc_by(n);
    }

    /// Ledger records retention folded into the pruned summary.
    pub fn ledger_pruned(&self, n: u64) {
        self.inner.families.ledger_pruned.inc_by(n);
    }

    /// History records retention trimmed to keep the budget (`store/history.rs`).
    pub fn history_trimmed(&self, n: u64) {
        self.inner.families.history_trimmed.inc_by(n);
    }

    /// A request on the control socket ended with `outcome` (ok, failed, malformed, busy,
    /// timeout).
    pub fn control_request(&self, outcome: &str) {
        let f = &self.inner.families;
        f.control_requests.get_or_create(&OutcomeLabel { outcome: outcome.to_owned() }).inc();
    }

    /// A sensor's state now (its gauge 1, the other states' 0) and its last event time (ms;
    /// `None`: never heard from, the gauge is not set).
    pub fn set_sensor(&self, machine: &str, sensor: &str, state: &str, last_ts_ms: Option<i64>) {
        let f = &self.inner.families;
        for s in ["live", "idle", "silent"] {
            let label = SensorStateLabel {
                machine: machine.to_owned(),
                sensor: sensor.to_owned(),
                state: s.to_owned(),
            };
            f.sensor_state.get_or_create(&label).set(i64::from(s == state));
        }
        if let Some(ts) = last_ts_ms {
            let label =
                MachineSensorLabel { machine: machine.to_owned(), sensor: sensor.to_owned() };
            f.sensor_last_event.get_or_create(&label).set(ts as f64 / 1000.0);
        }
    }

    /// `n` gaps declared for `reason`.
    pub fn gaps_declared(&self, reason: &str, n: u64) {
        let f = &self.inner.families;
        f.gaps_declared.get_or_create(&ReasonLabel { reason: reason.to_owned() }).inc_by(n);
    }

    /// When this process started, and when it salvaged a damaged store at its start (if it did).
    pub fn set_start(&self, started_ms: i64, recovered: bool) {
        let f = &self.inner.families;
        f.start_time.set(started_ms as f64 / 1000.0);
        if recovered {
            f.last_recovery.set(started_ms as f64 / 1000.0);
        }
    }

    /// The configured budget and allowed lateness.
    pub fn set_limits(&self, store_budget_bytes: u64, allowed_lateness_ms: i64) {
        let f = &self.inner.families;
        gauge_from_u64(&f.store_budget, store_budget_bytes);
        f.allowed_lateness.set(allowed_lateness_ms as f64 / 1000.0);
    }

    /// A rule deciding now (`linegate_rule_info{name,version} 1`, one series per rule).
    pub fn set_rule(&self, name: &str, version: &str) {
        let label = RuleLabel { name: name.to_owned(), version: version.to_owned() };
        self.inner.families.rule_info.get_or_create(&label).set(1);
    }

    /// Records and original bytes in quarantine.
    pub fn set_quarantine(&self, records: u64, bytes: u64) {
        let f = &self.inner.families;
        gauge_from_u64(&f.quarantine_records, records);
        gauge_from_u64(&f.quarantine_bytes, bytes);
    }

    /// Journal records written and not yet decided.
    pub fn set_journal_undecided(&self, records: u64) {
        gauge_from_u64(&self.inner.families.journal_undecided, records);
    }

    /// Journal records from before this start still to decide (0 once caught up).
    pub fn set_catch_up_remaining(&self, records: u64) {
        gauge_from_u64(&self.inner.families.catch_up_remaining, records);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(m: &Metrics) -> String {
        super::super::exposition::encode(m).unwrap()
    }

    fn has(m: &Metrics, sample: &str) -> bool {
        text(m).lines().any(|l| l == sample)
    }

    #[test]
    fn counts_raise_counters_and_never_lower_them() {
        let m = Metrics::new();
        let mut c = Counts { records: 10, duplicates: 2, ..Counts::default() };
        c.quarantined.insert("oversized".into(), 3);
        m.apply_counts(&c);
        assert!(has(&m, "linegate_records_total 10"));
        assert!(has(&m, "linegate_rejected_total{reason=\"oversized\"} 3"));
        // Counts restored from an older checkpoint: the counters stay where they were.
        m.apply_counts(&Counts { records: 4, ..Counts::default() });
        assert!(has(&m, "linegate_records_total 10"));
        assert!(has(&m, "linegate_duplicates_total 2"));
    }

    #[test]
    fn replay_eta_is_zero_when_done_and_infinite_when_stalled() {
        let m = Metrics::new();
        m.set_replay_progress(0, 0.0);
        assert!(has(&m, "linegate_replay_eta_seconds 0.0"));
        m.set_replay_progress(10, 0.0);
        assert!(has(&m, "linegate_replay_eta_seconds +Inf"), "{}", text(&m));
        m.set_replay_progress(10, f64::NAN);
        assert!(has(&m, "linegate_replay_drain_rate_records_per_second 0.0"));
        m.set_replay_progress(10, 4.0);
        assert!(has(&m, "linegate_replay_eta_seconds 2.5"));
    }

    #[test]
    fn broker_state_follows_the_forwarder_and_counters_never_go_back() {
        let m = Metrics::new();
        assert!(has(&m, "linegate_broker_connected 0"));
        let up = BrokerState {
            connected: true,
            attempts: 3,
            connects: 1,
            publishes: 40,
            acknowledged: 38,
            in_flight: 2,
            ..BrokerState::default()
        };
        m.set_broker(&up);
        for line in [
            "linegate_broker_connected 1",
            "linegate_broker_connect_attempts_total 3",
            "linegate_broker_publishes_total 40",
            "linegate_broker_acknowledged_total 38",
            "linegate_broker_in_flight_publishes 2",
        ] {
            assert!(has(&m, line), "{line}\n{}", text(&m));
        }
        m.set_broker(&BrokerState { disconnects: 1, ..BrokerState::default() });
        assert!(has(&m, "linegate_broker_connected 0"));
        assert!(has(&m, "linegate_broker_disconnects_total 1"));
        assert!(has(&m, "linegate_broker_acknowledged_total 38"));
        assert!(has(&m, "linegate_broker_in_flight_publishes 0"));
    }

    #[test]
    fn fsyncs_follow_the_store_total() {
        let m = Metrics::new();
        m.set_fsyncs(7);
        m.set_fsyncs(5);
        assert!(has(&m, "linegate_fsyncs_total 7"));
    }

    #[test]
    fn exactly_one_clock_state_is_set() {
        let m = Metrics::new();
        assert!(has(&m, "linegate_clock_state{state=\"unknown\"} 1"));
        m.set_clock_state(ClockState::Holdover);
        let t = text(&m);
        let ones: Vec<_> = t
            .lines()
            .filter(|l| l.starts_with("linegate_clock_state{") && l.ends_with(" 1"))
            .collect();
        assert_eq!(ones, ["linegate_clock_state{state=\"holdover\"} 1"]);
    }

    #[test]
    fn watermark_bounds_are_per_sensor_in_seconds_and_follow_the_rule() {
        let m = Metrics::new();
        m.set_watermark_bounds([("press-7", "s1", 1_000), ("press-7", "s2", 5_000)]);
        assert!(has(&m, "linegate_watermark_bound_seconds{machine=\"press-7\",sensor=\"s1\"} 1.0"));
        m.set_watermark_bounds([("press-7", "s1", 2_399)]);
        let t = text(&m);
        assert!(
            has(&m, "linegate_watermark_bound_seconds{machine=\"press-7\",sensor=\"s1\"} 2.399"),
            "{t}"
        );
        assert!(
            has(&m, "linegate_watermark_bound_seconds{machine=\"press-7\",sensor=\"s2\"} 5.0"),
            "{t}"
        );
    }

    #[test]
    fn outbox_kinds_follow_the_records() {
        let alert = OutboxRecord::Alert {
            machine: "m".into(),
            alert_id: "a".into(),
            revision: 0,
            json: Vec::new(),
        };
        assert_eq!(OutboxKind::of(&alert), OutboxKind::Alert);
        let names: Vec<_> = OutboxKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, ["alert", "event", "samples", "gap"]);
    }
}
