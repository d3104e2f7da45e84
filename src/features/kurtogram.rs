//! The `kurtogram` method's band: the band of largest spectral kurtosis in a fixed tree of bands
//! over the envelope band (module documentation, "The kurtogram").

use std::ops::RangeInclusive;

use rustfft::num_complex::Complex;

use super::envelope::fast_len;
use super::params::Band;
use super::plans::Plans;
use super::velocity::bin_hz;
use super::FeatureError;

/// The band the kurtogram chose.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The level's number of bands `c` (1, 2, 3, 4, 6, 8, 12, ...).
    pub bands: usize,
    /// The band's index `i` in its level, from 0 at the low end.
    pub index: usize,
    /// The frequencies of its first and last bin.
    pub band: Band,
    /// Its spectral kurtosis.
    pub kurtosis: f64,
    /// Its DFT bins.
    pub(crate) bins: RangeInclusive<usize>,
}

/// The tree's band counts in order: 1, then for `L = 1, 2, ...` first `2^L`, then `3 * 2^(L-1)`:
/// 1, 2, 3, 4, 6, 8, 12, 16, 24, ...
pub fn band_counts() -> impl Iterator<Item = usize> {
    std::iter::once(1).chain((1..usize::BITS - 2).flat_map(|l| [1usize << l, 3usize << (l - 1)]))
}

/// Band `i` of `c` of the bins `within`: with `k0` its first bin and `B` its count, the bins
/// `k0 + ceil(i B / c) ..= k0 + ceil((i + 1) B / c) - 1`; `None` when that is empty.
pub(crate) fn band_bins(
    within: &RangeInclusive<usize>,
    c: usize,
    i: usize,
) -> Option<RangeInclusive<usize>> {
    let (k0, b) = (*within.start(), within.end() + 1 - within.start());
    let start = k0 + (i * b).div_ceil(c);
    let end = k0 + ((i + 1) * b).div_ceil(c);
    (start < end).then(|| start..=end - 1)
}

/// Scratch buffers, reused from frame to frame.
#[derive(Debug, Default)]
pub(crate) struct KurtogramWork {
    buffer: Vec<Complex<f64>>,
    scratch: Vec<Complex<f64>>,
}

/// The spectral kurtosis of `bins` of `spectrum`: with `w` the unnormalised inverse DFT of length
/// `m = fast_len(bins)` of the band's bins placed at `0..` (zero-padded), `a_t = |w_t|^2`,
/// `mean(a^2) / mean(a)^2 - 2` (0 for a band without energy).
fn spectral_kurtosis(
    spectrum: &[Complex<f64>],
    bins: &RangeInclusive<usize>,
    plans: &mut Plans,
    work: &mut KurtogramWork,
) -> Result<f64, FeatureError> {
    let m = fast_len(bins.end() + 1 - bins.start());
    work.buffer.clear();
    work.buffer.extend_from_slice(&spectrum[bins.clone()]);
    work.buffer.resize(m, Complex::new(0.0, 0.0));
    plans.inverse(m, &mut work.buffer, &mut work.scratch)?;
    let (mut s2, mut s4) = (0.0f64, 0.0f64);
    for w in &work.buffer {
        let a = w.norm_sqr();
        s2 += a;
        s4 += a * a;
    }
    if s2 == 0.0 {
        return Ok(0.0);
    }
    let (m2, m4) = (s2 / m as f64, s4 / m as f64);
    Ok(m4 / (m2 * m2) - 2.0)
}

/// The band of largest spectral kurtosis among the tree's bands of `within` (the envelope band's
/// bins): the whole of it (`c = 1`), then every level whose bands are at least `min_bins` bins
/// wide (`B >= c min_bins`). Ties go to the earlier band (fewer bands, then lower frequency).
pub(crate) fn choose(
    spectrum: &[Complex<f64>],
    within: &RangeInclusive<usize>,
    (rate_hz, n): (f64, usize),
    min_bins: usize,
    plans: &mut Plans,
    work: &mut KurtogramWork,
) -> Result<Choice, FeatureError> {
    let b = within.end() + 1 - within.start();
    let mut best: Option<Choice> = None;
    for c in band_counts().take_while(|&c| c == 1 || b >= c.saturating_mul(min_bins.max(1))) {
        for i in 0..c {
            let Some(bins) = band_bins(within, c, i) else { continue };
            let kurtosis = spectral_kurtosis(spectrum, &bins, plans, work)?;
            if best.as_ref().is_none_or(|best| kurtosis > best.kurtosis) {
                let band =
                    Band::new(bin_hz(*bins.start(), rate_hz, n), bin_hz(*bins.end(), rate_hz, n));
                best = Some(Choice { bands: c, index: i, band, kurtosis, bins });
            }
        }
    }
    // c = 1 is the whole band, which is never empty.
    best.ok_or_else(|| FeatureError::Internal("kurtogram: an empty envelope band".into()))
}
