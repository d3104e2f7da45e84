//! The feature vocabulary (docs/contracts.md sections 2 and 12): the names of the measurements a
//! frame of samples can give, the unit each is read in, and [`Features`], the values of one event.
//!
//! [`Features`] is fixed-size and allocation-free: a presence mask and one `f64` per [`Feature`]
//! (an absent one holds `0.0`, so derived equality is equality of content). It serializes as a
//! JSON object holding only the present features, **in [`Feature`] order**, and deserializes
//! (the stores read events back) with the parser's rules: known names only, each once, each a
//! finite number `>= 0`.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Metric, Unit};

/// One measurement of a frame (docs/contracts.md section 12). The order is the order of an
/// event's `features` object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    AccelRms,
    AccelPeak,
    VelocityRms,
    CrestFactor,
    Kurtosis,
    EnvBpfo,
    EnvBpfi,
    EnvBsf,
    EnvFtf,
}

/// What a feature measures, which fixes the unit it is read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// In `g` or `m/s2`: a feature value is in its event's `unit`.
    Acceleration,
    /// Always in `mm/s`.
    Velocity,
    /// A ratio or a moment: no unit (spelled `"1"` where a unit is written).
    Dimensionless,
}

impl Feature {
    /// Every feature, in order.
    pub const ALL: [Feature; 9] = [
        Feature::AccelRms,
        Feature::AccelPeak,
        Feature::VelocityRms,
        Feature::CrestFactor,
        Feature::Kurtosis,
        Feature::EnvBpfo,
        Feature::EnvBpfi,
        Feature::EnvBsf,
        Feature::EnvFtf,
    ];

    /// The contract spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Feature::AccelRms => "accel_rms",
            Feature::AccelPeak => "accel_peak",
            Feature::VelocityRms => "velocity_rms",
            Feature::CrestFactor => "crest_factor",
            Feature::Kurtosis => "kurtosis",
            Feature::EnvBpfo => "env_bpfo",
            Feature::EnvBpfi => "env_bpfi",
            Feature::EnvBsf => "env_bsf",
            Feature::EnvFtf => "env_ftf",
        }
    }

    /// The feature of that spelling.
    pub fn from_name(name: &str) -> Option<Feature> {
        Feature::ALL.into_iter().find(|f| f.as_str() == name)
    }

    /// The event metric of the same measurement, for the three an event's `metric` may name.
    pub fn metric(self) -> Option<Metric> {
        match self {
            Feature::AccelRms => Some(Metric::AccelRms),
            Feature::AccelPeak => Some(Metric::AccelPeak),
            Feature::VelocityRms => Some(Metric::VelocityRms),
            _ => None,
        }
    }

    pub fn quantity(self) -> Quantity {
        match self {
            Feature::AccelRms | Feature::AccelPeak => Quantity::Acceleration,
            Feature::VelocityRms => Quantity::Velocity,
            _ => Quantity::Dimensionless,
        }
    }

    /// One of the four bearing-defect envelope indicators.
    pub fn is_envelope(self) -> bool {
        matches!(self, Feature::EnvBpfo | Feature::EnvBpfi | Feature::EnvBsf | Feature::EnvFtf)
    }

    /// Whether a value in `unit` can measure this feature.
    pub fn fits(self, unit: MeasureUnit) -> bool {
        match self.quantity() {
            Quantity::Acceleration => matches!(unit, MeasureUnit::G | MeasureUnit::Ms2),
            Quantity::Velocity => unit == MeasureUnit::MmS,
            Quantity::Dimensionless => unit == MeasureUnit::One,
        }
    }

    /// The unit a rule over this feature reads in when none is written: `g` for acceleration.
    pub fn default_unit(self) -> MeasureUnit {
        match self.quantity() {
            Quantity::Acceleration => MeasureUnit::G,
            Quantity::Velocity => MeasureUnit::MmS,
            Quantity::Dimensionless => MeasureUnit::One,
        }
    }

    fn bit(self) -> u16 {
        1 << self as u16
    }
}

impl From<Metric> for Feature {
    fn from(m: Metric) -> Feature {
        match m {
            Metric::AccelRms => Feature::AccelRms,
            Metric::AccelPeak => Feature::AccelPeak,
            Metric::VelocityRms => Feature::VelocityRms,
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The unit of a measurement a rule reads or an alert's evidence shows: an event [`Unit`], or
/// `"1"` for a dimensionless feature (events never carry `"1"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MeasureUnit {
    #[serde(rename = "g")]
    G,
    #[serde(rename = "m/s2")]
    Ms2,
    #[serde(rename = "mm/s")]
    MmS,
    #[serde(rename = "1")]
    One,
}

impl MeasureUnit {
    pub fn as_str(self) -> &'static str {
        match self {
            MeasureUnit::G => "g",
            MeasureUnit::Ms2 => "m/s2",
            MeasureUnit::MmS => "mm/s",
            MeasureUnit::One => "1",
        }
    }

    /// The event unit, for all but `"1"`.
    pub fn unit(self) -> Option<Unit> {
        match self {
            MeasureUnit::G => Some(Unit::G),
            MeasureUnit::Ms2 => Some(Unit::Ms2),
            MeasureUnit::MmS => Some(Unit::MmS),
            MeasureUnit::One => None,
        }
    }

    /// `value` in `self` converted to `to`, exactly as [`Unit::convert`]; `None` when the two do
    /// not convert.
    pub fn convert(self, value: f64, to: MeasureUnit) -> Option<f64> {
        match (self.unit(), to.unit()) {
            (Some(a), Some(b)) => a.convert(value, b),
            (None, None) => Some(value),
            _ => None,
        }
    }
}

impl From<Unit> for MeasureUnit {
    fn from(u: Unit) -> MeasureUnit {
        match u {
            Unit::G => MeasureUnit::G,
            Unit::Ms2 => MeasureUnit::Ms2,
            Unit::MmS => MeasureUnit::MmS,
        }
    }
}

/// The feature values of one event: fixed-size, no allocation. See the module documentation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Features {
    present: u16,
    values: [f64; 9],
}

impl Features {
    /// The value of `f`, when present.
    #[inline]
    pub fn get(&self, f: Feature) -> Option<f64> {
        (self.present & f.bit() != 0).then(|| self.values[f as usize])
    }

    /// Sets `f` to `value` (the caller keeps it finite and `>= 0`; `-0.0` is stored as `0.0`).
    pub fn set(&mut self, f: Feature, value: f64) {
        self.present |= f.bit();
        self.values[f as usize] = if value == 0.0 { 0.0 } else { value };
    }

    /// `f` absent again.
    pub fn remove(&mut self, f: Feature) {
        self.present &= !f.bit();
        self.values[f as usize] = 0.0;
    }

    pub fn is_empty(&self) -> bool {
        self.present == 0
    }

    pub fn len(&self) -> usize {
        self.present.count_ones() as usize
    }

    /// The present features and their values, in [`Feature`] order.
    pub fn iter(&self) -> impl Iterator<Item = (Feature, f64)> + '_ {
        Feature::ALL.into_iter().filter_map(|f| Some((f, self.get(f)?)))
    }

    /// Which features are present: bit `f as u16` for each (the fingerprint's layout).
    pub fn mask(&self) -> u16 {
        self.present
    }
}

impl FromIterator<(Feature, f64)> for Features {
    fn from_iter<I: IntoIterator<Item = (Feature, f64)>>(iter: I) -> Self {
        let mut out = Features::default();
        for (f, v) in iter {
            out.set(f, v);
        }
        out
    }
}

impl Serialize for Features {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.len()))?;
        for (f, v) in self.iter() {
            map.serialize_entry(f.as_str(), &v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Features {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FeaturesVisitor)
    }
}

struct FeaturesVisitor;

impl<'de> Visitor<'de> for FeaturesVisitor {
    type Value = Features;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of feature names to finite numbers >= 0")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Features, A::Error> {
        let mut out = Features::default();
        while let Some(name) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let Some(f) = Feature::from_name(&name) else {
                return Err(de::Error::custom(format_args!("unknown feature {name:?}")));
            };
            if out.get(f).is_some() {
                return Err(de::Error::custom(format_args!("feature {name:?} appears twice")));
            }
            let v: f64 = map.next_value()?;
            if !(v.is_finite() && v >= 0.0) {
                return Err(de::Error::custom(format_args!(
                    "feature {name:?} is {v}, not a finite number >= 0"
                )));
            }
            out.set(f, v);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_in_order() {
        for (i, f) in Feature::ALL.into_iter().enumerate() {
            assert_eq!(f as usize, i);
            assert_eq!(Feature::from_name(f.as_str()), Some(f));
            assert_eq!(serde_json::to_string(&f).unwrap(), format!("\"{}\"", f.as_str()));
        }
        assert_eq!(Feature::from_name("velocity"), None);
        for m in [Metric::AccelRms, Metric::AccelPeak, Metric::VelocityRms] {
            assert_eq!(Feature::from(m).metric(), Some(m));
            assert_eq!(Feature::from(m).as_str(), m.as_str());
        }
        assert_eq!(Feature::Kurtosis.metric(), None);
    }

    #[test]
    fn units_fit_their_quantity() {
        assert!(Feature::AccelPeak.fits(MeasureUnit::Ms2));
        assert!(!Feature::AccelPeak.fits(MeasureUnit::MmS));
        assert!(Feature::VelocityRms.fits(MeasureUnit::MmS));
        assert!(!Feature::VelocityRms.fits(MeasureUnit::G));
        assert!(Feature::EnvBpfi.fits(MeasureUnit::One));
        assert!(!Feature::CrestFactor.fits(MeasureUnit::G));
        assert_eq!(MeasureUnit::G.convert(1.0, MeasureUnit::Ms2), Some(9.80665));
        assert_eq!(MeasureUnit::One.convert(2.5, MeasureUnit::One), Some(2.5));
        assert_eq!(MeasureUnit::One.convert(2.5, MeasureUnit::G), None);
        assert_eq!(MeasureUnit::MmS.convert(2.5, MeasureUnit::One), None);
    }

    #[test]
    fn serialized_in_feature_order_with_only_the_present_ones() {
        let mut f = Features::default();
        assert_eq!(serde_json::to_string(&f).unwrap(), "{}");
        f.set(Feature::EnvBpfi, 31.4);
        f.set(Feature::AccelRms, 0.5);
        f.set(Feature::Kurtosis, -0.0);
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"accel_rms":0.5,"kurtosis":0.0,"env_bpfi":31.4}"#
        );
        assert_eq!(f.len(), 3);
        let back: Features = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(back, f);
        f.remove(Feature::Kurtosis);
        assert_eq!(f.get(Feature::Kurtosis), None);
        assert_eq!(f, [(Feature::AccelRms, 0.5), (Feature::EnvBpfi, 31.4)].into_iter().collect());
    }

    #[test]
    fn deserializing_refuses_what_the_parser_refuses() {
        for (text, why) in [
            (r#"{"accel":1}"#, "unknown feature \"accel\""),
            (r#"{"kurtosis":1,"kurtosis":2}"#, "appears twice"),
            (r#"{"kurtosis":-1}"#, "not a finite number"),
            (r#"{"kurtosis":"3"}"#, "invalid type"),
        ] {
            let e = serde_json::from_str::<Features>(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
