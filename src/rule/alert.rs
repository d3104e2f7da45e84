//! The alert record (docs/contracts.md section 6). Every record carries the whole state of its incident.

use std::sync::Arc;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::event::features::MeasureUnit;
use crate::event::{ClockEvidence, ClockState, Event, Quality, SampleRef};

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
    /// Shared with the rule core's index of high events (`incidents::Key`).
    pub event_id: Arc<str>,
    /// Shared by every item of the sensor.
    pub sensor: Arc<str>,
    pub seq: u64,
    pub ts_ms: i64,
    /// The measurement the rule read, in `unit`: the event's `value` in its unit when the event's
    /// metric is the rule's, else the feature (an acceleration in the event's unit, a velocity in
    /// mm/s, the others in `"1"`).
    pub value: f64,
    pub unit: MeasureUnit,
    pub quality: Quality,
    pub clock: ClockEvidence,
    pub samples: Option<SampleRef>,
}

impl EvidenceItem {
    /// The item of an event read by its `value`.
    pub fn of(e: &Event) -> Self {
        let reading = (e.value, e.unit.into());
        Self::with_names(e, reading, e.event_id.as_str().into(), e.sensor.as_str().into())
    }

    /// The item of an event whose measurement `reading` (value and unit) the rule read, with the
    /// event's id and sensor name already shared.
    pub fn with_names(
        e: &Event,
        (value, unit): (f64, MeasureUnit),
        event_id: Arc<str>,
        sensor: Arc<str>,
    ) -> Self {
        EvidenceItem {
            event_id,
            sensor,
            seq: e.seq,
            ts_ms: e.ts_ms,
            value,
            unit,
            quality: e.quality,
            clock: e.clock,
            samples: e.samples,
        }
    }
}

/// One alert record; `(alert_id, revision)` identifies it. Field order is the wire order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "StoredAlert")]
pub struct AlertRecord {
    pub alert_id: String,
    pub revision: u32,
    pub kind: AlertKind,
    pub machine: String,
    pub rule: String,
    /// The fingerprint of the rule that decided it (docs/contracts.md section 6).
    pub rule_version: String,
    /// The machine's asset tags (docs/contracts.md section 6); `{}` when it has none.
    pub asset: Arc<AssetTags>,
    pub onset_ms: i64,
    /// Null until the machine watermark has passed the end.
    pub end_ms: Option<i64>,
    pub evidence: Vec<EvidenceItem>,
    /// A composite rule's record only (absent from a measurement rule's): the member alerts it
    /// cites, each with its evidence events, whose items are in `evidence`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberAlert>,
    /// The first `also_max` further high events of the incident, by `(ts_ms, event_id)`.
    pub also: Vec<String>,
    /// How many further high events the incident has in all.
    pub also_count: u64,
    /// The least trusted clock state among the evidence events (docs/contracts.md section 3).
    pub clock_trust: ClockState,
    /// The largest `err_ms` among the evidence events; null when none carries one.
    pub max_err_ms: Option<u32>,
    pub superseded_by: Option<String>,
    pub caused_by: Option<String>,
    /// Null only for an early alert fired before the machine had any watermark.
    pub watermark_ms: Option<i64>,
    pub decided_at_ms: i64,
    pub provisional: bool,
}

/// One member alert a composite alert cites (docs/contracts.md section 4, composite rules).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberAlert {
    /// The member rule's name.
    pub rule: String,
    pub alert_id: String,
    pub onset_ms: i64,
    /// The member alert's evidence events, by `(ts_ms, event_id)`.
    pub evidence: Vec<String>,
}

/// `clock_trust` and `max_err_ms` of a record with this evidence: the least trusted state (the
/// most trusted, `synced`, for none) and the largest error bound.
pub fn clock_summary<'a>(
    evidence: impl IntoIterator<Item = &'a EvidenceItem>,
) -> (ClockState, Option<u32>) {
    evidence.into_iter().fold((ClockState::Synced, None), |(trust, err), e| {
        let trust = if e.clock.state.distrust() > trust.distrust() { e.clock.state } else { trust };
        (trust, err.max(e.clock.err_ms))
    })
}

/// An alert record as read back (the store's archive, a capture): as [`AlertRecord`], or as
/// written before `also_count`, `clock_trust` and `max_err_ms` existed, when `also` listed every
/// further event and the clock fields follow from the evidence.
#[derive(Deserialize)]
struct StoredAlert {
    alert_id: String,
    revision: u32,
    kind: AlertKind,
    machine: String,
    rule: String,
    /// Absent in records archived before it existed: read as empty.
    #[serde(default)]
    rule_version: String,
    /// Absent in records archived before it existed: read as `{}`.
    #[serde(default)]
    asset: Arc<AssetTags>,
    onset_ms: i64,
    end_ms: Option<i64>,
    evidence: Vec<EvidenceItem>,
    #[serde(default)]
    members: Vec<MemberAlert>,
    also: Vec<String>,
    also_count: Option<u64>,
    clock_trust: Option<ClockState>,
    #[serde(default)]
    max_err_ms: Option<u32>,
    superseded_by: Option<String>,
    caused_by: Option<String>,
    watermark_ms: Option<i64>,
    decided_at_ms: i64,
    provisional: bool,
}

impl From<StoredAlert> for AlertRecord {
    fn from(s: StoredAlert) -> Self {
        let (trust, err) = clock_summary(&s.evidence);
        let (clock_trust, max_err_ms) = match s.clock_trust {
            Some(t) => (t, s.max_err_ms),
            None => (trust, err),
        };
        AlertRecord {
            also_count: s.also_count.unwrap_or(s.also.len() as u64),
            clock_trust,
            max_err_ms,
            alert_id: s.alert_id,
            revision: s.revision,
            kind: s.kind,
            machine: s.machine,
            rule: s.rule,
            rule_version: s.rule_version,
            asset: s.asset,
            onset_ms: s.onset_ms,
            end_ms: s.end_ms,
            evidence: s.evidence,
            members: s.members,
            also: s.also,
            superseded_by: s.superseded_by,
            caused_by: s.caused_by,
            watermark_ms: s.watermark_ms,
            decided_at_ms: s.decided_at_ms,
            provisional: s.provisional,
        }
    }
}

/// A machine's asset tags as alert records carry them (docs/contracts.md sections 6 and 12): a
/// JSON object whose members keep the order they were given in (`line`, `iso_group`,
/// `foundation`, then the free tags by name, as `config::assets` builds it). The rule core only
/// copies it into records; what it holds is the configuration's business.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AssetTags(Vec<(String, serde_json::Value)>);

impl AssetTags {
    /// Tags from members in their order; keys are unique (a later one of the same key is
    /// dropped).
    pub fn new(entries: Vec<(String, serde_json::Value)>) -> Self {
        let mut out: Vec<(String, serde_json::Value)> = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            if !out.iter().any(|(have, _)| *have == k) {
                out.push((k, v));
            }
        }
        AssetTags(out)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &serde_json::Value)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }
}

impl Serialize for AssetTags {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for AssetTags {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = AssetTags;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of asset tags")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AssetTags, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, serde_json::Value>()? {
                    entries.push(entry);
                }
                Ok(AssetTags::new(entries))
            }
        }
        d.deserialize_map(Members)
    }
}
