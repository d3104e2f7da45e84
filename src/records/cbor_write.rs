//! CBOR items written by hand, in the shortest form ciborium writes them, for the two records
//! made once per event (an `accepted` ledger record, an event's outbox record): the same bytes
//! as serde and ciborium give, in a fraction of the instructions. Each user checks its bytes
//! against ciborium's on arbitrary records.

/// A CBOR head: major type `major` (0 unsigned, 1 negative, 2 bytes, 3 text, 5 map) and its
/// argument, in the shortest form.
pub(crate) fn head(out: &mut Vec<u8>, major: u8, n: u64) {
    let m = major << 5;
    match n {
        0..=23 => out.push(m | n as u8),
        24..=0xFF => out.extend_from_slice(&[m | 24, n as u8]),
        0x100..=0xFFFF => {
            out.push(m | 25);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xFFFF_FFFF => {
            out.push(m | 26);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        _ => {
            out.push(m | 27);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

/// A signed integer.
pub(crate) fn int(out: &mut Vec<u8>, v: i64) {
    match u64::try_from(v) {
        Ok(n) => head(out, 0, n),
        // -1 - n for a negative v: its bits inverted.
        Err(_) => head(out, 1, !v as u64),
    }
}

pub(crate) fn text(out: &mut Vec<u8>, s: &str) {
    head(out, 3, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// A byte string made of `parts`, one after the other.
pub(crate) fn bytes(out: &mut Vec<u8>, parts: &[&[u8]]) {
    head(out, 2, parts.iter().map(|p| p.len() as u64).sum());
    parts.iter().for_each(|p| out.extend_from_slice(p));
}

/// The head of a map of `len` entries.
pub(crate) fn map(out: &mut Vec<u8>, len: u64) {
    head(out, 5, len);
}
