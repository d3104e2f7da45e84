//! The journal: every arrival's raw line and ingest time, by position.
//!
//! Version 2 values also say where the record came from ([`Origin`]: the source and the byte
//! offset just after its line), so a restart resumes a source right after its last journaled
//! record: the offset becomes durable in the same write as the record. Version 1 values (no
//! origin) are still read.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::segments::{SegmentRef, Segments};
use super::{corrupt, failpoint, Result, Store, StoreError, JOURNAL};

const VERSION: u8 = 1;
/// `[2][at: i64 BE][source: u16 BE][end_offset: u64 BE][line bytes]`.
const VERSION_ORIGIN: u8 = 2;
/// `[3][at: i64 BE][has origin: u8][source: u16 BE][end_offset: u64 BE][segment: u64 BE]
/// [offset: u64 BE][len: u32 BE][xxh3-64: u64 BE]`, the origin fields only when `has origin` is 1:
/// the line is in a segment file (`segments.rs`).
const VERSION_SEGMENT: u8 = 3;

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

/// A journal value decoded without reading its line from a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct JournalMeta {
    pub pos: u64,
    pub at: i64,
    pub origin: Option<Origin>,
    pub body: Body,
}

/// The line itself, or where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Body {
    Inline(Vec<u8>),
    Segment(SegmentRef),
}

impl Body {
    /// The bytes the line takes on disk (in sled or in its segment).
    pub(super) fn len(&self) -> u64 {
        match self {
            Body::Inline(l) => l.len() as u64,
            Body::Segment(r) => u64::from(r.len),
        }
    }
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

fn encode_ref(at: i64, origin: Option<Origin>, r: &SegmentRef) -> Vec<u8> {
    let mut v = Vec::with_capacity(48);
    v.push(VERSION_SEGMENT);
    v.extend_from_slice(&at.to_be_bytes());
    v.push(u8::from(origin.is_some()));
    if let Some(o) = origin {
        v.extend_from_slice(&o.source.to_be_bytes());
        v.extend_from_slice(&o.end_offset.to_be_bytes());
    }
    v.extend_from_slice(&r.id.to_be_bytes());
    v.extend_from_slice(&r.offset.to_be_bytes());
    v.extend_from_slice(&r.len.to_be_bytes());
    v.extend_from_slice(&r.sum.to_be_bytes());
    v
}

/// Splits `N` bytes off the front of `rest`.
fn take<const N: usize>(rest: &mut &[u8]) -> Option<[u8; N]> {
    let (head, tail) = rest.split_first_chunk::<N>()?;
    *rest = tail;
    Some(*head)
}

/// Decodes a journal value without reading a segment.
pub(super) fn decode_meta(path: &Path, key: &[u8], value: &[u8]) -> Result<JournalMeta> {
    let pos = <[u8; 8]>::try_from(key)
        .map(u64::from_be_bytes)
        .map_err(|_| corrupt(path, JOURNAL, key, "journal key is not 8 bytes"))?;
    let short =
        || corrupt(path, JOURNAL, key, format!("journal record too short ({} bytes)", value.len()));
    let (version, mut rest) = value.split_first().ok_or_else(short)?;
    let at = i64::from_be_bytes(take::<8>(&mut rest).ok_or_else(short)?);
    let origin = |rest: &mut &[u8]| -> Option<Origin> {
        let source = u16::from_be_bytes(take::<2>(rest)?);
        Some(Origin { source, end_offset: u64::from_be_bytes(take::<8>(rest)?) })
    };
    let (origin, body) = match *version {
        VERSION => (None, Body::Inline(rest.to_vec())),
        VERSION_ORIGIN => {
            let o = origin(&mut rest).ok_or_else(short)?;
            (Some(o), Body::Inline(rest.to_vec()))
        }
        VERSION_SEGMENT => {
            let o = match take::<1>(&mut rest).ok_or_else(short)? {
                [0] => None,
                [1] => Some(origin(&mut rest).ok_or_else(short)?),
                [f] => return Err(corrupt(path, JOURNAL, key, format!("origin flag {f}"))),
            };
            let mut r = || -> Option<SegmentRef> {
                Some(SegmentRef {
                    id: u64::from_be_bytes(take::<8>(&mut rest)?),
                    offset: u64::from_be_bytes(take::<8>(&mut rest)?),
                    len: u32::from_be_bytes(take::<4>(&mut rest)?),
                    sum: u64::from_be_bytes(take::<8>(&mut rest)?),
                })
            };
            let r = r().ok_or_else(short)?;
            if !rest.is_empty() {
                let what = format!("{} bytes after a segment reference", rest.len());
                return Err(corrupt(path, JOURNAL, key, what));
            }
            (o, Body::Segment(r))
        }
        v => {
            return Err(corrupt(path, JOURNAL, key, format!("unknown journal record version {v}")))
        }
    };
    Ok(JournalMeta { pos, at, origin, body })
}

/// Decodes a journal value and reads its line (from its segment when it is not inline).
pub(super) fn decode(
    path: &Path,
    segments: &Segments,
    key: &[u8],
    value: &[u8],
) -> Result<JournalRecord> {
    with_line(path, segments, key, decode_meta(path, key, value)?)
}

/// A decoded journal value (of `key`) with its line read (from its segment when not inline).
pub(super) fn with_line(
    path: &Path,
    segments: &Segments,
    key: &[u8],
    m: JournalMeta,
) -> Result<JournalRecord> {
    let line = match m.body {
        Body::Inline(line) => line,
        Body::Segment(r) => segments.read(&r).map_err(|what| corrupt(path, JOURNAL, key, what))?,
    };
    Ok(JournalRecord { pos: m.pos, at: m.at, origin: m.origin, line })
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
        let mut raw = false;
        for (at, origin, line) in records {
            if line.len() >= self.opts.raw_threshold {
                let r = self.segments.append(pos, line).map_err(|e| self.segment_err(e))?;
                batch.insert(&pos.to_be_bytes(), encode_ref(at, origin, &r));
                raw = true;
            } else {
                batch.insert(&pos.to_be_bytes(), encode(at, origin, line));
            }
            pos += 1;
        }
        if raw {
            failpoint!("store::segments::after_write");
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
            if let Some(o) = decode_meta(&self.path, &k, &v)?.origin {
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
        let segments: Arc<Segments> = self.segments.clone();
        self.journal.range(from.to_be_bytes()..).map(move |kv| match kv {
            Ok((k, v)) => decode(&path, &segments, &k, &v),
            Err(source) => Err(StoreError::Sled {
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
        self.journal.apply_batch(batch).map_err(self.sled_err("apply batch to tree journal"))?;
        // Segments left without references go once this removal is durable (the next commit).
        self.gc_due.store(true, Ordering::Release);
        Ok(())
    }

    /// On open: the next position is past the last record and past the truncation point.
    pub(super) fn load_journal_position(&mut self) -> Result<()> {
        self.drop_torn_tail()?;
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

    /// On open: removes references at the journal's tail, after the checkpoint, whose segment
    /// bytes are missing. Only a power loss leaves them (sled wrote its buffer, the segment's
    /// bytes were not synced yet: the record was never committed, so its source never advanced
    /// past it). Stops at the first record that is whole.
    fn drop_torn_tail(&mut self) -> Result<()> {
        loop {
            let Some((k, v)) =
                self.journal.last().map_err(self.sled_err("read last key of tree journal"))?
            else {
                return Ok(());
            };
            // A value that does not decode is the start-up check's to report, not open's.
            let Ok(m) = decode_meta(&self.path, &k, &v) else { return Ok(()) };
            let torn = matches!(&m.body, Body::Segment(r) if !self.segments.present(r));
            if !torn || m.pos <= self.checkpoint_pos {
                return Ok(());
            }
            self.journal.remove(&k).map_err(self.sled_err("remove a torn journal record"))?;
        }
    }

    /// Deletes every segment (but the current one) that no journal record at or after the
    /// journal's start references. Called once removals of references are durable.
    pub(super) fn collect_segments(&self) -> Result<()> {
        let ids = self.segments.ids().map_err(|e| self.segment_err(e))?;
        let current = self.segments.current();
        for (i, &id) in ids.iter().enumerate() {
            if Some(id) == current {
                continue;
            }
            let end = ids.get(i + 1).copied().unwrap_or(u64::MAX);
            let from = id.max(self.journal_start);
            if from < end && self.references(id, from, end)? {
                continue;
            }
            failpoint!("store::segments::before_delete");
            self.segments.delete(id).map_err(|e| self.segment_err(e))?;
        }
        Ok(())
    }

    /// Whether a journal record in `[from, end)` references segment `id`.
    fn references(&self, id: u64, from: u64, end: u64) -> Result<bool> {
        for kv in self.journal.range(from.to_be_bytes()..end.to_be_bytes()) {
            let (k, v) = kv.map_err(self.sled_err("iterate tree journal"))?;
            if matches!(decode_meta(&self.path, &k, &v)?.body, Body::Segment(r) if r.id == id) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
