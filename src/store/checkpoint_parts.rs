//! The checkpoint's value in parts of at most [`PART_BYTES`], so that no sled leaf of the `state`
//! tree grows past sled's blob threshold (docs/decisions/0014-the-checkpoint-in-parts.md).
//!
//! Version 1 (still read): `c/` = `[1][journal_pos: u64 BE][decider snapshot]`.
//!
//! Version 2 (written): the snapshot is packed as one LZ4 block, and the block is cut into parts:
//! `c/` = `[2][journal_pos: u64 BE][parts: u16 BE][unpacked length: u32 BE][part 0]`, and part
//! `i` (1 ≤ i < parts) under `c/` + `i` (u16 BE). All parts are written in the checkpoint's one
//! batch; parts of an earlier, longer checkpoint are removed in it.

use std::path::Path;

use super::state::{Checkpoint, CHECKPOINT};
use super::{corrupt, Result, STATE};

const VERSION: u8 = 1;
const VERSION_PARTS: u8 = 2;
/// `[2][journal_pos][parts][unpacked length]`.
const HEADER: usize = 1 + 8 + 2 + 4;

/// The most bytes of the packed snapshot one part holds. sled 0.34 splits a leaf only past 16
/// keys and writes a leaf above 128 KiB less its headers as a file of its own (a "blob": a file
/// created, fsynced, its directory fsynced, and removed when the leaf changes again); with
/// every value of the tree at most this size, no leaf reaches it.
pub const PART_BYTES: usize = 6 * 1024;

/// The key of part `i` (`i` ≥ 1).
pub(super) fn part_key(i: u16) -> [u8; 4] {
    let [a, b] = i.to_be_bytes();
    [CHECKPOINT[0], CHECKPOINT[1], a, b]
}

/// The values of a checkpoint at `journal_pos` with snapshot `decider`: `c/`'s first, then
/// part 1, 2, ….
pub fn encode(journal_pos: u64, decider: &[u8]) -> Vec<Vec<u8>> {
    let block = lz4_flex::block::compress(decider);
    let mut chunks = block.chunks(PART_BYTES);
    let first = chunks.next().unwrap_or_default();
    let parts = u16::try_from(block.len().div_ceil(PART_BYTES).max(1))
        .expect("a snapshot under 384 MiB packed");
    let len = u32::try_from(decider.len()).expect("a snapshot under 4 GiB");
    let mut head = Vec::with_capacity(HEADER + first.len());
    head.push(VERSION_PARTS);
    head.extend_from_slice(&journal_pos.to_be_bytes());
    head.extend_from_slice(&parts.to_be_bytes());
    head.extend_from_slice(&len.to_be_bytes());
    head.extend_from_slice(first);
    std::iter::once(head).chain(chunks.map(<[u8]>::to_vec)).collect()
}

/// Writes the checkpoint at `journal_pos` with snapshot `decider` into `batch`: `c/` and its
/// parts, and the removal of the parts beyond them that a checkpoint of `old_parts` values left.
pub(super) fn write(batch: &mut sled::Batch, journal_pos: u64, decider: &[u8], old_parts: u16) {
    let values = encode(journal_pos, decider);
    let new_parts = values.len() as u16;
    for (i, v) in values.into_iter().enumerate() {
        match i {
            0 => batch.insert(CHECKPOINT, v),
            i => batch.insert(&part_key(i as u16), v),
        }
    }
    for i in new_parts..old_parts {
        batch.remove(&part_key(i));
    }
}

/// How many values the checkpoint `c/` = `value` takes (1 for version 1 or a value that does
/// not decode).
pub(super) fn parts(value: &[u8]) -> u16 {
    match value {
        [VERSION_PARTS, rest @ ..] => {
            rest.get(8..10).map_or(1, |p| u16::from_be_bytes([p[0], p[1]]).max(1))
        }
        _ => 1,
    }
}

/// The journal position `c/` = `value` names, when its header decodes.
pub(super) fn position(value: &[u8]) -> Option<u64> {
    match value {
        [VERSION | VERSION_PARTS, rest @ ..] => {
            Some(u64::from_be_bytes(rest.get(..8)?.try_into().ok()?))
        }
        _ => None,
    }
}

/// The checkpoint in `tree` (the `state` tree of the store at `path`, named in errors), if any:
/// its parts read and unpacked.
pub(super) fn read(path: &Path, tree: &sled::Tree) -> Result<Option<Checkpoint>> {
    let sled_err =
        |op: String| move |source| super::StoreError::Sled { path: path.to_path_buf(), op, source };
    let Some(value) = tree.get(CHECKPOINT).map_err(sled_err("read c/ from tree state".into()))?
    else {
        return Ok(None);
    };
    let count = parts(&value);
    let mut more = Vec::with_capacity(usize::from(count).saturating_sub(1));
    for i in 1..count {
        let key = part_key(i);
        let op = format!("read checkpoint part {i} from tree state");
        match tree.get(key).map_err(sled_err(op))? {
            Some(p) => more.push(p),
            None => {
                let what = format!("checkpoint part {i} of {count} is missing");
                return Err(corrupt(path, STATE, &key, what));
            }
        }
    }
    let more: Vec<&[u8]> = more.iter().map(|p| &p[..]).collect();
    match decode(&value, &more) {
        Ok((journal_pos, decider)) => Ok(Some(Checkpoint { journal_pos, decider })),
        Err(what) => Err(corrupt(path, STATE, CHECKPOINT, what)),
    }
}

/// The checkpoint `(journal position, snapshot)` that `c/` = `head` and its further parts
/// `more` (part 1, 2, …, as many as `head` says) hold, or what is wrong with them.
pub fn decode(head: &[u8], more: &[&[u8]]) -> std::result::Result<(u64, Vec<u8>), String> {
    let Some(journal_pos) = position(head) else {
        return Err(format!(
            "checkpoint does not decode ({} bytes, version byte {:?})",
            head.len(),
            head.first()
        ));
    };
    if head[0] == VERSION {
        return Ok((journal_pos, head[9..].to_vec()));
    }
    let Some(header) = head.get(..HEADER) else {
        return Err(format!("checkpoint header cut short ({} bytes)", head.len()));
    };
    let count = usize::from(parts(head));
    if more.len() + 1 != count {
        return Err(format!("checkpoint of {count} parts given {}", more.len() + 1));
    }
    let len = u32::from_be_bytes([header[11], header[12], header[13], header[14]]) as usize;
    let block: Vec<u8> =
        std::iter::once(&head[HEADER..]).chain(more.iter().copied()).flatten().copied().collect();
    // LZ4 gives at most 255 bytes per byte of its input: a length beyond that is damage, and is
    // never allocated.
    if len > block.len().saturating_mul(255) {
        return Err(format!(
            "a packed checkpoint of {} bytes says it unpacks to {len}",
            block.len()
        ));
    }
    let mut decider = vec![0; len];
    match lz4_flex::block::decompress_into(&block, &mut decider) {
        Ok(n) if n == len => Ok((journal_pos, decider)),
        Ok(n) => Err(format!("checkpoint unpacks to {n} bytes, not {len}")),
        Err(e) => Err(format!("checkpoint does not unpack: {e}")),
    }
}

#[cfg(test)]
mod tests_support {
    /// Bytes that pack poorly: a simple generator's.
    pub(super) fn noise(n: usize) -> Vec<u8> {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::noise;
    use super::*;

    fn tree() -> (tempfile::TempDir, sled::Tree) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new().temporary(true).open().expect("sled");
        let t = db.open_tree("state").expect("tree");
        (dir, t)
    }

    fn write(t: &sled::Tree, values: &[Vec<u8>]) {
        t.insert(CHECKPOINT, values[0].as_slice()).expect("insert");
        for (i, v) in values.iter().enumerate().skip(1) {
            t.insert(part_key(i as u16), v.as_slice()).expect("insert");
        }
    }

    #[test]
    fn a_large_snapshot_is_cut_into_parts_none_larger_than_the_limit_and_read_back_whole() {
        let (dir, t) = tree();
        let snapshot = noise(40_000);
        let values = encode(7, &snapshot);
        assert!(values.len() >= 7, "40 000 bytes that do not pack: {} parts", values.len());
        assert!(values.iter().all(|v| v.len() <= HEADER + PART_BYTES));
        assert_eq!(parts(&values[0]), values.len() as u16);
        write(&t, &values);
        let cp = read(dir.path(), &t).expect("read").expect("a checkpoint");
        assert_eq!((cp.journal_pos, cp.decider), (7, snapshot));
    }

    #[test]
    fn an_empty_or_small_snapshot_is_one_value_and_version_1_is_still_read() {
        let (dir, t) = tree();
        for snapshot in [vec![], b"small".to_vec()] {
            let values = encode(3, &snapshot);
            assert_eq!((values.len(), parts(&values[0])), (1, 1));
            write(&t, &values);
            let cp = read(dir.path(), &t).expect("read").expect("a checkpoint");
            assert_eq!((cp.journal_pos, cp.decider), (3, snapshot));
        }
        let mut v1 = vec![VERSION];
        v1.extend_from_slice(&9u64.to_be_bytes());
        v1.extend_from_slice(b"old snapshot");
        t.insert(CHECKPOINT, v1.as_slice()).expect("insert");
        assert_eq!((parts(&v1), position(&v1)), (1, Some(9)));
        let cp = read(dir.path(), &t).expect("read").expect("a checkpoint");
        assert_eq!((cp.journal_pos, cp.decider), (9, b"old snapshot".to_vec()));
    }

    #[test]
    fn a_missing_or_damaged_part_is_named_never_a_panic() {
        let (dir, t) = tree();
        let values = encode(5, &noise(20_000));
        write(&t, &values);
        t.remove(part_key(2)).expect("remove");
        let err = read(dir.path(), &t).expect_err("a part is missing").to_string();
        assert!(err.contains("checkpoint part 2 of") && err.contains("missing"), "{err}");
        write(&t, &values);
        t.insert(part_key(1), &b"xx"[..]).expect("insert");
        let err = read(dir.path(), &t).expect_err("a part is damaged").to_string();
        assert!(err.contains("checkpoint"), "{err}");
        let mut huge = values[0].clone();
        huge[11..15].copy_from_slice(&u32::MAX.to_be_bytes());
        t.insert(CHECKPOINT, huge).expect("insert");
        let err = read(dir.path(), &t).expect_err("a length beyond LZ4's").to_string();
        assert!(err.contains("says it unpacks to"), "{err}");
        t.insert(CHECKPOINT, &[2u8, 0, 0][..]).expect("insert");
        let err = read(dir.path(), &t).expect_err("cut short").to_string();
        assert!(err.contains("does not decode"), "{err}");
    }
}

#[cfg(test)]
mod store_tests {
    use super::tests_support::noise;
    use crate::store::{Store, StoreOptions};

    /// Through the store: a long checkpoint, then a short one, across a reopen. The short one's
    /// batch removes the parts the long one left, and no sled value of the state tree is larger
    /// than a part (so no leaf becomes a blob file).
    #[test]
    fn a_shorter_checkpoint_removes_the_parts_a_longer_one_left() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let opts = StoreOptions {
            cache_bytes: 1 << 20,
            raw_threshold: 1 << 20,
            segment_bytes: 1 << 20,
            ..StoreOptions::default()
        };
        let long = noise(50_000);
        {
            let mut s = Store::open(tmp.path(), opts.clone()).expect("open");
            s.append_journal(&[(1, b"a".to_vec()), (2, b"b".to_vec())]).expect("append");
            s.checkpoint(1, &long, &[]).expect("checkpoint");
            let cp = s.last_checkpoint().expect("read").expect("one");
            assert_eq!((cp.journal_pos, cp.decider == long), (1, true));
            assert!(part_count(&s) >= 8, "{} parts", part_count(&s));
        }
        let mut s = Store::open(tmp.path(), opts).expect("reopen");
        let cp = s.last_checkpoint().expect("read").expect("one");
        assert_eq!((cp.journal_pos, cp.decider == long), (1, true), "read back after a reopen");
        s.checkpoint(2, b"short", &[]).expect("checkpoint");
        assert_eq!(part_count(&s), 0, "only c/ is left");
        let cp = s.last_checkpoint().expect("read").expect("one");
        assert_eq!((cp.journal_pos, cp.decider), (2, b"short".to_vec()));
        let largest = s.state.iter().map(|kv| kv.expect("read").1.len()).max();
        assert!(largest.unwrap_or(0) <= super::HEADER + super::PART_BYTES);
    }

    /// Keys `c/` + u16 in the state tree.
    fn part_count(s: &Store) -> usize {
        s.state
            .scan_prefix(super::CHECKPOINT)
            .filter(|kv| kv.as_ref().expect("read").0.len() == 4)
            .count()
    }
}
