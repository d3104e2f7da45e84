//! Duplicate and id-conflict detection by `event_id` (docs/contracts.md section 5).
//!
//! The memory is bounded: an id is remembered while its event time is at or after its machine's
//! horizon (`watermark - allowed_lateness`). Older events are too late whatever they are, so an
//! entry behind its horizon is treated as absent even before the periodic sweep removes it; the
//! sweep's timing therefore never changes a decision.
//!
//! Ids are remembered by their 128-bit XXH3 hash, not as strings: no allocation per event and no
//! long-lived small strings fragmenting the heap. Two different ids share a hash with probability
//! about 2^-128 per pair (negligible for accidental collisions; ids are not treated as hostile
//! input — a sender that can forge ids can forge events). XXH3 is specified and stable across
//! versions, so a persisted memory reads back the same.

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
    ids: FxHashMap<u128, Entry>,
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
        match self.ids.get(&key(event_id)) {
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

    pub fn remember(&mut self, event_id: &str, fingerprint: u64, ts_ms: i64, machine: u32) {
        self.ids.insert(key(event_id), Entry { fingerprint, ts_ms, machine });
    }

    /// Drops entries behind their horizon once the map has grown by half since the last sweep
    /// (amortised O(1) per event).
    pub fn maybe_sweep(&mut self, horizon: impl Fn(u32) -> i64) {
        if self.ids.len() < self.sweep_at.max(1024) {
            return;
        }
        self.ids.retain(|_, e| e.ts_ms >= horizon(e.machine));
        self.sweep_at = self.ids.len() + self.ids.len() / 2;
    }
}

fn key(event_id: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128(event_id.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_conflict_and_horizon() {
        let mut d = Dedup::default();
        let open = |_: u32| i64::MIN;
        assert_eq!(d.check("a.s.1", 7, open), Seen::New);
        d.remember("a.s.1", 7, 1_000, 0);
        assert_eq!(d.check("a.s.1", 7, open), Seen::Duplicate);
        assert_eq!(d.check("a.s.1", 8, open), Seen::Conflict);
        assert_eq!(d.check("a.s.2", 7, open), Seen::New);
        // Behind its machine's horizon an entry counts as absent, swept or not.
        assert_eq!(d.check("a.s.1", 7, |_| 1_001), Seen::New);
    }

    #[test]
    fn sweep_keeps_what_is_inside_the_horizon() {
        let mut d = Dedup::default();
        for i in 0..3_000i64 {
            d.remember(&format!("m.s.{i}"), 0, i, (i % 2) as u32);
        }
        // machine 0 forgets before 2_000, machine 1 keeps everything
        d.maybe_sweep(|m| if m == 0 { 2_000 } else { i64::MIN });
        assert_eq!(d.len(), 1_500 + 500);
        assert_eq!(d.check("m.s.1999", 0, |_| i64::MIN), Seen::Duplicate);
        assert_eq!(d.check("m.s.1998", 0, |_| i64::MIN), Seen::New);
    }
}
