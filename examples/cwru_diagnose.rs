//! What the gateway's envelope indicators name on the CWRU bearing recordings
//! (docs/diagnostics.md):
//!
//! `cargo run --example cwru_diagnose -- [DIR] [--threshold T] [--band LO-HI] [--values] [--sweep]`
//!
//! DIR holds the `.f32` recordings and `manifest.json` (default `../shared/data/cwru`; the data is
//! not in the repository). Every 12 kHz drive-end record is cut into 1-s frames from its start
//! (a trailing partial second is dropped), and every frame's indicators are computed with each
//! envelope method (`linegate::features`); the same again with the records resampled to 3200 Hz
//! and quantised to 3.9 mg, what an ADXL345 on SPI delivers. Naming rule: a frame names the
//! defect of the largest of `env_bpfo`, `env_bpfi`, `env_bsf` when it is at least T (default 3),
//! else nothing; `env_ftf` names nothing by itself.
//! Prints Markdown: per record and method, what was named in how many frames, and per frame;
//! then the indicators on Gaussian noise. `--values` adds every frame's four indicators;
//! `--band` sets the 12 kHz envelope band (default 2000-5000 Hz). `--sweep` prints instead, per
//! record, in how many frames each 1 kHz envelope band (500 Hz apart, 500-1500 to 4500-5500 Hz)
//! names the record's defect, with `fixed` and `whitened`: whether any band choice would.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use linegate::features::{
    AccelUnit, Band, Bearing, Defect, DefectOrders, EnvelopeMethod, Extractor, Params,
};
use linegate::synth::Rng;
use realfft::RealFftPlanner;
use rustfft::num_complex::Complex;

/// The 12 kHz drive-end records at 0 hp: (file, CWRU record, what is wrong with the bearing).
const RECORDS: [(&str, u32, Option<Defect>, &str); 10] = [
    ("105_ir007_0hp_12k.f32", 105, Some(Defect::Bpfi), "inner race 0.007 in"),
    ("169_ir014_0hp_12k.f32", 169, Some(Defect::Bpfi), "inner race 0.014 in"),
    ("209_ir021_0hp_12k.f32", 209, Some(Defect::Bpfi), "inner race 0.021 in"),
    ("130_or007at6_0hp_12k.f32", 130, Some(Defect::Bpfo), "outer race 0.007 in @6:00"),
    ("197_or014at6_0hp_12k.f32", 197, Some(Defect::Bpfo), "outer race 0.014 in @6:00"),
    ("234_or021at6_0hp_12k.f32", 234, Some(Defect::Bpfo), "outer race 0.021 in @6:00"),
    ("118_b007_0hp_12k.f32", 118, Some(Defect::Bsf), "ball 0.007 in"),
    ("185_b014_0hp_12k.f32", 185, Some(Defect::Bsf), "ball 0.014 in"),
    ("222_b021_0hp_12k.f32", 222, Some(Defect::Bsf), "ball 0.021 in"),
    ("097_normal_0hp_12k_decimated.f32", 97, None, "healthy (48 kHz record decimated to 12 kHz)"),
];

/// The rate of an ADXL345 on SPI, its envelope band (under its 1600 Hz Nyquist frequency), and
/// its resolution in g (full-resolution mode: 3.9 mg per LSB).
const ADXL_RATE: usize = 3200;
const ADXL_BAND: Band = Band { lo_hz: 500.0, hi_hz: 1500.0 };
const ADXL_LSB_G: f64 = 0.0039;

struct Options {
    dir: PathBuf,
    threshold: f64,
    values: bool,
    sweep: bool,
    /// The envelope band at 12 kHz.
    band: Band,
}

fn options() -> Options {
    let mut o = Options {
        dir: PathBuf::from("../shared/data/cwru"),
        threshold: 3.0,
        values: false,
        sweep: false,
        band: Band::new(2000.0, 5000.0),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--threshold" => {
                o.threshold = args.next().and_then(|t| t.parse().ok()).expect("--threshold T")
            }
            "--values" => o.values = true,
            "--sweep" => o.sweep = true,
            "--band" => {
                let text = args.next().expect("--band LO-HI (Hz)");
                let (lo, hi) = text.split_once('-').expect("--band LO-HI (Hz)");
                o.band = Band::new(lo.parse().expect("LO in Hz"), hi.parse().expect("HI in Hz"));
            }
            _ if a.starts_with("--") => panic!("unknown option {a}"),
            _ => o.dir = PathBuf::from(a),
        }
    }
    o
}

fn read_f32(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64).collect()
}

/// The rpm the manifest records for `file`.
fn rpm(manifest: &serde_json::Value, file: &str) -> f64 {
    let files = manifest["files"].as_array().expect("manifest.json: files");
    let entry = files.iter().find(|f| f["file"] == file).expect("file in manifest.json");
    entry["rpm"].as_f64().expect("rpm")
}

/// `x` at 12 kHz resampled to 3200 Hz by the DFT (an ideal low-pass below 1600 Hz) and quantised
/// to the ADXL345's resolution. Uses the first multiple of 15 samples (15 samples at 12 kHz last
/// as long as 4 at 3.2 kHz).
fn as_adxl345(x: &[f64]) -> Vec<f64> {
    let n = x.len() - x.len() % 15;
    let m = n / 15 * 4;
    let mut planner = RealFftPlanner::<f64>::new();
    let mut input = x[..n].to_vec();
    let mut spectrum = vec![Complex::new(0.0, 0.0); n / 2 + 1];
    planner.plan_fft_forward(n).process(&mut input, &mut spectrum).unwrap();
    let mut kept = vec![Complex::new(0.0, 0.0); m / 2 + 1];
    kept[..m / 2].copy_from_slice(&spectrum[..m / 2]); // the 1600 Hz bin itself is dropped
    kept[0].im = 0.0;
    let mut y = vec![0.0; m];
    planner.plan_fft_inverse(m).process(&mut kept, &mut y).unwrap();
    y.iter().map(|v| (v / n as f64 / ADXL_LSB_G).round() * ADXL_LSB_G).collect()
}

/// What a frame names: outer race, inner race or ball, by the largest of `env_bpfo`, `env_bpfi`
/// and `env_bsf` when that is at least `threshold`. `env_ftf` names nothing (docs/diagnostics.md:
/// in 1-s frames its window also holds the line race faults put at 0.415 x shaft speed).
fn named(values: &[Option<f64>; 4], threshold: f64) -> Option<Defect> {
    let mut best: Option<(Defect, f64)> = None;
    for (d, v) in Defect::ALL.iter().zip(values).take(3) {
        if let Some(v) = *v {
            if v >= threshold && best.is_none_or(|(_, b)| v > b) {
                best = Some((*d, v));
            }
        }
    }
    best.map(|(d, _)| d)
}

fn letter(d: Option<Defect>) -> char {
    match d {
        Some(Defect::Bpfo) => 'O',
        Some(Defect::Bpfi) => 'I',
        Some(Defect::Bsf) => 'B',
        Some(Defect::Ftf) | None => '·',
    }
}

/// One frame's indicators, the band its envelope was taken in and that band's spectral kurtosis
/// (kurtogram).
struct FrameResult {
    values: [Option<f64>; 4],
    band: Band,
    kurtosis: Option<f64>,
}

/// Per record and method: every frame's result.
type Results = Vec<(usize, BTreeMap<EnvelopeMethod, Vec<FrameResult>>)>;

fn analyse(records: &[(Vec<f64>, f64)], rate: usize, band: Band) -> Results {
    let mut ex = Extractor::new();
    let mut out = Vec::new();
    for (r, (samples, rpm)) in records.iter().enumerate() {
        let mut per_method = BTreeMap::new();
        for method in EnvelopeMethod::ALL {
            let params = Params {
                bearing: Some(Bearing { shaft_hz: rpm / 60.0, orders: DefectOrders::SKF_6205 }),
                envelope_band: band,
                envelope: method,
                ..Params::new(AccelUnit::G, rate as f64)
            };
            let frames: Vec<FrameResult> = samples
                .chunks_exact(rate)
                .map(|frame| {
                    let f = ex.extract(frame, &params).expect("features");
                    let env = f.envelope.expect("an envelope");
                    let values = Defect::ALL.map(|d| env.get(d).map(|i| i.value));
                    let kurtosis = env.kurtogram.map(|c| c.kurtosis);
                    FrameResult { values, band: env.band, kurtosis }
                })
                .collect();
            per_method.insert(method, frames);
        }
        out.push((r, per_method));
    }
    out
}

fn summary(frames: &[FrameResult], threshold: f64) -> String {
    let mut counts: BTreeMap<Option<Defect>, usize> = BTreeMap::new();
    for f in frames {
        *counts.entry(named(&f.values, threshold)).or_default() += 1;
    }
    let mut v: Vec<(Option<Defect>, usize)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let parts: Vec<String> = v
        .iter()
        .map(|(d, c)| format!("{} {c}/{}", d.map_or("nothing", Defect::part), frames.len()))
        .collect();
    parts.join(", ")
}

fn print_tables(title: &str, results: &Results, threshold: f64, values: bool) {
    println!("### {title}\n");
    println!("| record | condition | expected | fixed | whitened | kurtogram |");
    println!("|---|---|---|---|---|---|");
    for (r, per_method) in results {
        let (_, number, expected, condition) = RECORDS[*r];
        let cells: Vec<String> =
            EnvelopeMethod::ALL.iter().map(|m| summary(&per_method[m], threshold)).collect();
        let expected = expected.map_or("nothing", Defect::part);
        println!("| {number} | {condition} | {expected} | {} |", cells.join(" | "));
    }
    println!("\nPer frame (O outer race, I inner race, B ball, · nothing):\n");
    println!("| record | fixed | whitened | kurtogram |");
    println!("|---|---|---|---|");
    for (r, per_method) in results {
        let cells: Vec<String> = EnvelopeMethod::ALL
            .iter()
            .map(|m| {
                format!(
                    "`{}`",
                    per_method[m]
                        .iter()
                        .map(|f| letter(named(&f.values, threshold)))
                        .collect::<String>()
                )
            })
            .collect();
        println!("| {} | {} |", RECORDS[*r].1, cells.join(" | "));
    }
    println!();
    if values {
        println!("Indicators per frame (bpfo / bpfi / bsf / ftf; the kurtogram's band, its SK):\n");
        for (r, per_method) in results {
            for m in EnvelopeMethod::ALL {
                let frames: Vec<String> = per_method[&m]
                    .iter()
                    .map(|f| {
                        let v: Vec<String> = f
                            .values
                            .iter()
                            .map(|v| v.map_or("-".into(), |v| format!("{v:.1}")))
                            .collect();
                        match f.kurtosis {
                            Some(sk) => format!("{} ({}, SK {sk:.1})", v.join("/"), f.band),
                            None => v.join("/"),
                        }
                    })
                    .collect();
                println!("- {} {m}: {}", RECORDS[*r].1, frames.join(", "));
            }
        }
        println!();
    }
}

/// Per record, in how many frames each 1 kHz band names the record's defect (for the healthy
/// record: names anything), with the fixed and the whitened envelope.
fn print_sweep(records: &[(Vec<f64>, f64)], threshold: f64) {
    let bands: Vec<Band> =
        (1..=9).map(|i| Band::new(f64::from(i) * 500.0, f64::from(i) * 500.0 + 1000.0)).collect();
    let head: Vec<String> = bands.iter().map(|b| format!("{}-{}", b.lo_hz, b.hi_hz)).collect();
    println!("### 12 kHz, every 1 kHz band\n");
    println!("Frames naming the record's defect (97: naming anything), fixed / whitened:\n");
    println!("| record | expected | {} |", head.join(" | "));
    println!("|---|---|{}", "---|".repeat(bands.len()));
    let mut ex = Extractor::new();
    for ((samples, rpm), (_, number, expected, _)) in records.iter().zip(RECORDS) {
        let cells: Vec<String> = bands
            .iter()
            .map(|band| {
                let mut count = |method| {
                    let params = Params {
                        bearing: Some(Bearing {
                            shaft_hz: rpm / 60.0,
                            orders: DefectOrders::SKF_6205,
                        }),
                        envelope_band: *band,
                        envelope: method,
                        ..Params::new(AccelUnit::G, 12000.0)
                    };
                    let frames = samples.chunks_exact(12000);
                    let n = frames.len();
                    let hits = frames
                        .filter(|frame| {
                            let env = ex.extract(frame, &params).expect("features").envelope;
                            let env = env.expect("an envelope");
                            let got =
                                named(&Defect::ALL.map(|d| env.get(d).map(|i| i.value)), threshold);
                            match expected {
                                Some(_) => got == expected,
                                None => got.is_some(),
                            }
                        })
                        .count();
                    (hits, n)
                };
                let ((f, n), (w, _)) =
                    (count(EnvelopeMethod::Fixed), count(EnvelopeMethod::Whitened));
                format!("{f} / {w} of {n}")
            })
            .collect();
        let expected = expected.map_or("nothing", Defect::part);
        println!("| {number} | {expected} | {} |", cells.join(" | "));
    }
    println!();
}

/// Gaussian noise (deterministic, Box-Muller) of `n` samples.
fn noise(rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let (u1, u2) = (1.0 - rng.unit(), rng.unit());
            0.1 * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        })
        .collect()
}

/// The indicators on `NOISE_FRAMES` frames of Gaussian noise per rate and method: their median,
/// 99th percentile and largest value, and how many frames the naming rule names.
fn print_noise(threshold: f64) {
    const NOISE_FRAMES: usize = 400;
    println!("### Gaussian noise\n");
    println!("{NOISE_FRAMES} frames of Gaussian noise per rate; all four indicators pooled.\n");
    println!("| rate, band | method | median | 99th percentile | largest | frames named |");
    println!("|---|---|---|---|---|---|");
    let mut ex = Extractor::new();
    for (rate, band) in [(12000usize, Band::new(2000.0, 5000.0)), (ADXL_RATE, ADXL_BAND)] {
        let mut rng = Rng::new(rate as u64);
        let frames: Vec<Vec<f64>> = (0..NOISE_FRAMES).map(|_| noise(&mut rng, rate)).collect();
        for method in EnvelopeMethod::ALL {
            let params = Params {
                bearing: Some(Bearing { shaft_hz: 29.93, orders: DefectOrders::SKF_6205 }),
                envelope_band: band,
                envelope: method,
                ..Params::new(AccelUnit::G, rate as f64)
            };
            let mut all = Vec::new();
            let mut named_frames = 0;
            for frame in &frames {
                let env = ex.extract(frame, &params).expect("features").envelope.expect("envelope");
                let values = Defect::ALL.map(|d| env.get(d).map(|i| i.value));
                named_frames += usize::from(named(&values, threshold).is_some());
                all.extend(values.into_iter().flatten());
            }
            all.sort_by(f64::total_cmp);
            let at = |q: f64| all[((all.len() - 1) as f64 * q).round() as usize];
            println!(
                "| {rate} Hz, {band} | {method} | {:.2} | {:.2} | {:.2} | {named_frames} |",
                at(0.5),
                at(0.99),
                at(1.0)
            );
        }
    }
    println!();
}

fn main() {
    let o = options();
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(o.dir.join("manifest.json")).expect("manifest.json in the data directory"),
    )
    .expect("manifest.json is JSON");
    let records: Vec<(Vec<f64>, f64)> = RECORDS
        .iter()
        .map(|(file, ..)| (read_f32(&o.dir.join(file)), rpm(&manifest, file)))
        .collect();
    if o.sweep {
        print_sweep(&records, o.threshold);
        return;
    }
    let fixed_band = o.band;
    println!(
        "Naming rule: a frame names the defect of the largest of env_bpfo, env_bpfi, env_bsf when \
         it is at least {}; env_ftf names nothing by itself.\n",
        o.threshold
    );
    let at_12k = analyse(&records, 12000, fixed_band);
    print_tables(&format!("12 kHz, envelope band {fixed_band}"), &at_12k, o.threshold, o.values);
    let adxl: Vec<(Vec<f64>, f64)> = records.iter().map(|(x, rpm)| (as_adxl345(x), *rpm)).collect();
    let at_3200 = analyse(&adxl, ADXL_RATE, ADXL_BAND);
    let title =
        format!("3200 Hz (ADXL345 on SPI: resampled, 3.9 mg steps), envelope band {ADXL_BAND}");
    print_tables(&title, &at_3200, o.threshold, o.values);
    print_noise(o.threshold);
}
