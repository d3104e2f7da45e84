//! The events of a trace that the rule counts, derived from the trace and its configuration alone:
//! no linegate code, only serde_json, toml, humantime and the rules the documents state
//! (docs/contracts.md sections 2, 4, 5, 7 and 8; docs/event-schema-2.md; the frame arithmetic of
//! src/stamp/mod.rs's documentation; docs/decisions/ on watermarks, duplicates, stalled frames
//! and the ingest time of derived lines). The features of a derived event (section 12) are not
//! computed here: where a trace has a prediction, `fixtures/expected/NAME.features.json` written
//! by the independent numpy reference (`fixtures/cwru/features_reference.py`), each frame's
//! features are read from it; without one, derived events carry none. [`Applied::incidents`]
//! hands them to the brute-force
//! reference of [`super::incidents`], so an expected alert file can be checked against the
//! contract instead of against the code that wrote it.
//!
//! Where the answer would hang on a detail this model leaves out, it refuses (panics naming the
//! line) rather than guess:
//! - with `watermark_bound = "auto"` the bound is only known to lie within `auto_bound_min` and
//!   `auto_bound_max`: an event late enough that the two horizons disagree on it is refused;
//! - the crate brings its machine watermarks up to date at least at every event of the machine
//!   and at most at every line: an event that the two schedules would judge differently is
//!   refused;
//! - samples that overlap the sensor's last ones, a sensor resuming inside a second it already
//!   flushed, a frame mixing units, and a value within 1e-9 of its threshold are refused.
//!
//! Rejections are modelled by the rules of sections 2 and 7, without their reasons (the counts
//! of `--summary` say which it was); a duplicate is compared on the event's fields but `event_id`
//! and `replayed`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::incidents::{reference, FinalIncident};

/// Events before 2000-01-01 are `clock_implausible`.
const MIN_PLAUSIBLE_TS_MS: i64 = 946_684_800_000;
/// 1 g in m/s2.
const G: f64 = 9.80665;
/// The features an event may carry (docs/contracts.md section 12).
const FEATURES: [&str; 9] = [
    "accel_rms",
    "accel_peak",
    "velocity_rms",
    "crest_factor",
    "kurtosis",
    "env_bpfo",
    "env_bpfi",
    "env_bsf",
    "env_ftf",
];
/// Clock states from the most to the least trusted (docs/contracts.md section 3).
const CLOCKS: [&str; 5] = ["synced", "holdover", "unknown", "unsynced", "stepped"];

/// What decides, read from a configuration file with `toml` and `humantime` (the defaults are
/// those docs/contracts.md section 9 documents): the one `[rule]`, or the first `[[rule]]` with
/// the others in `others`, each decided on its own over the same applied events (section 4).
#[derive(Debug, Clone)]
pub struct Rules {
    pub gateway: String,
    /// The rule's name (`high-vibration` by default).
    pub name: String,
    /// The further `[[rule]]` tables, each as a `Rules` of its own (with no `others`).
    pub others: Vec<Rules>,
    pub metric: String,
    pub unit: String,
    pub threshold: f64,
    pub thresholds: BTreeMap<String, f64>,
    pub window_ms: i64,
    pub count: usize,
    pub count_quality: Vec<String>,
    pub count_clock: Vec<String>,
    pub also_max: usize,
    /// The watermark bound: fixed (`min == max`) or `auto` within its limits.
    pub bound_min_ms: i64,
    pub bound_max_ms: i64,
    pub allowed_lateness_ms: i64,
    pub idle_timeout_ms: i64,
    pub max_future_ms: i64,
}

impl Rules {
    pub fn load(path: &Path) -> Rules {
        let text = std::fs::read_to_string(path).unwrap();
        let doc: toml::Table =
            toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let tables: Vec<toml::Table> = match doc.get("rule") {
            // Composite rules are held to their own reference (`super::composite`).
            Some(toml::Value::Array(a)) => a
                .iter()
                .map(|t| t.as_table().unwrap().clone())
                .filter(|t| !super::composite::is_composite(t))
                .collect(),
            Some(t) => vec![t.as_table().unwrap().clone()],
            None => vec![toml::Table::new()],
        };
        let mut rules = tables.iter().map(|t| Rules::of_table(path, &doc, t));
        let first = rules.next().unwrap();
        Rules { others: rules.collect(), ..first }
    }

    /// Every rule: this one, then `others`.
    pub fn all(&self) -> impl Iterator<Item = &Rules> {
        std::iter::once(self).chain(&self.others)
    }

    /// One rule's table of configuration `doc` (at `path`).
    fn of_table(path: &Path, doc: &toml::Table, rule: &toml::Table) -> Rules {
        let rule = rule.clone();
        let section = |name: &str| doc.get(name).and_then(|v| v.as_table()).cloned();
        let time = section("time").unwrap_or_default();
        let dur = |t: &toml::Table, key: &str, default: Option<&str>| -> i64 {
            let text = match t.get(key) {
                Some(v) => v.as_str().unwrap_or_else(|| panic!("{key}: not a string")).to_string(),
                None => default.unwrap_or_else(|| panic!("{}: no {key}", path.display())).into(),
            };
            humantime::parse_duration(&text).unwrap().as_millis() as i64
        };
        let strings = |key: &str, default: &[&str]| -> Vec<String> {
            rule.get(key).map_or(default.iter().map(|s| s.to_string()).collect(), |v| {
                v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
            })
        };
        let text = |key: &str| rule[key].as_str().unwrap().to_string();
        let metric = text("metric");
        // The unit a rule reads in: its own, else the one its metric is measured in.
        let unit = rule.get("unit").and_then(|u| u.as_str()).map_or_else(
            || match metric.as_str() {
                "velocity_rms" => "mm/s".to_string(),
                "accel_rms" | "accel_peak" => "g".to_string(),
                _ => "1".to_string(),
            },
            str::to_string,
        );
        // ISO 20816-3 zone boundaries in mm/s (docs/contracts.md section 12), by group and
        // foundation, for B, C and D.
        let assets = section("machines").unwrap_or_default();
        let zone = |machine: &str, name: &str| -> f64 {
            let Some(a) = assets.get(machine).and_then(|a| a.as_table()) else {
                return f64::INFINITY; // no asset entry: the zone does not resolve, never counts
            };
            let group = a.get("iso_group").and_then(|g| g.as_integer());
            let foundation = a.get("foundation").and_then(|f| f.as_str());
            let bounds = match (group, foundation) {
                (Some(1), Some("rigid")) => [2.3, 4.5, 7.1],
                (Some(1), Some("flexible")) => [3.5, 7.1, 11.0],
                (Some(2), Some("rigid")) => [1.4, 2.8, 4.5],
                (Some(2), Some("flexible")) => [2.3, 4.5, 7.1],
                _ => return f64::INFINITY,
            };
            match name {
                "zone-B" => bounds[0],
                "zone-C" => bounds[1],
                "zone-D" => bounds[2],
                other => panic!("{}: threshold {other:?} is no zone", path.display()),
            }
        };
        let number = |v: &toml::Value| v.as_float().or(v.as_integer().map(|i| i as f64));
        let threshold_for = |machine: &str, v: &toml::Value| -> f64 {
            number(v).unwrap_or_else(|| zone(machine, v.as_str().unwrap()))
        };
        let default_threshold = &rule["threshold"];
        let mut thresholds: BTreeMap<String, f64> = rule
            .get("machines")
            .and_then(|m| m.as_table())
            .map_or_else(BTreeMap::new, |machines| {
                let with = machines.iter().filter_map(|(m, t)| Some((m, t.get("threshold")?)));
                with.map(|(m, t)| (m.clone(), threshold_for(m, t))).collect()
            });
        // A zone threshold resolves per machine: every machine of the asset table gets its own,
        // and a machine without an entry never counts (the default is infinite).
        if number(default_threshold).is_none() {
            for m in assets.keys() {
                if !thresholds.contains_key(m) {
                    thresholds.insert(m.clone(), threshold_for(m, default_threshold));
                }
            }
        }
        let auto = time.get("watermark_bound").and_then(|v| v.as_str()) == Some("auto");
        let (bound_min_ms, bound_max_ms) = if auto {
            (dur(&time, "auto_bound_min", Some("1s")), dur(&time, "auto_bound_max", Some("60s")))
        } else {
            let b = dur(&time, "watermark_bound", None);
            (b, b)
        };
        Rules {
            gateway: doc["gateway"]["id"].as_str().unwrap().to_string(),
            name: rule.get("name").map_or("high-vibration", |n| n.as_str().unwrap()).to_string(),
            others: Vec::new(),
            threshold: number(default_threshold).unwrap_or(f64::INFINITY),
            metric,
            unit,
            thresholds,
            window_ms: dur(&rule, "window", Some("2m")),
            count: rule.get("count").map_or(3, |c| c.as_integer().unwrap() as usize),
            count_quality: strings("count_quality", &["good", "uncertain"]),
            count_clock: strings("count_clock", &CLOCKS),
            also_max: rule.get("also_max").map_or(100, |n| n.as_integer().unwrap() as usize),
            bound_min_ms,
            bound_max_ms,
            allowed_lateness_ms: dur(&time, "allowed_lateness", None),
            idle_timeout_ms: dur(&time, "idle_timeout", None),
            max_future_ms: dur(&time, "max_future", Some("5s")),
        }
    }

    /// Whether an applied event counts for the rule (docs/contracts.md sections 3 and 4).
    fn is_high(&self, e: &Ev, line: usize) -> bool {
        // The prediction's features agree with the crate's within 1e-6 relative
        // (tests/features_reference.rs), event values exactly.
        let close = if e.metric == self.metric { 1e-9 } else { 1e-4 };
        if !self.count_quality.contains(&e.quality) || !self.count_clock.contains(&e.clock) {
            return false;
        }
        // The event's value when its metric is the rule's, else the feature of that name
        // (docs/contracts.md section 4); a feature is in the event's unit for the two
        // accelerations, in mm/s for velocity, dimensionless otherwise.
        let (read, unit) = if e.metric == self.metric {
            (e.value, e.unit.as_str())
        } else {
            let Some(&(_, v)) = e.features.iter().find(|(name, _)| *name == self.metric) else {
                return false;
            };
            let unit = match self.metric.as_str() {
                "accel_rms" | "accel_peak" => e.unit.as_str(),
                "velocity_rms" => "mm/s",
                _ => "1",
            };
            (v, unit)
        };
        let value = match (unit, self.unit.as_str()) {
            (a, b) if a == b => read,
            ("m/s2", "g") => read / G,
            ("g", "m/s2") => read * G,
            _ => return false,
        };
        let threshold = *self.thresholds.get(&e.machine).unwrap_or(&self.threshold);
        assert!(
            threshold.is_infinite() || (value - threshold).abs() > close * threshold.abs().max(1.0),
            "line {line}: {} is {value} {}, too close to its threshold {threshold} to call",
            e.id,
            self.unit
        );
        value >= threshold
    }
}

/// What `replay --summary` counts, as this model sees the trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub records: u64,
    pub accepted: u64,
    pub duplicates: u64,
    pub too_late: u64,
    pub quarantined: u64,
    pub events_derived: u64,
}

/// A trace's applied high events per machine, as `(ts_ms, event_id)`, and its counts.
#[derive(Debug, Default)]
pub struct Applied {
    /// The first rule's.
    pub high: BTreeMap<String, Vec<(i64, String)>>,
    /// Each further rule's (`Rules::others`), in their order.
    pub others: Vec<BTreeMap<String, Vec<(i64, String)>>>,
    pub counts: Counts,
}

impl Applied {
    /// The contract's final incidents of the first rule over its high events, as alert records
    /// list them.
    pub fn incidents(&self, rules: &Rules) -> Vec<FinalIncident> {
        incidents_of(&self.high, rules)
    }

    /// Every rule's name and final incidents, in rule order.
    pub fn rule_incidents(&self, rules: &Rules) -> Vec<(String, Vec<FinalIncident>)> {
        let highs = std::iter::once(&self.high).chain(&self.others);
        rules.all().zip(highs).map(|(r, h)| (r.name.clone(), incidents_of(h, r))).collect()
    }
}

fn incidents_of(high: &BTreeMap<String, Vec<(i64, String)>>, rules: &Rules) -> Vec<FinalIncident> {
    let mut out: Vec<FinalIncident> = high
        .iter()
        .flat_map(|(m, h)| reference(m, h, rules.window_ms, rules.count))
        .map(|i| i.listing(rules.also_max))
        .collect();
    out.sort();
    out
}

/// One event as the rule sees it (a schema-2 event upcast to its value).
#[derive(Debug, Clone)]
struct Ev {
    id: String,
    machine: String,
    sensor: String,
    ts: i64,
    clock: String,
    metric: String,
    value: f64,
    unit: String,
    quality: String,
    /// `features`: name and value, in the event's order.
    features: Vec<(String, f64)>,
    /// Every field but `event_id` and `replayed`, for telling a duplicate from an id conflict.
    content: String,
}

/// The applied high events and counts of `trace` under `rules`.
pub fn derive(trace: &Path, rules: &Rules) -> Applied {
    let text = std::fs::read_to_string(trace).unwrap();
    let mut model = Model::new(rules.clone());
    model.predicted = predicted_features(trace);
    for (i, line) in text.lines().enumerate() {
        model.line(i + 1, line);
    }
    model.out
}

struct Model {
    rules: Rules,
    now: i64,
    out: Applied,
    /// Watermarks with the largest bound, brought up to date only at the machine's events: never
    /// above the crate's.
    low: Watermarks,
    /// Watermarks with the smallest bound, brought up to date at every line: never below it.
    high: Watermarks,
    /// Accepted ids: their content, machine and event time.
    seen: BTreeMap<String, (String, String, i64)>,
    streams: BTreeMap<(String, String), Stream>,
    /// The machine each sensor name belongs to, for derived ids.
    owner: BTreeMap<String, String>,
    /// The predicted features of derived events by sensor and seq, with their event time.
    predicted: Predicted,
}

impl Model {
    fn new(rules: Rules) -> Model {
        let (lo, hi, idle) = (rules.bound_max_ms, rules.bound_min_ms, rules.idle_timeout_ms);
        Model {
            low: Watermarks::new(lo, idle),
            high: Watermarks::new(hi, idle),
            rules,
            now: i64::MIN,
            out: Applied::default(),
            seen: BTreeMap::new(),
            streams: BTreeMap::new(),
            owner: BTreeMap::new(),
            predicted: BTreeMap::new(),
        }
    }

    fn line(&mut self, n: usize, line: &str) {
        self.out.counts.records += 1;
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else {
            // Not JSON (or NaN): rejected, but an `at` at its start still moves ingest time.
            if let Some(at) = leading_at(line) {
                self.advance(n, at);
            }
            return self.reject();
        };
        let Some(at) = obj.get("at").and_then(Value::as_i64) else { return self.reject() };
        self.advance(n, at);
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        let fields: &[&str] = match kind {
            "tick" => &["at", "kind"],
            "event" => &["at", "kind", "event"],
            "samples" => &[
                "at", "kind", "machine", "sensor", "t0_ms", "rate_hz", "unit", "axis", "clock",
                "data",
            ],
            _ => return self.reject(),
        };
        if obj.keys().any(|k| !fields.contains(&k.as_str())) {
            return self.reject();
        }
        match kind {
            "event" => match event(&obj["event"]) {
                Some(e) => self.decide(n, e),
                None => self.reject(),
            },
            "samples" => self.samples(n, &obj),
            _ => {}
        }
    }

    fn reject(&mut self) {
        self.out.counts.quarantined += 1;
    }

    /// Ingest time moves to `at` (never back); stalled sensors' frames are decided at the time
    /// each became due, earliest first.
    fn advance(&mut self, line: usize, at: i64) {
        let at = self.now.max(at);
        let after = self.rules.idle_timeout_ms / 2;
        loop {
            let due = self
                .streams
                .iter()
                .filter(|(_, s)| s.open.is_some())
                .map(|(k, s)| (s.last_at + after, k.clone()))
                .min();
            match due {
                Some((due, key)) if due <= at => {
                    self.now = self.now.max(due);
                    self.high.refresh_all(self.now);
                    self.emit(line, &key);
                }
                _ => break,
            }
        }
        self.now = at;
        self.high.refresh_all(self.now);
    }

    /// A received or derived event at the current ingest time.
    fn decide(&mut self, line: usize, e: Ev) {
        let r = &self.rules;
        if e.ts > self.now + r.max_future_ms {
            return self.reject(); // clock_future: before dedup, moves nothing
        }
        if let Some((content, machine, ts)) = self.seen.get(&e.id).cloned() {
            if self.remembered(line, &e.id, &machine, ts) {
                if content == e.content {
                    self.out.counts.duplicates += 1;
                } else {
                    self.reject(); // id_conflict: the first copy stands
                }
                return;
            }
        }
        let low = self.low.machine(&e.machine, self.now);
        self.low.observe(&e, self.now);
        self.high.observe(&e, self.now);
        let high = self.high.machine(&e.machine, self.now);
        let horizon = |wm: Option<i64>| wm.map(|w| w - self.rules.allowed_lateness_ms);
        let too_late = match (horizon(low), horizon(high)) {
            (Some(lo), _) if e.ts < lo => true,
            (_, Some(hi)) if e.ts >= hi => false,
            (_, None) => false,
            (lo, hi) => panic!(
                "line {line}: whether {} (ts {}) is too late depends on details not modelled \
                 (horizon between {lo:?} and {hi:?})",
                e.id, e.ts
            ),
        };
        self.seen.insert(e.id.clone(), (e.content.clone(), e.machine.clone(), e.ts));
        self.out.counts.accepted += 1;
        if too_late {
            self.out.counts.too_late += 1;
        } else {
            self.out.others.resize_with(self.rules.others.len(), BTreeMap::new);
            for (i, r) in self.rules.others.iter().enumerate() {
                if r.is_high(&e, line) {
                    let machine = self.out.others[i].entry(e.machine.clone()).or_default();
                    machine.push((e.ts, e.id.clone()));
                }
            }
            if self.rules.is_high(&e, line) {
                self.out.high.entry(e.machine.clone()).or_default().push((e.ts, e.id));
            }
        }
    }

    /// Whether an id of `machine` at event time `ts` is still at or after its machine's horizon
    /// (docs/decisions/0003-duplicates.md).
    fn remembered(&mut self, line: usize, id: &str, machine: &str, ts: i64) -> bool {
        let l = self.rules.allowed_lateness_ms;
        let lo = self.low.last(machine).map(|w| w - l);
        let hi = self.high.machine(machine, self.now).map(|w| w - l);
        match (lo, hi) {
            (_, None) => true,
            (_, Some(hi)) if ts >= hi => true,
            (Some(lo), _) if ts < lo => false,
            _ => panic!("line {line}: whether {id} is remembered depends on details not modelled"),
        }
    }

    fn samples(&mut self, line: usize, obj: &Map<String, Value>) {
        let ok = (|| {
            let machine = ident(obj.get("machine")?)?.to_string();
            let sensor = ident(obj.get("sensor")?)?.to_string();
            let t0 = obj.get("t0_ms")?.as_i64()?;
            let rate = obj.get("rate_hz")?.as_f64().filter(|r| *r > 0.0 && *r <= 1e6)?;
            let unit = obj.get("unit")?.as_str().filter(|u| ["g", "m/s2", "mm/s"].contains(u))?;
            if !matches!(obj.get("axis"), None | Some(Value::Null | Value::String(_))) {
                return None;
            }
            let clock = match obj.get("clock") {
                None | Some(Value::Null) => "unknown".to_string(),
                Some(c) => clock(c)?.0,
            };
            let data: Option<Vec<f64>> =
                obj.get("data")?.as_array()?.iter().map(Value::as_f64).collect();
            Some((machine, sensor, t0, rate, unit.to_string(), clock, data?))
        })();
        let Some((machine, sensor, t0, rate, unit, clock, data)) = ok else { return self.reject() };
        if self.owner.entry(sensor.clone()).or_insert(machine.clone()) != &machine {
            return self.reject(); // sensor_conflict
        }
        let key = (machine, sensor);
        let stream = self.streams.entry(key.clone()).or_default();
        if stream.last_t.is_some_and(|last| (t0 as f64) < last + (1000.0 / rate) / 2.0) {
            return self.reject(); // samples_overlap
        }
        stream.last_at = self.now;
        for (i, x) in data.into_iter().enumerate() {
            let t = t0 as f64 + (i as f64 * 1000.0) / rate;
            let k = (t / 1000.0).floor() as i64;
            let stream = &self.streams[&key];
            assert!(
                stream.flushed.is_none_or(|f| k > f),
                "line {line}: {key:?} resumes inside second {k}, already flushed: not modelled"
            );
            if stream.open.as_ref().is_some_and(|f| f.k < k) {
                self.emit(line, &key);
            }
            let stream = self.streams.get_mut(&key).unwrap();
            stream.last_t = Some(t);
            let frame = stream.open.get_or_insert_with(|| Frame {
                k,
                xs: Vec::new(),
                rates: Vec::new(),
                unit: unit.clone(),
                clock: clock.clone(),
            });
            assert_eq!(
                frame.unit, unit,
                "line {line}: a frame of {key:?} mixes units: not modelled"
            );
            frame.xs.push(x);
            frame.rates.push(rate);
            if rank(&clock) > rank(&frame.clock) {
                frame.clock = clock.clone();
            }
        }
    }

    /// The open frame of `key` becomes a derived event, decided now.
    fn emit(&mut self, line: usize, key: &(String, String)) {
        let stream = self.streams.get_mut(key).unwrap();
        let f = stream.open.take().unwrap();
        stream.flushed = Some(f.k);
        stream.seq += 1;
        let n = f.xs.len() as f64;
        let mean = f.xs.iter().sum::<f64>() / n;
        let value = if self.rules.metric == "accel_peak" {
            f.xs.iter().map(|x| (x - mean).abs()).fold(0.0, f64::max)
        } else {
            (f.xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt()
        };
        let ts = (f.k + 1) * 1000;
        let features = match self.predicted.get(&(key.1.clone(), stream.seq)) {
            Some((at, features)) => {
                assert_eq!(
                    *at, ts,
                    "line {line}: {key:?} frame {}: the prediction's ts",
                    stream.seq
                );
                features.clone()
            }
            None => Vec::new(),
        };
        let expected = (f.rates[0] + 0.5).floor() as usize;
        let one_rate = f.rates.iter().all(|r| *r == f.rates[0]);
        let good = one_rate && f.xs.len() >= 2 && f.xs.len() >= expected;
        let ev = Ev {
            id: format!("{}.{}.{}", self.rules.gateway, key.1, stream.seq),
            machine: key.0.clone(),
            sensor: key.1.clone(),
            ts,
            clock: f.clock,
            // The rule's metric where samples give it, else accel_rms (its features carry the
            // rest).
            metric: if self.rules.metric == "accel_peak" { "accel_peak" } else { "accel_rms" }
                .into(),
            value,
            unit: f.unit,
            quality: if good { "good" } else { "uncertain" }.into(),
            features,
            content: format!("derived {key:?} {}", stream.seq),
        };
        self.out.counts.events_derived += 1;
        self.decide(line, ev);
    }
}

/// Predicted features by sensor and seq: the frame's event time and its features by name.
type Predicted = BTreeMap<(String, u64), (i64, Vec<(String, f64)>)>;

/// The features of every derived event of `trace` as the numpy reference predicts them, from
/// `fixtures/expected/NAME.features.json` beside the trace's directory, if there is one.
fn predicted_features(trace: &Path) -> Predicted {
    let stem = trace.file_stem().unwrap().to_str().unwrap();
    let path = trace.parent().unwrap().join(format!("../expected/{stem}.features.json"));
    let Ok(text) = std::fs::read_to_string(&path) else { return BTreeMap::new() };
    let doc: Value = serde_json::from_str(&text).unwrap();
    let frames =
        doc["frames"].as_array().unwrap_or_else(|| panic!("{}: no frames", path.display()));
    let mut out = BTreeMap::new();
    for f in frames {
        let features = FEATURES
            .iter()
            .filter_map(|name| Some((name.to_string(), f.get(*name)?.as_f64()?)))
            .collect();
        let key = (f["sensor"].as_str().unwrap().to_string(), f["seq"].as_u64().unwrap());
        out.insert(key, (f["ts_ms"].as_i64().unwrap(), features));
    }
    out
}

/// One sensor's raw samples: the frame being filled and what the frame arithmetic remembers.
#[derive(Debug, Default)]
struct Stream {
    open: Option<Frame>,
    /// The last frame emitted, for a sensor resuming inside it.
    flushed: Option<i64>,
    /// Event time of the last sample taken.
    last_t: Option<f64>,
    /// Ingest time of its last samples.
    last_at: i64,
    seq: u64,
}

#[derive(Debug)]
struct Frame {
    k: i64,
    xs: Vec<f64>,
    rates: Vec<f64>,
    unit: String,
    clock: String,
}

/// Sensor and machine watermarks with one bound (docs/contracts.md section 5,
/// docs/decisions/0001-event-time-ingest-time-and-watermarks.md).
struct Watermarks {
    bound: i64,
    idle: i64,
    sensors: BTreeMap<(String, String), Sensor>,
    machines: BTreeMap<String, i64>,
}

struct Sensor {
    max_ts: i64,
    wm: i64,
    last_at: i64,
}

impl Sensor {
    fn idle(&self, now: i64, idle: i64) -> bool {
        now - self.last_at >= idle
    }

    fn at(&self, now: i64, idle: i64) -> i64 {
        if self.idle(now, idle) {
            self.wm + (now - self.last_at)
        } else {
            self.wm
        }
    }
}

impl Watermarks {
    fn new(bound: i64, idle: i64) -> Self {
        Watermarks { bound, idle, sensors: BTreeMap::new(), machines: BTreeMap::new() }
    }

    fn observe(&mut self, e: &Ev, now: i64) {
        let (bound, idle) = (self.bound, self.idle);
        let key = (e.machine.clone(), e.sensor.clone());
        let s = self.sensors.entry(key).or_insert(Sensor {
            max_ts: e.ts,
            wm: e.ts - bound,
            last_at: now,
        });
        s.wm = s.at(now, idle);
        s.last_at = now;
        s.max_ts = s.max_ts.max(e.ts);
        s.wm = s.wm.max(s.max_ts - bound);
    }

    /// The machine watermark brought up to date at `now` (it never moves back).
    fn machine(&mut self, machine: &str, now: i64) -> Option<i64> {
        let idle = self.idle;
        let mine = || self.sensors.iter().filter(|((m, _), _)| m == machine).map(|(_, s)| s);
        let active = mine().filter(|s| !s.idle(now, idle)).map(|s| s.at(now, idle)).min();
        let raw = active.or_else(|| mine().map(|s| s.at(now, idle)).min())?;
        let wm = self.machines.entry(machine.to_string()).or_insert(raw);
        *wm = (*wm).max(raw);
        Some(*wm)
    }

    /// The machine watermark as last brought up to date.
    fn last(&self, machine: &str) -> Option<i64> {
        self.machines.get(machine).copied()
    }

    fn refresh_all(&mut self, now: i64) {
        let machines: Vec<String> = self.sensors.keys().map(|(m, _)| m.clone()).collect();
        for m in machines {
            self.machine(&m, now);
        }
    }
}

/// The `at` of a line that is not JSON, when it starts `{"at": <integer>,`.
fn leading_at(line: &str) -> Option<i64> {
    let rest = line.trim_start().strip_prefix('{')?.trim_start().strip_prefix("\"at\"")?;
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '-'))?;
    rest[end..].trim_start().starts_with(',').then(|| rest[..end].parse().ok())?
}

/// A machine or sensor name: 1..=64 bytes of `[A-Za-z0-9_.-]`.
fn ident(v: &Value) -> Option<&str> {
    let s = v.as_str()?;
    let ok = (1..=64).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-');
    ok.then_some(s)
}

/// A `clock` object: its state and `err_ms`.
fn clock(v: &Value) -> Option<(String, Option<u64>)> {
    let c = v.as_object()?;
    if c.keys().any(|k| k != "state" && k != "err_ms") {
        return None;
    }
    let state = c.get("state")?.as_str().filter(|s| CLOCKS.contains(s))?;
    let err = match c.get("err_ms") {
        None | Some(Value::Null) => None,
        Some(e) => Some(e.as_u64().filter(|e| *e <= u32::MAX as u64)?),
    };
    Some((state.to_string(), err))
}

fn rank(clock: &str) -> usize {
    CLOCKS.iter().position(|c| *c == clock).unwrap()
}

/// An event of schema 1 or 2 (docs/contracts.md section 2, docs/event-schema-2.md) that passes
/// every check but the clock's and the duplicates'.
fn event(v: &Value) -> Option<Ev> {
    let o = v.as_object()?;
    let schema = o.get("schema")?.as_u64().filter(|s| *s == 1 || *s == 2)?;
    let own: &[&str] = if schema == 1 { &["value"] } else { &["axes", "combine"] };
    let common = [
        "event_id", "machine", "sensor", "seq", "ts_ms", "clock", "metric", "unit", "schema",
        "quality", "samples", "replayed", "features",
    ];
    if o.keys().any(|k| !common.contains(&k.as_str()) && !own.contains(&k.as_str())) {
        return None;
    }
    let id = o.get("event_id")?.as_str().filter(|s| (1..=128).contains(&s.len()))?;
    let machine = ident(o.get("machine")?)?;
    let sensor = ident(o.get("sensor")?)?;
    let seq = o.get("seq")?.as_u64()?;
    let ts = o.get("ts_ms")?.as_i64()?;
    let (clock, err_ms) = clock(o.get("clock")?)?;
    let metric = o.get("metric")?.as_str()?;
    let unit = o.get("unit")?.as_str()?;
    let quality =
        o.get("quality")?.as_str().filter(|q| ["good", "uncertain", "bad"].contains(q))?;
    let fits = match metric {
        "accel_rms" | "accel_peak" => unit == "g" || unit == "m/s2",
        "velocity_rms" => unit == "mm/s",
        _ => false,
    };
    let samples = match o.get("samples") {
        None | Some(Value::Null) => None,
        Some(s) => {
            let s = s.as_object()?;
            let keys = ["block_seq", "from_ms", "to_ms"];
            if s.len() != 3 || !keys.iter().all(|k| s.contains_key(*k)) {
                return None;
            }
            s["block_seq"].as_u64()?;
            Some((s["from_ms"].as_i64()?, s["to_ms"].as_i64()?))
        }
    };
    if !matches!(o.get("replayed"), None | Some(Value::Null | Value::Bool(_))) {
        return None;
    }
    let features: Vec<(String, f64)> = match o.get("features") {
        None | Some(Value::Null) => Vec::new(),
        Some(f) => {
            let mut out = Vec::new();
            for (k, v) in f.as_object()? {
                let x = v.as_f64().filter(|x| x.is_finite() && *x >= 0.0)?;
                if !FEATURES.contains(&k.as_str()) {
                    return None;
                }
                out.push((k.clone(), x));
            }
            out
        }
    };
    let value = if schema == 1 {
        o.get("value")?.as_f64()?
    } else {
        let axes = o.get("axes")?.as_object()?;
        if axes.is_empty() || axes.keys().any(|k| !["x", "y", "z"].contains(&k.as_str())) {
            return None;
        }
        let xs: Option<Vec<f64>> = axes.values().map(Value::as_f64).collect();
        let xs = xs?;
        if xs.iter().any(|x| *x < 0.0) {
            return None;
        }
        match o.get("combine") {
            None | Some(Value::Null) => xs.iter().map(|x| x * x).sum::<f64>().sqrt(),
            Some(c) if c == "rss" => xs.iter().map(|x| x * x).sum::<f64>().sqrt(),
            Some(c) if c == "max" => xs.iter().copied().fold(0.0, f64::max),
            Some(_) => return None,
        }
    };
    if !fits || !value.is_finite() || value < 0.0 || ts < MIN_PLAUSIBLE_TS_MS {
        return None;
    }
    let content = format!(
        "{machine} {sensor} {seq} {ts} {clock} {err_ms:?} {metric} {:x} {unit} {schema} {quality} \
         {samples:?} {features:?}",
        value.to_bits()
    );
    Some(Ev {
        id: id.into(),
        machine: machine.into(),
        sensor: sensor.into(),
        ts,
        clock,
        metric: metric.into(),
        value,
        unit: unit.into(),
        quality: quality.into(),
        features,
        content,
    })
}
