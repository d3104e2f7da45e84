//! The alert record (docs/contracts.md section 6). Every record carries the whole state of its incident.

use serde::{Deserialize, Serialize};

use crate::event::{ClockEvidence, Event, Quality, SampleRef, Unit};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    Open,
    Amend,
    Close,
    Supersede,
}

/// One event of `evidence`: what a reviewer needs to find the samples behind an alert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceItem {
    pub event_id: String,
    pub sensor: String,
    pub seq: u64,
    pub ts_ms: i64,
    /// As the event carried it, in `unit`.
    pub value: f64,
    pub unit: Unit,
    pub quality: Quality,
    pub clock: ClockEvidence,
    pub samples: Option<SampleRef>,
}

impl EvidenceItem {
    pub fn of(e: &Event) -> Self {
        EvidenceItem {
            event_id: e.event_id.clone(),
            sensor: e.sensor.clone(),
            seq: e.seq,
            ts_ms: e.ts_ms,
            value: e.value,
            unit: e.unit,
            quality: e.quality,
            clock: e.clock,
            samples: e.samples,
        }
    }
}

/// One alert record; `(alert_id, revision)` identifies it. Field order is the wire order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertRecord {
    pub alert_id: String,
    pub revision: u32,
    pub kind: AlertKind,
    pub machine: String,
    pub rule: String,
    pub onset_ms: i64,
    /// Null until the machine watermark has passed the end.
    pub end_ms: Option<i64>,
    pub evidence: Vec<EvidenceItem>,
    pub also: Vec<String>,
    pub superseded_by: Option<String>,
    pub caused_by: Option<String>,
    /// Null only for an early alert fired before the machine had any watermark.
    pub watermark_ms: Option<i64>,
    pub decided_at_ms: i64,
    pub provisional: bool,
}
