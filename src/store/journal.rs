//! The journal: every arrival's raw line and ingest time, by position.
//!
//! Version 2 values also say where the record came from ([`Origin`]: the source and the byte
//! offset just after its line), so a restart resumes a source right after its last journaled
//! record: the offset becomes durable in the same write as the record. Version 1 values (no
//! origin) are still read.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::{corrupt, failpoint, Result, Store, JOURNAL};

const VERSION: u8 = 1;
/// `[2][at: i64 BE][source: u16 BE][end_offset: u64 BE][line bytes]`.
const VERSION_ORIGIN: u8 = 2;

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

fn encode(at: i64, origin: Option<Origin>, line: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(19 + line.len());
    v.push(if origin.is_some() { VERSION_ORIGIN } else { VERSION });
    v.extend_from_slice(&at.to_be_bytes());
    if let Some(o) = origin {
        v.extend_from_slice(&o.source.to_be_bytes());
        v.extend_from_slice(&o.end_offset.to_be_bytes());
    }
    v.extend_from_slice(line);
    v
}

pub(super) fn decode(path: &std::path::Path, key: &[u8], value: &[u8]) -> Result<JournalRecord> {
    let pos = <[u8; 8]>::try_from(key)
        .map(u64::from_be_bytes)
        .map_err(|_| corrupt(path, JOURNAL, key, "journal key is not 8 bytes"))?;
    let short =
        || corrupt(path, JOURNAL, key, format!("journal record too short ({} bytes)", value.len()));
    let (version, rest) = value.split_first().ok_or_else(short)?;
    let (at, rest) = rest.split_first_chunk::<8>().ok_or_else(short)?;
    let at = i64::from_be_bytes(*at);
    match *version {
        VERSION => Ok(JournalRecord { pos, at, origin: None, line: rest.to_vec() }),
        VERSION_ORIGIN => {
            let (source, rest) = rest.split_first_chunk::<2>().ok_or_else(short)?;
            let (end, line) = rest.split_first_chunk::<8>().ok_or_else(short)?;
            let origin = Origin {
                source: u16::from_be_bytes(*source),
                end_offset: u64::from_be_bytes(*end),
            };
            Ok(JournalRecord { pos, at, origin: Some(origin), line: line.to_vec() })
        }
        v => Err(corrupt(path, JOURNAL, key, format!("unknown journal record version {v}"))),
    }
}

impl Store {
    /// Appends records `(at, line)` in one batch and returns their positions. Not durable until
    /// the next [`Store::commit`] (or another call that commits).
    pub fn append_journal(&mut self, records: &[(i64, Vec<u8>)]) -> Result<Range<u64>> {
        self.usable()?;
        let r = self.append_journal_inner(records.iter().map(|(at, l)| (*at, None, &l[..])));
        self.poison_on_error(r)
    }

    /// [`Store::append_journal`] of records `(at, origin, line)` that say where they came from.
    pub fn append_journal_from(
        &mut self,
        records: &[(i64, Origin, Vec<u8>)],
    ) -> Result<Range<u64>> {
        self.usable()?;
        let r = self.append_journal_inner(records.iter().map(|(at, o, l)| (*at, Some(*o), &l[..])));
        self.poison_on_error(r)
    }

    fn append_journal_inner<'a>(
        &mut self,
        records: impl Iterator<Item = (i64, Option<Origin>, &'a [u8])>,
    ) -> Result<Range<u64>> {
        let first = self.next_journal;
        let mut batch = sled::Batch::default();
        let mut pos = first;
        for (at, origin, line) in records {
            batch.insert(&pos.to_be_bytes(), encode(at, origin, line));
            pos += 1;
        }
        self.journal.apply_batch(batch).map_err(self.sled_err("apply batch to tree journal"))?;
        self.next_journal = pos;
        if pos > first {
            self.dirty.store(true, Ordering::Release);
        }
        failpoint!("store::journal::after_append");
        Ok(first..pos)
    }

    /// The position the next appended record will get.
    pub fn next_journal_pos(&self) -> u64 {
        self.next_journal
    }

    /// The first journal position not truncated.
    pub fn journal_start(&self) -> u64 {
        self.journal_start
    }

    /// Journal records `(position, at, line)` from `pos` on, in order (truncated ones skipped).
    pub fn journal_from(&self, pos: u64) -> impl Iterator<Item = Result<(u64, i64, Vec<u8>)>> {
        self.journal_records_from(pos).map(|r| r.map(|r| (r.pos, r.at, r.line)))
    }

    /// The byte offset after the last journaled record of source `source`, searching back from
    /// the newest record (`None` when no record of it is left in the journal).
    pub fn journal_last_offset(&self, source: u16) -> Result<Option<u64>> {
        for kv in self.journal.range(self.journal_start.to_be_bytes()..).rev() {
            let (k, v) = kv.map_err(self.sled_err("iterate tree journal backwards"))?;
            if let Some(o) = decode(&self.path, &k, &v)?.origin {
                if o.source == source {
                    return Ok(Some(o.end_offset));
                }
            }
        }
        Ok(None)
    }

    /// Journal records from `pos` on, in order, with their origin (truncated ones skipped).
    pub fn journal_records_from(&self, pos: u64) -> impl Iterator<Item = Result<JournalRecord>> {
        let path: PathBuf = self.path.clone();
        let from = pos.max(self.journal_start);
        let sled_path = self.path.clone();
        self.journal.range(from.to_be_bytes()..).map(move |kv| match kv {
            Ok((k, v)) => decode(&path, &k, &v),
            Err(source) => Err(super::StoreError::Sled {
                path: sled_path.clone(),
                op: "iterate tree journal".into(),
                source,
            }),
        })
    }

    /// Removes journal records below `pos`, which the last checkpoint must cover
    /// (`pos <= checkpoint.journal_pos + 1`). Commits the new start first, so a crash never lets
    /// a position be reused; the removal itself becomes durable with the next commit.
    pub fn truncate_journal_before(&mut self, pos: u64) -> Result<()> {
        self.usable()?;
        let r = self.truncate_journal_before_inner(pos);
        self.poison_on_error(r)
    }

    fn truncate_journal_before_inner(&mut self, pos: u64) -> Result<()> {
        if pos > self.checkpoint_pos + 1 {
            return Err(self.refused(format!(
                "truncating the journal before {pos} would drop records after the last \
                 checkpoint (journal position {})",
                self.checkpoint_pos
            )));
        }
        if pos <= self.journal_start {
            return Ok(());
        }
        self.state
            .insert(super::state::JOURNAL_START, &pos.to_be_bytes())
            .map_err(self.sled_err("write n/journal_start to tree state"))?;
        self.commit()?;
        self.journal_start = pos;
        let mut batch = sled::Batch::default();
        for key in self.journal.range(..pos.to_be_bytes()).keys() {
            batch.remove(key.map_err(self.sled_err("iterate tree journal"))?);
        }
        self.journal.apply_batch(batch).map_err(self.sled_err("apply batch to tree journal"))
    }

    /// On open: the next position is past the last record and past the truncation point.
    pub(super) fn load_journal_position(&mut self) -> Result<()> {
        if let Some((k, _)) =
            self.journal.last().map_err(self.sled_err("read last key of tree journal"))?
        {
            let last = <[u8; 8]>::try_from(&k[..])
                .map(u64::from_be_bytes)
                .map_err(|_| self.corrupt(JOURNAL, &k, "journal key is not 8 bytes"))?;
            self.next_journal = self.next_journal.max(last.saturating_add(1));
        }
        self.next_journal = self.next_journal.max(self.journal_start);
        Ok(())
    }
}
