//! `velocity_rms`: the ISO 20816 broadband velocity by integration in the frequency domain
//! (docs/contracts.md section 12).

use rustfft::num_complex::Complex;

use super::params::Band;

/// The frequency of bin `k` of an `n`-point DFT at `rate_hz`: `k * fs / n`, in that order.
pub fn bin_hz(k: usize, rate_hz: f64, n: usize) -> f64 {
    k as f64 * rate_hz / n as f64
}

/// The velocity RMS in mm/s of a frame of `n` samples at `rate_hz` whose DFT (of the samples in
/// m/s2, mean removed, no window) is `spectrum` (bins `0..=n/2`):
/// `1000 * sqrt(sum over 0 < k < n/2 with f_k in band of 2 |X_k|^2 / (n^2 (2 pi f_k)^2)`
/// `+ [n even, f_{n/2} in band] |X_{n/2}|^2 / (n^2 (2 pi f_{n/2})^2))`, summed in increasing `k`.
/// `None` when the Nyquist frequency `fs / 2` is not above the band's top.
pub fn velocity_rms(spectrum: &[Complex<f64>], n: usize, rate_hz: f64, band: Band) -> Option<f64> {
    if rate_hz / 2.0 <= band.hi_hz || n == 0 {
        return None;
    }
    // The band's top is below Nyquist, so bin n/2 (weight 1) is never in it: every bin in the
    // band has weight 2.
    let Some(bins) = super::envelope::band_bins(band, rate_hz, n) else { return Some(0.0) };
    let nn = n as f64 * n as f64;
    let mut sum = 0.0f64;
    for (k, x) in spectrum[bins.clone()].iter().enumerate() {
        let w = 2.0 * std::f64::consts::PI * bin_hz(bins.start() + k, rate_hz, n);
        sum += 2.0 * x.norm_sqr() / (nn * (w * w));
    }
    Some(1000.0 * sum.sqrt())
}
