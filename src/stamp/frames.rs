//! Cutting raw samples into one-second frames and deriving one event per frame.
//!
//! See the module documentation of [`crate::stamp`] for the exact semantics; this file holds the
//! state machine. Pure: no I/O, no clock reads; ingest time is always an argument.

use std::collections::BTreeMap;

use crate::event::features::{Feature, Features as EventFeatures};
use crate::event::rejection::{Reason, Rejection};
use crate::event::{ClockEvidence, Event, Metric, Quality, SampleRef, Unit};
use crate::features::{AccelUnit, Band, Bearing, EnvelopeMethod, Extractor, Params};
use crate::trace::SamplesRecord;

/// Frame length in milliseconds of event time.
pub const FRAME_MS: i64 = 1000;

/// The most samples an open frame keeps for its features (one second at 65 536 Hz).
pub const MAX_FRAME_SAMPLES: usize = 65_536;

/// Samples an open frame keeps beyond `ceil(rate_hz)`: a second's sample times rounded in `f64`
/// can put one more sample into it.
const SAMPLE_MARGIN: usize = 2;

/// What a machine's features depend on besides its samples (from its asset entry).
#[derive(Debug, Clone, PartialEq)]
pub struct MachineFeatures {
    /// The ISO velocity band.
    pub velocity_band: Band,
    /// Bearing and shaft speed; without them no envelope indicator is computed.
    pub bearing: Option<Bearing>,
    pub envelope_band: Band,
    pub envelope: EnvelopeMethod,
}

impl Default for MachineFeatures {
    /// A machine without an asset entry: the 10-1000 Hz velocity band, no bearing.
    fn default() -> Self {
        let p = Params::new(AccelUnit::G, 1.0);
        MachineFeatures {
            velocity_band: p.velocity_band,
            bearing: None,
            envelope_band: p.envelope_band,
            envelope: p.envelope,
        }
    }
}

impl MachineFeatures {
    /// The extractor's parameters for a frame of this machine in `unit` at `rate_hz`.
    pub fn params(&self, unit: AccelUnit, rate_hz: f64) -> Params {
        Params {
            unit,
            rate_hz,
            velocity_band: self.velocity_band,
            bearing: self.bearing,
            envelope_band: self.envelope_band,
            envelope: self.envelope,
        }
    }
}

/// How derived events are stamped.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameParams {
    /// The gateway id: derived events are named `"{gateway}.{sensor}.{seq}"`.
    pub gateway: String,
    /// `AccelRms` (or `VelocityRms` for velocity samples): RMS after removing the frame mean.
    /// `AccelPeak`: the largest |x - mean| in the frame.
    pub metric: Metric,
    /// Ingest time (ms) without samples after which a sensor's open frame is flushed.
    pub flush_after_ms: i64,
    /// Feature parameters by machine; a machine not listed gets [`MachineFeatures::default`].
    pub machines: BTreeMap<String, MachineFeatures>,
}

/// The frame a sensor is currently filling.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct OpenFrame {
    /// Frame index: the frame covers event time `[k * 1000, (k + 1) * 1000)`.
    k: i64,
    unit: Unit,
    clock: ClockEvidence,
    rate_hz: f64,
    /// Samples of more than one rate went into the frame: its count has no single expectation.
    mixed_rate: bool,
    count: u64,
    /// Welford running mean and sum of squared deviations.
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
    /// The samples taken, in the frame's unit, for the features; `None` when they are not all
    /// here: more than [`OpenFrame::capacity`] arrived, or the frame was restored from a
    /// snapshot written before frames kept their samples (the field is then absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    samples: Option<Vec<f64>>,
}

impl OpenFrame {
    fn new(k: i64, unit: Unit, clock: ClockEvidence, rate_hz: f64) -> Self {
        OpenFrame {
            k,
            unit,
            clock,
            rate_hz,
            mixed_rate: false,
            count: 0,
            mean: 0.0,
            m2: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            samples: Some(Vec::with_capacity(Self::capacity(rate_hz))),
        }
    }

    /// The most samples a frame at `rate_hz` keeps: `ceil(rate_hz)` and a small margin, at most
    /// [`MAX_FRAME_SAMPLES`].
    fn capacity(rate_hz: f64) -> usize {
        let second = rate_hz.ceil().min(MAX_FRAME_SAMPLES as f64) as usize;
        (second + SAMPLE_MARGIN).min(MAX_FRAME_SAMPLES)
    }

    /// Takes sample `x`; returns false when the frame's sample buffer had to give up (a sample
    /// beyond its capacity): the frame then gives no features.
    fn add(&mut self, x: f64) -> bool {
        let mut kept = true;
        if let Some(buf) = self.samples.as_mut() {
            if buf.len() < Self::capacity(self.rate_hz) {
                buf.push(x);
            } else {
                self.samples = None;
                kept = false;
            }
        }
        self.count += 1;
        let d = x - self.mean;
        self.mean += d / self.count as f64;
        self.m2 += d * (x - self.mean);
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        kept
    }

    /// Population RMS about the mean, and the largest deviation from the mean.
    fn rms_and_peak(&self) -> (f64, f64) {
        if self.count == 0 {
            return (0.0, 0.0);
        }
        let var = (self.m2 / self.count as f64).max(0.0);
        let peak = (self.max - self.mean).max(self.mean - self.min).max(0.0);
        (var.sqrt(), peak)
    }

    fn quality(&self) -> Quality {
        let expected = self.rate_hz.round();
        if self.mixed_rate || self.count < 2 || (self.count as f64) < expected {
            Quality::Uncertain
        } else {
            Quality::Good
        }
    }
}

/// Per (machine, sensor) state.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct SensorState {
    /// The seq of the last emitted event (0: none yet).
    last_seq: u64,
    /// Event time (ms, f64) of the last sample taken.
    last_sample_t: Option<f64>,
    /// Ingest time of the last record that brought samples.
    last_arrival: i64,
    /// Index of the last frame emitted; samples of a frame at or before it are not taken again.
    last_emitted_k: Option<i64>,
    open: Option<OpenFrame>,
}

impl SensorState {
    fn new() -> Self {
        SensorState {
            last_seq: 0,
            last_sample_t: None,
            last_arrival: i64::MIN,
            last_emitted_k: None,
            open: None,
        }
    }
}

/// Cuts samples records into one-second frames and derives one event per frame and sensor.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct FrameCutter {
    /// Configuration, not state: never in a snapshot; `restore` takes it anew.
    #[serde(skip, default = "FrameParams::unset")]
    params: FrameParams,
    /// FFT plans and buffers, not state: never in a snapshot; `restore` creates it anew.
    #[serde(skip)]
    extractor: Extractor,
    /// machine -> sensor -> state (ordered, so every iteration is deterministic).
    sensors: BTreeMap<String, BTreeMap<String, SensorState>>,
    /// sensor name -> the machine it belongs to (derived event ids name only the sensor).
    owners: BTreeMap<String, String>,
    dropped_samples: u64,
    /// Frames whose samples outgrew their buffer ([`MAX_FRAME_SAMPLES`]) and so gave no features.
    #[serde(default, skip_serializing_if = "is_zero")]
    unbuffered_frames: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Clone for FrameCutter {
    /// The same state and parameters, with a fresh extractor (it holds no state).
    fn clone(&self) -> Self {
        FrameCutter {
            params: self.params.clone(),
            extractor: Extractor::new(),
            sensors: self.sensors.clone(),
            owners: self.owners.clone(),
            dropped_samples: self.dropped_samples,
            unbuffered_frames: self.unbuffered_frames,
        }
    }
}

/// The less trustworthy of two clock evidences, in the order of docs/contracts.md section 3
/// that an alert's `clock_trust` uses ([`crate::event::ClockState::distrust`]: synced <
/// holdover < unknown < unsynced < stepped); on equal states the larger error bound, a missing
/// bound counting as the largest.
pub(crate) fn worse_clock(a: ClockEvidence, b: ClockEvidence) -> ClockEvidence {
    let key = |c: ClockEvidence| (c.state.distrust(), c.err_ms.map_or(u64::MAX, u64::from));
    if key(b) > key(a) {
        b
    } else {
        a
    }
}

impl FrameParams {
    fn unset() -> Self {
        FrameParams {
            gateway: String::new(),
            metric: Metric::AccelRms,
            flush_after_ms: 0,
            machines: BTreeMap::new(),
        }
    }
}

impl FrameCutter {
    /// The cutter's state as bytes (parameters excluded), for a checkpoint.
    pub fn snapshot(&self) -> Vec<u8> {
        crate::records::snapshot::encode(self)
    }

    /// A cutter that continues exactly where the one that took `snapshot` stood.
    pub fn restore(
        params: FrameParams,
        snapshot: &[u8],
    ) -> Result<Self, crate::records::snapshot::SnapshotError> {
        let mut c: FrameCutter = crate::records::snapshot::decode(snapshot)?;
        c.check().map_err(crate::records::snapshot::SnapshotError::invalid)?;
        c.params = params;
        Ok(c)
    }

    /// What a restored snapshot must hold for the numbers it derives to be what `push` would
    /// have derived: finite times, rates and running sums (a damaged one would reach a derived
    /// event's value, and from there alert records as `null`).
    fn check(&self) -> Result<(), String> {
        for (machine, sensors) in &self.sensors {
            for (sensor, s) in sensors {
                let bad = |what: String| format!("frames of {machine}/{sensor}: {what}");
                if let Some(t) = s.last_sample_t.filter(|t| !t.is_finite()) {
                    return Err(bad(format!("last sample time {t} is not finite")));
                }
                let Some(f) = &s.open else { continue };
                if !(f.rate_hz.is_finite() && f.rate_hz > 0.0) {
                    return Err(bad(format!(
                        "rate_hz {} is not a positive finite number",
                        f.rate_hz
                    )));
                }
                let sums = [f.mean, f.m2];
                let extremes = [f.min, f.max];
                if sums.iter().any(|x| !x.is_finite())
                    || (f.count > 0 && (extremes.iter().any(|x| !x.is_finite()) || f.min > f.max))
                {
                    return Err(bad(format!(
                        "open frame {}: running sums not finite or out of order (count {}, mean {}, m2 {}, min {}, max {})",
                        f.k, f.count, f.mean, f.m2, f.min, f.max
                    )));
                }
                if let Some(buf) = &f.samples {
                    if buf.len() as u64 != f.count || buf.len() > OpenFrame::capacity(f.rate_hz) {
                        return Err(bad(format!(
                            "open frame {}: {} samples kept for a count of {} (at most {})",
                            f.k,
                            buf.len(),
                            f.count,
                            OpenFrame::capacity(f.rate_hz)
                        )));
                    }
                    if let Some(i) = buf.iter().position(|x| !x.is_finite()) {
                        return Err(bad(format!("open frame {}: sample {i} is not finite", f.k)));
                    }
                }
            }
        }
        Ok(())
    }

    pub fn new(params: FrameParams) -> Self {
        FrameCutter {
            params,
            extractor: Extractor::new(),
            sensors: BTreeMap::new(),
            owners: BTreeMap::new(),
            dropped_samples: 0,
            unbuffered_frames: 0,
        }
    }

    /// Why `rec` cannot be taken: a rate not > 0, a non-finite value, a sensor name of another
    /// machine, or values that overlap or precede those already taken for its sensor; else
    /// whether it holds any value to take.
    fn check_record(&self, rec: &SamplesRecord) -> Result<bool, Rejection> {
        let rate = rec.rate_hz;
        if !(rate.is_finite() && rate > 0.0) {
            return Err(Rejection::new(
                Reason::BadType,
                format!(
                    "samples for {}/{}: rate_hz {} is not a positive finite number",
                    rec.machine, rec.sensor, rate
                ),
            ));
        }
        if let Some(i) = rec.data.iter().position(|x| !x.is_finite()) {
            return Err(Rejection::new(
                Reason::NonFiniteValue,
                format!("samples for {}/{}: sample {} is not finite", rec.machine, rec.sensor, i),
            ));
        }
        if let Some(owner) = self.owners.get(&rec.sensor) {
            if *owner != rec.machine {
                return Err(Rejection::new(
                    Reason::SensorConflict,
                    format!(
                        "samples for {}/{}: sensor name {:?} already belongs to machine {:?}; \
                     derived event ids \"{}.{}.{{seq}}\" would collide",
                        rec.machine, rec.sensor, rec.sensor, owner, self.params.gateway, rec.sensor
                    ),
                ));
            }
        }
        let period = 1000.0 / rate;
        let t0 = rec.t0_ms as f64;
        if let Some(last) = self
            .sensors
            .get(&rec.machine)
            .and_then(|m| m.get(&rec.sensor))
            .and_then(|s| s.last_sample_t)
        {
            if t0 < last + period / 2.0 {
                return Err(Rejection::new(
                    Reason::SamplesOverlap,
                    format!(
                    "samples overlap for {}/{}: record t0_ms {} is before the last sample taken \
                     at {:.3} ms plus half a sample period ({:.3} ms)",
                    rec.machine,
                    rec.sensor,
                    rec.t0_ms,
                    last,
                    period / 2.0
                ),
                ));
            }
        }
        Ok(!rec.data.is_empty())
    }

    /// Takes one samples record arriving at ingest time `at`; appends the derived events of the
    /// frames it completes to `out` (in seq order). `Err` when the record overlaps or precedes
    /// samples already taken for its sensor, or is invalid (rate not > 0, a non-finite sample, a
    /// sensor name already used by another machine); the state is then unchanged.
    pub fn push(
        &mut self,
        at: i64,
        rec: &SamplesRecord,
        out: &mut Vec<Event>,
    ) -> Result<(), Rejection> {
        if !self.check_record(rec)? {
            return Ok(());
        }
        let (rate, t0) = (rec.rate_hz, rec.t0_ms as f64);

        if !self.owners.contains_key(&rec.sensor) {
            self.owners.insert(rec.sensor.clone(), rec.machine.clone());
        }
        let machine = match self.sensors.get_mut(&rec.machine) {
            Some(m) => m,
            None => self.sensors.entry(rec.machine.clone()).or_default(),
        };
        let state = match machine.get_mut(&rec.sensor) {
            Some(s) => s,
            None => machine.entry(rec.sensor.clone()).or_insert_with(SensorState::new),
        };

        let clock = rec.clock.unwrap_or(ClockEvidence::UNKNOWN);
        // A frame left open by an earlier record takes this record's samples in its own unit.
        let mut factor = 1.0;
        if let Some(f) = state.open.as_mut() {
            if f.unit != rec.unit {
                match rec.unit.convert(1.0, f.unit) {
                    Some(c) => factor = c,
                    None => {
                        // Units that do not convert cannot share a frame: close it early.
                        let f = state.open.take();
                        if let Some(f) = f {
                            emit(
                                &self.params,
                                &mut self.extractor,
                                &rec.machine,
                                &rec.sensor,
                                state,
                                f,
                                out,
                            );
                        }
                    }
                }
            }
        }

        let mut dropped = 0u64;
        let mut unbuffered = 0u64;
        for (i, &x) in rec.data.iter().enumerate() {
            let t = t0 + (i as f64) * 1000.0 / rate;
            let k = (t / 1000.0).floor() as i64;
            let same = state.open.as_ref().is_some_and(|f| f.k == k);
            if same {
                if let Some(f) = state.open.as_mut() {
                    if f.rate_hz != rate {
                        f.mixed_rate = true;
                    }
                    f.clock = worse_clock(f.clock, clock);
                    if !f.add(x * factor) {
                        unbuffered += 1;
                    }
                }
                continue;
            }
            // A sample of a later frame: the open one is complete.
            if let Some(f) = state.open.take() {
                emit(&self.params, &mut self.extractor, &rec.machine, &rec.sensor, state, f, out);
            }
            factor = 1.0;
            if state.last_emitted_k.is_some_and(|e| k <= e) {
                // Its frame was already emitted (flushed as idle): never emit a frame twice.
                dropped += 1;
                continue;
            }
            let mut f = OpenFrame::new(k, rec.unit, clock, rate);
            if !f.add(x) {
                unbuffered += 1;
            }
            state.open = Some(f);
        }
        self.dropped_samples += dropped;
        self.unbuffered_frames += unbuffered;
        let n = rec.data.len() - 1;
        state.last_sample_t = Some(t0 + (n as f64) * 1000.0 / rate);
        state.last_arrival = at;
        Ok(())
    }

    /// Takes one `readings` record (velocities in `mm/s` a device measured itself, docs/contracts.md
    /// section 8) arriving at ingest time `at`: appends one event per value to `out`, in seq
    /// order, numbered on from the sensor's last event: `metric = velocity_rms`, `value` the
    /// reading, `unit = mm/s`, `ts_ms` the reading's time (`t0_ms + i * 1000 / rate_hz`, rounded
    /// to the millisecond), the record's clock (else `unknown`), quality `good`, no `samples` and
    /// no `features`. A frame the sensor left open is emitted first. `Err` as for [`Self::push`];
    /// the state is then unchanged.
    pub fn readings(
        &mut self,
        at: i64,
        rec: &SamplesRecord,
        out: &mut Vec<Event>,
    ) -> Result<(), Rejection> {
        if !self.check_record(rec)? {
            return Ok(());
        }
        self.owners.entry(rec.sensor.clone()).or_insert_with(|| rec.machine.clone());
        let machine = self.sensors.entry(rec.machine.clone()).or_default();
        let state = machine.entry(rec.sensor.clone()).or_insert_with(SensorState::new);
        let (params, extractor) = (&self.params, &mut self.extractor);
        if let Some(f) = state.open.take() {
            emit(params, extractor, &rec.machine, &rec.sensor, state, f, out);
        }
        let clock = rec.clock.unwrap_or(ClockEvidence::UNKNOWN);
        let time = |i: usize| rec.t0_ms as f64 + (i as f64) * 1000.0 / rec.rate_hz;
        for (i, &value) in rec.data.iter().enumerate() {
            state.last_seq += 1;
            let seq = state.last_seq;
            out.push(Event {
                event_id: format!("{}.{}.{}", params.gateway, rec.sensor, seq),
                machine: rec.machine.clone(),
                sensor: rec.sensor.clone(),
                seq,
                ts_ms: time(i).round() as i64,
                clock,
                metric: Metric::VelocityRms,
                value,
                unit: Unit::MmS,
                schema: 1,
                quality: Quality::Good,
                samples: None,
                features: None,
            });
        }
        state.last_sample_t = Some(time(rec.data.len() - 1));
        state.last_arrival = at;
        Ok(())
    }

    /// Ingest time passes: flushes the open frame of every sensor whose last samples arrived at
    /// or before `at - flush_after_ms`, oldest arrival first (ties in (machine, sensor) order).
    pub fn advance(&mut self, at: i64, out: &mut Vec<Event>) {
        let cutoff = at.saturating_sub(self.params.flush_after_ms);
        let idle = |s: &SensorState| s.open.is_some() && s.last_arrival <= cutoff;
        let any = self.sensors.values().any(|m| m.values().any(idle));
        if !any {
            return;
        }
        let mut due: Vec<(i64, String, String)> = Vec::new();
        for (machine, m) in &self.sensors {
            for (sensor, s) in m {
                if idle(s) {
                    due.push((s.last_arrival, machine.clone(), sensor.clone()));
                }
            }
        }
        due.sort();
        for (_, machine, sensor) in due {
            if let Some(state) = self.sensors.get_mut(&machine).and_then(|m| m.get_mut(&sensor)) {
                if let Some(f) = state.open.take() {
                    emit(&self.params, &mut self.extractor, &machine, &sensor, state, f, out);
                }
            }
        }
    }

    /// The earliest ingest time at which [`advance`](Self::advance) would flush a frame, if any.
    /// Callers that jump ingest time forward step through these, so that each flushed frame is
    /// decided at the ingest time it became due.
    pub fn next_flush_due(&self) -> Option<i64> {
        self.sensors
            .values()
            .flat_map(|m| m.values())
            .filter(|s| s.open.is_some())
            .map(|s| s.last_arrival.saturating_add(self.params.flush_after_ms))
            .min()
    }

    /// How many sensors have a frame open (for state-size accounting).
    pub fn open_frames(&self) -> usize {
        self.sensors.values().map(|m| m.values().filter(|s| s.open.is_some()).count()).sum()
    }

    /// Samples not taken because their frame had already been emitted by an idle flush.
    pub fn dropped_samples(&self) -> u64 {
        self.dropped_samples
    }

    /// Frames that gave no features because more samples arrived than a second at their rate
    /// holds (at most [`MAX_FRAME_SAMPLES`] are kept); their event's `value` is unaffected.
    pub fn unbuffered_frames(&self) -> u64 {
        self.unbuffered_frames
    }

    /// The seq of the last event derived for (machine, sensor), if any.
    pub fn last_seq(&self, machine: &str, sensor: &str) -> Option<u64> {
        self.sensors.get(machine).and_then(|m| m.get(sensor)).map(|s| s.last_seq).filter(|&q| q > 0)
    }

    /// After a restart: continue numbering (machine, sensor) after `last_seq`, so no seq is
    /// reused. Err when the sensor name already belongs to another machine.
    pub fn restore_seq(
        &mut self,
        machine: &str,
        sensor: &str,
        last_seq: u64,
    ) -> Result<(), String> {
        if let Some(owner) = self.owners.get(sensor) {
            if owner != machine {
                return Err(format!(
                    "sensor name {sensor:?} already belongs to machine {owner:?}, not {machine:?}"
                ));
            }
        } else {
            self.owners.insert(sensor.to_owned(), machine.to_owned());
        }
        let s = self
            .sensors
            .entry(machine.to_owned())
            .or_default()
            .entry(sensor.to_owned())
            .or_insert_with(SensorState::new);
        s.last_seq = s.last_seq.max(last_seq);
        Ok(())
    }
}

/// Turns a completed frame into its event and appends it to `out`.
fn emit(
    params: &FrameParams,
    extractor: &mut Extractor,
    machine: &str,
    sensor: &str,
    state: &mut SensorState,
    f: OpenFrame,
    out: &mut Vec<Event>,
) {
    state.last_emitted_k = Some(f.k);
    if f.count == 0 {
        return;
    }
    state.last_seq += 1;
    let seq = state.last_seq;
    let (rms, peak) = f.rms_and_peak();
    let value = match params.metric {
        Metric::AccelPeak => peak,
        Metric::AccelRms | Metric::VelocityRms => rms,
    };
    let features = features(params, extractor, machine, &f);
    let from_ms = f.k.saturating_mul(FRAME_MS);
    let to_ms = from_ms.saturating_add(FRAME_MS);
    out.push(Event {
        event_id: format!("{}.{}.{}", params.gateway, sensor, seq),
        machine: machine.to_owned(),
        sensor: sensor.to_owned(),
        seq,
        ts_ms: to_ms,
        clock: f.clock,
        metric: params.metric,
        value,
        unit: f.unit,
        schema: 1,
        quality: f.quality(),
        samples: Some(SampleRef { block_seq: seq, from_ms, to_ms }),
        features,
    });
}

/// The features of a completed frame of acceleration samples, all kept, of one rate; `None`
/// otherwise (velocity samples, a buffer given up, a frame restored without its samples, mixed
/// rates: the extractor assumes evenly spaced samples).
fn features(
    params: &FrameParams,
    extractor: &mut Extractor,
    machine: &str,
    f: &OpenFrame,
) -> Option<Box<EventFeatures>> {
    let unit = match f.unit {
        Unit::G => AccelUnit::G,
        Unit::Ms2 => AccelUnit::Ms2,
        Unit::MmS => return None,
    };
    let samples = f.samples.as_ref().filter(|_| !f.mixed_rate)?;
    let default = MachineFeatures::default();
    let machine = params.machines.get(machine).unwrap_or(&default);
    // Samples are finite (push refuses others) and the parameters come from a checked config,
    // so an error here cannot come from input the cutter accepted; no features rather than a
    // panic if it does.
    let computed = extractor.extract(samples, &machine.params(unit, f.rate_hz)).ok()?;
    let mut out = EventFeatures::default();
    for (name, value) in computed.each() {
        if let (Some(feature), Some(v)) = (Feature::from_name(name), value) {
            out.set(feature, v);
        }
    }
    Some(Box::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stamp::tests::{params, rec, T};

    #[test]
    fn an_open_frame_keeps_a_second_of_samples_and_gives_up_beyond() {
        assert_eq!(OpenFrame::capacity(10.0), 12);
        assert_eq!(OpenFrame::capacity(1e9), MAX_FRAME_SAMPLES);
        let mut f = OpenFrame::new(0, Unit::G, ClockEvidence::UNKNOWN, 10.0);
        assert!((0..12).all(|_| f.add(1.0)));
        assert!(!f.add(1.0), "the 13th sample overflows");
        assert!(f.add(1.0), "counted once");
        assert_eq!((f.count, f.samples.as_ref()), (14, None));
    }

    #[test]
    fn a_snapshot_without_samples_restores_and_its_open_frame_gives_no_features() {
        let mut c = FrameCutter::new(params(Metric::AccelRms));
        let mut out = Vec::new();
        c.push(T, &rec("m", "s", T, 100.0, vec![1.0, 2.0, 4.0]), &mut out).unwrap();
        // The snapshot as written before frames kept their samples: no `samples` field (a frame
        // without samples is written without it, so these bytes are the old format).
        let mut old = c.clone();
        for f in
            old.sensors.values_mut().flat_map(|m| m.values_mut()).filter_map(|s| s.open.as_mut())
        {
            f.samples = None;
        }
        let bytes = old.snapshot();
        let mut back = FrameCutter::restore(params(Metric::AccelRms), &bytes).unwrap();
        back.push(T, &rec("m", "s", T + 30, 100.0, vec![8.0]), &mut out).unwrap();
        back.push(T, &rec("m", "s", T + 1000, 100.0, vec![1.0, 1.5]), &mut out).unwrap();
        back.advance(T + 100_000, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].features, None, "the restored frame lacks its first samples");
        assert!(out[1].features.is_some(), "frames opened after restore have them all");
        // Damaged samples are refused.
        let mut bad = c.clone();
        bad.sensors.get_mut("m").unwrap().get_mut("s").unwrap().open.as_mut().unwrap().samples =
            Some(vec![1.0]);
        let err = FrameCutter::restore(params(Metric::AccelRms), &bad.snapshot()).unwrap_err();
        assert!(err.to_string().contains("1 samples kept for a count of 3"), "{err}");
    }

    #[test]
    fn a_snapshot_holds_about_nine_bytes_a_kept_sample() {
        let mut c = FrameCutter::new(params(Metric::AccelRms));
        let mut out = Vec::new();
        let empty = c.snapshot().len();
        // 11 999 samples of one 12 kHz frame, none of them exact in f32.
        let data: Vec<f64> = (0..11_999).map(|i| 0.1 + f64::from(i) * 1e-7).collect();
        c.push(T, &rec("m", "s", T, 12_000.0, data), &mut out).unwrap();
        let per_sample = (c.snapshot().len() - empty) as f64 / 11_999.0;
        assert!((9.0..9.1).contains(&per_sample), "{per_sample} bytes a sample");
    }

    #[test]
    fn readings_are_one_velocity_event_each_numbered_on_across_a_snapshot() {
        let mut c = FrameCutter::new(params(Metric::AccelRms));
        let mut out = Vec::new();
        let mut r = rec("fan", "v", T, 3.0, vec![2.5, 4.75, 0.0]);
        r.unit = Unit::MmS;
        c.readings(T + 5, &r, &mut out).unwrap();
        let got: Vec<_> =
            out.iter().map(|e| (e.event_id.as_str(), e.seq, e.ts_ms, e.value)).collect();
        assert_eq!(
            got,
            [("gw.v.1", 1, T, 2.5), ("gw.v.2", 2, T + 333, 4.75), ("gw.v.3", 3, T + 667, 0.0)]
        );
        let e = &out[0];
        assert_eq!((e.metric, e.unit, e.quality), (Metric::VelocityRms, Unit::MmS, Quality::Good));
        assert_eq!(
            (e.samples, e.features.is_none(), e.clock),
            (None, true, ClockEvidence::UNKNOWN)
        );
        assert_eq!(c.open_frames(), 0, "readings open no frame");
        assert_eq!(c.next_flush_due(), None);
        // Overlapping readings and a sensor name of another machine are refused, nothing changes.
        let mut again = c.clone();
        let err = again.readings(T + 6, &r, &mut out).unwrap_err();
        assert_eq!(err.reason, Reason::SamplesOverlap, "{err}");
        let mut other = r.clone();
        other.machine = "pump".into();
        other.t0_ms = T + 1_000;
        let err = again.readings(T + 6, &other, &mut out).unwrap_err();
        assert_eq!(err.reason, Reason::SensorConflict, "{err}");
        assert_eq!(again.snapshot(), c.snapshot());
        // A restored cutter numbers on.
        let mut back = FrameCutter::restore(params(Metric::AccelRms), &c.snapshot()).unwrap();
        out.clear();
        r.t0_ms = T + 1_000;
        back.readings(T + 1_005, &r, &mut out).unwrap();
        assert_eq!(out.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 5, 6]);
        assert_eq!(back.last_seq("fan", "v"), Some(6));
    }
}
