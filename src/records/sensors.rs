//! What the gateway knows of each sensor (docs/contracts.md section 11): its last accepted event
//! (seq, event time, ingest time), how many it accepted and how many gaps were declared on it;
//! and the sensor's state, `live`, `idle` or `silent`, at a given ingest time. Pure: the decide
//! stage folds each checkpoint's ledger records in ([`SensorBook::absorb`]) and keeps the book in
//! the checkpoint's batch (`n/sensors`), so a running daemon and a stopped store say the same.
//!
//! Bytes in the store: `[VERSION][CBOR of SensorBook]`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::records::ledger::LedgerEntry;
use crate::records::outbox::GapRange;

const VERSION: u8 = 1;

/// One sensor's activity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SensorActivity {
    /// The seq of the last event accepted (in decision order).
    pub last_seq: u64,
    /// Its event time and ingest time, Unix ms.
    pub last_ts_ms: i64,
    pub last_at_ms: i64,
    /// Events accepted in the store's life.
    pub events: u64,
    /// Gaps declared on it (events and raw samples), by reason.
    pub gaps: BTreeMap<String, u64>,
    /// Where its last raw-sample block ended (event time, ms) and its journal position: a live
    /// source's first block after a restart that starts later declares the time between as a
    /// `gateway_down` gap.
    #[serde(default)]
    pub samples_end_ms: Option<i64>,
    #[serde(default)]
    pub samples_pos: u64,
    /// The source its events came from (the configuration's index), whether that source was
    /// live, and the last seq a `source_ended` record declared its tail after (all unknown in
    /// books written before they were kept).
    #[serde(default)]
    pub source: Option<u16>,
    #[serde(default)]
    pub live: bool,
    #[serde(default)]
    pub ended_seq: Option<u64>,
    /// The highest seq accepted (0 in books written before it was kept: then `last_seq`).
    #[serde(default)]
    pub max_seq: u64,
    /// Its watermark bound and, with `auto`, the measured disorder and ingest-delay quantiles, in
    /// ms, as of the last checkpoint (`status`).
    #[serde(default)]
    pub bound_ms: Option<i64>,
    #[serde(default)]
    pub disorder_ms: Option<i64>,
    #[serde(default)]
    pub delay_ms: Option<i64>,
}

impl SensorActivity {
    /// The highest seq accepted.
    pub fn highest_seq(&self) -> u64 {
        self.max_seq.max(self.last_seq)
    }
}

/// Every sensor seen, by `(machine, sensor)`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SensorBook {
    pub sensors: BTreeMap<(String, String), SensorActivity>,
}

/// A sensor's state at an ingest time (section 11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SensorState {
    /// A record within `idle_timeout`.
    Live,
    /// None for `idle_timeout`: its events may still come, in time.
    Idle,
    /// None for longer than `allowed_lateness`: what it may still send is no longer expected in
    /// time (and a sensor configured but never heard from).
    Silent,
}

impl SensorState {
    pub const ALL: [SensorState; 3] = [SensorState::Live, SensorState::Idle, SensorState::Silent];

    /// The state of a sensor whose last record arrived at `last_at_ms` (`None`: never), at
    /// ingest time `now_ms`. Silent wins over idle when `allowed_lateness` is the shorter.
    pub fn at(
        last_at_ms: Option<i64>,
        now_ms: i64,
        idle_timeout_ms: i64,
        allowed_lateness_ms: i64,
    ) -> SensorState {
        let Some(last) = last_at_ms else { return SensorState::Silent };
        let quiet = now_ms.saturating_sub(last);
        if quiet > allowed_lateness_ms {
            SensorState::Silent
        } else if quiet >= idle_timeout_ms {
            SensorState::Idle
        } else {
            SensorState::Live
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SensorState::Live => "live",
            SensorState::Idle => "idle",
            SensorState::Silent => "silent",
        }
    }
}

impl SensorBook {
    /// Folds one ledger record in: an accepted event moves its sensor on, a declared gap counts.
    pub fn absorb(&mut self, at_ms: i64, entry: &LedgerEntry) {
        match entry {
            LedgerEntry::Accepted { machine, sensor, seq, ts_ms, .. } => {
                let a = self.sensors.entry((machine.clone(), sensor.clone())).or_default();
                a.last_seq = *seq;
                a.last_ts_ms = *ts_ms;
                a.last_at_ms = at_ms;
                a.events += 1;
                a.max_seq = a.max_seq.max(*seq);
            }
            LedgerEntry::SourceEnded { sensors, .. } => {
                for e in sensors {
                    if let Some(a) = self.sensors.get_mut(&(e.machine.clone(), e.sensor.clone())) {
                        a.ended_seq = Some(e.last_seq);
                    }
                }
            }
            LedgerEntry::GapDeclared { gap, .. } | LedgerEntry::Shed { gap, .. } => {
                let a = self.sensors.entry((gap.machine.clone(), gap.sensor.clone())).or_default();
                *a.gaps.entry(gap.reason.clone()).or_default() += match gap.range {
                    GapRange::Events { .. } | GapRange::Samples { .. } => 1,
                };
            }
            _ => {}
        }
    }

    /// The newest ingest time of any sensor's last event.
    pub fn newest_at_ms(&self) -> Option<i64> {
        self.sensors.values().filter(|a| a.events > 0).map(|a| a.last_at_ms).max()
    }

    pub fn encode(&self) -> Vec<u8> {
        crate::records::cbor::encode(&[VERSION], self)
    }

    pub fn decode(bytes: &[u8]) -> Result<SensorBook, String> {
        crate::records::cbor::decode_versioned(VERSION, "sensor book", bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ledger::Acceptance;
    use crate::records::outbox::GapNotice;

    fn accepted(sensor: &str, seq: u64, ts_ms: i64) -> LedgerEntry {
        LedgerEntry::Accepted {
            event_id: format!("{sensor}.{seq}"),
            machine: "m".into(),
            sensor: sensor.into(),
            seq,
            ts_ms,
            how: Acceptance::Applied,
            journal_pos: seq,
            outbox_seq: seq,
            counted: false,
            rules: Vec::new(),
            watermark_ms: None,
        }
    }

    #[test]
    fn states_follow_idle_timeout_then_allowed_lateness() {
        let st = |last, now| SensorState::at(last, now, 30_000, 600_000);
        assert_eq!(st(Some(1_000), 30_999), SensorState::Live);
        assert_eq!(st(Some(1_000), 31_000), SensorState::Idle);
        assert_eq!(st(Some(1_000), 601_000), SensorState::Idle);
        assert_eq!(st(Some(1_000), 601_001), SensorState::Silent);
        assert_eq!(st(None, 0), SensorState::Silent);
        // allowed_lateness shorter than idle_timeout: silent comes first.
        assert_eq!(SensorState::at(Some(0), 20_000, 30_000, 10_000), SensorState::Silent);
    }

    #[test]
    fn the_book_keeps_the_last_event_and_counts_gaps_and_round_trips() {
        let mut b = SensorBook::default();
        b.absorb(5_000, &accepted("s1", 1, 4_000));
        b.absorb(6_000, &accepted("s1", 2, 5_000));
        b.absorb(6_500, &accepted("s2", 9, 6_000));
        let gap = GapNotice {
            machine: "m".into(),
            sensor: "s1".into(),
            range: GapRange::Events { from_seq: 3, to_seq: 4 },
            reason: "gateway_down".into(),
            declared_at_ms: 7_000,
        };
        b.absorb(7_000, &LedgerEntry::GapDeclared { gap, outbox_seq: 10 });
        let s1 = &b.sensors[&("m".to_string(), "s1".to_string())];
        assert_eq!((s1.last_seq, s1.last_ts_ms, s1.last_at_ms, s1.events), (2, 5_000, 6_000, 2));
        assert_eq!(s1.gaps["gateway_down"], 1);
        assert_eq!(b.newest_at_ms(), Some(6_500));
        assert_eq!(SensorBook::decode(&b.encode()).unwrap(), b);
        assert!(SensorBook::decode(&[9]).unwrap_err().contains("version 9"));
    }
}
