//! Per-sensor sequence numbers, allocated in blocks and never reused after a crash.

use std::ops::Range;
use std::path::PathBuf;

use super::{corrupt, decode_u64, Result, Store, StoreError, SEQ};

pub(super) fn seq_key(machine: &str, sensor: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + machine.len() + sensor.len());
    // Lengths of machine names are far below u32::MAX (configuration strings).
    k.extend_from_slice(&u32::try_from(machine.len()).unwrap_or(u32::MAX).to_be_bytes());
    k.extend_from_slice(machine.as_bytes());
    k.extend_from_slice(sensor.as_bytes());
    k
}

pub(super) fn decode_seq_key(path: &std::path::Path, key: &[u8]) -> Result<(String, String)> {
    let bad = || corrupt(path, SEQ, key, "seq key is not length + machine + sensor");
    let (len, rest) = key.split_first_chunk::<4>().ok_or_else(bad)?;
    let len = usize::try_from(u32::from_be_bytes(*len)).map_err(|_| bad())?;
    if rest.len() < len {
        return Err(bad());
    }
    let (m, s) = rest.split_at(len);
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| bad());
    Ok((text(m)?, text(s)?))
}

impl Store {
    /// Allocates `block` fresh sequence numbers for `(machine, sensor)` (the first ever is 1).
    /// The new high-water mark is committed before the range is returned, so after a crash no
    /// number in it is handed out again (unused ones are skipped, never reused).
    pub fn allocate_seq_block(
        &mut self,
        machine: &str,
        sensor: &str,
        block: u64,
    ) -> Result<Range<u64>> {
        self.usable()?;
        let r = self.allocate_seq_block_inner(machine, sensor, block);
        self.poison_on_error(r)
    }

    fn allocate_seq_block_inner(
        &mut self,
        machine: &str,
        sensor: &str,
        block: u64,
    ) -> Result<Range<u64>> {
        let key = seq_key(machine, sensor);
        let high = self.seq_high_water(machine, sensor)?;
        if block == 0 {
            return Ok(high + 1..high + 1);
        }
        let new_high = high.checked_add(block).filter(|h| *h < u64::MAX).ok_or_else(|| {
            self.refused(format!(
                "sequence numbers of {machine}/{sensor} exhausted (high-water mark {high})"
            ))
        })?;
        self.seq
            .insert(key, &new_high.to_be_bytes())
            .map_err(self.sled_err("write high-water mark to tree seq"))?;
        self.commit()?;
        Ok(high + 1..new_high + 1)
    }

    /// The highest sequence number allocated for `(machine, sensor)`, 0 when none.
    pub fn seq_high_water(&self, machine: &str, sensor: &str) -> Result<u64> {
        let key = seq_key(machine, sensor);
        match self.seq.get(&key).map_err(self.sled_err("read tree seq"))? {
            None => Ok(0),
            Some(v) => decode_u64(&self.path, SEQ, &key, &v),
        }
    }

    /// Every `((machine, sensor), high-water mark)`, in key order.
    pub fn seq_marks(&self) -> impl Iterator<Item = Result<((String, String), u64)>> {
        let path: PathBuf = self.path.clone();
        self.reading(self.seq.iter().map(move |kv| {
            let (k, v) = kv.map_err(|source| StoreError::Sled {
                path: path.clone(),
                op: "iterate tree seq".into(),
                source,
            })?;
            Ok((decode_seq_key(&path, &k)?, decode_u64(&path, SEQ, &k, &v)?))
        }))
    }
}
