//! The journal in pages (`page.rs`): the records of one append (a group commit's lines) are one
//! sled value under the key of the first's position, read back record by record. Truncation
//! writes what is left of the page holding the new start under that position; a shed takes
//! records out of pages as the outbox's acknowledgements do. A single record is stored as itself
//! (its version byte, 1 to 3, is never a page's).
//!
//! Every reader goes through [`Store::journal_metas`], [`Store::journal_metas_back`],
//! [`Store::journal_meta`] or [`metas`]; every removal of single records through
//! [`Store::journal_remove`].

use std::path::{Path, PathBuf};

use super::journal::{decode_meta, with_line, JournalMeta};
use super::{corrupt, page, Result, Store, StoreError, JOURNAL};
use crate::records::journal::JournalRecord;

/// The records under journal key `k` (value `v`), decoded without reading segments.
pub(super) fn metas(path: &Path, k: &[u8], v: &[u8]) -> Result<Vec<JournalMeta>> {
    let unpacked = page::unpack(v).map_err(|what| corrupt(path, JOURNAL, k, what))?;
    let records =
        page::keyed_entries(b"", k, &unpacked).map_err(|what| corrupt(path, JOURNAL, k, what))?;
    let on_page = page::is_page(v).then(|| page::key_seq(b"", k).unwrap_or(0));
    records.into_iter().map(|(pos, r)| decode_meta(path, pos, on_page, r)).collect()
}

/// The records of one key-value result, or its error.
fn key_metas(path: &Path, kv: sled::Result<(sled::IVec, sled::IVec)>) -> Vec<Result<JournalMeta>> {
    match kv {
        Ok((k, v)) => match metas(path, &k, &v) {
            Ok(ms) => ms.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        },
        Err(source) => {
            vec![Err(StoreError::Sled {
                path: path.to_path_buf(),
                op: "iterate tree journal".into(),
                source,
            })]
        }
    }
}

impl Store {
    /// The key under which journal record `pos` lies: `pos`, or the first position of its page.
    fn journal_key_covering(&self, pos: u64) -> u64 {
        page::covering_seq(&self.journal, b"", pos)
    }

    /// Journal records at positions in `[from, to)`, in order, without their lines (truncated
    /// ones are not skipped: callers start at the journal's start).
    pub(super) fn journal_metas(
        &self,
        from: u64,
        to: u64,
    ) -> impl Iterator<Item = Result<JournalMeta>> + 'static {
        let path: PathBuf = self.path.clone();
        let start = self.journal_key_covering(from);
        let keys = (start < to).then(|| self.journal.range(start.to_be_bytes()..to.to_be_bytes()));
        keys.into_iter()
            .flatten()
            .flat_map(move |kv| key_metas(&path, kv))
            .filter(move |m| m.as_ref().map_or(true, |m| m.pos >= from && m.pos < to))
    }

    /// Journal records at positions from `from` on, newest first, without their lines.
    pub(super) fn journal_metas_back(
        &self,
        from: u64,
    ) -> impl Iterator<Item = Result<JournalMeta>> + 'static {
        let path: PathBuf = self.path.clone();
        let start = self.journal_key_covering(from);
        self.journal
            .range(start.to_be_bytes()..)
            .rev()
            .flat_map(move |kv| key_metas(&path, kv).into_iter().rev())
            .filter(move |m| m.as_ref().map_or(true, |m| m.pos >= from))
    }

    /// Journal record `pos` without its line, decoding only its own entry of its page (`None`
    /// when it is not in the journal).
    pub(super) fn journal_meta(&self, pos: u64) -> Result<Option<JournalMeta>> {
        let covering = page::covering(&self.journal, b"", pos);
        let Some((first, v)) = covering.map_err(self.sled_err("read tree journal"))? else {
            return Ok(None);
        };
        let key = first.to_be_bytes();
        let corrupt = |what| self.corrupt(JOURNAL, &key, what);
        let unpacked = page::unpack(&v).map_err(corrupt)?;
        let record = page::entry(&unpacked, pos - first).map_err(corrupt)?;
        let on_page = page::is_page(&v).then_some(first);
        record.map(|r| decode_meta(&self.path, pos, on_page, r)).transpose()
    }

    /// Journal record `pos` with its line (`None` when it is not in the journal).
    pub fn journal_record(&self, pos: u64) -> Result<Option<JournalRecord>> {
        match self.journal_meta(pos)? {
            Some(m) if pos >= self.journal_start => {
                with_line(&self.path, &self.segments, m).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Adds to `batch` (of tree journal) the removal of records `positions`; returns how many
    /// are removed. Once per batch.
    pub(super) fn journal_remove(
        &self,
        batch: &mut sled::Batch,
        positions: &[u64],
    ) -> Result<usize> {
        page::remove(&self.journal, b"", batch, positions, page::Pages::Packed).map_err(|e| match e
        {
            page::RemoveError::Sled(e) => self.sled_err("read tree journal")(e),
            page::RemoveError::Corrupt(k, what) => self.corrupt(JOURNAL, &k, what),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::records::journal::Origin;
    use crate::store::segments::{segment_path, RAW_DIR};
    use crate::store::{open_sled_directly, Store, StoreError, StoreOptions};

    fn lines(from: u8, n: u8, len: usize) -> Vec<(i64, Vec<u8>)> {
        (from..from + n).map(|i| (i64::from(i) * 10, vec![i; len])).collect()
    }

    fn positions(s: &Store, from: u64) -> Vec<u64> {
        s.journal_from(from).map(|r| r.unwrap().0).collect()
    }

    fn keys(s: &Store) -> Vec<u64> {
        let key = |k: sled::IVec| u64::from_be_bytes(k[..].try_into().unwrap());
        s.journal.iter().keys().map(|k| key(k.unwrap())).collect()
    }

    /// A group commit of 200 lines of 100 bytes is four pages of at most 8 KiB, read back record
    /// by record, from any position, backwards, and across a reopen.
    #[test]
    fn a_group_commit_is_a_few_pages_read_record_by_record() {
        let dir = tempfile::tempdir().unwrap();
        let recs: Vec<(i64, Origin, Vec<u8>)> = (1..=200u8)
            .map(|i| {
                (i64::from(i), Origin { source: 0, end_offset: u64::from(i) * 101 }, vec![i; 100])
            })
            .collect();
        {
            let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
            assert_eq!(s.append_journal_from(&recs).unwrap(), 1..201);
            s.append_journal(&lines(201, 1, 3)).unwrap();
            s.commit().unwrap();
            // Records of 1 + 8 + 2 + 8 + 100 bytes, 4 more each on a page after its 5-byte
            // header: 66 in 8 KiB.
            assert_eq!(keys(&s), vec![1, 67, 133, 199, 201]);
        }
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        assert_eq!(s.next_journal_pos(), 202);
        assert_eq!(positions(&s, 1), (1..=201).collect::<Vec<_>>());
        assert_eq!(positions(&s, 100), (100..=201).collect::<Vec<_>>());
        let r = s.journal_record(80).unwrap().unwrap();
        assert_eq!((r.pos, r.at, r.line), (80, 80, vec![80; 100]));
        assert_eq!(r.origin, Some(Origin { source: 0, end_offset: 80 * 101 }));
        assert_eq!(s.journal_record(202).unwrap(), None);
        assert_eq!(s.journal_last_offset(0, 0).unwrap(), Some(200 * 101), "the newest of source 0");
        assert_eq!(s.journal_last_offset(0, 199).unwrap(), Some(200 * 101));
        assert_eq!(s.journal_last_offset(0, 200).unwrap(), None, "none after position 200");
        assert_eq!(s.journal_last_offset(1, 0).unwrap(), None);
        let back: Vec<u64> = s.journal_metas_back(198).map(|m| m.unwrap().pos).collect();
        assert_eq!(back, vec![201, 200, 199, 198]);
    }

    /// Truncating inside a page keeps the page's records from the new start on, under its
    /// position; a shed takes records out of the middle of a page, which stays one value (the
    /// records after keep their positions), and out of its front, which moves it to the key of
    /// its first record left.
    #[test]
    fn truncation_and_removal_cut_pages_and_keep_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.append_journal(&lines(1, 10, 20)).unwrap();
        s.checkpoint(10, b"d", &[]).unwrap();
        s.truncate_journal_before(4).unwrap();
        s.commit().unwrap();
        assert_eq!(keys(&s), vec![4]);
        assert_eq!(positions(&s, 1), (4..=10).collect::<Vec<_>>());
        let mut batch = sled::Batch::default();
        assert_eq!(s.journal_remove(&mut batch, &[6, 7, 10, 11]).unwrap(), 3);
        s.journal.apply_batch(batch).unwrap();
        assert_eq!(keys(&s), vec![4], "one page, written once");
        assert_eq!(positions(&s, 1), vec![4, 5, 8, 9]);
        assert_eq!(s.journal_record(9).unwrap().unwrap().line, vec![9; 20]);
        assert_eq!(s.journal_record(7).unwrap(), None);
        s.truncate_journal_before(5).unwrap();
        s.commit().unwrap();
        assert_eq!(keys(&s), vec![5], "truncated inside a page with removed records");
        assert_eq!(positions(&s, 1), vec![5, 8, 9], "the records after keep their positions");
        let mut batch = sled::Batch::default();
        assert_eq!(s.journal_remove(&mut batch, &[4, 5, 7]).unwrap(), 1);
        s.journal.apply_batch(batch).unwrap();
        assert_eq!(keys(&s), vec![8], "the page moved to its first record left");
        assert_eq!(s.journal_record(8).unwrap().unwrap().line, vec![8; 20]);
        drop(s);
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        assert_eq!(positions(&s, 1), vec![8, 9]);
        assert_eq!(positions(&s, 9), vec![9]);
        assert_eq!(s.next_journal_pos(), 11, "positions are not reused");
    }

    /// A record on a page that does not decode is an error naming its own position and the
    /// page's; its neighbours still read.
    #[test]
    fn a_damaged_record_on_a_page_names_itself_and_its_page() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
            s.append_journal(&lines(1, 3, 20)).unwrap();
            s.commit().unwrap();
        }
        let db = open_sled_directly(dir.path()).unwrap();
        let journal = db.open_tree("journal").unwrap();
        let page = journal.get(1u64.to_be_bytes()).unwrap().unwrap();
        assert_eq!(page[0], crate::store::page::PACKED, "the journal's pages are packed");
        let page = crate::store::page::unpack(&page).unwrap();
        let records = crate::store::page::entries(&page).unwrap();
        let bad: [&[u8]; 3] = [records[0], b"\x09whatwhatwhat", records[2]];
        journal.insert(1u64.to_be_bytes(), crate::store::page::encode(bad)).unwrap();
        db.flush().unwrap();
        drop((journal, db));
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        match s.journal_record(2).unwrap_err() {
            StoreError::Corrupt { key, what, .. } => {
                assert_eq!(key, "2");
                assert!(
                    what.contains("version 9") && what.contains("on the page under 1"),
                    "{what}"
                );
            }
            other => panic!("expected Corrupt, got {other}"),
        }
        assert_eq!(s.journal_record(3).unwrap().unwrap().line, vec![3; 20]);
    }

    /// After a power cut that lost the segment bytes of a page's last records (never committed,
    /// after the checkpoint), opening cuts them from the page and keeps the rest.
    #[test]
    fn a_torn_tail_is_cut_from_the_last_page() {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions { raw_threshold: 4, ..StoreOptions::default() };
        {
            let mut s = Store::open(dir.path(), opts.clone()).unwrap();
            s.append_journal(&lines(1, 4, 10)).unwrap();
            s.checkpoint(1, b"d", &[]).unwrap();
        }
        // The segment holds the four lines, 10 bytes each: cut into the third.
        let seg = segment_path(&dir.path().join(RAW_DIR), 1);
        let len = std::fs::metadata(&seg).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&seg).unwrap().set_len(len - 15).unwrap();
        let s = Store::open(dir.path(), opts).unwrap();
        assert_eq!(positions(&s, 1), vec![1, 2]);
        assert_eq!(keys(&s), vec![1]);
        assert_eq!(s.next_journal_pos(), 3, "never committed: the positions are free again");
    }
}
