//! The window view, pure: every accepted event of the alert's machine in the window that ends at
//! the onset, `(onset − W, onset]`, and in the incident after it (a bounded number of each),
//! each marked with what the rule made of it, from the ledger's record of it, its content (the
//! alert's evidence, or the event re-derived from the history) and the rule core's own
//! predicate ([`crate::rule::Params::judge`]).

use std::collections::HashMap;

use serde::Serialize;

use crate::event::features::{Feature, MeasureUnit, Quantity};
use crate::event::{ClockEvidence, Event, Quality, SampleRef};
use crate::records::ledger::Acceptance;
use crate::rule::alert::{AlertRecord, EvidenceItem};
use crate::rule::judge::Judgement;

use super::rule::Rule;

/// Events of the window before the onset listed at most (the latest ones).
pub const WINDOW_MAX: usize = 500;
/// Events of the incident after the onset listed at most (the earliest ones).
pub const INCIDENT_MAX: usize = 50;

/// An accepted event of the machine as the ledger records it.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    pub event_id: String,
    pub sensor: String,
    pub seq: u64,
    pub ts_ms: i64,
    pub how: Acceptance,
    pub counted: bool,
    /// The ingest time it was decided at.
    pub at_ms: i64,
}

/// What the rule made of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Counted,
    BelowThreshold,
    /// Applied, but not counted for its quality or clock state, or without the measurement.
    NotCounted,
    /// Accepted behind the watermark by more than the allowed lateness: never applied.
    TooLate,
    /// Accepted and applied, not counted, and its content is no longer in the history.
    Unknown,
}

/// One event of the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventLine {
    pub event_id: String,
    pub sensor: String,
    pub seq: u64,
    pub ts_ms: i64,
    /// The measurement the rule reads (else the event's `value`), in `unit`; null when unknown.
    pub value: Option<f64>,
    pub unit: Option<MeasureUnit>,
    /// The ISO 20816-3 zone of a velocity, for a machine with an ISO class.
    pub zone: Option<&'static str>,
    pub quality: Option<Quality>,
    pub clock: Option<ClockEvidence>,
    pub status: Status,
    /// Why, where the status alone does not say: `quality bad`, `clock stepped`,
    /// `no velocity_rms`, `not in the history`.
    pub why: Option<String>,
    /// Applied behind the watermark, within the allowed lateness.
    pub late: bool,
    /// In the incident after its onset (else in the window up to the onset).
    pub after_onset: bool,
    /// The raw samples behind it, for an evidence event.
    pub samples: Option<SampleRef>,
}

/// The window around an alert's onset.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    /// The window is `(from_ms, onset_ms]`.
    pub from_ms: i64,
    pub onset_ms: i64,
    /// The incident's end (events after the onset are listed before it); null while open.
    pub end_ms: Option<i64>,
    pub events: Vec<EventLine>,
    /// Earlier events of the window not listed ([`WINDOW_MAX`]).
    pub left_out_before: usize,
    /// Further events of the incident not listed ([`INCIDENT_MAX`]).
    pub left_out_after: usize,
}

/// What is known of events beyond the ledger: the alert's evidence items (every revision's) and
/// events re-derived from the history, by id and by sensor and event time (a derived event
/// re-derived from part of the history may be numbered differently).
#[derive(Debug, Default)]
pub struct Contents {
    pub evidence: HashMap<String, EvidenceItem>,
    pub by_id: HashMap<String, Event>,
    pub by_time: HashMap<(String, i64), Event>,
}

impl Contents {
    /// Adds a re-derived event (the first of an id or a sensor and time wins).
    pub fn add(&mut self, ev: Event) {
        self.by_time.entry((ev.sensor.clone(), ev.ts_ms)).or_insert_with(|| ev.clone());
        self.by_id.entry(ev.event_id.clone()).or_insert(ev);
    }

    /// Forgets the events cut from raw samples (those with a sample reference) before `ts_ms`.
    pub fn forget_frames_before(&mut self, ts_ms: i64) {
        let keep = |e: &Event| e.samples.is_none() || e.ts_ms >= ts_ms;
        self.by_id.retain(|_, e| keep(e));
        self.by_time.retain(|_, e| keep(e));
    }

    fn event(&self, a: &Accepted) -> Option<&Event> {
        self.by_id
            .get(&a.event_id)
            .filter(|e| e.sensor == a.sensor && e.ts_ms == a.ts_ms)
            .or_else(|| self.by_time.get(&(a.sensor.clone(), a.ts_ms)))
    }
}

/// The window's start (exclusive): `onset − W`, or without a rule (renamed since) just before
/// the earliest evidence event.
pub fn start(latest: &AlertRecord, rule: Option<&Rule>) -> i64 {
    let onset = latest.onset_ms;
    match rule {
        Some(r) => onset.saturating_sub(r.line.window_ms),
        None => latest.evidence.iter().map(|e| e.ts_ms - 1).min().unwrap_or(onset - 1),
    }
}

/// The events listed, in `(ts_ms, event_id)` order, each with whether it is after the onset,
/// and how many of the window and of the incident are left out.
pub fn listed<'a>(
    latest: &AlertRecord,
    rule: Option<&Rule>,
    accepted: &'a [Accepted],
) -> (Vec<(&'a Accepted, bool)>, usize, usize) {
    let (from, onset) = (start(latest, rule), latest.onset_ms);
    let end = latest.end_ms.unwrap_or(i64::MAX);
    let mut before: Vec<&Accepted> =
        accepted.iter().filter(|a| a.ts_ms > from && a.ts_ms <= onset).collect();
    let mut after: Vec<&Accepted> =
        accepted.iter().filter(|a| a.ts_ms > onset && a.ts_ms < end).collect();
    let order = |a: &&Accepted, b: &&Accepted| (a.ts_ms, &a.event_id).cmp(&(b.ts_ms, &b.event_id));
    before.sort_by(order);
    after.sort_by(order);
    let left_out_before = before.len().saturating_sub(WINDOW_MAX);
    let left_out_after = after.len().saturating_sub(INCIDENT_MAX);
    let list = before[left_out_before..]
        .iter()
        .map(|a| (*a, false))
        .chain(after[..after.len() - left_out_after].iter().map(|a| (*a, true)))
        .collect();
    (list, left_out_before, left_out_after)
}

/// The window of the alert whose latest revision is `latest`; `accepted`: the machine's
/// accepted events, any order.
pub fn window(
    latest: &AlertRecord,
    rule: Option<&Rule>,
    accepted: &[Accepted],
    contents: &Contents,
) -> Window {
    let (list, left_out_before, left_out_after) = listed(latest, rule, accepted);
    let events = list
        .into_iter()
        .map(|(a, after_onset)| line(a, after_onset, &latest.machine, rule, contents))
        .collect();
    Window {
        from_ms: start(latest, rule),
        onset_ms: latest.onset_ms,
        end_ms: latest.end_ms,
        events,
        left_out_before,
        left_out_after,
    }
}

/// One event's line.
fn line(
    a: &Accepted,
    after_onset: bool,
    machine: &str,
    rule: Option<&Rule>,
    contents: &Contents,
) -> EventLine {
    let mut l = EventLine {
        event_id: a.event_id.clone(),
        sensor: a.sensor.clone(),
        seq: a.seq,
        ts_ms: a.ts_ms,
        value: None,
        unit: None,
        zone: None,
        quality: None,
        clock: None,
        status: Status::Unknown,
        why: None,
        late: a.how == Acceptance::LateApplied,
        after_onset,
        samples: None,
    };
    let judged = contents.event(a).map(|ev| {
        l.quality = Some(ev.quality);
        l.clock = Some(ev.clock);
        // A frame derived again may be numbered differently, and its block with it.
        l.samples = ev.samples.filter(|_| ev.event_id == a.event_id);
        let measured = rule.and_then(|r| r.params.measurement(ev));
        (l.value, l.unit) = match measured {
            Some((v, u)) => (Some(v), Some(u)),
            None => (Some(ev.value), Some(ev.unit.into())),
        };
        rule.map(|r| r.params.judge(machine, ev))
    });
    if let Some(item) = contents.evidence.get(a.event_id.as_str()) {
        (l.value, l.unit, l.quality, l.clock) =
            (Some(item.value), Some(item.unit), Some(item.quality), Some(item.clock));
        l.samples = item.samples;
    }
    let judged = judged.flatten();
    let words = |j| words(j, rule.map_or(Feature::AccelRms, |r| r.line.metric));
    (l.status, l.why) = match (a.how, a.counted, judged) {
        (Acceptance::TooLate, ..) => (Status::TooLate, None),
        (_, true, None | Some(Judgement::Counts(..))) => (Status::Counted, None),
        (_, true, Some(j)) => {
            (Status::Counted, Some(format!("this configuration's rule would not: {}", words(j))))
        }
        (_, false, Some(Judgement::Counts(..))) => (
            Status::NotCounted,
            Some("this configuration's rule would count it: the rule changed since".into()),
        ),
        (_, false, Some(Judgement::Below(..))) => (Status::BelowThreshold, None),
        (_, false, Some(j)) => (Status::NotCounted, Some(words(j))),
        (_, false, None) if contents.event(a).is_some() => (Status::NotCounted, None),
        (_, false, None) => (Status::Unknown, Some("not in the history".into())),
    };
    if let (Some(r), Some(v), Some(MeasureUnit::MmS)) = (rule, l.value, l.unit) {
        if r.line.metric.quantity() == Quantity::Velocity {
            l.zone = r.iso.map(|iso| iso.zone(v).as_str());
        }
    }
    l
}

/// Why an event did not count, in words.
fn words(j: Judgement, metric: Feature) -> String {
    match j {
        Judgement::Counts(..) => "counts".into(),
        Judgement::NoMeasurement => format!("no {metric}"),
        Judgement::Quality(q) => format!("quality {}", q.as_str()),
        Judgement::Clock(c) => format!("clock {}", c.as_str()),
        Judgement::Below(..) => "below threshold".into(),
    }
}
