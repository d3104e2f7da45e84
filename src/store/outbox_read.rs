//! Range reads of the outbox (`o/` keys of tree `state`), for the forwarder: it reads the
//! records after the last one it holds, a bounded number at a time, instead of the whole outbox.

use super::{Result, Store};

/// Records `(sequence, bytes)` kept by [`Store::outbox_scan`] and the last sequence it scanned.
pub type OutboxScan = (Vec<(u64, Vec<u8>)>, Option<u64>);

impl Store {
    /// At most `limit` outbox records `(sequence, bytes)` with sequence `> after`, in order.
    pub fn outbox_after(&self, after: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>> {
        Ok(self.outbox_scan(after, limit, |_| true)?.0)
    }

    /// Scans at most `limit` outbox records with sequence `> after`, in order, and returns those
    /// whose bytes `keep` accepts (the others are not copied) with the last sequence scanned.
    pub fn outbox_scan(
        &self,
        after: u64,
        limit: usize,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Result<OutboxScan> {
        let Some(from) = after.checked_add(1) else { return Ok((Vec::new(), None)) };
        let mut out = Vec::new();
        let mut last = None;
        for r in self.outbox_from(from).take(limit) {
            let (seq, bytes) = r?;
            last = Some(seq);
            if keep(&bytes) {
                out.push((seq, bytes));
            }
        }
        Ok((out, last))
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{Store, StoreOptions};

    #[test]
    fn reads_a_bounded_range_after_a_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.append_journal(&[(1, b"x".to_vec())]).unwrap();
        let recs: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i]).collect();
        s.checkpoint(1, b"d", &recs).unwrap();
        s.outbox_ack(2).unwrap();
        let got = s.outbox_after(0, 3).unwrap();
        assert_eq!(got, vec![(1, vec![0]), (3, vec![2]), (4, vec![3])]);
        assert_eq!(s.outbox_after(4, 10).unwrap(), vec![(5, vec![4])]);
        assert!(s.outbox_after(5, 10).unwrap().is_empty());
        assert!(s.outbox_after(u64::MAX, 10).unwrap().is_empty());
        let odd = s.outbox_scan(0, 3, |b| b[0] % 2 == 1).unwrap();
        assert_eq!(odd, (vec![(4, vec![3])], Some(4)), "three scanned, one kept");
        assert_eq!(s.outbox_scan(5, 3, |_| true).unwrap(), (vec![], None));
        assert!(s.outbox_contains(3).unwrap());
        assert!(!s.outbox_contains(2).unwrap());
    }
}
