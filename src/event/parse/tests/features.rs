//! `features` (docs/contracts.md sections 2 and 12): what is read, in which order it is written
//! back, and each rejection.

use super::*;
use crate::event::features::Feature;

/// The base event with three features, in another order than the feature order.
pub(super) fn with_features() -> String {
    with(|m| {
        let f = json!({"kurtosis": 3.25, "velocity_rms": 4.62, "accel_rms": 0.61});
        m.insert("features".into(), f);
    })
}

/// The base event with `features` written as `text`.
fn features_text(text: &str) -> String {
    with(|m| drop(m.insert("features".into(), json!("@")))).replace("\"@\"", text)
}

#[test]
fn features_are_read_and_written_back_in_feature_order() {
    let raw = with_features();
    let e = parse(&raw).unwrap();
    // Both fast paths read it (and `parse` checks they agree with the exact path).
    assert_eq!(super::super::scan::Scan::new(&raw).event(None).as_ref(), Some(&e));
    assert_eq!(fast_event(&raw).as_ref(), Some(&e));
    let f = e.features.as_deref().unwrap();
    assert_eq!(f.get(Feature::AccelRms), Some(0.61));
    assert_eq!(f.get(Feature::VelocityRms), Some(4.62));
    assert_eq!(f.get(Feature::Kurtosis), Some(3.25));
    assert_eq!(f.len(), 3);
    let text = serde_json::to_string(&e).unwrap();
    assert!(
        text.ends_with(
            ",\"samples\":{\"block_seq\":7,\"from_ms\":1699999999000,\"to_ms\":1700000000000},\
             \"features\":{\"accel_rms\":0.61,\"velocity_rms\":4.62,\"kurtosis\":3.25}}"
        ),
        "{text}"
    );
    let again = parse(&text).unwrap();
    assert_eq!(again, e);
    assert_eq!(again.fingerprint(), e.fingerprint());
    assert_ne!(e.fingerprint(), parse(&with(|_| {})).unwrap().fingerprint());
}

#[test]
fn no_features_keeps_the_event_and_its_bytes() {
    let plain = parse(&with(|_| {})).unwrap();
    assert_eq!(plain.features, None);
    for none in ["{}", "null", " { } "] {
        let e = parse(&features_text(none)).unwrap();
        assert_eq!(e, plain, "{none}");
        assert_eq!(serde_json::to_string(&e).unwrap(), serde_json::to_string(&plain).unwrap());
    }
    assert!(!serde_json::to_string(&plain).unwrap().contains("features"));
}

#[test]
fn every_feature_integers_and_negative_zero() {
    let all: Vec<String> =
        Feature::ALL.iter().enumerate().map(|(i, f)| format!("\"{f}\": {i}")).collect();
    let e = parse(&features_text(&format!("{{{}}}", all.join(", ")))).unwrap();
    let f = e.features.unwrap();
    for (i, feature) in Feature::ALL.into_iter().enumerate() {
        assert_eq!(f.get(feature), Some(i as f64));
    }
    let zero = parse(&features_text("{\"crest_factor\": -0.0}")).unwrap();
    let v = zero.features.unwrap().get(Feature::CrestFactor).unwrap();
    assert!(v == 0.0 && v.is_sign_positive());
}

#[test]
fn schema_2_events_carry_features_too() {
    let raw = schema2(json!({"x": 3.0, "y": 4.0}), None).replacen(
        '{',
        "{\"features\":{\"env_bpfi\":31.4},",
        1,
    );
    let e = parse(&raw).unwrap();
    assert_eq!((e.schema, e.value), (2, 5.0));
    assert_eq!(e.features.unwrap().get(Feature::EnvBpfi), Some(31.4));
}

#[test]
fn feature_rejections_name_the_key() {
    reject(&features_text("{\"velocity\": 1}"), Reason::BadType, "unknown feature \"velocity\"");
    reject(&features_text("{\"kurtosis\": \"3\"}"), Reason::BadType, "features.kurtosis");
    reject(&features_text("{\"kurtosis\": [3]}"), Reason::BadType, "features.kurtosis");
    reject(&features_text("[1]"), Reason::BadType, "features: expected an object");
    reject(&features_text("3"), Reason::BadType, "features: expected an object");
    reject(
        &features_text("{\"kurtosis\": NaN}"),
        Reason::NonFiniteValue,
        "features.kurtosis is NaN",
    );
    reject(
        &features_text("{\"env_bsf\": -Infinity}"),
        Reason::NonFiniteValue,
        "features.env_bsf is -Infinity",
    );
    reject(&features_text("{\"env_ftf\": 1e999}"), Reason::NonFiniteValue, "features.env_ftf");
    reject(
        &features_text("{\"env_bpfo\": -2.5}"),
        Reason::NegativeValue,
        "features.env_bpfo is -2.5",
    );
    // Duplicate keys are malformed at any depth, features included.
    reject(
        &features_text("{\"kurtosis\": 3, \"kurtosis\": 4}"),
        Reason::MalformedJson,
        "duplicate key \"kurtosis\"",
    );
}

#[test]
fn feature_checks_come_in_order() {
    // Type before semantics: an unknown feature outranks a negative value.
    let raw = with(|m| {
        m.insert("value".into(), json!(-1.0));
        m.insert("features".into(), json!({"nope": 1}));
    });
    reject(&raw, Reason::BadType, "unknown feature");
    // The value's checks before the features', non-finite before negative.
    let raw = with(|m| drop(m.insert("value".into(), json!(-1.0))))
        .replace("\"samples\"", "\"features\":{\"kurtosis\":NaN},\"samples\"");
    reject(&raw, Reason::NegativeValue, "value");
    let both = features_text("{\"kurtosis\": -1, \"crest_factor\": NaN}");
    reject(&both, Reason::NonFiniteValue, "features.crest_factor");
}

#[test]
fn an_acceleration_feature_needs_an_acceleration_unit() {
    let velocity = |features: &str| {
        with(|m| {
            m.insert("metric".into(), json!("velocity_rms"));
            m.insert("unit".into(), json!("mm/s"));
            m.insert("features".into(), json!("@"));
        })
        .replace("\"@\"", features)
    };
    reject(&velocity("{\"accel_peak\": 1.5}"), Reason::UnitMismatch, "features.accel_peak");
    let e = parse(&velocity("{\"velocity_rms\": 4.5, \"kurtosis\": 3}")).unwrap();
    assert_eq!(e.features.unwrap().get(Feature::VelocityRms), Some(4.5));
    // In m/s2 they are in m/s2.
    let ms2 = with(|m| {
        m.insert("unit".into(), json!("m/s2"));
        m.insert("features".into(), json!({"accel_peak": 9.5}));
    });
    assert_eq!(parse(&ms2).unwrap().features.unwrap().get(Feature::AccelPeak), Some(9.5));
}
