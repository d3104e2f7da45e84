//! `linegate export`: the input's history (`[store] history`, docs/contracts.md section 11) as a
//! trace (section 8), each record's line exactly as it was journaled, with its ingest time `at`,
//! in journal order: the order the gateway decided them in. `replay` of an export of the whole
//! history decides what the gateway decided (docs/operations.md, "History, export and what-if").
//!
//! What an export holds: the records the gateway had decided and checkpointed when the export
//! began, from the start of the history on. Raw-sample lines of frames that retention shed
//! while queued are not there (their gaps are declared); with `--machine`, the lines of that
//! machine and every `tick` (lines that are not a trace record of any machine are left out).

use std::io::Write;

use super::view::View;
use super::AuditError;
use crate::store::HistoryLines;
use crate::trace::{parse::parse_line, Arrival};

/// History records read under one hold of the store's lock.
pub const EXPORT_PAGE: usize = 4096;

/// Which part of the history to export.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Span {
    /// Records ingested at or after this (Unix ms).
    pub from_ms: Option<i64>,
    /// Records ingested before this (Unix ms).
    pub to_ms: Option<i64>,
    /// Only this machine's records (and ticks).
    pub machine: Option<String>,
}

impl Span {
    /// Whether a record's `line` belongs to the export (its ingest time is already within the
    /// range).
    fn keeps(&self, line: &[u8]) -> bool {
        let Some(machine) = &self.machine else { return true };
        match parse_line(line) {
            Ok(l) => match &l.arrival {
                Arrival::Event(e) => &e.machine == machine,
                Arrival::Samples(s) | Arrival::Readings(s) => &s.machine == machine,
                Arrival::Tick => true,
            },
            Err(_) => false,
        }
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exported {
    pub lines: u64,
    /// The journal positions the history spanned when the export began: `[start, end)`.
    pub start: u64,
    pub end: u64,
}

/// Writes the history within `span` to `out`, one line per record, a page at a time under the
/// store's lock. Fails, rather than write a trace with a hole, when retention trims the history
/// past the next record to read meanwhile.
pub fn export(view: &View<'_>, span: &Span, out: &mut dyn Write) -> Result<Exported, AuditError> {
    let (start, end) = view.read(|s| (s.journal_start(), s.checkpoint_pos() + 1));
    let (from_at, to_at) = (span.from_ms.unwrap_or(i64::MIN), span.to_ms.unwrap_or(i64::MAX));
    let mut done = Exported { start, end, ..Exported::default() };
    let mut next = start;
    while next < end {
        let page = view.read(|s| -> Result<Option<HistoryLines>, AuditError> {
            if s.journal_start() > next {
                return Ok(None);
            }
            let keep = &mut |line: &[u8]| span.keeps(line);
            Ok(Some(s.history_lines(next, end, (from_at, to_at), EXPORT_PAGE, keep)?))
        })?;
        let Some(page) = page else {
            return Err(AuditError::Usage(format!(
                "retention trimmed the history past journal position {next} while it was being \
                 exported (the store is over [store] max_bytes): export a later --from"
            )));
        };
        let Some(last) = page.last_pos else { break };
        next = last + 1;
        out.write_all(&page.text)?;
        done.lines += page.lines;
    }
    Ok(done)
}

/// `linegate export` on a view: the trace on `out`, exit status 0.
pub fn run(view: &mut View<'_>, span: &Span, out: &mut dyn Write) -> Result<u8, AuditError> {
    export(view, span, out)?;
    Ok(0)
}
