//! The decide stage's own ledger facts, beside the decisions: a `checkpoint` record in every
//! checkpoint's batch, and the `source_ended` records that declare sensors' tails (a trace source
//! at its end; live sensors the configuration no longer names, at a start), so that `reconcile`
//! tells a finished recording from missing data (docs/contracts.md section 11).
//!
//! Which source a sensor's events come from is learnt from the journal records' origins and
//! kept in the sensor book (`n/sensors`), in the same batch as the checkpoint: a source's end
//! declares exactly its own sensors, after the highest seq each has had accepted, and only those
//! with an event since their last declaration (a restart at a trace's end declares nothing new).

use std::collections::{BTreeMap, BTreeSet};

use crate::config::Config;
use crate::records::journal::{JournalRecord, Origin};
use crate::records::ledger::{EndedSensor, LedgerEntry, LedgerRecord};
use crate::records::sensors::SensorBook;

/// What ends a tail.
const END_OF_TRACE: &str = "end_of_trace";
const REMOVED: &str = "removed_from_configuration";

/// The stage's part in the `checkpoint` and `source_ended` records.
#[derive(Debug)]
pub(super) struct Tails {
    /// Journal positions from which records came from a source (`None`: released from
    /// quarantine, or of unknown origin), in order, since the last checkpoint.
    origins: Vec<(u64, Option<u16>)>,
    /// The highest journal position noted: records at or below it are not noted again.
    noted_through: Option<u64>,
    /// Ends to declare at the next checkpoint: a source's index and what it is, or `None` for the
    /// live sensors the configuration no longer names.
    ends: Vec<(Option<u16>, String)>,
    /// The live sensors the configuration names.
    configured: BTreeSet<(String, String)>,
    /// Rule name → `rule_version`, for the `checkpoint` record.
    rule_versions: BTreeMap<String, String>,
}

impl Tails {
    /// At a start: the live sensors of `book` that `config` no longer names are due to be
    /// declared ended.
    pub(super) fn new(config: &Config, rule_version: &str, book: &SensorBook) -> Tails {
        let configured: BTreeSet<_> = config.configured_sensors().0.into_iter().collect();
        let removed = book
            .sensors
            .iter()
            .any(|(k, a)| a.live && !is_configured(&configured, k) && unended(a).is_some());
        Tails {
            origins: Vec::new(),
            noted_through: None,
            ends: if removed { vec![(None, "configuration".into())] } else { Vec::new() },
            configured,
            rule_versions: [(config.rule.name.clone(), rule_version.to_string())].into(),
        }
    }

    /// Notes where `records` came from. Records at or below a position noted already are
    /// skipped: when the batches of two sources cross, the decide stage reads the later one's
    /// hole from the journal first and then receives the earlier batch again, and noting it
    /// twice would break the runs' order, which [`Tails::attribute`] searches; a run out of order
    /// once attributed a trace's events to the live source after it, so that a restart declared
    /// the trace's sensors `removed_from_configuration`.
    pub(super) fn note_origins(&mut self, records: &[JournalRecord]) {
        for r in records {
            if self.noted_through.is_some_and(|p| r.pos <= p) {
                continue;
            }
            self.noted_through = Some(r.pos);
            let source = r.origin.map(|o| o.source).filter(|&s| s != Origin::RELEASED);
            if self.origins.last().map(|o| o.1) != Some(source) {
                self.origins.push((r.pos, source));
            }
        }
    }

    /// Source `source` (`what`) reached its end: its tails are declared at the next checkpoint.
    pub(super) fn source_ended(&mut self, source: u16, what: String) {
        self.ends.push((Some(source), what));
    }

    pub(super) fn has_ends(&self) -> bool {
        !self.ends.is_empty()
    }

    /// Records in the book which source an accepted event came from.
    pub(super) fn attribute(&self, book: &mut SensorBook, e: &LedgerEntry, live: &BTreeSet<u16>) {
        let LedgerEntry::Accepted { machine, sensor, journal_pos, .. } = e else { return };
        let i = self.origins.partition_point(|(p, _)| p <= journal_pos);
        let Some(source) = i.checked_sub(1).and_then(|i| self.origins[i].1) else { return };
        if let Some(a) = book.sensors.get_mut(&(machine.clone(), sensor.clone())) {
            a.source = Some(source);
            a.live = live.contains(&source);
        }
    }

    /// The `source_ended` records due, at ingest time `at` after journal record `journal_pos`,
    /// folded into `book`.
    pub(super) fn declare(
        &mut self,
        book: &mut SensorBook,
        journal_pos: u64,
        at: i64,
    ) -> Vec<LedgerRecord> {
        let mut out = Vec::new();
        for (source, what) in std::mem::take(&mut self.ends) {
            let sensors: Vec<EndedSensor> = book
                .sensors
                .iter()
                .filter(|(k, a)| match source {
                    Some(s) => a.source == Some(s),
                    None => a.live && !is_configured(&self.configured, k),
                })
                .filter_map(|((machine, sensor), a)| {
                    let last_seq = unended(a)?;
                    Some(EndedSensor { machine: machine.clone(), sensor: sensor.clone(), last_seq })
                })
                .collect();
            if sensors.is_empty() {
                continue;
            }
            let reason = if source.is_some() { END_OF_TRACE } else { REMOVED };
            let entry = LedgerEntry::SourceEnded {
                source: what,
                reason: reason.into(),
                journal_pos,
                sensors,
            };
            let rec = LedgerRecord::new(at, entry);
            book.absorb(at, &rec.entry);
            out.push(rec);
        }
        out
    }

    /// The `checkpoint` record of a checkpoint through `journal_pos`, at ingest time `at`; the
    /// origins noted so far are done with.
    pub(super) fn checkpoint(
        &mut self,
        journal_pos: u64,
        records: u64,
        outbox: Option<(u64, u64)>,
        at: i64,
    ) -> LedgerRecord {
        if let Some(&last) = self.origins.last() {
            self.origins = vec![last];
        }
        let rule_versions = self.rule_versions.clone();
        LedgerRecord::new(
            at,
            LedgerEntry::Checkpoint { journal_pos, records, rule_versions, outbox },
        )
    }
}

/// Whether the configuration names sensor `k` (a bus source with several axes names `s1`, its
/// records `s1.x`, `s1.z`).
fn is_configured(configured: &BTreeSet<(String, String)>, k: &(String, String)) -> bool {
    configured.contains(k)
        || configured.iter().any(|(m, s)| {
            *m == k.0 && k.1.strip_prefix(s.as_str()).is_some_and(|axis| axis.starts_with('.'))
        })
}

/// The highest seq of a sensor with events whose tail is not declared after it yet.
fn unended(a: &crate::records::sensors::SensorActivity) -> Option<u64> {
    let seq = a.highest_seq();
    (a.events > 0 && a.ended_seq != Some(seq)).then_some(seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ledger::Acceptance;

    fn record(pos: u64, source: u16) -> JournalRecord {
        let origin = Some(Origin { source, end_offset: pos });
        JournalRecord { pos, at: 0, origin, line: Vec::new() }
    }

    fn accepted(sensor: &str, seq: u64, journal_pos: u64) -> LedgerEntry {
        LedgerEntry::Accepted {
            event_id: format!("{sensor}.{seq}"),
            machine: "m".into(),
            sensor: sensor.into(),
            seq,
            ts_ms: 0,
            how: Acceptance::Applied,
            journal_pos,
            outbox_seq: 0,
            counted: false,
            rules: Vec::new(),
            watermark_ms: None,
        }
    }

    fn tails() -> Tails {
        let config = Config::from_toml("[gateway]\nid = \"g\"\n", "test").unwrap();
        Tails::new(&config, "v1", &SensorBook::default())
    }

    /// A source's end declares its own sensors after their highest seq, once: a second end with
    /// nothing new declares nothing, a later event makes the tail due again.
    #[test]
    fn an_end_declares_the_source_s_own_sensors_once() {
        let mut t = tails();
        let mut book = SensorBook::default();
        t.note_origins(&[record(1, 0), record(2, 1), record(3, 0)]);
        for e in [accepted("a", 5, 1), accepted("b", 1, 2), accepted("a", 4, 3)] {
            book.absorb(10, &e);
            t.attribute(&mut book, &e, &BTreeSet::new());
        }
        t.source_ended(0, "trace x".into());
        assert!(t.has_ends());
        let recs = t.declare(&mut book, 3, 99);
        assert_eq!(recs.len(), 1);
        let LedgerEntry::SourceEnded { sensors, reason, journal_pos, .. } = &recs[0].entry else {
            panic!("{recs:?}")
        };
        assert_eq!((reason.as_str(), *journal_pos, recs[0].at_ms), (END_OF_TRACE, 3, 99));
        let want = EndedSensor { machine: "m".into(), sensor: "a".into(), last_seq: 5 };
        assert_eq!(sensors, &vec![want]);
        t.source_ended(0, "trace x".into());
        assert!(t.declare(&mut book, 3, 99).is_empty(), "nothing new since");
        let cp = t.checkpoint(3, 3, Some((4, 6)), 99);
        assert!(matches!(cp.entry, LedgerEntry::Checkpoint { journal_pos: 3, .. }), "{cp:?}");
        t.note_origins(&[record(4, 0)]);
        let e = accepted("a", 6, 4);
        book.absorb(11, &e);
        t.attribute(&mut book, &e, &BTreeSet::new());
        t.source_ended(0, "trace x".into());
        assert_eq!(t.declare(&mut book, 4, 100).len(), 1);
    }

    /// Batches of two sources that cross: the hole is read from the journal, then the earlier
    /// batch arrives again; its records are not noted twice, so the trace's events after the
    /// hole stay the trace's, and not the live source's (which would make a restart declare the
    /// trace's sensors removed from the configuration).
    #[test]
    fn crossed_batches_keep_each_event_with_its_own_source() {
        let mut t = tails();
        let mut book = SensorBook::default();
        let live: BTreeSet<u16> = [1].into();
        // Live records 1..=3 journaled first, trace records 4..=5 sent first; the stage reads
        // 1..=3 from the journal, decides 4..=5, then receives 1..=3 again.
        t.note_origins(&[record(1, 1), record(2, 1), record(3, 1)]);
        t.note_origins(&[record(4, 0), record(5, 0)]);
        t.note_origins(&[record(1, 1), record(2, 1), record(3, 1)]);
        let (trace, modbus) = (accepted("t", 1, 5), accepted("l", 1, 2));
        for e in [&trace, &modbus] {
            book.absorb(10, e);
            t.attribute(&mut book, e, &live);
        }
        let of = |s: &str| {
            let a = &book.sensors[&("m".to_string(), s.to_string())];
            (a.source, a.live)
        };
        assert_eq!((of("t"), of("l")), ((Some(0), false), (Some(1), true)));
    }

    /// At a start, live sensors the configuration no longer names are declared ended.
    #[test]
    fn live_sensors_removed_from_the_configuration_are_declared_at_a_start() {
        let mut book = SensorBook::default();
        for (sensor, live) in [("gone", true), ("trace", false)] {
            let e = accepted(sensor, 3, 1);
            book.absorb(10, &e);
            book.sensors.get_mut(&("m".into(), sensor.into())).unwrap().live = live;
        }
        let config = Config::from_toml("[gateway]\nid = \"g\"\n", "test").unwrap();
        let mut t = Tails::new(&config, "v1", &book);
        assert!(t.has_ends());
        let recs = t.declare(&mut book, 7, 10);
        let LedgerEntry::SourceEnded { sensors, reason, .. } = &recs[0].entry else { panic!() };
        assert_eq!(reason, REMOVED);
        assert_eq!(sensors.iter().map(|s| s.sensor.as_str()).collect::<Vec<_>>(), ["gone"]);
        assert!(!Tails::new(&config, "v1", &book).has_ends(), "declared: not again");
        let configured: BTreeSet<(String, String)> = [("m".to_string(), "s1".to_string())].into();
        let named = |s: &str| is_configured(&configured, &("m".into(), s.into()));
        assert!(named("s1") && named("s1.x") && !named("s10") && !named("s2"));
    }
}
