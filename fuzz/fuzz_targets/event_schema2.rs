//! Schema-2 events (docs/event-schema-2.md) built from structured fuzz input: any axes (known,
//! unknown, repeated), any numbers (finite, negative, NaN, infinite, overflowing, wrong types) and
//! any `combine`, around otherwise valid fields.
//!
//! Properties: never a panic; above `MAX_EVENT_BYTES` the verdict is `oversized`; below it the
//! fast path equals the exact path and the verdict is the one the document specifies, in its
//! order of checks (duplicate key, then unknown field, then the axes' presence and types, then
//! non-finite, then negative values; a text holding `\u0000` with a non-finite literal is
//! malformed JSON, as the parser's non-finite pass says); an accepted event's `value` equals an
//! independent computation of `combine` over the axes. (Comparing the paths above the limit was
//! the target's own mistake, found in a long run: the exact path reads only what passed it.)
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use linegate::event::parse::{exact_event, parse_event, MAX_EVENT_BYTES};
use linegate::event::rejection::Reason;

#[derive(Arbitrary, Debug)]
enum Key {
    X,
    Y,
    Z,
    Upper,
    W,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Num {
    Float(f64),
    Int(i64),
    NaN,
    Infinity,
    MinusInfinity,
    Overflowing,
    Text,
    Bool,
}

#[derive(Arbitrary, Debug)]
enum CombineChoice {
    Absent,
    Null,
    Rss,
    Max,
    Other(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    axes: Vec<(Key, Num)>,
    combine: CombineChoice,
    with_value: bool,
}

const HEAD: &str = r#"{"event_id": "node-3.s1.1187", "machine": "press-7", "sensor": "s1", "seq": 1187, "ts_ms": 1700000000000, "clock": {"state": "synced", "err_ms": 2}, "metric": "accel_rms", "unit": "g", "schema": 2, "quality": "good""#;

fn key(k: &Key) -> &'static str {
    match k {
        Key::X => "x",
        Key::Y => "y",
        Key::Z => "z",
        Key::Upper => "X",
        Key::W => "w",
    }
}

fn text(n: Num) -> String {
    match n {
        Num::Float(x) if x.is_finite() => format!("{x:e}"),
        Num::Float(x) if x.is_nan() => "NaN".into(),
        Num::Float(x) if x > 0.0 => "Infinity".into(),
        Num::Float(_) => "-Infinity".into(),
        Num::Int(i) => i.to_string(),
        Num::NaN => "NaN".into(),
        Num::Infinity => "Infinity".into(),
        Num::MinusInfinity => "-Infinity".into(),
        Num::Overflowing => "1e999".into(),
        Num::Text => "\"1\"".into(),
        Num::Bool => "true".into(),
    }
}

/// The number a literal stands for, as f64 (`None` for a wrong type).
fn number(n: Num) -> Option<f64> {
    match n {
        Num::Float(x) => Some(x),
        Num::Int(i) => Some(i as f64),
        Num::NaN => Some(f64::NAN),
        Num::Infinity | Num::Overflowing => Some(f64::INFINITY),
        Num::MinusInfinity => Some(f64::NEG_INFINITY),
        Num::Text | Num::Bool => None,
    }
}

/// Root-sum-square computed by scaling with the largest value first (no overflow, no underflow).
fn rss(xs: &[f64]) -> f64 {
    let m = xs.iter().copied().fold(0.0, f64::max);
    if m == 0.0 {
        return 0.0;
    }
    m * xs.iter().map(|x| (x / m) * (x / m)).sum::<f64>().sqrt()
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

fuzz_target!(|input: Input| {
    let mut raw = String::from(HEAD);
    if input.with_value {
        raw.push_str(r#", "value": 1"#);
    }
    let axes: Vec<String> =
        input.axes.iter().map(|(k, n)| format!("\"{}\": {}", key(k), text(*n))).collect();
    raw.push_str(&format!(r#", "axes": {{{}}}"#, axes.join(", ")));
    let combine = match &input.combine {
        CombineChoice::Absent => Some(linegate::event::schema2::Combine::Rss),
        CombineChoice::Null => Some(linegate::event::schema2::Combine::Rss),
        CombineChoice::Rss => Some(linegate::event::schema2::Combine::Rss),
        CombineChoice::Max => Some(linegate::event::schema2::Combine::Max),
        CombineChoice::Other(s) => {
            raw.push_str(&format!(r#", "combine": {}"#, serde_json::json!(s)));
            linegate::event::schema2::Combine::from_name(s)
        }
    };
    match &input.combine {
        CombineChoice::Null => raw.push_str(r#", "combine": null"#),
        CombineChoice::Rss => raw.push_str(r#", "combine": "rss""#),
        CombineChoice::Max => raw.push_str(r#", "combine": "max""#),
        _ => {}
    }
    raw.push('}');

    let verdict = parse_event(&raw);
    // Above the size limit only the size is judged; the exact path reads what is below it.
    if raw.len() > MAX_EVENT_BYTES {
        let got = verdict.as_ref().map_err(|r| r.reason);
        assert_eq!(got.err(), Some(Reason::Oversized), "{} bytes: {verdict:?}", raw.len());
        return;
    }
    assert_eq!(verdict, exact_event(&raw), "fast and exact paths disagree: {raw}");

    // What docs/event-schema-2.md says of this event, check by check.
    let mut seen = [false; 5];
    let duplicate = input.axes.iter().any(|(k, _)| {
        let i = match k {
            Key::X => 0,
            Key::Y => 1,
            Key::Z => 2,
            Key::Upper => 3,
            Key::W => 4,
        };
        std::mem::replace(&mut seen[i], true)
    });
    let expect = |reason: Reason| {
        let got = verdict.as_ref().map_err(|r| r.reason);
        assert_eq!(got.err(), Some(reason), "{raw}: {verdict:?}");
    };
    // A non-finite literal is read by a second pass that replaces it with a sentinel string; a
    // text holding the escape \u0000 (which could forge one) gets no second pass
    // (src/event/parse/non_finite.rs), so it stays malformed JSON.
    let non_finite_literal =
        input.axes.iter().any(|(_, n)| number(*n).is_some_and(|x| !x.is_finite()));
    if duplicate || (non_finite_literal && raw.contains("\\u0000")) {
        return expect(Reason::MalformedJson);
    }
    if input.with_value {
        return expect(Reason::UnknownField);
    }
    let unknown_axis = input.axes.iter().any(|(k, _)| matches!(k, Key::Upper | Key::W));
    let numbers: Option<Vec<f64>> = input.axes.iter().map(|(_, n)| number(*n)).collect();
    let Some(numbers) = numbers.filter(|_| !input.axes.is_empty() && !unknown_axis) else {
        return expect(Reason::BadType);
    };
    let Some(combine) = combine else { return expect(Reason::BadType) };
    if numbers.iter().any(|x| !x.is_finite()) {
        return expect(Reason::NonFiniteValue);
    }
    if numbers.iter().any(|&x| x < 0.0) {
        return expect(Reason::NegativeValue);
    }
    let want = match combine {
        linegate::event::schema2::Combine::Rss => rss(&numbers),
        linegate::event::schema2::Combine::Max => numbers.iter().copied().fold(0.0, f64::max),
    };
    // Numbers near f64::MAX may round either way when read back from their decimal text.
    if want > 1e307 || numbers.iter().any(|&x| x > 1e307) {
        if let Ok(e) = &verdict {
            assert!(close(e.value, want), "{raw}: value {} expected {want}", e.value);
        }
        return;
    }
    match &verdict {
        Ok(e) => {
            assert_eq!(e.schema, 2);
            assert!(close(e.value, want), "{raw}: value {} expected {want}", e.value);
        }
        Err(r) => panic!("{raw}: a valid schema-2 event rejected: {r}"),
    }
});
