//! Frequencies (`"2kHz"`, `"500Hz"`, or a plain number of hertz) as hertz.

/// Parses a frequency: a TOML number (hertz), or a string of a decimal number followed by `Hz`
/// or `kHz` (times 1000), a space allowed between. Finite and > 0.
///
/// Errors (as a reason text, the caller adds key and file) for anything else.
pub(super) fn parse_hz(value: &toml::Value) -> Result<f64, String> {
    let hz = match value {
        toml::Value::Integer(n) => *n as f64,
        toml::Value::Float(x) => *x,
        toml::Value::String(s) => parse_text(s)?,
        other => {
            return Err(format!(
                "expected a frequency like \"2kHz\", \"500Hz\" or a number of hertz, found {}",
                super::size::shown(other)
            ))
        }
    };
    if hz.is_finite() && hz > 0.0 {
        Ok(hz)
    } else {
        Err(format!(
            "a frequency must be a finite number of hertz > 0, got {}",
            super::size::shown(value)
        ))
    }
}

fn parse_text(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let bad = || format!("invalid frequency {text:?}; expected e.g. \"2kHz\" or \"500Hz\"");
    let (number, scale) = if let Some(n) = t.strip_suffix("kHz") {
        (n, 1000.0)
    } else if let Some(n) = t.strip_suffix("Hz") {
        (n, 1.0)
    } else {
        return Err(bad());
    };
    let number = number.trim_end();
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(bad());
    }
    let x: f64 = number.parse().map_err(|_| bad())?;
    Ok(x * scale)
}

/// A frequency for people: `29.95 Hz`, `1600 Hz`, `5000 Hz`, `12 kHz`, `25.6 kHz`.
pub(crate) fn show_hz(hz: f64) -> String {
    if hz >= 10_000.0 {
        format!("{} kHz", trim(hz / 1000.0))
    } else {
        format!("{} Hz", trim(hz))
    }
}

/// At most three decimals, trailing zeros dropped.
fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: &str) -> Result<f64, String> {
        parse_hz(&toml::Value::String(t.into()))
    }

    #[test]
    fn parses_units_and_numbers() {
        assert_eq!(s("2kHz"), Ok(2000.0));
        assert_eq!(s("2.5 kHz"), Ok(2500.0));
        assert_eq!(s("500Hz"), Ok(500.0));
        assert_eq!(s("29.95 Hz"), Ok(29.95));
        assert_eq!(parse_hz(&toml::Value::Integer(5000)), Ok(5000.0));
        assert_eq!(parse_hz(&toml::Value::Float(812.5)), Ok(812.5));
    }

    #[test]
    fn rejects_what_is_not_a_frequency() {
        for bad in ["", "2k", "2 khz", "2MHz", "-1Hz", "1e3Hz", "Hz", "0Hz"] {
            assert!(s(bad).is_err(), "{bad:?}");
        }
        assert!(s("2 khz").unwrap_err().contains("2 khz"));
        assert!(parse_hz(&toml::Value::Integer(0)).unwrap_err().contains("> 0"));
        assert!(parse_hz(&toml::Value::Float(f64::NAN)).is_err());
        assert!(parse_hz(&toml::Value::Boolean(true)).unwrap_err().contains("frequency"));
    }

    #[test]
    fn shows_hertz_for_people() {
        assert_eq!(show_hz(2000.0), "2000 Hz");
        assert_eq!(show_hz(1600.0), "1600 Hz");
        assert_eq!(show_hz(12_000.0), "12 kHz");
        assert_eq!(show_hz(25_600.0), "25.6 kHz");
        assert_eq!(show_hz(800.0), "800 Hz");
        assert_eq!(show_hz(1797.0 / 60.0), "29.95 Hz");
    }
}
