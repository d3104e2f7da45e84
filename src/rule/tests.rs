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
    (p.metric, p.unit, p.threshold) = (metric, unit, threshold);
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
fn evidence(p: Params, e: impl Fn(u64) -> Event) -> Vec<(f64, &'static str)> {
    let mut engine = Engine::new(Params { early: true, ..p });
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
    p.thresholds = BTreeMap::from([("press-7".to_owned(), 2.8), ("mill-2".to_owned(), 4.5)]);
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
    let mut p = Params { early: true, ..Params::defaults("gw") };
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
    let version = format!("\"rule_version\":\"{}\"", engine.params().rule_version);
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
    let p = Params { early: true, ..Params::defaults("gw") };
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
    changed.thresholds.insert("press-7".into(), 0.7);
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
