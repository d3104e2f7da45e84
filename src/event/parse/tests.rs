//! Tests of event parsing. Each goes through `parse`, which also checks that the fast path and
//! the exact path agree; the tests of one rejection reason at a time are in `reasons`.

mod features;
mod reasons;

use super::non_finite::{is_json_number, patch_non_finite};
use super::*;
use crate::event::{ClockEvidence, ClockState, Metric, Quality, SampleRef, Unit};
use serde_json::{json, Map, Value};

fn base() -> Map<String, Value> {
    let v = json!({
        "event_id": "gw-01.s1.42",
        "machine": "press-7",
        "sensor": "s1",
        "seq": 42,
        "ts_ms": 1_700_000_000_000_i64,
        "clock": {"state": "synced", "err_ms": 3},
        "metric": "accel_rms",
        "value": 0.61,
        "unit": "g",
        "schema": 1,
        "quality": "good",
        "samples": {"block_seq": 7, "from_ms": 1_699_999_999_000_i64, "to_ms": 1_700_000_000_000_i64}
    });
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn with(f: impl FnOnce(&mut Map<String, Value>)) -> String {
    let mut m = base();
    f(&mut m);
    Value::Object(m).to_string()
}

fn schema2(axes: Value, combine: Option<&str>) -> String {
    with(|m| {
        m.remove("value");
        m.insert("schema".into(), json!(2));
        m.insert("axes".into(), axes);
        if let Some(c) = combine {
            m.insert("combine".into(), json!(c));
        }
    })
}

/// Parses, checks the fast path agrees with the exact path, and that the verdict is stable.
fn parse(raw: &str) -> Result<Event, Rejection> {
    let r = parse_event(raw);
    assert_eq!(r, parse_event(raw), "not deterministic: {raw}");
    if raw.len() <= MAX_EVENT_BYTES {
        assert_eq!(r, exact_event(raw), "fast and exact paths disagree: {raw}");
        if let Some(fast) = fast_event(raw) {
            assert_eq!(Ok(fast), r);
        }
    }
    r
}

fn reject(raw: &str, reason: Reason, needle: &str) -> Rejection {
    let r = parse(raw).expect_err(raw);
    assert_eq!(r.reason, reason, "{raw}: {r}");
    assert!(r.detail.contains(needle), "{raw}: detail {:?} lacks {needle:?}", r.detail);
    r
}

#[test]
fn valid_schema_1_event_round_trips() {
    let raw = with(|_| {});
    let e = parse(&raw).unwrap();
    assert_eq!(e.event_id, "gw-01.s1.42");
    assert_eq!(e.machine, "press-7");
    assert_eq!(e.seq, 42);
    assert_eq!(e.clock, ClockEvidence { state: ClockState::Synced, err_ms: Some(3) });
    assert_eq!(e.metric, Metric::AccelRms);
    assert_eq!(e.value, 0.61);
    assert_eq!(e.unit, Unit::G);
    assert_eq!(e.schema, 1);
    assert_eq!(e.quality, Quality::Good);
    assert_eq!(
        e.samples,
        Some(SampleRef { block_seq: 7, from_ms: 1_699_999_999_000, to_ms: 1_700_000_000_000 })
    );
    let again = parse(&serde_json::to_string(&e).unwrap()).unwrap();
    assert_eq!(again, e);
    assert_eq!(again.fingerprint(), e.fingerprint());
}

#[test]
fn minimal_event_round_trips_and_optional_nulls_are_absent() {
    let raw = with(|m| {
        m.remove("samples");
        m.insert("clock".into(), json!({"state": "unknown", "err_ms": null}));
        m.insert("event_id".into(), json!("weird \"id\" ü \u{1F600}"));
    });
    let e = parse(&raw).unwrap();
    assert_eq!(e.clock, ClockEvidence::UNKNOWN);
    assert_eq!(e.samples, None);
    assert_eq!(parse(&serde_json::to_string(&e).unwrap()).unwrap(), e);
    let nulls = with(|m| {
        m.insert("samples".into(), Value::Null);
        m.insert("replayed".into(), Value::Null);
    });
    assert_eq!(parse(&nulls).unwrap().samples, None);
}

#[test]
fn replayed_is_accepted_and_ignored() {
    let plain = parse(&with(|_| {})).unwrap();
    let replayed = parse(&with(|m| {
        m.insert("replayed".into(), json!(true));
    }))
    .unwrap();
    assert_eq!(plain, replayed);
    reject(
        &with(|m| {
            m.insert("replayed".into(), json!("yes"));
        }),
        Reason::BadType,
        "replayed",
    );
}

#[test]
fn escaped_keys_are_decoded() {
    let raw =
        with(|_| {}).replace("\"seq\"", "\"s\\u0065q\"").replace("\"unit\"", "\"\\u0075nit\"");
    assert!(raw.contains("\\u0065"));
    assert_eq!(parse(&raw).unwrap(), parse(&with(|_| {})).unwrap());
    let unknown = with(|_| {}).replace("\"quality\"", "\"qu\\u00e4lity\"");
    reject(&unknown, Reason::UnknownField, "qu\u{e4}lity");
}

#[test]
fn integer_value_and_negative_zero_are_fine() {
    assert_eq!(parse(&with(|m| drop(m.insert("value".into(), json!(2))))).unwrap().value, 2.0);
    let raw = with(|_| {}).replace("0.61", "-0.0");
    let e = parse(&raw).unwrap();
    assert_eq!(e.value, 0.0);
    assert!(e.value.is_sign_positive());
}

// --- schema 2 -------------------------------------------------------------------------

#[test]
fn schema_2_rss_and_max_upcast() {
    let e = parse(&schema2(json!({"x": 3.0, "y": 4.0}), None)).unwrap();
    assert_eq!((e.schema, e.value), (2, 5.0));
    let e = parse(&schema2(json!({"z": 0.3, "x": 0.9, "y": 0.1}), Some("max"))).unwrap();
    assert_eq!((e.schema, e.value), (2, 0.9));
    let e = parse(&schema2(json!({"x": 1, "y": 2, "z": 2}), Some("rss"))).unwrap();
    assert_eq!(e.value, 3.0);
    let e = parse(&schema2(json!({"y": 0.25}), None)).unwrap();
    assert_eq!(e.value, 0.25);
    let nulled = schema2(json!({"x": 3.0, "y": 4.0}), None).replacen('{', "{\"combine\":null,", 1);
    assert_eq!(parse(&nulled).unwrap().value, 5.0);
}

#[test]
fn schema_2_doc_example_and_reserialisation_caveat() {
    let doc = include_str!("../../../docs/event-schema-2.md");
    let start = doc.find("```json\n").unwrap() + 8;
    let end = start + doc[start..].find("```").unwrap();
    let e = parse(&doc[start..end]).unwrap();
    assert_eq!(e.schema, 2);
    assert!((e.value - 0.5).abs() < 1e-12, "{}", e.value);
    // Documented: an upcast event re-serialised is not a valid schema-2 event.
    let again = parse(&serde_json::to_string(&e).unwrap()).unwrap_err();
    assert_eq!(again.reason, Reason::UnknownField);
}

#[test]
fn schema_2_rejections() {
    let with_value = schema2(json!({"x": 1}), None).replace("{\"", "{\"value\":1,\"");
    reject(&with_value, Reason::UnknownField, "\"value\" is not defined in schema 2");
    let no_axes = with(|m| {
        m.remove("value");
        m.insert("schema".into(), json!(2));
    });
    reject(&no_axes, Reason::MissingField, "\"axes\"");
    reject(&schema2(json!({"w": 1}), None), Reason::BadType, "unknown axis \"w\"");
    reject(&schema2(json!({"X": 1}), None), Reason::BadType, "axes");
    reject(&schema2(json!({}), None), Reason::BadType, "axes: expected 1 to 3");
    reject(&schema2(json!([1, 2, 3]), None), Reason::BadType, "axes: expected an object");
    reject(&schema2(json!({"x": "1"}), None), Reason::BadType, "axes.x");
    reject(&schema2(json!({"x": 1}), Some("mean")), Reason::BadType, "combine");
    let nan = schema2(json!({"x": 1, "y": 0.5}), None).replace("0.5", "NaN");
    reject(&nan, Reason::NonFiniteValue, "axes.y is NaN");
    let inf = schema2(json!({"x": 1.5}), None).replace("1.5", "1e999");
    reject(&inf, Reason::NonFiniteValue, "axes.x");
    reject(&schema2(json!({"x": 1, "z": -0.5}), None), Reason::NegativeValue, "axes.z is -0.5");
    let huge = schema2(json!({"x": f64::MAX, "y": f64::MAX}), None);
    reject(&huge, Reason::NonFiniteValue, "rss of axes overflows");
    let dup = schema2(json!({"x": 1}), None).replace("\"x\":1", "\"x\":1,\"x\":2");
    reject(&dup, Reason::MalformedJson, "duplicate key \"x\"");
    let mismatch = schema2(json!({"x": 1}), None).replace("\"g\"", "\"mm/s\"");
    reject(&mismatch, Reason::UnitMismatch, "mm/s");
}

#[test]
fn helpers_behave() {
    assert!(is_json_number(b"0"));
    assert!(is_json_number(b"-12.5e+3"));
    assert!(!is_json_number(b"01"));
    assert!(!is_json_number(b"1."));
    assert!(!is_json_number(b".5"));
    assert!(!is_json_number(b"1e"));
    assert!(!is_json_number(b"-"));
    let p = patch_non_finite("[NaN, 1, -Infinity, \"NaN\", 1e999]").unwrap();
    let n = serde_json::from_str::<Vec<Value>>(&p.text).unwrap();
    assert_eq!(n.len(), 5);
    assert_eq!(n[3], json!("NaN"));
    assert_eq!(p.original_offset(p.text.len()), "[NaN, 1, -Infinity, \"NaN\", 1e999]".len());
    assert!(patch_non_finite("[1, 2]").is_none());
    assert_eq!(show("abc"), "\"abc\"");
    assert!(show(&"é".repeat(100)).ends_with("(200 bytes)"));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_text_never_panics_and_paths_agree(s in ".{0,200}") {
            let _ = parse(&s);
        }

        #[test]
        fn mutated_events_never_panic_and_paths_agree(
            pos in 0usize..400,
            insert in proptest::sample::select(vec![
                "", "NaN", "-", "\"", "{", "}", ",", "1e999", "\\u0000", " ", ":", "null", "]"
            ]),
            cut in 0usize..6,
        ) {
            let raw = if pos % 2 == 0 { with(|_| {}) } else { features::with_features() };
            let pos = pos.min(raw.len());
            let end = (pos + cut).min(raw.len());
            let s = format!("{}{}{}", &raw[..pos], insert, &raw[end..]);
            let _ = parse(&s);
        }
    }
}
