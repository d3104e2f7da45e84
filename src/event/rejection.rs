//! Why a record was rejected (docs/contracts.md section 7): the reasons the event contract names,
//! and a rejection with its sentence. The list may grow; two reasons are never merged. Parsing
//! (`parse`), stamping, the rule and the decider reject with these; the quarantine keeps them.

use serde::{Deserialize, Serialize};

/// One quarantine reason. `as_str` is the exact spelling used in summaries, ledgers and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    MalformedJson,
    MissingField,
    BadType,
    UnknownSchema,
    NonFiniteValue,
    NegativeValue,
    UnitMismatch,
    BadIdentifier,
    Oversized,
    ClockFuture,
    ClockImplausible,
    IdConflict,
    /// Extension: a field the schema does not define.
    UnknownField,
    /// Extension: a trace line whose `kind` is not `event`, `samples` or `tick`.
    UnknownKind,
    /// Extension: a `samples` record that overlaps or precedes samples already taken for its sensor.
    SamplesOverlap,
    /// Extension: samples of a sensor name already used by another machine (derived event ids
    /// `{gateway}.{sensor}.{seq}` would collide).
    SensorConflict,
}

impl Reason {
    pub const ALL: [Reason; 16] = [
        Reason::MalformedJson,
        Reason::MissingField,
        Reason::BadType,
        Reason::UnknownSchema,
        Reason::NonFiniteValue,
        Reason::NegativeValue,
        Reason::UnitMismatch,
        Reason::BadIdentifier,
        Reason::Oversized,
        Reason::ClockFuture,
        Reason::ClockImplausible,
        Reason::IdConflict,
        Reason::UnknownField,
        Reason::UnknownKind,
        Reason::SamplesOverlap,
        Reason::SensorConflict,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::MalformedJson => "malformed_json",
            Reason::MissingField => "missing_field",
            Reason::BadType => "bad_type",
            Reason::UnknownSchema => "unknown_schema",
            Reason::NonFiniteValue => "non_finite_value",
            Reason::NegativeValue => "negative_value",
            Reason::UnitMismatch => "unit_mismatch",
            Reason::BadIdentifier => "bad_identifier",
            Reason::Oversized => "oversized",
            Reason::ClockFuture => "clock_future",
            Reason::ClockImplausible => "clock_implausible",
            Reason::IdConflict => "id_conflict",
            Reason::UnknownField => "unknown_field",
            Reason::UnknownKind => "unknown_kind",
            Reason::SamplesOverlap => "samples_overlap",
            Reason::SensorConflict => "sensor_conflict",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rejection: the reason and a human sentence naming what was wrong and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: Reason,
    pub detail: String,
}

impl Rejection {
    pub fn new(reason: Reason, detail: impl Into<String>) -> Self {
        Rejection { reason, detail: detail.into() }
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason, self.detail)
    }
}
