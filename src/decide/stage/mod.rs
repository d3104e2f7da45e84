//! The decide stage, the shell of the decide room: a dedicated thread (sled and the decider are
//! blocking work) that consumes
//! journal records in position order — first those after the checkpoint that were journaled
//! before this start, then each batch the ingest tasks commit — decides them, and checkpoints
//! its state, outbox, ledger and archive records in one batch every `commit_records` records
//! (up to twice that while the last checkpoint's commit still runs), every `commit_interval`, and
//! whenever its input runs dry. It wakes the forwarder once the checkpoint's batch is applied,
//! commits it without the store's lock (the ingest and the forwarder read and write
//! meanwhile), then truncates the journal below what is still needed (after a commit on its own
//! thread: in the next checkpoint's hold of the lock).

mod checkpoint_commit;
mod tails;

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{mpsc, Notify};

use super::input::DecideBatch;
use super::outputs::{Archived, Pending};
use super::{decide, Decider};
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::records::checkpoint::CheckpointPayload;
use crate::records::journal::JournalRecord;
use crate::records::outbox::OutboxRecord;
use crate::store::archive::{alert_key, quarantine_key};
use crate::store::{SharedStore, Store, StoreError};
use crate::telemetry::Telemetry;
use checkpoint_commit::{CommitInFlight, Through};

/// What stops the decide stage.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The checkpoint's commit could not get a thread of its own.
    #[error("checkpoint-commit thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error("the checkpoint's payload does not decode: {0}")]
    Checkpoint(String),
    #[error("outbox record {seq} does not decode: {why}")]
    Outbox { seq: u64, why: String },
    #[error("the {0} stage stopped unexpectedly")]
    StageGone(&'static str),
    #[error("fault injected at failpoint {point}")]
    Injected { point: &'static str },
}

/// The decide stage's state between checkpoints.
#[derive(Debug)]
pub(crate) struct DecideStage {
    store: SharedStore,
    decider: Decider,
    /// Per source, the offset after the last record decided.
    offsets: BTreeMap<u16, u64>,
    pending: Pending,
    /// The last journal position decided.
    last_pos: u64,
    commit_records: usize,
    /// `[store] history`: decided records younger than this (by ingest time) stay in the
    /// journal as history (`store/history.rs`).
    history_ms: i64,
    /// The last floor handed to the store: positions below it are decided, checkpointed and
    /// referenced by no queued outbox record.
    floor: u64,
    commit_interval_ms: i64,
    outbox_grew: Arc<Notify>,
    /// Outbox records below this sequence hold no pending `Samples` reference (scanned before).
    samples_scan_from: u64,
    telemetry: Telemetry,
    /// Ingest time of the last record decided.
    last_at: Option<i64>,
    /// Monotonic receipt time (seconds) of each batch decided since the last checkpoint (not
    /// catch-up).
    received_s: Vec<f64>,
    clock: SystemClock,
    /// Journal positions up to this were decided before a salvage lost the checkpoint: they are
    /// decided again for the state only, their outputs dropped (0: none).
    warm_up_through: u64,
    /// The store's sequence marks, applied once the warm-up is over (`None` after that).
    seq_marks: Option<Vec<((String, String), u64)>>,
    /// What is known of each sensor, kept in every checkpoint's batch (`n/sensors`).
    sensors: crate::records::sensors::SensorBook,
    /// Journal positions at which a start began (the store keeps the last ones beside their
    /// `Restart` records; and this start's), and which sources are live: a live sensor's first block at
    /// or after such a position declares the time the gateway was down (`gateway_down`).
    restarts: Vec<u64>,
    live_sources: std::collections::BTreeSet<u16>,
    /// The rule this stage decides under (the first, with several), kept in every checkpoint.
    rule_version: String,
    /// Every rule's name and version when there are several, kept in every checkpoint.
    rule_versions: Vec<(String, String)>,
    /// How the rules differ from the checkpoint's (`start` ledgers each).
    pub(crate) rule_changes: Vec<RuleChange>,
    /// The duplicate memory's pages beside the checkpoint.
    dedup_pages: DedupPages,
    /// The last checkpoint's commit, while it runs on its own thread.
    in_flight: Option<CommitInFlight>,
    /// Ledger additions of this stage beyond the decisions: the `checkpoint` and `source_ended`
    /// records (`tails.rs`).
    tails: tails::Tails,
}

/// Why a live sensor's samples stopped while the gateway was not running.
const GATEWAY_DOWN: &str = "gateway_down";

/// Whether the store's checkpoint restores under `config` (none restores trivially): a
/// checkpoint that does not would stop every start, so `run` recovers the store instead.
pub(crate) fn check_checkpoint(config: &Config, store: &Store) -> Result<(), StageError> {
    if let Some(cp) = store.last_checkpoint()? {
        let p = CheckpointPayload::decode(&cp.decider)
            .map_err(|e| StageError::Checkpoint(e.to_string()))?;
        let pages: Vec<(u64, Vec<u8>)> = store.dedup_pages().collect::<Result<_, _>>()?;
        restore_decider(config, &p.decider, &pages)?;
    }
    Ok(())
}

/// The decider of a checkpoint's snapshot, with the store's pages of its duplicate memory when
/// the snapshot keeps that memory outside (`crate::rule::dedup`, `crate::store::DedupChange`).
fn restore_decider(
    config: &Config,
    snapshot: &[u8],
    pages: &[(u64, Vec<u8>)],
) -> Result<Decider, StageError> {
    Decider::restore_with_dedup(config, snapshot, pages.iter().map(|(_, p)| p.as_slice()))
        .map_err(|e| StageError::Checkpoint(e.to_string()))
}

/// The most entries on one page of the duplicate memory: 6 120 bytes, so that, like every other
/// value of the `state` tree, a page keeps sled's leaves under its blob threshold
/// (`crate::store` `checkpoint_parts.rs`; docs/decisions/0014-the-checkpoint-in-parts.md).
const DEDUP_PAGE_ENTRIES: usize = 170;

/// The pages of the duplicate memory the store holds for the decider, by number, with the latest
/// event time per machine on each (a page goes once each is behind its machine's horizon).
#[derive(Debug, Default)]
struct DedupPages {
    held: Vec<(u64, Vec<(u32, i64)>)>,
    /// Pages in the store that are not the decider's (a fresh start, a snapshot from before
    /// pages): removed with the next checkpoint.
    stale: Vec<u64>,
    next: u64,
}

impl DedupPages {
    /// What the next checkpoint changes: the pages of the entries added since the last (`page`,
    /// cut into pages of at most [`DEDUP_PAGE_ENTRIES`]), and the removal of the stale pages and
    /// of those wholly behind `horizons` (by machine index).
    fn change(&mut self, page: Vec<u8>, horizons: &[i64]) -> crate::store::DedupChange {
        let mut remove = std::mem::take(&mut self.stale);
        self.held.retain(|(n, latest)| {
            let behind = |&(m, t): &(u32, i64)| horizons.get(m as usize).is_some_and(|&h| t < h);
            let gone = latest.iter().all(behind);
            if gone {
                remove.push(*n);
            }
            !gone
        });
        let add = page
            .chunks(DEDUP_PAGE_ENTRIES * crate::rule::dedup::ENTRY_BYTES)
            .map(|page| {
                let n = self.next;
                self.next += 1;
                let latest = crate::rule::dedup::latest_per_machine(page).unwrap_or_default();
                self.held.push((n, latest));
                (n, page.to_vec())
            })
            .collect();
        crate::store::DedupChange { add, remove }
    }
}

/// A rule that is not as the checkpoint was decided under: its name and its versions then and
/// now (`from` empty: a rule added; `to` empty: a rule removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuleChange {
    pub rule: String,
    pub from: String,
    pub to: String,
}

/// How `versions` (name, version of every rule now) differ from checkpoint `p`'s: each rule
/// paired with the one whose state it goes on from (`crate::rule::continues_from`). A checkpoint
/// written before versions were kept says nothing: adopted as is; one of a single rule names no
/// rule, and is taken as the first rule's.
fn changes_since(p: &CheckpointPayload, versions: &[(String, String)]) -> Vec<RuleChange> {
    if p.rule_version.is_empty() {
        return Vec::new();
    }
    let old = match p.rule_versions.is_empty() {
        true => vec![(versions[0].0.clone(), p.rule_version.clone())],
        false => p.rule_versions.clone(),
    };
    let old_names: Vec<String> = old.iter().map(|(n, _)| n.clone()).collect();
    let new_names: Vec<&str> = versions.iter().map(|(n, _)| n.as_str()).collect();
    let from = crate::rule::continues_from(&old_names, &new_names);
    let mut out = Vec::new();
    for ((name, to), from) in versions.iter().zip(&from) {
        let was = from.map(|j| old[j].1.clone()).unwrap_or_default();
        if was != *to {
            out.push(RuleChange { rule: name.clone(), from: was, to: to.clone() });
        }
    }
    for (j, (name, was)) in old.iter().enumerate() {
        if !from.contains(&Some(j)) {
            out.push(RuleChange { rule: name.clone(), from: was.clone(), to: String::new() });
        }
    }
    out
}

/// At most this many batches of `commit_records` go into one checkpoint while the last
/// checkpoint's commit runs ([`DecideStage::commit_busy`]).
const MERGED_BATCHES: usize = 2;

impl DecideStage {
    /// The stage restored from the store's checkpoint (a fresh decider when there is none).
    pub(crate) fn restore(
        config: &Config,
        store: SharedStore,
        outbox_grew: Arc<Notify>,
        telemetry: Telemetry,
    ) -> Result<DecideStage, StageError> {
        let (cp, warm_up_through, seq_marks, positions) = {
            let s = store.read();
            let marks: Vec<_> = s.seq_marks().collect::<Result<_, _>>()?;
            let positions = s.source_positions()?;
            let sensors = s.sensor_book()?;
            // The kept start positions (this start's `Restart` comes after the restore).
            let mut restarts = s.start_positions();
            restarts.push(s.next_journal_pos());
            let pages: Vec<(u64, Vec<u8>)> = s.dedup_pages().collect::<Result<_, _>>()?;
            (
                s.last_checkpoint()?,
                s.decided_through()?.unwrap_or(0),
                marks,
                (positions, sensors, restarts, pages),
            )
        };
        let (positions, sensors, restarts, pages) = positions;
        let versions = crate::config::rule_version::rule_versions(config);
        let rule_version = versions[0].1.clone();
        let mut rule_changes = Vec::new();
        let (mut decider, mut offsets, last_pos) = match cp {
            None => (Decider::new(config), BTreeMap::new(), 0),
            Some(cp) => {
                let p = CheckpointPayload::decode(&cp.decider)
                    .map_err(|e| StageError::Checkpoint(e.to_string()))?;
                let d = restore_decider(config, &p.decider, &pages)?;
                rule_changes = changes_since(&p, &versions);
                (d, p.offsets, cp.journal_pos)
            }
        };
        // The pages are the decider's when its snapshot keeps the memory outside; else stale.
        let mut dedup_pages =
            DedupPages { next: pages.last().map_or(1, |(n, _)| n + 1), ..DedupPages::default() };
        if decider.dedup_is_outside() {
            for (n, page) in &pages {
                let latest = crate::rule::dedup::latest_per_machine(page).map_err(|e| {
                    StageError::Checkpoint(format!("duplicate memory page {n}: {e}"))
                })?;
                dedup_pages.held.push((*n, latest));
            }
        } else {
            dedup_pages.stale = pages.iter().map(|(n, _)| *n).collect();
        }
        decider.keep_dedup_outside();
        let tails = tails::Tails::new(config, &rule_version, &sensors);
        // The positions kept beside the checkpoint: the same offsets, or, when a salvage lost
        // the checkpoint, the only record of how far a source was read.
        for (source, offset) in positions {
            let o = offsets.entry(source).or_insert(0);
            *o = (*o).max(offset);
        }
        Ok(DecideStage {
            store,
            decider: decider.reporting().keeping_trends(config.metrics.trend_points),
            offsets,
            pending: Pending::default(),
            last_pos,
            commit_records: config.store.commit_records,
            history_ms: config.store.history_ms,
            floor: 0,
            commit_interval_ms: config.store.commit_interval_ms,
            outbox_grew,
            samples_scan_from: 1,
            telemetry,
            last_at: None,
            received_s: Vec::new(),
            clock: SystemClock::new(),
            warm_up_through,
            seq_marks: Some(seq_marks),
            sensors,
            restarts,
            rule_version,
            rule_versions: if versions.len() > 1 { versions } else { Vec::new() },
            rule_changes,
            dedup_pages,
            in_flight: None,
            tails,
            live_sources: config
                .source
                .iter()
                .enumerate()
                .filter(|(_, s)| !matches!(s, crate::config::SourceConfig::Trace(_)))
                .filter_map(|(i, _)| u16::try_from(i).ok())
                .collect(),
        })
    }

    /// Per source, the offset after the last record the checkpoint covers.
    pub(crate) fn offsets(&self) -> &BTreeMap<u16, u64> {
        &self.offsets
    }

    /// Runs until every sender of `input` is gone and everything journaled is checkpointed.
    /// Records journaled before `catchup_end` (this start) are read from the journal first.
    ///
    /// A batch on `input` that starts after a hole (an ingest task did not wait for room in the
    /// channel and left its records in the journal, or batches of two sources crossed) is
    /// preceded by the records of the hole, read from the journal; batches of records decided
    /// already are skipped. So records are always decided in journal order, each once.
    pub(crate) fn run(
        mut self,
        catchup_end: u64,
        mut input: mpsc::Receiver<DecideBatch>,
    ) -> Result<(), StageError> {
        let clock = SystemClock::new();
        let mut last_cp = clock.monotonic_ms();
        let heartbeat = self.telemetry.heartbeat.clone();
        heartbeat.set_pending(true);
        failpoint!("app::resume::before_catch_up", crate::decide::stage::StageError);
        self.catch_up(catchup_end, &clock, &mut last_cp)?;
        self.continue_seqs();
        loop {
            let batch = match input.try_recv() {
                Ok(b) => b,
                Err(mpsc::error::TryRecvError::Empty) => {
                    self.checkpoint(false, false)?;
                    last_cp = clock.monotonic_ms();
                    heartbeat.set_pending(false);
                    let b = input.blocking_recv();
                    heartbeat.set_pending(true);
                    match b {
                        Some(b) => b,
                        None => break,
                    }
                }
                Err(mpsc::error::TryRecvError::Disconnected) => break,
            };
            self.received_s.push(self.clock.monotonic_s());
            if let Some(first) = batch.records.first().filter(|r| r.pos > self.last_pos + 1) {
                self.catch_up(first.pos, &clock, &mut last_cp)?;
            }
            self.decide(batch);
            let due = clock.monotonic_ms() - last_cp >= self.commit_interval_ms;
            if (due || self.pending.records >= self.commit_records) && !self.commit_busy() {
                self.checkpoint(false, true)?;
                last_cp = clock.monotonic_ms();
            }
        }
        // Every ingest task is gone: what they journaled without sending is decided now.
        self.catch_up(u64::MAX, &clock, &mut last_cp)?;
        self.checkpoint(true, false)
    }

    /// Decides the journal records after the last one decided and before `end`, read from the
    /// journal in chunks of `commit_records`, checkpointing as due.
    fn catch_up(
        &mut self,
        end: u64,
        clock: &SystemClock,
        last_cp: &mut i64,
    ) -> Result<(), StageError> {
        loop {
            self.telemetry.metrics.set_catch_up_remaining(
                end.saturating_sub(self.last_pos + 1)
                    .min(self.store.read().next_journal_pos().saturating_sub(self.last_pos + 1)),
            );
            let chunk: Vec<JournalRecord> = {
                let store = self.store.read();
                let from = self.last_pos + 1;
                let it = store.journal_records_from(from).take_while(|r| match r {
                    Ok(r) => r.pos < end,
                    Err(_) => true,
                });
                it.take(self.commit_records).collect::<Result<_, _>>()?
            };
            if chunk.is_empty() {
                self.telemetry.metrics.set_catch_up_remaining(0);
                return Ok(());
            }
            self.decide(chunk.into());
            let due = clock.monotonic_ms() - *last_cp >= self.commit_interval_ms;
            if due || self.pending.records >= self.commit_records {
                self.checkpoint(false, true)?;
                *last_cp = clock.monotonic_ms();
            }
        }
    }

    fn decide(&mut self, mut batch: DecideBatch) {
        let ended = batch.ended.take();
        self.tails.note_origins(&batch.records);
        let (records, parsed) = batch.into_parts();
        for (rec, parsed) in records.iter().zip(parsed) {
            if rec.pos <= self.last_pos {
                continue;
            }
            if rec.pos <= self.warm_up_through {
                // Decided before the salvage: what it produced is in the salvaged outbox, ledger
                // and archive already (or was acknowledged), so only the state is kept. Outputs
                // of positions past the mark are new; docs/decisions/0028-salvage-instead-of-starting-empty.md.
                decide(&mut self.decider, &mut Pending::default(), rec, parsed);
                self.pending.records += 1;
            } else {
                self.continue_seqs();
                decide(&mut self.decider, &mut self.pending, rec, parsed);
                self.samples_taken(rec);
            }
            self.last_pos = rec.pos;
            self.last_at = Some(rec.at);
            if let Some(o) =
                rec.origin.filter(|o| o.source != crate::records::journal::Origin::RELEASED)
            {
                // Records re-derived after a salvage lie below a kept position: never go back.
                let offset = self.offsets.entry(o.source).or_insert(0);
                *offset = (*offset).max(o.end_offset);
            }
        }
        self.decider.note_state();
        if let Some((source, what)) = ended {
            self.tails.source_ended(source, what);
        }
    }

    /// Follows each sensor's raw-sample blocks; a live source's first block after a restart that
    /// starts after where the sensor's last one ended declares the time between as a
    /// `gateway_down` gap (deterministic: the restart positions are in the ledger).
    fn samples_taken(&mut self, rec: &JournalRecord) {
        let live = rec.origin.is_some_and(|o| self.live_sources.contains(&o.source));
        for (machine, sensor, pos, t0, end) in self.pending.take_samples() {
            let a = self.sensors.sensors.entry((machine.clone(), sensor.clone())).or_default();
            let restarted = self.restarts.iter().any(|&r| a.samples_pos < r && r <= pos);
            if let (true, true, Some(last_end)) = (live, restarted, a.samples_end_ms) {
                if t0 > last_end {
                    let gap = crate::records::outbox::GapNotice {
                        machine,
                        sensor,
                        range: crate::records::outbox::GapRange::Samples {
                            from_ms: last_end,
                            to_ms: t0,
                        },
                        reason: GATEWAY_DOWN.into(),
                        declared_at_ms: rec.at,
                    };
                    self.pending.gap(gap, rec.at);
                }
            }
            a.samples_end_ms = Some(a.samples_end_ms.map_or(end, |e| e.max(end)));
            a.samples_pos = pos;
        }
    }

    /// Once, after the warm-up: derived events continue after the store's sequence marks (a
    /// salvage raises them to the highest seq it saw), which changes nothing when the state came
    /// from a checkpoint or from the whole journal.
    fn continue_seqs(&mut self) {
        if let Some(marks) = self.seq_marks.take() {
            self.decider.continue_seqs(marks);
        }
    }

    /// Writes the checkpoint batch if anything was decided since the last one, wakes the
    /// forwarder, commits, then truncates the journal (when a batch's worth can go, or always
    /// when `last`). With `defer` the commit runs on its own thread while the next records are
    /// decided ([`CommitInFlight`]); the previous checkpoint's commit is finished first, and
    /// what it allows ([`Self::housekeep`]) is done under this checkpoint's hold of the lock.
    fn checkpoint(&mut self, last: bool, defer: bool) -> Result<(), StageError> {
        let finished = self.finish_commit()?;
        if self.pending.is_empty() && !self.tails.has_ends() {
            if let Some(through) = finished.filter(|t| self.housekeeping_due(false, t.0)) {
                let shared = self.store.clone();
                self.housekeep(&mut shared.write(), false, through)?;
            }
            return Ok(());
        }
        self.checkpoint_store(last, defer && !last, finished)
    }

    /// Whether a checkpoint due now had better wait: the last one's commit is still on the
    /// disk and fewer than [`MERGED_BATCHES`] batches' worth are decided. Deciding goes on
    /// meanwhile and the next checkpoint takes it all, instead of waiting for the commit: in a
    /// burst, where an fsync takes longer than deciding a batch, checkpoints (and their commits)
    /// grow rather than queue.
    fn commit_busy(&self) -> bool {
        self.in_flight.as_ref().is_some_and(CommitInFlight::running)
            && self.pending.records < MERGED_BATCHES * self.commit_records
    }

    /// Waits for the checkpoint commit in flight, if any, and reports it: what it covered.
    fn finish_commit(&mut self) -> Result<Option<Through>, StageError> {
        match self.in_flight.take() {
            Some(c) => {
                let (through, received) = c.finish()?;
                self.committed(through, &received)?;
                Ok(Some(through))
            }
            None => Ok(None),
        }
    }

    /// `finished`: a commit finished since the last checkpoint, whose housekeeping is due.
    fn checkpoint_store(
        &mut self,
        last: bool,
        defer: bool,
        finished: Option<Through>,
    ) -> Result<(), StageError> {
        // Encoded before the lock is taken: the ingest and the forwarder need not wait for it.
        let payload = CheckpointPayload {
            decider: self.decider.snapshot(),
            offsets: self.offsets.clone(),
            rule_version: self.rule_version.clone(),
            rule_versions: self.rule_versions.clone(),
        }
        .encode();
        let dedup =
            self.dedup_pages.change(self.decider.take_dedup_page(), &self.decider.dedup_horizons());
        let shared = self.store.clone();
        let mut store = shared.write();
        if let Some(through) = finished {
            self.housekeep(&mut store, false, through)?;
        }
        let (outbox_base, decided) = (store.next_outbox_seq(), self.pending.records as u64);
        let (outbox, mut ledger, archived) =
            self.pending.finish(store.next_outbox_seq(), store.next_ledger_seq(), |frame| {
                store.append_frame(frame)
            })?;
        let mut puts: Vec<(Vec<u8>, Vec<u8>)> = archived.into_iter().map(archive_put).collect();
        puts.extend(self.offsets.iter().map(|(&s, &o)| crate::store::source_position_put(s, o)));
        for r in &ledger {
            self.sensors.absorb(r.at_ms, &r.entry);
            self.tails.attribute(&mut self.sensors, &r.entry, &self.live_sources);
            if let crate::records::ledger::LedgerEntry::GapDeclared { gap, .. } = &r.entry {
                self.telemetry.metrics.gaps_declared(&gap.reason, 1);
            }
        }
        self.note_bounds();
        let at = self.last_at.or(self.sensors.newest_at_ms()).unwrap_or(0);
        ledger.extend(self.tails.declare(&mut self.sensors, self.last_pos, at));
        let outbox_range =
            (!outbox.is_empty()).then(|| (outbox_base, outbox_base + outbox.len() as u64 - 1));
        ledger.push(self.tails.checkpoint(self.last_pos, decided, outbox_range, at));
        puts.push(crate::store::sensor_book_put(&self.sensors));
        store.apply_checkpoint_with_dedup(
            self.last_pos,
            &payload,
            &outbox,
            &ledger,
            &puts,
            &dedup,
        )?;
        // The forwarder may publish the new records while the batch commits: the journal they
        // were decided from is durable, a crash before the commit decides them again (the same
        // alert ids and revisions, which consumers deduplicate), and it can apply their
        // acknowledgements only after the commit (that needs the lock exclusively).
        let store = store.downgrade();
        if !outbox.is_empty() {
            self.outbox_grew.notify_one();
        }
        failpoint!("app::decide::before_commit", crate::decide::stage::StageError);
        let received = std::mem::take(&mut self.received_s);
        let through = (self.last_pos, self.last_at);
        if defer {
            drop(store);
            self.in_flight = Some(CommitInFlight::start(&shared, through, received)?);
            return Ok(());
        }
        shared.commit_released(store)?;
        self.committed(through, &received)?;
        if self.housekeeping_due(last, through.0) {
            self.housekeep(&mut shared.write(), last, through)?;
        }
        Ok(())
    }

    /// Keeps each sensor's watermark bound and measured delays in the book, for `status`.
    fn note_bounds(&mut self) {
        let book = &mut self.sensors.sensors;
        for (m, s, bound) in self.decider.bounds() {
            if let Some(a) = book.get_mut(&(m.to_string(), s.to_string())) {
                a.bound_ms = Some(bound);
            }
        }
        for (m, s, disorder, delay) in self.decider.measured_delays() {
            if let Some(a) = book.get_mut(&(m.to_string(), s.to_string())) {
                (a.disorder_ms, a.delay_ms) = (disorder, delay);
            }
        }
    }

    /// What follows a checkpoint's commit at once: its telemetry. `through`: the last position
    /// it covers and that record's ingest time; `received`: the receipt times of the batches it
    /// covers.
    fn committed(&mut self, (_, last_at): Through, received: &[f64]) -> Result<(), StageError> {
        failpoint!("app::decide::after_checkpoint", crate::decide::stage::StageError);
        let now = self.clock.monotonic_s();
        let latencies: Vec<f64> = received.iter().map(|t| (now - t).max(0.0)).collect();
        report_checkpoint(&self.telemetry, &self.decider, last_at, &latencies);
        self.telemetry.heartbeat.bump();
        Ok(())
    }

    /// Whether [`Self::housekeep`] after a checkpoint through `last_pos` may have work: a batch's
    /// worth decided since the floor was last set, or `last`. Told without the store, so that the
    /// lock is not taken for nothing.
    fn housekeeping_due(&self, last: bool, last_pos: u64) -> bool {
        last || last_pos + 1 >= self.floor + self.commit_records as u64
    }

    /// What a durable checkpoint through `last_pos` allows, under the store's exclusive lock:
    /// the floor moves up and the journal loses what is older than the history horizon, when a
    /// batch's worth was decided since the floor was last set (retention may have moved the
    /// journal's start past it) or when `last`. A deferred commit's is done in the next
    /// checkpoint's hold of the lock: taking the lock apart waited, at every checkpoint of a
    /// burst, for the ingest's and the forwarder's writes.
    fn housekeep(
        &mut self,
        store: &mut Store,
        last: bool,
        (last_pos, last_at): Through,
    ) -> Result<(), StageError> {
        let start = store.journal_start().max(self.floor);
        if !last && last_pos + 1 < start + self.commit_records as u64 {
            return Ok(());
        }
        let oldest = self.oldest_referenced(store)?;
        let floor = oldest.map_or(last_pos + 1, |p| p.min(last_pos + 1));
        self.floor = floor;
        store.set_history_floor(floor);
        // History: what is older than the horizon goes (docs/contracts.md section 11).
        let keep = match last_at {
            Some(at) => store.journal_history_start(at.saturating_sub(self.history_ms), floor)?,
            None => store.journal_start(),
        };
        if keep > store.journal_start() {
            store.truncate_journal_before(keep)?;
        }
        Ok(())
    }

    /// The journal position of the oldest pending `Samples` outbox record. Samples records are
    /// added in journal order, so the first one in outbox order is the oldest; records only
    /// leave the outbox or join at its end, so a scan resumes where the last one found nothing.
    fn oldest_referenced(&mut self, store: &Store) -> Result<Option<u64>, StageError> {
        for r in store.outbox_pending_from(self.samples_scan_from) {
            let (seq, bytes) = r?;
            // After a long outage this passes every event queued before the oldest frame once:
            // told apart without decoding them.
            if OutboxRecord::peek_bulk(&bytes) == Some(crate::records::outbox::Bulk::Event) {
                self.samples_scan_from = seq + 1;
                continue;
            }
            let rec = OutboxRecord::decode(&bytes)
                .map_err(|e| StageError::Outbox { seq, why: e.to_string() })?;
            if let OutboxRecord::Samples { journal_pos, .. } = rec {
                self.samples_scan_from = seq;
                return Ok(Some(journal_pos));
            }
            self.samples_scan_from = seq + 1;
        }
        Ok(None)
    }
}

/// Where an archive record goes in the store: its key and value.
fn archive_put(a: Archived) -> (Vec<u8>, Vec<u8>) {
    match a {
        Archived::Alert { alert_id, revision, json } => (alert_key(&alert_id, revision), json),
        Archived::Quarantined { id, entry } => (quarantine_key(id), entry),
    }
}

/// What the decide stage reports after a checkpoint: `ingest_ms` is the ingest time of the last
/// record it decided, `latencies_s` the time each batch it covers waited from its receipt to now.
/// The decision counters (records, duplicates, late and too late, rejected by reason, alerts), the
/// rule state, each machine's watermark and lag, and the processing latencies.
fn report_checkpoint(
    t: &Telemetry,
    decider: &Decider,
    ingest_ms: Option<i64>,
    latencies_s: &[f64],
) {
    let m = &t.metrics;
    // Before the counts: a scrape that sees a record counted sees its bound.
    m.set_watermark_bounds(decider.bounds());
    m.set_measured_delays(decider.measured_delays());
    m.apply_counts(decider.counts());
    let (size, open_frames) = decider.state_size();
    m.set_rule_states(&size, open_frames, &decider.rule_sizes());
    if let Some(at) = ingest_ms {
        m.set_watermarks(at, decider.watermarks());
    }
    t.note_watermarks(decider.watermarks());
    if let Some(book) = decider.trends() {
        t.publish_trends(book);
    }
    for &s in latencies_s {
        m.observe_processing_latency(s);
    }
}

#[cfg(test)]
mod tests {
    use super::DedupPages;
    use crate::rule::dedup::Dedup;

    /// Packed entries of machine `m` at the times `ts`.
    fn page(m: u32, ts: &[i64]) -> Vec<u8> {
        let mut d = Dedup::default();
        d.keep_outside();
        for &t in ts {
            d.remember(&format!("e{m}.{t}"), 0, t, m);
        }
        d.take_spilled()
    }

    /// A page goes with the first checkpoint at which every entry on it is behind its machine's
    /// horizon; stale pages go with the next checkpoint; an empty page is not written.
    #[test]
    fn pages_go_once_all_their_entries_are_behind_the_horizons() {
        let mut p = DedupPages { stale: vec![3], next: 4, ..DedupPages::default() };
        let numbers = |c: &crate::store::DedupChange| c.add.iter().map(|a| a.0).collect::<Vec<_>>();
        let c = p.change(page(0, &[100, 200]), &[0]);
        assert_eq!(c.remove, vec![3]);
        assert_eq!(numbers(&c), [4]);
        let c = p.change([page(0, &[300]), page(1, &[50])].concat(), &[0, 0]);
        assert_eq!((numbers(&c), c.remove.clone()), (vec![5], vec![]));
        // Machine 0's horizon passes 200: page 4 goes; page 5 waits for machine 0 at 300.
        let c = p.change(Vec::new(), &[201, 51]);
        assert_eq!((numbers(&c), c.remove), (vec![], vec![4]));
        // A machine the engine does not know (no horizon) keeps its page.
        let c = p.change(page(7, &[1]), &[301, 51]);
        assert_eq!(c.remove, vec![5]);
        assert_eq!(p.change(Vec::new(), &[i64::MAX, i64::MAX]).remove, Vec::<u64>::new());
        assert_eq!(p.held.len(), 1);
    }

    /// The entries one checkpoint added go on pages of at most `DEDUP_PAGE_ENTRIES`, numbered in
    /// order, each with its own latest times: a page goes as soon as its own entries are behind.
    #[test]
    fn a_checkpoint_s_entries_are_cut_into_pages_that_go_on_their_own() {
        let mut p = DedupPages::default();
        let times: Vec<i64> = (0..2 * super::DEDUP_PAGE_ENTRIES as i64 + 10).collect();
        let entries = page(0, &times);
        let c = p.change(entries.clone(), &[0]);
        let sizes: Vec<usize> = c.add.iter().map(|(_, v)| v.len()).collect();
        let full = super::DEDUP_PAGE_ENTRIES * crate::rule::dedup::ENTRY_BYTES;
        assert_eq!(sizes, [full, full, 10 * crate::rule::dedup::ENTRY_BYTES]);
        assert_eq!(c.add.iter().map(|a| a.0).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(c.add.iter().flat_map(|(_, v)| v.clone()).collect::<Vec<u8>>(), entries);
        // The horizon passes the first page's entries only.
        let first_last = super::DEDUP_PAGE_ENTRIES as i64 - 1;
        assert_eq!(p.change(Vec::new(), &[first_last + 1]).remove, [0]);
    }

    /// Rule changes at a start pair each rule with the state it goes on from: by name, or the
    /// first rule with a single rule's checkpoint.
    #[test]
    fn rule_changes_pair_rules_by_name() {
        use super::{changes_since, RuleChange};
        use crate::records::checkpoint::CheckpointPayload;
        let cp = |version: &str, versions: &[(&str, &str)]| CheckpointPayload {
            decider: Vec::new(),
            offsets: Default::default(),
            rule_version: version.into(),
            rule_versions: versions.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
        };
        let now = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
        };
        let change = |rule: &str, from: &str, to: &str| RuleChange {
            rule: rule.into(),
            from: from.into(),
            to: to.into(),
        };
        // One rule, changed or not; a checkpoint without a version is adopted.
        assert_eq!(changes_since(&cp("a1", &[]), &now(&[("a", "a1")])), []);
        assert_eq!(changes_since(&cp("a1", &[]), &now(&[("b", "b1")])), [change("b", "a1", "b1")]);
        assert_eq!(changes_since(&cp("", &[]), &now(&[("b", "b1")])), []);
        // One rule to two: the first goes on, the second is added.
        assert_eq!(
            changes_since(&cp("a1", &[]), &now(&[("a", "a1"), ("c", "c1")])),
            [change("c", "", "c1")]
        );
        // Two to two, reordered, one changed, one removed and one added.
        let two = cp("a1", &[("a", "a1"), ("c", "c1")]);
        assert_eq!(changes_since(&two, &now(&[("c", "c1"), ("a", "a1")])), []);
        assert_eq!(
            changes_since(&two, &now(&[("c", "c2"), ("d", "d1")])),
            [change("c", "c1", "c2"), change("d", "", "d1"), change("a", "a1", "")]
        );
    }
}
