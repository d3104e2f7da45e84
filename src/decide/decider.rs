//! The decider: parsed trace lines, one at a time, through feature extraction and the rule.
//! Pure like the cores it drives — ingest time comes from each line's `at` — and snapshot-able,
//! so a checkpoint can stop it after any line and a restored one continues byte for byte.
//!
//! For each line: ingest time advances to its `at` (stalled sensors' open frames are flushed and
//! decided at the ingest time each became due, in that order); then what the line carries is
//! decided. A rejected line whose `at` can be read still advances ingest time.
//!
//! With [`Decider::reporting`] it also reports, per event decided (received or derived), what
//! the ledger and the outbox need: [`Outcome`]s, taken with [`Decider::take_outcomes`], or all of
//! one journal record's decisions at once with [`Decider::record`] ([`Decided`], which
//! `super::outputs` maps to records). `replay` does not ask for them, so its output and speed do
//! not change.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::assets::{self, IsoClass, MachineAsset, Zone};
use crate::config::Config;
use crate::event::features::Feature;
use crate::event::rejection::{Reason, Rejection};
use crate::event::{Event, Metric};
use crate::features;
use crate::records::counts::Counts;
use crate::records::journal::{JournalRecord, Origin};
use crate::records::ledger::Acceptance;
use crate::records::ledger::RuleTouch;
use crate::records::snapshot::SnapshotError;
use crate::rule::alert::{AlertKind, AlertRecord};
use crate::rule::{Engine, Params, StateSize, Verdict};
use crate::stamp::{FrameCutter, FrameParams, MachineFeatures};
use crate::trace::parse::parse_line_and_event_span;
use crate::trace::{Arrival, TraceLine};
use crate::trend::TrendBook;

use super::input::ParsedLine;

/// A line that was rejected: its ingest time when it could be read, and why.
pub type LineError = (Option<i64>, Rejection);

/// What happened to one event that was not rejected (rejections are returned by
/// [`Decider::line`] or [`Decider::take_rejected_derived`]). `derived`: cut from raw samples.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `counted`: applied and counting for the rule (a member of an incident when it lies in
    /// one).
    /// `event`: the event when it was derived from raw samples; `None` for the event of the
    /// line handed to [`Decider::line`], which the caller holds already (no copy per event).
    /// `zone`: the ISO 20816-3 zone of the event's velocity (its `value` when its metric is
    /// `velocity_rms`, else `features.velocity_rms`) for a machine whose asset entry gives an ISO
    /// class; `None` otherwise.
    Accepted {
        event: Option<Event>,
        how: Acceptance,
        derived: bool,
        counted: bool,
        zone: Option<Zone>,
        /// The rules that counted it, with the incident it joined in each, and its machine's
        /// watermark right after it: the ledger's account of the transition.
        rules: Vec<RuleTouch>,
        watermark_ms: Option<i64>,
    },
    Duplicate {
        event_id: String,
        derived: bool,
    },
}

/// Everything one journal record decided ([`Decider::record`]), in the order it was decided,
/// for the outputs mapping (`super::outputs::Pending::add`).
#[derive(Debug)]
pub struct Decided {
    /// The record's ingest time as decided: its line's `at`, or the record's own when the line
    /// has none (or when it was released from quarantine).
    pub at: i64,
    /// The line's parse (a line's own accepted event is taken out of it by the mapping).
    pub parsed: Result<TraceLine, LineError>,
    /// Where the line's event is in the line, when the parser said.
    pub event_span: Option<std::ops::Range<usize>>,
    /// The line's own verdict: `Err` when it was rejected.
    pub result: Result<(), LineError>,
    /// Each event decided, received or derived.
    pub outcomes: Vec<Outcome>,
    /// Derived events the rule rejected.
    pub rejected_derived: Vec<(Event, Rejection)>,
    /// Alert records raised.
    pub alerts: Vec<AlertRecord>,
}

#[derive(Debug, Clone)]
pub struct Decider {
    engine: Engine,
    cutter: FrameCutter,
    counts: Counts,
    now: i64,
    derived: Vec<Event>,
    /// Derived events the rule rejected since the last `take_rejected_derived`.
    rejected_derived: Vec<(Event, Rejection)>,
    /// Outcomes since the last `take_outcomes`, when reporting.
    outcomes: Option<Vec<Outcome>>,
    /// The ISO class of each machine whose asset entry gives one (configuration, not state).
    iso: BTreeMap<String, IsoClass>,
    /// Per machine, its accepted event with a velocity of the latest `ts_ms`: `(ts_ms, mm/s)`.
    velocities: BTreeMap<String, (i64, f64)>,
    /// Each rule's measurement of every accepted event, for the status page's trends, when kept
    /// ([`Decider::keeping_trends`]); not part of the snapshot.
    trends: Option<TrendBook>,
}

/// What a snapshot holds: the cores' own snapshots, ingest time and the counts.
#[derive(Serialize, Deserialize)]
struct Saved {
    now: i64,
    counts: Counts,
    // Byte strings (snapshots written before held arrays of numbers, which still decode).
    #[serde(with = "serde_bytes")]
    engine: Vec<u8>,
    #[serde(with = "serde_bytes")]
    cutter: Vec<u8>,
    /// Absent in snapshots written before it existed, and when no velocity was seen.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    velocities: BTreeMap<String, (i64, f64)>,
}

fn frame_params(config: &Config) -> FrameParams {
    FrameParams {
        gateway: config.gateway.id.clone(),
        // Derived events carry the rule's metric where samples can give it.
        metric: match config.rule.metric {
            Feature::AccelPeak => Metric::AccelPeak,
            _ => Metric::AccelRms,
        },
        // Half the idle timeout: a stalled sensor's last frame is decided while the sensor
        // still holds the watermark back, and only then does the sensor go idle.
        flush_after_ms: config.time.idle_timeout_ms / 2,
        machines: config.machines.iter().map(|(m, a)| (m.clone(), machine_features(a))).collect(),
    }
}

/// The ISO class of every machine whose asset entry gives one.
fn iso_classes(config: &Config) -> BTreeMap<String, IsoClass> {
    config.machines.iter().filter_map(|(m, a)| Some((m.clone(), a.iso?))).collect()
}

/// `ev`'s velocity in mm/s: its `value` when its metric is `velocity_rms`, else its feature.
fn velocity_of(ev: &Event) -> Option<f64> {
    match ev.metric {
        Metric::VelocityRms => Some(ev.value),
        _ => ev.features.as_deref().and_then(|f| f.get(Feature::VelocityRms)),
    }
}

/// The zone of `velocity` on `machine`, when the machine has an ISO class.
fn zone_of(iso: &BTreeMap<String, IsoClass>, machine: &str, velocity: f64) -> Option<Zone> {
    Some(iso.get(machine)?.zone(velocity))
}

/// A machine's feature parameters from its asset entry: its velocity band; its bearing when the
/// entry gives both bearing and rpm; its envelope band (else the extractor's default) and method.
pub fn machine_features(asset: &MachineAsset) -> MachineFeatures {
    let band = |b: assets::Band| features::Band::new(b.low_hz, b.high_hz);
    let default = MachineFeatures::default();
    let bearing = asset
        .bearing
        .zip(asset.shaft_hz())
        .map(|(b, shaft_hz)| features::Bearing { shaft_hz, orders: b.orders });
    MachineFeatures {
        velocity_band: band(assets::velocity_band(Some(asset))),
        bearing,
        envelope_band: asset.envelope_band.map_or(default.envelope_band, band),
        envelope: asset.envelope,
    }
}

impl Decider {
    pub fn new(config: &Config) -> Self {
        Decider {
            engine: Engine::new(Params::from_config(config)),
            cutter: FrameCutter::new(frame_params(config)),
            counts: Counts {
                quarantined: Reason::ALL.iter().map(|r| (r.as_str().to_string(), 0)).collect(),
                ..Counts::default()
            },
            now: i64::MIN,
            derived: Vec::new(),
            rejected_derived: Vec::new(),
            outcomes: None,
            iso: iso_classes(config),
            velocities: BTreeMap::new(),
            trends: None,
        }
    }

    /// This decider, reporting an [`Outcome`] for every event it decides from now on.
    pub fn reporting(mut self) -> Self {
        self.outcomes = Some(Vec::new());
        self
    }

    /// This decider, keeping each rule's measurement of every event it accepts from now on in a
    /// [`TrendBook`] of `points` buckets per hour (0: it keeps none).
    pub fn keeping_trends(mut self, points: u32) -> Self {
        self.trends = (points > 0).then(|| TrendBook::new(points));
        self
    }

    /// The trends kept, when [`Decider::keeping_trends`].
    pub fn trends(&self) -> Option<&TrendBook> {
        self.trends.as_ref()
    }

    /// The outcomes since the last call (empty unless [`Decider::reporting`]).
    pub fn take_outcomes(&mut self) -> Vec<Outcome> {
        self.outcomes.as_mut().map(std::mem::take).unwrap_or_default()
    }

    pub fn snapshot(&self) -> Vec<u8> {
        crate::records::snapshot::encode(&Saved {
            now: self.now,
            counts: self.counts.clone(),
            engine: self.engine.snapshot(),
            cutter: self.cutter.snapshot(),
            velocities: self.velocities.clone(),
        })
    }

    pub fn restore(config: &Config, snapshot: &[u8]) -> Result<Self, SnapshotError> {
        let s: Saved = crate::records::snapshot::decode(snapshot)?;
        Ok(Decider {
            engine: Engine::restore(Params::from_config(config), &s.engine)?,
            cutter: FrameCutter::restore(frame_params(config), &s.cutter)?,
            counts: s.counts,
            now: s.now,
            derived: Vec::new(),
            rejected_derived: Vec::new(),
            outcomes: None,
            iso: iso_classes(config),
            velocities: s.velocities,
            trends: None,
        })
    }

    /// Snapshots hold no duplicate memory from now on: it is handed out in pages by
    /// [`Decider::take_dedup_page`] and given back with [`Decider::restore_with_dedup`]
    /// (`crate::rule::dedup`).
    pub fn keep_dedup_outside(&mut self) {
        self.engine.dedup_mut().keep_outside();
    }

    /// The duplicate-memory entries remembered since the last call, packed (empty unless kept
    /// outside).
    pub fn take_dedup_page(&mut self) -> Vec<u8> {
        self.engine.dedup_mut().take_spilled()
    }

    /// Each machine's duplicate-memory horizon, by machine index.
    pub fn dedup_horizons(&self) -> Vec<i64> {
        self.engine.dedup_horizons()
    }

    /// [`Decider::restore`], then, when the snapshot keeps the duplicate memory outside, the
    /// pages of it, oldest first (else the pages are not this snapshot's and are not read).
    pub fn restore_with_dedup<'a>(
        config: &Config,
        snapshot: &[u8],
        pages: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Self, SnapshotError> {
        let mut d = Decider::restore(config, snapshot)?;
        let dedup = d.engine.dedup_mut();
        if dedup.is_outside() {
            for page in pages {
                dedup.absorb(page).map_err(SnapshotError::invalid)?;
            }
        }
        Ok(d)
    }

    /// Whether this decider's snapshots leave the duplicate memory outside.
    pub fn dedup_is_outside(&self) -> bool {
        self.engine.dedup().is_outside()
    }

    /// After a salvage that lost the checkpoint (`src/store/salvage.rs`): the next event derived
    /// for each (machine, sensor) is numbered after its mark at least, so no seq is reused. A
    /// sensor name that belongs to another machine keeps its numbering (its samples are rejected
    /// as `sensor_conflict` anyway).
    pub fn continue_seqs(&mut self, marks: impl IntoIterator<Item = ((String, String), u64)>) {
        for ((machine, sensor), last_seq) in marks {
            let _ = self.cutter.restore_seq(&machine, &sensor, last_seq);
        }
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Each machine's watermark, in first-seen order.
    pub fn watermarks(&self) -> impl Iterator<Item = (&str, Option<i64>)> {
        self.engine.watermarks()
    }

    /// Each sensor's watermark bound in ms, as (machine, sensor, bound).
    pub fn bounds(&self) -> impl Iterator<Item = (&str, &str, i64)> {
        self.engine.bounds()
    }

    /// `auto`: each sensor's measured disorder and ingest delay in ms, as (machine, sensor,
    /// disorder, delay).
    pub fn measured_delays(&self) -> impl Iterator<Item = (&str, &str, Option<i64>, Option<i64>)> {
        self.engine.measured_delays()
    }

    /// Decides one line; its alert records are appended to `alerts`. A rejected line (by the
    /// parser or by a decision) is counted and returned.
    pub fn line(
        &mut self,
        parsed: &Result<TraceLine, LineError>,
        alerts: &mut Vec<AlertRecord>,
    ) -> Result<(), LineError> {
        self.counts.records += 1;
        let first = alerts.len();
        let result = self.decide_line(parsed, alerts);
        let p = self.engine.params();
        let several = p.rules.len() + p.composites.len() > 1;
        for rec in &alerts[first..] {
            let kind = kind_name(rec.kind);
            *self.counts.alerts.entry(kind.to_string()).or_insert(0) += 1;
            if several {
                let by_kind = self.counts.alerts_by_rule.entry(rec.rule.clone()).or_default();
                *by_kind.entry(kind.to_string()).or_insert(0) += 1;
            }
        }
        if let Err((_, why)) = &result {
            self.count_rejection(why);
        }
        result
    }

    /// Decides journal record `rec` (this decider must be reporting): its line parsed here unless
    /// `parsed` gives the parse ([`parse_line_and_event_span`], as `super::input` does). A record
    /// released from quarantine is decided at its new ingest time.
    pub fn record(&mut self, rec: &JournalRecord, parsed: Option<ParsedLine>) -> Decided {
        let (mut parsed, event_span) =
            parsed.unwrap_or_else(|| parse_line_and_event_span(&rec.line));
        if rec.origin.is_some_and(|o| o.source == Origin::RELEASED) {
            match &mut parsed {
                Ok(tl) => tl.at = rec.at,
                Err((at, _)) => *at = Some(rec.at),
            }
        }
        let mut alerts = Vec::new();
        let result = self.line(&parsed, &mut alerts);
        let at = match &parsed {
            Ok(tl) => tl.at,
            Err((at, _)) => at.unwrap_or(rec.at),
        };
        Decided {
            at,
            parsed,
            event_span,
            result,
            outcomes: self.take_outcomes(),
            rejected_derived: self.take_rejected_derived(),
            alerts,
        }
    }

    /// Events derived from samples that the rule rejected (a frame stamped too far in the
    /// future, an id conflict), each with its reason, since the last call: the caller keeps them
    /// like any rejected record. They are counted in `quarantined` already.
    pub fn take_rejected_derived(&mut self) -> Vec<(Event, Rejection)> {
        std::mem::take(&mut self.rejected_derived)
    }

    /// The rule's state now and the frame cutter's open frames (for the metrics).
    pub fn state_size(&self) -> (StateSize, usize) {
        (self.engine.state_size(), self.cutter.open_frames())
    }

    /// Each rule's part of the state (`Engine::rule_sizes`), for the metrics.
    pub fn rule_sizes(&self) -> Vec<(&str, StateSize)> {
        self.engine.rule_sizes()
    }

    /// Records how large the state is now, for `peak_state`.
    pub fn note_state(&mut self) {
        let StateSize { high_events, members, dedup_ids, .. } = self.engine.state_size();
        let size = (high_events + members + dedup_ids + self.cutter.open_frames()) as u64;
        self.counts.peak_state = self.counts.peak_state.max(size);
    }

    fn decide_line(
        &mut self,
        parsed: &Result<TraceLine, LineError>,
        alerts: &mut Vec<AlertRecord>,
    ) -> Result<(), LineError> {
        let tl = match parsed {
            Ok(tl) => tl,
            Err((Some(at), why)) => {
                self.advance(*at, alerts);
                return Err((Some(*at), why.clone()));
            }
            Err(e) => return Err(e.clone()),
        };
        let at = tl.at;
        self.advance(at, alerts);
        match &tl.arrival {
            Arrival::Tick => {
                self.counts.ticks += 1;
                self.engine.tick(self.now, alerts);
            }
            Arrival::Event(ev) => {
                self.counts.events_received += 1;
                self.decide(ev, false, alerts).map_err(|why| (Some(at), why))?;
            }
            Arrival::Samples(rec) => {
                self.counts.samples_records += 1;
                let mut derived = std::mem::take(&mut self.derived);
                let pushed = {
                    // The stamp stage's span: a block of raw samples cut into frames, and the
                    // events derived from the frames it completed.
                    let span = tracing::trace_span!(
                        "stamp",
                        machine = %rec.machine,
                        sensor = %rec.sensor,
                        t0_ms = rec.t0_ms,
                        samples = rec.data.len(),
                        derived = tracing::field::Empty
                    );
                    let _entered = span.enter();
                    let pushed = self.cutter.push(self.now, rec, &mut derived);
                    span.record("derived", derived.len());
                    pushed
                };
                self.decide_derived(&mut derived, alerts);
                self.derived = derived;
                pushed.map_err(|why| (Some(at), why))?;
            }
            Arrival::Readings(rec) => {
                // A device's own velocity readings: one event each, numbered like frames.
                let mut derived = std::mem::take(&mut self.derived);
                let taken = self.cutter.readings(self.now, rec, &mut derived);
                self.decide_derived(&mut derived, alerts);
                self.derived = derived;
                taken.map_err(|why| (Some(at), why))?;
            }
        }
        Ok(())
    }

    fn advance(&mut self, at: i64, alerts: &mut Vec<AlertRecord>) {
        let at = self.now.max(at);
        let mut derived = std::mem::take(&mut self.derived);
        while let Some(due) = self.cutter.next_flush_due().filter(|&d| d <= at) {
            self.now = self.now.max(due);
            {
                // The stamp stage's span: stalled sensors' open frames flushed at ingest time
                // `flush_at_ms`, and the events derived from them.
                let span = tracing::trace_span!(
                    "stamp",
                    flush_at_ms = self.now,
                    derived = tracing::field::Empty
                );
                let _entered = span.enter();
                self.cutter.advance(self.now, &mut derived);
                span.record("derived", derived.len());
            }
            self.decide_derived(&mut derived, alerts);
        }
        self.now = at;
        self.derived = derived;
    }

    fn decide_derived(&mut self, derived: &mut Vec<Event>, alerts: &mut Vec<AlertRecord>) {
        for ev in derived.drain(..) {
            self.counts.events_derived += 1;
            if let Err(why) = self.decide(&ev, true, alerts) {
                // Derived events are well formed by construction; a rejection here is a clock
                // problem (clock_future) or an id conflict: counted and kept like any other.
                self.count_rejection(&why);
                self.rejected_derived.push((ev, why));
            }
        }
    }

    fn decide(
        &mut self,
        ev: &Event,
        derived: bool,
        alerts: &mut Vec<AlertRecord>,
    ) -> Result<(), Rejection> {
        let c = &mut self.counts;
        let (how, counted) = match self.engine.on_event(self.now, ev, alerts) {
            Verdict::Applied { counted } => {
                c.accepted += 1;
                (Acceptance::Applied, counted)
            }
            Verdict::LateApplied { counted } => {
                c.accepted += 1;
                c.late_applied += 1;
                (Acceptance::LateApplied, counted)
            }
            Verdict::TooLate => {
                c.accepted += 1;
                c.too_late += 1;
                (Acceptance::TooLate, false)
            }
            Verdict::Duplicate => {
                c.duplicates += 1;
                if let Some(out) = self.outcomes.as_mut() {
                    out.push(Outcome::Duplicate { event_id: ev.event_id.clone(), derived });
                }
                return Ok(());
            }
            Verdict::Rejected(why) => return Err(why),
        };
        if let Some(book) = self.trends.as_mut() {
            for (i, r) in self.engine.params().rules.iter().enumerate() {
                let value = r.measurement(ev).and_then(|(v, unit)| unit.convert(v, r.unit));
                if let Some(v) = value {
                    book.record(&ev.machine, i, ev.ts_ms, v);
                }
            }
        }
        let velocity = velocity_of(ev);
        if let Some(v) = velocity {
            self.note_velocity(&ev.machine, ev.ts_ms, v);
        }
        if let Some(out) = self.outcomes.as_mut() {
            let event = derived.then(|| ev.clone());
            let zone = velocity.and_then(|v| zone_of(&self.iso, &ev.machine, v));
            let touch = |(rule, id): (&str, Option<&str>)| RuleTouch {
                rule: rule.to_owned(),
                alert_id: id.map(str::to_owned),
            };
            let rules = self.engine.counted_by_names().map(touch).collect();
            let watermark_ms = self.engine.watermark_of(&ev.machine);
            out.push(Outcome::Accepted { event, how, derived, counted, zone, rules, watermark_ms });
        }
        Ok(())
    }

    /// Keeps `velocity` as `machine`'s latest when no later one is kept.
    fn note_velocity(&mut self, machine: &str, ts_ms: i64, velocity: f64) {
        match self.velocities.get_mut(machine) {
            Some(kept) if kept.0 > ts_ms => {}
            Some(kept) => *kept = (ts_ms, velocity),
            None => drop(self.velocities.insert(machine.to_owned(), (ts_ms, velocity))),
        }
    }

    /// Per machine, the velocity (mm/s) of its accepted event with a velocity of the latest
    /// event time, and that time: `(machine, ts_ms, mm/s)`.
    pub fn latest_velocities(&self) -> impl Iterator<Item = (&str, i64, f64)> {
        self.velocities.iter().map(|(m, &(ts, v))| (m.as_str(), ts, v))
    }

    fn count_rejection(&mut self, why: &Rejection) {
        *self.counts.quarantined.entry(why.reason.as_str().to_string()).or_insert(0) += 1;
    }
}

/// The alert kind as written in summaries and the ledger.
pub fn kind_name(k: AlertKind) -> &'static str {
    match k {
        AlertKind::Open => "open",
        AlertKind::Amend => "amend",
        AlertKind::Close => "close",
        AlertKind::Supersede => "supersede",
    }
}
