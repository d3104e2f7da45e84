//! What the Sparkplug view counts, for `linegate status`, the status page and `/metrics`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::Serialize;

use super::session::{Kind, Publish};

/// The process's counters: the view's task writes them, the status and the metrics read them.
pub static STATS: Stats = Stats::new();

/// Counters shared by the view's task and its readers.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connected to the broker.
    pub online: AtomicBool,
    /// The current connection's birth/death sequence.
    pub bd_seq: AtomicU64,
    /// Messages sent, by type: NBIRTH, NDEATH, DBIRTH, DDATA.
    pub nbirth: AtomicU64,
    pub ndeath: AtomicU64,
    pub dbirth: AtomicU64,
    pub ddata: AtomicU64,
    /// Metric values sent flagged `is_historical`.
    pub historical: AtomicU64,
    /// Outbox records the view has not sent yet (counted about once a second).
    pub held: AtomicU64,
}

/// A copy of [`Stats`] at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Snapshot {
    pub online: bool,
    pub bd_seq: u64,
    pub nbirth: u64,
    pub ndeath: u64,
    pub dbirth: u64,
    pub ddata: u64,
    pub historical: u64,
    pub held: u64,
}

impl Stats {
    pub const fn new() -> Stats {
        Stats {
            online: AtomicBool::new(false),
            bd_seq: AtomicU64::new(0),
            nbirth: AtomicU64::new(0),
            ndeath: AtomicU64::new(0),
            dbirth: AtomicU64::new(0),
            ddata: AtomicU64::new(0),
            historical: AtomicU64::new(0),
            held: AtomicU64::new(0),
        }
    }

    /// `m` was handed over for publication.
    pub fn sent(&self, m: &Publish) {
        let counter = match m.kind {
            Kind::NBirth => &self.nbirth,
            Kind::NDeath => &self.ndeath,
            Kind::DBirth => &self.dbirth,
            Kind::DData => &self.ddata,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.historical.fetch_add(m.historical as u64, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Snapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Snapshot {
            online: self.online.load(Ordering::Relaxed),
            bd_seq: get(&self.bd_seq),
            nbirth: get(&self.nbirth),
            ndeath: get(&self.ndeath),
            dbirth: get(&self.dbirth),
            ddata: get(&self.ddata),
            historical: get(&self.historical),
            held: get(&self.held),
        }
    }
}
