//! Duplicate and id-conflict detection by `event_id` (CONTRACTS section 5).
//!
//! The memory is bounded: an id is remembered while its event time is at or after its machine's
//! horizon (`watermark - allowed_lateness`). Older events are too late whatever they are, so an
//! entry behind its horizon is treated as absent even before the periodic sweep removes it; the
//! sweep's timing therefore never changes a decision.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    fingerprint: u64,
    ts_ms: i64,
    machine: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    New,
    Duplicate,
    Conflict,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Dedup {
    ids: FxHashMap<String, Entry>,
    sweep_at: usize,
}

impl Dedup {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Looks `event_id` up; `horizon(machine)` gives each machine's horizon.
    pub fn check(&self, event_id: &str, fingerprint: u64, horizon: impl Fn(u32) -> i64) -> Seen {
        match self.ids.get(event_id) {
            Some(e) if e.ts_ms >= horizon(e.machine) => {
                if e.fingerprint == fingerprint {
                    Seen::Duplicate
                } else {
                    Seen::Conflict
                }
            }
            _ => Seen::New,
        }
    }

    pub fn remember(&mut self, event_id: String, fingerprint: u64, ts_ms: i64, machine: u32) {
        self.ids.insert(event_id, Entry { fingerprint, ts_ms, machine });
    }

    /// Drops entries behind their horizon once the map has doubled since the last sweep
    /// (amortised O(1) per event).
    pub fn maybe_sweep(&mut self, horizon: impl Fn(u32) -> i64) {
        if self.ids.len() < self.sweep_at.max(1024) {
            return;
        }
        self.ids.retain(|_, e| e.ts_ms >= horizon(e.machine));
        self.sweep_at = self.ids.len() * 2;
    }
}
