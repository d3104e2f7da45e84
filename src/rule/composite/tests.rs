//! The edges of docs/contracts.md section 4, "Composite rules": half-open windows, exactly `W`
//! apart, ties, merges of member incidents and of composite incidents, late amendments,
//! forgetting, snapshots.

use super::*;
use crate::event::features::MeasureUnit;
use crate::event::{ClockEvidence, Quality};
use crate::rule::alert::AlertKind;

const LATENESS: i64 = 1_000_000;

fn item(id: &str, ts: i64) -> Item {
    Arc::new(EvidenceItem {
        event_id: id.into(),
        sensor: "s0".into(),
        seq: 0,
        ts_ms: ts,
        value: 1.0,
        unit: MeasureUnit::G,
        quality: Quality::Good,
        clock: ClockEvidence::UNKNOWN,
        samples: None,
    })
}

/// A composite rule on one machine, fed by hand.
struct Run {
    spec: Spec,
    book: CompositeBook,
    out: Vec<CompositeRecord>,
    wm: i64,
    early: bool,
}

impl Run {
    fn new(spec: Spec) -> Self {
        Run { spec, book: CompositeBook::default(), out: Vec::new(), wm: i64::MIN, early: false }
    }

    fn all_of(w: i64) -> Self {
        Run::new(Spec::all_of(vec!["A".into(), "B".into()], w).unwrap())
    }

    fn sequence(w: i64) -> Self {
        Run::new(Spec::sequence("A".into(), "B".into(), w).unwrap())
    }

    fn ctx<'a>(&self, caused_by: Option<&'a str>) -> Ctx<'a> {
        Ctx {
            gateway: "gw",
            rule: "combo",
            machine: "m",
            early: self.early,
            wm: self.wm,
            now: 7,
            caused_by,
        }
    }

    /// Member `rule`'s incident `id` is now `[onset, end)`, caused by event `ev`.
    fn hold(&mut self, rule: &str, id: &str, (onset, end): (i64, i64), ev: &str) -> &mut Self {
        let inc = MemberIncident {
            alert_id: id.into(),
            onset,
            end,
            evidence: vec![item(&format!("{id}@{onset}"), onset)],
        };
        let ctx = self.ctx(Some(ev));
        self.book.apply(&self.spec, rule, [inc], &ctx, &mut self.out).unwrap();
        self
    }

    fn watermark(&mut self, wm: i64) -> &mut Self {
        self.wm = wm;
        let ctx = self.ctx(None);
        self.book.advance(&self.spec, &ctx, LATENESS, &mut self.out);
        self
    }

    fn spans(&self) -> Vec<(i64, i64)> {
        self.book.incidents().map(|i| (i.onset, i.end)).collect()
    }

    /// The cited member alerts of each incident.
    fn cited(&self) -> Vec<Vec<&str>> {
        self.book
            .incidents()
            .map(|i| i.cited.iter().map(|c| c.alert_id.as_str()).collect())
            .collect()
    }

    fn take(&mut self) -> Vec<CompositeRecord> {
        std::mem::take(&mut self.out)
    }
}

fn kinds(records: &[CompositeRecord]) -> Vec<(&str, AlertKind)> {
    records.iter().map(|r| (r.alert_id.as_str(), r.kind)).collect()
}

#[test]
fn all_of_holds_while_every_member_held_within_the_half_open_window() {
    // A ends at 10: it has held within (τ - 100, τ] up to τ = 109, not at 110.
    let mut r = Run::all_of(100);
    r.hold("A", "a1", (0, 10), "e1").hold("B", "b1", (109, 120), "e2");
    assert_eq!(r.spans(), [(109, 110)]);
    assert_eq!(r.cited(), [["a1", "b1"]]);

    // Exactly W after A's end: no incident.
    let mut r = Run::all_of(100);
    r.hold("A", "a1", (0, 10), "e1").hold("B", "b1", (110, 120), "e2");
    assert_eq!(r.spans(), []);

    // B before A: the same window, the other way round; the end is B's end + W.
    let mut r = Run::all_of(100);
    r.hold("B", "b1", (0, 10), "e1").hold("A", "a1", (50, 60), "e2");
    assert_eq!(r.spans(), [(50, 110)]);
    assert_eq!(r.cited(), [["a1", "b1"]]);
}

#[test]
fn all_of_needs_every_member_and_a_tie_counts() {
    let mut r = Run::new(Spec::all_of(vec!["A".into(), "B".into(), "C".into()], 50).unwrap());
    r.hold("A", "a1", (0, 10), "e1").hold("B", "b1", (0, 5), "e2");
    assert_eq!(r.spans(), [], "C has not held");
    r.hold("C", "c1", (0, 1), "e3");
    assert_eq!(r.spans(), [(0, 51)]);
    assert_eq!(r.cited(), [["a1", "b1", "c1"]]);
}

#[test]
fn sequence_from_b_s_onset_when_a_held_within_the_window_before() {
    let mut r = Run::sequence(100);
    r.hold("A", "a1", (0, 10), "e1").hold("B", "b1", (109, 300), "e2");
    assert_eq!(r.spans(), [(109, 300)], "ends with B's incident");
    assert_eq!(r.cited(), [["a1", "b1"]]);

    // B begins exactly W after A's end: A has not held within (110 - W, 110].
    let mut r = Run::sequence(100);
    r.hold("A", "a1", (0, 10), "e1").hold("B", "b1", (110, 300), "e2");
    assert_eq!(r.spans(), []);
    // A again later while B still holds: the sequence from that onset of A.
    r.hold("A", "a2", (200, 210), "e3");
    assert_eq!(r.spans(), [(200, 300)]);
    assert_eq!(r.cited(), [["a2", "b1"]]);
}

#[test]
fn sequence_ties_count_and_b_before_a_does_not() {
    let mut r = Run::sequence(100);
    r.hold("A", "a1", (50, 60), "e1").hold("B", "b1", (50, 55), "e2");
    assert_eq!(r.spans(), [(50, 55)], "equal onsets");

    let mut r = Run::sequence(100);
    r.hold("B", "b1", (0, 50), "e1").hold("A", "a1", (50, 60), "e2");
    assert_eq!(r.spans(), [], "B ended as A began");
    r.hold("B", "b1", (0, 51), "e3");
    assert_eq!(r.spans(), [(50, 51)], "B still holds at A's onset");
}

#[test]
fn sequence_cites_every_a_of_the_window_the_latest_last() {
    let mut r = Run::sequence(100);
    r.hold("A", "a1", (0, 10), "e1").hold("A", "a2", (40, 45), "e2");
    r.hold("A", "a0", (-200, -150), "e3").hold("B", "b1", (60, 70), "e4");
    assert_eq!(r.spans(), [(60, 70)]);
    assert_eq!(r.cited(), [["a1", "a2", "b1"]]);
}

#[test]
fn a_member_merge_amends_the_composite_with_the_survivor_and_the_cause() {
    let mut r = Run::all_of(100);
    r.hold("A", "a1", (0, 10), "e1").hold("A", "a2", (20, 30), "e2");
    r.hold("B", "b1", (25, 40), "e3").watermark(50);
    let open = r.take();
    assert_eq!(kinds(&open), [("gw/combo/m/25", AlertKind::Open)]);
    assert_eq!(r.cited(), [["a1", "a2", "b1"]]);

    // A late event of A joins a1 and a2 into a1 = [0, 30): the citation names the survivor.
    r.hold("A", "a1", (0, 30), "late-1");
    let amend = r.take();
    assert_eq!(kinds(&amend), [("gw/combo/m/25", AlertKind::Amend)]);
    assert_eq!(amend[0].caused_by.as_deref(), Some("late-1"));
    assert_eq!(amend[0].revision, 1);
    assert_eq!(r.cited(), [["a1", "b1"]]);
    assert_eq!(r.spans(), [(25, 130)]);
}

#[test]
fn two_composite_incidents_merge_the_earliest_published_survives() {
    let mut r = Run::all_of(10);
    r.hold("A", "a1", (0, 100), "e1");
    r.hold("B", "b1", (0, 5), "e2").hold("B", "b2", (30, 40), "e3");
    assert_eq!(r.spans(), [(0, 15), (30, 50)]);
    r.watermark(60);
    let opened: Vec<_> = r.take().into_iter().map(|x| (x.alert_id, x.kind)).collect();
    assert_eq!(opened.len(), 4, "two opens, two closes: {opened:?}");

    // B's incidents merge into b1 = [0, 40): one composite incident; gw/combo/m/30 goes.
    r.hold("B", "b1", (0, 40), "late-2");
    let recs = r.take();
    assert_eq!(
        kinds(&recs),
        [("gw/combo/m/0", AlertKind::Amend), ("gw/combo/m/30", AlertKind::Supersede)]
    );
    assert_eq!(recs[1].superseded_by.as_deref(), Some("gw/combo/m/0"));
    assert_eq!((recs[1].onset_ms, recs[1].end_ms), (0, Some(50)), "the merged state");
    assert_eq!(recs[1].revision, 2);
    assert_eq!(r.spans(), [(0, 50)]);
}

#[test]
fn a_late_extension_past_the_watermark_reopens_the_end_then_closes_again() {
    let mut r = Run::all_of(10);
    r.hold("A", "a1", (0, 20), "e1").hold("B", "b1", (5, 8), "e2").watermark(30);
    assert_eq!(
        kinds(&r.take()),
        [("gw/combo/m/5", AlertKind::Open), ("gw/combo/m/5", AlertKind::Close)]
    );
    r.hold("B", "b1", (5, 25), "late-3");
    let amend = r.take();
    assert_eq!(kinds(&amend), [("gw/combo/m/5", AlertKind::Amend)]);
    assert_eq!(amend[0].end_ms, None, "its end (30) is ahead of the watermark again");
    r.watermark(31);
    let close = r.take();
    assert_eq!(kinds(&close), [("gw/combo/m/5", AlertKind::Close)]);
    assert_eq!(close[0].end_ms, Some(30));
}

#[test]
fn on_time_growth_waits_for_the_close_and_repeats_change_nothing() {
    let mut r = Run::sequence(10);
    r.hold("A", "a1", (0, 5), "e1").hold("B", "b1", (8, 20), "e2").watermark(10);
    assert_eq!(kinds(&r.take()), [("gw/combo/m/8", AlertKind::Open)]);
    r.hold("B", "b1", (8, 40), "e3").hold("B", "b1", (8, 40), "e3").hold("A", "a1", (0, 5), "e4");
    assert_eq!(r.take(), [], "an open incident's end waits for the close");
    r.watermark(41);
    let close = r.take();
    assert_eq!(kinds(&close), [("gw/combo/m/8", AlertKind::Close)]);
    assert_eq!(close[0].end_ms, Some(40));
}

#[test]
fn early_opens_provisional_then_confirms() {
    let mut r = Run::all_of(10);
    r.early = true;
    r.watermark(0);
    r.hold("A", "a1", (5, 9), "e1").hold("B", "b1", (6, 9), "e2");
    let open = r.take();
    assert_eq!(kinds(&open), [("gw/combo/m/6", AlertKind::Open)]);
    assert!(open[0].provisional);
    r.watermark(6);
    let amend = r.take();
    assert_eq!(kinds(&amend), [("gw/combo/m/6", AlertKind::Amend)]);
    assert!(!amend[0].provisional);
}

#[test]
fn what_allowed_lateness_cannot_reach_is_forgotten() {
    let mut r = Run::all_of(10);
    r.hold("A", "a1", (0, 5), "e1").hold("B", "b1", (0, 5), "e2");
    r.hold("A", "a2", (3000, 3005), "e3");
    r.watermark(LATENESS + 1000);
    assert_eq!(r.spans(), []);
    assert_eq!(r.book.member_len(), 1, "only a2 can still reach the composite");
    // A state of a forgotten incident changes nothing.
    r.take();
    r.hold("B", "b1", (0, 6), "e4");
    assert_eq!((r.spans(), r.take()), (vec![], vec![]));
    r.book.check().unwrap();
}

#[test]
fn a_snapshot_restores_the_same_book() {
    let mut r = Run::sequence(100);
    r.hold("A", "a1", (0, 10), "e1").hold("B", "b1", (50, 300), "e2").watermark(60);
    let json = serde_json::to_string(&r.book).unwrap();
    let back: CompositeBook = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r.book);
    back.check().unwrap();
    let mut damaged: serde_json::Value = serde_json::from_str(&json).unwrap();
    damaged["incidents"]["50"]["end"] = 40.into();
    let damaged: CompositeBook = serde_json::from_value(damaged).unwrap();
    assert!(damaged.check().unwrap_err().contains("gw/combo/m/50"));
}

#[test]
fn a_record_lists_the_members_evidence_once_each_in_time_order() {
    let mut r = Run::all_of(100);
    r.hold("B", "b1", (3, 9), "e1").hold("A", "a1", (1, 9), "e2").watermark(5);
    let open = r.take();
    let ids: Vec<String> = open[0].evidence().iter().map(|e| e.event_id.to_string()).collect();
    assert_eq!(ids, ["a1@1", "b1@3"]);
    let rec = open[0].to_alert_record("v1", Arc::default());
    assert_eq!((rec.alert_id.as_str(), rec.evidence.len()), ("gw/combo/m/3", 2));
    assert_eq!(open[0].members.iter().map(|m| m.rule.as_str()).collect::<Vec<_>>(), ["A", "B"]);
}

#[test]
fn bad_rules_and_strangers_are_errors_naming_them() {
    assert!(Spec::all_of(vec![], 10).unwrap_err().contains("names no rule"));
    let twice = Spec::all_of(vec!["A".into(), "A".into()], 10).unwrap_err();
    assert!(twice.contains("\"A\" is named twice"), "{twice}");
    assert!(Spec::sequence("A".into(), "A".into(), 10).is_err());
    assert!(Spec::sequence("A".into(), "B".into(), 0).unwrap_err().contains("positive"));
    let mut r = Run::all_of(10);
    let ctx = r.ctx(None);
    let err = r.book.apply(&r.spec, "Z", [], &ctx, &mut r.out).unwrap_err();
    assert!(err.contains("\"Z\"") && err.contains("combo"), "{err}");
}
