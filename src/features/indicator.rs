//! One defect's envelope indicator: the squared envelope spectrum near the defect frequency
//! against the spectrum's own floor around it (module documentation, "Envelope indicators").

use std::ops::RangeInclusive;

use super::params::Defect;
use super::velocity::bin_hz;

/// The tolerance window for slip: +-2 % of the defect frequency, at least +-1 bin.
pub const TOLERANCE: f64 = 0.02;
/// The floor's neighbourhood beyond the tolerance window, on each side: 25 % of the defect
/// frequency, at least 20 bins.
pub const NEIGHBOURHOOD: f64 = 0.25;
pub const MIN_NEIGHBOURHOOD_BINS: f64 = 20.0;

/// Which bins of the squared envelope spectrum one defect's indicator reads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Geometry {
    /// The tolerance window `T`.
    pub(crate) window: RangeInclusive<usize>,
    /// The neighbourhood below and above it (either may be empty).
    pub(crate) below: RangeInclusive<usize>,
    pub(crate) above: RangeInclusive<usize>,
}

impl Geometry {
    /// The bins for a defect at `defect_hz` in the `n`-point spectrum of a frame at `rate_hz`;
    /// `None` when the tolerance window reaches bin 0, the neighbourhood goes past bin `n/2`, or the
    /// neighbourhood holds no window of the tolerance window's width.
    pub(crate) fn new(defect_hz: f64, rate_hz: f64, n: usize) -> Option<Geometry> {
        let d = defect_hz / (rate_hz / n as f64);
        let h = (TOLERANCE * d).max(1.0);
        let g = (NEIGHBOURHOOD * d).max(MIN_NEIGHBOURHOOD_BINS);
        let (t_lo, t_hi) = ((d - h).ceil(), (d + h).floor());
        let (n_lo, n_hi) = ((d - h - g).ceil().max(1.0), (d + h + g).floor());
        if !(t_lo >= 1.0 && n_hi <= (n / 2) as f64) {
            return None;
        }
        // Whole numbers in range: the casts are exact.
        let (t_lo, t_hi, n_lo, n_hi) = (t_lo as usize, t_hi as usize, n_lo as usize, n_hi as usize);
        #[allow(clippy::reversed_empty_ranges)] // an empty side is a valid, empty neighbourhood
        let geometry =
            Geometry { window: t_lo..=t_hi, below: n_lo..=t_lo - 1, above: t_hi + 1..=n_hi };
        (geometry.floor_windows() > 0).then_some(geometry)
    }

    /// The tolerance window's width `w` in bins.
    fn width(&self) -> usize {
        self.window.end() + 1 - self.window.start()
    }

    /// How many runs of `w` consecutive bins lie inside one side of the neighbourhood.
    fn runs(&self, side: &RangeInclusive<usize>) -> usize {
        let len = (side.end() + 1).saturating_sub(*side.start());
        (len + 1).saturating_sub(self.width())
    }

    fn floor_windows(&self) -> usize {
        self.runs(&self.below) + self.runs(&self.above)
    }

    /// The highest bin read.
    pub(crate) fn top(&self) -> usize {
        *self.above.end()
    }
}

/// One defect's indicator and the numbers that explain it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Indicator {
    pub defect: Defect,
    /// The defect frequency: order x shaft speed, Hz.
    pub defect_hz: f64,
    /// The frequency of the largest bin in the tolerance window, Hz.
    pub peak_hz: f64,
    /// That bin's value of the squared envelope spectrum.
    pub peak: f64,
    /// The floor: the median over the neighbourhood of the largest value of each run of bins as
    /// wide as the tolerance window.
    pub floor: f64,
    /// `peak / floor`: about 1 where nothing stands out.
    pub value: f64,
}

/// The indicator of `defect` at `defect_hz` from `spectrum` (`S_j`, at least `geometry.top() + 1`
/// values, of an `n`-point frame at `rate_hz`); `None` when the floor is 0. `maxima` is scratch.
pub(crate) fn indicator(
    defect: Defect,
    defect_hz: f64,
    geometry: &Geometry,
    spectrum: &[f64],
    (rate_hz, n): (f64, usize),
    maxima: &mut Vec<f64>,
) -> Option<Indicator> {
    let mut peak_bin = *geometry.window.start();
    for j in geometry.window.clone() {
        if spectrum[j] > spectrum[peak_bin] {
            peak_bin = j;
        }
    }
    let w = geometry.width();
    maxima.clear();
    for side in [&geometry.below, &geometry.above] {
        for start in *side.start()..(side.start() + geometry.runs(side)) {
            maxima
                .push(spectrum[start..start + w].iter().copied().fold(f64::NEG_INFINITY, f64::max));
        }
    }
    maxima.sort_unstable_by(f64::total_cmp);
    let mid = maxima.len() / 2;
    let floor =
        if maxima.len() % 2 == 1 { maxima[mid] } else { (maxima[mid - 1] + maxima[mid]) / 2.0 };
    let peak = spectrum[peak_bin];
    (floor > 0.0).then(|| Indicator {
        defect,
        defect_hz,
        peak_hz: bin_hz(peak_bin, rate_hz, n),
        peak,
        floor,
        value: peak / floor,
    })
}
