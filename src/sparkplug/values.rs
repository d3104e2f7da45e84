//! What an outbox record says in Sparkplug terms: metric values of one device (a machine), each
//! with its original timestamp and quality. Reads the records the JSON forwarder publishes,
//! never the decider: an event's features, an alert's incident state (alert records carry
//! `rule`, so every rule gets metrics of its own).
//!
//! Metric names (docs/operations.md, "Sparkplug B and SCADA"):
//! - `{sensor}/{feature}`, Double: the event's primary measurement (`metric`, `value`) and each
//!   of its `features` (`velocity_rms`, `accel_rms`, `env_*`, …), at the event's `ts_ms`, with
//!   the event's quality.
//! - `iso_zone`, String: the ISO 20816-3 zone (`A`..`D`) of the machine's last `velocity_rms`,
//!   for a machine whose asset entry gives its ISO class.
//! - `{rule}/incident_open` Boolean, `{rule}/alert_id` String, `{rule}/revision` Int64,
//!   `{rule}/onset` DateTime: from each alert record, at its `decided_at_ms`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::IsoClass;
use crate::records::outbox::OutboxRecord;

/// A metric's value, with the Sparkplug data type it is declared with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Value {
    Double(f64),
    Boolean(bool),
    String(String),
    Int64(i64),
    /// Milliseconds since the Unix epoch.
    DateTime(i64),
}

impl Value {
    pub fn datatype(&self) -> u32 {
        use super::proto::datatype::*;
        match self {
            Value::Double(_) => DOUBLE,
            Value::Boolean(_) => BOOLEAN,
            Value::String(_) => STRING,
            Value::Int64(_) => INT64,
            Value::DateTime(_) => DATETIME,
        }
    }
}

/// An event's quality (contracts section 2); alerts are `Good`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Quality {
    Good,
    Uncertain,
    Bad,
}

impl Quality {
    /// The Sparkplug `Quality` property (Int32, the OPC codes Ignition shows): 192 good, 64
    /// uncertain, 0 bad.
    pub fn code(self) -> i32 {
        match self {
            Quality::Good => 192,
            Quality::Uncertain => 64,
            Quality::Bad => 0,
        }
    }

    fn parse(s: Option<&str>) -> Quality {
        match s {
            Some("bad") => Quality::Bad,
            Some("uncertain") => Quality::Uncertain,
            _ => Quality::Good,
        }
    }
}

/// One metric value of one device.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub device: String,
    pub name: String,
    pub value: Value,
    pub ts_ms: i64,
    pub quality: Quality,
}

#[derive(Deserialize)]
struct EventView {
    ts_ms: i64,
    #[serde(default)]
    metric: Option<String>,
    #[serde(default)]
    value: Option<f64>,
    #[serde(default)]
    quality: Option<String>,
    #[serde(default)]
    features: BTreeMap<String, f64>,
}

#[derive(Deserialize)]
struct AlertView {
    alert_id: String,
    revision: u32,
    kind: String,
    rule: String,
    onset_ms: i64,
    decided_at_ms: i64,
}

/// The metric values `record` carries (none for raw samples and gap notices). `iso` gives the
/// ISO class of the machines that have one. A record whose JSON does not read gives none and a
/// warning: the JSON topics still carry it.
pub fn updates(record: &OutboxRecord, iso: &BTreeMap<String, IsoClass>) -> Vec<Update> {
    match record {
        OutboxRecord::Event { machine, sensor, json, event_id, .. } => {
            match serde_json::from_slice::<EventView>(json) {
                Ok(e) => event_updates(machine, sensor, e, iso.get(machine)),
                Err(err) => {
                    tracing::warn!(%event_id, %err, "sparkplug: an event's JSON does not read");
                    Vec::new()
                }
            }
        }
        OutboxRecord::Alert { machine, json, alert_id, .. } => {
            match serde_json::from_slice::<AlertView>(json) {
                Ok(a) => alert_updates(machine, a),
                Err(err) => {
                    tracing::warn!(%alert_id, %err, "sparkplug: an alert's JSON does not read");
                    Vec::new()
                }
            }
        }
        OutboxRecord::Samples { .. } | OutboxRecord::Gap(_) => Vec::new(),
    }
}

/// The device (machine) whose metrics `record` carries: every value of one record belongs to one
/// device; none for raw samples and gap notices.
pub(super) fn device(record: &OutboxRecord) -> Option<&str> {
    match record {
        OutboxRecord::Event { machine, .. } | OutboxRecord::Alert { machine, .. } => Some(machine),
        OutboxRecord::Samples { .. } | OutboxRecord::Gap(_) => None,
    }
}

fn event_updates(machine: &str, sensor: &str, e: EventView, iso: Option<&IsoClass>) -> Vec<Update> {
    let quality = Quality::parse(e.quality.as_deref());
    let mut values = BTreeMap::new();
    if let (Some(m), Some(v)) = (e.metric, e.value) {
        values.insert(m, v);
    }
    values.extend(e.features);
    let velocity = values.get("velocity_rms").copied();
    let mut out: Vec<Update> = values
        .into_iter()
        .filter(|(_, v)| v.is_finite())
        .map(|(name, v)| Update {
            device: machine.to_owned(),
            name: format!("{sensor}/{name}"),
            value: Value::Double(v),
            ts_ms: e.ts_ms,
            quality,
        })
        .collect();
    if let (Some(class), Some(v)) = (iso, velocity) {
        out.push(Update {
            device: machine.to_owned(),
            name: "iso_zone".into(),
            value: Value::String(class.zone(v).as_str().into()),
            ts_ms: e.ts_ms,
            quality,
        });
    }
    out
}

fn alert_updates(machine: &str, a: AlertView) -> Vec<Update> {
    let open = matches!(a.kind.as_str(), "open" | "amend");
    let at = a.decided_at_ms;
    let rule = &a.rule;
    [
        ("incident_open", Value::Boolean(open)),
        ("alert_id", Value::String(a.alert_id)),
        ("revision", Value::Int64(i64::from(a.revision))),
        ("onset", Value::DateTime(a.onset_ms)),
    ]
    .into_iter()
    .map(|(name, value)| Update {
        device: machine.to_owned(),
        name: format!("{rule}/{name}"),
        value,
        ts_ms: at,
        quality: Quality::Good,
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Foundation;

    fn event(json: &str) -> OutboxRecord {
        OutboxRecord::Event {
            machine: "press-1".into(),
            sensor: "s1".into(),
            seq: 1,
            event_id: "g.s1.1".into(),
            json: json.as_bytes().to_vec(),
        }
    }

    #[test]
    fn an_event_gives_its_measurements_and_the_zone_at_its_own_time_and_quality() {
        let iso = BTreeMap::from([(
            "press-1".to_string(),
            IsoClass { group: 2, foundation: Foundation::Rigid },
        )]);
        let r = event(
            r#"{"ts_ms":1000,"metric":"accel_rms","value":0.5,"quality":"uncertain",
                "features":{"velocity_rms":3.0,"kurtosis":3.2}}"#,
        );
        let got = updates(&r, &iso);
        let names: Vec<&str> = got.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["s1/accel_rms", "s1/kurtosis", "s1/velocity_rms", "iso_zone"]);
        assert!(got.iter().all(|u| u.ts_ms == 1000 && u.quality == Quality::Uncertain));
        assert_eq!(got[3].value, Value::String("C".into()), "3.0 mm/s, group 2 rigid");
        assert!(updates(&r, &BTreeMap::new()).iter().all(|u| u.name != "iso_zone"));
        assert!(updates(&event("{not json"), &iso).is_empty());
    }

    #[test]
    fn an_alert_gives_its_rules_incident_state() {
        let json = r#"{"alert_id":"a1","revision":2,"kind":"close","machine":"press-1",
            "rule":"high_vib","onset_ms":500,"end_ms":900,"decided_at_ms":1200}"#;
        let r = OutboxRecord::Alert {
            machine: "press-1".into(),
            alert_id: "a1".into(),
            revision: 2,
            json: json.as_bytes().to_vec(),
        };
        let got = updates(&r, &BTreeMap::new());
        let pairs: Vec<(&str, &Value)> = got.iter().map(|u| (u.name.as_str(), &u.value)).collect();
        assert_eq!(
            pairs,
            [
                ("high_vib/incident_open", &Value::Boolean(false)),
                ("high_vib/alert_id", &Value::String("a1".into())),
                ("high_vib/revision", &Value::Int64(2)),
                ("high_vib/onset", &Value::DateTime(500)),
            ]
        );
        assert!(got.iter().all(|u| u.ts_ms == 1200 && u.device == "press-1"));
    }
}
