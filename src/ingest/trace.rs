//! The ingest task of a `kind = "trace"` source (docs/contracts.md section 8): reads lines from the
//! resume offset on, appends them to the journal with group commit (every `commit_records`
//! lines, or after `commit_interval` when lines trickle in at `speed` > 0), and only after the
//! commit hands them to the decide stage and advances its position. Each journal record carries
//! the byte offset after its line, so a restart resumes right after the last journaled record.
//! The channel to the decide stage is bounded: a slow decide stage stops the reading.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::PathBuf;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{journal, IngestError, Line, Params};
use crate::config::TraceSource;
use crate::decide::input::DecideBatch;
use crate::records::journal::Origin;
use crate::store::SharedStore;
use crate::trace::parse::salvage_at;

/// A trace file being read from a byte offset.
#[derive(Debug)]
struct TraceReader {
    path: PathBuf,
    input: BufReader<File>,
    source: u16,
    offset: u64,
    /// Ingest time of the last line whose `at` could be read (for lines where it cannot).
    last_at: i64,
}

impl TraceReader {
    fn open(path: PathBuf, source: u16, offset: u64) -> Result<TraceReader, IngestError> {
        let io = |source| IngestError::Io { path: path.clone(), source };
        let mut file = File::open(&path).map_err(io)?;
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        Ok(TraceReader {
            input: BufReader::with_capacity(1 << 16, file),
            path,
            source,
            offset,
            last_at: 0,
        })
    }

    /// Up to `max` non-blank lines (empty at the end of the file). Blank lines are skipped as
    /// `replay` skips them; their bytes are covered by the next line's offset.
    fn read(&mut self, max: usize) -> Result<Vec<Line>, IngestError> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while out.len() < max {
            buf.clear();
            let n = self
                .input
                .read_until(b'\n', &mut buf)
                .map_err(|source| IngestError::Io { path: self.path.clone(), source })?;
            if n == 0 {
                break;
            }
            self.offset += n as u64;
            let line = trim_newline(&buf);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let at = salvage_at(line).unwrap_or(self.last_at);
            self.last_at = at;
            let origin = Origin { source: self.source, end_offset: self.offset };
            out.push((at, origin, line.to_vec()));
        }
        Ok(out)
    }
}

fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Reads, journals and forwards the source's lines until the end (with `exit_at_end`) or until
/// `stop` is set; lines read before `stop` are committed and sent first.
#[allow(clippy::disallowed_methods)] // group-commit deadlines are tokio timers; tests pause tokio's clock
pub(super) async fn ingest(
    p: Params,
    trace: TraceSource,
    exit_at_end: bool,
    store: SharedStore,
    tx: mpsc::Sender<DecideBatch>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), IngestError> {
    let (path, source, offset) = (trace.path.clone(), p.source, p.resume_at);
    let mut reader =
        tokio::task::spawn_blocking(move || TraceReader::open(path, source, offset)).await??;
    let paced = trace.speed > 0.0;
    let chunk = if paced { 64 } else { p.commit_records };
    let started = Instant::now();
    let mut first_at: Option<i64> = None;
    let mut pending: Vec<Line> = Vec::new();
    let mut deadline: Option<Instant> = None;
    let mut at_end = false;
    while !*stop.borrow() {
        let (r, lines) = tokio::task::spawn_blocking(move || {
            let lines = reader.read(chunk);
            (reader, lines)
        })
        .await?;
        reader = r;
        let lines = lines?;
        if lines.is_empty() {
            at_end = true;
            break;
        }
        for line in lines {
            if paced {
                let first = *first_at.get_or_insert(line.0);
                let ahead_ms = ((line.0 - first).max(0) as f64 / trace.speed) as u64;
                let due = started + std::time::Duration::from_millis(ahead_ms);
                if let Some(d) = deadline.filter(|&d| d < due && !pending.is_empty()) {
                    if wait_until(d, &mut stop).await {
                        break;
                    }
                    commit(&store, &p, &tx, std::mem::take(&mut pending)).await?;
                    deadline = None;
                }
                if wait_until(due, &mut stop).await {
                    break;
                }
            }
            pending.push(line);
            let d = *deadline.get_or_insert_with(|| {
                Instant::now() + std::time::Duration::from_millis(p.commit_interval_ms as u64)
            });
            if pending.len() >= p.commit_records || Instant::now() >= d {
                commit(&store, &p, &tx, std::mem::take(&mut pending)).await?;
                deadline = None;
            }
        }
        if !paced && !pending.is_empty() {
            commit(&store, &p, &tx, std::mem::take(&mut pending)).await?;
            deadline = None;
        }
    }
    if !pending.is_empty() {
        commit(&store, &p, &tx, pending).await?;
    }
    if at_end {
        // The trace is read to its end: the decide stage declares its sensors' tails.
        let what = format!("trace {}", trace.path.display());
        tx.send(DecideBatch::end_of_source(source, what))
            .await
            .map_err(|_| IngestError::StageGone("decide"))?;
    }
    if !exit_at_end {
        while !*stop.borrow() {
            if stop.changed().await.is_err() {
                break;
            }
        }
    }
    Ok(())
}

/// Sleeps until `t`; true when `stop` was set first.
async fn wait_until(t: Instant, stop: &mut watch::Receiver<bool>) -> bool {
    let stopped = tokio::select! {
        _ = tokio::time::sleep_until(t) => false,
        r = stop.wait_for(|s| *s) => r.is_ok(),
    };
    stopped || *stop.borrow()
}

/// Appends `lines` to the journal and commits (one fsync for the batch), then sends them to the
/// decide stage: the source position advances only now, with the records durable.
async fn commit(
    store: &SharedStore,
    p: &Params,
    tx: &mpsc::Sender<DecideBatch>,
    lines: Vec<Line>,
) -> Result<(), IngestError> {
    let batch = journal(store, &p.telemetry, p.raw_threshold, lines).await?;
    tx.send(batch).await.map_err(|_| IngestError::StageGone("decide"))
}
