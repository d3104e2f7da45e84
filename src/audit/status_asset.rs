//! What `linegate status` and the status page say of a machine from the asset table
//! (docs/contracts.md section 12): its line, its ISO 20816-3 class, and its latest velocity with
//! the zone it falls in. The latest velocity is the decider's, as of the last checkpoint: the
//! accepted event with a velocity (its `value` in `velocity_rms`, or its `features`) of the
//! latest event time.

use serde::Serialize;

use crate::config::Config;
use crate::timefmt::time;

/// A machine's asset facts and latest velocity; every field absent when unknown.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct AssetFacts {
    /// The asset entry's `line`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    /// `group 2 rigid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iso_class: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub velocity: Option<Velocity>,
}

/// A machine's latest velocity.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Velocity {
    /// The event time of the event it is from.
    pub ts_ms: i64,
    pub mm_s: f64,
    /// `"A"` to `"D"`; absent for a machine without an ISO class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<&'static str>,
}

/// The facts of `machine` with its latest velocity `(ts_ms, mm/s)`, if any.
pub fn facts(config: &Config, machine: &str, latest: Option<(i64, f64)>) -> AssetFacts {
    let asset = config.machines.get(machine);
    let iso = asset.and_then(|a| a.iso);
    AssetFacts {
        line: asset.and_then(|a| a.line.clone()),
        iso_class: iso.map(|c| c.describe()),
        velocity: latest.map(|(ts_ms, mm_s)| Velocity {
            ts_ms,
            mm_s,
            zone: iso.map(|c| c.zone(mm_s).as_str()),
        }),
    }
}

impl AssetFacts {
    /// `4.62 mm/s (zone C, group 2 rigid) at 2026-…Z`, `none yet` without a velocity.
    pub fn velocity_text(&self) -> String {
        let Some(v) = &self.velocity else { return "none yet".into() };
        let class = match (v.zone, &self.iso_class) {
            (Some(z), Some(c)) => format!(" (zone {z}, {c})"),
            _ => " (no ISO class)".into(),
        };
        format!("{:.2} mm/s{class} at {}", v.mm_s, time(v.ts_ms))
    }

    /// `line L3, group 2 rigid`, or empty when the asset table says nothing of the machine.
    pub fn asset_text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(l) = &self.line {
            parts.push(format!("line {l}"));
        }
        if let Some(c) = &self.iso_class {
            parts.push(c.clone());
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_s_velocity_is_shown_in_its_zone_and_class() {
        let toml = "[gateway]\nid = \"g\"\n[machines.fan-1]\nline = \"L3\"\niso_group = 2\n\
                    foundation = \"rigid\"\n[machines.pump]\nline = \"L4\"\n";
        let c = Config::from_toml(toml, "t.toml").unwrap();
        let fan = facts(&c, "fan-1", Some((1_700_000_000_000, 4.624)));
        assert_eq!(fan.velocity.as_ref().and_then(|v| v.zone), Some("D"));
        assert_eq!(
            fan.velocity_text(),
            "4.62 mm/s (zone D, group 2 rigid) at 2023-11-14T22:13:20.000Z"
        );
        assert_eq!(fan.asset_text(), "line L3, group 2 rigid");
        let json = serde_json::to_value(&fan).unwrap();
        assert_eq!(json["velocity"]["zone"], "D");
        assert_eq!(json["iso_class"], "group 2 rigid");
        let pump = facts(&c, "pump", Some((1_700_000_000_000, 2.0)));
        assert!(
            pump.velocity_text().starts_with("2.00 mm/s (no ISO class)"),
            "{}",
            pump.velocity_text()
        );
        assert_eq!(pump.asset_text(), "line L4");
        let other = facts(&c, "mill", None);
        assert_eq!((other.velocity_text(), other.asset_text()), ("none yet".into(), String::new()));
        assert_eq!(serde_json::to_string(&other).unwrap(), "{}");
    }
}
