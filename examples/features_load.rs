//! Runs one frame's feature path over and over (for `valgrind --tool=callgrind`, which counts
//! instructions: `benches/instructions.sh` takes the difference of two runs of different
//! lengths, so start-up and the FFT plans cancel out).
//! `cargo run --release --example features_load -- RATE FRAMES MODE`: a one-second frame at RATE
//! Hz (`linegate::synth::vibration_frame`) through MODE, FRAMES times:
//!
//! - `cutter`: the frame cutter's running RMS/peak pass alone, no spectral feature;
//! - `velocity`: the moments and `velocity_rms`, no bearing (no envelope);
//! - `fixed`, `whitened`, `kurtogram`: every feature, the envelope by that method (the 6205
//!   bearing at 29.95 Hz; envelope band 500-1500 Hz at 3200 Hz, 2-5 kHz above).
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::hint::black_box;

use linegate::features::{
    rms_and_peak, AccelUnit, Band, Bearing, DefectOrders, EnvelopeMethod, Extractor, Params,
};
use linegate::synth::vibration_frame;

fn main() {
    let arg = |i: usize| {
        std::env::args().nth(i).unwrap_or_else(|| {
            panic!("usage: features_load RATE FRAMES cutter|velocity|fixed|whitened|kurtogram")
        })
    };
    let rate: usize = arg(1).parse().unwrap();
    let frames: usize = arg(2).parse().unwrap();
    let mode = arg(3);
    let samples = vibration_frame(rate);
    let velocity = Params::new(AccelUnit::G, rate as f64);
    let band = if rate <= 3200 { Band::new(500.0, 1500.0) } else { Band::new(2000.0, 5000.0) };
    let method = match mode.as_str() {
        "cutter" | "velocity" => None,
        "fixed" => Some(EnvelopeMethod::Fixed),
        "whitened" => Some(EnvelopeMethod::Whitened),
        "kurtogram" => Some(EnvelopeMethod::Kurtogram),
        other => panic!("unknown mode {other:?}"),
    };
    let params = match method {
        None => velocity,
        Some(envelope) => Params {
            bearing: Some(Bearing { shaft_hz: 29.95, orders: DefectOrders::SKF_6205 }),
            envelope_band: band,
            envelope,
            ..velocity
        },
    };
    let mut ex = Extractor::new();
    let mut check = 0.0;
    for _ in 0..frames {
        if mode == "cutter" {
            check += black_box(rms_and_peak(black_box(&samples))).0;
        } else {
            let f = ex.extract(black_box(&samples), &params).unwrap();
            check += black_box(f).accel_rms;
        }
    }
    println!("{frames} frames of {rate} samples through {mode}: {check:.6}");
}
