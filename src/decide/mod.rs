//! The decide room: journal records in, decisions out, and the thread that runs it in the daemon.
//!
//! The decide path reads one way — stage → decider → outputs:
//!
//! - [`input`]: what a source hands the decide stage ([`input::DecideBatch`]: journal records
//!   just committed, and the parses of their lines when the sender parsed them). Pure.
//! - the decider (`decider.rs`, [`Decider`]): parsed trace lines, one at a time, through feature
//!   extraction (`crate::stamp`) and the rule (`crate::rule`); snapshot and restore. Pure: ingest
//!   time comes from each line's `at`, no clock, no I/O.
//! - [`outputs`]: what one record's decisions ([`Decided`]) become — outbox, ledger, quarantine
//!   and alert archive records — gathered until the next checkpoint. Pure: no store (where the
//!   archive records go is the shell's business), no clock.
//! - [`decide`]: one journal record through the decider and into the outputs, inside the decide
//!   stage's tracing span (`decide`, with the record's journal position and its event's ID).
//! - [`stage`], **the shell**: the decide stage's thread (sled and the decider are blocking work),
//!   which consumes journal records in position order, checkpoints decider state, outbox,
//!   ledger, quarantine and archive in one sled batch, commits it without the store's lock on a
//!   thread of its own (`stage/checkpoint_commit.rs`), wakes the forwarder and truncates the
//!   journal. The only part of the room that touches the store, the clock or the telemetry.
//!
//! `replay` runs the decider alone over a trace; `linegate run` runs the stage.

mod decider;
pub mod input;
pub mod outputs;
pub mod stage;

pub use decider::{kind_name, machine_features, Decided, Decider, LineError, Outcome};

use crate::records::journal::JournalRecord;
use input::ParsedLine;
use outputs::Pending;

/// Decides journal record `rec` with `decider` (which must be reporting) and gathers what it
/// decided into `pending`; `parsed` is the line's parse when the sender parsed it. The decide
/// stage's span covers both: the record's journal position, and the event ID it carried once
/// known (each event derived from raw samples is reported inside it).
pub fn decide(
    decider: &mut Decider,
    pending: &mut Pending,
    rec: &JournalRecord,
    parsed: Option<ParsedLine>,
) {
    let span =
        tracing::trace_span!("decide", journal_pos = rec.pos, event_id = tracing::field::Empty);
    let _entered = span.enter();
    let decided = decider.record(rec, parsed);
    pending.add(rec, decided);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::telemetry::captured::trace_of;

    /// The decide stage's span carries the record's journal position and the event's ID.
    #[test]
    fn the_decide_span_names_the_journal_position_and_the_event() {
        let line = br#"{"at": 1700000000300, "kind": "event", "event": {"event_id": "press-1.s1.1", "machine": "press-1", "sensor": "s1", "seq": 1, "ts_ms": 1700000000000, "clock": {"state": "synced"}, "metric": "accel_rms", "value": 0.2, "unit": "g", "schema": 1, "quality": "good"}}"#;
        let rec =
            JournalRecord { pos: 7, at: 1_700_000_000_300, origin: None, line: line.to_vec() };
        let mut decider = Decider::new(&Config::for_replay_defaults("gw")).reporting();
        let mut pending = Pending::default();
        let ((), text) = trace_of(|| decide(&mut decider, &mut pending, &rec, None));
        assert!(text.contains("decide{journal_pos=7 event_id=\"press-1.s1.1\"}"), "{text}");
        assert_eq!(pending.records, 1);
    }

    /// With trends kept, every accepted event's measurement lands in its rule's series, in the
    /// rule's unit (two rules: `accel_rms` in m/s2, `velocity_rms` that these events lack); a
    /// duplicate adds nothing.
    #[test]
    fn accepted_events_feed_each_rule_s_trend_in_its_unit() {
        let toml = "[gateway]\nid = \"gw\"\n[[rule]]\nname = \"a\"\nunit = \"m/s2\"\n\
                    threshold = 4.9\n[[rule]]\nname = \"v\"\nmetric = \"velocity_rms\"\n\
                    threshold = 4.5\n";
        let config = Config::from_toml(toml, "t.toml").unwrap();
        let mut decider = Decider::new(&config).reporting().keeping_trends(240);
        let mut pending = Pending::default();
        let t = 1_700_000_000_000i64;
        for (pos, (seq, value)) in [(1, 0.1), (2, 0.3), (2, 0.3)].into_iter().enumerate() {
            let line = format!(
                r#"{{"at": {at}, "kind": "event", "event": {{"event_id": "press-1.s1.{seq}", "machine": "press-1", "sensor": "s1", "seq": {seq}, "ts_ms": {ts}, "clock": {{"state": "synced"}}, "metric": "accel_rms", "value": {value}, "unit": "g", "schema": 1, "quality": "good"}}}}"#,
                at = t + seq * 1000 + 300,
                ts = t + seq * 1000,
            );
            let rec = JournalRecord { pos: pos as u64 + 1, at: t, origin: None, line: line.into() };
            decide(&mut decider, &mut pending, &rec, None);
        }
        let book = decider.trends().unwrap();
        let m = book.machine("press-1").unwrap();
        let kept: Vec<(f64, f64)> = m.series[0].buckets().map(|b| (b.min, b.max)).collect();
        assert_eq!(kept, vec![(0.1 * 9.80665, 0.3 * 9.80665)]);
        assert!(m.series.get(1).is_none_or(|s| s.is_empty()), "no velocity in these events");
        assert_eq!(m.newest_ms, t + 2000);
        assert!(Decider::new(&config).trends().is_none(), "kept only when asked");
    }

    /// The stamp stage's spans: a block of raw samples cut into frames (the event of the frame it
    /// completed), and, a minute of ingest time later, the stalled sensor's open frame flushed.
    #[test]
    fn the_stamp_span_names_the_block_and_the_events_derived() {
        let t = 1_700_000_000_000i64;
        let samples = format!(
            r#"{{"at": {t}, "kind": "samples", "machine": "m", "sensor": "s", "t0_ms": {t}, "rate_hz": 4, "unit": "g", "data": [0.1, 0.2, 0.3, 0.4, 0.5]}}"#
        );
        let tick = format!(r#"{{"at": {}, "kind": "tick"}}"#, t + 60_000);
        let mut decider = Decider::new(&Config::for_replay_defaults("gw")).reporting();
        let mut pending = Pending::default();
        let ((), text) = trace_of(|| {
            for (pos, line) in [(1, samples), (2, tick)] {
                let rec = JournalRecord { pos, at: t, origin: None, line: line.into_bytes() };
                decide(&mut decider, &mut pending, &rec, None);
            }
        });
        let block = format!("stamp{{machine=m sensor=s t0_ms={t} samples=5 derived=1}}");
        assert!(text.contains(&block), "{text}");
        assert!(text.contains("stamp{flush_at_ms="), "the open frame flushed: {text}");
    }
}
