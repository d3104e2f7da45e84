//! A journal record as the stages see it: its position, its ingest time, where it came from and
//! its line. The store keeps it (`crate::store`, tree `journal`: the encoding is the store's);
//! the ingest hands records to the decide stage and the decider decides them.

/// Where a journal record came from: source `source` (its index in the configuration, or
/// [`Origin::RELEASED`]), and the byte offset in that source just after the record's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    pub source: u16,
    pub end_offset: u64,
}

impl Origin {
    /// A record released from quarantine (no source position).
    pub const RELEASED: u16 = u16::MAX;
}

/// One journal record with its origin (`None` for version-1 records and plain appends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalRecord {
    pub pos: u64,
    pub at: i64,
    pub origin: Option<Origin>,
    pub line: Vec<u8>,
}
