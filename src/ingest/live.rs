//! The ingest task of a live source (`modbus-tcp`, `modbus-rtu`, `i2c`, `spi`): what the source
//! yields becomes journal records the decide stage already understands, so live and recorded data
//! are decided the same way.
//!
//! - A block of raw samples becomes one docs/contracts.md section 8 `samples` line with its original
//!   timestamps and clock evidence, stamped with the ingest time it arrived at. The decide stage
//!   cuts it into frames and derives the events, numbering them per sensor from its checkpointed
//!   state, as for a trace: sequence numbers have one owner, and a journal replayed after a crash
//!   numbers the same events the same way (never reusing a number).
//! - When nothing was journaled for a second, a `tick` line lets ingest time pass, so a silent
//!   sensor's last frame is decided and the sensor goes idle.
//! - A declared gap (an overrun, samples shed under backpressure, a Modbus device that did not
//!   answer) goes straight to the outbox (`gaps/{sensor}`) with a `GapDeclared` ledger record; a
//!   clock step becomes a `ClockStep` ledger record.
//!
//! Lines are group-committed as the trace ingest does ([`super::journal`]): every
//! `commit_records` lines or `commit_interval` after the first pending one. Only then are they
//! offered to the decide stage, **without waiting**: when its channel is full the records stay in
//! the journal and the decide stage reads them from there (it fills any hole in positions from
//! the journal). A slow decide stage therefore never stops a live source; the journal absorbs
//! the difference.

use std::collections::BTreeMap;

use serde::Serialize;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, watch};
use tokio::time::{Duration, Instant};

use super::{journal, IngestError, Line, Params};
use crate::clock::Clock;
use crate::decide::input::DecideBatch;
use crate::event::{ClockEvidence, Unit};
use crate::records::journal::Origin;
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::records::outbox::{GapNotice, GapRange};
use crate::stamp::clock::ClockStep;
use crate::store::SharedStore;
use crate::trace::SamplesRecord;

/// How often the task looks at an idle source (ticks, outage declarations).
pub(super) const TICK_MS: i64 = 1_000;

/// What a live source yields, in the words of the journal, outbox and ledger.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum LiveItem {
    Samples(SamplesRecord),
    Gap(GapNotice),
    ClockStep(ClockStep),
}

/// The two clocks read together when something arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Now {
    pub(super) real_ms: i64,
    pub(super) mono_ms: i64,
}

impl Now {
    pub(super) fn read(clock: &dyn Clock) -> Now {
        Now { real_ms: clock.now_ms(), mono_ms: clock.monotonic_ms() }
    }
}

/// Turns one kind of source output into [`LiveItem`]s.
pub(super) trait Adapter: Send + 'static {
    type Item: Send + 'static;
    /// `item` arrived at `now`.
    fn convert(&mut self, item: Self::Item, now: Now, out: &mut Vec<LiveItem>);
    /// Called about every [`TICK_MS`] whatever arrived (outage detection).
    fn idle(&mut self, now: Now, out: &mut Vec<LiveItem>);
}

/// One `samples` (or `readings`) trace line (docs/contracts.md section 8) as written to the
/// journal.
#[derive(Serialize)]
struct SamplesLine<'a> {
    at: i64,
    kind: &'static str,
    machine: &'a str,
    sensor: &'a str,
    t0_ms: i64,
    rate_hz: f64,
    unit: Unit,
    #[serde(skip_serializing_if = "Option::is_none")]
    axis: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    clock: Option<ClockEvidence>,
    data: &'a [f64],
}

/// The trace line of samples record `r` arriving at ingest time `at`: `readings` when it is in
/// mm/s.
pub(super) fn samples_line(at: i64, r: &SamplesRecord) -> Vec<u8> {
    // A block in mm/s holds velocities the device measured itself: a `readings` line, one
    // `velocity_rms` event per value (raw samples are acceleration).
    let kind = if r.unit == Unit::MmS { "readings" } else { "samples" };
    let line = SamplesLine {
        at,
        kind,
        machine: &r.machine,
        sensor: &r.sensor,
        t0_ms: r.t0_ms,
        rate_hz: r.rate_hz,
        unit: r.unit,
        axis: r.axis.as_deref(),
        clock: r.clock,
        data: &r.data,
    };
    // Serialising plain fields into memory cannot fail; a non-finite sample becomes `null` and
    // is quarantined by the decide stage like any bad trace line.
    serde_json::to_vec(&line).unwrap_or_default()
}

/// The trace line of a tick at ingest time `at`.
pub(super) fn tick_line(at: i64) -> Vec<u8> {
    format!("{{\"at\":{at},\"kind\":\"tick\"}}").into_bytes()
}

/// What arrived since the last write, sorted by where it goes.
#[derive(Debug, Default)]
struct Collected {
    lines: Vec<Line>,
    gaps: Vec<GapNotice>,
    ledger: Vec<LedgerRecord>,
}

/// Journals, declares and ledgers what `adapter` makes of `input` until `stop` is set or the
/// input ends; what arrived before is committed first.
#[allow(clippy::disallowed_methods)] // group-commit deadlines are tokio timers; tests pause tokio's clock
pub(super) async fn ingest_live<A: Adapter>(
    p: Params,
    mut adapter: A,
    mut input: mpsc::Receiver<A::Item>,
    clock: Box<dyn Clock>,
    store: SharedStore,
    tx: mpsc::Sender<DecideBatch>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), IngestError> {
    let mut journaled = p.resume_at;
    let mut got = Collected::default();
    let mut items = Vec::new();
    let mut deadline: Option<Instant> = None;
    let mut owed: Option<DecideBatch> = None;
    let mut last_line_mono = clock.monotonic_ms();
    let mut ticker = tokio::time::interval(Duration::from_millis(TICK_MS as u64));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let flush_due = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        let mut tick = false;
        let ended = tokio::select! {
            r = stop.wait_for(|s| *s) => { let _ = r; true }
            item = input.recv() => match item {
                None => true,
                Some(item) => {
                    // The source stage's span, one per block read: what it became.
                    let span = tracing::debug_span!(
                        "source",
                        source = p.source,
                        records = tracing::field::Empty,
                        samples = tracing::field::Empty,
                        gaps = tracing::field::Empty
                    );
                    let _entered = span.enter();
                    adapter.convert(item, Now::read(clock.as_ref()), &mut items);
                    record_block(&span, &items);
                    false
                }
            },
            _ = tokio::time::sleep_until(flush_due), if deadline.is_some() => false,
            _ = ticker.tick() => {
                tick = true;
                false
            }
        };
        let now = Now::read(clock.as_ref());
        if tick {
            adapter.idle(now, &mut items);
            if now.mono_ms - last_line_mono >= TICK_MS && got.lines.is_empty() && items.is_empty() {
                push_line(&mut got, &mut journaled, p.source, now.real_ms, tick_line(now.real_ms));
            }
        }
        for item in items.drain(..) {
            match item {
                LiveItem::Samples(r) => {
                    let line = samples_line(now.real_ms, &r);
                    push_line(&mut got, &mut journaled, p.source, now.real_ms, line);
                }
                LiveItem::Gap(g) => got.gaps.push(g),
                LiveItem::ClockStep(s) => got.ledger.push(LedgerRecord::new(
                    now.real_ms,
                    LedgerEntry::ClockStep {
                        from_ms: s.from_ms,
                        to_ms: s.to_ms,
                        step_ms: s.size_ms,
                    },
                )),
            }
        }
        if !got.gaps.is_empty() || !got.ledger.is_empty() {
            for g in &got.gaps {
                p.telemetry.metrics.gaps_declared(&g.reason, 1);
            }
            declare(&store, std::mem::take(&mut got.gaps), std::mem::take(&mut got.ledger), now)
                .await?;
        }
        if !got.lines.is_empty() {
            let d = *deadline.get_or_insert_with(|| {
                Instant::now() + Duration::from_millis(p.commit_interval_ms.max(0) as u64)
            });
            if ended || got.lines.len() >= p.commit_records || Instant::now() >= d {
                let records =
                    journal(&store, &p.telemetry, p.raw_threshold, std::mem::take(&mut got.lines))
                        .await?;
                last_line_mono = now.mono_ms;
                deadline = None;
                owed = Some(records);
            }
        }
        if let Some(records) = owed.take() {
            owed = offer(&tx, records)?;
        }
        if ended {
            return Ok(());
        }
    }
}

/// Records on the source stage's span what a block read became: samples records and their
/// readings, and gaps (declared by the source, or holes in its timeline).
fn record_block(span: &tracing::Span, items: &[LiveItem]) {
    let samples: Vec<usize> = items
        .iter()
        .filter_map(|i| match i {
            LiveItem::Samples(r) => Some(r.data.len()),
            _ => None,
        })
        .collect();
    span.record("records", samples.len());
    span.record("samples", samples.iter().sum::<usize>());
    span.record("gaps", items.iter().filter(|i| matches!(i, LiveItem::Gap(_))).count());
}

fn push_line(got: &mut Collected, journaled: &mut u64, source: u16, at: i64, line: Vec<u8>) {
    *journaled += 1;
    got.lines.push((at, Origin { source, end_offset: *journaled }, line));
}

/// Offers committed records to the decide stage without waiting. When its channel is full they
/// are returned, to be offered again later (only the latest such batch is kept: the decide stage
/// reads any earlier ones from the journal when a later batch shows the hole).
fn offer(
    tx: &mpsc::Sender<DecideBatch>,
    batch: DecideBatch,
) -> Result<Option<DecideBatch>, IngestError> {
    match tx.try_send(batch) {
        Ok(()) => Ok(None),
        Err(TrySendError::Full(batch)) => Ok(Some(batch)),
        Err(TrySendError::Closed(_)) => Err(IngestError::StageGone("decide")),
    }
}

/// Writes declared gaps (outbox and ledger, one batch) and other ledger records.
async fn declare(
    store: &SharedStore,
    gaps: Vec<GapNotice>,
    ledger: Vec<LedgerRecord>,
    now: Now,
) -> Result<(), IngestError> {
    for g in &gaps {
        tracing::warn!(
            machine = %g.machine, sensor = %g.sensor, reason = %g.reason,
            "declared gap {:?}", g.range
        );
    }
    let store = store.clone();
    tokio::task::spawn_blocking(move || -> Result<(), IngestError> {
        let mut s = store.write();
        s.declare_gaps(&gaps, now.real_ms)?;
        if !ledger.is_empty() {
            s.append_ledger(&ledger)?;
        }
        Ok(())
    })
    .await?
}

/// Per sensor, where its samples should continue: finds the holes a source leaves without
/// declaring them (a Modbus device that stopped answering, a bus sensor reopened after a fault)
/// and declares them, and keeps every declared range free of samples. Pure: times are inputs.
///
/// - A record starting more than `max(1 ms, half a sample period)` after the end of the last one
///   (or of the last declared gap) leaves a hole: declared with `reason`.
/// - A source silent for longer than `horizon_ms` (what one record may take to arrive) has an
///   outage: once `OUTAGE_DECLARE_MS` of it has passed, that much is declared (event time
///   extrapolated from the monotonic clock since the last record), and again after each further
///   `OUTAGE_DECLARE_MS`, so a long outage is declared while it lasts, not only when it ends.
/// - Samples that arrive for a range already declared are dropped (counted): a declared gap is
///   a promise that they will never be delivered.
#[derive(Debug)]
pub(super) struct Holes {
    reason: &'static str,
    horizon_ms: i64,
    sensors: BTreeMap<(String, String), Track>,
    /// Samples dropped because their range was declared a gap.
    pub(super) dropped_samples: u64,
}

/// How much of an ongoing outage is declared at once.
pub(super) const OUTAGE_DECLARE_MS: i64 = 10_000;

#[derive(Debug, Clone, Copy)]
struct Track {
    /// Event time (ms) where the next sample is due.
    next_ms: f64,
    /// Monotonic time of the last record, and the event time it ended at.
    seen_mono: i64,
    seen_end_ms: f64,
}

impl Holes {
    pub(super) fn new(reason: &'static str, horizon_ms: i64) -> Holes {
        Holes { reason, horizon_ms, sensors: BTreeMap::new(), dropped_samples: 0 }
    }

    /// Takes a samples record arriving at `now`: a hole before it is declared, samples inside a
    /// declared range are dropped; the record (if anything is left of it) goes on.
    pub(super) fn samples(&mut self, mut r: SamplesRecord, now: Now, out: &mut Vec<LiveItem>) {
        let period_ms = 1000.0 / r.rate_hz;
        if !(period_ms.is_finite() && period_ms > 0.0) {
            out.push(LiveItem::Samples(r)); // the decide stage explains the bad rate
            return;
        }
        let n = r.data.len();
        let drop = self.place(&r.machine, &r.sensor, r.t0_ms, n, period_ms, now, out);
        if drop > 0 {
            r.data.drain(..drop);
            r.t0_ms = (r.t0_ms as f64 + drop as f64 * period_ms).ceil() as i64;
        }
        if !r.data.is_empty() {
            out.push(LiveItem::Samples(r));
        }
    }

    /// `n` readings from `t0_ms` at `rate_hz` that the source could not deliver (a device
    /// exception): declared as a gap with `reason`, holes before them as usual.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn undelivered(
        &mut self,
        machine: &str,
        sensor: &str,
        t0_ms: i64,
        rate_hz: f64,
        n: usize,
        reason: &str,
        now: Now,
        out: &mut Vec<LiveItem>,
    ) {
        let period_ms = 1000.0 / rate_hz;
        if !(period_ms.is_finite() && period_ms > 0.0) || n == 0 {
            return;
        }
        let drop = self.place(machine, sensor, t0_ms, n, period_ms, now, out);
        if drop < n {
            let from = t0_ms as f64 + drop as f64 * period_ms;
            let to = t0_ms as f64 + n as f64 * period_ms;
            out.push(self.declare(machine, sensor, from, to, reason, now));
        }
    }

    /// Puts `n` samples from `t0_ms` on the sensor's track: declares the hole before them, if
    /// any, and returns how many of the first ones fall in a range declared already.
    #[allow(clippy::too_many_arguments)]
    fn place(
        &mut self,
        machine: &str,
        sensor: &str,
        t0_ms: i64,
        n: usize,
        period_ms: f64,
        now: Now,
        out: &mut Vec<LiveItem>,
    ) -> usize {
        let key = (machine.to_owned(), sensor.to_owned());
        let t0 = t0_ms as f64;
        let mut drop = 0;
        if let Some(t) = self.sensors.get(&key).copied() {
            if t0 + period_ms / 2.0 < t.next_ms {
                drop = (((t.next_ms - t0) / period_ms).ceil().max(0.0) as usize).min(n);
                self.dropped_samples += drop as u64;
            } else if t0 - t.next_ms > 1f64.max(period_ms / 2.0) {
                out.push(self.declare(machine, sensor, t.next_ms, t0, self.reason, now));
            }
        }
        let end = t0 + n as f64 * period_ms;
        let next_ms = self.sensors.get(&key).map_or(end, |t| t.next_ms.max(end));
        self.sensors.insert(key, Track { next_ms, seen_mono: now.mono_ms, seen_end_ms: end });
        drop
    }

    /// A gap the source declared itself: the sensor's samples continue after it.
    pub(super) fn declared(&mut self, g: &GapNotice) {
        if let GapRange::Samples { to_ms, .. } = g.range {
            if let Some(t) = self.sensors.get_mut(&(g.machine.clone(), g.sensor.clone())) {
                t.next_ms = t.next_ms.max(to_ms as f64);
            }
        }
    }

    /// A gap of `[from_ms, to_ms)` for a sensor, with `reason`; the sensor continues after it.
    pub(super) fn declare(
        &mut self,
        machine: &str,
        sensor: &str,
        from: f64,
        to: f64,
        reason: &str,
        now: Now,
    ) -> LiveItem {
        let g = GapNotice {
            machine: machine.to_owned(),
            sensor: sensor.to_owned(),
            range: GapRange::Samples { from_ms: from.floor() as i64, to_ms: to.ceil() as i64 },
            reason: reason.to_owned(),
            declared_at_ms: now.real_ms,
        };
        self.declared(&g);
        LiveItem::Gap(g)
    }

    /// Time passes: declares what an outage has certainly lost so far (see the type's docs).
    pub(super) fn idle(&mut self, now: Now, out: &mut Vec<LiveItem>) {
        let mut due = Vec::new();
        for ((machine, sensor), t) in &self.sensors {
            let silent = now.mono_ms - t.seen_mono;
            let lost_until = t.seen_end_ms + (silent - self.horizon_ms) as f64;
            if lost_until - t.next_ms >= OUTAGE_DECLARE_MS as f64 {
                due.push((machine.clone(), sensor.clone(), t.next_ms, lost_until));
            }
        }
        for (machine, sensor, from, to) in due {
            out.push(self.declare(&machine, &sensor, from, to, self.reason, now));
        }
    }
}

#[cfg(test)]
mod tests;
