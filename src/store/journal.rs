//! The journal: every arrival's raw line and ingest time, by position.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::{corrupt, failpoint, Result, Store, JOURNAL};

const VERSION: u8 = 1;

fn encode(at: i64, line: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(9 + line.len());
    v.push(VERSION);
    v.extend_from_slice(&at.to_be_bytes());
    v.extend_from_slice(line);
    v
}

fn decode(path: &std::path::Path, key: &[u8], value: &[u8]) -> Result<(u64, i64, Vec<u8>)> {
    let pos = <[u8; 8]>::try_from(key)
        .map(u64::from_be_bytes)
        .map_err(|_| corrupt(path, JOURNAL, key, "journal key is not 8 bytes"))?;
    match value {
        [VERSION, rest @ ..] if rest.len() >= 8 => {
            let (at, line) = rest.split_at(8);
            let at = i64::from_be_bytes(at.try_into().unwrap_or([0; 8]));
            Ok((pos, at, line.to_vec()))
        }
        [v, ..] if *v != VERSION => {
            Err(corrupt(path, JOURNAL, key, format!("unknown journal record version {v}")))
        }
        _ => Err(corrupt(
            path,
            JOURNAL,
            key,
            format!("journal record too short ({} bytes)", value.len()),
        )),
    }
}

impl Store {
    /// Appends records `(at, line)` in one batch and returns their positions. Not durable until
    /// the next [`Store::commit`] (or another call that commits).
    pub fn append_journal(&mut self, records: &[(i64, Vec<u8>)]) -> Result<Range<u64>> {
        self.usable()?;
        let r = self.append_journal_inner(records);
        self.poison_on_error(r)
    }

    fn append_journal_inner(&mut self, records: &[(i64, Vec<u8>)]) -> Result<Range<u64>> {
        let first = self.next_journal;
        let mut batch = sled::Batch::default();
        let mut pos = first;
        for (at, line) in records {
            batch.insert(&pos.to_be_bytes(), encode(*at, line));
            pos += 1;
        }
        self.journal.apply_batch(batch).map_err(self.sled_err("apply batch to tree journal"))?;
        self.next_journal = pos;
        if pos > first {
            self.dirty.store(true, Ordering::Release);
        }
        failpoint!("store::journal::after_append");
        Ok(first..pos)
    }

    /// The position the next appended record will get.
    pub fn next_journal_pos(&self) -> u64 {
        self.next_journal
    }

    /// The first journal position not truncated.
    pub fn journal_start(&self) -> u64 {
        self.journal_start
    }

    /// Journal records `(position, at, line)` from `pos` on, in order (truncated ones skipped).
    pub fn journal_from(&self, pos: u64) -> impl Iterator<Item = Result<(u64, i64, Vec<u8>)>> {
        let path: PathBuf = self.path.clone();
        let from = pos.max(self.journal_start);
        let sled_path = self.path.clone();
        self.journal.range(from.to_be_bytes()..).map(move |kv| match kv {
            Ok((k, v)) => decode(&path, &k, &v),
            Err(source) => Err(super::StoreError::Sled {
                path: sled_path.clone(),
                op: "iterate tree journal".into(),
                source,
            }),
        })
    }

    /// Removes journal records below `pos`, which the last checkpoint must cover
    /// (`pos <= checkpoint.journal_pos + 1`). Commits the new start first, so a crash never lets
    /// a position be reused; the removal itself becomes durable with the next commit.
    pub fn truncate_journal_before(&mut self, pos: u64) -> Result<()> {
        self.usable()?;
        let r = self.truncate_journal_before_inner(pos);
        self.poison_on_error(r)
    }

    fn truncate_journal_before_inner(&mut self, pos: u64) -> Result<()> {
        if pos > self.checkpoint_pos + 1 {
            return Err(self.refused(format!(
                "truncating the journal before {pos} would drop records after the last \
                 checkpoint (journal position {})",
                self.checkpoint_pos
            )));
        }
        if pos <= self.journal_start {
            return Ok(());
        }
        self.state
            .insert(super::state::JOURNAL_START, &pos.to_be_bytes())
            .map_err(self.sled_err("write n/journal_start to tree state"))?;
        self.commit()?;
        self.journal_start = pos;
        let mut batch = sled::Batch::default();
        for key in self.journal.range(..pos.to_be_bytes()).keys() {
            batch.remove(key.map_err(self.sled_err("iterate tree journal"))?);
        }
        self.journal.apply_batch(batch).map_err(self.sled_err("apply batch to tree journal"))
    }

    /// On open: the next position is past the last record and past the truncation point.
    pub(super) fn load_journal_position(&mut self) -> Result<()> {
        if let Some((k, _)) =
            self.journal.last().map_err(self.sled_err("read last key of tree journal"))?
        {
            let last = <[u8; 8]>::try_from(&k[..])
                .map(u64::from_be_bytes)
                .map_err(|_| self.corrupt(JOURNAL, &k, "journal key is not 8 bytes"))?;
            self.next_journal = self.next_journal.max(last.saturating_add(1));
        }
        self.next_journal = self.next_journal.max(self.journal_start);
        Ok(())
    }
}
