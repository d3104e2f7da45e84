//! `linegate replay`: the whole decision path over a trace, deterministically, without a broker
//! (CONTRACTS section 8). Streaming: memory is the rule state, not the trace length.
//!
//! For each line, in order: parse it; let ingest time advance to its `at` (idle sensors flush
//! their open frames, whose derived events are decided first); then decide what it carries.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use serde::Serialize;

use crate::config::Config;
use crate::event::{Event, Metric};
use crate::quarantine::{Reason, Rejection};
use crate::rule::alert::{AlertKind, AlertRecord};
use crate::rule::{Engine, Params, StateSize, Verdict};
use crate::stamp::{FrameCutter, FrameParams};
use crate::trace::parse::parse_line;
use crate::trace::{Arrival, TraceLine};

/// The summary file: counts of what happened to every record.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Trace lines read (empty lines are skipped and not counted).
    pub records: u64,
    /// Events accepted: applied, late applied and too late.
    pub accepted: u64,
    pub duplicates: u64,
    pub late_applied: u64,
    pub too_late: u64,
    /// Rejected records by reason (every reason of CONTRACTS section 7 is listed, zeros too).
    pub quarantined: BTreeMap<&'static str, u64>,
    /// Events that arrived as such in the trace.
    pub events_received: u64,
    /// Events derived from `samples` records.
    pub events_derived: u64,
    pub samples_records: u64,
    pub ticks: u64,
    /// Alert records written, by kind.
    pub alerts: BTreeMap<&'static str, u64>,
    /// Each machine's final watermark (null when it never had one).
    pub watermarks: BTreeMap<String, Option<i64>>,
    /// The largest rule state seen (high events + incident members + remembered ids).
    pub peak_state: u64,
}

/// A rejected record as written to `--rejected`: its line, reason, the sentence, the raw bytes.
#[derive(Debug, Serialize)]
struct RejectedRecord<'a> {
    line: u64,
    at: Option<i64>,
    reason: Reason,
    detail: &'a str,
    raw: &'a str,
}

/// Where the outputs go.
#[derive(Debug)]
pub struct Sinks<A: Write, R: Write> {
    pub alerts: A,
    pub rejected: Option<R>,
}

/// One parsed line: its number, what it carried, and its raw bytes when it was rejected.
struct Parsed {
    line_no: u64,
    result: Result<TraceLine, LineError>,
    raw: Option<Vec<u8>>,
}

/// Lines are parsed in batches on a second thread while this one decides: parsing is pure and
/// the batches arrive in order, so the decisions (and the output bytes) are exactly those of a
/// single thread. Decided batches go back to the parsing thread to be dropped there, where they
/// were allocated (freeing across threads makes the two contend in the allocator).
const BATCH: usize = 1024;

/// Runs the replay over `input`. `progress` is told the number of bytes consumed so far.
pub fn replay<I: BufRead + Send, A: Write, R: Write>(
    config: &Config,
    input: I,
    sinks: &mut Sinks<A, R>,
    mut progress: impl FnMut(u64),
) -> std::io::Result<Summary> {
    let params = Params::from_config(config);
    let metric = match params.metric {
        Metric::AccelPeak => Metric::AccelPeak,
        _ => Metric::AccelRms,
    };
    let mut run = Run {
        engine: Engine::new(params),
        cutter: FrameCutter::new(FrameParams {
            gateway: config.gateway.id.clone(),
            metric,
            flush_after_ms: config.time.idle_timeout_ms / 2,
        }),
        summary: Summary {
            quarantined: Reason::ALL.iter().map(|r| (r.as_str(), 0)).collect(),
            ..Summary::default()
        },
        alerts: Vec::new(),
        derived: Vec::new(),
        now: i64::MIN,
    };
    let (tx, rx) = std::sync::mpsc::sync_channel::<std::io::Result<(Vec<Parsed>, u64)>>(4);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Vec<Parsed>>();
    std::thread::scope(|scope| {
        scope.spawn(move || parse_batches(input, &tx, &done_rx));
        for batch in rx {
            let (batch, bytes) = batch?;
            for p in &batch {
                run.summary.records += 1;
                if let Err((at, why)) = run.line(&p.result) {
                    let raw = p.raw.as_deref().unwrap_or_default();
                    run.reject(p.line_no, at, &why, raw, sinks.rejected.as_mut())?;
                }
                for rec in run.alerts.drain(..) {
                    *run.summary.alerts.entry(kind_name(rec.kind)).or_insert(0) += 1;
                    serde_json::to_writer(&mut sinks.alerts, &rec)?;
                    sinks.alerts.write_all(b"\n")?;
                }
            }
            let _ = done_tx.send(batch);
            progress(bytes);
            run.note_state();
        }
        Ok::<(), std::io::Error>(())
    })?;
    run.note_state();
    run.summary.watermarks = run.engine.watermarks().map(|(m, w)| (m.to_string(), w)).collect();
    sinks.alerts.flush()?;
    if let Some(r) = sinks.rejected.as_mut() {
        r.flush()?;
    }
    Ok(run.summary)
}

/// The parsing thread: reads lines, skips blank ones, parses the rest, and sends them in
/// batches with the number of bytes consumed so far. Stops at the end of input, on a read
/// error (sent on), or when the deciding side has gone.
fn parse_batches<I: BufRead>(
    mut input: I,
    tx: &std::sync::mpsc::SyncSender<std::io::Result<(Vec<Parsed>, u64)>>,
    done: &std::sync::mpsc::Receiver<Vec<Parsed>>,
) {
    let mut line = Vec::with_capacity(4096);
    let (mut line_no, mut bytes) = (0u64, 0u64);
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        line.clear();
        let n = match input.read_until(b'\n', &mut line) {
            Ok(n) => n,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        if n > 0 {
            bytes += n as u64;
            line_no += 1;
            let text = trim_newline(&line);
            if !text.iter().all(u8::is_ascii_whitespace) {
                let result = parse_line(text);
                let raw = result.is_err().then(|| text.to_vec());
                batch.push(Parsed { line_no, result, raw });
            }
        }
        if (n == 0 || batch.len() == BATCH) && !batch.is_empty() {
            while let Ok(decided) = done.try_recv() {
                drop(decided);
            }
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            if tx.send(Ok((full, bytes))).is_err() {
                return;
            }
        }
        if n == 0 {
            return;
        }
    }
}

fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn kind_name(k: AlertKind) -> &'static str {
    match k {
        AlertKind::Open => "open",
        AlertKind::Amend => "amend",
        AlertKind::Close => "close",
        AlertKind::Supersede => "supersede",
    }
}

struct Run {
    engine: Engine,
    cutter: FrameCutter,
    summary: Summary,
    alerts: Vec<AlertRecord>,
    derived: Vec<Event>,
    now: i64,
}

type LineError = (Option<i64>, Rejection);

impl Run {
    fn line(&mut self, parsed: &Result<TraceLine, LineError>) -> Result<(), LineError> {
        let tl = match parsed {
            Ok(tl) => tl,
            Err((Some(at), why)) => {
                self.advance(*at);
                return Err((Some(*at), why.clone()));
            }
            Err(e) => return Err(e.clone()),
        };
        let at = tl.at;
        self.advance(at);
        match &tl.arrival {
            Arrival::Tick => {
                self.summary.ticks += 1;
                let now = self.now;
                self.engine.tick(now, &mut self.alerts);
            }
            Arrival::Event(ev) => {
                self.summary.events_received += 1;
                if let Err(why) = self.decide(ev) {
                    return Err((Some(at), why));
                }
            }
            Arrival::Samples(rec) => {
                self.summary.samples_records += 1;
                let mut derived = std::mem::take(&mut self.derived);
                let pushed = self.cutter.push(self.now, rec, &mut derived);
                self.decide_derived(&mut derived);
                self.derived = derived;
                if let Err(why) = pushed {
                    return Err((Some(at), why));
                }
            }
        }
        Ok(())
    }

    /// Ingest time moves to `at` (never back). Stalled sensors' open frames are flushed and
    /// decided at the ingest time each became due, in that order, before anything at `at`.
    fn advance(&mut self, at: i64) {
        let at = self.now.max(at);
        let mut derived = std::mem::take(&mut self.derived);
        while let Some(due) = self.cutter.next_flush_due().filter(|&d| d <= at) {
            self.now = self.now.max(due);
            self.cutter.advance(self.now, &mut derived);
            self.decide_derived(&mut derived);
        }
        self.now = at;
        self.derived = derived;
    }

    fn decide_derived(&mut self, derived: &mut Vec<Event>) {
        for ev in derived.drain(..) {
            self.summary.events_derived += 1;
            if let Err(why) = self.decide(&ev) {
                // Derived events are well formed by construction; a rejection here is a clock
                // problem (clock_future) or an id conflict, and is counted like any other.
                *self.summary.quarantined.entry(why.reason.as_str()).or_insert(0) += 1;
            }
        }
    }

    fn decide(&mut self, ev: &Event) -> Result<(), Rejection> {
        let s = &mut self.summary;
        match self.engine.on_event(self.now, ev, &mut self.alerts) {
            Verdict::Applied => s.accepted += 1,
            Verdict::LateApplied => {
                s.accepted += 1;
                s.late_applied += 1;
            }
            Verdict::TooLate => {
                s.accepted += 1;
                s.too_late += 1;
            }
            Verdict::Duplicate => s.duplicates += 1,
            Verdict::Rejected(why) => return Err(why),
        }
        Ok(())
    }

    fn reject<R: Write>(
        &mut self,
        line: u64,
        at: Option<i64>,
        why: &Rejection,
        raw: &[u8],
        sink: Option<&mut R>,
    ) -> std::io::Result<()> {
        *self.summary.quarantined.entry(why.reason.as_str()).or_insert(0) += 1;
        if let Some(sink) = sink {
            let raw = String::from_utf8_lossy(raw);
            let rec =
                RejectedRecord { line, at, reason: why.reason, detail: &why.detail, raw: &raw };
            serde_json::to_writer(&mut *sink, &rec)?;
            sink.write_all(b"\n")?;
        }
        Ok(())
    }

    fn note_state(&mut self) {
        let StateSize { high_events, members, dedup_ids, .. } = self.engine.state_size();
        let size = (high_events + members + dedup_ids + self.cutter.open_frames()) as u64;
        self.summary.peak_state = self.summary.peak_state.max(size);
    }
}
