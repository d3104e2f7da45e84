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

use super::journal::{decode_ref, BodyRef};
use super::{page, Result, Store, JOURNAL};

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

/// History lines as `export` writes them ([`Store::history_lines`]): each kept record's line and
/// a newline, in journal order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HistoryLines {
    pub text: Vec<u8>,
    /// Lines in `text`.
    pub lines: u64,
    /// Records read within the time range, kept or not.
    pub read: usize,
    /// The position of the last of them.
    pub last_pos: Option<u64>,
}

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

    /// The history as `export` writes it: up to `max` records with `from_at <= at < to_at`, in
    /// journal order, at positions in `[from_pos, upto)` (from the journal's start when
    /// `from_pos` is below it; with `upto` the checkpoint's position + 1 when the caller began,
    /// the records decided by then), each line that `keep` accepts followed by a newline. Lines
    /// are copied once, into the text (the export's pace is sled's iteration and this copy:
    /// docs/performance.md); lines in segment files are read only for records in range.
    pub fn history_lines(
        &self,
        from_pos: u64,
        upto: u64,
        (from_at, to_at): (i64, i64),
        max: usize,
        keep: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<HistoryLines> {
        let from = from_pos.max(self.journal_start);
        let mut out = HistoryLines::default();
        let start = page::covering_seq(&self.journal, b"", from);
        if start >= upto || max == 0 {
            return Ok(out);
        }
        for kv in self.journal.range(start.to_be_bytes()..upto.to_be_bytes()) {
            let (k, v) = kv.map_err(self.sled_err("iterate tree journal"))?;
            let corrupt = |what| self.corrupt(JOURNAL, &k, what);
            let unpacked = page::unpack(&v).map_err(corrupt)?;
            let records = page::keyed_entries(b"", &k, &unpacked).map_err(corrupt)?;
            let on_page = page::is_page(&v).then(|| page::key_seq(b"", &k).unwrap_or(0));
            for (pos, r) in records.into_iter().filter(|(p, _)| (from..upto).contains(p)) {
                let (at, _, body) = decode_ref(&self.path, pos, on_page, r)?;
                if at < from_at || at >= to_at {
                    continue;
                }
                let read;
                let line = match body {
                    BodyRef::Inline(line) => line,
                    BodyRef::Segment(s) => {
                        read = self
                            .segments
                            .read(&s)
                            .map_err(|what| self.corrupt(JOURNAL, &pos.to_be_bytes(), what))?;
                        &read[..]
                    }
                };
                (out.read, out.last_pos) = (out.read + 1, Some(pos));
                if keep(line) {
                    out.text.extend_from_slice(line);
                    out.text.push(b'\n');
                    out.lines += 1;
                }
                if out.read >= max {
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{StoreOptions, RAW_DIR};

    /// Raw lines of 100 bytes in segment files of 256 bytes: two lines a segment.
    fn store(dir: &std::path::Path) -> Store {
        let opts = StoreOptions {
            cache_bytes: 1 << 20,
            raw_threshold: 50,
            segment_bytes: 256,
            ..StoreOptions::default()
        };
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
        // The history read by export: positions and ingest times (positions 9 and 10).
        let h = s.history_lines(1, 11, (8, i64::MAX), 100, &mut |_| true).unwrap();
        assert_eq!((h.read, h.last_pos), (2, Some(10)));
        assert_eq!(h.text, [vec![b'x'; 100], b"\n".to_vec()].concat().repeat(2));
    }

    /// The export's text: lines in the time range, from sled and from segment files, each with
    /// a newline, `keep` deciding which are written, `max` bounding what is read.
    #[test]
    fn history_lines_are_the_kept_lines_in_range_up_to_max() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = store(dir.path());
        let mut recs: Vec<(i64, Vec<u8>)> =
            (0..6).map(|i| (i, format!("l{i}").into_bytes())).collect();
        recs.push((6, vec![b'r'; 60]));
        s.append_journal(&recs).unwrap();
        let all = &mut |_: &[u8]| true;
        let h = s.history_lines(1, 8, (1, i64::MAX), 100, all).unwrap();
        let text = [&b"l1\nl2\nl3\nl4\nl5\n"[..], &[b'r'; 60], b"\n"].concat();
        assert_eq!((h.text, h.lines, h.read, h.last_pos), (text, 6, 6, Some(7)));
        let odd = &mut |l: &[u8]| l.last().is_some_and(|b| b % 2 == 1);
        let h = s.history_lines(3, 8, (0, 5), 2, odd).unwrap();
        assert_eq!((h.text, h.lines, h.read, h.last_pos), (b"l3\n".to_vec(), 1, 2, Some(4)));
        let h = s.history_lines(1, 8, (100, 200), 10, all).unwrap();
        assert_eq!((h.lines, h.last_pos), (0, None), "nothing in the time range");
    }
}
