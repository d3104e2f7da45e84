//! Times for people (docs/contracts.md section 11): every command's text output writes an instant
//! as RFC 3339 UTC with milliseconds (`2026-01-01T00:02:05.000Z`), never as raw epoch ms. The
//! `--json` forms keep integer ms and do not use this.

use chrono::{DateTime, SecondsFormat};

/// Unix milliseconds as RFC 3339 UTC with milliseconds: `1767225725000` →
/// `2026-01-01T00:02:05.000Z`. Years past 9999 get a sign (`+10000-…`), as RFC 3339 has no form
/// for them; an instant outside chrono's range (about ±262 000 years) is said in words.
pub fn time(ms: i64) -> String {
    match DateTime::from_timestamp_millis(ms) {
        Some(t) => t.to_rfc3339_opts(SecondsFormat::Millis, true),
        None => format!("{ms} ms from 1970-01-01T00:00:00.000Z (out of the calendar's range)"),
    }
}

/// An optional instant: its time, or `none`.
pub fn time_or(ms: Option<i64>, none: &str) -> String {
    ms.map_or_else(|| none.to_owned(), time)
}

/// A duration in words: `850 ms`, `12.5 s`, `4 min 10 s`, `3 h 2 min`, `2 d 4 h`.
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    let s = ms / 1000;
    match ms {
        _ if ms < 1000 => format!("{ms} ms"),
        _ if ms < 60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ if s < 3600 => format!("{} min {} s", s / 60, s % 60),
        _ if s < 86_400 => format!("{} h {} min", s / 3600, (s % 3600) / 60),
        _ => format!("{} d {} h", s / 86_400, (s % 86_400) / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_words() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(12_500), "12.5 s");
        assert_eq!(duration(250_000), "4 min 10 s");
        assert_eq!(duration(3 * 3_600_000 + 120_000), "3 h 2 min");
        assert_eq!(duration(2 * 86_400_000 + 4 * 3_600_000), "2 d 4 h");
    }

    #[test]
    fn the_epoch_and_the_contract_example() {
        assert_eq!(time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(time(1_767_225_725_000), "2026-01-01T00:02:05.000Z");
    }

    #[test]
    fn milliseconds_are_always_three_digits() {
        assert_eq!(time(1), "1970-01-01T00:00:00.001Z");
        assert_eq!(time(1_700_000_000_250), "2023-11-14T22:13:20.250Z");
        assert_eq!(time(1_700_000_000_999), "2023-11-14T22:13:20.999Z");
    }

    #[test]
    fn before_the_epoch() {
        assert_eq!(time(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(time(-86_400_000), "1969-12-31T00:00:00.000Z");
    }

    #[test]
    fn far_future_and_out_of_range() {
        assert_eq!(time(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
        assert!(time(253_402_300_800_000).starts_with("+10000-01-01T00:00:00.000"));
        assert_eq!(
            time(i64::MAX),
            "9223372036854775807 ms from 1970-01-01T00:00:00.000Z (out of the calendar's range)"
        );
        assert!(time(i64::MIN).contains("out of the calendar's range"));
    }

    #[test]
    fn optional_instants() {
        assert_eq!(time_or(None, "open"), "open");
        assert_eq!(time_or(Some(0), "open"), "1970-01-01T00:00:00.000Z");
    }
}
