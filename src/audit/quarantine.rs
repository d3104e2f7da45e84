//! `linegate quarantine list|show ID|release ID|drop ID`.
//!
//! Release re-ingests the original bytes through the normal path: a new journal record (origin
//! "released") with a new ingest time, decided by the next `linegate run` like any arrival and
//! ledgered (`Released`). The journal record is committed before the quarantine entry is
//! removed, so a crash in between leaves the record both journaled and quarantined, never lost;
//! releasing it again would give the rule a duplicate, which it counts and ignores.

use std::io::Write;

use super::view::View;
use super::AuditError;
use crate::clock::{Clock, SystemClock};
use crate::records::checkpoint::QuarantineEntry;
use crate::records::journal::{JournalRecord, Origin};
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::store::archive::{quarantine_key, QUARANTINE};
use crate::timefmt::time_or;

/// What to do with the quarantine.
#[derive(Debug, Clone, PartialEq, Eq, clap::Subcommand, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// One line per quarantined record: id, reason, ingest time, journal position.
    List,
    /// One record: reason, the sentence, and its original bytes.
    Show { id: u64 },
    /// Re-ingest the original bytes (decided by the next `linegate run`).
    Release {
        id: u64,
        /// The new ingest time in Unix ms (default: now).
        #[arg(long)]
        at: Option<i64>,
    },
    /// Remove it for good (ledgered).
    Drop { id: u64 },
}

/// Every quarantined record `(id, entry)`, in id order.
pub fn entries(store: &crate::store::Store) -> Result<Vec<(u64, QuarantineEntry)>, AuditError> {
    store
        .archive_scan(QUARANTINE)
        .map(|r| {
            let (k, v) = r?;
            decode(&k, &v)
        })
        .collect()
}

fn decode(key: &[u8], value: &[u8]) -> Result<(u64, QuarantineEntry), AuditError> {
    let bad = |why: String| AuditError::Decode {
        what: "quarantine key",
        key: key.escape_ascii().to_string(),
        why,
    };
    let id = key
        .strip_prefix(QUARANTINE)
        .and_then(|r| <[u8; 8]>::try_from(r).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| bad("not q/ + 8 bytes".into()))?;
    QuarantineEntry::decode(value).map(|e| (id, e)).map_err(|e| bad(e.to_string()))
}

fn get(store: &crate::store::Store, id: u64) -> Result<QuarantineEntry, AuditError> {
    let key = quarantine_key(id);
    match store.archive_get(&key)? {
        None => Err(AuditError::NotFound(format!(
            "no quarantined record {id} (see `linegate quarantine list`)"
        ))),
        Some(v) => decode(&key, &v).map(|(_, e)| e),
    }
}

/// The trace line that re-ingests `e`: its original line, or for an event derived from raw
/// samples, an `event` line around the event's JSON.
pub fn release_line(e: &QuarantineEntry, at: i64) -> Vec<u8> {
    if !e.derived {
        return e.raw.clone();
    }
    let mut line = format!("{{\"at\":{at},\"kind\":\"event\",\"event\":").into_bytes();
    line.extend_from_slice(&e.raw);
    line.push(b'}');
    line
}

/// One line of `quarantine list`: id, reason, ingest time, journal record, detail.
fn list_line(id: u64, e: &QuarantineEntry) -> String {
    let at = time_or(e.at_ms, "unknown");
    let derived = if e.derived { " (derived)" } else { "" };
    format!("{id}\t{}\tat {at}\tjournal record {}{derived}\t{}", e.reason, e.journal_pos, e.detail)
}

impl Action {
    /// Runs the action; exit status 0 when it did what was asked. On the daemon's store a
    /// released record is handed to the decide stage at once; on a stopped store the next
    /// `linegate run` decides it. Every mutation's ledger record names who asked (`by`).
    pub fn run(&self, view: &mut View<'_>, out: &mut dyn Write) -> Result<u8, AuditError> {
        let now = SystemClock::new().now_ms();
        let by = Some(view.operator());
        match *self {
            Action::List => {
                let all = view.read(entries)?;
                writeln!(out, "{} quarantined record(s)", all.len())?;
                for (id, e) in all {
                    writeln!(out, "{}", list_line(id, &e))?;
                }
            }
            Action::Show { id } => {
                let e = view.read(|s| get(s, id))?;
                writeln!(out, "id:       {id}\nreason:   {}\ndetail:   {}", e.reason, e.detail)?;
                writeln!(out, "at:       {}", time_or(e.at_ms, "unknown"))?;
                writeln!(out, "journal:  record {}", e.journal_pos)?;
                let derived = if e.derived { "yes, from raw samples" } else { "no" };
                writeln!(out, "derived:  {derived}\nraw:      {}", e.raw.escape_ascii())?;
            }
            Action::Release { id, at } => {
                let e = view.read(|s| get(s, id))?;
                let at = at.unwrap_or(now);
                let origin = Origin { source: Origin::RELEASED, end_offset: id };
                let line = release_line(&e, at);
                let pos = view.journal_release(at, origin, line.clone())?;
                let entry = LedgerEntry::Released { quarantine_key: id, journal_pos: pos, by };
                view.write(|s| {
                    s.archive_remove(&quarantine_key(id), &[LedgerRecord::new(at, entry)])
                })?;
                let record = JournalRecord { pos, at, origin: Some(origin), line };
                if view.decide_now(record) {
                    writeln!(
                        out,
                        "released {id} as journal record {pos}: the daemon decides it now"
                    )?;
                } else if view.is_daemon() {
                    writeln!(
                        out,
                        "released {id} as journal record {pos}: the daemon is stopping, its next start decides it"
                    )?;
                } else {
                    writeln!(
                        out,
                        "released {id} as journal record {pos}: the next `linegate run` decides it"
                    )?;
                }
            }
            Action::Drop { id } => {
                view.read(|s| get(s, id))?;
                let entry = LedgerEntry::Dropped { quarantine_key: id, by };
                view.write(|s| {
                    s.archive_remove(&quarantine_key(id), &[LedgerRecord::new(now, entry)])
                })?;
                writeln!(out, "dropped {id}")?;
            }
        }
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_line_says_its_ingest_time_in_rfc3339() {
        let mut e = QuarantineEntry {
            reason: "malformed_json".into(),
            detail: "line is not JSON".into(),
            at_ms: Some(1_700_000_050_500),
            journal_pos: 3,
            derived: false,
            raw: b"{oops".to_vec(),
        };
        assert_eq!(
            list_line(7, &e),
            "7\tmalformed_json\tat 2023-11-14T22:14:10.500Z\tjournal record 3\tline is not JSON"
        );
        e.at_ms = None;
        e.derived = true;
        assert_eq!(
            list_line(7, &e),
            "7\tmalformed_json\tat unknown\tjournal record 3 (derived)\tline is not JSON"
        );
    }
}
