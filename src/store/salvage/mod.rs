//! Salvage: what a recovery (`recovery.rs`) copies from a damaged store into the fresh one, so
//! that a damaged record costs that record, not the backlog.
//!
//! # Order
//!
//! The damaged directory is read in place, before it is moved aside, into the fresh store being
//! built in `{path}.recovering`: a crash during the copy leaves the damaged store where it was
//! and the next start salvages again (a half-filled `.recovering` is removed first).
//!
//! 1. sled is opened on the damaged directory (the caller catches its panics; if it cannot
//!    open, nothing is salvageable and the caller falls back to an empty store).
//! 2. **Journal**, from its start position: each value that decodes, and whose raw line (when it
//!    is in a segment) reads back with its checksum, is copied under its own position; each
//!    segment file referenced by a copied record is hard-linked (else copied and synced) into the
//!    fresh `raw/`, so references stay valid byte for byte.
//! 3. **Outbox**, under its own sequences (its order is the MQTT backlog): each record that
//!    decodes. A `Samples` record whose journal record was not copied is dropped and its time
//!    range declared a gap.
//! 4. **Alert archive** (JSON that parses), **quarantine** (entries that decode) and the
//!    **sources' positions** (`n/source/`, well-formed ones): with them a source whose lines all
//!    left the journal resumes where it was even when the checkpoint is lost. The **Sparkplug
//!    view's place** (`sparkplug.rs`): its cursor and last `bdSeq` (well-formed), its metric
//!    table, and the records it set aside (`p/`, each that decodes, under its own sequence), so
//!    what it held still reaches the host once, and no `bdSeq` is used twice.
//! 5. **Ledger**, under its own sequences, so its references (outbox sequences, journal
//!    positions, quarantine keys) stay true. Reading it also: rebuilds an alert's outbox record
//!    that did not decode from its archived revision; attributes lost outbox events to their
//!    sensor and seq (from `Accepted`); declares a sensor's seq hole where ledger records between
//!    its two neighbours were lost; finds the last journal position decided.
//! 6. **Sequence marks**: the old `seq` tree, raised to the highest seq seen per sensor.
//! 7. **Checkpoint**, when it decodes down to a well-formed decider snapshot (one the decide
//!    stage could not restore would stop the daemon at every start); otherwise
//!    `n/decided_through` (`state.rs`) tells the decide stage how far to re-derive its state
//!    without output. Counters: the next outbox and ledger sequences and journal position stay
//!    past everything the damaged store used, readable or not, so nothing is ever renumbered.
//!
//! Everything is copied in batches of at most [`BATCH_RECORDS`] records or [`BATCH_BYTES`]; what
//! is held meanwhile is a bit per journal position (which were copied, capped at 64 MiB), a mark
//! per sensor, and the lost things: counted per kind, their lists of ranges and the lookups
//! behind attribution capped ([`MAX_RANGES`], [`MAX_LOST`]), gaps of raw samples merged per
//! sensor.
//! Failpoint `store::recovery::salvage` (after the journal) makes the copy fail. Steps 5 and 6
//! are in `ledger.rs`, the reading and writing helpers in `io.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::archive::{ALERTS, QUARANTINE};
use super::checkpoint_parts;
use super::journal::{decode_meta, Body};
use super::ledger::LEDGER_NEXT;
use super::outbox_pages::outbox_value;
use super::prune::PRUNED;
use super::segments::{segment_path, RAW_DIR};
use super::state::{
    decode_source_position, outbox_key, CHECKPOINT, CHECKPOINT_POS, DECIDED_THROUGH, JOURNAL_NEXT,
    JOURNAL_START, OUTBOX, OUTBOX_NEXT, SOURCE_POS,
};
use super::{PageCheck, Result, Store, StoreError};
use crate::records::checkpoint::{CheckpointPayload, QuarantineEntry};
use crate::records::ledger::Salvage;
use crate::records::outbox::{GapNotice, GapRange, OutboxRecord};
use crate::records::pruned::PrunedSummary;
use io::{link_or_copy, Batcher, Held, RawReader};

mod io;
mod ledger;
mod sparkplug;

/// Records per batch written into the fresh store.
pub(super) const BATCH_RECORDS: usize = 4096;
/// Bytes of values per batch written into the fresh store.
pub(super) const BATCH_BYTES: usize = 8 << 20;
/// Lost ranges listed per kind in the report (the counts go on).
pub(super) const MAX_RANGES: usize = 1024;
/// Lost outbox sequences remembered for attribution and rebuilding.
pub(super) const MAX_LOST: usize = 100_000;

/// What a salvage copied and lost, and the gaps it asks the caller to declare.
#[derive(Debug, Default)]
pub(super) struct Salvaged {
    pub report: Salvage,
    pub gaps: Vec<GapNotice>,
}

/// The damaged store's trees.
struct Old<'a> {
    path: &'a Path,
    journal: sled::Tree,
    state: sled::Tree,
    seq: sled::Tree,
}

/// Copies what can be read from the damaged store in `damaged` into `fresh` (a store just
/// created, not yet holding anything) and commits it; the checkpoint only when `keep_checkpoint`
/// (not when the decide stage could not restore it), and with it the pages of the duplicate
/// memory when `dedup_page_check` (the rule's decoder, given by the caller) reads each of them
/// (`None`: copied as they are). `Err` when the copy cannot go on: the caller then discards
/// `fresh`.
pub(super) fn salvage(
    damaged: &Path,
    fresh: &Store,
    now_ms: i64,
    keep_checkpoint: bool,
    dedup_page_check: Option<PageCheck>,
) -> Result<Salvaged> {
    if !damaged.is_dir() {
        return Err(failed(damaged, format!("{} is not a directory", damaged.display())));
    }
    let config = sled::Config::new()
        .path(damaged)
        .cache_capacity(fresh.opts.cache_bytes)
        .flush_every_ms(None);
    let db = super::open_waiting_for_lock(&config)
        .map_err(|source| StoreError::Open { path: damaged.to_path_buf(), source })?;
    let tree = |name: &str| {
        db.open_tree(name).map_err(|e| failed(damaged, format!("open tree {name}: {e}")))
    };
    let old = Old {
        path: damaged,
        journal: tree(super::JOURNAL)?,
        state: tree(super::STATE)?,
        seq: tree(super::SEQ)?,
    };
    let mut s = Salvaged::default();
    let mut c = Copier {
        s: &mut s,
        marks: BTreeMap::new(),
        decided: 0,
        lost_outbox: BTreeSet::new(),
        held: Held::default(),
    };
    let counters = c.counters(&old);
    let max_journal = c.journal(&old, fresh, counters.journal_start)?;
    failpoint!("store::recovery::salvage", crate::store::StoreError);
    let max_outbox = c.outbox(&old, fresh, now_ms)?;
    c.archive(&old, fresh)?;
    c.sparkplug(&old, fresh)?;
    let max_ledger = c.ledger(&old, fresh, now_ms)?;
    c.seq_marks(&old, fresh)?;
    let cp_pos = c.checkpoint(&old, fresh, keep_checkpoint, dedup_page_check)?;
    let mut put = Batcher::new(&fresh.state, fresh.path());
    put.u64(OUTBOX_NEXT, counters.outbox_next.max(max_outbox + 1))?;
    put.u64(LEDGER_NEXT, counters.ledger_next.max(max_ledger + 1))?;
    put.u64(JOURNAL_START, counters.journal_start)?;
    let journal_next = [max_journal + 1, cp_pos + 1, c.decided + 1, counters.journal_start];
    put.u64(JOURNAL_NEXT, journal_next.into_iter().max().unwrap_or(1))?;
    if c.s.report.copied.contains_key("checkpoint") {
        put.u64(CHECKPOINT_POS, cp_pos)?;
    } else if c.decided > 0 {
        c.s.report.decided_through = Some(c.decided);
        put.u64(DECIDED_THROUGH, c.decided)?;
    }
    put.flush()?;
    let events = std::mem::take(&mut c.lost_outbox);
    drop(c);
    fresh.commit()?;
    s.report.lost_outbox = ranges(events.iter().map(|(seq, _)| *seq));
    s.gaps = ledger::merge_sample_gaps(std::mem::take(&mut s.gaps));
    s.gaps.extend(ledger::event_gaps(events.into_iter().filter_map(|(_, who)| who), now_ms));
    s.report.gaps = s.gaps.len() as u64;
    Ok(s)
}

/// The damaged store's counters (unreadable ones count as absent).
struct Counters {
    outbox_next: u64,
    ledger_next: u64,
    journal_start: u64,
}

/// An event's (machine, sensor, seq).
type Event = (String, String, u64);

struct Copier<'a> {
    s: &'a mut Salvaged,
    /// Highest seq seen per (machine, sensor).
    marks: BTreeMap<(String, String), u64>,
    /// The last journal position known decided.
    decided: u64,
    /// Lost outbox sequences, with the event's (machine, sensor, seq) once the ledger names it.
    lost_outbox: BTreeSet<(u64, Option<Event>)>,
    /// The journal positions copied.
    held: Held,
}

impl Copier<'_> {
    fn count(&mut self, copied: bool, kind: &str) {
        let map = if copied { &mut self.s.report.copied } else { &mut self.s.report.unreadable };
        *map.entry(kind.to_owned()).or_default() += 1;
    }

    fn counters(&mut self, old: &Old<'_>) -> Counters {
        let read = |key: &[u8]| {
            let v = old.state.get(key).ok().flatten()?;
            <[u8; 8]>::try_from(&v[..]).ok().map(u64::from_be_bytes)
        };
        // The checkpoint's position, should its own value not decode.
        self.decided = self.decided.max(read(CHECKPOINT_POS).unwrap_or(0));
        Counters {
            outbox_next: read(OUTBOX_NEXT).unwrap_or(1),
            ledger_next: read(LEDGER_NEXT).unwrap_or(1),
            journal_start: read(JOURNAL_START).unwrap_or(1).max(1),
        }
    }

    /// Step 2; returns the highest journal position present, readable or not.
    fn journal(&mut self, old: &Old<'_>, fresh: &Store, start: u64) -> Result<u64> {
        let mut out = Batcher::new(&fresh.journal, fresh.path());
        let mut reader = RawReader { dir: old.path.join(RAW_DIR), open: None };
        let (mut max, mut segments) = (0, BTreeSet::new());
        for item in paged(&old.journal, b"") {
            let (pos, v) = match item {
                Paged::Record(pos, v) => (pos, v),
                Paged::BadKey => (0, Vec::new()),
                Paged::Broken { first, last } => {
                    max = max.max(last);
                    for pos in first.max(start)..=last {
                        push_range(&mut self.s.report.lost_journal, pos);
                        self.count(false, "journal");
                    }
                    continue;
                }
                Paged::Stopped => {
                    self.count(false, "journal_scan_stopped");
                    break;
                }
            };
            if pos < start && pos > 0 {
                continue;
            }
            max = max.max(pos);
            let readable = match decode_meta(old.path, pos, None, &v).map(|m| m.body) {
                Ok(Body::Inline(_)) => Some(None),
                Ok(Body::Segment(r)) => {
                    reader.check(r.id, r.offset, r.len, r.sum).then_some(Some(r.id))
                }
                Err(_) => None,
            };
            match readable {
                Some(segment) if pos > 0 => {
                    segments.extend(segment);
                    self.held.set(pos);
                    out.put(&pos.to_be_bytes(), &v)?;
                    self.count(true, "journal");
                }
                _ => {
                    push_range(&mut self.s.report.lost_journal, pos);
                    self.count(false, "journal");
                }
            }
        }
        out.flush()?;
        let to = fresh.path().join(RAW_DIR);
        for id in segments {
            let (from, into) = (segment_path(&old.path.join(RAW_DIR), id), segment_path(&to, id));
            link_or_copy(&from, &into).map_err(|e| {
                failed(old.path, format!("bring segment {} over: {e}", from.display()))
            })?;
            self.count(true, "raw_segments");
        }
        Ok(max)
    }

    /// Step 3; returns the highest outbox sequence present, readable or not.
    fn outbox(&mut self, old: &Old<'_>, fresh: &Store, now_ms: i64) -> Result<u64> {
        let mut out = Batcher::new(&fresh.state, fresh.path());
        let mut max = 0;
        for item in paged(&old.state, OUTBOX) {
            let (seq, v) = match item {
                Paged::Record(seq, v) => (seq, v),
                Paged::BadKey => {
                    self.count(false, "outbox");
                    continue;
                }
                Paged::Broken { first, last } => {
                    max = max.max(last);
                    for seq in first..=last {
                        if self.lost_outbox.len() >= MAX_LOST {
                            break;
                        }
                        self.lost_outbox.insert((seq, None));
                    }
                    self.count(false, "outbox");
                    continue;
                }
                Paged::Stopped => {
                    self.count(false, "outbox_scan_stopped");
                    break;
                }
            };
            let k = outbox_key(seq);
            max = max.max(seq);
            match OutboxRecord::decode(&v) {
                Ok(OutboxRecord::Samples {
                    machine,
                    sensor,
                    journal_pos,
                    t0_ms,
                    rate_hz,
                    n,
                    frame,
                }) => {
                    self.decided = self.decided.max(journal_pos);
                    let held = match self.held.has(journal_pos) {
                        Some(held) => held,
                        None => fresh
                            .journal
                            .contains_key(journal_pos.to_be_bytes())
                            .map_err(|e| failed(fresh.path(), e))?,
                    };
                    if held {
                        // Its encoded frame stays behind with the old segment files: the
                        // drain reads the salvaged line instead.
                        let v = match frame {
                            Some(_) => without_frame(v),
                            None => v,
                        };
                        out.put(&k, &outbox_value(&[&v]))?;
                        self.count(true, "outbox");
                    } else {
                        let to_ms = t0_ms + (f64::from(n) * 1000.0 / rate_hz).ceil() as i64;
                        let range =
                            GapRange::Samples { from_ms: t0_ms, to_ms: to_ms.max(t0_ms + 1) };
                        self.s.gaps.push(corrupt_gap(machine, sensor, range, now_ms));
                        self.count(false, "raw_samples");
                    }
                }
                Ok(rec) => {
                    if let OutboxRecord::Event { machine, sensor, seq, event_id, .. } = rec {
                        self.mark_derived(&event_id, machine, sensor, seq);
                    }
                    out.put(&k, &outbox_value(&[&v]))?;
                    self.count(true, "outbox");
                }
                Err(_) => {
                    if self.lost_outbox.len() < MAX_LOST {
                        self.lost_outbox.insert((seq, None));
                    }
                    self.count(false, "outbox");
                }
            }
        }
        out.flush()?;
        Ok(max)
    }

    /// Step 4.
    fn archive(&mut self, old: &Old<'_>, fresh: &Store) -> Result<()> {
        let mut out = Batcher::new(&fresh.state, fresh.path());
        let kinds = [
            (ALERTS, "alert_archive"),
            (QUARANTINE, "quarantine"),
            (SOURCE_POS, "source_positions"),
        ];
        for (prefix, kind) in kinds {
            for kv in old.state.scan_prefix(prefix) {
                let Ok((k, v)) = kv else {
                    self.count(false, &format!("{kind}_scan_stopped"));
                    break;
                };
                let ok = match prefix {
                    ALERTS => serde_json::from_slice::<serde::de::IgnoredAny>(&v).is_ok(),
                    QUARANTINE => QuarantineEntry::decode(&v).is_ok(),
                    _ => decode_source_position(&k, &v).is_some(),
                };
                if ok {
                    out.put(&k, &v)?;
                }
                self.count(ok, kind);
            }
        }
        // What retention pruned from the ledger: without it `reconcile` proves only the totals
        // of the ledger that is left.
        if let Some(v) = old.state.get(PRUNED).ok().flatten() {
            let ok = PrunedSummary::decode(&v).is_ok();
            if ok {
                out.put(PRUNED, &v)?;
            }
            self.count(ok, "pruned_summary");
        }
        out.flush()
    }

    /// Step 7: copies the checkpoint when the decide stage can use it; returns its position
    /// when at least its header decodes (0 otherwise).
    fn checkpoint(
        &mut self,
        old: &Old<'_>,
        fresh: &Store,
        keep: bool,
        page_check: Option<PageCheck>,
    ) -> Result<u64> {
        let Some(v) = old.state.get(CHECKPOINT).ok().flatten() else { return Ok(0) };
        let Some(journal_pos) = checkpoint_parts::position(&v) else {
            self.count(false, "checkpoint");
            return Ok(0);
        };
        self.decided = self.decided.max(journal_pos);
        // The pages of the duplicate memory the snapshot may keep outside go with it: all of
        // them readable, or the checkpoint is not kept.
        let mut pages = Vec::new();
        for kv in old.state.scan_prefix(crate::store::dedup_pages::DEDUP) {
            match kv {
                Ok((k, v)) if page_check.is_none_or(|reads| reads(&v)) => {
                    pages.push((k, v));
                }
                _ => {
                    pages.clear();
                    self.count(false, "dedup_pages");
                    return Ok(self.checkpoint_dropped(journal_pos));
                }
            }
        }
        // Every part of it read and unpacked, or it is not kept.
        let cp = checkpoint_parts::read(old.path, &old.state).ok().flatten();
        let usable = keep
            && cp.as_ref().is_some_and(|cp| {
                CheckpointPayload::decode(&cp.decider).ok().is_some_and(|p| {
                    crate::records::snapshot::decode::<serde::de::IgnoredAny>(&p.decider).is_ok()
                })
            });
        if let Some(cp) = cp.filter(|_| usable) {
            let mut batch = sled::Batch::default();
            checkpoint_parts::write(&mut batch, cp.journal_pos, &cp.decider, 0);
            for (k, v) in pages {
                batch.insert(k, v);
            }
            fresh.state.apply_batch(batch).map_err(|e| failed(fresh.path(), e))?;
        }
        self.count(usable, "checkpoint");
        Ok(journal_pos)
    }

    /// The checkpoint is not copied (its duplicate memory did not read): its position only.
    fn checkpoint_dropped(&mut self, journal_pos: u64) -> u64 {
        self.count(false, "checkpoint");
        journal_pos
    }
}

/// What a salvage reads from a key space whose values may be pages (the journal, `o/`, `l/`),
/// in order.
enum Paged {
    /// One record, on its own or from a page.
    Record(u64, Vec<u8>),
    /// A key that is not the prefix + 8 bytes.
    BadKey,
    /// A page whose framing does not decode: its records from `first` up to `last` (the key
    /// before the next readable one; only `first` when it was the last key).
    Broken { first: u64, last: u64 },
    /// sled's scan failed: nothing after this.
    Stopped,
}

/// The records under the `prefix` keys of `tree`, each on its own (a page is read record by
/// record), with what could not be read.
fn paged<'a>(tree: &'a sled::Tree, prefix: &'static [u8]) -> impl Iterator<Item = Paged> + 'a {
    let mut keys = tree.scan_prefix(prefix);
    let mut pending = std::collections::VecDeque::new();
    let (mut broken, mut done): (Option<u64>, bool) = (None, false);
    std::iter::from_fn(move || loop {
        if let Some(item) = pending.pop_front() {
            return Some(item);
        }
        if done {
            return None;
        }
        let (k, v) = match keys.next() {
            Some(Ok(kv)) => kv,
            end => {
                done = true;
                if let Some(first) = broken.take() {
                    pending.push_back(Paged::Broken { first, last: first });
                }
                if end.is_some() {
                    pending.push_back(Paged::Stopped);
                }
                continue;
            }
        };
        let Some(first) = key_u64(&k, prefix) else { return Some(Paged::BadKey) };
        if let Some(b) = broken.take() {
            pending.push_back(Paged::Broken { first: b, last: first.max(b + 1) - 1 });
        }
        let records = super::page::unpack(&v).and_then(|v| {
            let rs = super::page::keyed_entries(prefix, &k, &v)?;
            Ok(rs.into_iter().map(|(q, r)| Paged::Record(q, r.to_vec())).collect::<Vec<_>>())
        });
        match records {
            Ok(rs) => pending.extend(rs),
            Err(_) => broken = Some(first),
        }
    })
}

fn key_u64(k: &[u8], prefix: &[u8]) -> Option<u64> {
    k.strip_prefix(prefix).and_then(|r| <[u8; 8]>::try_from(r).ok()).map(u64::from_be_bytes)
}

/// Inclusive ranges of ascending numbers, at most [`MAX_RANGES`] of them.
fn ranges(numbers: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for n in numbers {
        push_range(&mut out, n);
    }
    out
}

/// Adds `n`, above every number in `ranges`, to its last range or as a new one while there are
/// fewer than [`MAX_RANGES`] (the counts in the report go on).
fn push_range(ranges: &mut Vec<(u64, u64)>, n: u64) {
    if let Some(last) = ranges.last_mut().filter(|l| n == l.1 + 1) {
        last.1 = n;
    } else if ranges.len() < MAX_RANGES {
        ranges.push((n, n));
    }
}

fn corrupt_gap(machine: String, sensor: String, range: GapRange, now_ms: i64) -> GapNotice {
    GapNotice { machine, sensor, range, reason: GapNotice::CORRUPT.into(), declared_at_ms: now_ms }
}

fn failed(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Recovery { path: path.to_path_buf(), what: format!("salvage: {e}") }
}

#[cfg(test)]
mod tests;

/// Outbox record bytes `v` (a `Samples` record) without the encoded frame it names.
fn without_frame(v: Vec<u8>) -> Vec<u8> {
    match OutboxRecord::decode(&v) {
        Ok(mut rec) => {
            if let OutboxRecord::Samples { frame, .. } = &mut rec {
                *frame = None;
            }
            rec.encode()
        }
        Err(_) => v,
    }
}
