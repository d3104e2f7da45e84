//! What `explain` reads from the store: the alert's revisions (the archive), the machine's
//! accepted events (the ledger), the alerts merged into it, and the content of the events of
//! its window that the alert records do not carry — re-derived from the input's history
//! (`[store] history`) by the decider itself, as `whatif` decides it again.

use std::collections::HashMap;
use std::io::Write;

use super::reason::{Merged, Named};
use super::window::{Accepted, Contents};
use crate::audit::export::{export, Span};
use crate::audit::view::View;
use crate::audit::AuditError;
use crate::config::Config;
use crate::decide::{Decider, Outcome};
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::rule::alert::{AlertKind, AlertRecord};
use crate::stamp::FRAME_MS;
use crate::store::archive::{alert_key, alert_prefix};
use crate::trace::parse::parse_line;
use crate::trace::{Arrival, TraceLine};

/// Every archived revision of `alert_id`, in order.
pub fn revisions(view: &View<'_>, alert_id: &str) -> Result<Vec<AlertRecord>, AuditError> {
    view.read(|store| {
        let mut revisions = Vec::new();
        for r in store.archive_scan(&alert_prefix(alert_id)) {
            revisions.push(crate::audit::decode_alert(r?)?);
        }
        Ok(revisions)
    })
}

/// The accepted events of `machine` in the ledger, and the same by id for naming them.
pub fn accepted(
    ledger: &[(u64, LedgerRecord)],
    machine: &str,
) -> (Vec<Accepted>, HashMap<String, Named>) {
    let mut list = Vec::new();
    let mut names = HashMap::new();
    for (_, r) in ledger {
        if let LedgerEntry::Accepted {
            event_id,
            machine: m,
            sensor,
            seq,
            ts_ms,
            how,
            counted,
            ..
        } = &r.entry
        {
            if m != machine {
                continue;
            }
            let named = Named { sensor: sensor.clone(), seq: *seq, ts_ms: *ts_ms, how: *how };
            names.insert(event_id.clone(), named);
            list.push(Accepted {
                event_id: event_id.clone(),
                sensor: sensor.clone(),
                seq: *seq,
                ts_ms: *ts_ms,
                how: *how,
                counted: *counted,
                at_ms: r.at_ms,
            });
        }
    }
    (list, names)
}

/// The alerts the ledger says were superseded on `alert`'s machine whose archived `supersede`
/// names `alert` as the survivor.
pub fn merged_into(
    view: &View<'_>,
    ledger: &[(u64, LedgerRecord)],
    alert: &AlertRecord,
) -> Result<Vec<Merged>, AuditError> {
    let mut out = Vec::new();
    for (_, r) in ledger {
        let LedgerEntry::Alert { alert_id, revision, alert_kind, machine, caused_by, .. } =
            &r.entry
        else {
            continue;
        };
        if alert_kind != "supersede" || *machine != alert.machine || *alert_id == alert.alert_id {
            continue;
        }
        let key = alert_key(alert_id, *revision);
        let Some(json) = view.read(|s| s.archive_get(&key))? else { continue };
        let record = crate::audit::decode_alert((key, json))?;
        if record.kind == AlertKind::Supersede
            && record.superseded_by.as_deref() == Some(alert.alert_id.as_str())
        {
            out.push(Merged {
                alert_id: alert_id.clone(),
                caused_by: caused_by.clone(),
                decided_at_ms: record.decided_at_ms,
            });
        }
    }
    Ok(out)
}

/// The events of `machine` the history holds among the records ingested in `[from_at, to_at)`,
/// added to `contents`: the history's lines of the machine (and ticks) decided again by a fresh
/// decider under `config`, every event read from a line or derived from raw samples kept. A
/// frame is cut on event-time seconds, so a frame whose samples all arrived in the range is
/// derived exactly as the gateway derived it (only its `seq` may differ).
pub fn history(
    view: &View<'_>,
    config: &Config,
    machine: &str,
    (from_at, to_at): (i64, i64),
    contents: &mut Contents,
) -> Result<(), AuditError> {
    let span = Span { from_ms: Some(from_at), to_ms: Some(to_at), machine: Some(machine.into()) };
    // The oldest record of a history that lost its beginning (to its horizon or to retention;
    // journal positions begin at 1).
    let oldest = view.read(|s| s.history_from().map(|h| h.filter(|_| s.journal_start() > 1)))?;
    let mut sink =
        Sink { partial: Vec::new(), decider: Decider::new(config).reporting(), contents };
    match export(view, &span, &mut sink) {
        // Retention trimmed the history while it was read: what was read is all there is.
        Ok(_) | Err(AuditError::Usage(_)) => {}
        Err(e) => return Err(e),
    }
    let rest = std::mem::take(&mut sink.partial);
    sink.decide(&rest);
    // Open frames are flushed as ingest time passes: far enough for every one.
    sink.decide_parsed(&Ok(TraceLine {
        at: to_at.saturating_add(86_400_000),
        arrival: Arrival::Tick,
    }));
    // A history that begins inside the range may have lost the first samples of a frame: a
    // frame that could have begun before it is not the one the gateway cut.
    if let Some(h) = oldest.filter(|&h| h > from_at) {
        contents.forget_frames_before(h.saturating_add(config.time.max_future_ms + FRAME_MS));
    }
    Ok(())
}

/// Decides history lines as they are exported, a line at a time.
struct Sink<'a> {
    partial: Vec<u8>,
    decider: Decider,
    contents: &'a mut Contents,
}

impl Sink<'_> {
    fn decide(&mut self, line: &[u8]) {
        if !line.is_empty() {
            self.decide_parsed(&parse_line(line));
        }
    }

    fn decide_parsed(&mut self, parsed: &crate::trace::parse::Verdict) {
        let mut alerts = Vec::new();
        // A line the gateway rejected is rejected again; only its events matter here.
        let _ = self.decider.line(parsed, &mut alerts);
        if let Ok(TraceLine { arrival: Arrival::Event(ev), .. }) = parsed {
            self.contents.add(ev.clone());
        }
        for o in self.decider.take_outcomes() {
            if let Outcome::Accepted { event: Some(ev), .. } = o {
                self.contents.add(ev);
            }
        }
        for (ev, _) in self.decider.take_rejected_derived() {
            self.contents.add(ev);
        }
    }
}

impl Write for Sink<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.partial.extend_from_slice(buf);
        let text = std::mem::take(&mut self.partial);
        let mut start = 0;
        while let Some(i) = text[start..].iter().position(|&b| b == b'\n') {
            self.decide(&text[start..start + i]);
            start += i + 1;
        }
        self.partial = text[start..].to_vec();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
