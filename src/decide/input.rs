//! What a source hands the decide stage: journal records just committed and, when the sender
//! parsed their lines already, the parses. The trace ingest parses on its own thread, while the
//! decide stage decides the batch before: parsing was a sixth of the decide stage's time in a
//! burst, and the decide stage is the burst's critical path. Parsing is a pure function of a
//! line's bytes, so a record decides the same whoever parsed it; the decide stage parses what
//! comes without (the journal read back in catch-up, a record released from quarantine) and
//! lines longer than [`PARSE_AHEAD_MAX`]: a block of raw samples parsed ahead would wait in the
//! channel twice, as its line and as its numbers.

use std::ops::Range;

use crate::records::journal::JournalRecord;
use crate::trace::parse::{parse_line_and_event_span, Verdict};

/// A line's parse and where its event is ([`parse_line_and_event_span`]).
pub type ParsedLine = (Verdict, Option<Range<usize>>);

/// Lines up to this many bytes are parsed by the sender (an event line is about 270).
pub const PARSE_AHEAD_MAX: usize = 4096;

/// A batch for the decide stage.
#[derive(Debug)]
pub struct DecideBatch {
    pub records: Vec<JournalRecord>,
    /// Empty, or for each record in order its line's parse, when the sender parsed it.
    pub parsed: Vec<Option<ParsedLine>>,
    /// Set on the batch a source sends after its last record when it reached its end (a trace
    /// at the end of its file): the source's index and what it is, for its `source_ended`.
    pub ended: Option<(u16, String)>,
}

impl DecideBatch {
    /// The records with their lines parsed, those up to [`PARSE_AHEAD_MAX`] bytes.
    pub fn parsed(records: Vec<JournalRecord>) -> Self {
        let parsed = records
            .iter()
            .map(|r| (r.line.len() <= PARSE_AHEAD_MAX).then(|| parse_line_and_event_span(&r.line)))
            .collect();
        DecideBatch { records, parsed, ended: None }
    }

    /// No record: source `source` (described by `what`) is at its end.
    pub fn end_of_source(source: u16, what: String) -> Self {
        DecideBatch { records: Vec::new(), parsed: Vec::new(), ended: Some((source, what)) }
    }

    /// Each record with its parse, when the batch has them.
    pub fn into_parts(self) -> (Vec<JournalRecord>, Vec<Option<ParsedLine>>) {
        let parsed = if self.parsed.len() == self.records.len() {
            self.parsed
        } else {
            (0..self.records.len()).map(|_| None).collect()
        };
        (self.records, parsed)
    }
}

impl From<Vec<JournalRecord>> for DecideBatch {
    fn from(records: Vec<JournalRecord>) -> Self {
        DecideBatch { records, parsed: Vec::new(), ended: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Short lines come parsed, a long one (a block of raw samples) is left to the decide stage,
    /// and a batch without parses hands out none.
    #[test]
    fn lines_up_to_the_bound_are_parsed_ahead() {
        let record = |pos: u64, line: String| JournalRecord {
            pos,
            at: 1,
            origin: None,
            line: line.into_bytes(),
        };
        let tick = r#"{"at": 1700000000000, "kind": "tick"}"#.to_string();
        let long =
            format!(r#"{{"at": 1700000000000, "kind": "tick", "x": "{}"}}"#, "a".repeat(5000));
        let (records, parsed) =
            DecideBatch::parsed(vec![record(1, tick.clone()), record(2, long)]).into_parts();
        assert_eq!(records.len(), 2);
        assert_eq!(parsed[0], Some(parse_line_and_event_span(tick.as_bytes())));
        assert_eq!(parsed[1], None);
        let (_, parsed) = DecideBatch::from(vec![record(3, tick)]).into_parts();
        assert_eq!(parsed, vec![None]);
    }
}
