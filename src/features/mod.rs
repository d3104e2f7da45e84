//! Features of one frame of raw acceleration samples (docs/contracts.md section 12): `accel_rms`,
//! `accel_peak`, `velocity_rms`, `crest_factor`, `kurtosis`, and the bearing-defect envelope
//! indicators `env_bpfo`, `env_bpfi`, `env_bsf`, `env_ftf`.
//!
//! A pure core: no I/O, no clock, no tokio. [`Extractor::extract`] takes one frame's samples in
//! their unit and the [`Params`], and returns [`Features`]. The extractor keeps its FFT plans
//! (one per length) and its buffers, so a frame of a length it has seen before allocates nothing.
//! The FFTs are `realfft`/`rustfft` with their SIMD paths off (`default-features = false`), and
//! every sum runs in a fixed order without fused multiply-add, so the same samples give the same
//! bits on every platform whose `sin`/`cos` (the FFTs' twiddle factors) agree.
//!
//! # Definitions
//!
//! A frame has `n >= 1` samples `s_i` in `g` or `m/s2` at rate `fs` Hz. `x_i = c s_i - mean`, with
//! `c = 9.80665` for `g` (1 for `m/s2`) and `mean` the mean of the `c s_i`. `X_k` is the DFT of `x`
//! (`X_k = sum_t x_t e^{-2 pi i k t / n}`, no window) and `f_k = k fs / n` the frequency of bin `k`
//! (computed as `k * fs / n` in `f64`). `Δf = fs / n` is the bin width. When every sample is
//! equal, `x` is exactly 0 (the mean's rounding leaves nothing behind).
//!
//! - `accel_rms`, `accel_peak`: in the samples' unit, bit for bit what the frame cutter derives
//!   (src/stamp/frames.rs): Welford's running mean and sum of squared deviations `M2` over the
//!   samples in order, `accel_rms = sqrt(max(M2 / n, 0))`, `accel_peak = max(max - mean,
//!   mean - min, 0)` (the largest `|s - mean|`).
//! - `crest_factor = accel_peak / accel_rms` (0 when `accel_rms` is 0).
//! - `kurtosis = (sum x^4 / n) / (sum x^2 / n)^2`, population moments (3 for a Gaussian, 1.5 for
//!   a sine; 0 when every sample is equal).
//!
//! Sums over the samples (the mean, the moments) run as four interleaved partial sums combined
//! in a fixed order (`moments::sum_by_lanes`), the others in increasing index: the order is part
//! of the definition of the bits, and never depends on the platform.
//! - `velocity_rms` (mm/s): with the band `B` (default 10-1000 Hz, 2-1000 Hz for a machine at
//!   600 rpm or less; **both edges included**), `1000 * sqrt(S)` where `S` sums, in increasing
//!   `k`, `2 |X_k|^2 / (n^2 (2 pi f_k)^2)` over `0 < k < n/2` with `f_k` in `B`, and
//!   `|X_k|^2 / (n^2 (2 pi f_k)^2)` for `k = n/2` when `n` is even and `f_{n/2}` is in `B`.
//!   Absent when the Nyquist frequency `fs / 2` is not above the band's top.
//!
//! # Envelope indicators
//!
//! Given for a bearing (defect orders) on a shaft of known speed `f_r` (Hz, rpm / 60). The defect
//! frequencies are `f_d = order x f_r` for `bpfo`, `bpfi`, `bsf` and `ftf`.
//!
//! 1. **Band.** `K` = the bins `0 < k < n/2` with `f_k` in the envelope band (edges included):
//!    the configured `envelope_band` (absent when its top is not below `fs / 2`, or it holds no
//!    bin); for `kurtogram`, the part of it the kurtogram chooses (below).
//! 2. **Analytic signal.** `A_k = 2 X_k` for `k` in `K` (`whitened`: `A_k = 2 X_k / |X_k|`, 0
//!    where `X_k = 0`: every bin keeps its phase and gets magnitude 1, the cepstral pre-whitening
//!    of Smith & Randall), `A_k = 0` elsewhere; `z_t = (1/n) sum_k A_k e^{+2 pi i k t / n}`,
//!    `t = 0..n` (the inverse complex DFT).
//! 3. **Squared envelope spectrum.** `e_t = |z_t|^2 - mean_t |z_t|^2`, `E_j` its DFT, and
//!    `S_j = 2 |E_j| / n` for `0 <= j <= n/2`: the amplitude of the squared envelope's
//!    component at `f_j`, in (m/s2)^2 (for `whitened`, in the whitened signal's units).
//! 4. **Indicator** of a defect at `f_d`, in bins: `d = f_d / Δf`; the tolerance for slip
//!    `h = max(0.02 d, 1)` (±2 % of `f_d`, at least ±1 bin); the window `T` = the bins `j` with
//!    `ceil(d - h) <= j <= floor(d + h)`, `w` bins wide; the neighbourhood half-width
//!    `g = max(0.25 d, 20)`; the neighbourhood `N` = the bins `j >= 1` with
//!    `ceil(d - h - g) <= j < ceil(d - h)` (below) or `floor(d + h) < j <= floor(d + h + g)`
//!    (above). `peak = max over T of S_j` (its bin the lowest one holding it; `peak_hz` its
//!    frequency); `floor` = the median (mean of the two middle values for an even count) over
//!    every run of `w` consecutive bins lying entirely in the part below or entirely in the part
//!    above of the largest `S_j` in the run; the indicator is `peak / floor`. Compared with like:
//!    the window's largest value against the typical largest value of windows as wide around
//!    it, so it is about 1 where nothing stands out (over Gaussian noise its median is 1.0 and
//!    its 99th percentile about 2). Absent when `ceil(d - h) < 1`, `floor(d + h + g) > n/2`, no
//!    run fits in `N`, or the floor is 0.
//!
//! # The kurtogram
//!
//! The `kurtogram` method chooses a part of the configured envelope band by spectral kurtosis,
//! after Antoni's fast kurtogram: a fixed tree of bands over the envelope band's bins `K` (first
//! bin `k0`, `B` bins), level `c` splitting them into `c` bands for `c = 1, 2, 3, 4, 6, 8, 12,
//! 16, 24, ...` (halvings interleaved with thirds). Band `i` of level `c` holds the bins
//! `k0 + ceil(i B / c) ..= k0 + ceil((i + 1) B / c) - 1`. Level 1 (the whole envelope band) is
//! always used, further levels while their bands are at least `2 (J - 1)` bins wide
//! (`B >= 2 c (J - 1)`), `J - 1` being the highest bin the indicators read, so that the chosen
//! band carries every modulation frequency they look at. A band's spectral kurtosis: `w` = the
//! unnormalised inverse DFT of length `m = fast_len(bins)` (the smallest `2^a 3^b 5^c` not below
//! the band's bin count) of the band's `X_k` placed at `0, 1, ...` and zero-padded;
//! `a_t = |w_t|^2`; `SK = mean(a^2) / mean(a)^2 - 2` (0 for a band without energy; 0 for complex
//! Gaussian noise, positive for impulsive content). The band of largest `SK` wins; ties go to the
//! earlier band in the order levels ascending, bands from low to high frequency. The envelope is
//! then steps 2-4 in that band, without whitening. The tree stays inside the configured band
//! because over the whole spectrum it chose the 5.5-6 kHz band next to the Nyquist frequency in
//! 37 of the 95 12-kHz CWRU frames, where isolated spikes give an `SK` of up to 330 and the
//! envelope no periodicity (docs/diagnostics.md).
//!
//! # How it is computed
//!
//! Exactly the definitions above, except step 2-3's inverse DFT: since only the band's `B` bins
//! are non-zero and only lags `j < J` are read, the band is shifted down to bin 0 and inverse
//! transformed at length `m = fast_len(max(B + J - 1, 2J))`. For `0 < j < m/2` the shifted,
//! shorter signal's squared envelope spectrum is `n/m` times the full one's (both are
//! `sum_{k-l=j} A_k conj(A_l)`, scaled; `m >= B + J - 1` rules out aliasing), which the code
//! scales back. The independent reference (`fixtures/cwru/features_reference.py`) computes the
//! full-length definition, and `tests/features_reference.rs` checks the two agree.

mod envelope;
mod indicator;
mod kurtogram;
mod moments;
mod params;
mod plans;
mod velocity;

pub use envelope::{band_bins, fast_len};
pub use indicator::{Indicator, MIN_NEIGHBOURHOOD_BINS, NEIGHBOURHOOD, TOLERANCE};
pub use kurtogram::{band_counts, Choice};
pub use moments::{crest_factor, kurtosis, rms_and_peak};
pub use params::{
    AccelUnit, Band, Bearing, Defect, DefectOrders, EnvelopeMethod, Params, STANDARD_GRAVITY,
};
pub use velocity::{bin_hz, velocity_rms};

use envelope::EnvelopeWork;
use indicator::Geometry;
use kurtogram::KurtogramWork;
use plans::Plans;
use rustfft::num_complex::Complex;

/// Why a frame's features could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FeatureError {
    #[error("a frame without samples has no features")]
    Empty,
    #[error("sample {index} is not finite ({value})")]
    NonFinite { index: usize, value: f64 },
    #[error("sample rate {0} Hz is not a positive finite number")]
    BadRate(f64),
    #[error("{what} {lo_hz}-{hi_hz} Hz is not a band (needs 0 <= low <= high, both finite)")]
    BadBand { what: &'static str, lo_hz: f64, hi_hz: f64 },
    #[error("bearing: {what} {value} is not a positive finite number")]
    BadBearing { what: &'static str, value: f64 },
    /// A broken invariant of this module (an FFT given buffers of the wrong length): a bug.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The names of every feature, in the order [`Features::each`] gives them.
pub const FEATURE_NAMES: [&str; 9] = [
    "accel_rms",
    "accel_peak",
    "velocity_rms",
    "crest_factor",
    "kurtosis",
    "env_bpfo",
    "env_bpfi",
    "env_bsf",
    "env_ftf",
];

/// One frame's features.
#[derive(Debug, Clone, PartialEq)]
pub struct Features {
    /// In the samples' unit.
    pub accel_rms: f64,
    /// In the samples' unit.
    pub accel_peak: f64,
    pub crest_factor: f64,
    pub kurtosis: f64,
    /// mm/s; absent when the frame's Nyquist frequency is not above the velocity band's top.
    pub velocity_rms: Option<f64>,
    /// Present when the parameters name a bearing and the envelope band fits the frame.
    pub envelope: Option<Envelope>,
}

/// The envelope of a frame and the defect indicators read from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub method: EnvelopeMethod,
    /// The band the envelope was taken in: the configured one, or the kurtogram's choice.
    pub band: Band,
    /// The kurtogram's choice, for the `kurtogram` method.
    pub kurtogram: Option<Choice>,
    /// In [`Defect::ALL`] order; each absent when the spectrum cannot give it (section 4 above).
    pub indicators: [Option<Indicator>; 4],
}

impl Envelope {
    pub fn get(&self, defect: Defect) -> Option<&Indicator> {
        self.indicators.iter().flatten().find(|i| i.defect == defect)
    }
}

impl Features {
    /// Every feature by name ([`FEATURE_NAMES`] order), `None` for those the frame cannot give.
    pub fn each(&self) -> [(&'static str, Option<f64>); 9] {
        let env = |d: Defect| self.envelope.as_ref().and_then(|e| e.get(d)).map(|i| i.value);
        [
            (FEATURE_NAMES[0], Some(self.accel_rms)),
            (FEATURE_NAMES[1], Some(self.accel_peak)),
            (FEATURE_NAMES[2], self.velocity_rms),
            (FEATURE_NAMES[3], Some(self.crest_factor)),
            (FEATURE_NAMES[4], Some(self.kurtosis)),
            (FEATURE_NAMES[5], env(Defect::Bpfo)),
            (FEATURE_NAMES[6], env(Defect::Bpfi)),
            (FEATURE_NAMES[7], env(Defect::Bsf)),
            (FEATURE_NAMES[8], env(Defect::Ftf)),
        ]
    }

    /// The feature called `name`, if the frame gives it.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.each().into_iter().find(|(n, _)| *n == name).and_then(|(_, v)| v)
    }
}

/// Computes frames' features, keeping FFT plans and buffers from one frame to the next.
#[derive(Debug, Default)]
pub struct Extractor {
    plans: Plans,
    /// The frame in m/s2, mean removed (the forward FFT's input, destroyed by it).
    x: Vec<f64>,
    /// `X_k`, `k = 0..=n/2`.
    spectrum: Vec<Complex<f64>>,
    scratch: Vec<Complex<f64>>,
    envelope: EnvelopeWork,
    kurtogram: KurtogramWork,
    maxima: Vec<f64>,
}

impl Extractor {
    pub fn new() -> Self {
        Extractor::default()
    }

    /// The features of one frame: `samples` in `params.unit` at `params.rate_hz`, in time order.
    pub fn extract(&mut self, samples: &[f64], params: &Params) -> Result<Features, FeatureError> {
        params.check()?;
        if samples.is_empty() {
            return Err(FeatureError::Empty);
        }
        if let Some(index) = samples.iter().position(|s| !s.is_finite()) {
            return Err(FeatureError::NonFinite { index, value: samples[index] });
        }
        let (accel_rms, accel_peak) = rms_and_peak(samples);
        let n = samples.len();
        let c = params.unit.to_ms2();
        self.x.clear();
        self.x.extend(samples.iter().map(|s| s * c));
        if accel_peak == 0.0 {
            // Every sample is equal (Welford's mean is then exact): x is exactly 0.
            self.x.fill(0.0);
        } else {
            let [sum] = moments::sum_by_lanes(&self.x, |v| [v]);
            let mean = sum / n as f64;
            for v in self.x.iter_mut() {
                *v -= mean;
            }
        }
        let mut features = Features {
            accel_rms,
            accel_peak,
            crest_factor: crest_factor(accel_rms, accel_peak),
            kurtosis: kurtosis(&self.x),
            velocity_rms: None,
            envelope: None,
        };
        let fs = params.rate_hz;
        if fs / 2.0 <= params.velocity_band.hi_hz && params.bearing.is_none() {
            return Ok(features); // nothing needs the spectrum
        }
        self.plans.forward_real(n, &mut self.x, &mut self.spectrum, &mut self.scratch)?;
        features.velocity_rms = velocity_rms(&self.spectrum, n, fs, params.velocity_band);
        if let Some(bearing) = params.bearing {
            features.envelope = self.envelope(n, params, &bearing)?;
        }
        Ok(features)
    }

    /// Steps 1-4 of the envelope indicators over `self.spectrum`.
    fn envelope(
        &mut self,
        n: usize,
        params: &Params,
        bearing: &Bearing,
    ) -> Result<Option<Envelope>, FeatureError> {
        let fs = params.rate_hz;
        let defect_hz = bearing.orders.each().map(|(d, order)| (d, order * bearing.shaft_hz));
        let geometries = defect_hz.map(|(_, f)| Geometry::new(f, fs, n));
        let Some(top) = geometries.iter().flatten().map(Geometry::top).max() else {
            // No defect frequency fits this frame's spectrum: an envelope with no indicator.
            let band = params.envelope_band;
            let indicators = [None; 4];
            return Ok(Some(Envelope {
                method: params.envelope,
                band,
                kurtogram: None,
                indicators,
            }));
        };
        let lags = top + 1;
        let configured = params.envelope_band;
        let bins = band_bins(configured, fs, n).filter(|_| configured.hi_hz < fs / 2.0);
        let Some(bins) = bins else { return Ok(None) };
        let (band, bins, kurtogram) = match params.envelope {
            EnvelopeMethod::Fixed | EnvelopeMethod::Whitened => (configured, bins, None),
            EnvelopeMethod::Kurtogram => {
                let choice = kurtogram::choose(
                    &self.spectrum,
                    &bins,
                    (fs, n),
                    2 * top,
                    &mut self.plans,
                    &mut self.kurtogram,
                )?;
                (choice.band, choice.bins.clone(), Some(choice))
            }
        };
        let whiten = params.envelope == EnvelopeMethod::Whitened;
        envelope::squared_envelope_spectrum(
            &self.spectrum,
            bins,
            whiten,
            n,
            lags,
            &mut self.plans,
            &mut self.envelope,
        )?;
        let s = &self.envelope.magnitudes;
        let mut indicators = [None; 4];
        for (slot, ((defect, f), geometry)) in
            indicators.iter_mut().zip(defect_hz.iter().zip(&geometries))
        {
            if let Some(g) = geometry {
                *slot = indicator::indicator(*defect, *f, g, s, (fs, n), &mut self.maxima);
            }
        }
        Ok(Some(Envelope { method: params.envelope, band, kurtogram, indicators }))
    }
}

#[cfg(test)]
mod tests;
