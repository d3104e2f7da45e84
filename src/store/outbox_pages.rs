//! The outbox in pages (`page.rs`): the records a checkpoint adds are one sled value under the
//! key of the first (`o/` + its sequence), packed, read back record by record. An
//! acknowledgement or a shed removes records from a page by writing it again once, with an empty
//! entry for each, under the key of its first record left; a page left empty goes. A page
//! written again is plain: removals run under the store's lock at every chunk of
//! acknowledgements, which an alert waits behind, so they unpack a page but never pack one. A
//! single record is stored as itself, unless its bytes begin like a page (then as a page of one).
//!
//! Every reader goes through [`Store::outbox_from`], [`Store::outbox_contains`] and
//! [`outbox_entries`]; every removal through [`Store::outbox_remove`].

use std::path::PathBuf;

use super::page;
use super::state::{outbox_key, OUTBOX};
use super::{corrupt, Result, Store, StoreError, STATE};

/// `read` of the records `(sequence, bytes)` under one `o/` key (a packed page unpacked), or
/// what is wrong with the key or the page.
pub(super) fn outbox_entries<R>(
    k: &[u8],
    v: &[u8],
    read: impl FnOnce(Vec<(u64, &[u8])>) -> R,
) -> std::result::Result<R, String> {
    let v = page::unpack(v)?;
    Ok(read(page::keyed_entries(OUTBOX, k, &v)?))
}

/// The value that stores `records` (of consecutive sequences) under the first one's key: packed
/// when a checkpoint adds them; a page written again after removals is plain (see the module
/// documentation).
pub(super) fn outbox_value(records: &[&[u8]]) -> Vec<u8> {
    page::value(records, page::Pages::Packed)
}

impl Store {
    /// The key under which outbox record `seq` lies: `seq`, or the first sequence of its page.
    fn outbox_key_covering(&self, seq: u64) -> u64 {
        page::covering_seq(&self.state, OUTBOX, seq)
    }

    /// Outbox records `(sequence, bytes)` from sequence `from` on, in order.
    pub(super) fn outbox_from(&self, from: u64) -> impl Iterator<Item = Result<(u64, Vec<u8>)>> {
        let path: PathBuf = self.path.clone();
        let start = self.outbox_key_covering(from);
        self.state
            .range(outbox_key(start)..outbox_key(u64::MAX))
            .flat_map(move |kv| -> Vec<Result<(u64, Vec<u8>)>> {
                let (k, v) = match kv {
                    Ok(kv) => kv,
                    Err(source) => {
                        let op = "iterate o/ in tree state".into();
                        return vec![Err(StoreError::Sled { path: path.clone(), op, source })];
                    }
                };
                let records = outbox_entries(&k, &v, |rs| {
                    rs.into_iter()
                        .filter(|(s, _)| *s >= from)
                        .map(|(s, r)| Ok((s, r.to_vec())))
                        .collect()
                });
                records.unwrap_or_else(|what| vec![Err(corrupt(&path, STATE, &k, what))])
            })
            .filter(page::ascending_from(from))
    }

    /// Whether outbox record `seq` is still pending.
    pub fn outbox_contains(&self, seq: u64) -> Result<bool> {
        let covering = page::covering(&self.state, OUTBOX, seq)
            .map_err(self.sled_err("look up an o/ key in tree state"))?;
        let Some((first, v)) = covering else { return Ok(false) };
        let key = outbox_key(first);
        outbox_entries(&key, &v, |rs| rs.iter().any(|(s, _)| *s == seq))
            .map_err(|what| self.corrupt(STATE, &key, what))
    }

    /// Adds records `adds`, from sequence `first` on, to `batch` (one page when more than one).
    pub(super) fn batch_outbox_adds(batch: &mut sled::Batch, first: u64, adds: &[Vec<u8>]) {
        let records: Vec<&[u8]> = adds.iter().map(Vec::as_slice).collect();
        for (i, run) in page::runs(&records) {
            batch.insert(&outbox_key(first + i as u64), outbox_value(run));
        }
    }

    /// Adds to `batch` the removal of outbox records `seqs` (those not in the outbox are
    /// ignored); returns how many are removed. Call it once per batch: it reads the pages as
    /// they are before the batch.
    pub(super) fn outbox_remove(&self, batch: &mut sled::Batch, seqs: &[u64]) -> Result<usize> {
        // What the Sparkplug view has not sent yet stays readable for it (`sparkplug.rs`).
        self.sparkplug_set_aside(batch, seqs)?;
        page::remove(&self.state, OUTBOX, batch, seqs, page::Pages::Plain).map_err(|e| match e {
            page::RemoveError::Sled(e) => self.sled_err("read an o/ key of tree state")(e),
            page::RemoveError::Corrupt(k, what) => self.corrupt(STATE, &k, what),
        })
    }

    /// The last outbox sequence stored (0 when none).
    pub(super) fn outbox_last_seq(&self) -> Result<u64> {
        page::last_seq(&self.state, OUTBOX)
            .map_err(self.sled_err("read last o/ key of tree state"))?
            .map_err(|k| self.corrupt(STATE, &k, "outbox key is not o/ + 8 bytes"))
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{Store, StoreOptions};

    fn pending(s: &Store) -> Vec<u64> {
        s.outbox_pending().map(|r| r.unwrap().0).collect()
    }

    /// Acknowledging every other record of a page (a backlog's events, between its raw samples)
    /// writes the page once, under its key: the records left keep their sequences.
    #[test]
    fn every_other_record_leaves_a_page_written_once_under_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.append_journal(&[(1, b"x".to_vec())]).unwrap();
        let recs: Vec<Vec<u8>> = (1..=10u8).map(|i| vec![1, i]).collect();
        s.checkpoint(1, b"d", &recs).unwrap();
        s.outbox_ack_many(&[1, 3, 5, 7, 9], &[]).unwrap();
        let keys: Vec<u64> = s
            .state
            .scan_prefix(super::OUTBOX)
            .keys()
            .map(|k| crate::store::page::key_seq(super::OUTBOX, &k.unwrap()).unwrap())
            .collect();
        assert_eq!(keys, vec![2], "moved to its first record left, not cut into five");
        assert_eq!(pending(&s), vec![2, 4, 6, 8, 10]);
        let got: Vec<Vec<u8>> = s.outbox_pending().map(|r| r.unwrap().1).collect();
        assert_eq!(got, [2u8, 4, 6, 8, 10].map(|i| vec![1, i]));
        assert!(s.outbox_contains(4).unwrap() && !s.outbox_contains(5).unwrap());
        let err = s.checkpoint(1, b"d", &[vec![]]).unwrap_err();
        assert!(err.to_string().contains("outbox record 0 of the checkpoint is empty"), "{err}");
        s.outbox_ack_many(&[2, 4, 6, 8, 10], &[]).unwrap();
        assert_eq!(s.state.scan_prefix(super::OUTBOX).count(), 0, "a page left empty goes");
        drop(s);
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        assert_eq!(s.next_outbox_seq(), 11, "sequences are not reused");
    }

    /// The page a checkpoint adds is packed; acknowledgements unpack it and write what is left
    /// plain (they hold the store's lock, which an alert waits for); both read the same.
    #[test]
    fn a_checkpoint_page_is_packed_and_written_again_plain() {
        use crate::store::page::{PACKED, PAGE};
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.append_journal(&[(1, b"x".to_vec())]).unwrap();
        let recs: Vec<Vec<u8>> = (1..=20u8)
            .map(|i| [&[1][..], br#"{"machine":"press-1","sensor":"s1","seq":"#, &[i]].concat())
            .collect();
        s.checkpoint(1, b"d", &recs).unwrap();
        let first =
            |s: &Store| s.state.scan_prefix(super::OUTBOX).values().next().unwrap().unwrap();
        let packed = first(&s);
        assert_eq!(packed[0], PACKED);
        assert!(packed.len() * 3 < recs.iter().map(|r| r.len() + 4).sum::<usize>());
        assert_eq!(pending(&s), (1..=20).collect::<Vec<_>>());
        assert!(s.outbox_contains(7).unwrap());
        assert_eq!(s.outbox_depth().unwrap(), (20, recs.iter().map(|r| r.len() as u64).sum()));
        s.outbox_ack_many(&[1, 5], &[]).unwrap();
        assert_eq!(first(&s)[0], PAGE, "written again plain");
        let got: Vec<(u64, Vec<u8>)> = s.outbox_pending().map(|r| r.unwrap()).collect();
        let want: Vec<(u64, Vec<u8>)> = (1..=20u64)
            .filter(|i| ![1, 5].contains(i))
            .map(|i| (i, recs[i as usize - 1].clone()))
            .collect();
        assert_eq!(got, want);
    }

    /// A checkpoint's records are one value; acknowledgements take records out of the middle
    /// and the ends of pages, what is left reads the same, across a reopen.
    #[test]
    fn records_leave_a_page_one_by_one_and_the_rest_reads_the_same() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
            s.append_journal(&[(1, b"x".to_vec()), (2, b"y".to_vec())]).unwrap();
            // A record whose bytes begin like a page is stored as a page of one.
            let recs: Vec<Vec<u8>> = (1..=6u8).map(|i| vec![i, i]).collect();
            s.checkpoint(1, b"d", &recs).unwrap();
            s.checkpoint(2, b"d", &[vec![0xFE, 7]]).unwrap();
            assert_eq!(s.state.scan_prefix(super::OUTBOX).count(), 2, "one key per checkpoint");
            assert_eq!(pending(&s), (1..=7).collect::<Vec<_>>());
            s.outbox_ack_many(&[3, 4, 99], &[]).unwrap();
            assert_eq!(pending(&s), vec![1, 2, 5, 6, 7]);
            assert!(s.outbox_contains(5).unwrap() && !s.outbox_contains(4).unwrap());
            s.outbox_ack(1).unwrap();
            s.outbox_ack(6).unwrap();
            assert_eq!(pending(&s), vec![2, 5, 7]);
        }
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        assert_eq!(s.next_outbox_seq(), 8);
        let got: Vec<(u64, Vec<u8>)> = s.outbox_pending().map(|r| r.unwrap()).collect();
        assert_eq!(got, vec![(2, vec![2, 2]), (5, vec![5, 5]), (7, vec![0xFE, 7])]);
        assert_eq!(s.outbox_after(2, 1).unwrap(), vec![(5, vec![5, 5])]);
        s.outbox_ack_many(&[2, 5, 7], &[]).unwrap();
        assert_eq!(pending(&s), Vec::<u64>::new());
        assert_eq!(s.state.scan_prefix(super::OUTBOX).count(), 0);
        drop(s);
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        assert_eq!(s.next_outbox_seq(), 8, "sequences are not reused");
    }
}
