//! Human sizes (`"4GiB"`, `"512MiB"`, `"2GB"`, or a plain integer) as bytes.

/// Parses a size: a TOML integer, or a string of a whole number with an optional unit `B`, `KB`,
/// `MB`, `GB` (powers of 1000) or `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024), space allowed.
///
/// Errors (as a reason text, the caller adds key and file) for anything else, negative numbers
/// and sizes that do not fit a `u64`.
pub(super) fn parse_bytes(value: &toml::Value) -> Result<u64, String> {
    let text = match value {
        toml::Value::Integer(n) => {
            return u64::try_from(*n).map_err(|_| format!("size {n} must not be negative"))
        }
        toml::Value::String(s) => s.trim(),
        other => return Err(format!("expected a size like \"4GiB\" or bytes, found {other}")),
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
        assert!(parse_bytes(&toml::Value::Boolean(true)).is_err());
    }
}
