//! `linegate inspect`: queue depths (outbox records and bytes by kind), journal positions, ledger
//! length, quarantine count, sled's size on disk, and the last Restart and Recovery records.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use super::status::{self, SensorRow};
use super::view::View;
use super::AuditError;
use crate::config::Config;
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::records::outbox::{Bulk, OutboxRecord};
use crate::store::archive::QUARANTINE;
use crate::store::Store;

/// Outbox kind → (records, bytes).
pub type OutboxDepth = BTreeMap<&'static str, (u64, u64)>;

/// What `inspect` reports.
#[derive(Debug, Serialize)]
pub struct Inspection {
    pub outbox: OutboxDepth,
    pub journal_start: u64,
    /// Ingest time of the oldest record of the input's history (`[store] history`); null when
    /// the journal is empty.
    pub history_from_ms: Option<i64>,
    pub checkpoint: u64,
    pub journal_next: u64,
    /// Ledger records ever written (the next sequence − 1), pruned ones included.
    pub ledger_records: u64,
    /// Of those, the ones `[store] history` folded into the pruned summary: sequences up to
    /// `ledger_pruned_through`.
    pub ledger_pruned: u64,
    pub ledger_pruned_through: u64,
    pub quarantined: u64,
    pub size_on_disk: u64,
    pub last_restart: Option<LedgerRecord>,
    pub last_recovery: Option<LedgerRecord>,
    /// Every sensor seen or configured, with its state (docs/contracts.md section 11).
    pub sensors: Vec<SensorRow>,
}

fn kind(r: &OutboxRecord) -> &'static str {
    match r {
        OutboxRecord::Alert { .. } => "alert",
        OutboxRecord::Event { .. } => "event",
        OutboxRecord::Samples { .. } => "samples",
        OutboxRecord::Gap(_) => "gap",
    }
}

/// The outbox's records and bytes by kind: the walk starts under the store's lock and goes on
/// without it (sled reads safely beside writers), up to the records that existed when it began,
/// so a backlog of a day never holds up the pipeline. Events and raw samples, the bulk of a
/// backlog, are told by their first bytes.
pub fn outbox_depth(view: &View<'_>) -> Result<OutboxDepth, AuditError> {
    let (records, next) = view.read(|s| (s.outbox_pending(), s.next_outbox_seq()));
    let mut outbox = OutboxDepth::new();
    for r in records {
        let (seq, bytes) = r?;
        if seq >= next {
            break;
        }
        let k = match OutboxRecord::peek_bulk(&bytes) {
            Some(Bulk::Event) => "event",
            Some(Bulk::Samples) => "samples",
            None => kind(&OutboxRecord::decode(&bytes).map_err(|e| AuditError::Decode {
                what: "outbox record",
                key: seq.to_string(),
                why: e.to_string(),
            })?),
        };
        let e = outbox.entry(k).or_default();
        e.0 += 1;
        e.1 += bytes.len() as u64;
    }
    Ok(outbox)
}

/// The newest `Restart` and `Recovery` records: by the sequences the store keeps for them, or on
/// a store written before it kept them, walking the ledger back from its end (until both are
/// found).
pub fn last_restart_and_recovery(
    store: &Store,
) -> Result<(Option<LedgerRecord>, Option<LedgerRecord>), AuditError> {
    if let Some(found) = store.last_restart_and_recovery()? {
        return Ok(found);
    }
    let (mut last_restart, mut last_recovery) = (None, None);
    for r in store.ledger_back() {
        let (_, rec) = r?;
        match rec.entry {
            LedgerEntry::Restart { .. } if last_restart.is_none() => last_restart = Some(rec),
            LedgerEntry::Recovery { .. } if last_recovery.is_none() => last_recovery = Some(rec),
            _ => {}
        }
        if last_restart.is_some() && last_recovery.is_some() {
            break;
        }
    }
    Ok((last_restart, last_recovery))
}

/// Gathers the inspection: one consistent look under the store's lock, then the ledger's tail.
pub fn gather(view: &View<'_>, config: &Config) -> Result<Inspection, AuditError> {
    let mut i = view.read(|store| -> Result<Inspection, AuditError> {
        let pruned = store.pruned_summary()?;
        Ok(Inspection {
            outbox: OutboxDepth::new(),
            journal_start: store.journal_start(),
            history_from_ms: store.history_from()?,
            checkpoint: store.checkpoint_pos(),
            journal_next: store.next_journal_pos(),
            ledger_records: store.next_ledger_seq() - 1,
            ledger_pruned: pruned.records(),
            ledger_pruned_through: pruned.through,
            quarantined: store.archive_scan(QUARANTINE).count() as u64,
            size_on_disk: store.size_on_disk()?,
            last_restart: None,
            last_recovery: None,
            sensors: {
                let book = store.sensor_book_with_gaps()?;
                let now = status::reference_time(&book, config, None);
                status::sensor_rows(&book, config, now)
            },
        })
    })?;
    (i.last_restart, i.last_recovery) = view.read(last_restart_and_recovery)?;
    i.outbox = outbox_depth(view)?;
    Ok(i)
}

/// `linegate inspect`.
pub fn inspect(
    view: &mut View<'_>,
    config: &Config,
    json: bool,
    out: &mut dyn Write,
) -> Result<u8, AuditError> {
    let i = gather(view, config)?;
    if json {
        let text = serde_json::to_string_pretty(&i).map_err(std::io::Error::other)?;
        writeln!(out, "{text}")?;
        return Ok(0);
    }
    writeln!(out, "store {}", config.store.path.display())?;
    writeln!(out, "  size on disk      {} bytes", i.size_on_disk)?;
    writeln!(
        out,
        "  journal           start {}, checkpoint {}, next {}",
        i.journal_start, i.checkpoint, i.journal_next
    )?;
    if let Some(from) = i.history_from_ms {
        let span = i.checkpoint.saturating_add(1).saturating_sub(i.journal_start);
        writeln!(
            out,
            "                    history from {} ({span} records decided; `linegate export`)",
            crate::timefmt::time(from)
        )?;
    }
    writeln!(out, "  ledger            {} records", i.ledger_records)?;
    if i.ledger_pruned > 0 {
        writeln!(
            out,
            "                    {} older than [store] history folded into its summary (through {})",
            i.ledger_pruned, i.ledger_pruned_through
        )?;
    }
    writeln!(out, "  quarantine        {} records", i.quarantined)?;
    let total: (u64, u64) = i.outbox.values().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    writeln!(out, "  outbox            {} records, {} bytes", total.0, total.1)?;
    for (k, (n, b)) in &i.outbox {
        writeln!(out, "    {k:<8} {n} records, {b} bytes")?;
    }
    for (what, r) in [("last restart", &i.last_restart), ("last recovery", &i.last_recovery)] {
        match r {
            None => writeln!(out, "  {what:<17} none")?,
            Some(r) => writeln!(
                out,
                "  {what:<17} at {}: {}",
                crate::timefmt::time(r.at_ms),
                r.entry.describe()
            )?,
        }
    }
    writeln!(out, "  sensors           {}", i.sensors.len())?;
    for r in &i.sensors {
        let last = match (r.last_seq, r.last_ts_ms) {
            (Some(seq), Some(ts)) => format!("last seq {seq} at {}", crate::timefmt::time(ts)),
            _ => "never heard from".into(),
        };
        writeln!(out, "    {}/{} {}: {last}", r.machine, r.sensor, r.state.as_str())?;
    }
    Ok(0)
}
