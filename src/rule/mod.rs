//! The pure decision core (docs/contracts.md sections 4 and 5): dedup, watermarks, lateness, incidents
//! and alert records. No tokio, no I/O, no wall clock: every call takes the ingest time.
//!
//! Order of decisions for one event arriving at ingest time `at`:
//! 1. ingest time advances to `at` (never backwards: an earlier `at` counts as the current time);
//!    sensors past their idle timeout go idle and their machines' watermarks move — records of
//!    this step have `caused_by: null`;
//! 2. `ts_ms > at + max_future` → quarantined `clock_future`;
//! 3. an `event_id` already remembered → duplicate (same content) or `id_conflict`;
//! 4. `ts_ms < machine watermark - allowed_lateness` → too late (accepted, never applied);
//!    `ts_ms < machine watermark` → late, applied; otherwise applied;
//! 5. an applied event that carries the rule's measurement (its `value` when its metric is the
//!    rule's, else `features[metric]`), of a counted quality and clock state, at or above the
//!    machine's threshold (compared in the rule's unit) joins the machine's incident book;
//! 6. the sensor's watermark, then the machine's, move; what became due is published.

pub mod alert;
pub mod composite;
mod composites;
pub mod dedup;
pub mod high_index;
pub mod incidents;
pub mod judge;
pub mod watermark;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashSet};
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::event::features::{Feature, MeasureUnit, Quantity};
use crate::event::fingerprint::name_hash;
use crate::event::rejection::{Reason, Rejection};
use crate::event::{ClockState, Event, Metric, Quality};
use alert::{AlertRecord, AssetTags, EvidenceItem};
use composite::CompositeBook;
pub use composites::CompositeParams;
use dedup::{Dedup, IdKey, Seen};
use incidents::{Ctx, IncidentBook};
use watermark::{BoundMode, SensorClock};

/// What one measurement rule needs to know (docs/contracts.md section 4), independent of where it
/// came from (`config/rule.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleParams {
    /// The rule's configured name, written into its alert records and part of their ids.
    pub name: String,
    /// The fingerprint of the rule and time sections (`crate::config::rule_version`), written
    /// into every alert record of the rule.
    pub version: String,
    /// The measurement the rule reads (docs/contracts.md section 4): an event's `value` when its
    /// metric is this one, else `features[metric]`; an event without it never counts.
    pub metric: Feature,
    /// The unit `threshold` is in; fits `metric`.
    pub unit: MeasureUnit,
    /// The threshold of a machine not in `thresholds`; `f64::INFINITY` when such a machine's
    /// events never count (a zone threshold it cannot resolve: `config/rule.rs`).
    pub threshold: f64,
    /// Per-machine thresholds (overrides and resolved zones), `f64::INFINITY` as above.
    pub thresholds: BTreeMap<String, f64>,
    pub window_ms: i64,
    pub count: u32,
    pub count_quality: Vec<Quality>,
    /// The clock states whose events count (docs/contracts.md section 3).
    pub count_clock: Vec<ClockState>,
    /// `also` lists at most this many event IDs (docs/contracts.md section 4).
    pub also_max: u32,
    pub early: bool,
}

/// What the engine needs to know: the gateway, its rules (at least one; each decided on its own
/// over the same accepted events), and what they share: the asset tags and the time settings
/// (dedup, watermarks and lateness are one per gateway).
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub gateway: String,
    /// The measurement rules in configuration order; names are distinct.
    pub rules: Vec<RuleParams>,
    /// The composite rules over them, in configuration order (`composites.rs`); names are
    /// distinct from each other and from the measurement rules'.
    pub composites: Vec<CompositeParams>,
    /// Each machine's asset tags for its alert records (docs/contracts.md section 6); a machine
    /// not listed has none (`{}`).
    pub assets: BTreeMap<String, Arc<AssetTags>>,
    pub bound: BoundMode,
    pub allowed_lateness_ms: i64,
    pub idle_timeout_ms: i64,
    pub max_future_ms: i64,
}

/// What became of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `counted`: it counts for a rule (of the rule's metric, a counted quality and clock
    /// state, at or above its machine's threshold) and joined the machine's incident book of
    /// that rule; which rules, and the incident it joined in each, [`Engine::counted_by`] says.
    Applied {
        counted: bool,
    },
    /// Behind the watermark, within allowed lateness; `counted` as for `Applied`.
    LateApplied {
        counted: bool,
    },
    TooLate,
    Duplicate,
    Rejected(Rejection),
}

/// How the event just decided stands with one rule ([`Engine::counted_by`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleCount {
    /// The rule's index in [`Params::rules`].
    pub rule: usize,
    /// The alert id of the incident the event belongs to right after it was applied (as a
    /// member, or as evidence of one that begins within the window after it); `None` while it
    /// belongs to none.
    pub incident: Option<String>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Machine {
    name: String,
    /// The first rule's threshold for this machine (kept in snapshots as it always was; the
    /// parameters set it again on restore).
    threshold: f64,
    sensor_index: HashMap<String, u32>,
    sensors: Vec<SensorClock>,
    in_heap: Vec<bool>,
    idle: Vec<bool>,
    idle_count: usize,
    wm: i64,
    /// The first rule's incident book.
    book: IncidentBook,
    /// The incident books of the further rules, in the order of [`Params::rules`] (absent from
    /// snapshots of one rule).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    more_books: Vec<IncidentBook>,
    /// The composite rules' books, in the order of [`Params::composites`] (absent from
    /// snapshots without composite rules).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    composites: Vec<CompositeBook>,
    /// Each rule's threshold for this machine, from the parameters (not in snapshots).
    #[serde(skip)]
    thresholds: Vec<f64>,
    /// `name_hash` of the name and, by sensor index, of each sensor's name: the fingerprint's
    /// first two words, kept so that an event's fingerprint hashes no name (not in snapshots:
    /// [`Machine::rehash`] computes them on restore).
    #[serde(skip)]
    name_hash: u64,
    #[serde(skip)]
    sensor_hashes: Vec<u64>,
    /// Each sensor's name, shared by the evidence items of its high events.
    #[serde(skip)]
    sensor_names: Vec<Arc<str>>,
    /// The machine's asset tags, from the parameters (not in snapshots).
    #[serde(skip)]
    asset: Arc<AssetTags>,
}

impl RuleParams {
    /// The threshold of machine `name` (`f64::INFINITY`: its events never count).
    fn threshold_of(&self, name: &str) -> f64 {
        self.thresholds.get(name).copied().unwrap_or(self.threshold)
    }
}

impl Params {
    /// The first rule: the one of a configuration with a single `[rule]`.
    pub fn rule(&self) -> &RuleParams {
        &self.rules[0]
    }

    /// The first rule, to change it (tests and benchmarks of one rule).
    pub fn rule_mut(&mut self) -> &mut RuleParams {
        &mut self.rules[0]
    }

    /// Each rule's threshold for machine `name`.
    fn thresholds_of(&self, name: &str) -> Vec<f64> {
        self.rules.iter().map(|r| r.threshold_of(name)).collect()
    }

    /// The asset tags of machine `name`.
    fn asset_of(&self, name: &str) -> Arc<AssetTags> {
        self.assets.get(name).cloned().unwrap_or_default()
    }
}

/// How the rule reads an event's measurement, from its parameters: the hot path's view of
/// `Params::metric`.
#[derive(Debug, Clone, Copy)]
struct Reader {
    /// The event metric that is the rule's metric, if one is.
    metric: Option<Metric>,
    feature: Feature,
    quantity: Quantity,
}

impl Reader {
    fn of(r: &RuleParams) -> Self {
        Reader { metric: r.metric.metric(), feature: r.metric, quantity: r.metric.quantity() }
    }

    /// The event's measurement and its unit: its `value` when its metric is the rule's, else
    /// the feature (acceleration in the event's unit, velocity in mm/s, the others in `"1"`).
    #[inline]
    fn read(self, ev: &Event) -> Option<(f64, MeasureUnit)> {
        if Some(ev.metric) == self.metric {
            return Some((ev.value, ev.unit.into()));
        }
        let v = ev.features.as_deref()?.get(self.feature)?;
        let unit = match self.quantity {
            Quantity::Acceleration => ev.unit.into(),
            Quantity::Velocity => MeasureUnit::MmS,
            Quantity::Dimensionless => MeasureUnit::One,
        };
        Some((v, unit))
    }
}

impl Machine {
    /// The name hashes, from the names, and the parameters' threshold and asset tags (after a
    /// restore: a rule or asset change at start applies to the machines already known).
    fn rehash(&mut self, p: &Params) {
        self.thresholds = p.thresholds_of(&self.name);
        self.threshold = self.thresholds[0];
        self.asset = p.asset_of(&self.name);
        self.name_hash = name_hash(&self.name);
        self.sensor_hashes = vec![0; self.sensors.len()];
        self.sensor_names = vec![Arc::from(""); self.sensors.len()];
        for (sensor, &si) in &self.sensor_index {
            self.sensor_hashes[si as usize] = name_hash(sensor);
            self.sensor_names[si as usize] = Arc::from(sensor.as_str());
        }
    }

    /// Every rule's incident book, in rule order.
    fn books(&self) -> impl Iterator<Item = &IncidentBook> {
        std::iter::once(&self.book).chain(&self.more_books)
    }
}

/// Sizes of the rule state, for the boundedness checks and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StateSize {
    pub machines: usize,
    pub sensors: usize,
    pub high_events: usize,
    pub incidents: usize,
    pub members: usize,
    pub dedup_ids: usize,
}

#[derive(Debug, Clone)]
pub struct Engine {
    p: Params,
    /// How each rule reads an event, by rule index.
    readers: Vec<Reader>,
    /// How the event decided last stands with each rule that counted it.
    counted_by: Vec<RuleCount>,
    now: i64,
    machines: Vec<Machine>,
    by_name: HashMap<String, u32>,
    dedup: Dedup,
    /// (deadline, machine, sensor): when a sensor may go idle; checked lazily.
    deadlines: BinaryHeap<Reverse<(i64, u32, u32)>>,
    /// Machines with an idle sensor: their watermark moves with ingest time.
    time_driven: BTreeSet<u32>,
}

/// The engine's state without its parameters, borrowed for encoding.
#[derive(serde::Serialize)]
struct StateRef<'a> {
    now: i64,
    /// The rules' names, in the order of the machines' books.
    rules: Vec<&'a str>,
    /// The composite rules' names, in the order of the machines' composite books.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    composites: Vec<&'a str>,
    machines: &'a [Machine],
    dedup: &'a Dedup,
    deadlines: &'a BinaryHeap<Reverse<(i64, u32, u32)>>,
    time_driven: &'a BTreeSet<u32>,
}

/// The same, owned, for decoding.
#[derive(serde::Deserialize)]
struct State {
    now: i64,
    /// Absent from snapshots written before there were several rules: one book, the first
    /// rule's.
    #[serde(default)]
    rules: Vec<String>,
    /// Absent from snapshots without composite rules.
    #[serde(default)]
    composites: Vec<String>,
    machines: Vec<Machine>,
    dedup: Dedup,
    deadlines: BinaryHeap<Reverse<(i64, u32, u32)>>,
    time_driven: BTreeSet<u32>,
}

impl State {
    /// Every index the state holds points into it: a machine's per-sensor lists have one entry
    /// per sensor and its idle count counts its idle sensors, each deadline and time-driven
    /// machine names a machine and sensor that exist, machine names are distinct. (Dedup entries
    /// name machines too, but one out of range reads as having no horizon.)
    fn check_indices(&self) -> Result<(), String> {
        let mut names = HashSet::with_capacity(self.machines.len());
        for m in &self.machines {
            let n = m.sensors.len();
            if m.in_heap.len() != n || m.idle.len() != n {
                return Err(format!(
                    "machine {}: {n} sensors but {} in-heap and {} idle flags",
                    m.name,
                    m.in_heap.len(),
                    m.idle.len()
                ));
            }
            if let Some((name, i)) = m.sensor_index.iter().find(|(_, &i)| i as usize >= n) {
                return Err(format!("machine {}: sensor {name} has index {i} of {n}", m.name));
            }
            let idle = m.idle.iter().filter(|&&b| b).count();
            if m.idle_count != idle {
                return Err(format!(
                    "machine {}: idle count {} but {idle} idle sensors",
                    m.name, m.idle_count
                ));
            }
            if !names.insert(m.name.as_str()) {
                return Err(format!("machine {} twice", m.name));
            }
            let rules = self.rules.len().max(1);
            if m.more_books.len() + 1 != rules {
                let books = m.more_books.len() + 1;
                return Err(format!(
                    "machine {}: {books} incident books for {rules} rules",
                    m.name
                ));
            }
            if m.composites.len() != self.composites.len() {
                return Err(format!(
                    "machine {}: {} composite books for {} composite rules",
                    m.name,
                    m.composites.len(),
                    self.composites.len()
                ));
            }
        }
        let sensors = |mi: u32| self.machines.get(mi as usize).map(|m| m.sensors.len());
        for Reverse((_, mi, si)) in &self.deadlines {
            if sensors(*mi).is_none_or(|n| *si as usize >= n) {
                return Err(format!("a deadline for machine {mi} sensor {si}, which do not exist"));
            }
        }
        if let Some(mi) = self.time_driven.iter().find(|&&mi| sensors(mi).is_none()) {
            return Err(format!("time-driven machine {mi} does not exist"));
        }
        Ok(())
    }
}

impl Engine {
    /// The whole decision state as bytes (parameters excluded), for a checkpoint.
    pub fn snapshot(&self) -> Vec<u8> {
        crate::records::snapshot::encode(&StateRef {
            now: self.now,
            rules: self.p.rules.iter().map(|r| r.name.as_str()).collect(),
            composites: self.p.composites.iter().map(|c| c.name.as_str()).collect(),
            machines: &self.machines,
            dedup: &self.dedup,
            deadlines: &self.deadlines,
            time_driven: &self.time_driven,
        })
    }

    /// An engine that continues exactly where the one that took `snapshot` stood.
    pub fn restore(
        p: Params,
        snapshot: &[u8],
    ) -> Result<Self, crate::records::snapshot::SnapshotError> {
        let invalid = crate::records::snapshot::SnapshotError::invalid;
        let mut s: State = crate::records::snapshot::decode(snapshot)?;
        s.check_indices().map_err(invalid)?;
        let old: Vec<String> = match s.rules.is_empty() {
            true => vec![p.rule().name.clone()],
            false => std::mem::take(&mut s.rules),
        };
        let names: Vec<&str> = p.rules.iter().map(|r| r.name.as_str()).collect();
        let from = continues_from(&old, &names);
        for m in &mut s.machines {
            let mut was: Vec<Option<IncidentBook>> = std::iter::once(std::mem::take(&mut m.book))
                .chain(std::mem::take(&mut m.more_books))
                .map(Some)
                .collect();
            let mut books = from.iter().map(|f| f.and_then(|j| was.get_mut(j)?.take()));
            m.book = books.next().flatten().unwrap_or_default();
            m.more_books = books.map(Option::unwrap_or_default).collect();
            let old = std::mem::take(&mut m.composites);
            m.composites = composites::restore(&p, &s.composites, old)
                .map_err(|e| invalid(format!("machine {}: {e}", m.name)))?;
            for (r, book) in m.books().enumerate() {
                book.check(p.rules[r].window_ms).map_err(|e| {
                    invalid(format!("machine {} rule {}: {e}", m.name, p.rules[r].name))
                })?;
            }
            m.rehash(&p);
        }
        let by_name =
            s.machines.iter().enumerate().map(|(i, m)| (m.name.clone(), i as u32)).collect();
        Ok(Engine {
            readers: p.rules.iter().map(Reader::of).collect(),
            counted_by: Vec::new(),
            p,
            now: s.now,
            machines: s.machines,
            by_name,
            dedup: s.dedup,
            deadlines: s.deadlines,
            time_driven: s.time_driven,
        })
    }

    pub fn new(p: Params) -> Self {
        Engine {
            readers: p.rules.iter().map(Reader::of).collect(),
            counted_by: Vec::new(),
            p,
            now: i64::MIN,
            machines: Vec::new(),
            by_name: HashMap::default(),
            dedup: Dedup::default(),
            deadlines: BinaryHeap::new(),
            time_driven: BTreeSet::new(),
        }
    }

    pub fn params(&self) -> &Params {
        &self.p
    }

    /// The duplicate memory.
    pub fn dedup(&self) -> &Dedup {
        &self.dedup
    }

    /// The duplicate memory, for keeping it outside snapshots (`dedup.rs`).
    pub fn dedup_mut(&mut self) -> &mut Dedup {
        &mut self.dedup
    }

    /// Each machine's duplicate-memory horizon (`watermark - allowed_lateness`), by machine
    /// index: an entry of machine `m` older than `horizons[m]` counts as absent.
    pub fn dedup_horizons(&self) -> Vec<i64> {
        (0..self.machines.len() as u32)
            .map(|m| horizon_of(&self.machines, self.p.allowed_lateness_ms, m))
            .collect()
    }

    /// [`Engine::counted_by`] with the rules named: (rule name, incident's alert id).
    pub fn counted_by_names(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        let rules = &self.p.rules;
        self.counted_by.iter().map(move |c| (rules[c.rule].name.as_str(), c.incident.as_deref()))
    }

    /// `machine`'s watermark now (`None` while it has none, or for a machine never seen).
    pub fn watermark_of(&self, machine: &str) -> Option<i64> {
        let m = &self.machines[*self.by_name.get(machine)? as usize];
        (m.wm != i64::MIN).then_some(m.wm)
    }

    /// Machines in first-seen order with their watermarks.
    pub fn watermarks(&self) -> impl Iterator<Item = (&str, Option<i64>)> {
        self.machines.iter().map(|m| (m.name.as_str(), (m.wm != i64::MIN).then_some(m.wm)))
    }

    /// Every sensor's watermark bound now, in ms, as (machine, sensor, bound): the configured
    /// value when fixed, the clamped lateness quantile when `auto`.
    pub fn bounds(&self) -> impl Iterator<Item = (&str, &str, i64)> {
        self.machines.iter().flat_map(|m| {
            m.sensor_index.iter().map(move |(sensor, &si)| {
                (m.name.as_str(), sensor.as_str(), m.sensors[si as usize].bound_ms)
            })
        })
    }

    /// `auto`: every sensor's measured quantiles in ms, as (machine, sensor, disorder, ingest
    /// delay); none when the bound is fixed.
    pub fn measured_delays(&self) -> impl Iterator<Item = (&str, &str, Option<i64>, Option<i64>)> {
        let q = match self.p.bound {
            BoundMode::Auto { quantile, .. } => Some(quantile),
            BoundMode::Fixed(_) => None,
        };
        self.machines.iter().filter(move |_| q.is_some()).flat_map(move |m| {
            m.sensor_index.iter().map(move |(sensor, &si)| {
                let (disorder, delay) = m.sensors[si as usize].measured(q.unwrap_or(1.0));
                (m.name.as_str(), sensor.as_str(), disorder, delay)
            })
        })
    }

    pub fn state_size(&self) -> StateSize {
        StateSize {
            machines: self.machines.len(),
            sensors: self.machines.iter().map(|m| m.sensors.len()).sum(),
            high_events: self.books().map(IncidentBook::high_len).sum(),
            incidents: self.books().map(|b| b.incidents().count()).sum(),
            members: self.books().map(IncidentBook::member_len).sum(),
            dedup_ids: self.dedup.len(),
        }
    }

    /// Each rule's part of the state, measurement rules then composite rules, in configuration
    /// order, by name: high events, incidents and members over every machine (a composite rule
    /// holds no high events; its members are the member incidents it holds). The rest of
    /// [`StateSize`] is shared by the rules and left at 0 here.
    pub fn rule_sizes(&self) -> Vec<(&str, StateSize)> {
        let rules = self.p.rules.iter().enumerate().map(|(r, rule)| {
            let books = || self.machines.iter().filter_map(move |m| m.books().nth(r));
            let size = StateSize {
                high_events: books().map(IncidentBook::high_len).sum(),
                incidents: books().map(|b| b.incidents().count()).sum(),
                members: books().map(IncidentBook::member_len).sum(),
                ..StateSize::default()
            };
            (rule.name.as_str(), size)
        });
        let composites = self.p.composites.iter().enumerate().map(|(c, rule)| {
            let books = || self.machines.iter().filter_map(move |m| m.composites.get(c));
            let size = StateSize {
                incidents: books().map(|b| b.incidents().count()).sum(),
                members: books().map(CompositeBook::member_len).sum(),
                ..StateSize::default()
            };
            (rule.name.as_str(), size)
        });
        rules.chain(composites).collect()
    }

    fn books(&self) -> impl Iterator<Item = &IncidentBook> {
        self.machines.iter().flat_map(Machine::books)
    }

    /// The rules that counted the event [`Engine::on_event`] decided last, in rule order, each
    /// with the incident the event then belonged to (empty when it counted for none, and after
    /// a tick).
    pub fn counted_by(&self) -> &[RuleCount] {
        &self.counted_by
    }

    /// Ingest time passes with no record (a trace `tick`, or the daemon's timer).
    pub fn tick(&mut self, at: i64, out: &mut Vec<AlertRecord>) {
        self.counted_by.clear();
        self.advance_to(at, out);
    }

    /// One event, validated by the parser, arriving at ingest time `at`.
    pub fn on_event(&mut self, at: i64, ev: &Event, out: &mut Vec<AlertRecord>) -> Verdict {
        self.counted_by.clear();
        self.advance_to(at, out);
        let now = self.now;
        if ev.ts_ms > now.saturating_add(self.p.max_future_ms) {
            return Verdict::Rejected(Rejection::new(
                Reason::ClockFuture,
                format!(
                    "event {} ts_ms {} ({}) is {} ahead of ingest time {} (max_future {})",
                    ev.event_id,
                    ev.ts_ms,
                    crate::timefmt::time(ev.ts_ms),
                    crate::timefmt::duration(ev.ts_ms - now),
                    crate::timefmt::time(now),
                    crate::timefmt::duration(self.p.max_future_ms)
                ),
            ));
        }
        // The machine and sensor as known already (looked up once: nothing is created before the
        // event is found new), and their names' hashes for the fingerprint.
        let known = self.by_name.get(ev.machine.as_str()).copied();
        let known_sensor = known.and_then(|mi| {
            let m = &self.machines[mi as usize];
            m.sensor_index.get(ev.sensor.as_str()).copied()
        });
        let (machine_hash, sensor_hash) = match (known, known_sensor) {
            (Some(mi), Some(si)) => {
                let m = &self.machines[mi as usize];
                (m.name_hash, m.sensor_hashes[si as usize])
            }
            (Some(mi), None) => (self.machines[mi as usize].name_hash, name_hash(&ev.sensor)),
            _ => (name_hash(&ev.machine), name_hash(&ev.sensor)),
        };
        let fingerprint = ev.fingerprint_with(machine_hash, sensor_hash);
        let id = IdKey::of(&ev.event_id);
        let (machines, lateness) = (&self.machines, self.p.allowed_lateness_ms);
        match self.dedup.check_key(id, fingerprint, |m| horizon_of(machines, lateness, m)) {
            Seen::Duplicate => return Verdict::Duplicate,
            Seen::Conflict => {
                return Verdict::Rejected(Rejection::new(
                    Reason::IdConflict,
                    format!("event_id {} was accepted before with different content", ev.event_id),
                ))
            }
            Seen::New => {}
        }
        let mi = match known {
            Some(mi) => mi,
            None => self.add_machine(&ev.machine, machine_hash),
        };
        let si = match known_sensor {
            Some(si) => si,
            None => self.add_sensor(mi, &ev.sensor, sensor_hash, now),
        };
        let m = &self.machines[mi as usize];
        let late = ev.ts_ms < m.wm;
        let too_late = ev.ts_ms < m.wm.saturating_sub(self.p.allowed_lateness_ms);
        let mut id_shared: Option<Arc<str>> = None;
        for r in 0..self.p.rules.len() {
            let Some(reading) = (!too_late).then(|| self.is_high(r, mi, ev)).flatten() else {
                continue;
            };
            let (rule, m) = (&self.p.rules[r], &mut self.machines[mi as usize]);
            let ctx = ctx(&self.p, rule, (&m.name, &m.asset), m.wm, now, Some(&ev.event_id), late);
            let sensor = m.sensor_names[si as usize].clone();
            let id = id_shared.get_or_insert_with(|| Arc::from(ev.event_id.as_str())).clone();
            let item = EvidenceItem::with_names(ev, reading, id, sensor);
            let book = book_of(&mut m.book, &mut m.more_books, r);
            book.add(item, &ctx, out);
            let incident = book.incident_of(ev.ts_ms, rule.window_ms).map(str::to_owned);
            self.counted_by.push(RuleCount { rule: r, incident });
        }
        let counted = !self.counted_by.is_empty();
        if counted && !self.p.composites.is_empty() {
            self.feed_composites(mi, ev, out);
        }
        self.observe(mi, si, ev, now);
        self.refresh(mi, Some(&ev.event_id), out);
        if !too_late {
            self.dedup.remember_key(id, fingerprint, ev.ts_ms, mi);
            let (machines, lateness) = (&self.machines, self.p.allowed_lateness_ms);
            self.dedup.maybe_sweep(|m| horizon_of(machines, lateness, m));
        }
        if too_late {
            Verdict::TooLate
        } else if late {
            Verdict::LateApplied { counted }
        } else {
            Verdict::Applied { counted }
        }
    }

    /// A machine not seen before; `hash` is `name_hash(name)`.
    fn add_machine(&mut self, name: &str, hash: u64) -> u32 {
        let i = self.machines.len() as u32;
        let thresholds = self.p.thresholds_of(name);
        self.machines.push(Machine {
            name: name.to_string(),
            threshold: thresholds[0],
            more_books: vec![IncidentBook::default(); thresholds.len() - 1],
            composites: vec![CompositeBook::default(); self.p.composites.len()],
            thresholds,
            sensor_index: HashMap::default(),
            sensors: Vec::new(),
            in_heap: Vec::new(),
            idle: Vec::new(),
            idle_count: 0,
            wm: i64::MIN,
            book: IncidentBook::default(),
            name_hash: hash,
            sensor_hashes: Vec::new(),
            sensor_names: Vec::new(),
            asset: self.p.asset_of(name),
        });
        self.by_name.insert(name.to_string(), i);
        i
    }

    /// The measurement rule `r` read (value and unit, for the evidence), when the event counts
    /// for it: it carries the rule's measurement, of a counted quality and clock state, at or
    /// above the machine's threshold in the rule's unit.
    fn is_high(&self, r: usize, mi: u32, ev: &Event) -> Option<(f64, MeasureUnit)> {
        let threshold = self.machines[mi as usize].thresholds[r];
        match judge::judge_with(&self.p.rules[r], self.readers[r], threshold, ev) {
            judge::Judgement::Counts(value, unit) => Some((value, unit)),
            _ => None,
        }
    }

    /// A sensor of machine `mi` not seen before, first seen at ingest time `now`; `hash` is
    /// `name_hash(name)`.
    fn add_sensor(&mut self, mi: u32, name: &str, hash: u64, now: i64) -> u32 {
        let m = &mut self.machines[mi as usize];
        let si = m.sensors.len() as u32;
        m.sensor_index.insert(name.to_string(), si);
        m.sensor_hashes.push(hash);
        m.sensor_names.push(Arc::from(name));
        m.sensors.push(SensorClock::new(self.p.bound, now));
        m.in_heap.push(false);
        m.idle.push(false);
        si
    }

    /// Sensor `si` of machine `mi` observes the event.
    fn observe(&mut self, mi: u32, si: u32, ev: &Event, now: i64) {
        let (bound, idle_timeout) = (self.p.bound, self.p.idle_timeout_ms);
        let m = &mut self.machines[mi as usize];
        let si = si as usize;
        m.sensors[si].observe(ev.ts_ms, now, bound, idle_timeout);
        if m.idle[si] {
            m.idle[si] = false;
            m.idle_count -= 1;
            if m.idle_count == 0 {
                self.time_driven.remove(&mi);
            }
        }
        if !m.in_heap[si] {
            m.in_heap[si] = true;
            self.deadlines.push(Reverse((now.saturating_add(idle_timeout), mi, si as u32)));
        }
    }

    /// Recomputes a machine's watermark and publishes what became due.
    fn refresh(&mut self, mi: u32, caused_by: Option<&str>, out: &mut Vec<AlertRecord>) {
        let now = self.now;
        let m = &mut self.machines[mi as usize];
        let wm = watermark::machine_watermark(m.sensors.iter(), now, self.p.idle_timeout_ms);
        if wm <= m.wm {
            return;
        }
        m.wm = wm;
        for (r, rule) in self.p.rules.iter().enumerate() {
            let ctx = ctx(&self.p, rule, (&m.name, &m.asset), wm, now, caused_by, false);
            book_of(&mut m.book, &mut m.more_books, r).advance(
                &ctx,
                self.p.allowed_lateness_ms,
                out,
            );
        }
        if !m.composites.is_empty() {
            let on = composites::On { machine: &m.name, asset: &m.asset, wm, now, caused_by };
            composites::advance(&self.p, &mut m.composites, &on, out);
        }
    }

    /// The composite rules of machine `mi` take the member incidents the event just counted
    /// changed.
    fn feed_composites(&mut self, mi: u32, ev: &Event, out: &mut Vec<AlertRecord>) {
        let m = &mut self.machines[mi as usize];
        let member_books: Vec<&IncidentBook> =
            std::iter::once(&m.book).chain(&m.more_books).collect();
        let on = composites::On {
            machine: &m.name,
            asset: &m.asset,
            wm: m.wm,
            now: self.now,
            caused_by: Some(&ev.event_id),
        };
        let counted = &self.counted_by;
        composites::feed(&self.p, &mut m.composites, &member_books, counted, ev.ts_ms, &on, out);
    }

    /// Moves ingest time forward to `at` and lets idleness move watermarks.
    fn advance_to(&mut self, at: i64, out: &mut Vec<AlertRecord>) {
        if at <= self.now {
            return;
        }
        self.now = at;
        let idle_timeout = self.p.idle_timeout_ms;
        while let Some(&Reverse((due, mi, si))) = self.deadlines.peek() {
            if due > at {
                break;
            }
            self.deadlines.pop();
            let m = &mut self.machines[mi as usize];
            let real_due = m.sensors[si as usize].last_ingest.saturating_add(idle_timeout);
            if real_due > at {
                self.deadlines.push(Reverse((real_due, mi, si)));
            } else {
                m.in_heap[si as usize] = false;
                m.idle[si as usize] = true;
                m.idle_count += 1;
                self.time_driven.insert(mi);
            }
        }
        let driven: Vec<u32> = self.time_driven.iter().copied().collect();
        for mi in driven {
            self.refresh(mi, None, out);
        }
    }
}

/// Rule `r`'s incident book of a machine, given its first book and the further ones (borrowed
/// apart from the machine's names).
fn book_of<'a>(
    book: &'a mut IncidentBook,
    more_books: &'a mut [IncidentBook],
    r: usize,
) -> &'a mut IncidentBook {
    match r {
        0 => book,
        _ => &mut more_books[r - 1],
    }
}

/// For each rule of `new`, the index in `old` (a snapshot's rule names) of the book it goes on
/// from: the rule of the same name; for the first rule, when none has its name, the first of
/// `old` unless that one is still configured under its name (a renamed or changed single rule
/// goes on from the state decided so far, docs/decisions/0057-a-rule-change-at-start-up.md). A
/// rule with no book starts empty, and a book of a rule no longer configured is dropped.
pub fn continues_from<S: AsRef<str>>(old: &[String], new: &[S]) -> Vec<Option<usize>> {
    let kept = |name: &str| new.iter().any(|r| r.as_ref() == name);
    new.iter()
        .map(AsRef::as_ref)
        .enumerate()
        .map(|(i, r)| match old.iter().position(|o| o == r) {
            Some(j) => Some(j),
            None if i == 0 && old.first().is_some_and(|o| !kept(o)) => Some(0),
            None => None,
        })
        .collect()
}

/// Events before a machine's horizon (`watermark - allowed_lateness`) are too late.
fn horizon_of(machines: &[Machine], allowed_lateness_ms: i64, m: u32) -> i64 {
    machines.get(m as usize).map_or(i64::MIN, |m| m.wm.saturating_sub(allowed_lateness_ms))
}

fn ctx<'a>(
    p: &'a Params,
    rule: &'a RuleParams,
    (machine, asset): (&'a str, &'a Arc<AssetTags>),
    wm: i64,
    now: i64,
    caused_by: Option<&'a str>,
    late: bool,
) -> Ctx<'a> {
    Ctx {
        gateway: &p.gateway,
        rule: &rule.name,
        rule_version: &rule.version,
        machine,
        asset,
        window_ms: rule.window_ms,
        count: rule.count as usize,
        also_max: rule.also_max as usize,
        early: rule.early,
        wm,
        now,
        caused_by,
        late,
    }
}

#[cfg(test)]
mod tests;
