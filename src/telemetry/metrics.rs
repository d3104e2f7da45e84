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
use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::families::{
    Families, KindLabel, MachineLabel, MachineSensorLabel, OriginLabel, OutcomeLabel, ReasonLabel,
    RuleLabel, RuleScoped, SensorLabel, SensorStateLabel, StateLabel,
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

/// The parts of the rule state each rule holds its own of; the other parts are shared.
const RULE_PARTS: [&str; 3] = ["high_events", "incidents", "members"];

/// The label of alert kind `kind`, of `rule` when there are several rules.
fn alert_kind(rule: Option<&str>, kind: &str) -> RuleScoped {
    RuleScoped { rule: rule.map(str::to_owned), key: "kind", value: kind.to_owned() }
}

/// The label of rule state part `part`, of `rule` when it is one rule's of several.
fn state_part(rule: Option<&str>, part: &str) -> RuleScoped {
    RuleScoped { rule: rule.map(str::to_owned), key: "part", value: part.to_owned() }
}

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

/// The Sparkplug B view as its counters say it (`crate::sparkplug::STATS`): totals since the
/// process started, and the records it holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SparkplugState {
    pub online: bool,
    pub nbirth: u64,
    pub dbirth: u64,
    pub ddata: u64,
    pub ndeath: u64,
    pub historical: u64,
    pub held: u64,
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
    /// The rules named by [`Metrics::set_rule`], in that order: with several, what a rule
    /// decided carries its `rule` label.
    rules: Mutex<Vec<String>>,
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
            drop(i.alert_records.get_or_create(&alert_kind(None, kind)));
        }
        for kind in OutboxKind::ALL {
            let label = KindLabel { kind: kind.as_str().to_owned() };
            drop(i.outbox_records.get_or_create(&label));
            drop(i.outbox_bytes.get_or_create(&label));
        }
        let metrics =
            Metrics { inner: Arc::new(Inner { registry, families, rules: Mutex::default() }) };
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

    /// `auto`: each sensor's measured disorder and ingest-delay quantiles (ms), as
    /// `Decider::measured_delays` yields them, published in seconds (none before a measurement).
    pub fn set_measured_delays<'a>(
        &self,
        measured: impl IntoIterator<Item = (&'a str, &'a str, Option<i64>, Option<i64>)>,
    ) {
        let f = &self.inner.families;
        for (machine, sensor, disorder, delay) in measured {
            let label =
                MachineSensorLabel { machine: machine.to_owned(), sensor: sensor.to_owned() };
            for (family, ms) in [(&f.watermark_disorder, disorder), (&f.ingest_delay, delay)] {
                if let Some(ms) = ms {
                    family.get_or_create(&label).set(milliseconds_to_seconds(ms));
                }
            }
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
        if self.several_rules() {
            for (rule, by_kind) in &counts.alerts_by_rule {
                for (kind, &n) in by_kind {
                    raise_to(&i.alert_records.get_or_create(&alert_kind(Some(rule), kind)), n);
                }
            }
        } else {
            for (kind, &n) in &counts.alerts {
                raise_to(&i.alert_records.get_or_create(&alert_kind(None, kind)), n);
            }
        }
        gauge_from_u64(&i.rule_state_peak, counts.peak_state);
    }

    /// The rule state now (`Engine::state_size`), the open frames of the frame cutter, and each
    /// rule's part of it (`Engine::rule_sizes`). With several rules, high events, incidents and
    /// members are published per rule (`rule` label) and not in total; with one, in total.
    pub fn set_rule_states(
        &self,
        size: &StateSize,
        open_frames: usize,
        rules: &[(&str, StateSize)],
    ) {
        let family = &self.inner.families.rule_state;
        let set =
            |label: RuleScoped, n: usize| gauge_from_u64(&family.get_or_create(&label), n as u64);
        let shared = [
            ("machines", size.machines),
            ("sensors", size.sensors),
            ("dedup_ids", size.dedup_ids),
            ("open_frames", open_frames),
        ];
        for (part, n) in shared {
            set(state_part(None, part), n);
        }
        let own = |s: &StateSize| [s.high_events, s.incidents, s.members];
        if rules.len() > 1 {
            for part in RULE_PARTS {
                family.remove(&state_part(None, part));
            }
            for (rule, s) in rules {
                for (part, n) in RULE_PARTS.into_iter().zip(own(s)) {
                    set(state_part(Some(rule), part), n);
                }
            }
        } else {
            for (part, n) in RULE_PARTS.into_iter().zip(own(size)) {
                set(state_part(None, part), n);
            }
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

    /// The Sparkplug B view's counters.
    pub fn set_sparkplug(&self, s: &SparkplugState) {
        let i = &self.inner.families;
        i.sparkplug_online.set(i64::from(s.online));
        for (kind, n) in [("NBIRTH", s.nbirth), ("DBIRTH", s.dbirth), ("DDATA", s.ddata)]
            .into_iter()
            .chain([("NDEATH", s.ndeath)])
        {
            let label = KindLabel { kind: kind.to_owned() };
            raise_to(&i.sparkplug_messages.get_or_create(&label), n);
        }
        raise_to(&i.sparkplug_historical, s.historical);
        gauge_from_u64(&i.sparkplug_held, s.held);
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

    /// A rule deciding now (`linegate_rule_info{name,version} 1`, one series per rule). Once
    /// there are several, the alert records counted are published per rule, every kind of each
    /// at 0 from the start.
    pub fn set_rule(&self, name: &str, version: &str) {
        let f = &self.inner.families;
        let label = RuleLabel { name: name.to_owned(), version: version.to_owned() };
        f.rule_info.get_or_create(&label).set(1);
        let mut rules = self.inner.rules.lock().unwrap_or_else(|e| e.into_inner());
        if !rules.iter().any(|r| r == name) {
            rules.push(name.to_owned());
        }
        if rules.len() > 1 {
            for kind in ALERT_KINDS {
                f.alert_records.remove(&alert_kind(None, kind));
                for rule in rules.iter() {
                    drop(f.alert_records.get_or_create(&alert_kind(Some(rule), kind)));
                }
            }
        }
    }

    /// Whether [`Metrics::set_rule`] named several rules.
    fn several_rules(&self) -> bool {
        self.inner.rules.lock().unwrap_or_else(|e| e.into_inner()).len() > 1
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
    fn measured_disorder_and_delay_are_per_sensor_in_seconds_once_measured() {
        let m = Metrics::new();
        m.set_measured_delays([
            ("press-7", "s1", Some(0), Some(32_767)),
            ("press-7", "s2", None, None),
        ]);
        assert!(has(
            &m,
            "linegate_watermark_disorder_seconds{machine=\"press-7\",sensor=\"s1\"} 0.0"
        ));
        assert!(has(&m, "linegate_ingest_delay_seconds{machine=\"press-7\",sensor=\"s1\"} 32.767"));
        assert!(!text(&m).contains("sensor=\"s2\""), "nothing measured yet: no series");
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
    fn with_one_rule_its_state_and_alerts_carry_no_rule_label() {
        let m = Metrics::new();
        m.set_rule("high-vibration", "v1");
        let mut c = Counts::default();
        c.alerts.insert("open".into(), 2);
        m.apply_counts(&c);
        let size = StateSize { high_events: 5, incidents: 1, members: 3, ..StateSize::default() };
        m.set_rule_states(&size, 0, &[("high-vibration", size)]);
        let t = text(&m);
        assert!(has(&m, "linegate_alert_records_total{kind=\"open\"} 2"), "{t}");
        assert!(has(&m, "linegate_rule_state_entries{part=\"high_events\"} 5"), "{t}");
        assert!(!t.contains("rule=\""), "{t}");
    }

    #[test]
    fn with_two_rules_each_rules_state_and_alerts_carry_its_label() {
        let m = Metrics::new();
        m.set_rule("zone-c", "v1");
        m.set_rule("bearing", "v2");
        let t = text(&m);
        // Every kind of each rule at 0 from the start, and no series without the rule.
        for rule in ["zone-c", "bearing"] {
            for kind in ALERT_KINDS {
                let line =
                    format!("linegate_alert_records_total{{rule=\"{rule}\",kind=\"{kind}\"}} 0");
                assert!(has(&m, &line), "{line}\n{t}");
            }
        }
        assert!(!t.contains("linegate_alert_records_total{kind="), "{t}");

        let mut c = Counts::default();
        c.alerts.insert("open".into(), 3);
        c.alerts_by_rule.insert("zone-c".into(), [("open".to_owned(), 2)].into());
        c.alerts_by_rule.insert("bearing".into(), [("open".to_owned(), 1)].into());
        m.apply_counts(&c);
        let zone_c = StateSize { high_events: 4, incidents: 1, members: 3, ..StateSize::default() };
        let bearing =
            StateSize { high_events: 7, incidents: 2, members: 6, ..StateSize::default() };
        let total = StateSize {
            machines: 2,
            sensors: 5,
            high_events: 11,
            incidents: 3,
            members: 9,
            dedup_ids: 40,
        };
        // A state of one rule first (as before a switch): its totals go once there are two.
        m.set_rule_states(&total, 1, &[("zone-c", zone_c)]);
        m.set_rule_states(&total, 1, &[("zone-c", zone_c), ("bearing", bearing)]);
        let t = text(&m);
        for line in [
            "linegate_alert_records_total{rule=\"zone-c\",kind=\"open\"} 2",
            "linegate_alert_records_total{rule=\"bearing\",kind=\"open\"} 1",
            "linegate_rule_state_entries{rule=\"zone-c\",part=\"high_events\"} 4",
            "linegate_rule_state_entries{rule=\"zone-c\",part=\"members\"} 3",
            "linegate_rule_state_entries{rule=\"bearing\",part=\"high_events\"} 7",
            "linegate_rule_state_entries{rule=\"bearing\",part=\"incidents\"} 2",
            "linegate_rule_state_entries{part=\"machines\"} 2",
            "linegate_rule_state_entries{part=\"dedup_ids\"} 40",
            "linegate_rule_state_entries{part=\"open_frames\"} 1",
        ] {
            assert!(has(&m, line), "{line}\n{t}");
        }
        for part in RULE_PARTS {
            let total = format!("linegate_rule_state_entries{{part=\"{part}\"}}");
            assert!(!t.contains(&total), "{total} beside the rules' own:\n{t}");
        }
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
