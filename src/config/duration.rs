//! Human durations (`"500ms"`, `"5s"`, `"2m"`) as whole milliseconds.

/// Parses a humantime duration into whole milliseconds.
///
/// Errors (as a reason text, the caller adds key and file) when the text is not a duration, is
/// not a whole number of milliseconds, or does not fit an `i64`.
pub(super) fn parse_ms(text: &str) -> Result<i64, String> {
    let d = humantime::parse_duration(text).map_err(|e| {
        format!("invalid duration {text:?} ({e}); expected e.g. \"500ms\", \"5s\", \"2m\"")
    })?;
    if d.subsec_nanos() % 1_000_000 != 0 {
        return Err(format!("duration {text:?} is not a whole number of milliseconds"));
    }
    i64::try_from(d.as_millis()).map_err(|_| format!("duration {text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_human_durations() {
        assert_eq!(parse_ms("500ms"), Ok(500));
        assert_eq!(parse_ms("5s"), Ok(5_000));
        assert_eq!(parse_ms("2m"), Ok(120_000));
        assert_eq!(parse_ms("10m"), Ok(600_000));
        assert_eq!(parse_ms("1m 30s"), Ok(90_000));
        assert_eq!(parse_ms("0s"), Ok(0));
    }

    #[test]
    fn rejects_bad_text_fractions_and_overflow() {
        assert!(parse_ms("").is_err());
        assert!(parse_ms("5").is_err());
        assert!(parse_ms("five seconds").unwrap_err().contains("five seconds"));
        assert!(parse_ms("1500us").unwrap_err().contains("whole number of milliseconds"));
        assert!(parse_ms("600000000000years").is_err());
    }
}
