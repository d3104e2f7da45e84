//! The retention budget (`[store] max_bytes`): what the store's directory really occupies, and
//! shedding the oldest raw sample frames when it is over.
//!
//! # What is measured
//!
//! [`Store::disk_usage`] sums every file under the database directory (`db`, `conf`, `snap.*`,
//! `blobs/*`), each counted as the larger of its length and its allocated blocks. sled's own
//! `Db::size_on_disk` counts only `db` and `blobs/`, by length: it leaves out the snapshot files
//! (which hold the page table and grow with the number of pages), so it under-states what the SD
//! card loses. The directory is "the sled database and nothing else" (docs/contracts.md section 9).
//!
//! # What makes the size go down
//!
//! sled 0.34.7 does not give back the space of removed values (a segment of its log is reused,
//! the file is truncated only when its trailing segments are free), so under a long outage its
//! files grew to 5× a 128 MiB budget while nearly every frame was shed. Raw lines therefore live
//! outside sled, in segment files (`segments.rs`): a shed removes the frames' references, and a
//! segment none of whose lines is referenced any more is **deleted**, which gives its bytes back at
//! once. sled holds only small records (references, outbox, ledger).
//!
//! So the budget is kept by bytes, without hysteresis:
//! - a shed starts when the size is over `max_bytes`;
//! - it sheds the oldest unprotected frames until the bytes their lines take (in their segments,
//!   or in sled for a line under the raw threshold) reach `size - low_water`, with
//!   `low_water = max_bytes * 3 / 4` ([`low_water`]);
//! - the segments left without references are deleted at the shed's last commit. The current
//!   segment is never deleted while it is written, and a segment holding a protected frame (alert
//!   evidence, the open window) stays whole: the size can exceed the budget by one segment plus
//!   the segments such frames pin (they are few: evidence is kept, all of it, by design).
//!
//! # One shed, step by step
//!
//! Oldest first means lowest outbox sequence first. Only [`OutboxRecord::Samples`] are shed, never
//! events, alerts or gaps, and not those `protect` names as alert evidence. Per batch of at most
//! [`SHED_BATCH`] frames:
//! 1. one `Batch` on tree `state`: remove the outbox entries; add one [`OutboxRecord::Gap`] (reason
//!    `"shed"`, [`GapRange::Samples`]) per contiguous run of shed frames of one sensor, and one
//!    [`LedgerEntry::Shed`] naming it; set `n/outbox_next`, `n/ledger_next`, `n/shed_size`; commit;
//! 2. remove the journal records the shed frames referenced (all covered by the last checkpoint,
//!    since outbox records are only written by checkpoints); commit; then delete the segments
//!    left without references (`Store::collect_segments`, run by that commit once the removal
//!    is durable) and sync the `raw/` directory.
//!
//! Once the batches are done, the outbox pages they wrote (what is left of each checkpoint's
//! page: its events, with the frames' entries empty) are merged into fewer packed pages, one
//! batch, then a commit (`outbox_compact.rs`): a week-long outage would otherwise leave hundreds of
//! thousands of small pages that sled, a start and every count of the outbox read one by one.
//!
//! A crash between 1 and 2 leaves journal records no outbox entry references; they lie below the
//! checkpoint, so the pipeline's next [`Store::truncate_journal_before`] removes them
//! (`tests/store_retention.rs` proves it). Failpoints: `store::shed::before_apply`,
//! `store::shed::after_apply` (applied, not yet committed), `store::shed::before_journal_remove`,
//! `store::shed::after_journal_remove` (removed, not yet committed),
//! `store::shed::after_compact` (pages merged, not yet committed),
//! `store::segments::before_delete` (durable, segments not yet deleted: the next commit deletes
//! them).

use std::path::Path;

use super::journal::Body;
use super::state::{outbox_key, OUTBOX_NEXT};
use super::{Result, Store, StoreError, STATE};
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::records::outbox::{Bulk, GapNotice, GapRange, OutboxRecord};

/// Bytes per raw sample counted in [`ShedReport::bytes`] and the ledger (an f32).
const SAMPLE_BYTES: u64 = 4;

/// At most this many frames are shed in one atomic batch (bounds the batch's memory).
pub const SHED_BATCH: usize = 4096;

/// The size a shed aims for: three quarters of the budget.
pub fn low_water(max_bytes: u64) -> u64 {
    max_bytes - max_bytes / 4
}

/// Says whether raw samples of `machine`/`sensor` in `[from_ms, to_ms)` are alert evidence that
/// must be kept.
pub type Protect<'a> = &'a dyn Fn(&str, &str, i64, i64) -> bool;

/// What a call of [`Store::shed_to_budget`] did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShedReport {
    /// The directory's size when the call started ([`Store::disk_usage`]).
    pub size_before: u64,
    /// The size when it returned (segments left without references deleted).
    pub size_after: u64,
    /// False when the size was within budget.
    pub triggered: bool,
    /// Frames (outbox `Samples` entries) shed.
    pub frames: u64,
    /// Raw-sample bytes those frames carried (samples × 4, an f32 each).
    pub bytes: u64,
    /// Bytes their journal lines took on disk (in segments, or in sled when small), with their
    /// encoded frames.
    pub line_bytes: u64,
    /// Samples frames kept because `protect` named them.
    pub protected: u64,
    /// Gap notices declared, in outbox order.
    pub gaps: Vec<GapNotice>,
    /// True when the shed took every frame it was allowed to (the budget may still be missed:
    /// events, alerts and protected frames are never shed).
    pub exhausted: bool,
    /// The outbox pages the shed wrote, merged afterwards (`outbox_compact.rs`).
    pub compacted: super::outbox_compact::Compacted,
}

/// A Samples frame chosen for shedding.
struct Victim {
    outbox_seq: u64,
    machine: String,
    sensor: String,
    journal_pos: u64,
    from_ms: i64,
    to_ms: i64,
    bytes: u64,
    /// What its journal line takes on disk (0 when the record is gone already), with its
    /// encoded frame.
    line_bytes: u64,
    /// The segment its line is in, if it is in one.
    segment: Option<u64>,
}

/// A contiguous run of shed frames of one sensor: becomes one gap.
struct Run {
    machine: String,
    sensor: String,
    from_ms: i64,
    to_ms: i64,
    positions: Vec<u64>,
    bytes: u64,
}

impl Store {
    /// Bytes the database directory occupies: see the module documentation.
    pub fn disk_usage(&self) -> Result<u64> {
        dir_usage(&self.path).map_err(|(file, source)| StoreError::Usage {
            path: self.path.clone(),
            file,
            source,
        })
    }

    /// Keeps the store within `max_bytes` by shedding the oldest raw sample frames: see the module
    /// documentation. `now_ms` stamps the gap notices and ledger records.
    pub fn shed_to_budget(
        &mut self,
        max_bytes: u64,
        now_ms: i64,
        protect: Protect<'_>,
    ) -> Result<ShedReport> {
        self.usable()?;
        let r = self.shed_to_budget_inner(max_bytes, now_ms, protect);
        self.poison_on_error(r)
    }

    fn shed_to_budget_inner(
        &mut self,
        max_bytes: u64,
        now_ms: i64,
        protect: Protect<'_>,
    ) -> Result<ShedReport> {
        let size_before = self.disk_usage()?;
        let mut report =
            ShedReport { size_before, size_after: size_before, ..ShedReport::default() };
        if size_before <= max_bytes {
            return Ok(report);
        }
        report.triggered = true;
        let (sheddable, protected) = self.count_sheddable(protect)?;
        report.protected = protected;
        let want = size_before - low_water(max_bytes);
        let mut from_seq = self.samples_from;
        let mut touched: Option<(u64, u64)> = None;
        while report.line_bytes < want {
            let (victims, next) = self.pick_victims(from_seq, want - report.line_bytes, protect)?;
            let (Some(lo), Some(hi)) = (victims.first(), victims.last()) else {
                break;
            };
            let (lo, hi) = (lo.outbox_seq, hi.outbox_seq);
            touched = Some(touched.map_or((lo, hi), |(a, _)| (a, hi)));
            from_seq = next;
            self.shed_batch(&victims, now_ms, &mut report)?;
        }
        if let Some((lo, hi)) = touched {
            let from = super::page::covering_seq(&self.state, super::state::OUTBOX, lo);
            report.compacted = self.outbox_compact(from, hi)?;
            failpoint!("store::shed::after_compact", crate::store::StoreError);
            self.commit()?;
        }
        report.exhausted = report.frames >= sheddable;
        report.size_after = self.disk_usage()?;
        Ok(report)
    }

    /// Samples frames in the outbox that `protect` does not name, and those it names. Notes the
    /// first one's sequence ([`Store::samples_from`]).
    fn count_sheddable(&mut self, protect: Protect<'_>) -> Result<(u64, u64)> {
        let (mut sheddable, mut protected) = (0, 0);
        let mut first = None;
        for r in self.outbox_from(self.samples_from) {
            let (seq, v) = r?;
            // A backlog is mostly events, which are never shed: told apart without decoding.
            if OutboxRecord::peek_bulk(&v) == Some(Bulk::Event) {
                continue;
            }
            let rec =
                OutboxRecord::decode(&v).map_err(|e| self.corrupt(STATE, &outbox_key(seq), e.0))?;
            if let OutboxRecord::Samples { machine, sensor, t0_ms, rate_hz, n, .. } = rec {
                first.get_or_insert(seq);
                let to_ms = t0_ms.saturating_add(frame_span_ms(n, rate_hz));
                if protect(&machine, &sensor, t0_ms, to_ms) {
                    protected += 1;
                } else {
                    sheddable += 1;
                }
            }
        }
        self.samples_from = first.unwrap_or(self.next_outbox);
        Ok((sheddable, protected))
    }

    /// The oldest unprotected Samples frames with outbox sequence `>= from_seq` whose journal
    /// lines take at least `want_bytes` on disk (fewer when there are no more), at most
    /// [`SHED_BATCH`]. Returns them and the sequence to continue from.
    fn pick_victims(
        &self,
        from_seq: u64,
        want_bytes: u64,
        protect: Protect<'_>,
    ) -> Result<(Vec<Victim>, u64)> {
        let (mut victims, mut next, mut picked) = (Vec::new(), from_seq, 0u64);
        for r in self.outbox_from(from_seq) {
            if victims.len() >= SHED_BATCH || picked >= want_bytes {
                break;
            }
            let (seq, v) = r?;
            next = seq + 1;
            if OutboxRecord::peek_bulk(&v) == Some(Bulk::Event) {
                continue;
            }
            let rec =
                OutboxRecord::decode(&v).map_err(|e| self.corrupt(STATE, &outbox_key(seq), e.0))?;
            let OutboxRecord::Samples { machine, sensor, journal_pos, t0_ms, rate_hz, n, frame } =
                rec
            else {
                continue;
            };
            let to_ms = t0_ms.saturating_add(frame_span_ms(n, rate_hz));
            if protect(&machine, &sensor, t0_ms, to_ms) {
                continue;
            }
            let bytes = u64::from(n) * SAMPLE_BYTES;
            let (line_bytes, segment) = self.line_place(journal_pos)?;
            // Its encoded frame goes with the segment too (counted whether or not it is in
            // the same one: it usually is).
            let line_bytes = line_bytes + frame.map_or(0, |f| u64::from(f.len));
            picked += line_bytes;
            victims.push(Victim {
                outbox_seq: seq,
                machine,
                sensor,
                journal_pos,
                from_ms: t0_ms,
                to_ms,
                bytes,
                line_bytes,
                segment,
            });
        }
        Ok((victims, next))
    }

    /// What journal record `pos`'s line takes on disk (0 when it is gone), and its segment.
    fn line_place(&self, pos: u64) -> Result<(u64, Option<u64>)> {
        let Some(body) = self.journal_meta(pos)?.map(|m| m.body) else {
            return Ok((0, None));
        };
        let segment = match &body {
            Body::Segment(r) => Some(r.id),
            Body::Inline(_) => None,
        };
        Ok((body.len(), segment))
    }

    /// Sheds `victims` atomically (step 1), then removes their journal records (step 2).
    fn shed_batch(
        &mut self,
        victims: &[Victim],
        now_ms: i64,
        report: &mut ShedReport,
    ) -> Result<()> {
        let runs = runs_of(victims);
        let mut batch = sled::Batch::default();
        let seqs: Vec<u64> = victims.iter().map(|v| v.outbox_seq).collect();
        let removed = self.outbox_remove(&mut batch, &seqs)?;
        let records = self.batch_outbox_records(&mut batch, runs.len(), removed);
        let mut outbox_seq = self.next_outbox;
        let mut ledger = Vec::with_capacity(runs.len());
        let mut gaps = Vec::with_capacity(runs.len());
        for run in runs.iter() {
            let gap = GapNotice {
                machine: run.machine.clone(),
                sensor: run.sensor.clone(),
                range: GapRange::Samples { from_ms: run.from_ms, to_ms: run.to_ms },
                reason: "shed".into(),
                declared_at_ms: now_ms,
            };
            batch.insert(&outbox_key(outbox_seq), OutboxRecord::Gap(gap.clone()).encode());
            ledger.push(LedgerRecord::new(
                now_ms,
                LedgerEntry::Shed {
                    gap: gap.clone(),
                    journal_positions: run.positions.clone(),
                    bytes: run.bytes,
                    outbox_seq,
                },
            ));
            gaps.push(gap);
            outbox_seq += 1;
        }
        batch.insert(OUTBOX_NEXT, &outbox_seq.to_be_bytes());
        let next_ledger = self.batch_ledger(&mut batch, &ledger);
        failpoint!("store::shed::before_apply", crate::store::StoreError);
        self.state.apply_batch(batch).map_err(self.sled_err("apply shed batch to tree state"))?;
        self.next_outbox = outbox_seq;
        self.set_outbox_records(records);
        self.next_ledger = next_ledger;
        failpoint!("store::shed::after_apply", crate::store::StoreError);
        self.commit()?;
        report.frames += victims.len() as u64;
        report.bytes += victims.iter().map(|v| v.bytes).sum::<u64>();
        report.line_bytes += victims.iter().map(|v| v.line_bytes).sum::<u64>();
        report.gaps.extend(gaps);

        failpoint!("store::shed::before_journal_remove", crate::store::StoreError);
        let mut journal = sled::Batch::default();
        let positions: Vec<u64> = victims
            .iter()
            .filter(|v| v.journal_pos <= self.checkpoint_pos)
            .map(|v| v.journal_pos)
            .collect();
        self.journal_remove(&mut journal, &positions)?;
        self.journal.apply_batch(journal).map_err(self.sled_err("remove shed journal records"))?;
        failpoint!("store::shed::after_journal_remove", crate::store::StoreError);
        // The commit deletes the segments left without references, once the removal is durable;
        // the segment being written is ended first when frames in it were shed, or its space
        // would come back only after it is full.
        let current = self.segments.current();
        if current.is_some() && victims.iter().any(|v| v.segment == current) {
            self.segments.seal().map_err(|e| self.segment_err(e))?;
        }
        self.commits.removed_references();
        self.commit()
    }
}

/// Groups victims (in outbox order) into runs: a frame extends its sensor's open run when it
/// starts at or after the run's end; otherwise (out of order) it starts a new run. A protected
/// frame is never in `victims`, so it never lies inside a run's range unless frames overlap.
fn runs_of(victims: &[Victim]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    // Index in `runs` of each sensor's open run.
    let mut open: Vec<((String, String), usize)> = Vec::new();
    for v in victims {
        let key = (v.machine.clone(), v.sensor.clone());
        let slot = open.iter().position(|(k, _)| *k == key);
        if let Some(i) = slot.map(|s| open[s].1).filter(|&i| v.from_ms >= runs[i].to_ms) {
            let run = &mut runs[i];
            run.to_ms = v.to_ms;
            run.positions.push(v.journal_pos);
            run.bytes += v.bytes;
            continue;
        }
        runs.push(Run {
            machine: v.machine.clone(),
            sensor: v.sensor.clone(),
            from_ms: v.from_ms,
            to_ms: v.to_ms,
            positions: vec![v.journal_pos],
            bytes: v.bytes,
        });
        match slot {
            Some(s) => open[s].1 = runs.len() - 1,
            None => open.push((key, runs.len() - 1)),
        }
    }
    runs
}

/// The event-time span of `n` samples at `rate_hz`, rounded up to whole milliseconds (0 for a
/// rate that is not positive and finite).
pub fn frame_span_ms(n: u32, rate_hz: f64) -> i64 {
    if !(rate_hz.is_finite() && rate_hz > 0.0) {
        return 0;
    }
    // At most u32::MAX * 1000 / a tiny rate: saturates in the cast, which is fine for a range end.
    (f64::from(n) * 1000.0 / rate_hz).ceil() as i64
}

/// Bytes under `dir`: every file, the larger of its length and its allocated blocks.
pub(super) fn dir_usage(
    dir: &Path,
) -> std::result::Result<u64, (std::path::PathBuf, std::io::Error)> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0u64;
    let entries = std::fs::read_dir(dir).map_err(|e| (dir.to_path_buf(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| (dir.to_path_buf(), e))?;
        let path = entry.path();
        // A blob file sled removes in the background can vanish between listing and stat.
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err((path, e)),
        };
        if meta.is_dir() {
            match dir_usage(&path) {
                // Removed since the listing, as above.
                Err((p, e)) if e.kind() == std::io::ErrorKind::NotFound && p == path => {}
                r => total += r?,
            }
        } else {
            total += meta.len().max(meta.blocks() * 512);
        }
    }
    Ok(total)
}
