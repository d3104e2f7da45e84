//! The squared envelope spectrum of one band of a frame's spectrum, computed through the exact
//! identity of the module documentation ("How it is computed") on a short, shifted inverse DFT.

use std::ops::RangeInclusive;

use rustfft::num_complex::Complex;

use super::params::Band;
use super::plans::Plans;
use super::velocity::bin_hz;
use super::FeatureError;

/// Scratch buffers of the envelope, reused from frame to frame.
#[derive(Debug, Default)]
pub(crate) struct EnvelopeWork {
    /// The band's bins (x2, or whitened), shifted to start at 0; then the analytic signal.
    analytic: Vec<Complex<f64>>,
    /// The squared envelope, mean removed.
    squared: Vec<f64>,
    /// Its DFT.
    spectrum: Vec<Complex<f64>>,
    scratch: Vec<Complex<f64>>,
    /// `S_j` for `j < lags`.
    pub(crate) magnitudes: Vec<f64>,
}

/// The DFT bins `k` of an `n`-point frame at `rate_hz` whose frequency `k fs / n` lies in `band`
/// (edges included), without DC and Nyquist (`0 < k < n/2`); `None` when there are none.
pub fn band_bins(band: Band, rate_hz: f64, n: usize) -> Option<RangeInclusive<usize>> {
    // A first guess from the band's edges, then the exact test (`bin_hz` is monotone in k).
    let guess = |f: f64| (f / rate_hz * n as f64).floor().clamp(1.0, n as f64) as usize;
    let mut lo = guess(band.lo_hz).saturating_sub(1).max(1);
    while lo < n && bin_hz(lo, rate_hz, n) < band.lo_hz {
        lo += 1;
    }
    let last = n.div_ceil(2) - 1; // the largest k with 2k < n
    let mut hi = (guess(band.hi_hz) + 1).min(last);
    while hi >= lo && hi > 0 && bin_hz(hi, rate_hz, n) > band.hi_hz {
        hi -= 1;
    }
    (lo <= hi && hi <= last && hi > 0).then_some(lo..=hi)
}

/// The smallest `2^a 3^b 5^c >= x` (1 for `x <= 1`): a length the FFT handles fast.
pub fn fast_len(x: usize) -> usize {
    if x <= 1 {
        return 1;
    }
    let mut best = usize::MAX;
    let mut p5 = 1usize;
    while p5 < x.saturating_mul(5) {
        let mut p35 = p5;
        while p35 < x.saturating_mul(3) {
            let mut v = p35;
            while v < x {
                v *= 2;
            }
            best = best.min(v);
            p35 *= 3;
        }
        p5 *= 5;
    }
    best
}

/// The band's bins `k` of `spectrum` as `2 X_k` (whitened: `2 X_k / |X_k|`, 0 where `X_k = 0`),
/// placed at `0..` of a zeroed buffer of `len`.
fn place_band(
    out: &mut Vec<Complex<f64>>,
    spectrum: &[Complex<f64>],
    bins: &RangeInclusive<usize>,
    whiten: bool,
    len: usize,
) {
    out.clear();
    out.resize(len, Complex::new(0.0, 0.0));
    for (slot, x) in out.iter_mut().zip(&spectrum[bins.clone()]) {
        *slot = if whiten {
            let m = x.norm();
            if m > 0.0 {
                Complex::new(2.0 * x.re / m, 2.0 * x.im / m)
            } else {
                Complex::new(0.0, 0.0)
            }
        } else {
            Complex::new(2.0 * x.re, 2.0 * x.im)
        };
    }
}

/// Fills `work.magnitudes[j] = S_j = 2 |E_j| / n` for `j < lags`, where `E` is the DFT of the
/// mean-removed squared envelope of the analytic signal of `bins` of the `n`-point `spectrum`
/// (whitened first when `whiten`). `bins` must lie in `1..n/2` (exclusive of DC and Nyquist).
pub(crate) fn squared_envelope_spectrum(
    spectrum: &[Complex<f64>],
    bins: RangeInclusive<usize>,
    whiten: bool,
    n: usize,
    lags: usize,
    plans: &mut Plans,
    work: &mut EnvelopeWork,
) -> Result<(), FeatureError> {
    let band = bins.end() + 1 - bins.start();
    // No aliasing onto lags < `lags`: m >= band + lags - 1; and the lags fit in m/2 + 1 bins.
    let m = fast_len((band + lags - 1).max(2 * lags));
    place_band(&mut work.analytic, spectrum, &bins, whiten, m);
    plans.inverse(m, &mut work.analytic, &mut work.scratch)?;

    work.squared.clear();
    work.squared.extend(work.analytic.iter().map(|z| z.norm_sqr()));
    let [sum] = super::moments::sum_by_lanes(&work.squared, |v| [v]);
    let mean = sum / m as f64;
    for e in work.squared.iter_mut() {
        *e -= mean;
    }
    plans.forward_real(m, &mut work.squared, &mut work.spectrum, &mut work.scratch)?;

    // The unnormalised inverse gives w = m z_m, so |w|^2 = m^2 |z_m|^2 and its DFT F = m^2 E_m,
    // with E_full[j] = (m / n) E_m[j]: S_j = 2 |E_full[j]| / n = 2 |F_j| / (m n^2).
    let scale = 2.0 / (m as f64 * n as f64 * n as f64);
    work.magnitudes.clear();
    work.magnitudes.extend(work.spectrum.iter().take(lags).map(|f| f.norm() * scale));
    Ok(())
}
