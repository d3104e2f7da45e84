//! The samples frame codec (`SamplesFrame::decode` and `encode`, docs/samples-encoding.md).
//!
//! On the raw bytes: never a panic, and a frame that decodes encodes back to exactly the same
//! bytes (the format has one encoding per frame), of the documented length. From the same bytes
//! read as a structured frame (any unit, axis, values, NaN payloads included, and a finite rate
//! > 0): decode∘encode is the identity, bit for bit, with the axis cut to 255 bytes at a
//! character boundary, and `encoded_len` bounds the length.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use linegate::event::Unit;
use linegate::records::samples_codec::{encoded_len, SamplesFrame};

fuzz_target!(init: linegate_fuzz::write_seeds(linegate_fuzz::sample_frames), |data: &[u8]| {
    if let Ok(frame) = SamplesFrame::decode(data) {
        assert_eq!(frame.encode(), data, "a decoded frame encodes to other bytes");
        assert_eq!(data.len(), encoded_len(frame.axis.len(), frame.values.len()));
        assert!(frame.rate_hz.is_finite() && frame.rate_hz > 0.0);
    }

    let Ok(frame) = structured(&mut Unstructured::new(data)) else { return };
    let bytes = frame.encode();
    let back = SamplesFrame::decode(&bytes).expect("an encoded frame decodes");
    // Exact for the axis as written; for an axis over 255 bytes cut inside a character, the
    // length `encoded_len` gives from the uncut length is up to 3 bytes more (an upper bound, which
    // is how src/forward/payload.rs uses it).
    assert_eq!(bytes.len(), encoded_len(back.axis.len(), frame.values.len()));
    assert!(bytes.len() <= encoded_len(frame.axis.len(), frame.values.len()));
    // The longest prefix of whole characters within 255 bytes.
    let cut = frame.axis.char_indices().map(|(i, c)| i + c.len_utf8()).take_while(|&e| e <= 255);
    assert_eq!(back.axis, frame.axis[..cut.last().unwrap_or(0)], "axis cut badly");
    assert_eq!((back.t0_ms, back.first_index, back.unit), (frame.t0_ms, frame.first_index, frame.unit));
    assert_eq!(back.rate_hz.to_bits(), frame.rate_hz.to_bits());
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&back.values), bits(&frame.values));
});

fn structured(u: &mut Unstructured<'_>) -> arbitrary::Result<SamplesFrame> {
    let unit = *u.choose(&[Unit::G, Unit::Ms2, Unit::MmS])?;
    let rate_hz = f64::arbitrary(u)?;
    if !(rate_hz.is_finite() && rate_hz > 0.0) {
        return Err(arbitrary::Error::IncorrectFormat);
    }
    Ok(SamplesFrame {
        t0_ms: u.arbitrary()?,
        rate_hz,
        first_index: u.arbitrary()?,
        unit,
        axis: u.arbitrary()?,
        values: u.arbitrary()?,
    })
}
