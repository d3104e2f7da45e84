use super::*;
use crate::event::{ClockEvidence, ClockState};
use serde_json::{json, Value};

const EVENT: &str = "{\"event_id\": \"gw-01.s1.1\", \"machine\": \"press-7\", \"sensor\": \"s1\", \
    \"seq\": 1, \"ts_ms\": 1700000000000, \"clock\": {\"state\": \"synced\"}, \"metric\": \
    \"accel_rms\", \"value\": 0.5, \"unit\": \"g\", \"schema\": 1, \"quality\": \"good\"}";

fn event_line(event: &str) -> String {
    format!("{{\"at\": 1700000000250, \"kind\": \"event\", \"event\": {event}}}")
}

fn samples(f: impl FnOnce(&mut serde_json::Map<String, Value>)) -> String {
    let mut v = json!({
        "at": 1_700_000_001_000_i64, "kind": "samples", "machine": "press-7", "sensor": "s1",
        "t0_ms": 1_700_000_000_000_i64, "rate_hz": 3200, "unit": "g", "axis": "z",
        "data": [0.01, -0.02, 0, 3]
    });
    f(v.as_object_mut().unwrap());
    v.to_string()
}

/// Parses, checking the fast path agrees with the exact path and the verdict is stable.
fn parse(line: &str) -> Result<TraceLine, (Option<i64>, Rejection)> {
    let r = parse_line(line.as_bytes());
    assert_eq!(r, parse_line(line.as_bytes()), "not deterministic: {line}");
    // Spare strings with stale contents (as replay hands back) change nothing.
    let mut spare = vec!["x".repeat(70), String::new(), "stale.id".to_owned(), "s9".to_owned()];
    assert_eq!(r, parse_line_reusing(line.as_bytes(), &mut spare), "spares changed: {line}");
    if line.len() <= MAX_LINE_BYTES {
        assert_eq!(r, exact_line(line.as_bytes(), line), "paths disagree: {line}");
    }
    // Where the event's span is given, it is what serde_json borrows as the `event` member.
    let (again, span) = parse_line_and_event_span(line.as_bytes());
    assert_eq!(r, again, "{line}");
    if let Some(span) = span {
        assert!(matches!(r, Ok(TraceLine { arrival: Arrival::Event(_), .. })), "{line}");
        #[derive(serde::Deserialize)]
        struct Member<'a> {
            #[serde(borrow)]
            event: &'a serde_json::value::RawValue,
        }
        let member: Member<'_> = serde_json::from_str(line).expect("an accepted line is JSON");
        assert_eq!(&line[span], member.event.get(), "{line}");
    }
    r
}

fn reject(line: &str, at: Option<i64>, reason: Reason, needle: &str) -> Rejection {
    let (got_at, r) = parse(line).expect_err(line);
    assert_eq!(got_at, at, "{line}: {r}");
    assert_eq!(r.reason, reason, "{line}: {r}");
    assert!(r.detail.contains(needle), "{line}: detail {:?} lacks {needle:?}", r.detail);
    r
}

const AT: Option<i64> = Some(1_700_000_000_250);

#[test]
fn event_line_parses_like_its_event() {
    let l = parse(&event_line(EVENT)).unwrap();
    assert_eq!(l.at, 1_700_000_000_250);
    assert_eq!(l.arrival, Arrival::Event(parse_event(EVENT).unwrap()));
}

#[test]
fn event_line_with_features_parses_like_its_event_on_every_path() {
    let features = ", \"features\": {\"velocity_rms\": 4.62, \"env_bpfi\": 31.4}}";
    let with = EVENT.strip_suffix('}').unwrap().to_owned() + features;
    let l = parse(&event_line(&with)).unwrap();
    let Arrival::Event(e) = &l.arrival else { panic!("{l:?}") };
    assert_eq!(e, &parse_event(&with).unwrap());
    assert!(e.features.is_some());
    // The plain line (no spaces) goes the fastest way, with the same result.
    let plain: String = event_line(&with).chars().filter(|c| *c != ' ').collect();
    assert!(plain_line(&plain, &mut Vec::new()).is_some(), "{plain}");
    assert_eq!(parse(&plain).unwrap(), l);
    let nan = with.replace("31.4", "NaN");
    let r = reject(&event_line(&nan), AT, Reason::NonFiniteValue, "features.env_bpfi is NaN");
    assert_eq!(Err(r), parse_event(&nan));
}

#[test]
fn tick_line() {
    let l = parse("{\"at\": 1700000060000, \"kind\": \"tick\"}").unwrap();
    assert_eq!(l, TraceLine { at: 1_700_000_060_000, arrival: Arrival::Tick });
    // Key order and whitespace do not matter; CRLF's \r is whitespace.
    let l = parse("  {\"kind\":\"tick\",\"at\":-3}\r").unwrap();
    assert_eq!(l.at, -3);
}

#[test]
fn samples_line() {
    let l = parse(&samples(|_| {})).unwrap();
    let Arrival::Samples(s) = l.arrival else { panic!("not samples") };
    assert_eq!(l.at, 1_700_000_001_000);
    assert_eq!(s.machine, "press-7");
    assert_eq!(s.sensor, "s1");
    assert_eq!(s.t0_ms, 1_700_000_000_000);
    assert_eq!(s.rate_hz, 3200.0);
    assert_eq!(s.unit, Unit::G);
    assert_eq!(s.axis.as_deref(), Some("z"));
    assert_eq!(s.clock, None);
    assert_eq!(s.data, vec![0.01, -0.02, 0.0, 3.0]);
    let l = parse(&samples(|m| {
        m.remove("axis");
        m.insert("clock".into(), json!({"state": "holdover", "err_ms": 40}));
        m.insert("unit".into(), json!("m/s2"));
        m.insert("rate_hz".into(), json!(12.5));
    }))
    .unwrap();
    let Arrival::Samples(s) = l.arrival else { panic!("not samples") };
    assert_eq!(s.axis, None);
    assert_eq!(s.clock, Some(ClockEvidence { state: ClockState::Holdover, err_ms: Some(40) }));
    assert_eq!((s.unit, s.rate_hz), (Unit::Ms2, 12.5));
}

// --- one reason at a time -------------------------------------------------------------

#[test]
fn malformed_json() {
    let broken = event_line(EVENT).replace("\"good\"}", "\"good\",}");
    reject(&broken, AT, Reason::MalformedJson, "line 1");
    reject("hello", None, Reason::MalformedJson, "expected value");
    reject("", None, Reason::MalformedJson, "EOF");
    reject("[1]", None, Reason::MalformedJson, "JSON object");
    // `at` is salvaged only from a plain leading `{"at": <int>,`.
    reject("{\"kind\": \"tick\", \"at\": 5,", None, Reason::MalformedJson, "EOF");
    reject("{\"at\": 5 , \"kind\"", Some(5), Reason::MalformedJson, "EOF");
    reject("{\"at\": 05, \"kind\": 1}", None, Reason::MalformedJson, "line 1");
    reject("{\"at\": 1, \"at\": 2}", Some(1), Reason::MalformedJson, "duplicate key \"at\"");
    let dup = "{\"at\": 7, \"kind\": \"tick\", \"kind\": \"tick\"}";
    reject(dup, Some(7), Reason::MalformedJson, "duplicate key \"kind\"");
    // A duplicate inside the event is the event's rejection, with the line's `at`.
    let dup = event_line(&EVENT.replace("\"seq\": 1,", "\"seq\": 1, \"seq\": 2,"));
    reject(&dup, AT, Reason::MalformedJson, "duplicate key \"seq\"");
    let mut bytes = b"{\"at\": 9, \"kind\": \"tick\", \"x\": \"".to_vec();
    bytes.extend_from_slice(&[0xff, b'"', b'}']);
    let (at, r) = parse_line(&bytes).unwrap_err();
    assert_eq!((at, r.reason), (Some(9), Reason::MalformedJson));
    assert!(r.detail.contains("not UTF-8"), "{r}");
}

#[test]
fn missing_fields() {
    reject("{\"kind\": \"tick\"}", None, Reason::MissingField, "\"at\"");
    reject("{\"at\": 1}", Some(1), Reason::MissingField, "\"kind\"");
    reject("{\"at\": 1, \"kind\": \"event\"}", Some(1), Reason::MissingField, "\"event\"");
    reject(&event_line(&EVENT.replace("\"seq\": 1,", "")), AT, Reason::MissingField, "\"seq\"");
    for f in ["machine", "sensor", "t0_ms", "rate_hz", "unit", "data"] {
        let line = samples(|m| drop(m.remove(f)));
        reject(&line, Some(1_700_000_001_000), Reason::MissingField, &format!("\"{f}\""));
    }
    let clock = samples(|m| drop(m.insert("clock".into(), json!({"err_ms": 1}))));
    reject(&clock, Some(1_700_000_001_000), Reason::MissingField, "clock.state");
}

#[test]
fn bad_types() {
    reject("{\"at\": \"1\", \"kind\": \"tick\"}", None, Reason::BadType, "at: expected");
    reject("{\"at\": 1.5, \"kind\": \"tick\"}", None, Reason::BadType, "at");
    reject("{\"at\": 1e999, \"kind\": \"tick\"}", None, Reason::BadType, "at");
    reject("{\"at\": 1, \"kind\": 3}", Some(1), Reason::BadType, "kind: expected a string");
    let not_obj = "{\"at\": 1, \"kind\": \"event\", \"event\": [1]}";
    reject(not_obj, Some(1), Reason::BadType, "event: expected an object, found an array");
    let nan = "{\"at\": 1, \"kind\": \"event\", \"event\": NaN}";
    reject(nan, Some(1), Reason::BadType, "event: expected an object, found NaN");
    let s = Some(1_700_000_001_000);
    let set = |k: &'static str, v: Value| samples(move |m| drop(m.insert(k.into(), v)));
    for rate in [json!(0), json!(-1), json!(2_000_000), json!("3200"), Value::Null] {
        reject(&set("rate_hz", rate), s, Reason::BadType, "rate_hz");
    }
    let inf = set("rate_hz", json!(1)).replace("\"rate_hz\":1", "\"rate_hz\":Infinity");
    reject(
        &inf,
        s,
        Reason::BadType,
        "rate_hz: expected a number > 0 and <= 1000000, found Infinity",
    );
    reject(&set("unit", json!("furlongs")), s, Reason::BadType, "unit: unknown value");
    reject(&set("data", json!([])), s, Reason::BadType, "data: expected a non-empty array");
    reject(&set("data", json!([1, "a", 2])), s, Reason::BadType, "data[1]: expected a number");
    reject(&set("data", json!([1, [2]])), s, Reason::BadType, "data[1]");
    reject(&set("data", json!({"0": 1})), s, Reason::BadType, "data: expected an array");
    reject(&set("t0_ms", json!(1.5)), s, Reason::BadType, "t0_ms");
    reject(&set("axis", json!(3)), s, Reason::BadType, "axis");
    reject(&set("machine", json!(7)), s, Reason::BadType, "machine");
    reject(&set("clock", json!({"state": "late"})), s, Reason::BadType, "clock.state");
    reject(&event_line(&EVENT.replace("\"accel_rms\"", "\"foo\"")), AT, Reason::BadType, "metric");
    // A type error beats a non-finite sample.
    let both = set("data", json!([1, "a", 2])).replace("2]", "NaN]");
    reject(&both, s, Reason::BadType, "data[1]");
}

#[test]
fn unknown_schema() {
    let e = EVENT.replace("\"schema\": 1", "\"schema\": 3");
    reject(&event_line(&e), AT, Reason::UnknownSchema, "schema 3");
}

#[test]
fn non_finite_values() {
    let s = Some(1_700_000_001_000);
    let data = samples(|_| {}).replace("0,3]", "0,NaN]");
    reject(&data, s, Reason::NonFiniteValue, "data[3] is NaN");
    let data = samples(|_| {}).replace("[0.01", "[-Infinity");
    reject(&data, s, Reason::NonFiniteValue, "data[0] is -Infinity");
    let data = samples(|_| {}).replace("0,3]", "0,1e999]");
    reject(&data, s, Reason::NonFiniteValue, "data[3]");
    let e = event_line(&EVENT.replace("0.5", "NaN"));
    let r = reject(&e, AT, Reason::NonFiniteValue, "value is NaN");
    assert_eq!(Err(r), parse_event(&EVENT.replace("0.5", "NaN")));
    let e = event_line(&EVENT.replace("0.5", "Infinity"));
    reject(&e, AT, Reason::NonFiniteValue, "value is Infinity");
}

#[test]
fn non_finite_event_near_the_size_limit_is_measured_on_its_own_bytes() {
    // The fallback's sentinel is longer than `NaN`; the event must still be measured as sent.
    let padded = |n: usize| {
        let e = EVENT.replace("gw-01.s1.1", &"i".repeat(n)).replace("0.5", "NaN");
        (e.len(), event_line(&e))
    };
    let base = padded(0).0;
    let fits = MAX_EVENT_BYTES - base;
    let (len, line) = padded(fits);
    assert_eq!(len, MAX_EVENT_BYTES);
    // At the limit the event is judged (its long id fails before its value is looked at).
    reject(&line, AT, Reason::BadIdentifier, "event_id");
    let (len, line) = padded(fits + 1);
    assert_eq!(len, MAX_EVENT_BYTES + 1);
    reject(&line, AT, Reason::Oversized, "16385 bytes");
    // Same with whitespace padding and a valid id: exactly at the limit is not oversized.
    let e = EVENT.replace("0.5", "NaN");
    let e = format!("{e}{}", " ".repeat(MAX_EVENT_BYTES - e.len()));
    let line =
        format!("{{\"at\": 1700000000250, \"kind\": \"event\", \"event\": {e}, \"x\": NaN}}");
    reject(&line, AT, Reason::UnknownField, "\"x\"");
    let line = event_line(&e);
    reject(&line, AT, Reason::NonFiniteValue, "value is NaN");
}

#[test]
fn negative_value() {
    let e = event_line(&EVENT.replace("0.5", "-0.5"));
    reject(&e, AT, Reason::NegativeValue, "value");
}

#[test]
fn unit_mismatch() {
    let s = Some(1_700_000_001_000);
    let line = samples(|m| drop(m.insert("unit".into(), json!("mm/s"))));
    // The refusal names the line a device's own velocities belong in.
    reject(&line, s, Reason::UnitMismatch, "mm/s");
    reject(&line, s, Reason::UnitMismatch, "a \"readings\" line");
    let e = event_line(&EVENT.replace("\"g\"", "\"mm/s\""));
    reject(&e, AT, Reason::UnitMismatch, "accel_rms");
}

#[test]
fn bad_identifiers() {
    let s = Some(1_700_000_001_000);
    let line = samples(|m| drop(m.insert("machine".into(), json!("press 7"))));
    reject(&line, s, Reason::BadIdentifier, "machine");
    let line = samples(|m| drop(m.insert("sensor".into(), json!(""))));
    reject(&line, s, Reason::BadIdentifier, "sensor is empty");
    let e = event_line(&EVENT.replace("\"s1\"", "\"s/1\""));
    reject(&e, AT, Reason::BadIdentifier, "sensor");
}

#[test]
fn oversized() {
    let mut line = b"{\"at\": 1, \"kind\": \"tick\", \"pad\": \"".to_vec();
    line.resize(MAX_LINE_BYTES - 2, b'x');
    line.extend_from_slice(b"\"}");
    assert_eq!(line.len(), MAX_LINE_BYTES);
    let (at, r) = parse_line(&line).unwrap_err();
    assert_eq!((at, r.reason), (Some(1), Reason::UnknownField));
    line.insert(40, b'x');
    let (at, r) = parse_line(&line).unwrap_err();
    assert_eq!((at, r.reason), (None, Reason::Oversized));
    assert!(r.detail.contains("line is 16777217 bytes"), "{r}");
    let big = EVENT.replace("gw-01.s1.1", &"i".repeat(MAX_EVENT_BYTES));
    reject(&event_line(&big), AT, Reason::Oversized, "event object is");
}

#[test]
fn clock_implausible() {
    let line = samples(|m| drop(m.insert("t0_ms".into(), json!(1000))));
    reject(&line, Some(1_700_000_001_000), Reason::ClockImplausible, "t0_ms 1000");
    let e = event_line(&EVENT.replace("1700000000000", "1000"));
    reject(&e, AT, Reason::ClockImplausible, "ts_ms 1000");
}

#[test]
fn unknown_fields() {
    reject(
        "{\"at\": 1, \"kind\": \"tick\", \"note\": 1}",
        Some(1),
        Reason::UnknownField,
        "\"note\"",
    );
    let r = reject(
        "{\"at\": 1, \"kind\": \"tick\", \"data\": [1]}",
        Some(1),
        Reason::UnknownField,
        "\"data\"",
    );
    assert!(r.detail.contains("kind \"tick\""), "{r}");
    let line = samples(|m| drop(m.insert("event".into(), json!({}))));
    reject(&line, Some(1_700_000_001_000), Reason::UnknownField, "\"event\"");
    let line = samples(|m| drop(m.insert("clock".into(), json!({"state": "synced", "x": 1}))));
    reject(&line, Some(1_700_000_001_000), Reason::UnknownField, "clock.x");
    let e = event_line(&EVENT.replace("{\"event_id\"", "{\"extra\": 1, \"event_id\""));
    reject(&e, AT, Reason::UnknownField, "\"extra\"");
    let e = event_line(EVENT).replace("{\"at\"", "{\"src\": \"x\", \"at\"");
    reject(&e, AT, Reason::UnknownField, "\"src\"");
}

#[test]
fn unknown_kind() {
    let r = reject("{\"at\": 4, \"kind\": \"reboot\"}", Some(4), Reason::UnknownKind, "\"reboot\"");
    assert!(r.detail.contains("kind"));
}

#[test]
fn salvage_at_is_strict() {
    assert_eq!(salvage_at(b"{\"at\":12,"), Some(12));
    assert_eq!(salvage_at(b" { \"at\" : -12 }"), Some(-12));
    assert_eq!(salvage_at(b"{\"at\": 0,"), Some(0));
    assert_eq!(salvage_at(b"{\"at\": 1.5,"), None);
    assert_eq!(salvage_at(b"{\"at\": 99999999999999999999,"), None);
    assert_eq!(salvage_at(b"{\"at\": 12"), None);
    assert_eq!(salvage_at(b"{\"at\": -,"), None);
    assert_eq!(salvage_at(b""), None);
}

#[test]
fn poison_fixture_gives_one_line_per_reason() {
    let text = include_str!("../../../fixtures/traces/poison.jsonl");
    let lines: Vec<&str> = text.lines().collect();
    let mut reasons = Vec::new();
    let mut prev_at = 0;
    let mut events = 0;
    for (i, line) in lines.iter().enumerate() {
        let at = match parse(line) {
            Ok(l) => {
                if let Arrival::Event(e) = &l.arrival {
                    events += 1;
                    assert!((e.ts_ms - 1_700_000_000_000).abs() < 60_000);
                }
                if i + 1 == lines.len() {
                    assert_eq!(l.arrival, Arrival::Tick);
                }
                l.at
            }
            Err((at, r)) => {
                reasons.push(r.reason);
                at.unwrap_or_else(|| panic!("line {i}: no at ({r})"))
            }
        };
        assert_eq!(at, 1_700_000_000_000 + i as i64, "line {i}");
        assert!(at > prev_at);
        prev_at = at;
    }
    assert_eq!(events, 1);
    reasons.sort();
    let mut expected = vec![
        Reason::MalformedJson,
        Reason::MissingField,
        Reason::BadType,
        Reason::UnknownSchema,
        Reason::NonFiniteValue,
        Reason::NegativeValue,
        Reason::UnitMismatch,
        Reason::BadIdentifier,
        Reason::Oversized,
        Reason::ClockImplausible,
        Reason::UnknownField,
        Reason::UnknownKind,
    ];
    expected.sort();
    assert_eq!(reasons, expected);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_line(&b);
        }

        #[test]
        fn mutated_lines_never_panic_and_paths_agree(
            which in 0usize..2,
            pos in 0usize..400,
            insert in proptest::sample::select(vec![
                "", "NaN", "-Infinity", "\"", "{", "}", ",", "1e999", "\\u0000", "[", "null"
            ]),
            cut in 0usize..6,
        ) {
            let line = if which == 0 { event_line(EVENT) } else { samples(|_| {}) };
            let pos = pos.min(line.len());
            let end = (pos + cut).min(line.len());
            let s = format!("{}{}{}", &line[..pos], insert, &line[end..]);
            let _ = parse(&s);
        }
    }
}

#[test]
fn an_event_line_takes_its_strings_from_the_spares() {
    let line = event_line(EVENT);
    let mut spare: Vec<String> = (0..4).map(|i| "old".repeat(i * 20)).collect();
    let got = parse_line_reusing(line.as_bytes(), &mut spare).unwrap();
    assert_eq!(got, parse_line(line.as_bytes()).unwrap());
    assert_eq!(spare.len(), 1, "event_id, machine and sensor each took one");
    // A tick line and a rejected line take none.
    parse_line_reusing(b"{\"at\": 1, \"kind\": \"tick\"}", &mut spare).unwrap();
    parse_line_reusing(b"{\"at\": 1}", &mut spare).unwrap_err();
    assert_eq!(spare.len(), 1);
}

/// The lines a trace is mostly made of (as `gen_trace` and linegate write them) take the scanner,
/// and it reads them as the exact path does; a line with an escape is left to the other paths.
#[test]
fn plain_lines_are_read_by_the_scanner_as_the_exact_path_reads_them() {
    let event = r#"{"at":1700000000055,"event":{"clock":{"err_ms":2,"state":"synced"},"event_id":"gw-bench.machine-008.s0.1","machine":"machine-008","metric":"accel_rms","quality":"good","schema":1,"sensor":"s0","seq":1,"ts_ms":1700000000000,"unit":"g","value":0.3152},"kind":"event"}"#;
    let tick = r#"{"at":1700000000000,"kind":"tick"}"#;
    for line in [event, tick, &event_line(EVENT)] {
        let got = plain_line(line, &mut Vec::new()).map(|(tl, _)| tl);
        assert!(got.is_some(), "not read by the scanner: {line}");
        assert_eq!(got.map(Ok), Some(exact_line(line.as_bytes(), line)), "{line}");
    }
    // The event lines' spans are given (and checked against serde_json's by `parse`); a line
    // with spaces around its event keeps them out of the span.
    for line in [event, &event_line(EVENT), &event_line(&format!(" \n{EVENT}\t "))] {
        parse(line).unwrap();
        let span = parse_line_and_event_span(line.as_bytes()).1.expect("a span");
        let text = &line[span];
        assert!(text.starts_with('{') && text.ends_with('}'), "{line}");
    }
    assert_eq!(parse_line_and_event_span(tick.as_bytes()).1, None);
    let escaped = tick.replace("tick", "t\\u0069ck");
    assert_eq!(plain_line(&escaped, &mut Vec::new()).map(|(tl, _)| tl), None);
    assert_eq!(parse(&escaped).unwrap().arrival, Arrival::Tick);
    for other in
        [r#"{"at":1,"kind":"tick","event":{}}"#, r#"{"at":1,"kind":"event"}"#, r#"{"kind":"tick"}"#]
    {
        assert_eq!(plain_line(other, &mut Vec::new()).map(|(tl, _)| tl), None, "{other}");
        parse(other).unwrap_err();
    }
}

#[test]
fn readings_line_holds_velocities_in_mm_per_s() {
    let s = Some(1_700_000_001_000);
    let readings = |f: &dyn Fn(&mut serde_json::Map<String, Value>)| {
        samples(|m| {
            m.insert("kind".into(), json!("readings"));
            m.insert("unit".into(), json!("mm/s"));
            m.insert("data".into(), json!([2.5, 0, 7.25]));
            f(m);
        })
    };
    let l = parse(&readings(&|_| {})).unwrap();
    let Arrival::Readings(r) = l.arrival else { panic!("not readings") };
    assert_eq!((r.sensor.as_str(), r.unit, r.rate_hz), ("s1", Unit::MmS, 3200.0));
    assert_eq!(r.data, vec![2.5, 0.0, 7.25]);
    // Acceleration is a samples line; a velocity is never negative; events do not belong here.
    let g = readings(&|m| drop(m.insert("unit".into(), json!("g"))));
    reject(&g, s, Reason::UnitMismatch, "raw acceleration is a \"samples\" line");
    let negative = readings(&|m| drop(m.insert("data".into(), json!([1, -0.5]))));
    reject(&negative, s, Reason::NegativeValue, "data[1] is -0.5");
    let event = readings(&|m| drop(m.insert("event".into(), json!({}))));
    reject(&event, s, Reason::UnknownField, "not defined for kind \"readings\"");
    let other = samples(|m| drop(m.insert("kind".into(), json!("reading"))));
    reject(&other, s, Reason::UnknownKind, "\"readings\"");
}
