//! The PUBLISHes handed to the client and not yet acknowledged: their packet ids, the records
//! each completes, the payload bytes in flight. Pure.
//!
//! rumqttc's `publish` returns no packet id: PUBLISHes are handed over in order and rumqttc
//! reports `Outgoing::Publish(pkid)` in the same order, so the n-th such report names the n-th
//! flight without one.

use std::collections::{HashMap, VecDeque};

/// A PUBLISH handed to the client, awaiting its packet id and then its PUBACK.
#[derive(Debug)]
struct Flight {
    pkid: Option<u16>,
    /// Records complete once this PUBACK arrives.
    seqs: Vec<u64>,
    /// A record split over several PUBLISHes (raw samples), complete when all are acknowledged.
    part_of: Option<u64>,
    /// Payload bytes.
    bytes: usize,
}

/// The flights of one connection, oldest first.
#[derive(Debug, Default)]
pub(super) struct Flights {
    queue: VecDeque<Flight>,
    /// Payload bytes of `queue`.
    bytes: usize,
    /// Outstanding PUBLISHes of each split record.
    parts: HashMap<u64, usize>,
}

impl Flights {
    /// A PUBLISH of `bytes` payload bytes handed over, completing `seqs`, or one of the `n`
    /// parts of record `seq` for `part_of: Some((seq, n))`.
    pub(super) fn push(&mut self, bytes: usize, seqs: Vec<u64>, part_of: Option<(u64, usize)>) {
        if let Some((seq, n)) = part_of {
            self.parts.insert(seq, n);
        }
        let part_of = part_of.map(|(seq, _)| seq);
        self.queue.push_back(Flight { pkid: None, seqs, part_of, bytes });
        self.bytes += bytes;
    }

    /// rumqttc wrote a PUBLISH with packet id `pkid`: the oldest flight without one. Returns the
    /// records it carries (`None`: no flight was waiting for its packet id).
    pub(super) fn written(&mut self, pkid: u16) -> Option<Vec<u64>> {
        let f = self.queue.iter_mut().find(|f| f.pkid.is_none())?;
        f.pkid = Some(pkid);
        Some(f.seqs.iter().copied().chain(f.part_of).collect())
    }

    /// The broker acknowledged packet `pkid`: returns the records now complete (`None`: no
    /// flight has that packet id).
    pub(super) fn acknowledged(&mut self, pkid: u16) -> Option<Vec<u64>> {
        let i = self.queue.iter().position(|f| f.pkid == Some(pkid))?;
        let f = self.queue.remove(i)?;
        self.bytes -= f.bytes;
        let mut done = f.seqs;
        if let Some(seq) = f.part_of {
            let left = self.parts.entry(seq).or_insert(1);
            *left -= 1;
            if *left == 0 {
                self.parts.remove(&seq);
                done.push(seq);
            }
        }
        Some(done)
    }

    /// The connection is gone: nothing in flight will be acknowledged any more.
    pub(super) fn clear(&mut self) {
        self.queue.clear();
        self.bytes = 0;
        self.parts.clear();
    }

    pub(super) fn len(&self) -> usize {
        self.queue.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Payload bytes awaiting a PUBACK.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}
