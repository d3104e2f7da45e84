//! `[machines.NAME]`, the asset table (docs/contracts.md sections 9 and 12): the gateway's
//! reference data about each machine, validated.
//!
//! ```toml
//! [machines.press-7]            # NAME: 1..=64 bytes of [A-Za-z0-9_.-], like every machine name
//! line = "L3"                   # free text, non-empty
//! iso_group = 2                 # ISO 20816-3 group: 1 (large machines) or 2 (medium)
//! foundation = "rigid"          # or "flexible"; iso_group and foundation come together
//! rpm = 1797                    # shaft speed, revolutions per minute, > 0
//! bearing = { bpfo = 3.5848, bpfi = 5.4152, bsf = 2.357, ftf = 0.3983 }   # defect orders
//! # or the geometry the orders are computed from (diameters in one unit, e.g. mm; the angle in
//! # degrees, default 0):
//! # bearing = { balls = 9, ball_diameter = 7.94, pitch_diameter = 39.04, contact_angle = 0 }
//! envelope_band = ["2kHz", "5kHz"]   # frequencies: "…Hz", "…kHz" or a number of hertz
//! envelope = "fixed"            # or "whitened", "kurtogram" (default "fixed")
//! tags = { cell = "north", owner = "maintenance-2" }   # free: identifier keys, string values
//! ```
//!
//! Orders are multiples of the shaft speed, in the feature core's [`DefectOrders`]; from geometry
//! they are computed by its [`DefectOrders::from_geometry`] (the standard formulas).
//!
//! The ISO 20816-3 zone boundaries B/C/D (mm/s) follow from group and foundation
//! ([`IsoClass::boundaries`]); a machine's velocity band is 10–1000 Hz, or 2–1000 Hz when its
//! `rpm` is at most 600 ([`velocity_band`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Deserialize;

use super::frequency::{parse_hz, show_hz};
use super::{not_identifier, Ctx, Result};
use crate::event::is_identifier;
use crate::rule::alert::AssetTags;

/// One machine of the asset table.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MachineAsset {
    pub line: Option<String>,
    /// ISO 20816-3 group and foundation, given together.
    pub iso: Option<IsoClass>,
    /// Shaft speed in revolutions per minute; finite, > 0.
    pub rpm: Option<f64>,
    pub bearing: Option<Bearing>,
    pub envelope_band: Option<Band>,
    pub envelope: EnvelopeMethod,
    /// Free tags: identifier keys (none of `line`, `iso_group`, `foundation`), string values.
    pub tags: BTreeMap<String, String>,
}

/// The ISO 20816-3 machine class: group and foundation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsoClass {
    /// 1 (large machines) or 2 (medium).
    pub group: u8,
    pub foundation: Foundation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Foundation {
    Rigid,
    Flexible,
}

impl Foundation {
    pub fn as_str(self) -> &'static str {
        match self {
            Foundation::Rigid => "rigid",
            Foundation::Flexible => "flexible",
        }
    }
}

/// An ISO 20816-3 evaluation zone: A (new machines) to D (damage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Zone {
    A,
    B,
    C,
    D,
}

impl Zone {
    pub fn as_str(self) -> &'static str {
        match self {
            Zone::A => "A",
            Zone::B => "B",
            Zone::C => "C",
            Zone::D => "D",
        }
    }
}

impl IsoClass {
    /// The lower boundaries of zones B, C and D in mm/s.
    pub fn boundaries(self) -> [f64; 3] {
        match (self.group, self.foundation) {
            (1, Foundation::Rigid) => [2.3, 4.5, 7.1],
            (1, Foundation::Flexible) => [3.5, 7.1, 11.0],
            (_, Foundation::Rigid) => [1.4, 2.8, 4.5],
            (_, Foundation::Flexible) => [2.3, 4.5, 7.1],
        }
    }

    /// The lower boundary of `zone` in mm/s (`0` for A).
    pub fn boundary(self, zone: Zone) -> f64 {
        match zone {
            Zone::A => 0.0,
            Zone::B => self.boundaries()[0],
            Zone::C => self.boundaries()[1],
            Zone::D => self.boundaries()[2],
        }
    }

    /// The zone a velocity RMS (mm/s) falls in: A below B's boundary, …, D at or above D's.
    pub fn zone(self, velocity_mm_s: f64) -> Zone {
        let [b, c, d] = self.boundaries();
        if velocity_mm_s >= d {
            Zone::D
        } else if velocity_mm_s >= c {
            Zone::C
        } else if velocity_mm_s >= b {
            Zone::B
        } else {
            Zone::A
        }
    }

    /// `group 2 rigid`.
    pub fn describe(self) -> String {
        format!("group {} {}", self.group, self.foundation.as_str())
    }
}

/// A frequency band in hertz, both ends inclusive; `0 < low_hz < high_hz`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    pub low_hz: f64,
    pub high_hz: f64,
}

impl Band {
    /// The ISO 20816 broadband velocity band.
    pub const ISO: Band = Band { low_hz: 10.0, high_hz: 1000.0 };
    /// The same for slow machines (at most 600 rpm).
    pub const ISO_SLOW: Band = Band { low_hz: 2.0, high_hz: 1000.0 };

    /// `2 kHz–5 kHz`.
    pub fn describe(self) -> String {
        format!("{}–{}", show_hz(self.low_hz), show_hz(self.high_hz))
    }
}

/// The velocity band of a machine (docs/contracts.md section 12): 2–1000 Hz when its asset entry
/// gives at most 600 rpm, else (no entry or no rpm included) 10–1000 Hz.
pub fn velocity_band(asset: Option<&MachineAsset>) -> Band {
    match asset.and_then(|a| a.rpm) {
        Some(rpm) if rpm <= 600.0 => Band::ISO_SLOW,
        _ => Band::ISO,
    }
}

/// Bearing-defect frequencies as orders of the shaft speed: the feature core's own type, so that
/// the orders the asset table reads are the ones the envelope indicators use.
pub use crate::features::DefectOrders;

/// A rolling-element bearing's geometry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BearingGeometry {
    /// >= 1.
    pub balls: u32,
    /// In the unit of `pitch_diameter`; 0 < ball_diameter < pitch_diameter.
    pub ball_diameter: f64,
    pub pitch_diameter: f64,
    /// Degrees, in [0, 90).
    pub contact_angle_deg: f64,
}

impl BearingGeometry {
    /// The defect orders by the standard formulas ([`DefectOrders::from_geometry`]).
    pub fn orders(&self) -> DefectOrders {
        DefectOrders::from_geometry(
            self.balls,
            self.ball_diameter,
            self.pitch_diameter,
            self.contact_angle_deg,
        )
    }
}

/// A machine's bearing: its defect orders, given or computed from `geometry`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bearing {
    pub orders: DefectOrders,
    /// The geometry the orders were computed from, when given so.
    pub geometry: Option<BearingGeometry>,
}

/// How the envelope band is found before the envelope spectrum (docs/contracts.md section 12):
/// the feature core's own vocabulary, read from `envelope = "fixed" | "whitened" | "kurtogram"`.
pub use crate::features::EnvelopeMethod;

impl MachineAsset {
    /// Shaft speed in hertz.
    pub fn shaft_hz(&self) -> Option<f64> {
        self.rpm.map(|rpm| rpm / 60.0)
    }

    /// What an envelope indicator needs and this entry lacks (`rpm`, `bearing`,
    /// `envelope_band`); empty when it can give them.
    pub fn envelope_missing(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.rpm.is_none() {
            out.push("rpm");
        }
        if self.bearing.is_none() {
            out.push("bearing");
        }
        if self.envelope_band.is_none() {
            out.push("envelope_band");
        }
        out
    }

    /// The tags alert records carry as `asset` (docs/contracts.md section 6): `line`,
    /// `iso_group`, `foundation`, then the free tags by key.
    pub fn asset_tags(&self) -> AssetTags {
        let mut entries = Vec::new();
        if let Some(line) = &self.line {
            entries.push(("line".to_owned(), serde_json::Value::from(line.as_str())));
        }
        if let Some(iso) = self.iso {
            entries.push(("iso_group".to_owned(), serde_json::Value::from(iso.group)));
            entries.push(("foundation".to_owned(), iso.foundation.as_str().into()));
        }
        for (k, v) in &self.tags {
            entries.push((k.clone(), serde_json::Value::from(v.as_str())));
        }
        AssetTags::new(entries)
    }

    /// One line for `check-config`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(line) = &self.line {
            parts.push(format!("line {line}"));
        }
        if let Some(iso) = self.iso {
            let [b, c, d] = iso.boundaries();
            parts.push(format!(
                "ISO 20816-3 {} (zones B/C/D from {b}/{c}/{d} mm/s)",
                iso.describe()
            ));
        }
        if let Some(rpm) = self.rpm {
            parts.push(format!("{rpm} rpm ({})", show_hz(rpm / 60.0)));
        }
        parts.push(format!("velocity band {}", velocity_band(Some(self)).describe()));
        if let Some(b) = self.bearing {
            let o = b.orders;
            let mut s = format!(
                "bearing orders BPFO {:.4} BPFI {:.4} BSF {:.4} FTF {:.4}",
                o.bpfo, o.bpfi, o.bsf, o.ftf
            );
            if let Some(g) = b.geometry {
                let _ = write!(
                    s,
                    " (from {} balls of {} on {}, {}°)",
                    g.balls, g.ball_diameter, g.pitch_diameter, g.contact_angle_deg
                );
            }
            parts.push(s);
        }
        if let Some(band) = self.envelope_band {
            parts.push(format!("envelope {} {}", band.describe(), self.envelope.as_str()));
        }
        if !self.tags.is_empty() {
            let tags: Vec<String> = self.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
            parts.push(format!("tags {}", tags.join(", ")));
        }
        parts.join(", ")
    }
}

/// `[machines.NAME]` as written (`raw.rs` style: every key optional, unknown keys refused).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAsset {
    line: Option<String>,
    iso_group: Option<i64>,
    foundation: Option<String>,
    rpm: Option<f64>,
    bearing: Option<RawBearing>,
    envelope_band: Option<Vec<toml::Value>>,
    envelope: Option<EnvelopeMethod>,
    tags: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBearing {
    bpfo: Option<f64>,
    bpfi: Option<f64>,
    bsf: Option<f64>,
    ftf: Option<f64>,
    balls: Option<i64>,
    ball_diameter: Option<f64>,
    pitch_diameter: Option<f64>,
    contact_angle: Option<f64>,
}

/// Keys of `asset` that free tags may not take.
const RESERVED_TAGS: [&str; 3] = ["line", "iso_group", "foundation"];

impl Ctx<'_> {
    pub(super) fn validate_assets(
        &self,
        raw: BTreeMap<String, RawAsset>,
    ) -> Result<BTreeMap<String, MachineAsset>> {
        let mut out = BTreeMap::new();
        for (name, raw) in raw {
            let key = format!("machines.{name}");
            if !is_identifier(&name) {
                return Err(self.err(key, not_identifier("machine name", &name)));
            }
            let asset = self.validate_asset(&key, raw)?;
            out.insert(name, asset);
        }
        Ok(out)
    }

    fn validate_asset(&self, prefix: &str, raw: RawAsset) -> Result<MachineAsset> {
        let key = |k: &str| format!("{prefix}.{k}");
        if raw.line.as_deref() == Some("") {
            return Err(self.err(key("line"), "must not be empty"));
        }
        let foundation = match raw.foundation.as_deref() {
            None => None,
            Some("rigid") => Some(Foundation::Rigid),
            Some("flexible") => Some(Foundation::Flexible),
            Some(other) => {
                return Err(self.err(
                    key("foundation"),
                    format!("{other:?} is not a foundation: \"rigid\" or \"flexible\""),
                ))
            }
        };
        let group = match raw.iso_group {
            None => None,
            Some(g @ (1 | 2)) => Some(g as u8),
            Some(g) => {
                return Err(self.err(
                    key("iso_group"),
                    format!(
                        "{g} is not an ISO 20816-3 group: 1 (large machines, 300 kW to 40 MW) or \
                         2 (medium, 15 kW to 300 kW)"
                    ),
                ))
            }
        };
        let iso =
            match (group, foundation) {
                (None, None) => None,
                (Some(group), Some(foundation)) => Some(IsoClass { group, foundation }),
                (Some(_), None) => {
                    return Err(self.err(
                        key("foundation"),
                        "missing: iso_group needs a foundation (\"rigid\" or \"flexible\") to fix \
                     the zone boundaries",
                    ))
                }
                (None, Some(_)) => return Err(self.err(
                    key("iso_group"),
                    "missing: a foundation needs an iso_group (1 or 2) to fix the zone boundaries",
                )),
            };
        let rpm = match raw.rpm {
            Some(r) if !(r.is_finite() && r > 0.0) => {
                return Err(self.err(key("rpm"), format!("must be a finite number > 0, got {r}")))
            }
            r => r,
        };
        let bearing = raw.bearing.map(|b| self.validate_bearing(&key("bearing"), b)).transpose()?;
        let envelope_band =
            raw.envelope_band.map(|b| self.validate_band(&key("envelope_band"), &b)).transpose()?;
        let mut tags = BTreeMap::new();
        for (k, v) in raw.tags.unwrap_or_default() {
            let tag_key = format!("{prefix}.tags.{k}");
            if !is_identifier(&k) {
                return Err(self.err(tag_key, not_identifier("tag name", &k)));
            }
            if RESERVED_TAGS.contains(&k.as_str()) {
                return Err(self.err(
                    tag_key,
                    format!("{k:?} is an asset key of its own: write it beside tags, not in them"),
                ));
            }
            tags.insert(k, v);
        }
        Ok(MachineAsset {
            line: raw.line,
            iso,
            rpm,
            bearing,
            envelope_band,
            envelope: raw.envelope.unwrap_or_default(),
            tags,
        })
    }

    fn validate_bearing(&self, prefix: &str, raw: RawBearing) -> Result<Bearing> {
        let orders = [("bpfo", raw.bpfo), ("bpfi", raw.bpfi), ("bsf", raw.bsf), ("ftf", raw.ftf)];
        let geometry = [
            ("balls", raw.balls.map(|b| b as f64)),
            ("ball_diameter", raw.ball_diameter),
            ("pitch_diameter", raw.pitch_diameter),
            ("contact_angle", raw.contact_angle),
        ];
        let given = |keys: &[(&str, Option<f64>)]| keys.iter().any(|(_, v)| v.is_some());
        let positive = |k: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(self
                    .err(format!("{prefix}.{k}"), format!("must be a finite number > 0, got {v}")))
            }
        };
        match (given(&orders), given(&geometry)) {
            (true, true) => Err(self.err(
                prefix,
                "give either the defect orders (bpfo, bpfi, bsf, ftf) or the geometry (balls, \
                 ball_diameter, pitch_diameter, contact_angle), not both",
            )),
            (false, false) => Err(self.err(
                prefix,
                "empty: give the defect orders (bpfo, bpfi, bsf, ftf) or the geometry (balls, \
                 ball_diameter, pitch_diameter, contact_angle)",
            )),
            (true, false) => {
                let mut v = [0.0; 4];
                for (slot, (k, x)) in v.iter_mut().zip(orders) {
                    let x = x.ok_or_else(|| {
                        self.err(
                            format!("{prefix}.{k}"),
                            "missing: the defect orders come as all four of bpfo, bpfi, bsf, ftf",
                        )
                    })?;
                    *slot = positive(k, x)?;
                }
                let [bpfo, bpfi, bsf, ftf] = v;
                Ok(Bearing { orders: DefectOrders { bpfo, bpfi, bsf, ftf }, geometry: None })
            }
            (false, true) => {
                let missing = |k: &str| {
                    self.err(
                        format!("{prefix}.{k}"),
                        "missing: a bearing's geometry needs balls, ball_diameter and \
                         pitch_diameter (contact_angle defaults to 0)",
                    )
                };
                let balls = raw.balls.ok_or_else(|| missing("balls"))?;
                let balls = u32::try_from(balls).ok().filter(|&n| n >= 1).ok_or_else(|| {
                    self.err(
                        format!("{prefix}.balls"),
                        format!("must be a whole number >= 1, got {balls}"),
                    )
                })?;
                let d = positive(
                    "ball_diameter",
                    raw.ball_diameter.ok_or_else(|| missing("ball_diameter"))?,
                )?;
                let pd = positive(
                    "pitch_diameter",
                    raw.pitch_diameter.ok_or_else(|| missing("pitch_diameter"))?,
                )?;
                if d >= pd {
                    return Err(self.err(
                        format!("{prefix}.ball_diameter"),
                        format!("{d} must be smaller than pitch_diameter ({pd})"),
                    ));
                }
                let angle = raw.contact_angle.unwrap_or(0.0);
                if !(angle.is_finite() && (0.0..90.0).contains(&angle)) {
                    return Err(self.err(
                        format!("{prefix}.contact_angle"),
                        format!("must be in degrees, 0 to below 90, got {angle}"),
                    ));
                }
                let g = BearingGeometry {
                    balls,
                    ball_diameter: d,
                    pitch_diameter: pd,
                    contact_angle_deg: angle,
                };
                Ok(Bearing { orders: g.orders(), geometry: Some(g) })
            }
        }
    }

    fn validate_band(&self, key: &str, raw: &[toml::Value]) -> Result<Band> {
        let [low, high] = raw else {
            return Err(self.err(
                key,
                format!(
                    "must be two frequencies, low and high (e.g. [\"2kHz\", \"5kHz\"]), got {}",
                    raw.len()
                ),
            ));
        };
        let low_hz = parse_hz(low).map_err(|e| self.err(format!("{key}[0]"), e))?;
        let high_hz = parse_hz(high).map_err(|e| self.err(format!("{key}[1]"), e))?;
        if low_hz >= high_hz {
            return Err(self.err(
                key,
                format!(
                    "the low end ({}) must be below the high end ({})",
                    show_hz(low_hz),
                    show_hz(high_hz)
                ),
            ));
        }
        Ok(Band { low_hz, high_hz })
    }
}

#[cfg(test)]
mod tests;
