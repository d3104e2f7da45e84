use std::f64::consts::PI;

use super::*;
use crate::synth::Rng;

/// Standard normal deviates (Box-Muller) from a seeded generator.
fn gaussian(rng: &mut Rng, n: usize, sigma: f64) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let u1 = 1.0 - rng.unit(); // (0, 1]: ln is finite
            let u2 = rng.unit();
            sigma * (-2.0 * u1.ln()).sqrt() * (2.0 * PI * u2).cos()
        })
        .collect()
}

fn sine(n: usize, fs: f64, f: f64, amplitude: f64) -> Vec<f64> {
    (0..n).map(|t| amplitude * (2.0 * PI * f * t as f64 / fs).sin()).collect()
}

fn params(unit: AccelUnit, fs: f64) -> Params {
    Params::new(unit, fs)
}

/// A 6205 bearing on a 30 Hz shaft (bpfi 162.456 Hz, bpfo 107.544 Hz, bsf 70.71 Hz, ftf 11.949 Hz).
fn with_bearing(mut p: Params, method: EnvelopeMethod) -> Params {
    p.bearing = Some(Bearing { shaft_hz: 30.0, orders: DefectOrders::SKF_6205 });
    p.envelope = method;
    p
}

fn velocity(samples: &[f64], p: &Params) -> Option<f64> {
    Extractor::new().extract(samples, p).unwrap().velocity_rms
}

/// `A / (2 pi f) / sqrt(2)` in mm/s for a sine of amplitude `A` m/s2 at `f` Hz.
fn sine_velocity(amplitude_ms2: f64, f: f64) -> f64 {
    amplitude_ms2 / (2.0 * PI * f) / 2f64.sqrt() * 1000.0
}

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

#[test]
fn a_sine_on_a_bin_gives_its_exact_velocity() {
    // 160 Hz at 3200 Hz, one second: bin 160 exactly.
    let p = params(AccelUnit::Ms2, 3200.0);
    let v = velocity(&sine(3200, 3200.0, 160.0, 2.0), &p).unwrap();
    assert!(rel(v, sine_velocity(2.0, 160.0)) < 1e-12, "{v} vs {}", sine_velocity(2.0, 160.0));
    // The same sine in g: 9.80665 times the m/s2 amplitude.
    let p = params(AccelUnit::G, 12000.0);
    let v = velocity(&sine(12000, 12000.0, 50.0, 0.5), &p).unwrap();
    let want = sine_velocity(0.5 * STANDARD_GRAVITY, 50.0);
    assert!(rel(v, want) < 1e-12, "{v} vs {want}");
}

#[test]
fn a_sine_outside_the_band_gives_about_zero() {
    let p = params(AccelUnit::Ms2, 3200.0);
    let inside = velocity(&sine(3200, 3200.0, 160.0, 1.0), &p).unwrap();
    for f in [5.0, 1200.0] {
        let v = velocity(&sine(3200, 3200.0, f, 1.0), &p).unwrap();
        assert!(v < 1e-9 * inside, "{f} Hz: {v} mm/s against {inside} in band");
    }
    // The 2-1000 Hz band of a slow machine takes the 5 Hz sine.
    let slow = Params { velocity_band: Band::iso_for_rpm(Some(300.0)), ..p };
    let v = velocity(&sine(3200, 3200.0, 5.0, 1.0), &slow).unwrap();
    assert!(rel(v, sine_velocity(1.0, 5.0)) < 1e-12);
}

#[test]
fn the_band_edges_are_included() {
    let samples = sine(3200, 3200.0, 160.0, 1.0);
    let at = |lo: f64, hi: f64| {
        let p = Params { velocity_band: Band::new(lo, hi), ..params(AccelUnit::Ms2, 3200.0) };
        velocity(&samples, &p).unwrap()
    };
    let full = sine_velocity(1.0, 160.0);
    assert!(rel(at(10.0, 160.0), full) < 1e-12, "top edge included");
    assert!(rel(at(160.0, 1000.0), full) < 1e-12, "bottom edge included");
    assert!(at(10.0, 159.999) < 1e-9 * full);
    assert!(at(160.001, 1000.0) < 1e-9 * full);
}

/// The velocity formula evaluated with a plain O(n^2) DFT, for checking the FFT path.
fn velocity_by_definition(x_ms2: &[f64], fs: f64, band: Band) -> f64 {
    let n = x_ms2.len();
    let mean = x_ms2.iter().sum::<f64>() / n as f64;
    let mut sum = 0.0;
    for k in 1..=n / 2 {
        let f = k as f64 * fs / n as f64;
        if !band.contains(f) {
            continue;
        }
        let (mut re, mut im) = (0.0, 0.0);
        for (t, x) in x_ms2.iter().enumerate() {
            let a = -2.0 * PI * (k * t % n) as f64 / n as f64;
            re += (x - mean) * a.cos();
            im += (x - mean) * a.sin();
        }
        let weight = if 2 * k == n { 1.0 } else { 2.0 };
        sum += weight * (re * re + im * im) / ((n * n) as f64 * (2.0 * PI * f).powi(2));
    }
    1000.0 * sum.sqrt()
}

#[test]
fn off_bin_leakage_is_what_the_formula_says() {
    // 101 Hz in bins of 2 Hz: half a bin off, energy leaks into every bin.
    let fs = 2200.0;
    let n = 1100;
    let samples = sine(n, fs, 101.0, 1.0);
    let p = params(AccelUnit::Ms2, fs);
    let got = velocity(&samples, &p).unwrap();
    let want = velocity_by_definition(&samples, fs, Band::ISO);
    assert!(rel(got, want) < 1e-9, "{got} vs the plain DFT's {want}");
    // Leakage moves some energy out of the band's weighting but stays close to the tone's value.
    assert!(rel(got, sine_velocity(1.0, 101.0)) < 0.05, "{got}");
    // An odd frame length has no Nyquist bin.
    let samples = sine(1099, fs, 101.0, 1.0);
    let got = velocity(&samples, &p).unwrap();
    assert!(rel(got, velocity_by_definition(&samples, fs, Band::ISO)) < 1e-9);
}

#[test]
fn velocity_needs_nyquist_above_the_band_top() {
    let samples = vec![0.1; 1600];
    assert_eq!(velocity(&samples, &params(AccelUnit::G, 1600.0)), None);
    assert_eq!(
        velocity(&samples[..1000], &params(AccelUnit::G, 2000.0)),
        None,
        "1000 Hz is not above"
    );
    assert_eq!(velocity(&samples, &params(AccelUnit::G, 2001.0)), Some(0.0), "a constant has none");
}

#[test]
fn moments_of_known_signals() {
    let mut rng = Rng::new(7);
    let f =
        Extractor::new().extract(&gaussian(&mut rng, 200_000, 0.3), &params(AccelUnit::G, 3200.0));
    let f = f.unwrap();
    assert!((f.kurtosis - 3.0).abs() < 0.05, "Gaussian kurtosis {}", f.kurtosis);
    assert!(rel(f.accel_rms, 0.3) < 0.01);

    let f =
        Extractor::new().extract(&sine(3200, 3200.0, 160.0, 2.0), &params(AccelUnit::G, 3200.0));
    let f = f.unwrap();
    assert!((f.kurtosis - 1.5).abs() < 1e-9, "sine kurtosis {}", f.kurtosis);
    assert!((f.crest_factor - 2f64.sqrt()).abs() < 1e-9, "sine crest factor {}", f.crest_factor);

    let f = Extractor::new().extract(&[0.25; 100], &params(AccelUnit::G, 3200.0)).unwrap();
    assert_eq!((f.accel_rms, f.accel_peak, f.crest_factor, f.kurtosis), (0.0, 0.0, 0.0, 0.0));
    assert_eq!(f.velocity_rms, Some(0.0));
}

#[test]
fn rms_and_peak_use_the_cutters_formula() {
    assert_eq!(rms_and_peak(&[]), (0.0, 0.0));
    assert_eq!(rms_and_peak(&[3.0]), (0.0, 0.0));
    let (rms, peak) = rms_and_peak(&[1.0, 2.0, 3.0, 6.0]);
    assert!((rms - 3.5f64.sqrt()).abs() < 1e-15, "{rms}");
    assert_eq!(peak, 3.0);
}

/// An amplitude-modulated carrier: `(1 + depth cos(2 pi fm t)) sin(2 pi fc t)` plus white noise.
fn am(fs: f64, n: usize, fc: f64, fm: f64, depth: f64, noise: f64, seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    let w = gaussian(&mut rng, n, noise);
    (0..n)
        .map(|i| {
            let t = i as f64 / fs;
            (1.0 + depth * (2.0 * PI * fm * t).cos()) * (2.0 * PI * fc * t).sin() + w[i]
        })
        .collect()
}

fn indicator_values(f: &Features) -> [f64; 4] {
    let e = f.envelope.as_ref().expect("an envelope");
    Defect::ALL.map(|d| e.get(d).map_or(f64::NAN, |i| i.value))
}

/// Checks that `samples` light `env_bpfi` (30 Hz shaft) clearly (above 5, where noise stays
/// below 4) and leave the others about 1.
fn assert_lights_bpfi_only(samples: &[f64], method: EnvelopeMethod) {
    let bpfi = 30.0 * DefectOrders::SKF_6205.bpfi;
    let p = with_bearing(params(AccelUnit::Ms2, 12000.0), method);
    let f = Extractor::new().extract(samples, &p).unwrap();
    let [bpfo, bpfi_value, bsf, ftf] = indicator_values(&f);
    assert!(bpfi_value > 5.0, "{method}: env_bpfi {bpfi_value}");
    for (name, v) in [("bpfo", bpfo), ("bsf", bsf), ("ftf", ftf)] {
        assert!((0.4..2.5).contains(&v), "{method}: env_{name} {v} is not about 1");
    }
    let i = f.envelope.as_ref().unwrap().get(Defect::Bpfi).unwrap();
    assert!((i.peak_hz - bpfi).abs() <= 1.0, "{method}: peak at {} Hz", i.peak_hz);
    assert!((i.defect_hz - bpfi).abs() < 1e-9);
}

#[test]
fn a_carrier_modulated_at_bpfi_lights_env_bpfi_only() {
    // A 3.5 kHz tone, amplitude-modulated at bpfi (162.456 Hz, off-bin), in white noise. Only
    // `fixed` applies: whitening flattens the tone's three lines into the noise by design, and a
    // steady tone is not impulsive, so the kurtogram rightly prefers other bands.
    let bpfi = 30.0 * DefectOrders::SKF_6205.bpfi;
    assert_lights_bpfi_only(&am(12000.0, 12000, 3500.0, bpfi, 0.5, 0.5, 1), EnvelopeMethod::Fixed);
}

#[test]
fn noise_modulated_at_bpfi_lights_env_bpfi_for_every_method() {
    // What a bearing's impacts look like to the envelope: a random carrier whose power pulses at
    // bpfi, plus noise that does not pulse.
    let bpfi = 30.0 * DefectOrders::SKF_6205.bpfi;
    let mut rng = Rng::new(9);
    let (carrier, floor) = (gaussian(&mut rng, 12000, 1.0), gaussian(&mut rng, 12000, 0.5));
    let samples: Vec<f64> = (0..12000)
        .map(|i| {
            let t = i as f64 / 12000.0;
            (1.0 + (2.0 * PI * bpfi * t).cos()) * carrier[i] + floor[i]
        })
        .collect();
    for method in EnvelopeMethod::ALL {
        assert_lights_bpfi_only(&samples, method);
    }
}

#[test]
fn the_squared_envelope_amplitude_is_that_of_the_modulation() {
    // (1 + a cos) carrier, on bins, no noise: the squared envelope is 1 + 2a cos + a^2 cos^2, so
    // its component at fm has amplitude 2a (m/s2)^2.
    let (a, fm) = (0.3, 160.0);
    let samples = am(12000.0, 12000, 3000.0, fm, a, 0.0, 1);
    let mut p = with_bearing(params(AccelUnit::Ms2, 12000.0), EnvelopeMethod::Fixed);
    p.bearing = Some(Bearing { shaft_hz: fm / DefectOrders::SKF_6205.bpfi, ..p.bearing.unwrap() });
    let f = Extractor::new().extract(&samples, &p).unwrap();
    let i = *f.envelope.as_ref().unwrap().get(Defect::Bpfi).unwrap();
    assert_eq!(i.peak_hz, fm);
    assert!(rel(i.peak, 2.0 * a) < 1e-9, "peak {}", i.peak);
}

#[test]
fn white_noise_gives_every_indicator_about_one() {
    let mut rng = Rng::new(3);
    for method in EnvelopeMethod::ALL {
        let p = with_bearing(params(AccelUnit::G, 12000.0), method);
        let mut ex = Extractor::new();
        let mut sums = [0.0; 4];
        let frames = 24;
        for _ in 0..frames {
            let f = ex.extract(&gaussian(&mut rng, 12000, 0.2), &p).unwrap();
            for (s, v) in sums.iter_mut().zip(indicator_values(&f)) {
                assert!((0.2..4.0).contains(&v), "{method}: an indicator of {v} on noise");
                *s += v;
            }
        }
        for (d, s) in Defect::ALL.iter().zip(sums) {
            let mean = s / frames as f64;
            assert!(
                (0.75..1.35).contains(&mean),
                "{method}: {} averages {mean} on noise",
                d.feature()
            );
        }
    }
}

/// The squared envelope spectrum by the definition: full-length analytic signal by a plain
/// inverse DFT, squared magnitude, mean removed, plain DFT, `2 |E_j| / n`.
fn envelope_by_definition(
    x: &[f64],
    bins: std::ops::RangeInclusive<usize>,
    whiten: bool,
) -> Vec<f64> {
    let n = x.len();
    let dft = |k: usize| -> Complex<f64> {
        x.iter().enumerate().fold(Complex::new(0.0, 0.0), |acc, (t, v)| {
            let a = -2.0 * PI * (k * t % n) as f64 / n as f64;
            acc + Complex::new(v * a.cos(), v * a.sin())
        })
    };
    let a: Vec<(usize, Complex<f64>)> = bins
        .map(|k| {
            let xk = dft(k);
            (k, if whiten { xk / xk.norm() * 2.0 } else { xk * 2.0 })
        })
        .collect();
    let e: Vec<f64> = (0..n)
        .map(|t| {
            let z = a.iter().fold(Complex::new(0.0, 0.0), |acc, (k, ak)| {
                let ang = 2.0 * PI * (k * t % n) as f64 / n as f64;
                acc + ak * Complex::new(ang.cos(), ang.sin())
            });
            (z / n as f64).norm_sqr()
        })
        .collect();
    let mean = e.iter().sum::<f64>() / n as f64;
    (0..=n / 2)
        .map(|j| {
            let ej = e.iter().enumerate().fold(Complex::new(0.0, 0.0), |acc, (t, v)| {
                let ang = -2.0 * PI * (j * t % n) as f64 / n as f64;
                acc + Complex::new((v - mean) * ang.cos(), (v - mean) * ang.sin())
            });
            2.0 * ej.norm() / n as f64
        })
        .collect()
}

#[test]
fn the_short_envelope_transform_equals_the_full_length_definition() {
    let mut rng = Rng::new(11);
    for (n, bins, lags) in [(240, 30..=80, 41), (301, 20..=149, 60), (256, 100..=127, 50)] {
        let x = gaussian(&mut rng, n, 1.0);
        for whiten in [false, true] {
            let want = envelope_by_definition(&x, bins.clone(), whiten);
            let mut plans = Plans::default();
            let (mut spectrum, mut scratch) = (Vec::new(), Vec::new());
            plans.forward_real(n, &mut x.clone(), &mut spectrum, &mut scratch).unwrap();
            let mut work = EnvelopeWork::default();
            envelope::squared_envelope_spectrum(
                &spectrum,
                bins.clone(),
                whiten,
                n,
                lags,
                &mut plans,
                &mut work,
            )
            .unwrap();
            let scale = want.iter().copied().fold(0.0, f64::max);
            for (j, (got, want)) in work.magnitudes.iter().zip(&want).enumerate().skip(1) {
                let err = (got - want).abs() / scale;
                assert!(err < 1e-12, "n {n}, whiten {whiten}, lag {j}: {got} vs {want}");
            }
        }
    }
}

#[test]
fn fast_lengths_and_band_bins() {
    let got: Vec<usize> = [0, 1, 7, 11, 3215, 4097].map(fast_len).to_vec();
    assert_eq!(got, [1, 1, 8, 12, 3240, 4320]);
    assert_eq!(band_bins(Band::new(2000.0, 5000.0), 12000.0, 12000), Some(2000..=5000));
    assert_eq!(band_bins(Band::new(2000.5, 4999.5), 12000.0, 12000), Some(2001..=4999));
    assert_eq!(
        band_bins(Band::new(0.0, 6000.0), 12000.0, 12000),
        Some(1..=5999),
        "no DC, no Nyquist"
    );
    assert_eq!(band_bins(Band::new(0.0, 6000.0), 12000.0, 11999), Some(1..=5999));
    assert_eq!(band_bins(Band::new(10.2, 10.8), 3200.0, 3200), None);
}

#[test]
fn the_kurtogram_tree_partitions_the_envelope_band() {
    let counts: Vec<usize> = band_counts().take(9).collect();
    assert_eq!(counts, [1, 2, 3, 4, 6, 8, 12, 16, 24]);
    for within in [2000..=5000, 500..=1500, 7..=7, 10..=29] {
        for c in band_counts().take(8) {
            let mut next = *within.start();
            for i in 0..c {
                if let Some(b) = kurtogram::band_bins(&within, c, i) {
                    assert_eq!(
                        *b.start(),
                        next,
                        "{within:?}, {c} bands: band {i} starts where the last ended"
                    );
                    next = b.end() + 1;
                }
            }
            assert_eq!(next, within.end() + 1, "{within:?}: {c} bands cover it");
        }
    }
    assert_eq!(kurtogram::band_bins(&(2000..=5000), 3, 1), Some(3001..=4000));
}

#[test]
fn the_kurtogram_finds_the_band_of_the_impacts() {
    // Decaying 4.2 kHz ringing started 90 times a second, in white noise: the impulsive band is
    // the one around 4.2 kHz, and the envelope there shows the 90 Hz repetition.
    let (fs, n) = (12000.0, 12000);
    let mut rng = Rng::new(5);
    let mut x = gaussian(&mut rng, n, 0.5);
    let period = fs / 90.0;
    for (i, v) in x.iter_mut().enumerate() {
        let since = (i as f64) % period / fs;
        *v += 3.0 * (-since * 1500.0).exp() * (2.0 * PI * 4200.0 * since).sin();
    }
    let mut p = with_bearing(params(AccelUnit::Ms2, fs), EnvelopeMethod::Kurtogram);
    p.bearing =
        Some(Bearing { shaft_hz: 90.0 / DefectOrders::SKF_6205.bpfo, ..p.bearing.unwrap() });
    let f = Extractor::new().extract(&x, &p).unwrap();
    let e = f.envelope.unwrap();
    let choice = e.kurtogram.clone().unwrap();
    assert!(
        choice.band.contains(4200.0),
        "chose {} ({} bands, SK {})",
        choice.band,
        choice.bands,
        choice.kurtosis
    );
    assert!(choice.kurtosis > 1.0, "SK {}", choice.kurtosis);
    assert_eq!(e.band, choice.band);
    assert!(e.get(Defect::Bpfo).unwrap().value > 10.0);
}

#[test]
fn a_silent_frame_gives_no_indicator_and_the_first_band() {
    let p = with_bearing(params(AccelUnit::G, 12000.0), EnvelopeMethod::Kurtogram);
    let f = Extractor::new().extract(&[0.0; 12000], &p).unwrap();
    let e = f.envelope.unwrap();
    let choice = e.kurtogram.clone().unwrap();
    assert_eq!(
        (choice.bands, choice.index, choice.kurtosis),
        (1, 0, 0.0),
        "ties go to the first band"
    );
    assert_eq!(e.indicators, [None; 4], "a floor of 0 gives no indicator");
}

#[test]
fn defects_outside_the_spectrum_and_bands_that_do_not_fit_give_nothing() {
    let mut p = with_bearing(params(AccelUnit::G, 3200.0), EnvelopeMethod::Fixed);
    let x = am(3200.0, 3200, 1000.0, 162.0, 0.5, 0.2, 2);
    // The default 2-5 kHz band is above this frame's Nyquist frequency.
    assert_eq!(Extractor::new().extract(&x, &p).unwrap().envelope, None);
    p.envelope_band = Band::new(500.0, 1500.0);
    let e = Extractor::new().extract(&x, &p).unwrap().envelope.unwrap();
    assert!(e.indicators.iter().all(Option::is_some));
    // A shaft so fast that bpfi and its neighbourhood pass 1600 Hz; ftf still fits.
    p.bearing = Some(Bearing { shaft_hz: 250.0, ..p.bearing.unwrap() });
    let e = Extractor::new().extract(&x, &p).unwrap().envelope.unwrap();
    assert!(e.get(Defect::Bpfi).is_none() && e.get(Defect::Ftf).is_some());
    // A shaft so slow that ftf's window would reach bin 0: 0.2 Hz x 0.3983 is less than a bin.
    p.bearing = Some(Bearing { shaft_hz: 0.2, ..p.bearing.unwrap() });
    let e = Extractor::new().extract(&x, &p).unwrap().envelope.unwrap();
    assert!(e.get(Defect::Ftf).is_none());
    // A short frame: a 1-sample frame has moments but no spectrum worth the name.
    let f = Extractor::new().extract(&x[..1], &p).unwrap();
    assert_eq!(f.velocity_rms, Some(0.0));
}

#[test]
fn bad_input_is_an_error_that_names_it() {
    let mut ex = Extractor::new();
    let p = params(AccelUnit::G, 3200.0);
    let err = |r: Result<Features, FeatureError>| r.unwrap_err().to_string();
    assert_eq!(err(ex.extract(&[], &p)), "a frame without samples has no features");
    assert_eq!(err(ex.extract(&[0.0, f64::NAN], &p)), "sample 1 is not finite (NaN)");
    assert!(err(ex.extract(&[0.0], &params(AccelUnit::G, 0.0))).contains("sample rate 0 Hz"));
    let bad_band = Params { velocity_band: Band::new(1000.0, 10.0), ..p.clone() };
    assert!(err(ex.extract(&[0.0], &bad_band)).contains("velocity band 1000-10 Hz"));
    let mut bad_bearing = with_bearing(p.clone(), EnvelopeMethod::Fixed);
    bad_bearing.bearing = Some(Bearing { shaft_hz: -1.0, ..bad_bearing.bearing.unwrap() });
    assert!(err(ex.extract(&[0.0], &bad_bearing)).contains("shaft speed (Hz) -1"));
    assert_eq!("kurtogram".parse::<EnvelopeMethod>(), Ok(EnvelopeMethod::Kurtogram));
    assert!("wavelet".parse::<EnvelopeMethod>().unwrap_err().contains("\"wavelet\""));
}

#[test]
fn features_by_name() {
    let p = with_bearing(params(AccelUnit::Ms2, 12000.0), EnvelopeMethod::Fixed);
    let f = Extractor::new().extract(&am(12000.0, 12000, 3000.0, 160.0, 0.3, 0.1, 4), &p).unwrap();
    let names: Vec<&str> = f.each().iter().filter(|(_, v)| v.is_some()).map(|(n, _)| *n).collect();
    assert_eq!(names, FEATURE_NAMES);
    assert_eq!(f.get("velocity_rms"), f.velocity_rms);
    assert_eq!(f.get("env_ftf"), f.envelope.as_ref().unwrap().get(Defect::Ftf).map(|i| i.value));
    assert_eq!(f.get("nope"), None);
    let f = Extractor::new().extract(&[0.1, 0.2], &params(AccelUnit::G, 3200.0)).unwrap();
    assert_eq!(f.get("env_bpfi"), None);
}
