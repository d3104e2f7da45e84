//! FFT plans, made once per length and kept: a frame of a length seen before plans nothing and,
//! with buffers that already have their capacity, allocates nothing.

use realfft::RealFftPlanner;
use rustfft::num_complex::Complex;
use rustfft::FftPlanner;

use super::FeatureError;

/// The two planners; each caches its plans by length, so asking again costs a lookup.
pub(crate) struct Plans {
    real: RealFftPlanner<f64>,
    complex: FftPlanner<f64>,
}

impl std::fmt::Debug for Plans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plans").finish_non_exhaustive()
    }
}

impl Default for Plans {
    fn default() -> Self {
        Plans { real: RealFftPlanner::new(), complex: FftPlanner::new() }
    }
}

fn fft_error(e: impl std::fmt::Display) -> FeatureError {
    FeatureError::Internal(e.to_string())
}

impl Plans {
    /// `output` = the DFT bins `0..=n/2` of the `n` values in `input` (which the transform uses
    /// as scratch: its values are gone afterwards).
    pub(crate) fn forward_real(
        &mut self,
        n: usize,
        input: &mut [f64],
        output: &mut Vec<Complex<f64>>,
        scratch: &mut Vec<Complex<f64>>,
    ) -> Result<(), FeatureError> {
        let plan = self.real.plan_fft_forward(n);
        output.clear();
        output.resize(n / 2 + 1, Complex::new(0.0, 0.0));
        if scratch.len() < plan.get_scratch_len() {
            scratch.resize(plan.get_scratch_len(), Complex::new(0.0, 0.0));
        }
        plan.process_with_scratch(input, output, scratch).map_err(fft_error)
    }

    /// In place: `buffer[t] = sum_k buffer[k] e^{+2 pi i k t / n}` (unnormalised inverse DFT).
    pub(crate) fn inverse(
        &mut self,
        n: usize,
        buffer: &mut [Complex<f64>],
        scratch: &mut Vec<Complex<f64>>,
    ) -> Result<(), FeatureError> {
        let plan = self.complex.plan_fft_inverse(n);
        if buffer.len() != n {
            return Err(FeatureError::Internal(format!(
                "inverse DFT of length {n} given {} values",
                buffer.len()
            )));
        }
        let need = plan.get_inplace_scratch_len();
        if scratch.len() < need {
            scratch.resize(need, Complex::new(0.0, 0.0));
        }
        plan.process_with_scratch(buffer, &mut scratch[..need]);
        Ok(())
    }
}
