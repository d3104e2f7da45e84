//! The spread of a run of readings, as `linegate probe` reports it: mean, RMS about the mean (as
//! `accel_rms` is computed: the mean removed) and the largest deviation from the mean.

use serde::Serialize;

/// Mean, RMS about the mean and peak deviation of `n` readings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub n: usize,
    pub mean: f64,
    pub rms: f64,
    pub peak: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let rms = (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        let peak = values.iter().map(|x| (x - mean).abs()).fold(0.0, f64::max);
        Some(Spread { n: values.len(), mean, rms, peak })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_rms_about_the_mean_and_peak_deviation() {
        assert_eq!(Spread::of(&[]), None);
        let s = Spread::of(&[1.0, 1.5, 1.0, 0.5]);
        assert_eq!(s, Some(Spread { n: 4, mean: 1.0, rms: 0.125f64.sqrt(), peak: 0.5 }));
    }
}
