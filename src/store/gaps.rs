//! Gaps a live source declares (a sensor overrun, samples shed under backpressure, a Modbus
//! device that did not answer): each one an outbox record for `gaps/{sensor}` and a
//! `GapDeclared` ledger record naming it, written in one batch outside the decide stage's
//! checkpoint (the decide stage numbers its own outbox records only when it checkpoints).

use super::state::{outbox_key, OUTBOX_NEXT};
use super::{failpoint, Result, Store};
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::records::outbox::{GapNotice, OutboxRecord};

impl Store {
    /// Adds one outbox record and one `GapDeclared` ledger record (stamped `at_ms`) per gap, in
    /// one batch, then commits. Nothing to do for no gaps.
    pub fn declare_gaps(&mut self, gaps: &[GapNotice], at_ms: i64) -> Result<()> {
        if gaps.is_empty() {
            return Ok(());
        }
        self.usable()?;
        let r = self.declare_gaps_inner(gaps, at_ms);
        self.poison_on_error(r)
    }

    fn declare_gaps_inner(&mut self, gaps: &[GapNotice], at_ms: i64) -> Result<()> {
        let mut batch = sled::Batch::default();
        let mut seq = self.next_outbox;
        let mut ledger = Vec::with_capacity(gaps.len());
        for gap in gaps {
            batch.insert(&outbox_key(seq), OutboxRecord::Gap(gap.clone()).encode());
            ledger.push(LedgerRecord::new(
                at_ms,
                LedgerEntry::GapDeclared { gap: gap.clone(), outbox_seq: seq },
            ));
            seq += 1;
        }
        batch.insert(OUTBOX_NEXT, &seq.to_be_bytes());
        let next_ledger = self.batch_ledger(&mut batch, &ledger);
        failpoint!("store::gaps::before_apply");
        self.state
            .apply_batch(batch)
            .map_err(self.sled_err("apply declared gaps to tree state"))?;
        self.next_outbox = seq;
        self.next_ledger = next_ledger;
        self.commit()
    }
}
