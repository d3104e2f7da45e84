//! The outbox's record count, kept in one `state` key.
//!
//! A start ledgers how many records wait for the broker (the `Restart` record) and the forwarder
//! reports it. Counting them reads every outbox key: after a week's outage about 170 000 keys and
//! 0.43 s, most of the time a start took. So the count is kept in `n/outbox_records`, written in
//! every batch that adds or removes outbox records (a checkpoint, declared gaps, an
//! acknowledgement, a shed), and a start reads one key.
//!
//! The count is derived data: the pages under `o/` are the truth. A store written before the key
//! existed, or one a salvage built (it copies the pages, not the count), has no key and is
//! counted once when opened; the first batch that changes the outbox then writes the key. A key
//! that does not decode is counted again the same way, with a warning, rather than treated as
//! damage: nothing is lost by counting. The store model test (`tests/store_model.rs`) compares
//! the key with the pages after every operation and every reopen.

use super::{Result, Store};

/// `state` key: the number of records in the outbox, u64 big-endian.
pub(super) const OUTBOX_RECORDS: &[u8] = b"n/outbox_records";

impl Store {
    /// The number of records in the outbox, as the last batch that changed it left it.
    pub fn outbox_records(&self) -> u64 {
        self.outbox_records
    }

    /// On open: the kept count, or a count of the pages when there is none.
    pub(super) fn load_outbox_records(&mut self) -> Result<()> {
        let kept =
            self.state.get(OUTBOX_RECORDS).map_err(self.sled_err("read n/outbox_records"))?;
        match kept.as_deref().map(<[u8; 8]>::try_from) {
            Some(Ok(n)) => self.outbox_records = u64::from_be_bytes(n),
            Some(Err(_)) => {
                tracing::warn!(
                    store = %self.path.display(),
                    "n/outbox_records of tree state is not an 8-byte integer: counting the outbox"
                );
                self.outbox_records = self.count_outbox_records()?;
            }
            None => self.outbox_records = self.count_outbox_records()?,
        }
        Ok(())
    }

    /// Counts the outbox's records from its pages (their headers, for packed pages).
    pub fn count_outbox_records(&self) -> Result<u64> {
        Ok(self.outbox_depth()?.0)
    }

    /// Adds to `batch` the count `added` records more and `removed` fewer than now; returns it,
    /// for the caller to keep with [`Store::set_outbox_records`] once the batch is applied.
    pub(super) fn batch_outbox_records(
        &self,
        batch: &mut sled::Batch,
        added: usize,
        removed: usize,
    ) -> u64 {
        let n = (self.outbox_records + added as u64).saturating_sub(removed as u64);
        batch.insert(OUTBOX_RECORDS, &n.to_be_bytes());
        n
    }

    pub(super) fn set_outbox_records(&mut self, n: u64) {
        self.outbox_records = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::outbox::{GapNotice, GapRange};
    use crate::store::StoreOptions;

    fn opts() -> StoreOptions {
        StoreOptions {
            cache_bytes: 1 << 20,
            raw_threshold: 1 << 20,
            segment_bytes: 1 << 20,
            ..StoreOptions::default()
        }
    }

    fn kept_and_counted(s: &Store) -> (u64, u64) {
        (s.outbox_records(), s.count_outbox_records().unwrap())
    }

    fn gap(n: i64) -> GapNotice {
        GapNotice {
            machine: "m1".into(),
            sensor: "s1".into(),
            range: GapRange::Samples { from_ms: n, to_ms: n + 1 },
            reason: "overrun".into(),
            declared_at_ms: n,
        }
    }

    /// Every batch that changes the outbox keeps the count, and a reopen reads it back.
    #[test]
    fn each_change_of_the_outbox_keeps_its_count() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), opts()).unwrap();
        assert_eq!(kept_and_counted(&s), (0, 0));
        s.append_journal(&[(1, b"a".to_vec()), (2, b"b".to_vec())]).unwrap();
        s.checkpoint(1, b"", &[b"r1".to_vec(), b"r2".to_vec(), b"r3".to_vec()]).unwrap();
        assert_eq!(kept_and_counted(&s), (3, 3));
        s.declare_gaps(&[gap(1), gap(2)], 5).unwrap();
        assert_eq!(kept_and_counted(&s), (5, 5), "two gap records");
        // Acknowledged twice over, and one sequence that was never there.
        s.outbox_ack_many(&[2, 2, 4, 99], &[]).unwrap();
        assert_eq!(kept_and_counted(&s), (3, 3));
        s.outbox_ack(2).unwrap();
        assert_eq!(kept_and_counted(&s), (3, 3), "acknowledged already: nothing removed");
        s.outbox_ack(1).unwrap();
        s.checkpoint(2, b"", &[b"r6".to_vec()]).unwrap();
        assert_eq!(kept_and_counted(&s), (3, 3));
        drop(s);
        let s = Store::open(dir.path(), opts()).unwrap();
        assert_eq!(kept_and_counted(&s), (3, 3), "after a reopen");
        let kept = s.state.get(OUTBOX_RECORDS).unwrap().unwrap();
        assert_eq!(kept.as_ref(), &3u64.to_be_bytes());
    }

    /// A store without the key (written before it was kept, or built by a salvage), or with one
    /// that does not decode, is counted when opened; the next change writes the key.
    #[test]
    fn a_store_without_a_readable_count_is_counted_when_opened() {
        for kept in [None, Some(&b"bad"[..])] {
            let dir = tempfile::tempdir().unwrap();
            {
                let mut s = Store::open(dir.path(), opts()).unwrap();
                s.append_journal(&[(1, b"a".to_vec())]).unwrap();
                s.checkpoint(1, b"", &[b"r1".to_vec(), b"r2".to_vec()]).unwrap();
                match kept {
                    None => s.state.remove(OUTBOX_RECORDS).map(drop).unwrap(),
                    Some(v) => s.state.insert(OUTBOX_RECORDS, v).map(drop).unwrap(),
                }
                s.commit().unwrap();
            }
            let mut s = Store::open(dir.path(), opts()).unwrap();
            assert_eq!(kept_and_counted(&s), (2, 2), "{kept:?}");
            s.outbox_ack(1).unwrap();
            drop(s);
            let s = Store::open(dir.path(), opts()).unwrap();
            let v = s.state.get(OUTBOX_RECORDS).unwrap().unwrap();
            assert_eq!(v.as_ref(), &1u64.to_be_bytes(), "{kept:?}: written by the next change");
        }
    }
}
