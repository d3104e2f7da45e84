use super::*;
use crate::event::parse::exact_event;
use proptest::prelude::*;

/// The event as the scanner reads it, when it reads all of `raw`.
fn scanned(raw: &str) -> Option<Event> {
    let mut scan = Scan::new(raw);
    let event = scan.event(None)?;
    scan.end().map(|()| event)
}

fn number(text: &str) -> Option<f64> {
    let mut scan = Scan::new(text);
    let x = scan.f64()?;
    scan.end().map(|()| x)
}

const PLAIN: &str = r#"{"clock":{"err_ms":2,"state":"synced"},"event_id":"gw-bench.machine-008.s0.1","machine":"machine-008","metric":"accel_rms","quality":"good","schema":1,"sensor":"s0","seq":1,"ts_ms":1700000000000,"unit":"g","value":0.3152}"#;

#[test]
fn a_plain_event_is_read_as_the_exact_path_reads_it() {
    let event = scanned(PLAIN).expect("the scanner reads a plain event");
    assert_eq!(Ok(event), exact_event(PLAIN));
    let spaced = PLAIN.replace(',', " ,\n\t").replace(':', " : ").replace('{', "{ \r");
    assert_eq!(scanned(&spaced).map(Ok), Some(exact_event(PLAIN)), "{spaced}");
    let with_samples = PLAIN.replace(
        "\"seq\":1",
        "\"seq\":1,\"samples\":{\"block_seq\":7,\"from_ms\":5,\"to_ms\":9},\"replayed\":true",
    );
    let event = scanned(&with_samples).expect("samples and replayed");
    assert_eq!(event.samples, Some(SampleRef { block_seq: 7, from_ms: 5, to_ms: 9 }));
    assert_eq!(Ok(event), exact_event(&with_samples));
    let nulls = PLAIN
        .replace("\"err_ms\":2", "\"err_ms\":null")
        .replace("\"seq\":1", "\"seq\":1,\"samples\":null,\"replayed\":null");
    assert_eq!(scanned(&nulls).map(Ok), Some(exact_event(&nulls)));
}

#[test]
fn what_the_scanner_does_not_read_is_left_to_the_other_paths() {
    let cases = [
        ("\"seq\":1", "\"seq\":1,\"seq\":2", "a repeated key"),
        ("\"seq\":1", "\"seq\":1,\"extra\":2", "an unknown key"),
        ("\"seq\":1", "\"s\\u0065q\":1", "an escaped key"),
        ("\"s0\"", "\"s\\u0030\"", "an escaped value"),
        ("\"s0\"", "\"s0\u{1}\"", "a control character"),
        ("\"seq\":1", "\"seq\":01", "a leading zero"),
        ("\"seq\":1", "\"seq\":1.0", "an integer written with a fraction"),
        ("\"seq\":1", "\"seq\":-1", "a negative integer"),
        ("0.3152", "3152e-4", "an exponent"),
        ("0.3152", "0.31520000000000001", "more than 15 digits"),
        ("0.3152", "-0.0", "a negative zero"),
        ("0.3152", "3.", "a point without digits"),
        ("\"seq\":1", "\"seq\":18446744073709551616", "past u64"),
        ("\"err_ms\":2", "\"err_ms\":4294967296", "past u32"),
        ("\"schema\":1", "\"schema\":2", "schema 2"),
        ("\"machine-008\"", "\"machine 008\"", "a bad identifier"),
    ];
    for (from, to, what) in cases {
        let raw = PLAIN.replacen(from, to, 1);
        assert_ne!(raw, PLAIN, "{what}: the case changes nothing");
        assert_eq!(scanned(&raw), None, "{what}: {raw}");
    }
    assert_eq!(scanned(&format!("{PLAIN} x")), None, "trailing text");
    assert_eq!(scanned(&PLAIN[..PLAIN.len() - 1]), None, "cut short");
}

#[test]
fn numbers_are_read_as_serde_json_reads_them() {
    for text in ["0", "7", "0.1", "0.3152", "1.5", "123456789012345", "0.00000000000001", "9.99"] {
        assert_eq!(number(text), serde_json::from_str::<f64>(text).ok(), "{text}");
    }
    for text in ["1e3", "01", "1.", ".5", "-1", "1234567890123456", "NaN"] {
        assert_eq!(number(text), None, "{text}");
    }
}

proptest! {
    #[test]
    fn the_string_end_is_the_first_quote_backslash_or_control_byte(
        b in proptest::collection::vec(
            prop_oneof![4 => 0x20u8..0x7f, 1 => Just(b'"'), 1 => Just(b'\\'), 1 => 0u8..0x20, 1 => 0x7fu8..=0xff],
            0..40,
        ),
    ) {
        let naive = b.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20);
        prop_assert_eq!(string_end(&b), naive);
    }

    #[test]
    fn decimals_of_up_to_15_digits_equal_serde_jsons(m in 0u64..1_000_000_000_000_000, point in 0usize..16) {
        let digits = m.to_string();
        let text = if point == 0 || point >= digits.len() {
            digits.clone()
        } else {
            format!("{}.{}", &digits[..digits.len() - point], &digits[digits.len() - point..])
        };
        let expected: f64 = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(number(&text).map(f64::to_bits), Some(expected.to_bits()), "{}", text);
    }

    #[test]
    fn small_decimals_with_leading_zeros_equal_serde_jsons(m in 1u64..100_000, zeros in 0usize..9) {
        let text = format!("0.{}{m}", "0".repeat(zeros));
        let expected: f64 = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(number(&text).map(f64::to_bits), Some(expected.to_bits()), "{}", text);
    }

    /// Every event the scanner reads, the exact path reads the same; and it reads every plainly
    /// written valid event (so this cannot pass by refusing everything).
    #[test]
    fn scanned_events_equal_the_exact_paths(
        seq in 0u64..u64::MAX,
        ts in 946_684_800_000i64..4_000_000_000_000,
        value in 0u64..10_000_000,
        decimals in 0usize..6,
        err in proptest::option::of(0u32..u32::MAX),
        order in Just((0..11).collect::<Vec<usize>>()).prop_shuffle(),
        space in proptest::sample::select(vec!["", " ", "\n", "\t ", "\r\n"]),
    ) {
        let value = if decimals == 0 {
            value.to_string()
        } else {
            format!("{}.{:0width$}", value / 10u64.pow(decimals as u32), value % 10u64.pow(decimals as u32), width = decimals)
        };
        let err = err.map_or("null".to_owned(), |e| e.to_string());
        let fields = [
            format!("\"event_id\":{space}\"gw.m1.s1.{seq}\""),
            "\"machine\":\"m-1\"".to_owned(),
            "\"sensor\":\"s_1\"".to_owned(),
            format!("\"seq\":{seq}"),
            format!("\"ts_ms\":{ts}"),
            format!("\"clock\":{{\"state\":\"holdover\",{space}\"err_ms\":{err}}}"),
            "\"metric\":\"velocity_rms\"".to_owned(),
            format!("\"value\":{space}{value}"),
            "\"unit\":\"mm/s\"".to_owned(),
            "\"schema\":1".to_owned(),
            "\"quality\":\"uncertain\"".to_owned(),
        ];
        let body: Vec<&str> = order.iter().map(|&i| fields[i].as_str()).collect();
        let raw = format!("{space}{{{}}}{space}", body.join(&format!(",{space}")));
        let got = scanned(&raw);
        prop_assert!(got.is_some(), "not read: {}", raw);
        prop_assert_eq!(got.map(Ok), Some(exact_event(&raw)), "{}", raw);
    }
}
