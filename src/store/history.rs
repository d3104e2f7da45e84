//! The input's history (`[store] history`, docs/contracts.md section 11): journal records stay
//! after they are decided, checkpointed and delivered, until their ingest time is older than the
//! history horizon (the newest decided ingest time minus `history`), so `linegate export` can
//! write them as a trace and `whatif` can decide them again.
//!
//! The journal is one sequence by position: the history is its prefix below the decide stage's
//! floor (the records it would have truncated before history existed). Two things shorten it,
//! both from its oldest end, so what is left is always one contiguous run of positions:
//! - the decide stage truncates what is older than the horizon ([`Store::journal_history_start`]);
//! - over the `max_bytes` budget, retention trims history before it sheds any frame still
//!   queued for the broker ([`Store::trim_history`]): history is input already decided and
//!   delivered, so trimming it loses nothing the gateway promised to deliver.

use super::journal::with_line;
use super::{Result, Store};
use crate::store::JournalRecord;

/// What [`Store::trim_history`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryTrim {
    /// Journal records removed.
    pub records: u64,
    /// The bytes their lines took (in sled or in segment files).
    pub bytes: u64,
    /// The journal's first position afterwards.
    pub start: u64,
}

/// One record of the history as `export` writes it.
pub type HistoryRecord = JournalRecord;

impl Store {
    /// The decide stage's floor: positions below it are decided, checkpointed and no queued
    /// outbox record references them (so only history keeps them). Not durable: after a start
    /// nothing is trimmable until the decide stage sets it again.
    pub fn set_history_floor(&mut self, floor: u64) {
        self.history_floor = floor.min(self.checkpoint_pos + 1);
    }

    /// The ingest time of the history's oldest record (`None` when the journal is empty).
    pub fn history_from(&self) -> Result<Option<i64>> {
        self.journal_metas(self.journal_start, u64::MAX).next().transpose().map(|m| m.map(|m| m.at))
    }

    /// The first position in `[journal start, upto)` whose ingest time is at or after
    /// `horizon_at`, or `upto` when every record there is older. Reads no segment.
    pub fn journal_history_start(&self, horizon_at: i64, upto: u64) -> Result<u64> {
        let from = self.journal_start;
        if from >= upto {
            return Ok(upto);
        }
        for m in self.journal_metas(from, upto) {
            let m = m?;
            if m.at >= horizon_at {
                return Ok(m.pos);
            }
        }
        Ok(upto)
    }

    /// Removes the oldest history records until their lines' bytes reach `want_bytes` (or the
    /// history is empty), and commits, which deletes the segment files left without references.
    pub fn trim_history(&mut self, want_bytes: u64) -> Result<HistoryTrim> {
        let floor = self.history_floor;
        let mut trim = HistoryTrim { start: self.journal_start, ..HistoryTrim::default() };
        if floor <= self.journal_start || want_bytes == 0 {
            return Ok(trim);
        }
        let mut end = self.journal_start;
        for m in self.journal_metas(self.journal_start, floor) {
            let m = m?;
            trim.records += 1;
            trim.bytes += m.body.len() + m.stored;
            end = m.pos + 1;
            if trim.bytes >= want_bytes {
                break;
            }
        }
        if end > self.journal_start {
            self.truncate_journal_before(end)?;
            self.commit()?;
        }
        trim.start = self.journal_start;
        Ok(trim)
    }

    /// History records with `from_at <= at < to_at`, in journal order, at positions in
    /// `[from_pos, upto)` (from the journal's start when `from_pos` is below it): with `upto` the
    /// checkpoint's position + 1 when the caller began, the records decided by then. Lines in
    /// segment files are read only for records in range.
    pub fn history(
        &self,
        from_pos: u64,
        upto: u64,
        from_at: i64,
        to_at: i64,
    ) -> impl Iterator<Item = Result<HistoryRecord>> + '_ {
        let from = from_pos.max(self.journal_start);
        let upto = upto.max(from);
        self.journal_metas(from, upto).filter_map(move |m| match m {
            Ok(m) if m.at < from_at || m.at >= to_at => None,
            Ok(m) => Some(with_line(&self.path, &self.segments, m)),
            Err(e) => Some(Err(e)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{StoreOptions, RAW_DIR};

    /// Raw lines of 100 bytes in segment files of 256 bytes: two lines a segment.
    fn store(dir: &std::path::Path) -> Store {
        let opts = StoreOptions { cache_bytes: 1 << 20, raw_threshold: 50, segment_bytes: 256 };
        Store::open(dir, opts).unwrap()
    }

    fn segments(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir.join(RAW_DIR)).unwrap().count()
    }

    #[test]
    fn the_horizon_is_the_first_record_at_or_after_it_below_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = store(dir.path());
        let recs: Vec<(i64, Vec<u8>)> = (0..10).map(|i| (i * 100, b"tick".to_vec())).collect();
        s.append_journal(&recs).unwrap();
        assert_eq!(s.journal_history_start(450, 11).unwrap(), 6);
        assert_eq!(s.journal_history_start(0, 11).unwrap(), 1);
        assert_eq!(s.journal_history_start(450, 4).unwrap(), 4, "never past the bound");
        assert_eq!(s.journal_history_start(5000, 11).unwrap(), 11);
    }

    #[test]
    fn trimming_removes_the_oldest_history_never_past_the_floor_and_frees_segments() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = store(dir.path());
        let recs: Vec<(i64, Vec<u8>)> = (0..10).map(|i| (i, vec![b'x'; 100])).collect();
        s.append_journal(&recs).unwrap();
        s.checkpoint(10, b"state", &[]).unwrap();
        let before = segments(dir.path());
        assert!(before >= 2, "{before} segments");
        // No floor yet (no decide stage since the start): nothing is history.
        assert_eq!(s.trim_history(1 << 20).unwrap().records, 0);
        // Positions 7.. are still needed (say, queued frames): at most 1..=6 may go.
        s.set_history_floor(7);
        // Each record: 100 bytes of line in a segment, 38 of reference in sled.
        let t = s.trim_history(250).unwrap();
        assert_eq!((t.records, t.bytes, t.start), (2, 276, 3), "{t:?}");
        let t = s.trim_history(1 << 20).unwrap();
        assert_eq!((t.records, t.start), (4, 7), "{t:?}");
        assert!(segments(dir.path()) < before, "segments left without references are deleted");
        assert_eq!(s.journal_from(1).next().unwrap().unwrap().0, 7);
        // The history read by export: positions and ingest times.
        let h: Vec<u64> = s.history(1, 11, 8, i64::MAX).map(|r| r.unwrap().pos).collect();
        assert_eq!(h, vec![9, 10]);
    }
}
