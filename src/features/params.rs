//! What a frame's features depend on besides its samples: the samples' unit and rate, the ISO
//! velocity band, the bearing and its shaft speed, the envelope band and method.

use std::fmt;
use std::str::FromStr;

/// Standard gravity: 1 g in m/s2 (docs/contracts.md section 2).
pub const STANDARD_GRAVITY: f64 = 9.80665;

/// The unit of a frame's acceleration samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccelUnit {
    /// Standard gravity.
    G,
    /// Metres per second squared.
    Ms2,
}

impl AccelUnit {
    /// The factor that turns a sample in this unit into m/s2.
    pub fn to_ms2(self) -> f64 {
        match self {
            AccelUnit::G => STANDARD_GRAVITY,
            AccelUnit::Ms2 => 1.0,
        }
    }
}

/// A frequency band in Hz, both edges included: `lo_hz <= f <= hi_hz`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    pub lo_hz: f64,
    pub hi_hz: f64,
}

impl Band {
    /// The ISO 20816 broadband velocity band of a machine above 600 rpm: 10-1000 Hz.
    pub const ISO: Band = Band { lo_hz: 10.0, hi_hz: 1000.0 };
    /// The ISO 20816 band of a machine at 600 rpm or less: 2-1000 Hz.
    pub const ISO_SLOW: Band = Band { lo_hz: 2.0, hi_hz: 1000.0 };

    pub fn new(lo_hz: f64, hi_hz: f64) -> Self {
        Band { lo_hz, hi_hz }
    }

    /// The velocity band for a machine whose shaft turns at `rpm` (unknown: the 10-1000 Hz band).
    pub fn iso_for_rpm(rpm: Option<f64>) -> Band {
        match rpm {
            Some(r) if r <= 600.0 => Band::ISO_SLOW,
            _ => Band::ISO,
        }
    }

    /// Whether `f` lies in the band, edges included.
    pub fn contains(&self, f: f64) -> bool {
        self.lo_hz <= f && f <= self.hi_hz
    }

    /// `Err` naming `what` unless `0 <= lo_hz <= hi_hz` and both are finite.
    pub(crate) fn check(&self, what: &'static str) -> Result<(), super::FeatureError> {
        let ok = self.lo_hz.is_finite()
            && self.hi_hz.is_finite()
            && self.lo_hz >= 0.0
            && self.lo_hz <= self.hi_hz;
        if ok {
            Ok(())
        } else {
            Err(super::FeatureError::BadBand { what, lo_hz: self.lo_hz, hi_hz: self.hi_hz })
        }
    }
}

impl fmt::Display for Band {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{} Hz", self.lo_hz, self.hi_hz)
    }
}

/// A rolling-element bearing's defect frequencies as orders of the shaft speed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DefectOrders {
    /// Ball pass frequency, outer race.
    pub bpfo: f64,
    /// Ball pass frequency, inner race.
    pub bpfi: f64,
    /// Ball (rolling element) spin frequency.
    pub bsf: f64,
    /// Fundamental train (cage) frequency.
    pub ftf: f64,
}

impl DefectOrders {
    /// The SKF 6205 deep-groove ball bearing (the CWRU test rig's drive end).
    pub const SKF_6205: DefectOrders =
        DefectOrders { bpfo: 3.5848, bpfi: 5.4152, bsf: 2.357, ftf: 0.3983 };

    /// The orders of a bearing of `balls` balls of diameter `d` on pitch diameter `pd` (one unit)
    /// with contact angle `angle_deg`, by the standard formulas: with `r = d/pd·cos(angle)`,
    /// BPFO = n/2·(1 − r), BPFI = n/2·(1 + r), BSF = pd/(2d)·(1 − r²), FTF = (1 − r)/2.
    pub fn from_geometry(balls: u32, d: f64, pd: f64, angle_deg: f64) -> DefectOrders {
        let n = f64::from(balls);
        let r = d / pd * angle_deg.to_radians().cos();
        DefectOrders {
            bpfo: n / 2.0 * (1.0 - r),
            bpfi: n / 2.0 * (1.0 + r),
            bsf: pd / (2.0 * d) * (1.0 - r * r),
            ftf: (1.0 - r) / 2.0,
        }
    }

    /// The four defects in their fixed order, each with its order.
    pub fn each(&self) -> [(Defect, f64); 4] {
        [
            (Defect::Bpfo, self.bpfo),
            (Defect::Bpfi, self.bpfi),
            (Defect::Bsf, self.bsf),
            (Defect::Ftf, self.ftf),
        ]
    }
}

/// One of the four bearing defects an envelope indicator points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Defect {
    Bpfo,
    Bpfi,
    Bsf,
    Ftf,
}

impl Defect {
    pub const ALL: [Defect; 4] = [Defect::Bpfo, Defect::Bpfi, Defect::Bsf, Defect::Ftf];

    /// Its key in the asset table's `bearing`: `bpfo`, `bpfi`, `bsf`, `ftf`.
    pub fn name(self) -> &'static str {
        match self {
            Defect::Bpfo => "bpfo",
            Defect::Bpfi => "bpfi",
            Defect::Bsf => "bsf",
            Defect::Ftf => "ftf",
        }
    }

    /// The feature name of its indicator: `env_bpfo`, `env_bpfi`, `env_bsf`, `env_ftf`.
    pub fn feature(self) -> &'static str {
        match self {
            Defect::Bpfo => "env_bpfo",
            Defect::Bpfi => "env_bpfi",
            Defect::Bsf => "env_bsf",
            Defect::Ftf => "env_ftf",
        }
    }

    /// What a person calls it: `outer race`, `inner race`, `ball`, `cage`.
    pub fn part(self) -> &'static str {
        match self {
            Defect::Bpfo => "outer race",
            Defect::Bpfi => "inner race",
            Defect::Bsf => "ball",
            Defect::Ftf => "cage",
        }
    }
}

/// A bearing on a shaft of known speed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bearing {
    /// Shaft speed in Hz (rpm / 60).
    pub shaft_hz: f64,
    pub orders: DefectOrders,
}

/// How the band of the squared envelope is chosen and prepared (module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvelopeMethod {
    /// The configured envelope band of the raw spectrum.
    #[default]
    Fixed,
    /// The configured envelope band of the pre-whitened spectrum (every bin's magnitude set to 1).
    Whitened,
    /// The band of largest spectral kurtosis in a fixed tree of bands.
    Kurtogram,
}

impl EnvelopeMethod {
    pub const ALL: [EnvelopeMethod; 3] =
        [EnvelopeMethod::Fixed, EnvelopeMethod::Whitened, EnvelopeMethod::Kurtogram];

    pub fn as_str(self) -> &'static str {
        match self {
            EnvelopeMethod::Fixed => "fixed",
            EnvelopeMethod::Whitened => "whitened",
            EnvelopeMethod::Kurtogram => "kurtogram",
        }
    }
}

impl fmt::Display for EnvelopeMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EnvelopeMethod {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EnvelopeMethod::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| {
            format!("envelope method {s:?} is not one of \"fixed\", \"whitened\", \"kurtogram\"")
        })
    }
}

/// Everything a frame's features depend on besides its samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// The samples' unit.
    pub unit: AccelUnit,
    /// Sample rate in Hz.
    pub rate_hz: f64,
    /// The ISO velocity band ([`Band::iso_for_rpm`]).
    pub velocity_band: Band,
    /// The bearing and shaft speed; without them no envelope indicator is computed.
    pub bearing: Option<Bearing>,
    /// The envelope band of the `fixed` and `whitened` methods.
    pub envelope_band: Band,
    pub envelope: EnvelopeMethod,
}

impl Params {
    /// Parameters for samples in `unit` at `rate_hz` with the defaults: the 10-1000 Hz velocity
    /// band, no bearing, the 2-5 kHz envelope band, the fixed method.
    pub fn new(unit: AccelUnit, rate_hz: f64) -> Self {
        Params {
            unit,
            rate_hz,
            velocity_band: Band::ISO,
            bearing: None,
            envelope_band: Band::new(2000.0, 5000.0),
            envelope: EnvelopeMethod::Fixed,
        }
    }

    /// `Err` naming the first parameter that no frame could be computed with.
    pub(crate) fn check(&self) -> Result<(), super::FeatureError> {
        if !(self.rate_hz.is_finite() && self.rate_hz > 0.0) {
            return Err(super::FeatureError::BadRate(self.rate_hz));
        }
        self.velocity_band.check("velocity band")?;
        self.envelope_band.check("envelope band")?;
        if let Some(b) = &self.bearing {
            let bad = |what: &'static str, value: f64| {
                (!(value.is_finite() && value > 0.0))
                    .then_some(super::FeatureError::BadBearing { what, value })
            };
            if let Some(e) = bad("shaft speed (Hz)", b.shaft_hz) {
                return Err(e);
            }
            for (d, order) in b.orders.each() {
                if let Some(e) = bad(d.name(), order) {
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}
