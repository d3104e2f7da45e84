//! The journal: every arrival's raw line and ingest time, by position.
//!
//! Version 2 values also say where the record came from ([`Origin`]: the source and the byte
//! offset just after its line), so a restart resumes a source right after its last journaled
//! record: the offset becomes durable in the same write as the record. Version 1 values (no
//! origin) are still read.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::journal_pages::metas;
use super::segments::{SegmentRef, Segments};
use super::{corrupt, page, Result, Store, JOURNAL};
use crate::records::journal::{JournalRecord, Origin};

const VERSION: u8 = 1;
/// `[2][at: i64 BE][source: u16 BE][end_offset: u64 BE][line bytes]`.
const VERSION_ORIGIN: u8 = 2;
/// `[3][at: i64 BE][has origin: u8][source: u16 BE][end_offset: u64 BE][segment: u64 BE]
/// [offset: u64 BE][len: u32 BE][xxh3-64: u64 BE]`, the origin fields only when `has origin` is 1:
/// the line is in a segment file (`segments.rs`).
const VERSION_SEGMENT: u8 = 3;

/// A journal value decoded without reading its line from a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct JournalMeta {
    pub pos: u64,
    pub at: i64,
    pub origin: Option<Origin>,
    pub body: Body,
    /// The bytes the record itself takes in sled (its entry, on a page).
    pub stored: u64,
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

/// Journal records encoded and packed into their pages without the store, keyed by their index
/// among the records: all [`Store::append_prepared_journal`] leaves to do is to place them.
#[derive(Debug)]
pub struct PreparedJournal {
    records: usize,
    /// (index of the page's first record, the page's value)
    pages: Vec<(usize, Vec<u8>)>,
}

impl PreparedJournal {
    /// `records` `(at, origin, line)` prepared, or `None` when a line is `raw_threshold` bytes
    /// or longer: such a line goes to a segment file, which needs its position, so
    /// [`Store::append_journal_from`] takes them all.
    pub fn new(records: &[(i64, Origin, Vec<u8>)], raw_threshold: usize) -> Option<Self> {
        if records.iter().any(|(_, _, line)| line.len() >= raw_threshold) {
            return None;
        }
        let values: Vec<Vec<u8>> =
            records.iter().map(|(at, o, line)| encode(*at, Some(*o), line)).collect();
        Some(Self::pack(&values))
    }

    fn pack(values: &[Vec<u8>]) -> Self {
        let records: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let pages = page::runs(&records)
            .into_iter()
            .map(|(i, run)| (i, page::value(run, page::Pages::Packed)))
            .collect();
        PreparedJournal { records: values.len(), pages }
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

/// Decodes journal record `pos` without reading a segment: `value` is its sled value, or its
/// entry on the page under key `page` (named in errors).
pub(super) fn decode_meta(
    path: &Path,
    pos: u64,
    page: Option<u64>,
    value: &[u8],
) -> Result<JournalMeta> {
    let (at, origin, body) = decode_ref(path, pos, page, value)?;
    let body = match body {
        BodyRef::Inline(line) => Body::Inline(line.to_vec()),
        BodyRef::Segment(r) => Body::Segment(r),
    };
    Ok(JournalMeta { pos, at, origin, body, stored: value.len() as u64 })
}

/// [`decode_meta`] without copying an inline line: `(at, origin, body)`.
pub(super) fn decode_ref<'v>(
    path: &Path,
    pos: u64,
    page: Option<u64>,
    value: &'v [u8],
) -> Result<(i64, Option<Origin>, BodyRef<'v>)> {
    parse(value).map_err(|what| {
        let what = match page {
            Some(p) => format!("{what} (on the page under {p})"),
            None => what,
        };
        corrupt(path, JOURNAL, &pos.to_be_bytes(), what)
    })
}

/// A line in the record's bytes, or where it is.
pub(super) enum BodyRef<'v> {
    Inline(&'v [u8]),
    Segment(SegmentRef),
}

/// The fields of one journal record's bytes, or what is wrong with them.
fn parse(value: &[u8]) -> std::result::Result<(i64, Option<Origin>, BodyRef<'_>), String> {
    let short = || format!("journal record too short ({} bytes)", value.len());
    let (version, mut rest) = value.split_first().ok_or_else(short)?;
    let at = i64::from_be_bytes(take::<8>(&mut rest).ok_or_else(short)?);
    let origin = |rest: &mut &[u8]| -> Option<Origin> {
        let source = u16::from_be_bytes(take::<2>(rest)?);
        Some(Origin { source, end_offset: u64::from_be_bytes(take::<8>(rest)?) })
    };
    let (origin, body) = match *version {
        VERSION => (None, BodyRef::Inline(rest)),
        VERSION_ORIGIN => {
            let o = origin(&mut rest).ok_or_else(short)?;
            (Some(o), BodyRef::Inline(rest))
        }
        VERSION_SEGMENT => {
            let o = match take::<1>(&mut rest).ok_or_else(short)? {
                [0] => None,
                [1] => Some(origin(&mut rest).ok_or_else(short)?),
                [f] => return Err(format!("origin flag {f}")),
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
                return Err(format!("{} bytes after a segment reference", rest.len()));
            }
            (o, BodyRef::Segment(r))
        }
        v => return Err(format!("unknown journal record version {v}")),
    };
    Ok((at, origin, body))
}

/// A decoded journal record with its line read (from its segment when not inline).
pub(super) fn with_line(path: &Path, segments: &Segments, m: JournalMeta) -> Result<JournalRecord> {
    let line = match m.body {
        Body::Inline(line) => line,
        Body::Segment(r) => {
            segments.read(&r).map_err(|what| corrupt(path, JOURNAL, &m.pos.to_be_bytes(), what))?
        }
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

    /// [`Store::append_journal_from`] of records a [`PreparedJournal`] already encoded and
    /// packed: only their keys are chosen here (the ingest prepares them before it takes the
    /// store's lock, so the lock is held for sled's batch alone).
    pub fn append_prepared_journal(&mut self, prepared: PreparedJournal) -> Result<Range<u64>> {
        self.usable()?;
        let first = self.next_journal;
        let r = self.apply_journal_pages(first, prepared);
        self.poison_on_error(r)
    }

    fn append_journal_inner<'a>(
        &mut self,
        records: impl Iterator<Item = (i64, Option<Origin>, &'a [u8])>,
    ) -> Result<Range<u64>> {
        let first = self.next_journal;
        let mut values = Vec::new();
        let mut raw = false;
        for (pos, (at, origin, line)) in (first..).zip(records) {
            if line.len() >= self.opts.raw_threshold {
                let r = self.segments.append(pos, line).map_err(|e| self.segment_err(e))?;
                values.push(encode_ref(at, origin, &r));
                raw = true;
            } else {
                values.push(encode(at, origin, line));
            }
        }
        if raw {
            failpoint!("store::segments::after_write", crate::store::StoreError);
        }
        self.apply_journal_pages(first, PreparedJournal::pack(&values))
    }

    /// Writes `prepared`'s pages under the positions from `first` on, in one batch.
    fn apply_journal_pages(&mut self, first: u64, prepared: PreparedJournal) -> Result<Range<u64>> {
        let mut batch = sled::Batch::default();
        for (i, page) in prepared.pages {
            batch.insert(&(first + i as u64).to_be_bytes(), page);
        }
        self.journal.apply_batch(batch).map_err(self.sled_err("apply batch to tree journal"))?;
        let pos = first + prepared.records as u64;
        self.next_journal = pos;
        if pos > first {
            self.commits.appended(pos - 1);
        }
        failpoint!("store::journal::after_append", crate::store::StoreError);
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

    /// The byte offset after the last journaled record of source `source` at a position after
    /// `after`, searching back from the newest record (`None` when no record of it is there).
    /// A start passes the checkpoint's position, whose offsets cover the records before: a source
    /// with no record since would otherwise be searched for through the whole journal (a week's
    /// outage keeps millions of events in it).
    pub fn journal_last_offset(&self, source: u16, after: u64) -> Result<Option<u64>> {
        for m in self.journal_metas_back(self.journal_start.max(after.saturating_add(1))) {
            if let Some(o) = m?.origin {
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
        let segments: Arc<Segments> = self.segments.clone();
        self.reading(
            self.journal_metas(pos.max(self.journal_start), u64::MAX)
                .map(move |m| with_line(&path, &segments, m?)),
        )
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
        // The page holding `pos`, if it began before it, keeps its records from `pos` on.
        let covering =
            page::covering(&self.journal, b"", pos).map_err(self.sled_err("read tree journal"))?;
        if let Some((first, v)) = covering.filter(|(first, _)| *first < pos) {
            let key = first.to_be_bytes();
            let corrupt = |what| self.corrupt(JOURNAL, &key, what);
            let v = page::unpack(&v).map_err(corrupt)?;
            let slots = page::keyed_slots(b"", &key, &v).map_err(corrupt)?;
            let tail: Vec<(u64, &[u8])> = slots.into_iter().filter(|(p, _)| *p >= pos).collect();
            page::rewrite(&mut batch, b"", first, &tail, page::Pages::Packed);
        }
        self.journal.apply_batch(batch).map_err(self.sled_err("apply batch to tree journal"))?;
        // Segments left without references go once this removal is durable (the next commit).
        self.commits.removed_references();
        Ok(())
    }

    /// On open: the next position is past the last record and past the truncation point.
    pub(super) fn load_journal_position(&mut self) -> Result<()> {
        self.drop_torn_tail()?;
        let last = page::last_seq(&self.journal, b"")
            .map_err(self.sled_err("read last key of tree journal"))?
            .map_err(|k| self.corrupt(JOURNAL, &k, "journal key is not 8 bytes"))?;
        self.next_journal = self.next_journal.max(last.saturating_add(1));
        self.next_journal = self.next_journal.max(self.journal_start);
        Ok(())
    }

    /// On open: removes references at the journal's tail, after the checkpoint, whose segment
    /// bytes are missing. Only a power loss leaves them (sled wrote its buffer, the segment's
    /// bytes were not synced yet: the record was never committed, so its source never advanced
    /// past it). Stops at the first record that is whole; a page keeps its records before the
    /// torn ones.
    fn drop_torn_tail(&mut self) -> Result<()> {
        loop {
            let Some((k, v)) =
                self.journal.last().map_err(self.sled_err("read last key of tree journal"))?
            else {
                return Ok(());
            };
            // A value that does not decode is the start-up check's to report, not open's.
            let Ok(metas) = metas(&self.path, &k, &v) else { return Ok(()) };
            let torn = |m: &JournalMeta| {
                m.pos > self.checkpoint_pos
                    && matches!(&m.body, Body::Segment(r) if !self.segments.present(r))
            };
            let whole = metas.iter().rposition(|m| !torn(m)).map_or(0, |i| i + 1);
            if whole == metas.len() {
                return Ok(());
            }
            let err = self.sled_err("remove a torn journal record");
            if whole == 0 {
                self.journal.remove(&k).map_err(err)?;
                continue;
            }
            let (Some(first), Some(through)) = (page::key_seq(b"", &k), metas.get(whole - 1))
            else {
                return Ok(());
            };
            let corrupt = |what| self.corrupt(JOURNAL, &k, what);
            let v = page::unpack(&v).map_err(corrupt)?;
            let slots = page::keyed_slots(b"", &k, &v).map_err(corrupt)?;
            let kept: Vec<(u64, &[u8])> =
                slots.into_iter().filter(|(p, _)| *p <= through.pos).collect();
            let mut batch = sled::Batch::default();
            page::rewrite(&mut batch, b"", first, &kept, page::Pages::Packed);
            self.journal.apply_batch(batch).map_err(err)?;
            return Ok(());
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
            failpoint!("store::segments::before_delete", crate::store::StoreError);
            self.segments.delete(id).map_err(|e| self.segment_err(e))?;
        }
        Ok(())
    }

    /// Whether a journal record in `[from, end)` references segment `id`.
    fn references(&self, id: u64, from: u64, end: u64) -> Result<bool> {
        for m in self.journal_metas(from, end) {
            if matches!(m?.body, Body::Segment(r) if r.id == id) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
