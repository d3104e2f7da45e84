//! The Sparkplug view's place in the store (`crate::sparkplug`): its position in the outbox, its
//! birth/death sequence, its metric table, and the records it has not passed yet that the JSON
//! forwarder acknowledged meanwhile.
//!
//! The Sparkplug view reads the same outbox as the JSON forwarder, at its own pace (it holds
//! everything while the broker or its primary host is away), so it keeps its own position:
//! `n/spb/cursor`, the last outbox sequence it has sent. The JSON forwarder removes a record once
//! its PUBACK came, which can be before the Sparkplug view has sent it; so every removal of a
//! record past the cursor ([`Store::outbox_remove`], on every path: acknowledgement and shed)
//! copies the record, in the same batch, to `p/` + its sequence ("set aside"). The view reads the
//! outbox and the records set aside as one sequence ([`Store::sparkplug_after`]), and its advance
//! ([`Store::sparkplug_advance`]) removes what it passed from `p/`. Without the cursor key (the
//! view never enabled, or forgotten by [`Store::sparkplug_forget`]), nothing is set aside.
//!
//! Keys of tree `state`: `n/spb/cursor` (u64 BE), `n/spb/bd_seq` (u64 BE, the last used),
//! `n/spb/metrics` (the view's metric table, its own bytes), `p/` + u64 BE (a record's bytes).

use super::state::outbox_key;
use super::{decode_u64, Result, Store, STATE};

pub(super) const CURSOR: &[u8] = b"n/spb/cursor";
pub(super) const BD_SEQ: &[u8] = b"n/spb/bd_seq";
pub(super) const TABLE: &[u8] = b"n/spb/metrics";
pub(super) const ASIDE: &[u8] = b"p/";

fn aside_key(seq: u64) -> [u8; 10] {
    let mut k = outbox_key(seq);
    k[..2].copy_from_slice(ASIDE);
    k
}

/// What the store keeps of the Sparkplug view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SparkplugPlace {
    /// The last outbox sequence sent (0: none yet).
    pub cursor: u64,
    /// The last birth/death sequence used, if any.
    pub bd_seq: Option<u64>,
    /// The metric table as the view last wrote it (empty: none).
    pub table: Vec<u8>,
}

impl Store {
    fn spb_u64(&self, key: &[u8]) -> Result<Option<u64>> {
        match self.state.get(key).map_err(self.sled_err("read n/spb/ from tree state"))? {
            None => Ok(None),
            Some(v) => decode_u64(&self.path, STATE, key, &v).map(Some),
        }
    }

    /// The view's place; a first call starts it (cursor 0: everything pending is to be sent)
    /// and commits, so from then on removals set records aside.
    pub fn sparkplug_place(&mut self) -> Result<SparkplugPlace> {
        self.usable()?;
        let cursor = match self.spb_u64(CURSOR)? {
            Some(c) => c,
            None => {
                let r = self.state.insert(CURSOR, &0u64.to_be_bytes());
                self.poison_on_error(r.map(drop).map_err(self.sled_err("start n/spb/cursor")))?;
                self.commits.wrote();
                self.commit()?;
                0
            }
        };
        let table = self.state.get(TABLE).map_err(self.sled_err("read n/spb/metrics"))?;
        Ok(SparkplugPlace {
            cursor,
            bd_seq: self.spb_u64(BD_SEQ)?,
            table: table.map(|v| v.to_vec()).unwrap_or_default(),
        })
    }

    /// The view's place without starting it: `None` when it never ran (or was forgotten).
    pub fn sparkplug_read(&self) -> Result<Option<SparkplugPlace>> {
        let Some(cursor) = self.spb_u64(CURSOR)? else { return Ok(None) };
        Ok(Some(SparkplugPlace { cursor, bd_seq: self.spb_u64(BD_SEQ)?, table: Vec::new() }))
    }

    /// The birth/death sequence of the next MQTT connection: the last one + 1, from 0 after
    /// 255 (Sparkplug B 3.0), made durable before it is returned, so no two connections use the
    /// same one even across a crash.
    pub fn sparkplug_next_bd_seq(&mut self) -> Result<u8> {
        self.usable()?;
        let next = self.spb_u64(BD_SEQ)?.map_or(0, |b| (b + 1) % 256);
        let r = self.state.insert(BD_SEQ, &next.to_be_bytes());
        self.poison_on_error(r.map(drop).map_err(self.sled_err("write n/spb/bd_seq")))?;
        self.commits.wrote();
        self.commit()?;
        Ok(next as u8)
    }

    /// At most `limit` records `(sequence, bytes)` after `after`, in sequence order: those still
    /// in the outbox and those set aside, merged.
    pub fn sparkplug_after(&self, after: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>> {
        let Some(from) = after.checked_add(1) else { return Ok(Vec::new()) };
        let mut aside = Vec::new();
        for kv in self.state.range(aside_key(from)..aside_key(u64::MAX)).take(limit) {
            let (k, v) = kv.map_err(self.sled_err("iterate p/ in tree state"))?;
            let seq = super::page::key_seq(ASIDE, &k)
                .ok_or_else(|| self.corrupt(STATE, &k, "a set-aside key is not p/ + 8 bytes"))?;
            aside.push((seq, v.to_vec()));
        }
        let outbox = self.outbox_after(after, limit)?;
        let mut out = Vec::with_capacity(limit.min(aside.len() + outbox.len()));
        let (mut a, mut o) = (aside.into_iter().peekable(), outbox.into_iter().peekable());
        while out.len() < limit {
            let take_aside = match (a.peek(), o.peek()) {
                (Some(x), Some(y)) => x.0 < y.0,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            out.extend(if take_aside { a.next() } else { o.next() });
        }
        Ok(out)
    }

    /// Records the view has not passed: set aside, plus those in the outbox past the cursor
    /// (while held records drain, those of other machines sent ahead of the cursor count too).
    pub fn sparkplug_held(&self) -> Result<u64> {
        let Some(cursor) = self.spb_u64(CURSOR)? else { return Ok(0) };
        let aside = self.state.scan_prefix(ASIDE).count() as u64;
        let pending = self.outbox_from(cursor.saturating_add(1)).count() as u64;
        Ok(aside + pending)
    }

    /// The view has sent everything through `cursor` and its metric table is now `table`: both
    /// written, the records it passed removed from `p/`, in one batch, then committed.
    pub fn sparkplug_advance(&mut self, cursor: u64, table: &[u8]) -> Result<()> {
        self.usable()?;
        let r = self.sparkplug_advance_apply(cursor, table);
        self.poison_on_error(r)?;
        self.commit()
    }

    fn sparkplug_advance_apply(&mut self, cursor: u64, table: &[u8]) -> Result<()> {
        let mut batch = sled::Batch::default();
        for k in self.state.range(aside_key(0)..=aside_key(cursor)).keys() {
            batch.remove(k.map_err(self.sled_err("iterate p/ in tree state"))?);
        }
        batch.insert(CURSOR, &cursor.to_be_bytes());
        batch.insert(TABLE, table);
        self.state.apply_batch(batch).map_err(self.sled_err("advance n/spb/cursor"))?;
        self.commits.wrote();
        Ok(())
    }

    /// The view is off: its place and everything set aside go, so nothing is set aside any more
    /// (a later start begins again with what is pending then). Commits when there was anything.
    pub fn sparkplug_forget(&mut self) -> Result<()> {
        self.usable()?;
        if self.spb_u64(CURSOR)?.is_none() && self.state.scan_prefix(ASIDE).next().is_none() {
            return Ok(());
        }
        let mut batch = sled::Batch::default();
        for k in self.state.scan_prefix(ASIDE).keys() {
            batch.remove(k.map_err(self.sled_err("iterate p/ in tree state"))?);
        }
        for k in [CURSOR, TABLE] {
            batch.remove(k);
        }
        let r = self.state.apply_batch(batch).map_err(self.sled_err("forget n/spb/"));
        self.poison_on_error(r)?;
        self.commits.wrote();
        self.commit()
    }

    /// Called by every removal of outbox records `seqs`, before the batch removing them is
    /// applied: copies those the Sparkplug view has not passed into `p/` in the same batch.
    pub(super) fn sparkplug_set_aside(&self, batch: &mut sled::Batch, seqs: &[u64]) -> Result<()> {
        let Some(cursor) = self.spb_u64(CURSOR)? else { return Ok(()) };
        let mut ahead: Vec<u64> = seqs.iter().copied().filter(|&s| s > cursor).collect();
        if ahead.is_empty() {
            return Ok(());
        }
        ahead.sort_unstable();
        let last = ahead[ahead.len() - 1];
        for r in self.outbox_from(ahead[0]) {
            let (seq, bytes) = r?;
            if seq > last {
                break;
            }
            if ahead.binary_search(&seq).is_ok() {
                batch.insert(&aside_key(seq), bytes);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{Store, StoreOptions};

    fn seqs(v: &[(u64, Vec<u8>)]) -> Vec<u64> {
        v.iter().map(|(s, _)| *s).collect()
    }

    #[test]
    fn removals_past_the_cursor_are_set_aside_until_the_view_passes_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.append_journal(&[(1, b"x".to_vec())]).unwrap();
        // Removed before the view started: gone for it too.
        s.checkpoint(1, b"d", &[vec![1, 0]]).unwrap();
        s.outbox_ack_many(&[1], &[]).unwrap();
        assert_eq!(s.sparkplug_place().unwrap().cursor, 0);
        let recs: Vec<Vec<u8>> = (1..=6u8).map(|i| vec![1, i]).collect();
        s.checkpoint(1, b"d", &recs).unwrap();
        s.sparkplug_advance(3, b"t").unwrap();
        // 2 and 3 are passed: removed for good; 4 and 6 are set aside; 5 stays in the outbox.
        s.outbox_ack_many(&[2, 3, 4, 6], &[]).unwrap();
        assert_eq!(seqs(&s.outbox_after(0, 10).unwrap()), vec![5, 7]);
        let got = s.sparkplug_after(3, 10).unwrap();
        assert_eq!(seqs(&got), vec![4, 5, 6, 7]);
        assert_eq!(got[0].1, vec![1, 3], "record 4 kept its bytes");
        assert_eq!(seqs(&s.sparkplug_after(3, 2).unwrap()), vec![4, 5], "bounded");
        assert_eq!(s.sparkplug_held().unwrap(), 4);
        s.sparkplug_advance(6, b"t2").unwrap();
        assert_eq!(seqs(&s.sparkplug_after(0, 10).unwrap()), vec![5, 7], "p/ through 6 gone");
        drop(s);
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        let place = s.sparkplug_place().unwrap();
        assert_eq!((place.cursor, place.table.as_slice()), (6, &b"t2"[..]), "durable");
        assert_eq!(s.sparkplug_held().unwrap(), 1);
        s.sparkplug_forget().unwrap();
        s.outbox_ack_many(&[5, 7], &[]).unwrap();
        assert!(s.sparkplug_after(0, 10).unwrap().is_empty(), "forgotten: nothing set aside");
        assert_eq!(s.sparkplug_held().unwrap(), 0);
    }

    #[test]
    fn the_birth_death_sequence_grows_by_one_per_connection_and_wraps_after_255() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        assert_eq!(s.sparkplug_next_bd_seq().unwrap(), 0);
        assert_eq!(s.sparkplug_next_bd_seq().unwrap(), 1);
        drop(s);
        let mut s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        assert_eq!(s.sparkplug_next_bd_seq().unwrap(), 2, "kept across a restart");
        for _ in 3..=255 {
            s.sparkplug_next_bd_seq().unwrap();
        }
        assert_eq!(s.sparkplug_next_bd_seq().unwrap(), 0, "after 255 comes 0");
    }
}
