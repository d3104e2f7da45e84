//! The metric families: their names, help texts and labels, registered in one place so the list
//! reads like the README's "Metrics" table. `Metrics` (metrics.rs) is the handle that updates them.
//!
//! Names get the registry's `linegate_` prefix; counters get `_total` from the encoder. Help texts
//! are single lines without backslashes: the encoder writes them as they are.

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// A gauge holding a float (seconds, rates).
pub(super) type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// Label sets of one label each: the struct names the label set, the field the label.
macro_rules! one_label {
    ($($name:ident { $field:ident }),* $(,)?) => {$(
        #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
        pub(super) struct $name {
            pub(super) $field: String,
        }
    )*};
}

one_label! {
    MachineLabel { machine },
    SensorLabel { sensor },
    ReasonLabel { reason },
    KindLabel { kind },
    OriginLabel { origin },
    StateLabel { state },
    OutcomeLabel { outcome },
}

/// A sensor of a machine and one of its states (`live`, `idle`, `silent`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct SensorStateLabel {
    pub(super) machine: String,
    pub(super) sensor: String,
    pub(super) state: String,
}

/// A sensor of a machine (sensor names are unique per machine only).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct MachineSensorLabel {
    pub(super) machine: String,
    pub(super) sensor: String,
}

/// A label of something a rule decided (`key` = `value`: an alert kind, a part of the rule
/// state), preceded by `rule` when the gateway has several rules and it belongs to one of them.
/// With one rule the series keep the one label they always had.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct RuleScoped {
    pub(super) rule: Option<String>,
    pub(super) key: &'static str,
    pub(super) value: String,
}

impl EncodeLabelSet for RuleScoped {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> Result<(), std::fmt::Error> {
        let own = (self.key, self.value.as_str());
        match &self.rule {
            Some(rule) => [("rule", rule.as_str()), own].encode(encoder),
            None => [own].encode(encoder),
        }
    }
}

/// Every family, each a shared handle to what the registry encodes.
#[derive(Debug)]
pub(super) struct Families {
    pub(super) watermark: Family<MachineLabel, FloatGauge>,
    pub(super) lag: Family<MachineLabel, FloatGauge>,
    pub(super) watermark_bound: Family<MachineSensorLabel, FloatGauge>,
    pub(super) watermark_disorder: Family<MachineSensorLabel, FloatGauge>,
    pub(super) ingest_delay: Family<MachineSensorLabel, FloatGauge>,
    pub(super) records: Counter,
    pub(super) accepted: Counter,
    pub(super) duplicates: Counter,
    pub(super) late_applied: Counter,
    pub(super) too_late: Counter,
    pub(super) rejected: Family<ReasonLabel, Counter>,
    pub(super) events: Family<OriginLabel, Counter>,
    pub(super) samples_records: Counter,
    pub(super) ticks: Counter,
    pub(super) alert_records: Family<RuleScoped, Counter>,
    pub(super) rule_state: Family<RuleScoped, Gauge>,
    pub(super) rule_state_peak: Gauge,
    pub(super) processing_latency: Histogram,
    pub(super) journal_commit_latency: Histogram,
    pub(super) fsyncs: Counter,
    pub(super) outbox_records: Family<KindLabel, Gauge>,
    pub(super) outbox_bytes: Family<KindLabel, Gauge>,
    pub(super) replay_backlog: Gauge,
    pub(super) replay_drain_rate: FloatGauge,
    pub(super) replay_eta: FloatGauge,
    pub(super) broker_connected: Gauge,
    pub(super) broker_attempts: Counter,
    pub(super) broker_connects: Counter,
    pub(super) broker_disconnects: Counter,
    pub(super) broker_publishes: Counter,
    pub(super) broker_acknowledged: Counter,
    pub(super) broker_in_flight: Gauge,
    pub(super) sparkplug_online: Gauge,
    pub(super) sparkplug_messages: Family<KindLabel, Counter>,
    pub(super) sparkplug_historical: Counter,
    pub(super) sparkplug_held: Gauge,
    pub(super) store_bytes: Gauge,
    pub(super) clock_state: Family<StateLabel, Gauge>,
    pub(super) sensor_overruns: Family<SensorLabel, Counter>,
    pub(super) ledger_pruned: Counter,
    pub(super) history_trimmed: Counter,
    pub(super) sensor_last_event: Family<MachineSensorLabel, FloatGauge>,
    pub(super) sensor_state: Family<SensorStateLabel, Gauge>,
    pub(super) gaps_declared: Family<ReasonLabel, Counter>,
    pub(super) start_time: FloatGauge,
    pub(super) last_recovery: FloatGauge,
    pub(super) quarantine_records: Gauge,
    pub(super) quarantine_bytes: Gauge,
    pub(super) journal_undecided: Gauge,
    pub(super) catch_up_remaining: Gauge,
    pub(super) store_budget: Gauge,
    pub(super) allowed_lateness: FloatGauge,
    pub(super) control_requests: Family<OutcomeLabel, Counter>,
    pub(super) rule_info: Family<RuleLabel, Gauge>,
}

/// The rule's name and version.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RuleLabel {
    pub(super) name: String,
    pub(super) version: String,
}

/// Latency buckets from 0.5 ms to about 16 s, doubling: a decision or a group commit on a
/// Raspberry Pi's SD card spans that range.
pub(super) fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.0005, 2.0, 16)
}

impl Families {
    /// Every family, empty.
    pub(super) fn new() -> Self {
        Families {
            watermark: Family::default(),
            lag: Family::default(),
            watermark_bound: Family::default(),
            watermark_disorder: Family::default(),
            ingest_delay: Family::default(),
            records: Counter::default(),
            accepted: Counter::default(),
            duplicates: Counter::default(),
            late_applied: Counter::default(),
            too_late: Counter::default(),
            rejected: Family::default(),
            events: Family::default(),
            samples_records: Counter::default(),
            ticks: Counter::default(),
            alert_records: Family::default(),
            rule_state: Family::default(),
            rule_state_peak: Gauge::default(),
            processing_latency: Histogram::new(latency_buckets()),
            journal_commit_latency: Histogram::new(latency_buckets()),
            fsyncs: Counter::default(),
            outbox_records: Family::default(),
            outbox_bytes: Family::default(),
            replay_backlog: Gauge::default(),
            replay_drain_rate: FloatGauge::default(),
            replay_eta: FloatGauge::default(),
            broker_connected: Gauge::default(),
            broker_attempts: Counter::default(),
            broker_connects: Counter::default(),
            broker_disconnects: Counter::default(),
            broker_publishes: Counter::default(),
            broker_acknowledged: Counter::default(),
            broker_in_flight: Gauge::default(),
            sparkplug_online: Gauge::default(),
            sparkplug_messages: Family::default(),
            sparkplug_historical: Counter::default(),
            sparkplug_held: Gauge::default(),
            store_bytes: Gauge::default(),
            clock_state: Family::default(),
            sensor_overruns: Family::default(),
            ledger_pruned: Counter::default(),
            history_trimmed: Counter::default(),
            sensor_last_event: Family::default(),
            sensor_state: Family::default(),
            gaps_declared: Family::default(),
            start_time: FloatGauge::default(),
            last_recovery: FloatGauge::default(),
            quarantine_records: Gauge::default(),
            quarantine_bytes: Gauge::default(),
            journal_undecided: Gauge::default(),
            catch_up_remaining: Gauge::default(),
            store_budget: Gauge::default(),
            allowed_lateness: FloatGauge::default(),
            control_requests: Family::default(),
            rule_info: Family::default(),
        }
    }

    /// Registers every family under its name and help text. The registry keeps clones, which
    /// share their values with `self`.
    pub(super) fn register(&self, r: &mut Registry) {
        let f = self;
        r.register(
            "watermark_timestamp_seconds",
            "Machine watermark: event time (Unix seconds) up to which the machine's events are decided",
            f.watermark.clone(),
        );
        r.register("lag_seconds", "Ingest time minus the machine watermark", f.lag.clone());
        r.register(
            "watermark_bound_seconds",
            "Watermark bound now, per sensor: the configured value when fixed, the larger of the disorder and ingest-delay quantiles, clamped, when auto",
            f.watermark_bound.clone(),
        );
        r.register(
            "watermark_disorder_seconds",
            "Auto watermark: the measured quantile of disorder (newest event time seen minus an event's time), per sensor",
            f.watermark_disorder.clone(),
        );
        r.register(
            "ingest_delay_seconds",
            "Auto watermark: the measured quantile of ingest delay (ingest time minus event time), per sensor",
            f.ingest_delay.clone(),
        );
        r.register("records", "Arrivals decided (trace lines or live records)", f.records.clone());
        r.register(
            "accepted",
            "Events accepted: applied, late applied and too late",
            f.accepted.clone(),
        );
        r.register(
            "duplicates",
            "Events seen again with the same event_id and content: counted once",
            f.duplicates.clone(),
        );
        r.register(
            "late_applied",
            "Events behind the machine watermark but within allowed lateness: applied",
            f.late_applied.clone(),
        );
        r.register(
            "too_late",
            "Events behind the watermark by more than allowed lateness: kept, never applied",
            f.too_late.clone(),
        );
        r.register("rejected", "Records quarantined, by reason", f.rejected.clone());
        r.register(
            "events",
            "Events decided, by origin: received as events or derived from raw samples",
            f.events.clone(),
        );
        r.register("samples_records", "Raw samples records taken", f.samples_records.clone());
        r.register(
            "ticks",
            "Tick arrivals (ingest time passing without a record)",
            f.ticks.clone(),
        );
        r.register(
            "alert_records",
            "Alert records produced, by kind, and by rule when there are several",
            f.alert_records.clone(),
        );
        r.register(
            "rule_state_entries",
            "Rule state now, by part (machines, sensors, high events, incidents, members, remembered ids, open frames); with several rules high events, incidents and members by rule",
            f.rule_state.clone(),
        );
        r.register(
            "rule_state_peak_entries",
            "Largest rule state seen: high events, incident members, remembered ids and open frames",
            f.rule_state_peak.clone(),
        );
        r.register(
            "processing_latency_seconds",
            "Time from a record's arrival to its decision being committed",
            f.processing_latency.clone(),
        );
        r.register(
            "journal_commit_latency_seconds",
            "Duration of one journal group commit: write, flush and fsync",
            f.journal_commit_latency.clone(),
        );
        r.register(
            "fsyncs",
            "fsync calls made by the store (files and directories)",
            f.fsyncs.clone(),
        );
        r.register(
            "outbox_records",
            "Records waiting in the outbox for publication, by kind",
            f.outbox_records.clone(),
        );
        r.register(
            "outbox_bytes",
            "Bytes of the records waiting in the outbox, by kind",
            f.outbox_bytes.clone(),
        );
        r.register(
            "replay_backlog_records",
            "Backlog records still to be sent after an outage",
            f.replay_backlog.clone(),
        );
        r.register(
            "replay_drain_rate_records_per_second",
            "Rate at which the backlog is being sent",
            f.replay_drain_rate.clone(),
        );
        r.register(
            "replay_eta_seconds",
            "Estimated time until the backlog is sent: backlog over drain rate, +Inf while nothing drains",
            f.replay_eta.clone(),
        );
        r.register(
            "broker_connected",
            "1 while the MQTT session is up, else 0",
            f.broker_connected.clone(),
        );
        r.register(
            "broker_connect_attempts",
            "MQTT connection attempts, refused and failed ones included",
            f.broker_attempts.clone(),
        );
        r.register("broker_connects", "MQTT sessions established", f.broker_connects.clone());
        r.register("broker_disconnects", "MQTT sessions lost", f.broker_disconnects.clone());
        r.register(
            "broker_publishes",
            "MQTT PUBLISHes handed to the client (QoS 1; one may carry a batch of events)",
            f.broker_publishes.clone(),
        );
        r.register(
            "sparkplug_online",
            "1 while the Sparkplug B view is connected to the broker",
            f.sparkplug_online.clone(),
        );
        r.register(
            "sparkplug_messages",
            "Sparkplug B messages handed to the client, by type (NBIRTH, DBIRTH, DDATA, NDEATH)",
            f.sparkplug_messages.clone(),
        );
        r.register(
            "sparkplug_historical_values",
            "Sparkplug B metric values sent flagged is_historical",
            f.sparkplug_historical.clone(),
        );
        r.register(
            "sparkplug_held_records",
            "Outbox records the Sparkplug B view has not sent yet",
            f.sparkplug_held.clone(),
        );
        r.register(
            "broker_acknowledged",
            "MQTT PUBACKs received for PUBLISHes in flight",
            f.broker_acknowledged.clone(),
        );
        r.register(
            "broker_in_flight_publishes",
            "MQTT PUBLISHes awaiting their PUBACK now",
            f.broker_in_flight.clone(),
        );
        r.register(
            "store_disk_bytes",
            "Bytes the store's files take on disk",
            f.store_bytes.clone(),
        );
        r.register(
            "clock_state",
            "Gateway clock state: 1 for the current state, 0 for the others",
            f.clock_state.clone(),
        );
        r.register(
            "sensor_overruns",
            "Sensor FIFO overruns (samples lost in the sensor), by sensor",
            f.sensor_overruns.clone(),
        );
        r.register(
            "ledger_pruned_records",
            "Ledger records older than [store] history folded into the pruned summary",
            f.ledger_pruned.clone(),
        );
        r.register(
            "history_trimmed_records",
            "Journal records of the input's history removed early to keep [store] max_bytes",
            f.history_trimmed.clone(),
        );
        r.register(
            "sensor_last_event_timestamp_seconds",
            "Event time (Unix seconds) of the newest event accepted from the sensor",
            f.sensor_last_event.clone(),
        );
        r.register(
            "sensor_state",
            "Sensor state: 1 for the current one of live, idle (no record for idle_timeout) and silent (none for longer than allowed_lateness), 0 for the others",
            f.sensor_state.clone(),
        );
        r.register(
            "gaps_declared",
            "Gaps declared on gaps/{sensor} and in the ledger, by reason",
            f.gaps_declared.clone(),
        );
        r.register(
            "start_timestamp_seconds",
            "When this daemon process started (Unix seconds)",
            f.start_time.clone(),
        );
        r.register(
            "last_recovery_timestamp_seconds",
            "When this process last salvaged a damaged store at start (Unix seconds), 0 if it did not",
            f.last_recovery.clone(),
        );
        r.register(
            "quarantine_records",
            "Records kept in quarantine now",
            f.quarantine_records.clone(),
        );
        r.register(
            "quarantine_bytes",
            "Bytes the records kept in quarantine take in the store (original bytes and reason)",
            f.quarantine_bytes.clone(),
        );
        r.register(
            "journal_undecided_records",
            "Journal records written but not yet decided",
            f.journal_undecided.clone(),
        );
        r.register(
            "catch_up_remaining_records",
            "Journal records from before this start still to be decided again (0 once caught up)",
            f.catch_up_remaining.clone(),
        );
        r.register(
            "store_budget_bytes",
            "The store's size budget, [store] max_bytes",
            f.store_budget.clone(),
        );
        r.register(
            "allowed_lateness_seconds",
            "The configured [time] allowed_lateness: how far behind its machine's watermark an event may arrive and still be applied",
            f.allowed_lateness.clone(),
        );
        r.register(
            "rule_info",
            "The rule deciding now: its configured name and rule_version, value 1",
            f.rule_info.clone(),
        );
        r.register(
            "control_requests",
            "Requests on the control socket, by outcome (ok, failed, refused, malformed, busy, timeout)",
            f.control_requests.clone(),
        );
    }
}
