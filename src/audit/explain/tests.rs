use std::collections::HashMap;

use serde_json::{json, Value};

use super::reason::{Merged, Named};
use super::window::{Accepted, Contents, Status};
use super::*;
use crate::event::Event;
use crate::records::ledger::Acceptance;

const T: i64 = 1_700_000_000_000;

/// press-7: ISO group 2 flexible, a velocity rule at zone C (4.5 mm/s) counting synced and holdover
/// clocks only.
fn config() -> Config {
    Config::from_toml(
        r#"
[gateway]
id = "gw"
[rule]
name = "severity"
metric = "velocity_rms"
threshold = "zone-C"
count_clock = ["synced", "holdover"]
[machines.press-7]
line = "L3"
iso_group = 2
foundation = "flexible"
rpm = 1797
bearing = { bpfo = 3.5848, bpfi = 5.4152, bsf = 2.357, ftf = 0.3983 }
envelope_band = ["2kHz", "5kHz"]
"#,
        "test.toml",
    )
    .unwrap()
}

fn event(sensor: &str, seq: u64, t_s: i64, value: f64, quality: &str, clock: &str) -> Event {
    serde_json::from_value(json!({
        "event_id": format!("press-7.{sensor}.{seq}"), "machine": "press-7", "sensor": sensor,
        "seq": seq, "ts_ms": T + t_s * 1000, "clock": {"state": clock, "err_ms": 2},
        "metric": "velocity_rms", "value": value, "unit": "mm/s", "schema": 1, "quality": quality
    }))
    .unwrap()
}

fn accepted(ev: &Event, how: Acceptance, counted: bool) -> Accepted {
    Accepted {
        event_id: ev.event_id.clone(),
        sensor: ev.sensor.clone(),
        seq: ev.seq,
        ts_ms: ev.ts_ms,
        how,
        counted,
        at_ms: ev.ts_ms + 200,
    }
}

fn alert(
    revision: u32,
    kind: &str,
    onset_s: i64,
    evidence: &[&Event],
    extra: Value,
) -> AlertRecord {
    let mut v = json!({
        "alert_id": "gw/severity/press-7/1", "revision": revision, "kind": kind,
        "machine": "press-7", "rule": "severity", "rule_version": "",
        "onset_ms": T + onset_s * 1000, "end_ms": null,
        "evidence": evidence.iter().map(|e| serde_json::to_value(crate::rule::alert::EvidenceItem::of(e)).unwrap()).collect::<Vec<_>>(),
        "also": [], "superseded_by": null, "caused_by": null, "watermark_ms": T + onset_s * 1000 + 5000,
        "decided_at_ms": T + onset_s * 1000 + 10_200, "provisional": false
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    let mut a: AlertRecord = serde_json::from_value(v).unwrap();
    a.asset = std::sync::Arc::new(config().machines["press-7"].asset_tags());
    a
}

/// The window of an open revision over one event of each kind: counted, below, bad quality, a
/// stepped clock, too late, late and counted, one without the measurement, one whose content
/// the history no longer holds.
struct Case {
    events: Vec<Event>,
    accepted: Vec<Accepted>,
    revisions: Vec<AlertRecord>,
}

fn case() -> Case {
    let e = |s, q, t, v, qu, c| event(s, q, t, v, qu, c);
    let events = vec![
        e("s1", 1, 10, 4.6234, "good", "synced"),
        e("s1", 2, 20, 2.0, "good", "synced"),
        e("s1", 3, 30, 5.0, "bad", "synced"),
        e("s1", 4, 40, 5.0, "good", "stepped"),
        e("s2", 1, 45, 6.0, "good", "synced"),
        e("s1", 5, 50, 4.4999, "good", "synced"),
        e("s2", 2, 55, 4.8, "good", "synced"),
        e("s1", 6, 60, 4.7, "good", "synced"),
        e("s1", 7, 70, 0.9, "good", "synced"),
    ];
    let mut no_velocity = e("s3", 1, 35, 0.7, "good", "synced");
    no_velocity.metric = crate::event::Metric::AccelRms;
    no_velocity.unit = crate::event::Unit::G;
    let a = |i: usize, how, counted| accepted(&events[i], how, counted);
    let mut list = vec![
        a(0, Acceptance::Applied, true),
        a(1, Acceptance::Applied, false),
        a(2, Acceptance::Applied, false),
        a(3, Acceptance::Applied, false),
        a(4, Acceptance::TooLate, false),
        a(5, Acceptance::Applied, false),
        a(6, Acceptance::LateApplied, true),
        a(7, Acceptance::Applied, true),
        a(8, Acceptance::Applied, false),
        accepted(&no_velocity, Acceptance::Applied, false),
    ];
    list.reverse();
    let evidence = [&events[0], &events[6], &events[7]];
    let open = alert(0, "open", 60, &evidence, json!({"caused_by": "press-7.s1.7"}));
    let mut events = events;
    events.push(no_velocity);
    Case { events, accepted: list, revisions: vec![open] }
}

fn names(accepted: &[Accepted]) -> HashMap<String, Named> {
    accepted
        .iter()
        .map(|a| {
            let n = Named { sensor: a.sensor.clone(), seq: a.seq, ts_ms: a.ts_ms, how: a.how };
            (a.event_id.clone(), n)
        })
        .collect()
}

fn explained(c: &Case, history: &[usize], merged: &[Merged]) -> Explanation {
    let config = config();
    let mut contents = Contents::default();
    for &i in history {
        contents.add(c.events[i].clone());
    }
    let names = names(&c.accepted);
    let input = Input {
        alert_id: "gw/severity/press-7/1",
        revisions: c.revisions.clone(),
        ledger: &[],
        rule: rule::rule_for(&config, "severity", "press-7"),
        accepted: &c.accepted,
        names: &names,
        contents,
        merged,
        composite: None,
    };
    assemble(input).unwrap()
}

#[test]
fn every_event_of_the_window_is_marked_with_what_the_rule_made_of_it() {
    let c = case();
    // The history holds all but s1#7 (after the onset).
    let x = explained(&c, &[0, 1, 2, 3, 4, 5, 6, 7, 9], &[]);
    let got: Vec<(String, Status, Option<&str>, bool)> = x
        .window
        .events
        .iter()
        .map(|e| (format!("{}#{}", e.sensor, e.seq), e.status, e.why.as_deref(), e.after_onset))
        .collect();
    let want = [
        ("s1#1", Status::Counted, None, false),
        ("s1#2", Status::BelowThreshold, None, false),
        ("s1#3", Status::NotCounted, Some("quality bad"), false),
        ("s3#1", Status::NotCounted, Some("no velocity_rms"), false),
        ("s1#4", Status::NotCounted, Some("clock stepped"), false),
        ("s2#1", Status::TooLate, None, false),
        ("s1#5", Status::BelowThreshold, None, false),
        ("s2#2", Status::Counted, None, false),
        ("s1#6", Status::Counted, None, false),
        ("s1#7", Status::Unknown, Some("not in the history"), true),
    ];
    let want: Vec<(String, Status, Option<&str>, bool)> =
        want.iter().map(|(n, s, w, a)| (n.to_string(), *s, *w, *a)).collect();
    assert_eq!(got, want);
    assert!(x.window.events[7].late, "s2#2 was applied late");
    assert_eq!(x.window.events[0].zone, Some("C"), "4.62 mm/s is zone C for group 2 flexible");
    assert_eq!(x.window.events[1].zone, Some("A"));
    assert_eq!((x.window.from_ms, x.window.onset_ms), (T - 60_000, T + 60_000));
}

#[test]
fn the_window_in_text_for_a_maintenance_engineer() {
    let c = case();
    let x = explained(&c, &[0, 1, 2, 3, 4, 5, 6, 7, 9], &[]);
    let mut out = Vec::new();
    text::write(&x, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let version = crate::config::rule_version::rule_version(&config());
    let want = format!(
        "\
alert gw/severity/press-7/1 on press-7 (1 revision(s))
  rule severity (version {version}): velocity_rms ≥ 4.5 mm/s (zone C, group 2 flexible), 3 events within 2 min
  counts quality good, uncertain; clock synced, holdover
  asset: line L3, iso_group 2, foundation flexible
  incident: onset 2023-11-14T22:14:20.000Z, still open
window (2023-11-14T22:12:20.000Z, 2023-11-14T22:14:20.000Z], onset − 2 min: 9 event(s) of press-7; in the incident after the onset: 1
  2023-11-14T22:13:30.000Z  s1#1  4.62 mm/s, zone C    counted
  2023-11-14T22:13:40.000Z  s1#2  2.00 mm/s, zone A    below threshold
  2023-11-14T22:13:50.000Z  s1#3  5.00 mm/s, zone C    not counted: quality bad
  2023-11-14T22:13:55.000Z  s3#1  0.700 g              not counted: no velocity_rms
  2023-11-14T22:14:00.000Z  s1#4  5.00 mm/s, zone C    not counted: clock stepped
  2023-11-14T22:14:05.000Z  s2#1  6.00 mm/s, zone C    too late: accepted, never applied
  2023-11-14T22:14:10.000Z  s1#5  4.4999 mm/s, zone B  below threshold
  2023-11-14T22:14:15.000Z  s2#2  4.80 mm/s, zone C    counted (late)
  2023-11-14T22:14:20.000Z  s1#6  4.70 mm/s, zone C    counted
  -- onset 2023-11-14T22:14:20.000Z --
  2023-11-14T22:14:30.000Z  s1#7  ?                    not counted: not in the history
revisions
  revision 0 open: decided at 2023-11-14T22:14:30.200Z, watermark 2023-11-14T22:14:25.000Z: \
3 events ≥ 4.5 mm/s (zone C, group 2 flexible) within 2 min on press-7: \
s1#1 at 2023-11-14T22:13:30.000Z, s2#2 at 2023-11-14T22:14:15.000Z, s1#6 at 2023-11-14T22:14:20.000Z \
→ open (the watermark reached the onset)
transitions
"
    );
    assert_eq!(text, want, "\n{text}");
}

#[test]
fn json_carries_the_same_content_with_times_as_integer_ms() {
    let c = case();
    let x = explained(&c, &[0, 1, 2, 3, 4, 5, 6, 7, 9], &[]);
    let v = serde_json::to_value(&x).unwrap();
    assert_eq!(v["rule"]["name"], "severity");
    assert_eq!(v["rule"]["metric"], "velocity_rms");
    assert_eq!(v["rule"]["unit"], "mm/s");
    assert_eq!(v["rule"]["threshold"], 4.5);
    assert_eq!(v["rule"]["threshold_written"], "zone-C");
    assert_eq!(v["rule"]["zone"], json!({"zone": "C", "class": "group 2 flexible"}));
    assert_eq!(v["rule"]["window_ms"], 120_000);
    assert_eq!(v["rule"]["count"], 3);
    assert_eq!(v["window"]["from_ms"], T - 60_000);
    assert_eq!(v["window"]["onset_ms"], T + 60_000);
    let events = v["window"]["events"].as_array().unwrap();
    assert_eq!(events.len(), 10);
    assert_eq!(events[0]["status"], "counted");
    assert_eq!(events[0]["value"], 4.6234, "full precision in JSON");
    assert_eq!(events[0]["ts_ms"], T + 10_000);
    assert_eq!(events[2]["status"], "not_counted");
    assert_eq!(events[2]["why"], "quality bad");
    assert_eq!(events[5]["status"], "too_late");
    assert_eq!(events[1]["status"], "below_threshold");
    let r0 = &v["revisions"][0];
    assert_eq!(r0["kind"], "open", "a revision is the alert record itself");
    assert_eq!(r0["watermark_ms"], T + 65_000);
    assert!(r0["reason"].as_str().unwrap().starts_with("3 events ≥ 4.5 mm/s"), "{r0}");
}

#[test]
fn an_envelope_rule_names_the_defect_it_points_at() {
    let mut config = config();
    config.rule.metric = crate::event::features::Feature::EnvBpfi;
    config.rule.unit = crate::event::features::MeasureUnit::One;
    config.rule.threshold = crate::config::Threshold::Value(3.0);
    let r = rule::rule_for(&config, "severity", "press-7").unwrap();
    let d = r.line.defect.as_ref().unwrap();
    assert_eq!(d.text(), "inner race: 5.415 × 29.95 Hz = 162.2 Hz");
    assert_eq!(r.line.threshold_text(), "3");
    assert!(rule::rule_for(&config, "severity", "mill-9").unwrap().line.defect.is_none());
    assert!(rule::rule_for(&config, "another", "press-7").is_none(), "looked up by name");
}

#[test]
fn a_zone_that_does_not_resolve_is_said_so() {
    let r = rule::rule_for(&config(), "severity", "mill-9").unwrap();
    assert_eq!(r.line.threshold, None);
    assert!(r.line.threshold_text().starts_with("never reached (zone-C does not resolve"));
}

#[test]
fn each_revision_has_one_sentence_of_reason() {
    let c = case();
    let ev = &c.events;
    let open = c.revisions[0].clone();
    let late = event("s2", 3, 5, 5.5, "good", "synced");
    let amend = alert(
        1,
        "amend",
        60,
        &[&late, &ev[0], &ev[6], &ev[7]],
        json!({"caused_by": "press-7.s2.3", "onset_ms": T + 60_000, "also_count": 2, "also": ["a", "b"]}),
    );
    let close = alert(
        2,
        "close",
        60,
        &[&late, &ev[0], &ev[6], &ev[7]],
        json!({"end_ms": T + 130_000, "caused_by": null}),
    );
    let mut accepted = c.accepted.clone();
    accepted.push(accepted_of_late(&late));
    let names = names(&accepted);
    let merged = [Merged {
        alert_id: "gw/severity/press-7/2".into(),
        caused_by: Some("press-7.s2.3".into()),
        decided_at_ms: amend.decided_at_ms,
    }];
    let cfg = config();
    let rule = rule::rule_for(&cfg, "severity", "press-7").unwrap();
    let cx = reason::Ctx { rule: Some(&rule.line), names: &names, merged: &merged };
    let r = reason::reasons(&[open, amend, close], &cx);
    assert_eq!(
        r[1],
        "late event s2#3 at 2023-11-14T22:13:25.000Z: evidence now 4 events, with s2#3 at \
         2023-11-14T22:13:25.000Z; 2 further events in the incident (were 0); merged with \
         gw/severity/press-7/2 (superseded; this alert carries on) → amend"
    );
    assert_eq!(
        r[2],
        "condition false from 2023-11-14T22:15:30.000Z: fewer than 3 events ≥ 4.5 mm/s (zone C, \
         group 2 flexible) within 2 min up to it; the watermark passed it → close"
    );
    let mut sup = c.revisions[0].clone();
    sup.kind = crate::rule::alert::AlertKind::Supersede;
    sup.superseded_by = Some("gw/severity/press-7/0".into());
    sup.caused_by = Some("press-7.s2.3".into());
    assert_eq!(
        reason::reasons(&[sup], &cx)[0],
        "late event s2#3 at 2023-11-14T22:13:25.000Z joined this incident and \
         gw/severity/press-7/0's into one: merged into gw/severity/press-7/0, which carries it on \
         → supersede"
    );
    let mut early = c.revisions[0].clone();
    early.provisional = true;
    let early = reason::reasons(
        &[early.clone(), {
            early.provisional = false;
            early.kind = crate::rule::alert::AlertKind::Amend;
            early
        }],
        &cx,
    );
    assert!(early[0].ends_with("→ open early, provisional until the watermark reaches the onset"));
    assert!(early[1].contains("the watermark reached the onset: confirmed"), "{}", early[1]);
}

fn accepted_of_late(ev: &Event) -> Accepted {
    accepted(ev, Acceptance::LateApplied, true)
}

#[test]
fn gathers_the_transitions_of_the_alert_and_its_events_only() {
    use crate::records::ledger::LedgerEntry;
    let a = |e| LedgerRecord::new(1, e);
    let acc = |id: &str, outbox_seq| LedgerEntry::Accepted {
        event_id: id.into(),
        machine: "press-7".into(),
        sensor: "s1".into(),
        seq: 1,
        ts_ms: 5,
        how: Acceptance::Applied,
        journal_pos: 1,
        outbox_seq,
        counted: true,
        rules: Vec::new(),
        watermark_ms: None,
    };
    let ledger: Vec<(u64, LedgerRecord)> = [
        a(acc("press-7.s1.1", 1)),
        a(acc("other", 2)),
        a(acc("press-7.s1.6", 3)),
        a(LedgerEntry::Alert {
            alert_id: "gw/severity/press-7/1".into(),
            revision: 0,
            alert_kind: "open".into(),
            machine: "press-7".into(),
            caused_by: Some("press-7.s1.6".into()),
            outbox_seq: 4,
        }),
        a(LedgerEntry::Published { outbox_seqs: vec![2] }),
        a(LedgerEntry::Acknowledged { outbox_seqs: vec![3, 4] }),
        a(LedgerEntry::Duplicate { event_id: "press-7.s1.1".into(), journal_pos: 9 }),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, r)| (i as u64 + 1, r))
    .collect();
    let c = case();
    let seqs: Vec<u64> = transitions("gw/severity/press-7/1", &c.revisions, &ledger)
        .iter()
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(seqs, vec![1, 3, 4, 6, 7]);
}

#[test]
fn a_long_window_and_incident_are_listed_in_part_and_say_so() {
    let mut evs = Vec::new();
    for i in 0..700 {
        evs.push(event("s1", i + 1, i as i64 / 10, 1.0, "good", "synced"));
    }
    let accepted: Vec<Accepted> =
        evs.iter().map(|e| accepted(e, Acceptance::Applied, false)).collect();
    let open = alert(0, "open", 60, &[], json!({}));
    let (list, before, after) =
        window::listed(&open, rule::rule_for(&config(), "severity", "press-7").as_ref(), &accepted);
    assert_eq!(list.len(), window::WINDOW_MAX + window::INCIDENT_MAX);
    // Ten events a second from T: 610 up to the onset (T + 60 s), 90 after it.
    assert_eq!(before, 610 - window::WINDOW_MAX);
    assert_eq!(after, 90 - window::INCIDENT_MAX);
    assert!(list.first().unwrap().0.ts_ms > T + 10_000, "the latest of the window are kept");
}

#[test]
fn frames_that_may_have_lost_samples_to_retention_are_forgotten() {
    let mut contents = Contents::default();
    let mut frame = event("s1", 1, 10, 1.0, "good", "synced");
    frame.samples =
        Some(crate::event::SampleRef { block_seq: 1, from_ms: T + 9000, to_ms: T + 10_000 });
    let mut later = frame.clone();
    (later.event_id, later.seq, later.ts_ms) = ("press-7.s1.2".into(), 2, T + 11_000);
    let received = event("s2", 1, 10, 1.0, "good", "synced");
    for e in [&frame, &later, &received] {
        contents.add(e.clone());
    }
    contents.forget_frames_before(T + 11_000);
    assert!(!contents.by_id.contains_key("press-7.s1.1"), "a frame before the cutoff");
    assert!(!contents.by_time.contains_key(&("s1".to_owned(), T + 10_000)));
    assert!(contents.by_id.contains_key("press-7.s1.2"), "a frame from the cutoff on");
    assert!(contents.by_id.contains_key("press-7.s2.1"), "an event received whole");
}

#[test]
fn a_frame_derived_again_under_another_number_shows_no_block_of_its_own() {
    let c = case();
    let mut x_events = c.events.clone();
    // s1#1's frame as the history gives it: the same sensor and time, numbered 1 of a later
    // start, so its block is not the gateway's.
    x_events[0].event_id = "press-7.s1.99".into();
    x_events[0].samples = Some(crate::event::SampleRef { block_seq: 99, from_ms: 0, to_ms: 1 });
    let mut contents = Contents::default();
    contents.add(x_events[0].clone());
    let accepted = [accepted(&c.events[0], Acceptance::Applied, false)];
    let cfg = config();
    let r = rule::rule_for(&cfg, "severity", "press-7");
    let w = window::window(&c.revisions[0], r.as_ref(), &accepted, &contents);
    assert_eq!(w.events[0].value, Some(4.6234), "matched by sensor and time");
    assert_eq!(w.events[0].samples, None);
}
