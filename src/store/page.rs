//! Pages: the records of one batch under one sled key, so that a checkpoint of a thousand events
//! writes one sled record per key space instead of a thousand (sled's per-record cost dominated
//! the durable path, docs/performance.md). A page is keyed by its first record's sequence; its
//! records have that sequence and the ones after it, in order.
//!
//! `[PAGE][count: u32 BE]` then `count` times `[len: u32 BE][record bytes]`, nothing after. A
//! single record is still stored as itself: every record format begins with its version (1 to 3),
//! never with [`PAGE`], so a value says which it is.

/// The first byte of a page.
pub const PAGE: u8 = 0xFE;

/// A page of `records` (at least one).
pub fn encode<'a>(records: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut v = vec![PAGE, 0, 0, 0, 0];
    let mut n: u32 = 0;
    for r in records {
        let len = u32::try_from(r.len()).expect("a record under 4 GiB");
        v.extend_from_slice(&len.to_be_bytes());
        v.extend_from_slice(r);
        n += 1;
    }
    v[1..5].copy_from_slice(&n.to_be_bytes());
    v
}

/// Whether `value` is a page (else a single record).
pub fn is_page(value: &[u8]) -> bool {
    value.first() == Some(&PAGE)
}

/// How many records `value` holds by its header: 1 for a single record, `None` for a page whose
/// header is cut short.
pub fn count(value: &[u8]) -> Option<u64> {
    if !is_page(value) {
        return Some(1);
    }
    let n = value.get(1..5)?;
    Some(u64::from(u32::from_be_bytes(n.try_into().ok()?)))
}

/// The records of a page, or what is wrong with its framing (bytes that are no page at all
/// included).
pub fn entries(value: &[u8]) -> Result<Vec<&[u8]>, String> {
    if !is_page(value) {
        return Err("not a page".into());
    }
    let n = count(value).ok_or("page header cut short")?;
    let mut rest = &value[5..];
    let mut out = Vec::with_capacity(n.min(1 << 16) as usize);
    for i in 0..n {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(format!("page of {n} records cut short at record {i}"));
        };
        let len = u32::from_be_bytes(*len) as usize;
        if tail.len() < len {
            return Err(format!("page of {n} records cut short in record {i}"));
        }
        out.push(&tail[..len]);
        rest = &tail[len..];
    }
    if !rest.is_empty() {
        return Err(format!("{} bytes after the page's {n} records", rest.len()));
    }
    Ok(out)
}

/// The sequence in a key `prefix` + u64 BE.
pub(super) fn key_seq(prefix: &[u8], k: &[u8]) -> Option<u64> {
    k.strip_prefix(prefix).and_then(|r| <[u8; 8]>::try_from(r).ok()).map(u64::from_be_bytes)
}

/// The records `(sequence, bytes)` stored under key `k` (`prefix` + the first one's sequence):
/// the value itself, or a page's records; or what is wrong with the key or the page's framing.
pub(super) fn keyed_entries<'v>(
    prefix: &[u8],
    k: &[u8],
    v: &'v [u8],
) -> Result<Vec<(u64, &'v [u8])>, String> {
    let first = key_seq(prefix, k)
        .ok_or_else(|| format!("key is not {} + 8 bytes", prefix.escape_ascii()))?;
    if !is_page(v) {
        return Ok(vec![(first, v)]);
    }
    Ok((first..).zip(entries(v)?).collect())
}

/// The sequence of the key in `tree` under which record `seq` of the `prefix` keys lies: `seq`
/// itself, or the first sequence of the page holding it.
pub(super) fn covering_seq(tree: &sled::Tree, prefix: &[u8], seq: u64) -> u64 {
    let key = |n: u64| [prefix, &n.to_be_bytes()[..]].concat();
    match tree.range(key(0)..=key(seq)).next_back() {
        Some(Ok((k, v))) => match (key_seq(prefix, &k), count(&v)) {
            (Some(first), Some(n)) if first.saturating_add(n) > seq => first,
            _ => seq,
        },
        _ => seq,
    }
}

/// A filter over `(sequence, _)` results that passes each sequence once, ascending, from `from`
/// on (a record damage put under two keys is given once), and every error.
pub(super) fn ascending_from<T, E>(from: u64) -> impl FnMut(&Result<(u64, T), E>) -> bool {
    let mut next = from;
    move |r| match r {
        Ok((s, _)) if *s < next => false,
        Ok((s, _)) => {
            next = s + 1;
            true
        }
        Err(_) => true,
    }
}

/// The last sequence stored under the `prefix` keys of `tree` (0 when none): the last key's,
/// and the records after it on its page (a page whose header is damaged counts as one record);
/// `Err(key)` when the last key is not `prefix` + 8 bytes.
pub(super) fn last_seq(tree: &sled::Tree, prefix: &[u8]) -> sled::Result<Result<u64, sled::IVec>> {
    let Some((k, v)) = tree.scan_prefix(prefix).next_back().transpose()? else {
        return Ok(Ok(0));
    };
    Ok(key_seq(prefix, &k).map(|first| first + count(&v).unwrap_or(1).max(1) - 1).ok_or(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_gives_back_its_records() {
        let recs: [&[u8]; 3] = [b"\x01abc", b"", b"\x01de"];
        let page = encode(recs);
        // [PAGE][3][3 bytes: ...][0 bytes][3 bytes: ...]
        assert_eq!(page[..5], [PAGE, 0, 0, 0, 3]);
        assert!(is_page(&page));
        assert_eq!(count(&page), Some(3));
        assert_eq!(entries(&page).unwrap(), recs);
        assert!(!is_page(b"\x01abc"));
        assert_eq!(count(b"\x01abc"), Some(1));
    }

    #[test]
    fn a_damaged_page_says_what_is_wrong() {
        let page = encode([&b"\x01abc"[..], b"\x01de"]);
        assert_eq!(count(&page[..3]), None);
        let cut = entries(&page[..page.len() - 1]).unwrap_err();
        assert!(cut.contains("cut short in record 1"), "{cut}");
        let mut long = page.clone();
        long.push(7);
        assert!(entries(&long).unwrap_err().contains("1 bytes after"));
        let mut wrong = page;
        wrong[4] = 9;
        assert!(entries(&wrong).unwrap_err().contains("page of 9 records cut short at record 2"));
    }
}
