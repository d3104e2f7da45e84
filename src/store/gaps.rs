//! Gaps a live source declares (a sensor overrun, samples shed under backpressure, a Modbus
//! device that did not answer): each one an outbox record for `gaps/{sensor}` and a
//! `GapDeclared` ledger record naming it, written in one batch outside the decide stage's
//! checkpoint (the decide stage numbers its own outbox records only when it checkpoints).

use super::state::{outbox_key, OUTBOX_NEXT};
use super::{Result, Store};
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::records::outbox::{GapNotice, OutboxRecord};

/// Prefix of the count of gaps a live source declared per sensor and reason: `n/gaps/` +
/// machine + NUL + sensor + NUL + reason → u64 BE (same batch as the gaps).
const GAP_COUNTS: &[u8] = b"n/gaps/";

fn gap_count_key(machine: &str, sensor: &str, reason: &str) -> Vec<u8> {
    [GAP_COUNTS, machine.as_bytes(), b"\0", sensor.as_bytes(), b"\0", reason.as_bytes()].concat()
}

/// Gaps declared per `(machine, sensor)` and reason.
pub type GapCounts =
    std::collections::BTreeMap<(String, String), std::collections::BTreeMap<String, u64>>;

impl Store {
    fn gap_count(&self, key: &[u8]) -> Result<u64> {
        match self.state.get(key).map_err(self.sled_err("read n/gaps/"))? {
            None => Ok(0),
            Some(v) => super::decode_u64(&self.path, super::STATE, key, &v),
        }
    }

    /// The gaps live sources declared, per sensor and reason (the decide stage's own,
    /// `gateway_down`, are in the sensor book).
    pub fn gap_counts(&self) -> Result<GapCounts> {
        let mut out = GapCounts::new();
        for kv in self.state.scan_prefix(GAP_COUNTS) {
            let (k, v) = kv.map_err(self.sled_err("iterate n/gaps/"))?;
            let n = super::decode_u64(&self.path, super::STATE, &k, &v)?;
            let rest = String::from_utf8_lossy(&k[GAP_COUNTS.len()..]).into_owned();
            let mut parts = rest.splitn(3, '\0');
            let (Some(m), Some(s), Some(r)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            out.entry((m.to_string(), s.to_string())).or_default().insert(r.to_string(), n);
        }
        Ok(out)
    }

    /// The sensor book with the gaps live sources declared folded in: what people see.
    pub fn sensor_book_with_gaps(&self) -> Result<crate::records::sensors::SensorBook> {
        let mut book = self.sensor_book()?;
        for (key, reasons) in self.gap_counts()? {
            let a = book.sensors.entry(key).or_default();
            for (r, n) in reasons {
                *a.gaps.entry(r).or_default() += n;
            }
        }
        Ok(book)
    }

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
        let mut counts: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
        for gap in gaps {
            let key = gap_count_key(&gap.machine, &gap.sensor, &gap.reason);
            let n = match counts.get(&key) {
                Some(&n) => n,
                None => self.gap_count(&key)?,
            };
            counts.insert(key, n + 1);
            batch.insert(&outbox_key(seq), OutboxRecord::Gap(gap.clone()).encode());
            ledger.push(LedgerRecord::new(
                at_ms,
                LedgerEntry::GapDeclared { gap: gap.clone(), outbox_seq: seq },
            ));
            seq += 1;
        }
        batch.insert(OUTBOX_NEXT, &seq.to_be_bytes());
        let records = self.batch_outbox_records(&mut batch, gaps.len(), 0);
        for (k, n) in counts {
            batch.insert(k, &n.to_be_bytes());
        }
        let next_ledger = self.batch_ledger(&mut batch, &ledger);
        failpoint!("store::gaps::before_apply", crate::store::StoreError);
        self.state
            .apply_batch(batch)
            .map_err(self.sled_err("apply declared gaps to tree state"))?;
        self.next_outbox = seq;
        self.set_outbox_records(records);
        self.next_ledger = next_ledger;
        self.commit()
    }
}
