//! Human sizes (`"4GiB"`, `"512MiB"`, `"2GB"`, or a plain integer) as bytes.

/// Parses a size: a TOML integer, or a string of a whole number with an optional unit `B`, `KB`,
/// `MB`, `GB` (powers of 1000) or `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024), space allowed.
///
/// Errors (as a reason text, the caller adds key and file) for anything else, negative numbers
/// and sizes that do not fit a `u64`.
/// A TOML value as a person wrote it, for error messages (`true`, `-3`, `"x"`, a date; arrays and
/// tables by kind): the `toml` crate's own formatting is its serializer, which is not built.
pub(super) fn shown(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("{s:?}"),
        toml::Value::Integer(n) => n.to_string(),
        toml::Value::Float(x) => x.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        toml::Value::Array(_) => "an array".into(),
        toml::Value::Table(_) => "a table".into(),
    }
}

pub(super) fn parse_bytes(value: &toml::Value) -> Result<u64, String> {
    let text = match value {
        toml::Value::Integer(n) => {
            return u64::try_from(*n).map_err(|_| format!("size {n} must not be negative"))
        }
        toml::Value::String(s) => s.trim(),
        other => {
            return Err(format!("expected a size like \"4GiB\" or bytes, found {}", shown(other)))
        }
    };
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let bad = || format!("invalid size {text:?}; expected e.g. \"4GiB\", \"512MiB\" or bytes");
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        _ => return Err(bad()),
    };
    n.checked_mul(scale).ok_or_else(|| format!("size {text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: &str) -> Result<u64, String> {
        parse_bytes(&toml::Value::String(t.into()))
    }

    #[test]
    fn parses_units_and_integers() {
        assert_eq!(s("4GiB"), Ok(4 << 30));
        assert_eq!(s("512 MiB"), Ok(512 << 20));
        assert_eq!(s("2GB"), Ok(2_000_000_000));
        assert_eq!(s("1000"), Ok(1000));
        assert_eq!(parse_bytes(&toml::Value::Integer(65_536)), Ok(65_536));
    }

    #[test]
    fn rejects_bad_sizes() {
        assert!(s("").is_err());
        assert!(s("4 gigs").unwrap_err().contains("4 gigs"));
        assert!(s("1.5GiB").is_err());
        assert!(s("99999999999TiB").unwrap_err().contains("too large"));
        assert!(parse_bytes(&toml::Value::Integer(-1)).unwrap_err().contains("negative"));
        assert_eq!(
            parse_bytes(&toml::Value::Boolean(true)).unwrap_err(),
            "expected a size like \"4GiB\" or bytes, found true"
        );
    }

    #[test]
    fn values_are_shown_as_written() {
        let v: toml::Table =
            toml::from_str("a = \"x\"\nb = 2.5\nc = [1]\nd = {}\ne = 1979-05-27").unwrap();
        let shown_of = |k: &str| shown(&v[k]);
        assert_eq!(
            ["a", "b", "c", "d", "e"].map(shown_of),
            ["\"x\"", "2.5", "an array", "a table", "1979-05-27"]
        );
    }
}
