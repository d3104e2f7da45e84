//! A rule's threshold (docs/contracts.md section 4): a number in the rule's unit, or, for a
//! `velocity_rms` rule, an ISO 20816-3 zone boundary (`"zone-B"`, `"zone-C"`, `"zone-D"`)
//! resolved per machine from its asset entry's group and foundation.

use std::fmt;

use super::assets::{MachineAsset, Zone};
use super::{Ctx, Result};
use crate::event::features::{Feature, Quantity};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// Finite, >= 0, in the rule's unit.
    Value(f64),
    /// The lower boundary of zone B, C or D, in mm/s.
    Zone(Zone),
}

impl Threshold {
    /// The number, for a threshold that is one.
    pub fn value(self) -> Option<f64> {
        match self {
            Threshold::Value(v) => Some(v),
            Threshold::Zone(_) => None,
        }
    }

    /// The number for a machine with asset entry `asset`: a zone resolves only where the entry
    /// gives group and foundation.
    pub fn resolve(self, asset: Option<&MachineAsset>) -> Option<f64> {
        match self {
            Threshold::Value(v) => Some(v),
            Threshold::Zone(z) => Some(asset?.iso?.boundary(z)),
        }
    }
}

/// A number as Rust writes it (`0.5`, `4.5`), a zone as written (`zone-C`).
impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Threshold::Value(v) => write!(f, "{v}"),
            Threshold::Zone(z) => write!(f, "zone-{}", z.as_str()),
        }
    }
}

/// A threshold equals a number when it is that number.
impl PartialEq<f64> for Threshold {
    fn eq(&self, other: &f64) -> bool {
        *self == Threshold::Value(*other)
    }
}

impl Ctx<'_> {
    /// A zone threshold only for a velocity rule: the zones are velocity boundaries.
    pub(super) fn zone_needs_velocity(
        &self,
        key: &str,
        t: Threshold,
        metric: Feature,
    ) -> Result<()> {
        if matches!(t, Threshold::Zone(_)) && metric.quantity() != Quantity::Velocity {
            return Err(self.err(
                key,
                format!(
                    "{t} is an ISO 20816-3 velocity boundary in mm/s: it needs metric = \
                     \"velocity_rms\", not \"{metric}\""
                ),
            ));
        }
        Ok(())
    }

    /// `key`'s value as a threshold: a finite number >= 0, or `"zone-B"`, `"zone-C"`,
    /// `"zone-D"`.
    pub(super) fn threshold(&self, key: &str, v: &toml::Value) -> Result<Threshold> {
        let zone_hint = "a zone boundary is written \"zone-B\", \"zone-C\" or \"zone-D\"";
        match v {
            toml::Value::Integer(n) => Ok(Threshold::Value(self.non_negative(key, *n as f64)?)),
            toml::Value::Float(x) => Ok(Threshold::Value(self.non_negative(key, *x)?)),
            toml::Value::String(s) => match s.as_str() {
                "zone-B" => Ok(Threshold::Zone(Zone::B)),
                "zone-C" => Ok(Threshold::Zone(Zone::C)),
                "zone-D" => Ok(Threshold::Zone(Zone::D)),
                "zone-A" => Err(self
                    .err(key, format!("zone A starts at 0 mm/s and bounds nothing; {zone_hint}"))),
                other => Err(self.err(
                    key,
                    format!("{other:?} is not a threshold: a number >= 0, or {zone_hint}"),
                )),
            },
            other => Err(self.err(
                key,
                format!(
                    "must be a number >= 0 or a zone boundary (\"zone-C\"), got a {}",
                    other.type_str()
                ),
            )),
        }
    }
}
