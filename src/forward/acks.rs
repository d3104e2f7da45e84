//! Records on their way out of the outbox: those whose PUBLISH was written (to be ledgered
//! `Published`) and those acknowledged (to be removed), and when to ask the store for it. Pure.
//!
//! Acknowledgements are applied in batches ([`Write::Apply`], no fsync): after `commit_acks`
//! records, `commit_ms` after the oldest one not yet applied, or as soon as the session is idle,
//! whichever comes first. Applied is not yet durable: the store's next commit makes it so,
//! normally a checkpoint's; a [`Write::Sync`] is due `sync_ms` after the first application no
//! commit has covered.

use super::request::Write;

#[derive(Debug, Default)]
pub(super) struct Acks {
    /// Records whose publication is complete, not yet applied.
    acked: Vec<u64>,
    /// When the oldest record in `acked` was acknowledged.
    acked_since_ms: Option<i64>,
    /// When acknowledgements were first applied since the last sync.
    unsynced_since_ms: Option<i64>,
    /// Records whose PUBLISH (or a part of it) was written since the last [`Write::Apply`].
    published: Vec<u64>,
}

impl Acks {
    pub(super) fn published(&mut self, seqs: Vec<u64>) {
        self.published.extend(seqs);
    }

    pub(super) fn acknowledged(&mut self, seqs: Vec<u64>, now_ms: i64) {
        if !seqs.is_empty() && self.acked.is_empty() {
            self.acked_since_ms = Some(now_ms);
        }
        self.acked.extend(seqs);
    }

    /// Records acknowledged and not yet applied.
    pub(super) fn waiting(&self) -> usize {
        self.acked.len()
    }

    /// Milliseconds until applying is due (0: now); `None` with nothing acknowledged. `idle`:
    /// nothing in flight and nothing buffered to send (a drain has just ended, or a live record
    /// was acknowledged; applying costs no fsync).
    pub(super) fn commit_in_ms(
        &self,
        now_ms: i64,
        idle: bool,
        commit_acks: usize,
        commit_ms: i64,
    ) -> Option<i64> {
        let since = self.acked_since_ms?;
        if self.acked.len() >= commit_acks || idle {
            return Some(0);
        }
        Some((since + commit_ms - now_ms).max(0))
    }

    /// Milliseconds until a sync is due (0: now); `None` with nothing applied since the last.
    pub(super) fn sync_in_ms(&self, now_ms: i64, sync_ms: i64) -> Option<i64> {
        Some((self.unsynced_since_ms? + sync_ms - now_ms).max(0))
    }

    /// Everything acknowledged and written as one [`Write::Apply`] (written records in sequence
    /// order, each once: one sent again after a reconnect is ledgered again); `None` with neither.
    pub(super) fn take(&mut self) -> Option<Write> {
        self.acked_since_ms = None;
        let acked = std::mem::take(&mut self.acked);
        let mut published = std::mem::take(&mut self.published);
        published.sort_unstable();
        published.dedup();
        (!(acked.is_empty() && published.is_empty())).then_some(Write::Apply { published, acked })
    }

    /// The store applied a [`Write::Apply`] (not durable yet).
    pub(super) fn applied(&mut self, now_ms: i64) {
        self.unsynced_since_ms.get_or_insert(now_ms);
    }

    /// The store made the applied acknowledgements durable (or found a commit had).
    pub(super) fn synced(&mut self) {
        self.unsynced_since_ms = None;
    }
}
