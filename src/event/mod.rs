//! The event contract (docs/contracts.md section 2): types, units, and the JSON shape.
//!
//! Parsing and validation of untrusted bytes live in `parse`; schema 2 and its upcast in `schema2`;
//! the feature vocabulary (`features`, section 12) in `features`; why a record is rejected (the quarantine reasons of docs/contracts.md section 7) in `rejection`.

pub mod features;
pub mod fingerprint;
pub mod parse;
pub mod rejection;
pub mod schema2;

use serde::{Deserialize, Serialize};

/// 1 g in m/s2 (docs/contracts.md section 2).
pub const STANDARD_GRAVITY: f64 = 9.806_65;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockState {
    Synced,
    Holdover,
    Unsynced,
    Stepped,
    Unknown,
}

impl ClockState {
    /// Every state, in the order of trust of docs/contracts.md section 3.
    pub const ALL: [ClockState; 5] = [
        ClockState::Synced,
        ClockState::Holdover,
        ClockState::Unknown,
        ClockState::Unsynced,
        ClockState::Stepped,
    ];

    /// How little an event time stamped in this state can be trusted, in the order of
    /// docs/contracts.md section 3: `synced` < `holdover` < `unknown` < `unsynced` < `stepped`.
    pub fn distrust(self) -> u8 {
        match self {
            ClockState::Synced => 0,
            ClockState::Holdover => 1,
            ClockState::Unknown => 2,
            ClockState::Unsynced => 3,
            ClockState::Stepped => 4,
        }
    }

    /// The spelling in events and alert records.
    pub fn as_str(self) -> &'static str {
        match self {
            ClockState::Synced => "synced",
            ClockState::Holdover => "holdover",
            ClockState::Unknown => "unknown",
            ClockState::Unsynced => "unsynced",
            ClockState::Stepped => "stepped",
        }
    }
}

/// Evidence of how far `ts_ms` can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClockEvidence {
    pub state: ClockState,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub err_ms: Option<u32>,
}

impl ClockEvidence {
    pub const UNKNOWN: ClockEvidence = ClockEvidence { state: ClockState::Unknown, err_ms: None };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Metric {
    #[serde(rename = "accel_rms")]
    AccelRms,
    #[serde(rename = "velocity_rms")]
    VelocityRms,
    #[serde(rename = "accel_peak")]
    AccelPeak,
}

impl Metric {
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::AccelRms => "accel_rms",
            Metric::VelocityRms => "velocity_rms",
            Metric::AccelPeak => "accel_peak",
        }
    }
    /// Whether `unit` measures this metric (acceleration in g or m/s2, velocity in mm/s).
    pub fn fits(self, unit: Unit) -> bool {
        match self {
            Metric::AccelRms | Metric::AccelPeak => matches!(unit, Unit::G | Unit::Ms2),
            Metric::VelocityRms => unit == Unit::MmS,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Unit {
    #[serde(rename = "g")]
    G,
    #[serde(rename = "m/s2")]
    Ms2,
    #[serde(rename = "mm/s")]
    MmS,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::G => "g",
            Unit::Ms2 => "m/s2",
            Unit::MmS => "mm/s",
        }
    }
    /// Converts `value` in `self` to `to`; `None` when the two do not convert
    /// (velocity and acceleration never do).
    pub fn convert(self, value: f64, to: Unit) -> Option<f64> {
        match (self, to) {
            (a, b) if a == b => Some(value),
            (Unit::G, Unit::Ms2) => Some(value * STANDARD_GRAVITY),
            (Unit::Ms2, Unit::G) => Some(value / STANDARD_GRAVITY),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quality {
    Good,
    Uncertain,
    Bad,
}

impl Quality {
    /// The spelling in events.
    pub fn as_str(self) -> &'static str {
        match self {
            Quality::Good => "good",
            Quality::Uncertain => "uncertain",
            Quality::Bad => "bad",
        }
    }
}

/// Where the raw samples behind an event are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SampleRef {
    pub block_seq: u64,
    pub from_ms: i64,
    pub to_ms: i64,
}

/// A validated event. Schema 2 events are upcast to this scalar form on parse; `schema` keeps the
/// version the event arrived in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub event_id: String,
    pub machine: String,
    pub sensor: String,
    pub seq: u64,
    pub ts_ms: i64,
    pub clock: ClockEvidence,
    pub metric: Metric,
    pub value: f64,
    pub unit: Unit,
    pub schema: u32,
    pub quality: Quality,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub samples: Option<SampleRef>,
    /// More measurements of the same frame (docs/contracts.md sections 2 and 12); `None` when
    /// there are none, so an event without features serializes exactly as before they existed.
    /// Boxed: most events carry none, and the box keeps `Event` one pointer larger.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub features: Option<Box<features::Features>>,
}

/// True when `s` is 1..=64 bytes of `[A-Za-z0-9_.-]` (machine and sensor names).
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_and_ms2_convert_both_ways_velocity_never() {
        assert_eq!(Unit::G.convert(1.0, Unit::Ms2), Some(9.80665));
        assert_eq!(Unit::Ms2.convert(9.80665, Unit::G), Some(1.0));
        assert_eq!(Unit::MmS.convert(1.0, Unit::G), None);
        assert_eq!(Unit::G.convert(1.0, Unit::MmS), None);
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("press-7"));
        assert!(is_identifier("a.b_c-9"));
        assert!(!is_identifier(""));
        assert!(!is_identifier("press 7"));
        assert!(!is_identifier(&"x".repeat(65)));
        assert!(!is_identifier("prëss"));
    }
}
