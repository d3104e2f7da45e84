//! What a source hands the decide stage: journal records just committed and, when the sender
//! parsed their lines already, the parses. The trace ingest parses on its own thread, while the
//! decide stage decides the batch before: parsing was a sixth of the decide stage's time in a
//! burst, and the decide stage is the burst's critical path. Parsing is a pure function of a
//! line's bytes, so a record decides the same whoever parsed it; the decide stage parses what
//! comes without (live sources, and the journal read back in catch-up).

use std::ops::Range;

use crate::store::JournalRecord;
use crate::trace::parse::{parse_line_and_event_span, Verdict};

/// A line's parse and where its event is ([`parse_line_and_event_span`]).
pub type ParsedLine = (Verdict, Option<Range<usize>>);

/// A batch for the decide stage.
#[derive(Debug)]
pub struct DecideBatch {
    pub records: Vec<JournalRecord>,
    /// Empty, or the parse of each record's line, in order.
    pub parsed: Vec<ParsedLine>,
}

impl DecideBatch {
    /// The records with their lines parsed.
    pub fn parsed(records: Vec<JournalRecord>) -> Self {
        let parsed = records.iter().map(|r| parse_line_and_event_span(&r.line)).collect();
        DecideBatch { records, parsed }
    }

    /// Each record with its parse, when the batch has them.
    pub fn into_parts(self) -> (Vec<JournalRecord>, Vec<Option<ParsedLine>>) {
        let parsed = if self.parsed.len() == self.records.len() {
            self.parsed.into_iter().map(Some).collect()
        } else {
            (0..self.records.len()).map(|_| None).collect()
        };
        (self.records, parsed)
    }
}

impl From<Vec<JournalRecord>> for DecideBatch {
    fn from(records: Vec<JournalRecord>) -> Self {
        DecideBatch { records, parsed: Vec::new() }
    }
}
