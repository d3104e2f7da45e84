//! Pages: the records of one batch under one sled key, so that a checkpoint of a thousand events
//! writes one sled record per key space instead of a thousand (sled's per-record cost dominated
//! the durable path, docs/performance.md). A page is keyed by its first record's sequence; its
//! records have that sequence and the ones after it, in order.
//!
//! `[PAGE][count: u32 BE]` then `count` times `[len: u32 BE][record bytes]`, nothing after. A
//! single record is still stored as itself: every record format begins with its version (1 to 3),
//! never with [`PAGE`], so a value says which it is.
//!
//! A record taken out of the middle of a page leaves an empty entry (no record is empty: each
//! begins with its version), so the records after it keep their sequences and the page stays one
//! value, written again once per batch of removals ([`remove`]). A page never begins or ends
//! with one: it moves to its first remaining record's key, and loses its empty tail. Readers see
//! records only ([`keyed_entries`], [`entry`]). (Before, a page was cut into runs of consecutive
//! records, each under a key of its own: acknowledging a backlog's events, which alternate with
//! its raw samples, wrote every remaining record again under its own key.)

/// The first byte of a page.
pub const PAGE: u8 = 0xFE;

/// The first byte of a packed page: `[PACKED][count: u32 BE][len: u32 BE]` then a page of `len`
/// bytes (the form above) compressed as one LZ4 block. The journal's and the ledger's pages are
/// packed, and the outbox's when a checkpoint adds them (JSON text and repeated names, a fraction
/// of their size packed: docs/decisions/0013-pages-packed-lz4.md); a page that packing would not shrink
/// is kept plain. Readers unpack a value first ([`unpack`]); every other function here takes
/// plain pages and says so when given a packed one.
pub const PACKED: u8 = 0xFD;

/// The first byte of a packed page that holds empty entries (removed records):
/// `[PACKED_HOLES][count: u32 BE][len: u32 BE][records: u32 BE]`, then the block as in
/// [`PACKED`]; `records` is how many of the `count` entries are not empty, so that the outbox's
/// depth is still read from headers alone ([`packed_totals`]). Written when pages are compacted
/// (`outbox_compact.rs`).
pub const PACKED_HOLES: u8 = 0xFC;

/// The header of a packed page: its first byte, the count, the unpacked length.
const PACKED_HEADER: usize = 9;

/// The header of a packed page with holes: [`PACKED_HEADER`] and the count of records.
const HOLES_HEADER: usize = 13;

/// The length of the header of a packed value (`None` when it is not packed).
fn packed_header(value: &[u8]) -> Option<usize> {
    match value.first() {
        Some(&PACKED) => Some(PACKED_HEADER),
        Some(&PACKED_HOLES) => Some(HOLES_HEADER),
        _ => None,
    }
}

/// Whether the pages written are packed ([`PACKED`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pages {
    Plain,
    Packed,
}

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

/// Whether `value` is a page, plain or packed (else a single record).
pub fn is_page(value: &[u8]) -> bool {
    matches!(value.first(), Some(&(PAGE | PACKED | PACKED_HOLES)))
}

/// `page` (a plain page) packed, unless packing does not make it smaller: [`PACKED`], or
/// [`PACKED_HOLES`] when some of its entries are empty.
pub fn pack(page: Vec<u8>) -> Vec<u8> {
    let Some(count) = page.get(1..5).filter(|_| page[0] == PAGE) else { return page };
    let Ok(len) = u32::try_from(page.len()) else { return page };
    let Some(records) = filled(&page) else { return page };
    let holes = records.to_be_bytes() != count;
    let header = if holes { HOLES_HEADER } else { PACKED_HEADER };
    // `compress` writes into capacity it does not zero first (a page-sized buffer zeroed per
    // page cost 4 % of a burst's instructions); the block is a fifth of the page, copied once.
    let block = lz4_flex::block::compress(&page);
    if header + block.len() >= page.len() {
        return page;
    }
    let mut v = Vec::with_capacity(header + block.len());
    v.push(if holes { PACKED_HOLES } else { PACKED });
    v.extend_from_slice(count);
    v.extend_from_slice(&len.to_be_bytes());
    if holes {
        v.extend_from_slice(&records.to_be_bytes());
    }
    v.extend_from_slice(&block);
    v
}

/// A packed page's records and their bytes by its header alone, without unpacking it: `None`
/// for a value that is no packed page, or whose header does not add up.
pub fn packed_totals(value: &[u8]) -> Option<(u64, u64)> {
    let header = value.get(..packed_header(value)?)?;
    let field = |at: usize| {
        header
            .get(at..at + 4)
            .map(|b| u64::from(u32::from_be_bytes(b.try_into().unwrap_or_default())))
    };
    let (count, len) = (field(1)?, field(5)?);
    let records = match header[0] {
        PACKED_HOLES => field(9).filter(|&r| r <= count)?,
        _ => count,
    };
    Some((records, len.checked_sub(5 + 4 * count)?))
}

/// `value` with a packed page unpacked: the value itself otherwise (a single record, a plain
/// page); or what is wrong with the packed page.
pub fn unpack(value: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    use std::borrow::Cow;
    let Some(header_len) = packed_header(value) else {
        return Ok(Cow::Borrowed(value));
    };
    let Some(header) = value.get(..header_len) else {
        return Err("packed page header cut short".into());
    };
    let len = u32::from_be_bytes(header[5..9].try_into().unwrap_or_default()) as usize;
    let block = &value[header_len..];
    // LZ4 gives at most 255 bytes per byte of its input: a length beyond that is damage, and is
    // never allocated.
    if len < 5 || len > block.len().saturating_mul(255) {
        return Err(format!("packed page of {} bytes says it unpacks to {len}", block.len()));
    }
    let mut out = vec![0; len];
    match lz4_flex::block::decompress_into(block, &mut out) {
        Ok(n) if n == len => {}
        Ok(n) => return Err(format!("packed page unpacks to {n} bytes, not the {len} it says")),
        Err(e) => return Err(format!("packed page does not unpack: {e}")),
    }
    if out[0] != PAGE || out[1..5] != header[1..5] {
        return Err("packed page unpacks to no page of its count".into());
    }
    if header[0] == PACKED_HOLES {
        let records = filled(&out).ok_or("packed page unpacks to a page cut short")?;
        if records.to_be_bytes() != header[9..13] {
            return Err(format!("packed page holds {records} records, not the number it says"));
        }
    }
    Ok(Cow::Owned(out))
}

/// How many entries of plain page `page` are not empty, walking its framing without copying
/// anything; `None` when the framing does not hold.
fn filled(page: &[u8]) -> Option<u32> {
    let n = u32::from_be_bytes(page.get(1..5)?.try_into().ok()?);
    let (mut rest, mut records) = (&page[5..], 0);
    for _ in 0..n {
        let (len, tail) = rest.split_first_chunk::<4>()?;
        let len = u32::from_be_bytes(*len) as usize;
        records += u32::from(len > 0);
        rest = tail.get(len..)?;
    }
    rest.is_empty().then_some(records)
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
    match value.first() {
        Some(&PAGE) => {}
        Some(&(PACKED | PACKED_HOLES)) => {
            return Err("a packed page read without unpacking it".into())
        }
        _ => return Err("not a page".into()),
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

/// The most bytes a page written by [`runs`] holds, unless one record alone is larger.
///
/// Why small: sled 0.34 keeps up to 16 keys in a leaf and writes a leaf whole from time to time;
/// a leaf over 128 KiB (a quarter of its 512 KiB log segment) goes into a file of its own under
/// `blobs/`, and each such file costs a creation, an fsync at the next commit, a directory entry
/// to check at every commit and a removal once the leaf is written again. Pages of 8 KiB keep a
/// leaf under that size and still cut the records of a burst some thirtyfold.
pub const PAGE_BYTES: usize = 8 * 1024;

/// `records` split into consecutive runs that each make a page of at most [`PAGE_BYTES`] (a
/// record larger than that alone): `(index of the run's first record, the run)`.
pub(super) fn runs<'r, 'a>(records: &'r [&'a [u8]]) -> Vec<(usize, &'r [&'a [u8]])> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 5);
    for (i, r) in records.iter().enumerate() {
        let add = 4 + r.len();
        if i > start && bytes + add > PAGE_BYTES {
            out.push((start, &records[start..i]));
            (start, bytes) = (i, 5);
        }
        bytes += add;
    }
    if start < records.len() {
        out.push((start, &records[start..]));
    }
    out
}

/// The value that stores `records` (of consecutive sequences) under the first one's key: a single
/// record as itself, unless its bytes begin like a page (then as a page of one).
pub(super) fn value(records: &[&[u8]], pages: Pages) -> Vec<u8> {
    match (records, pages) {
        ([one], _) if !is_page(one) => one.to_vec(),
        (_, Pages::Plain) => encode(records.iter().copied()),
        (_, Pages::Packed) => pack(encode(records.iter().copied())),
    }
}

/// Record `index` of the records under one key (the value itself when it is no page; a packed
/// page unpacked first); `Ok(None)` when the page holds fewer, or the record was removed from it.
pub(super) fn entry(value: &[u8], index: u64) -> Result<Option<&[u8]>, String> {
    if !is_page(value) {
        return Ok((index == 0).then_some(value));
    }
    let records = entries(value)?;
    Ok(usize::try_from(index).ok().and_then(|i| records.get(i).copied()).filter(|r| !r.is_empty()))
}

/// Why [`remove`] could not remove records.
pub(super) enum RemoveError {
    Sled(sled::Error),
    /// The key and what is wrong with it or with its page's framing.
    Corrupt(sled::IVec, String),
}

/// Adds to `batch` the removal of records `seqs` of the `prefix` keys of `tree` (those not
/// there are ignored): a page loses them by being written again once, with an empty entry for
/// each (see the module documentation); a page left empty goes. Returns how many are removed.
/// Call it once per batch: it reads the pages as they are before the batch. Pages written again
/// are `pages`.
pub(super) fn remove(
    tree: &sled::Tree,
    prefix: &[u8],
    batch: &mut sled::Batch,
    seqs: &[u64],
    pages: Pages,
) -> Result<usize, RemoveError> {
    let mut seqs = seqs.to_vec();
    seqs.sort_unstable();
    seqs.dedup();
    let (mut i, mut removed) = (0, 0);
    while i < seqs.len() {
        let Some((first, v)) = covering(tree, prefix, seqs[i]).map_err(RemoveError::Sled)? else {
            i += 1;
            continue;
        };
        let k = [prefix, &first.to_be_bytes()[..]].concat();
        // A packed page without holes whose every record goes (as a drain acknowledges a
        // checkpoint's pages) goes without being unpacked.
        if let Some(n) = whole_packed_page(&v, first, &seqs[i..]) {
            batch.remove(k);
            removed += n;
            i += n;
            continue;
        }
        let corrupt = |what| RemoveError::Corrupt(k[..].into(), what);
        let v = unpack(&v).map_err(corrupt)?;
        let slots = keyed_slots(prefix, &k, &v).map_err(corrupt)?;
        let end = slots.last().map_or(seqs[i] + 1, |(s, _)| s + 1);
        let j = i + seqs[i..].partition_point(|&s| s < end);
        let gone = &seqs[i..j.max(i + 1)];
        let mut n = 0;
        let kept: Vec<(u64, &[u8])> = slots
            .iter()
            .map(|&(s, r)| {
                if r.is_empty() || gone.binary_search(&s).is_err() {
                    return (s, r);
                }
                n += 1;
                (s, &[][..])
            })
            .collect();
        if n > 0 {
            removed += n;
            rewrite(batch, prefix, first, &kept, pages);
        }
        i = j.max(i + 1);
    }
    Ok(removed)
}

/// The number of records of `value` (under sequence `first`) when it is a packed page without
/// holes (by its header) and `seqs` (ascending, without repeats) begins with all of them.
fn whole_packed_page(value: &[u8], first: u64, seqs: &[u64]) -> Option<usize> {
    if value.first() != Some(&PACKED) {
        return None;
    }
    let (records, _) = packed_totals(value)?;
    let n = usize::try_from(records).ok().filter(|&n| n > 0 && n <= seqs.len())?;
    (seqs[0] == first && seqs[n - 1] == first + (records - 1)).then_some(n)
}

/// Adds to `batch` what replaces the value under key `prefix` + `first`: `slots` (consecutive
/// sequences, a removed record's entry empty) without the empty entries at either end, under
/// the key of the first record left, as `pages`; nothing when none is left.
pub(super) fn rewrite(
    batch: &mut sled::Batch,
    prefix: &[u8],
    first: u64,
    slots: &[(u64, &[u8])],
    pages: Pages,
) {
    let key = |n: u64| [prefix, &n.to_be_bytes()[..]].concat();
    let start = slots.iter().position(|(_, r)| !r.is_empty());
    let end = slots.iter().rposition(|(_, r)| !r.is_empty());
    let left = match (start, end) {
        (Some(a), Some(b)) => &slots[a..=b],
        _ => &[],
    };
    if left.first().map(|(s, _)| *s) != Some(first) {
        batch.remove(key(first));
    }
    if let Some((s, _)) = left.first() {
        let records: Vec<&[u8]> = left.iter().map(|(_, r)| *r).collect();
        batch.insert(key(*s), value(&records, pages));
    }
}

/// The sequence in a key `prefix` + u64 BE.
pub(super) fn key_seq(prefix: &[u8], k: &[u8]) -> Option<u64> {
    k.strip_prefix(prefix).and_then(|r| <[u8; 8]>::try_from(r).ok()).map(u64::from_be_bytes)
}

/// The records `(sequence, bytes)` stored under key `k` (`prefix` + the first one's sequence):
/// the value itself, or a page's records (not the empty entries removed records left); or what
/// is wrong with the key or the page's framing.
pub(super) fn keyed_entries<'v>(
    prefix: &[u8],
    k: &[u8],
    v: &'v [u8],
) -> Result<Vec<(u64, &'v [u8])>, String> {
    let mut slots = keyed_slots(prefix, k, v)?;
    if is_page(v) {
        slots.retain(|(_, r)| !r.is_empty());
    }
    Ok(slots)
}

/// [`keyed_entries`] with the empty entries of removed records, for what writes a page again.
pub(super) fn keyed_slots<'v>(
    prefix: &[u8],
    k: &[u8],
    v: &'v [u8],
) -> Result<Vec<(u64, &'v [u8])>, String> {
    let first = key_seq(prefix, k).ok_or_else(|| match prefix {
        [] => "key is not 8 bytes".to_string(),
        _ => format!("key is not {} + 8 bytes", prefix.escape_ascii()),
    })?;
    if !is_page(v) {
        return Ok(vec![(first, v)]);
    }
    Ok((first..).zip(entries(v)?).collect())
}

/// The sequence of the key in `tree` under which record `seq` of the `prefix` keys lies: `seq`
/// itself, or the first sequence of the page holding it.
pub(super) fn covering_seq(tree: &sled::Tree, prefix: &[u8], seq: u64) -> u64 {
    covering(tree, prefix, seq).ok().flatten().map_or(seq, |(first, _)| first)
}

/// The key (its sequence) and value in `tree` under which record `seq` of the `prefix` keys
/// lies, if any.
pub(super) fn covering(
    tree: &sled::Tree,
    prefix: &[u8],
    seq: u64,
) -> sled::Result<Option<(u64, sled::IVec)>> {
    let key = |n: u64| [prefix, &n.to_be_bytes()[..]].concat();
    let Some((k, v)) = tree.range(key(0)..=key(seq)).next_back().transpose()? else {
        return Ok(None);
    };
    Ok(match (key_seq(prefix, &k), count(&v)) {
        (Some(first), Some(n)) if first.saturating_add(n) > seq => Some((first, v)),
        // A value under `seq` itself whose page header is damaged: the reader reports it.
        (Some(first), None) if first == seq => Some((first, v)),
        _ => None,
    })
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

    /// A page packs to an LZ4 block behind a header that keeps its count, and unpacks to the
    /// same bytes; a single record, a plain page and a page that would not shrink are given back
    /// as they are.
    #[test]
    fn a_packed_page_unpacks_to_the_same_page() {
        let line = br#"{"at":1700000000097,"event":{"machine":"m1","sensor":"s0","value":0.31}}"#;
        let records: Vec<Vec<u8>> = (0..40u8).map(|i| [&[1, i][..], line].concat()).collect();
        let plain = encode(records.iter().map(Vec::as_slice));
        let packed = pack(plain.clone());
        // [PACKED][count 40][unpacked length] then the block.
        assert_eq!(packed[..5], [PACKED, 0, 0, 0, 40]);
        assert_eq!(packed[5..9], u32::try_from(plain.len()).unwrap().to_be_bytes());
        assert!(packed.len() * 4 < plain.len(), "{} of {}", packed.len(), plain.len());
        assert!(is_page(&packed));
        assert_eq!(count(&packed), Some(40));
        assert_eq!(unpack(&packed).unwrap()[..], plain[..]);
        let bytes: usize = records.iter().map(Vec::len).sum();
        assert_eq!(packed_totals(&packed), Some((40, bytes as u64)), "by the header alone");
        assert_eq!(packed_totals(&plain), None);
        assert!(matches!(unpack(&plain).unwrap(), std::borrow::Cow::Borrowed(_)));
        assert!(matches!(unpack(b"\x01abc").unwrap(), std::borrow::Cow::Borrowed(_)));
        assert!(entries(&packed).unwrap_err().contains("without unpacking"));
        let noise: Vec<u8> =
            (0..200u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let small = encode([&[1][..], &noise[..]]);
        assert_eq!(pack(small.clone()), small, "kept plain: packing does not shrink it");
        assert_eq!(value(&[&b"\x01abc"[..]], Pages::Packed), b"\x01abc", "one record as itself");
        assert_eq!(value(&[&records[0][..], &records[1][..]], Pages::Plain)[0], PAGE);
    }

    /// A page with empty entries packs behind a header that also counts its records, so that
    /// its records and their bytes are still read from the header alone.
    #[test]
    fn a_packed_page_with_holes_counts_its_records() {
        let line = br#"{"event":{"machine":"m1","sensor":"s0","value":0.31}}"#;
        let records: Vec<Vec<u8>> = (0..40u8)
            .map(|i| if i % 3 == 1 { Vec::new() } else { [&[1, i][..], line].concat() })
            .collect();
        let plain = encode(records.iter().map(Vec::as_slice));
        let packed = pack(plain.clone());
        // [PACKED_HOLES][count 40][unpacked length][records 27] then the block.
        assert_eq!(packed[..5], [PACKED_HOLES, 0, 0, 0, 40]);
        assert_eq!(packed[9..13], [0, 0, 0, 27]);
        assert!(is_page(&packed));
        assert_eq!(count(&packed), Some(40), "entries, as every page's header");
        assert_eq!(unpack(&packed).unwrap()[..], plain[..]);
        let bytes: usize = records.iter().map(Vec::len).sum();
        assert_eq!(packed_totals(&packed), Some((27, bytes as u64)));
        let mut wrong = packed.clone();
        wrong[12] = 28;
        assert!(unpack(&wrong).unwrap_err().contains("holds 27 records"));
        wrong[9] = 1;
        assert_eq!(packed_totals(&wrong), None, "more records than entries");
        assert!(unpack(&packed[..12]).unwrap_err().contains("header cut short"));
        let full: Vec<&[u8]> =
            records.iter().filter(|r| !r.is_empty()).map(Vec::as_slice).collect();
        assert_eq!(pack(encode(full))[0], PACKED, "no hole: the shorter header");
    }

    /// A damaged packed page is an error saying what is wrong, never a panic, and a length it
    /// cannot hold is never allocated.
    #[test]
    fn a_damaged_packed_page_says_what_is_wrong() {
        let records: Vec<Vec<u8>> = (0..40u8).map(|i| vec![1, i, 7, 7, 7, 7, 7, 7, 7, 7]).collect();
        let packed = pack(encode(records.iter().map(Vec::as_slice)));
        assert_eq!(packed[0], PACKED);
        assert!(unpack(&packed[..6]).unwrap_err().contains("header cut short"));
        let cut = unpack(&packed[..packed.len() - 1]).unwrap_err();
        assert!(cut.contains("does not unpack") || cut.contains("unpacks to"), "{cut}");
        let mut huge = packed.clone();
        huge[5..9].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(unpack(&huge).unwrap_err().contains("says it unpacks to 4294967295"));
        let mut count = packed.clone();
        count[4] = 41;
        assert!(unpack(&count).unwrap_err().contains("no page of its count"));
        let mut flipped = packed;
        let last = flipped.len() - 3;
        flipped[last] ^= 0xFF;
        let _ = unpack(&flipped); // an error or other bytes, which the records' checks see
    }

    /// A packed page whose every record is removed goes by its header alone (its block is not
    /// even read); one losing only some of them is unpacked and written again with holes.
    #[test]
    fn a_packed_page_removed_whole_is_not_unpacked() {
        let tree = sled::Config::new().temporary(true).open().unwrap().open_tree("t").unwrap();
        let records: Vec<Vec<u8>> = (0..40u8).map(|i| vec![1, i, 7, 7, 7, 7, 7, 7, 7, 7]).collect();
        let mut packed = pack(encode(records.iter().map(Vec::as_slice)));
        assert_eq!(packed[0], PACKED);
        // The unpacked length one more than the block gives: the header's totals still hold.
        let len = u32::from_be_bytes(packed[5..9].try_into().unwrap()) + 1;
        packed[5..9].copy_from_slice(&len.to_be_bytes());
        tree.insert(b"o/\0\0\0\0\0\0\0\x0a", packed).unwrap();
        let all: Vec<u64> = (10..50).collect();
        let mut batch = sled::Batch::default();
        let some = remove(&tree, b"o/", &mut batch, &all[..39], Pages::Plain);
        assert!(matches!(some, Err(RemoveError::Corrupt(..))), "a part: unpacked");
        let mut batch = sled::Batch::default();
        let removed =
            remove(&tree, b"o/", &mut batch, &[&all[..], &[50, 9]].concat(), Pages::Plain);
        assert_eq!(removed.ok(), Some(40), "the whole page, and nothing for 9 and 50");
        tree.apply_batch(batch).unwrap();
        assert!(tree.is_empty());
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
