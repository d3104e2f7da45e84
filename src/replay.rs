//! `linegate replay`: the whole decision path over a trace, deterministically, without a broker
//! (docs/contracts.md section 8). Streaming: memory is the rule state, not the trace length.
//!
//! Lines are parsed on one thread and decided in order by [`Decider`] on another; this module
//! only moves bytes: alert records to `--out`, rejected lines to `--rejected`, counts to
//! `--summary`.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use serde::Serialize;

use crate::config::Config;
use crate::decide::{Decider, LineError};
use crate::event::rejection::{Reason, Rejection};
use crate::records::counts::Counts;
use crate::trace::parse::parse_line_reusing;
use crate::trace::{Arrival, TraceLine};

mod events;

/// The summary file: the decider's counts and each machine's final watermark.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    #[serde(flatten)]
    pub counts: Counts,
    /// Each machine's final watermark (null when it never had one).
    pub watermarks: BTreeMap<String, Option<i64>>,
}

impl Summary {
    fn of(d: &Decider) -> Self {
        Summary {
            counts: d.counts().clone(),
            watermarks: d.watermarks().map(|(m, w)| (m.to_string(), w)).collect(),
        }
    }
}

/// A rejected record as written to `--rejected`: its line, reason, the sentence, the raw bytes
/// — for an event derived from that line's samples, the event itself (`derived: true`).
#[derive(Debug, Serialize)]
struct RejectedRecord<'a> {
    line: u64,
    at: Option<i64>,
    reason: Reason,
    detail: &'a str,
    raw: &'a str,
    derived: bool,
}

/// Where the outputs go.
#[allow(missing_debug_implementations)] // `events` is a boxed writer
pub struct Sinks<A: Write, R: Write> {
    pub alerts: A,
    pub rejected: Option<R>,
    /// `--events`: every accepted event with its features (`events.rs`).
    pub events: Option<Box<dyn Write>>,
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
/// were allocated (freeing across threads makes the two contend in the allocator). There their
/// events' strings and the batch's own vector are reused for the lines parsed next.
const BATCH: usize = 1024;

/// At most this many spare strings are kept (three per event of a few batches).
const MAX_SPARE: usize = 3 * BATCH * 8;

/// Runs the replay over `input`. `progress` is told the number of bytes consumed so far.
pub fn replay<I: BufRead + Send, A: Write, R: Write>(
    config: &Config,
    input: I,
    sinks: &mut Sinks<A, R>,
    progress: impl FnMut(u64),
) -> std::io::Result<Summary> {
    replay_switching(config, &[], input, sinks, progress)
}

/// [`replay`] with the rule switched: from line `switches[i].0` on (1-based, counting every
/// line of the input; the first line decided at or after it), the configuration
/// `switches[i].1` decides, continuing from the state decided so far, exactly as the daemon does
/// when it starts with another rule than its checkpoint's (docs/decisions/0057-a-rule-change-at-start-up.md).
/// `switches` in line order.
pub fn replay_switching<I: BufRead + Send, A: Write, R: Write>(
    config: &Config,
    switches: &[(u64, Config)],
    input: I,
    sinks: &mut Sinks<A, R>,
    mut progress: impl FnMut(u64),
) -> std::io::Result<Summary> {
    let report = sinks.events.is_some();
    let reporting = move |d: Decider| if report { d.reporting() } else { d };
    let mut decider = reporting(Decider::new(config));
    let mut switches = switches.iter().peekable();
    let mut alerts = Vec::new();
    let (tx, rx) = std::sync::mpsc::sync_channel::<std::io::Result<(Vec<Parsed>, u64)>>(4);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Vec<Parsed>>();
    std::thread::scope(|scope| {
        scope.spawn(move || parse_batches(input, &tx, &done_rx));
        for batch in rx {
            let (batch, bytes) = batch?;
            for p in &batch {
                while let Some((_, c)) = switches.next_if(|(line, _)| *line <= p.line_no) {
                    decider =
                        reporting(Decider::restore(c, &decider.snapshot()).map_err(|e| {
                            std::io::Error::other(format!("switching the rule: {e}"))
                        })?);
                }
                let result = decider.line(&p.result, &mut alerts);
                if let Some(sink) = sinks.events.as_mut() {
                    let at = match &p.result {
                        Ok(tl) => Some(tl.at),
                        Err((at, _)) => *at,
                    };
                    events::write(&mut decider, &p.result, at, sink)?;
                }
                let derived = decider.take_rejected_derived();
                if let Some(sink) = sinks.rejected.as_mut() {
                    let at = match &p.result {
                        Ok(tl) => Some(tl.at),
                        Err((at, _)) => *at,
                    };
                    for (ev, why) in derived {
                        let raw = serde_json::to_vec(&ev)?;
                        write_rejected(sink, p.line_no, at, &why, &raw, true)?;
                    }
                    if let Err((at, why)) = result {
                        let raw = p.raw.as_deref().unwrap_or_default();
                        write_rejected(sink, p.line_no, at, &why, raw, false)?;
                    }
                }
                for rec in alerts.drain(..) {
                    serde_json::to_writer(&mut sinks.alerts, &rec)?;
                    sinks.alerts.write_all(b"\n")?;
                }
            }
            let _ = done_tx.send(batch);
            progress(bytes);
            decider.note_state();
        }
        Ok::<(), std::io::Error>(())
    })?;
    decider.note_state();
    sinks.alerts.flush()?;
    if let Some(r) = sinks.rejected.as_mut() {
        r.flush()?;
    }
    if let Some(e) = sinks.events.as_mut() {
        e.flush()?;
    }
    Ok(Summary::of(&decider))
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
    let (mut spare, mut empty) = (Vec::new(), Vec::new());
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
                let result = parse_line_reusing(text, &mut spare);
                let raw = result.is_err().then(|| text.to_vec());
                batch.push(Parsed { line_no, result, raw });
            }
        }
        if (n == 0 || batch.len() == BATCH) && !batch.is_empty() {
            while let Ok(decided) = done.try_recv() {
                recycle(decided, &mut spare, &mut empty);
            }
            let next = empty.pop().unwrap_or_else(|| Vec::with_capacity(BATCH));
            let full = std::mem::replace(&mut batch, next);
            if tx.send(Ok((full, bytes))).is_err() {
                return;
            }
        }
        if n == 0 {
            return;
        }
    }
}

/// Takes a decided batch apart on the parsing thread: its events' strings become spare strings
/// for the events parsed next, its emptied vector the next batch; the rest is dropped.
fn recycle(mut decided: Vec<Parsed>, spare: &mut Vec<String>, empty: &mut Vec<Vec<Parsed>>) {
    for p in decided.drain(..) {
        if let Ok(TraceLine { arrival: Arrival::Event(ev), .. }) = p.result {
            if spare.len() < MAX_SPARE {
                spare.extend([ev.event_id, ev.machine, ev.sensor]);
            }
        }
    }
    if empty.len() < 4 {
        empty.push(decided);
    }
}

fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn write_rejected<R: Write>(
    sink: &mut R,
    line: u64,
    at: Option<i64>,
    why: &Rejection,
    raw: &[u8],
    derived: bool,
) -> std::io::Result<()> {
    let raw = String::from_utf8_lossy(raw);
    let rec =
        RejectedRecord { line, at, reason: why.reason, detail: &why.detail, raw: &raw, derived };
    serde_json::to_writer(&mut *sink, &rec)?;
    sink.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::parse::parse_line;

    /// A trace of many batches (so decided batches come back and their strings and vectors are
    /// reused): events of several machines and sensors with names of varied lengths, repeats
    /// (duplicates), high values (alerts), ticks and rejected lines.
    fn long_trace() -> String {
        let (mut t, mut last) = (String::new(), String::new());
        let at0 = 1_700_000_000_000_i64;
        for i in 0..5_000_i64 {
            let at = at0 + i * 100;
            match i % 97 {
                0 => t.push_str(&format!("{{\"at\":{at},\"kind\":\"tick\"}}\n")),
                1 => t.push_str(&format!("{{\"at\":{at},\"kind\":\"event\",\"event\":{{}}}}\n")),
                2 => t.push_str("not json\n"),
                // The last event again: a duplicate.
                n if n % 13 == 0 => t.push_str(&last),
                _ => {
                    let m = format!("machine-{}{}", i % 7, "x".repeat((i % 5) as usize * 9));
                    let s = format!("s{}", i % 3);
                    let value = if i % 4 == 0 { 0.9 } else { 0.1 };
                    last = format!(
                        "{{\"at\":{at},\"event\":{{\"clock\":{{\"state\":\"synced\"}},\
                         \"event_id\":\"gw.{m}.{s}.{i}\",\"machine\":\"{m}\",\
                         \"metric\":\"accel_rms\",\"quality\":\"good\",\"schema\":1,\
                         \"sensor\":\"{s}\",\"seq\":{i},\"ts_ms\":{ts},\"unit\":\"g\",\
                         \"value\":{value}}},\"kind\":\"event\"}}\n",
                        ts = at - 50,
                    );
                    t.push_str(&last);
                }
            }
        }
        t
    }

    /// Parsing in batches on another thread with reused strings and vectors decides exactly as
    /// one thread parsing every line afresh.
    #[test]
    fn batches_with_reused_strings_decide_as_one_thread_with_fresh_ones() {
        let config =
            Config::from_toml(include_str!("../fixtures/traces/golden.toml"), "golden.toml")
                .unwrap();
        let trace = long_trace();
        let mut sinks = Sinks { alerts: Vec::new(), rejected: Some(Vec::new()), events: None };
        let summary = replay(&config, trace.as_bytes(), &mut sinks, |_| {}).unwrap();

        let mut d = Decider::new(&config);
        let (mut alerts, mut want) = (Vec::new(), Vec::new());
        let mut rejected = 0;
        for (n, line) in trace.lines().enumerate() {
            if d.line(&parse_line(line.as_bytes()), &mut alerts).is_err() {
                rejected += 1;
            }
            for rec in alerts.drain(..) {
                serde_json::to_writer(&mut want, &rec).unwrap();
                want.push(b'\n');
            }
            // `peak_state` is noted after each batch, as replay does.
            if (n + 1) % BATCH == 0 {
                d.note_state();
            }
        }
        d.note_state();
        assert!(rejected > 0, "no rejected line");
        assert!(summary.counts.duplicates > 0, "no duplicate");
        assert!(!want.is_empty(), "no alert");
        assert_eq!(sinks.alerts, want);
        assert_eq!(summary, Summary::of(&d));
        let rejected_lines = sinks.rejected.unwrap().split(|&b| b == b'\n').count() - 1;
        assert_eq!(rejected_lines, rejected);
    }
}
