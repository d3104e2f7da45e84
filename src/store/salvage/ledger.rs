//! Salvage steps 5 and 6 (see the module above): the ledger, read once, and the sequence marks.

use std::collections::{BTreeMap, BTreeSet};

use super::{corrupt_gap, ranges, Batcher, Copier, Old, Result, Store};
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::records::outbox::{GapNotice, GapRange, OutboxRecord};
use crate::store::archive::alert_key;
use crate::store::ledger::{ledger_key, LEDGER};

impl Copier<'_> {
    /// Step 5; returns the highest ledger sequence present, readable or not.
    pub(super) fn ledger(&mut self, old: &Old<'_>, fresh: &Store, now_ms: i64) -> Result<u64> {
        let mut out = Batcher::new(&fresh.state, fresh.path());
        // The highest ledger sequence lost so far.
        let (mut max, mut last_lost) = (0, None);
        // Per sensor: the highest seq accepted so far and the ledger sequence that accepted it.
        let mut last: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
        for item in super::paged(&old.state, LEDGER) {
            let (lseq, bytes) = match item {
                super::Paged::Record(lseq, bytes) => (lseq, bytes),
                super::Paged::BadKey => {
                    self.count(false, "ledger");
                    continue;
                }
                super::Paged::Broken { first, last } => {
                    self.lost_page(first, last, &mut max, &mut last_lost);
                    continue;
                }
                super::Paged::Stopped => {
                    self.count(false, "ledger_scan_stopped");
                    break;
                }
            };
            max = max.max(lseq);
            let Ok(rec) = LedgerRecord::decode(&bytes) else {
                last_lost = Some(lseq);
                super::push_range(&mut self.s.report.lost_ledger, lseq);
                self.count(false, "ledger");
                continue;
            };
            out.put(&ledger_key(lseq), &bytes)?;
            self.count(true, "ledger");
            match rec.entry {
                LedgerEntry::Accepted {
                    event_id,
                    machine,
                    sensor,
                    seq,
                    journal_pos,
                    outbox_seq,
                    ..
                } => {
                    self.decided = self.decided.max(journal_pos);
                    if self.lost_outbox.remove(&(outbox_seq, None)) {
                        let who = (machine.clone(), sensor.clone(), seq);
                        self.lost_outbox.insert((outbox_seq, Some(who)));
                    }
                    let key = (machine.clone(), sensor.clone());
                    match last.get(&key).copied() {
                        // Ledger records were lost between the sensor's last accepted seq and
                        // this one: the seqs between are declared lost.
                        Some((prev, prev_l)) if seq > prev + 1 && last_lost > Some(prev_l) => {
                            let range = GapRange::Events { from_seq: prev + 1, to_seq: seq - 1 };
                            self.s.gaps.push(corrupt_gap(
                                machine.clone(),
                                sensor.clone(),
                                range,
                                now_ms,
                            ));
                        }
                        _ => {}
                    }
                    let prev = last.get(&key).map_or(0, |p| p.0);
                    last.insert(key, (prev.max(seq), lseq));
                    self.mark_derived(&event_id, machine, sensor, seq);
                }
                LedgerEntry::Alert { alert_id, revision, machine, outbox_seq, .. }
                    if self.lost_outbox.contains(&(outbox_seq, None)) =>
                {
                    // The archive holds every revision as published: the outbox record again.
                    let archived = old.state.get(alert_key(&alert_id, revision)).ok().flatten();
                    let json = archived
                        .filter(|j| serde_json::from_slice::<serde::de::IgnoredAny>(j).is_ok());
                    if let Some(json) = json {
                        let json = json.to_vec();
                        let rec = OutboxRecord::Alert { machine, alert_id, revision, json };
                        out.put(&crate::store::state::outbox_key(outbox_seq), &rec.encode())?;
                        self.lost_outbox.remove(&(outbox_seq, None));
                        self.count(true, "outbox_rebuilt");
                    }
                }
                LedgerEntry::Duplicate { journal_pos, .. }
                | LedgerEntry::Quarantined { journal_pos, .. }
                | LedgerEntry::Released { journal_pos, .. } => {
                    self.decided = self.decided.max(journal_pos);
                }
                LedgerEntry::Restart { checkpoint_pos, .. } => {
                    self.decided = self.decided.max(checkpoint_pos);
                }
                _ => {}
            }
        }
        out.flush()?;
        Ok(max)
    }

    /// A ledger page from `first` whose framing does not decode: its records up to `last` (the
    /// key before the next readable one; only `first` when it was the last key) are lost.
    fn lost_page(&mut self, first: u64, last: u64, max: &mut u64, last_lost: &mut Option<u64>) {
        *max = (*max).max(last);
        *last_lost = Some(last);
        let lost = &mut self.s.report.lost_ledger;
        if let Some(l) = lost.last_mut().filter(|l| first == l.1 + 1) {
            l.1 = last;
        } else if lost.len() < super::MAX_RANGES {
            lost.push((first, last));
        }
        self.count(false, "ledger");
    }

    /// Raises the mark of an event the gateway derived (`{gateway}.{sensor}.{seq}`): the decide
    /// stage numbers those, devices number their own.
    pub(super) fn mark_derived(
        &mut self,
        event_id: &str,
        machine: String,
        sensor: String,
        seq: u64,
    ) {
        if event_id.strip_suffix(&format!(".{sensor}.{seq}")).is_some_and(|g| !g.is_empty()) {
            self.mark(machine, sensor, seq);
        }
    }

    fn mark(&mut self, machine: String, sensor: String, seq: u64) {
        let m = self.marks.entry((machine, sensor)).or_default();
        *m = (*m).max(seq);
    }

    /// Step 6.
    pub(super) fn seq_marks(&mut self, old: &Old<'_>, fresh: &Store) -> Result<()> {
        for kv in old.seq.iter() {
            let Ok((k, v)) = kv else { break };
            let key = crate::store::seq::decode_seq_key(old.path, &k).ok();
            match (key, <[u8; 8]>::try_from(&v[..]).map(u64::from_be_bytes)) {
                (Some((m, s)), Ok(n)) => self.mark(m, s, n),
                _ => self.count(false, "seq_marks"),
            }
        }
        let mut out = Batcher::new(&fresh.seq, fresh.path());
        for ((machine, sensor), n) in std::mem::take(&mut self.marks) {
            out.u64(&crate::store::seq::seq_key(&machine, &sensor), n)?;
            self.count(true, "seq_marks");
        }
        out.flush()
    }
}

/// One gap per run of consecutive lost seqs of a sensor.
pub(super) fn event_gaps(
    lost: impl Iterator<Item = (String, String, u64)>,
    now_ms: i64,
) -> Vec<GapNotice> {
    let mut by_sensor: BTreeMap<(String, String), BTreeSet<u64>> = BTreeMap::new();
    for (m, s, seq) in lost {
        by_sensor.entry((m, s)).or_default().insert(seq);
    }
    let mut gaps = Vec::new();
    for ((machine, sensor), seqs) in by_sensor {
        for (from_seq, to_seq) in ranges(seqs.into_iter()) {
            let range = GapRange::Events { from_seq, to_seq };
            gaps.push(corrupt_gap(machine.clone(), sensor.clone(), range, now_ms));
        }
    }
    gaps
}

/// Gaps of raw samples of one sensor that touch or overlap merged into one, so a lost segment
/// file is a few notices, not one per frame; other gaps as they are.
pub(super) fn merge_sample_gaps(gaps: Vec<GapNotice>) -> Vec<GapNotice> {
    let mut out: Vec<GapNotice> = Vec::with_capacity(gaps.len());
    let mut open: BTreeMap<(String, String), usize> = BTreeMap::new();
    for g in gaps {
        let GapRange::Samples { from_ms, to_ms } = g.range else {
            out.push(g);
            continue;
        };
        let key = (g.machine.clone(), g.sensor.clone());
        if let Some(&i) = open.get(&key) {
            if let GapRange::Samples { to_ms: end, .. } = &mut out[i].range {
                if from_ms <= *end {
                    *end = (*end).max(to_ms);
                    continue;
                }
            }
        }
        open.insert(key, out.len());
        out.push(g);
    }
    out
}
