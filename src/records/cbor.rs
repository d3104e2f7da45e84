//! The one encoding of the store's versioned records: a leading format-version byte, then CBOR.
//! CBOR is self-describing (maps with composite keys, optional fields, byte strings), so a field
//! added with a default still reads older values under the same version.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// CBOR of `value`, after `prefix` (the version byte of a versioned record; empty for a bare
/// snapshot).
pub fn encode<T: Serialize + ?Sized>(prefix: &[u8], value: &T) -> Vec<u8> {
    // Room for a typical record (ledger records are about 200 bytes, an event's outbox record
    // about 340), so the writer does not grow the vector from one byte up, once per doubling.
    let mut out = Vec::with_capacity(prefix.len() + 256);
    out.extend_from_slice(prefix);
    // Writing into a Vec cannot fail, and every record type serialises.
    if let Err(e) = ciborium::into_writer(value, &mut out) {
        unreachable!("CBOR encoding into memory failed: {e}");
    }
    out
}

/// CBOR without a version byte: what went wrong when it does not decode.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    ciborium::from_reader(bytes).map_err(|e| e.to_string())
}

/// A record written by [`encode`] with `[version]` as its prefix. The error names what was wrong:
/// the CBOR under the version, another version (`unknown {what} version N`), or no bytes at all.
pub fn decode_versioned<T: DeserializeOwned>(
    version: u8,
    what: &str,
    bytes: &[u8],
) -> Result<T, String> {
    match bytes {
        [v, rest @ ..] if *v == version => decode(rest).map_err(|e| format!("version {v}: {e}")),
        [v, ..] => Err(format!("unknown {what} version {v}")),
        [] => Err("empty value".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_round_trip_and_each_failure_named() {
        let bytes = encode(&[1], &("a", 7u32));
        assert_eq!(bytes[0], 1);
        assert_eq!(decode_versioned::<(String, u32)>(1, "x", &bytes).unwrap(), ("a".into(), 7));
        assert_eq!(
            decode_versioned::<(String, u32)>(2, "x", &bytes).unwrap_err(),
            "unknown x version 1"
        );
        assert_eq!(decode_versioned::<(String, u32)>(1, "x", &[]).unwrap_err(), "empty value");
        let cut = decode_versioned::<(String, u32)>(1, "x", &bytes[..bytes.len() - 1]).unwrap_err();
        assert!(cut.starts_with("version 1: "), "{cut}");
        assert_eq!(decode::<(String, u32)>(&encode(&[], &("b", 8u32))).unwrap(), ("b".into(), 8));
    }
}
