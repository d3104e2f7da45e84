//! The rule core over features (docs/contracts.md section 4): which measurement an event gives
//! the rule, in which unit, what the evidence shows, resolved thresholds, asset tags on records,
//! and parameters applied again on restore.

use super::*;
use crate::event::features::Features;
use crate::event::{ClockEvidence, Unit};

const T0: i64 = 1_700_000_000_000;

fn event(machine: &str, seq: u64, metric: Metric, value: f64, unit: Unit) -> Event {
    Event {
        event_id: format!("{machine}.s1.{seq}"),
        machine: machine.into(),
        sensor: "s1".into(),
        seq,
        ts_ms: T0 + seq as i64 * 1000,
        clock: ClockEvidence::UNKNOWN,
        metric,
        value,
        unit,
        schema: 1,
        quality: Quality::Good,
        samples: None,
        features: None,
    }
}

fn with(mut e: Event, list: &[(Feature, f64)]) -> Event {
    e.features = Some(Box::new(list.iter().copied().collect::<Features>()));
    e
}

fn params(metric: Feature, unit: MeasureUnit, threshold: f64) -> Params {
    let mut p = Params::defaults("gw");
    let r = p.rule_mut();
    (r.metric, r.unit, r.threshold) = (metric, unit, threshold);
    p
}

/// `p` with its first rule early.
fn early(mut p: Params) -> Params {
    p.rule_mut().early = true;
    p
}

/// Whether each event counted, given in order at one ingest time after them all.
fn counted(engine: &mut Engine, events: &[Event]) -> Vec<bool> {
    let mut out = Vec::new();
    events
        .iter()
        .map(|e| match engine.on_event(T0 + 100_000, e, &mut out) {
            Verdict::Applied { counted } | Verdict::LateApplied { counted } => counted,
            other => panic!("{other:?}"),
        })
        .collect()
}

/// The evidence values and units of the first alert of three events of press-7 that count.
fn evidence(mut p: Params, e: impl Fn(u64) -> Event) -> Vec<(f64, &'static str)> {
    p.rule_mut().early = true;
    let mut engine = Engine::new(p);
    let mut out = Vec::new();
    for seq in 1..=3 {
        engine.on_event(T0 + 100_000, &e(seq), &mut out);
    }
    out[0].evidence.iter().map(|i| (i.value, i.unit.as_str())).collect()
}

#[test]
fn a_rule_reads_the_value_of_its_metric_else_the_feature() {
    let mut engine = Engine::new(params(Feature::VelocityRms, MeasureUnit::MmS, 4.5));
    let accel = event("press-7", 1, Metric::AccelRms, 0.9, Unit::G);
    let velocity = event("press-7", 4, Metric::VelocityRms, 5.0, Unit::MmS);
    let got = counted(
        &mut engine,
        &[
            with(accel.clone(), &[(Feature::VelocityRms, 5.0)]),
            event("press-7", 2, Metric::AccelRms, 0.9, Unit::G),
            with(event("press-7", 3, Metric::AccelRms, 0.9, Unit::G), &[(Feature::Kurtosis, 9.0)]),
            velocity.clone(),
            // The event's own metric is read, not a feature of the same name.
            with(
                Event { event_id: "v5".into(), value: 1.0, ..velocity.clone() },
                &[(Feature::VelocityRms, 9.0)],
            ),
            with(Event { event_id: "v6".into(), ..accel }, &[(Feature::VelocityRms, 4.49)]),
        ],
    );
    assert_eq!(got, [true, false, false, true, false, false]);
}

#[test]
fn the_evidence_shows_the_measurement_the_rule_read() {
    let velocity = |seq| {
        with(event("press-7", seq, Metric::AccelRms, 0.9, Unit::G), &[(Feature::VelocityRms, 5.5)])
    };
    let p = params(Feature::VelocityRms, MeasureUnit::MmS, 4.5);
    assert_eq!(evidence(p, velocity), [(5.5, "mm/s"); 3]);
    // An acceleration feature is in its event's unit and converts to the rule's.
    let peak = |seq| {
        with(event("press-7", seq, Metric::AccelRms, 0.2, Unit::G), &[(Feature::AccelPeak, 1.0)])
    };
    assert_eq!(evidence(params(Feature::AccelPeak, MeasureUnit::Ms2, 9.8), peak), [(1.0, "g"); 3]);
    let mut engine = Engine::new(params(Feature::AccelPeak, MeasureUnit::Ms2, 9.81));
    assert_eq!(counted(&mut engine, &[peak(1)]), [false], "9.80665 m/s2 < 9.81");
    // Dimensionless features are read as they are, in "1".
    let bpfi = |seq| {
        with(event("press-7", seq, Metric::AccelRms, 0.2, Unit::G), &[(Feature::EnvBpfi, 31.4)])
    };
    assert_eq!(evidence(params(Feature::EnvBpfi, MeasureUnit::One, 8.0), bpfi), [(31.4, "1"); 3]);
    // A rule over the event's own metric shows its value as before.
    let plain = |seq| event("press-7", seq, Metric::AccelRms, 0.7, Unit::Ms2);
    assert_eq!(
        evidence(params(Feature::AccelRms, MeasureUnit::G, 0.05), plain),
        [(0.7, "m/s2"); 3]
    );
}

#[test]
fn an_infinite_threshold_never_counts_and_machines_have_their_own() {
    let mut p = params(Feature::VelocityRms, MeasureUnit::MmS, f64::INFINITY);
    p.rule_mut().thresholds =
        BTreeMap::from([("press-7".to_owned(), 2.8), ("mill-2".to_owned(), 4.5)]);
    let mut engine = Engine::new(p);
    let v = |m: &str, seq, value| event(m, seq, Metric::VelocityRms, value, Unit::MmS);
    let got = counted(
        &mut engine,
        &[v("press-7", 1, 3.0), v("mill-2", 1, 3.0), v("mill-2", 2, 4.5), v("fan-1", 1, 1e300)],
    );
    assert_eq!(got, [true, false, true, false]);
}

#[test]
fn alert_records_carry_the_machines_asset_tags_after_the_rule_version() {
    let mut p = early(Params::defaults("gw"));
    let tags = AssetTags::new(vec![("line".into(), "L3".into()), ("iso_group".into(), 2.into())]);
    p.assets.insert("press-7".into(), Arc::new(tags));
    let mut engine = Engine::new(p);
    let mut out = Vec::new();
    for m in ["press-7", "mill-2"] {
        for seq in 1..=3 {
            engine.on_event(T0 + 100_000, &event(m, seq, Metric::AccelRms, 0.9, Unit::G), &mut out);
        }
    }
    let json: Vec<String> = out.iter().map(|r| serde_json::to_string(r).unwrap()).collect();
    let version = format!("\"rule_version\":\"{}\"", engine.params().rule().version);
    assert!(
        json[0].contains(&format!(
            "{version},\"asset\":{{\"line\":\"L3\",\"iso_group\":2}},\"onset_ms\""
        )),
        "{}",
        json[0]
    );
    assert_eq!(out[1].machine, "mill-2");
    assert!(json[1].contains(&format!("{version},\"asset\":{{}},\"onset_ms\"")), "{}", json[1]);
    // Records archived before `asset` existed read back with `{}`.
    let old = json[0].replace(",\"asset\":{\"line\":\"L3\",\"iso_group\":2}", "");
    let back: AlertRecord = serde_json::from_str(&old).unwrap();
    assert!(back.asset.is_empty());
    let again: AlertRecord = serde_json::from_str(&json[0]).unwrap();
    assert_eq!(again, out[0]);
}

#[test]
fn a_restore_applies_the_new_thresholds_and_tags_to_known_machines() {
    let p = early(Params::defaults("gw"));
    let mut engine = Engine::new(p.clone());
    let mut out = Vec::new();
    let e = |seq, value| event("press-7", seq, Metric::AccelRms, value, Unit::G);
    assert_eq!(counted(&mut engine, &[e(1, 0.6)]), [true]);
    let snapshot = engine.snapshot();
    // The same parameters: as before.
    let mut same = Engine::restore(p.clone(), &snapshot).unwrap();
    assert_eq!(counted(&mut same, &[e(2, 0.6)]), [true]);
    // A higher threshold and tags for the machine: both apply from the restore on.
    let mut changed = p;
    changed.rule_mut().thresholds.insert("press-7".into(), 0.7);
    let tags = AssetTags::new(vec![("line".into(), "L4".into())]);
    changed.assets.insert("press-7".into(), Arc::new(tags.clone()));
    let mut engine = Engine::restore(changed, &snapshot).unwrap();
    assert_eq!(counted(&mut engine, &[e(2, 0.6)]), [false]);
    for seq in [3, 4] {
        let v = engine.on_event(T0 + 100_000, &e(seq, 0.8), &mut out);
        assert_eq!(v, Verdict::Applied { counted: true });
    }
    assert_eq!(out.len(), 1, "the early alert of 0.6 (before), 0.8 and 0.8");
    assert!(out.iter().all(|r| *r.asset == tags), "{out:?}");
}

/// A second rule: `velocity` over the `velocity_rms` feature, two events at or above 4.5 mm/s
/// within a minute.
fn velocity_rule() -> RuleParams {
    let mut r = Params::defaults("gw").rules.remove(0);
    (r.name, r.version) = ("velocity".into(), "v2".into());
    (r.metric, r.unit, r.threshold) = (Feature::VelocityRms, MeasureUnit::MmS, 4.5);
    (r.count, r.window_ms) = (2, 60_000);
    r
}

/// Events of press-7, one a second: acceleration `accel[i]` g, velocity `velocity[i]` mm/s.
fn both(accel: &[f64], velocity: &[f64]) -> Vec<Event> {
    let ev = |(i, (&a, &v)): (usize, (&f64, &f64))| {
        with(
            event("press-7", i as u64 + 1, Metric::AccelRms, a, Unit::G),
            &[(Feature::VelocityRms, v)],
        )
    };
    accel.iter().zip(velocity).enumerate().map(ev).collect()
}

/// Every record of `events` (then every sensor idle), one ingest time per event.
fn records(p: &Params, events: &[Event]) -> Vec<AlertRecord> {
    let mut engine = Engine::new(p.clone());
    let mut out = Vec::new();
    for e in events {
        engine.on_event(e.ts_ms + 50, e, &mut out);
    }
    engine.tick(T0 + 10_000_000, &mut out);
    out
}

#[test]
fn each_rule_decides_as_it_would_alone_with_its_own_ids() {
    let accel = [0.9, 0.9, 0.1, 0.9, 0.1, 0.1, 0.1, 0.1];
    let velocity = [1.0, 5.0, 6.0, 1.0, 1.0, 7.0, 8.0, 1.0];
    let events = both(&accel, &velocity);
    let mut two = Params::defaults("gw");
    two.rules.push(velocity_rule());
    let alone_first = Params::defaults("gw");
    let mut alone_second = Params::defaults("gw");
    alone_second.rules = vec![velocity_rule()];
    let all = records(&two, &events);
    let of = |rule: &str| -> Vec<AlertRecord> {
        all.iter().filter(|r| r.rule == rule).cloned().collect()
    };
    assert_eq!(of("high-vibration"), records(&alone_first, &events));
    assert_eq!(of("velocity"), records(&alone_second, &events));
    let ids: BTreeSet<&str> = all.iter().map(|r| r.alert_id.as_str()).collect();
    assert_eq!(ids.len(), 2, "an incident of each rule: {ids:?}");
    assert!(ids.contains(&"gw/velocity/press-7/1700000003000"), "{ids:?}");
    assert!(ids.contains(&"gw/high-vibration/press-7/1700000004000"), "{ids:?}");
}

#[test]
fn the_engine_says_which_rules_counted_an_event_and_in_which_incident() {
    let mut p = Params::defaults("gw");
    p.rules.push(velocity_rule());
    let mut engine = Engine::new(p);
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for e in both(&[0.9, 0.1, 0.9], &[5.0, 6.0, 1.0]) {
        let verdict = engine.on_event(T0 + 100_000, &e, &mut out);
        let by: Vec<(usize, Option<String>)> =
            engine.counted_by().iter().map(|c| (c.rule, c.incident.clone())).collect();
        seen.push((verdict, by));
    }
    let incident = Some("gw/velocity/press-7/1700000002000".to_owned());
    assert_eq!(
        seen,
        [
            (Verdict::Applied { counted: true }, vec![(0, None), (1, None)]),
            (Verdict::Applied { counted: true }, vec![(1, incident)]),
            (Verdict::Applied { counted: true }, vec![(0, None)]),
        ]
    );
    engine.tick(T0 + 200_000, &mut out);
    assert!(engine.counted_by().is_empty());
}

#[test]
fn a_restore_gives_each_rule_its_own_book_by_name() {
    let mut two = Params::defaults("gw");
    two.rules.push(velocity_rule());
    let mut engine = Engine::new(two.clone());
    let mut out = Vec::new();
    for e in both(&[0.9, 0.9], &[5.0, 1.0]) {
        engine.on_event(T0 + 100_000, &e, &mut out);
    }
    let snapshot = engine.snapshot();
    // The rules in the other order, and a third: each goes on from its own events.
    let mut swapped = two.clone();
    swapped.rules.reverse();
    let mut third = velocity_rule();
    third.name = "velocity-2".into();
    swapped.rules.push(third);
    let mut engine = Engine::restore(swapped, &snapshot).unwrap();
    let mut out = Vec::new();
    for e in both(&[0.9, 0.9], &[5.0, 5.0]).iter().skip(1).map(|e| {
        let mut e = e.clone();
        (e.seq, e.ts_ms, e.event_id) =
            (e.seq + 2, e.ts_ms + 2_000, format!("press-7.s1.{}", e.seq + 2));
        e
    }) {
        engine.on_event(T0 + 100_000, &e, &mut out);
    }
    engine.tick(T0 + 10_000_000, &mut out);
    let opened: BTreeMap<&str, usize> = out
        .iter()
        .filter(|r| r.kind == alert::AlertKind::Open)
        .map(|r| (r.rule.as_str(), r.evidence.len()))
        .collect();
    // high-vibration: two events before, one after; velocity: one before, one after; the new
    // rule saw only the event after.
    assert_eq!(opened, BTreeMap::from([("high-vibration", 3), ("velocity", 2)]));
    // A snapshot of one rule restores under two: the first rule goes on, the second starts.
    let one = Engine::new(Params::defaults("gw")).snapshot();
    assert!(Engine::restore(two, &one).is_ok());
}
