//! One rejection reason at a time, and the order in which the checks run.

use super::*;

#[test]
fn malformed_json() {
    reject("{\"seq\": 1,", Reason::MalformedJson, "EOF");
    reject("", Reason::MalformedJson, "EOF");
    reject("[1, 2]", Reason::MalformedJson, "JSON object");
    reject("\"event\"", Reason::MalformedJson, "JSON object");
    reject("17", Reason::MalformedJson, "JSON object");
    reject(&format!("{} x", with(|_| {})), Reason::MalformedJson, "trailing");
    reject("{'seq': 1}", Reason::MalformedJson, "key must be a string");
    reject("{\"value\": NaN,}", Reason::MalformedJson, "line 1");
}

#[test]
fn duplicate_keys_are_malformed_at_any_depth() {
    let raw = with(|_| {}).replace("\"seq\":42", "\"seq\":42,\"seq\":43");
    reject(&raw, Reason::MalformedJson, "duplicate key \"seq\"");
    let escaped = with(|_| {}).replace("\"seq\":42", "\"seq\":42,\"s\\u0065q\":43");
    reject(&escaped, Reason::MalformedJson, "duplicate key \"seq\"");
    let clock =
        with(|_| {}).replace("\"state\":\"synced\"", "\"state\":\"synced\",\"state\":\"x\"");
    reject(&clock, Reason::MalformedJson, "duplicate key \"state\"");
    let unknown = with(|_| {}).replace("\"seq\":42", "\"seq\":42,\"a\":1,\"a\":2");
    reject(&unknown, Reason::MalformedJson, "duplicate key \"a\"");
    // JSON comes before the schema: a duplicate deep inside still makes it malformed.
    reject(
        "{\"schema\": 9, \"x\": [{\"k\": 1, \"k\": 2}]}",
        Reason::MalformedJson,
        "duplicate key \"k\"",
    );
    // Many keys (the hashed path).
    let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\": {i}")).collect();
    let raw = format!("{{\"x\": {{{}, \"k33\": 0}}}}", many.join(", "));
    reject(&raw, Reason::MalformedJson, "duplicate key \"k33\"");
}

#[test]
fn missing_fields() {
    for f in [
        "event_id", "machine", "sensor", "seq", "ts_ms", "clock", "metric", "value", "unit",
        "schema", "quality",
    ] {
        let raw = with(|m| drop(m.remove(f)));
        reject(&raw, Reason::MissingField, &format!("\"{f}\""));
    }
    reject(
        &with(|m| drop(m.insert("clock".into(), json!({})))),
        Reason::MissingField,
        "clock.state",
    );
    for f in ["block_seq", "from_ms", "to_ms"] {
        let raw = with(|m| {
            m.get_mut("samples").unwrap().as_object_mut().unwrap().remove(f);
        });
        reject(&raw, Reason::MissingField, &format!("samples.{f}"));
    }
}

#[test]
fn bad_types() {
    let cases: Vec<(&str, Value, &str)> = vec![
        ("metric", json!("foo"), "metric: unknown value \"foo\""),
        ("unit", json!("furlongs"), "unit: unknown value \"furlongs\""),
        ("quality", json!("excellent"), "quality: unknown value \"excellent\""),
        ("clock", json!({"state": "x"}), "clock.state: unknown value \"x\""),
        ("clock", json!({"state": 1}), "clock.state"),
        ("clock", json!({"state": "synced", "err_ms": -1}), "clock.err_ms"),
        ("clock", json!({"state": "synced", "err_ms": 4_294_967_296_u64}), "clock.err_ms"),
        ("clock", json!({"state": "synced", "err_ms": 2.5}), "clock.err_ms"),
        ("clock", json!("synced"), "clock: expected an object, found the string \"synced\""),
        ("seq", json!(-1), "seq: expected an unsigned 64-bit integer, found the number -1"),
        ("seq", json!(1.5), "seq: expected an unsigned 64-bit integer, found the number 1.5"),
        ("seq", json!("42"), "seq"),
        ("ts_ms", json!(1.7e12), "ts_ms"),
        ("ts_ms", json!(u64::MAX), "ts_ms"),
        ("event_id", json!(5), "event_id: expected a string, found the number 5"),
        ("machine", Value::Null, "machine: expected a string, found null"),
        ("value", json!("0.5"), "value: expected a number"),
        ("value", json!([0.5]), "value: expected a number, found an array"),
        ("samples", json!({"block_seq": 1, "from_ms": 9, "to_ms": 3}), "from_ms 9 is after"),
        ("samples", json!({"block_seq": -1, "from_ms": 1, "to_ms": 3}), "samples.block_seq"),
        ("samples", json!([1, 2, 3]), "samples: expected an object"),
    ];
    for (field, v, needle) in cases {
        reject(&with(|m| drop(m.insert(field.into(), v))), Reason::BadType, needle);
    }
    // A non-finite token outside `value` is a bad type, naming the field and the token.
    reject(&with(|_| {}).replace("\"seq\":42", "\"seq\":NaN"), Reason::BadType, "seq");
    reject(&with(|_| {}).replace("\"seq\":42", "\"seq\":NaN"), Reason::BadType, "found NaN");
    let ts = with(|_| {}).replace("1700000000000,", "1e999,");
    reject(&ts, Reason::BadType, "ts_ms: expected a signed 64-bit integer, found a number");
}

#[test]
fn unknown_schema_is_checked_first() {
    reject(&with(|m| drop(m.insert("schema".into(), json!(3)))), Reason::UnknownSchema, "schema 3");
    reject(&with(|m| drop(m.insert("schema".into(), json!(0)))), Reason::UnknownSchema, "schema 0");
    reject(&with(|m| drop(m.insert("schema".into(), json!(-1)))), Reason::UnknownSchema, "-1");
    // A future shape with other fields still says unknown_schema.
    reject("{\"schema\": 3, \"payload\": {}}", Reason::UnknownSchema, "schema 3");
    reject(&with(|m| drop(m.insert("schema".into(), json!("1")))), Reason::BadType, "schema");
    reject(&with(|m| drop(m.insert("schema".into(), json!(1.0)))), Reason::BadType, "schema");
    reject("{\"payload\": {}}", Reason::MissingField, "\"schema\"");
}

#[test]
fn non_finite_values() {
    let raw = with(|_| {});
    for (token, needle) in [
        ("NaN", "value is NaN"),
        ("Infinity", "value is Infinity"),
        ("-Infinity", "value is -Infinity"),
        ("1e999", "value is a number literal too large"),
        ("-1e999", "value is a negative number literal too large"),
        (&format!("1{}", "0".repeat(400)), "too large for f64"),
    ] {
        reject(&raw.replace("0.61", token), Reason::NonFiniteValue, needle);
    }
    // Python's spelling, with spaces.
    let py = "{\"event_id\": \"e\", \"machine\": \"m\", \"sensor\": \"s\", \"seq\": 1, \
              \"ts_ms\": 1700000000000, \"clock\": {\"state\": \"synced\"}, \"metric\": \
              \"accel_rms\", \"value\": NaN, \"unit\": \"g\", \"schema\": 1, \"quality\": \"good\"}";
    reject(py, Reason::NonFiniteValue, "value is NaN");
}

#[test]
fn non_finite_fallback_leaves_strings_alone_and_cannot_be_forged() {
    // NaN inside strings is text, not a token.
    let raw = with(|m| drop(m.insert("event_id".into(), json!("NaN Infinity -Infinity 1e999"))));
    assert_eq!(parse(&raw).unwrap().event_id, "NaN Infinity -Infinity 1e999");
    let esc = with(|m| drop(m.insert("event_id".into(), json!("a\\\"NaN"))));
    assert!(parse(&esc).is_ok());
    let nan_and_escaped_string =
        with(|m| drop(m.insert("event_id".into(), json!("a\"b")))).replace("0.61", "NaN");
    reject(&nan_and_escaped_string, Reason::NonFiniteValue, "value is NaN");
    // A text that spells the sentinel itself does not get the fallback.
    let forged =
        with(|m| drop(m.insert("sensor".into(), json!("\u{0}nf:NaN")))).replace("0.61", "NaN");
    assert!(forged.contains("\\u0000"));
    reject(&forged, Reason::MalformedJson, "line 1");
    // Without a non-finite token a syntax error stays a syntax error.
    reject("{\"value\": Nope}", Reason::MalformedJson, "expected value");
    // A token next to garbage is still malformed.
    reject(&with(|_| {}).replace("0.61", "NaNx"), Reason::MalformedJson, "line 1");
    reject(&with(|_| {}).replace("0.61", "+Infinity"), Reason::MalformedJson, "line 1");
    reject(&with(|_| {}).replace("0.61", "1.e999"), Reason::MalformedJson, "line 1");
}

#[test]
fn negative_value() {
    reject(&with(|_| {}).replace("0.61", "-0.5"), Reason::NegativeValue, "value is -0.5");
}

#[test]
fn unit_mismatch() {
    let r = reject(
        &with(|m| drop(m.insert("unit".into(), json!("mm/s")))),
        Reason::UnitMismatch,
        "unit \"mm/s\"",
    );
    assert!(r.detail.contains("accel_rms"));
    reject(
        &with(|m| drop(m.insert("metric".into(), json!("velocity_rms")))),
        Reason::UnitMismatch,
        "velocity_rms",
    );
    let ok = with(|m| {
        m.insert("metric".into(), json!("velocity_rms"));
        m.insert("unit".into(), json!("mm/s"));
    });
    assert_eq!(parse(&ok).unwrap().unit, Unit::MmS);
    let peak = with(|m| {
        m.insert("metric".into(), json!("accel_peak"));
        m.insert("unit".into(), json!("m/s2"));
    });
    assert_eq!(parse(&peak).unwrap().metric, Metric::AccelPeak);
}

#[test]
fn bad_identifiers() {
    let set = |f: &'static str, v: Value| with(move |m| drop(m.insert(f.into(), v)));
    reject(&set("event_id", json!("")), Reason::BadIdentifier, "event_id is empty");
    reject(&set("event_id", json!("e".repeat(129))), Reason::BadIdentifier, "129 bytes (max 128)");
    assert!(parse(&set("event_id", json!("e".repeat(128)))).is_ok());
    reject(&set("machine", json!("press 7")), Reason::BadIdentifier, "machine \"press 7\" has ' '");
    reject(&set("machine", json!("")), Reason::BadIdentifier, "machine is empty");
    reject(&set("sensor", json!("s".repeat(65))), Reason::BadIdentifier, "sensor");
    reject(&set("sensor", json!("s".repeat(65))), Reason::BadIdentifier, "65 bytes (max 64)");
    reject(&set("sensor", json!("prëss")), Reason::BadIdentifier, "sensor \"prëss\" has 'ë'");
}

#[test]
fn oversized() {
    let big = with(|m| drop(m.insert("event_id".into(), json!("e".repeat(MAX_EVENT_BYTES)))));
    reject(&big, Reason::Oversized, "max 16384");
    // Exactly at the limit is fine (padding with whitespace).
    let raw = with(|_| {});
    let pad = format!("{raw}{}", " ".repeat(MAX_EVENT_BYTES - raw.len()));
    assert_eq!(pad.len(), MAX_EVENT_BYTES);
    assert!(parse(&pad).is_ok());
    reject(&format!("{pad} "), Reason::Oversized, "16385 bytes");
    // Size comes before everything, even for text that is not JSON.
    reject(&"x".repeat(MAX_EVENT_BYTES + 1), Reason::Oversized, "event object");
}

#[test]
fn clock_implausible() {
    let set = |v: i64| with(move |m| drop(m.insert("ts_ms".into(), json!(v))));
    reject(
        &set(1000),
        Reason::ClockImplausible,
        "ts_ms 1000 (1970-01-01T00:00:01.000Z) is before 2000-01-01",
    );
    reject(&set(-5), Reason::ClockImplausible, "ts_ms -5");
    reject(&set(MIN_PLAUSIBLE_TS_MS - 1), Reason::ClockImplausible, "ts_ms");
    assert!(parse(&set(MIN_PLAUSIBLE_TS_MS)).is_ok());
}

#[test]
fn unknown_fields() {
    reject(&with(|m| drop(m.insert("foo".into(), json!(1)))), Reason::UnknownField, "\"foo\"");
    let clock = json!({"state": "synced", "drift": 1});
    reject(&with(|m| drop(m.insert("clock".into(), clock))), Reason::UnknownField, "clock.drift");
    let samples = json!({"block_seq": 1, "from_ms": 1, "to_ms": 2, "n": 3});
    reject(&with(|m| drop(m.insert("samples".into(), samples))), Reason::UnknownField, "samples.n");
    let axes = with(|m| drop(m.insert("axes".into(), json!({"x": 1}))));
    reject(&axes, Reason::UnknownField, "\"axes\" is not defined in schema 1");
    // The first offending key in document order, whether unknown or not in this schema.
    let raw = with(|_| {}).replace("{\"", "{\"zz\":1,\"axes\":{},\"");
    reject(&raw, Reason::UnknownField, "unknown field \"zz\"");
    let raw = with(|_| {}).replace("{\"", "{\"axes\":{},\"zz\":1,\"");
    reject(&raw, Reason::UnknownField, "\"axes\" is not defined");
}

#[test]
fn checks_run_in_the_documented_order() {
    // schema before unknown fields before presence.
    let raw = with(|m| {
        m.insert("schema".into(), json!(4));
        m.insert("foo".into(), json!(1));
        m.remove("seq");
    });
    reject(&raw, Reason::UnknownSchema, "schema 4");
    let raw = with(|m| {
        m.insert("foo".into(), json!(1));
        m.remove("seq");
    });
    reject(&raw, Reason::UnknownField, "foo");
    // Presence/type in field order: event_id before seq.
    let raw = with(|m| {
        m.remove("seq");
        m.insert("event_id".into(), json!(1));
    });
    reject(&raw, Reason::BadType, "event_id");
    // Types before semantics: a bad unit string beats a bad identifier.
    let raw = with(|m| {
        m.insert("machine".into(), json!("a b"));
        m.insert("unit".into(), json!("furlongs"));
    });
    reject(&raw, Reason::BadType, "unit");
    // Identifier, then non-finite, then negative, then unit, then clock.
    let raw = with(|m| {
        m.insert("machine".into(), json!("a b"));
        m.insert("ts_ms".into(), json!(5));
    })
    .replace("0.61", "NaN");
    reject(&raw, Reason::BadIdentifier, "machine");
    let raw = with(|m| {
        m.insert("unit".into(), json!("mm/s"));
        m.insert("ts_ms".into(), json!(5));
    })
    .replace("0.61", "NaN");
    reject(&raw, Reason::NonFiniteValue, "value");
    let raw = with(|m| {
        m.insert("unit".into(), json!("mm/s"));
        m.insert("ts_ms".into(), json!(5));
        m.insert("value".into(), json!(-1));
    });
    reject(&raw, Reason::NegativeValue, "value");
    let raw = with(|m| {
        m.insert("unit".into(), json!("mm/s"));
        m.insert("ts_ms".into(), json!(5));
    });
    reject(&raw, Reason::UnitMismatch, "mm/s");
}
