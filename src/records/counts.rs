//! What the decider counted of every record it decided: totals since the store was created. They
//! travel in every checkpoint (the decider's snapshot), are the body of `replay --summary`, and
//! become the decision counters of the metrics.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Counts of what happened to every record (the body of `replay --summary`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    /// Lines decided (blank lines are not lines).
    pub records: u64,
    /// Events accepted: applied, late applied and too late.
    pub accepted: u64,
    pub duplicates: u64,
    pub late_applied: u64,
    pub too_late: u64,
    /// Rejected records by reason; every reason is listed, zeros too.
    pub quarantined: BTreeMap<String, u64>,
    /// Events that arrived as such.
    pub events_received: u64,
    /// Events derived from `samples` records.
    pub events_derived: u64,
    pub samples_records: u64,
    pub ticks: u64,
    /// Alert records produced, by kind.
    pub alerts: BTreeMap<String, u64>,
    /// With several rules (composite rules included): alert records produced, by rule, then by
    /// kind. Empty with one rule, so its summaries and checkpoints stay as they were.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub alerts_by_rule: BTreeMap<String, BTreeMap<String, u64>>,
    /// The largest rule state seen (high events + incident members + remembered ids + open frames).
    pub peak_state: u64,
}
