//! The time-domain features: `accel_rms` and `accel_peak` exactly as the frame cutter derives them
//! (src/stamp/frames.rs), and `kurtosis`.

/// `(accel_rms, accel_peak)` of `samples` in their own unit, bit for bit what `FrameCutter`
/// derives for a frame of these samples: Welford's running mean and sum of squared deviations in
/// sample order, `rms = sqrt(max(m2 / n, 0))`, `peak = max(max - mean, mean - min, 0)`; `(0, 0)`
/// for no samples.
pub fn rms_and_peak(samples: &[f64]) -> (f64, f64) {
    let mut count = 0u64;
    let mut mean = 0.0f64;
    let mut m2 = 0.0f64;
    let mut min = f64::INFINITY;
    let mut max = f64::NEG_INFINITY;
    for &x in samples {
        count += 1;
        let d = x - mean;
        mean += d / count as f64;
        m2 += d * (x - mean);
        min = min.min(x);
        max = max.max(x);
    }
    if count == 0 {
        return (0.0, 0.0);
    }
    let var = (m2 / count as f64).max(0.0);
    let peak = (max - mean).max(mean - min).max(0.0);
    (var.sqrt(), peak)
}

/// Sums of `f(v)` over `values` in a fixed order that does not hold up on one long chain of
/// additions: four interleaved partial sums (values `4i + j` into sum `j`, in order), combined as
/// `(s0 + s1) + (s2 + s3)`.
pub(crate) fn sum_by_lanes<const K: usize>(
    values: &[f64],
    f: impl Fn(f64) -> [f64; K],
) -> [f64; K] {
    let mut lanes = [[0.0f64; K]; 4];
    let chunks = values.chunks_exact(4);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            for (acc, term) in lane.iter_mut().zip(f(v)) {
                *acc += term;
            }
        }
    }
    for (lane, &v) in lanes.iter_mut().zip(rest) {
        for (acc, term) in lane.iter_mut().zip(f(v)) {
            *acc += term;
        }
    }
    std::array::from_fn(|i| (lanes[0][i] + lanes[1][i]) + (lanes[2][i] + lanes[3][i]))
}

/// The fourth standardized moment of `x` (already centred) with population moments:
/// `(sum x^4 / n) / (sum x^2 / n)^2`, both sums by [`sum_by_lanes`]; 0 when the variance is 0
/// (or `x` is empty). 3 for a Gaussian, 1.5 for a sine.
pub fn kurtosis(x: &[f64]) -> f64 {
    let [s2, s4] = sum_by_lanes(x, |v| {
        let q = v * v;
        [q, q * q]
    });
    if x.is_empty() || s2 == 0.0 {
        return 0.0;
    }
    let n = x.len() as f64;
    let m2 = s2 / n;
    (s4 / n) / (m2 * m2)
}

/// `peak / rms`, 0 when `rms` is 0.
pub fn crest_factor(rms: f64, peak: f64) -> f64 {
    if rms > 0.0 {
        peak / rms
    } else {
        0.0
    }
}
