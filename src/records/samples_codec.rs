//! The binary encoding of raw sample frames published on `samples/{machine}/{sensor}`
//! (docs/contracts.md section 10 leaves it to us; `docs/samples-encoding.md` is its specification).
//!
//! A frame is a 32-byte little-endian header, the axis name, then `count` little-endian `f32`
//! samples. It carries the original timestamps: sample `first_index + i` of the block that started
//! at `t0_ms` is at `t0_ms + (first_index + i) * 1000 / rate_hz`, so a block split into several
//! frames (to fit the broker's maximum packet size) keeps exact times. JSON would take ~4× the
//! bytes and lose nothing an `f32` keeps (accelerometers give 10 to 16 bits).
//!
//! Pure: bytes in, bytes or errors naming the offending field out; never panics on bad input.

use crate::event::Unit;

/// The first four bytes of every frame.
pub const MAGIC: [u8; 4] = *b"LGSF";
/// The format version this code writes and reads.
pub const VERSION: u8 = 1;
/// Sample format code of little-endian IEEE 754 `f32`.
pub const FORMAT_F32: u8 = 1;
/// Bytes before the axis name.
pub const HEADER_BYTES: usize = 32;

/// One frame: a run of samples of one block, with what is needed to time them.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplesFrame {
    /// Event time of sample 0 of the original block.
    pub t0_ms: i64,
    pub rate_hz: f64,
    /// Index in the original block of the first sample here (0 unless the block was split).
    pub first_index: u32,
    pub unit: Unit,
    /// Free text such as `"z"`, at most 255 bytes; empty when unknown.
    pub axis: String,
    pub values: Vec<f32>,
}

/// Why bytes are not a frame.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FrameDecodeError {
    #[error("samples frame is {len} bytes, shorter than its {need}-byte header")]
    Short { len: usize, need: usize },
    #[error("samples frame: bytes 0..4 are {found:?}, not the magic \"LGSF\"")]
    Magic { found: [u8; 4] },
    #[error("samples frame: version {0} at byte 4 is not supported (this build reads {VERSION})")]
    Version(u8),
    #[error("samples frame: sample format {0} at byte 5 is unknown (1 = f32)")]
    Format(u8),
    #[error("samples frame: unit code {0} at byte 6 is unknown (1 = g, 2 = m/s2)")]
    Unit(u8),
    #[error("samples frame: rate_hz {0} at bytes 16..24 is not a finite number > 0")]
    Rate(f64),
    #[error("samples frame: axis at bytes 32..{end} is not UTF-8")]
    Axis { end: usize },
    #[error("samples frame: {count} samples need {need} bytes after the header, found {found}")]
    Length { count: u32, need: usize, found: usize },
}

fn unit_code(unit: Unit) -> u8 {
    match unit {
        Unit::G => 1,
        Unit::Ms2 => 2,
        // Raw samples are acceleration (the trace parser refuses mm/s); kept distinct anyway.
        Unit::MmS => 3,
    }
}

fn unit_from(code: u8) -> Result<Unit, FrameDecodeError> {
    match code {
        1 => Ok(Unit::G),
        2 => Ok(Unit::Ms2),
        3 => Ok(Unit::MmS),
        c => Err(FrameDecodeError::Unit(c)),
    }
}

/// Encoded size of a frame of `count` samples with an axis of `axis_len` bytes.
pub fn encoded_len(axis_len: usize, count: usize) -> usize {
    HEADER_BYTES + axis_len.min(255) + 4 * count
}

impl SamplesFrame {
    /// Event time of sample `i` of this frame, in (fractional) milliseconds.
    pub fn time_ms(&self, i: usize) -> f64 {
        self.t0_ms as f64 + (self.first_index as f64 + i as f64) * 1000.0 / self.rate_hz
    }

    /// The frame's bytes. An axis longer than 255 bytes is cut at a character boundary.
    pub fn encode(&self) -> Vec<u8> {
        let (first, n) = (self.first_index, self.values.len());
        let mut out = header(self.t0_ms, self.rate_hz, self.unit, &self.axis, first, n);
        for v in &self.values {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// Reads a frame, checking every field.
    pub fn decode(b: &[u8]) -> Result<SamplesFrame, FrameDecodeError> {
        let h = Header::read(b)?;
        let axis = String::from_utf8_lossy(&b[HEADER_BYTES..h.values_at()]).into_owned();
        let values = b[h.values_at()..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let Header { t0_ms, rate_hz, first_index, unit, .. } = h;
        Ok(SamplesFrame { t0_ms, rate_hz, first_index, unit, axis, values })
    }

    /// Readable form: one JSON header line, then one line per sample
    /// `{"i": index in the block, "t_ms": event time, "v": value}`.
    pub fn to_json_lines(&self) -> String {
        let mut out = serde_json::json!({
            "t0_ms": self.t0_ms,
            "rate_hz": self.rate_hz,
            "first_index": self.first_index,
            "count": self.values.len(),
            "unit": self.unit.as_str(),
            "axis": self.axis,
        })
        .to_string();
        out.push('\n');
        for (i, v) in self.values.iter().enumerate() {
            let line = serde_json::json!({
                "i": self.first_index as u64 + i as u64,
                "t_ms": self.time_ms(i),
                "v": *v as f64,
            });
            out.push_str(&line.to_string());
            out.push('\n');
        }
        out
    }
}

/// A frame's header, every field checked, and where its samples start.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Header {
    unit: Unit,
    axis_len: usize,
    t0_ms: i64,
    rate_hz: f64,
    first_index: u32,
    count: u32,
}

impl Header {
    /// The header of frame `b`, after checking that `b` is a whole, valid frame.
    fn read(b: &[u8]) -> Result<Header, FrameDecodeError> {
        if b.len() < HEADER_BYTES {
            return Err(FrameDecodeError::Short { len: b.len(), need: HEADER_BYTES });
        }
        let magic = [b[0], b[1], b[2], b[3]];
        if magic != MAGIC {
            return Err(FrameDecodeError::Magic { found: magic });
        }
        if b[4] != VERSION {
            return Err(FrameDecodeError::Version(b[4]));
        }
        if b[5] != FORMAT_F32 {
            return Err(FrameDecodeError::Format(b[5]));
        }
        let unit = unit_from(b[6])?;
        let axis_len = b[7] as usize;
        let le8 = |at: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[at..at + 8]);
            a
        };
        let le4 = |at: usize| [b[at], b[at + 1], b[at + 2], b[at + 3]];
        let t0_ms = i64::from_le_bytes(le8(8));
        let rate_hz = f64::from_le_bytes(le8(16));
        if !(rate_hz.is_finite() && rate_hz > 0.0) {
            return Err(FrameDecodeError::Rate(rate_hz));
        }
        let first_index = u32::from_le_bytes(le4(24));
        let count = u32::from_le_bytes(le4(28));
        let rest = &b[HEADER_BYTES..];
        let need = axis_len + 4 * count as usize;
        if rest.len() != need {
            return Err(FrameDecodeError::Length { count, need, found: rest.len() });
        }
        if std::str::from_utf8(&rest[..axis_len]).is_err() {
            return Err(FrameDecodeError::Axis { end: HEADER_BYTES + axis_len });
        }
        Ok(Header { unit, axis_len, t0_ms, rate_hz, first_index, count })
    }

    /// Offset of the first sample.
    fn values_at(&self) -> usize {
        HEADER_BYTES + self.axis_len
    }
}

/// Checks that `b` is one whole, valid frame.
pub fn check(b: &[u8]) -> Result<(), FrameDecodeError> {
    Header::read(b).map(|_| ())
}

/// A whole block of raw samples as one frame (`first_index` 0): the encoding the decide stage
/// keeps beside the block's journal line, which [`split`] cuts to a broker's packet size. The
/// values are written as `f32` as they are read, without an intermediate copy.
pub fn encode_block(t0_ms: i64, rate_hz: f64, unit: Unit, axis: &str, values: &[f64]) -> Vec<u8> {
    let mut out = header(t0_ms, rate_hz, unit, axis, 0, values.len());
    for &v in values {
        out.extend_from_slice(&(v as f32).to_le_bytes());
    }
    out
}

/// A frame's header and axis (cut to 255 bytes at a character boundary), in a buffer with room
/// for its `count` samples.
fn header(t0_ms: i64, rate_hz: f64, unit: Unit, axis: &str, first: u32, count: usize) -> Vec<u8> {
    let axis = truncate_utf8(axis, 255);
    let mut out = Vec::with_capacity(encoded_len(axis.len(), count));
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[VERSION, FORMAT_F32, unit_code(unit), axis.len() as u8]);
    out.extend_from_slice(&t0_ms.to_le_bytes());
    out.extend_from_slice(&rate_hz.to_le_bytes());
    out.extend_from_slice(&first.to_le_bytes());
    out.extend_from_slice(&(count as u32).to_le_bytes());
    out.extend_from_slice(axis.as_bytes());
    out
}

/// Frame `b` cut into frames of at most `limit` bytes each, in sample order, each keeping the
/// index of its first sample in the block (so its times). `b` itself when it fits; empty when it
/// holds no sample or not even one sample fits. The samples' bytes are copied, never decoded.
pub fn split(b: &[u8], limit: usize) -> Result<Vec<Vec<u8>>, FrameDecodeError> {
    let h = Header::read(b)?;
    let at = h.values_at();
    let per_frame = limit.saturating_sub(at) / 4;
    if h.count == 0 || per_frame == 0 {
        return Ok(Vec::new());
    }
    if h.count as usize <= per_frame {
        return Ok(vec![b.to_vec()]);
    }
    let frames = b[at..].chunks(4 * per_frame).enumerate().map(|(k, chunk)| {
        let first = h.first_index.saturating_add((k * per_frame) as u32);
        let mut out = Vec::with_capacity(at + chunk.len());
        out.extend_from_slice(&b[..24]);
        out.extend_from_slice(&first.to_le_bytes());
        out.extend_from_slice(&((chunk.len() / 4) as u32).to_le_bytes());
        out.extend_from_slice(&b[HEADER_BYTES..at]);
        out.extend_from_slice(chunk);
        out
    });
    Ok(frames.collect())
}

fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame() -> SamplesFrame {
        SamplesFrame {
            t0_ms: 1_700_000_000_000,
            rate_hz: 3200.0,
            first_index: 6400,
            unit: Unit::G,
            axis: "z".into(),
            values: vec![0.5, -1.25, 3.0e-3],
        }
    }

    #[test]
    fn round_trips_and_has_the_documented_layout() {
        let f = frame();
        let b = f.encode();
        assert_eq!(b.len(), encoded_len(1, 3));
        assert_eq!(&b[..8], &[b'L', b'G', b'S', b'F', 1, 1, 1, 1]);
        assert_eq!(&b[8..16], &1_700_000_000_000_i64.to_le_bytes());
        assert_eq!(&b[28..32], &3u32.to_le_bytes());
        assert_eq!(b[32], b'z');
        assert_eq!(&b[33..37], &0.5f32.to_le_bytes());
        assert_eq!(SamplesFrame::decode(&b), Ok(f));
    }

    #[test]
    fn times_follow_the_original_block() {
        let f = frame();
        // Sample 6401 of a 3200 Hz block is 2000.3125 ms after t0.
        assert_eq!(f.time_ms(1), 1_700_000_002_000.312_5);
        let text = f.to_json_lines();
        let lines: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0]["count"], 3);
        assert_eq!(lines[0]["unit"], "g");
        assert_eq!(lines[2]["i"], 6401);
        assert_eq!(lines[2]["v"], -1.25);
    }

    #[test]
    fn every_damage_is_named() {
        let good = frame().encode();
        assert_eq!(
            SamplesFrame::decode(&good[..10]),
            Err(FrameDecodeError::Short { len: 10, need: 32 })
        );
        let mut b = good.clone();
        b[0] = b'X';
        assert!(matches!(SamplesFrame::decode(&b), Err(FrameDecodeError::Magic { .. })));
        let mut b = good.clone();
        b[4] = 9;
        assert_eq!(SamplesFrame::decode(&b), Err(FrameDecodeError::Version(9)));
        let mut b = good.clone();
        b[5] = 2;
        assert_eq!(SamplesFrame::decode(&b), Err(FrameDecodeError::Format(2)));
        let mut b = good.clone();
        b[6] = 0;
        assert_eq!(SamplesFrame::decode(&b), Err(FrameDecodeError::Unit(0)));
        let mut b = good.clone();
        b[16..24].copy_from_slice(&f64::NAN.to_le_bytes());
        assert!(matches!(SamplesFrame::decode(&b), Err(FrameDecodeError::Rate(_))));
        let mut b = good.clone();
        b[32] = 0xff;
        assert_eq!(SamplesFrame::decode(&b), Err(FrameDecodeError::Axis { end: 33 }));
        assert_eq!(
            SamplesFrame::decode(&good[..good.len() - 1]),
            Err(FrameDecodeError::Length { count: 3, need: 13, found: 12 })
        );
    }

    #[test]
    fn a_block_is_one_frame_that_splits_by_copying_into_frames_of_its_samples() {
        let values: Vec<f64> = (0..1000).map(|i| f64::from(i) * 0.001 - 0.3).collect();
        let block = encode_block(1_700_000_000_000, 3200.0, Unit::G, "z", &values);
        let f32s: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        let whole = SamplesFrame {
            t0_ms: 1_700_000_000_000,
            rate_hz: 3200.0,
            first_index: 0,
            unit: Unit::G,
            axis: "z".into(),
            values: f32s.clone(),
        };
        assert_eq!(block, whole.encode(), "the same bytes as a frame of the whole block");
        assert_eq!(split(&block, block.len()).unwrap(), vec![block.clone()], "fits: itself");
        for limit in [encoded_len(1, 1), encoded_len(1, 7), 1000, encoded_len(1, 999)] {
            let frames = split(&block, limit).unwrap();
            let per = (limit - encoded_len(1, 0)) / 4;
            assert_eq!(frames.len(), 1000usize.div_ceil(per), "limit {limit}");
            let mut got = Vec::new();
            for (k, b) in frames.iter().enumerate() {
                assert!(b.len() <= limit, "limit {limit}: frame {k} is {} bytes", b.len());
                let f = SamplesFrame::decode(b).unwrap();
                assert_eq!(f.first_index as usize, k * per);
                assert_eq!(f.time_ms(0), whole.time_ms(k * per), "its samples keep their times");
                got.extend(f.values);
            }
            assert_eq!(got, f32s, "limit {limit}: every sample once, in order");
        }
        assert!(split(&block, encoded_len(1, 0) + 3).unwrap().is_empty(), "no sample fits");
        let empty = encode_block(0, 1.0, Unit::G, "", &[]);
        assert!(split(&empty, 1000).unwrap().is_empty(), "no sample: no frame");
        let damaged = &block[..block.len() - 2];
        assert!(matches!(split(damaged, 100), Err(FrameDecodeError::Length { .. })));
    }

    #[test]
    fn long_axis_is_cut_at_a_character_boundary() {
        let mut f = frame();
        f.axis = "é".repeat(200);
        let d = SamplesFrame::decode(&f.encode()).unwrap();
        assert_eq!(d.axis.len(), 254);
    }
}
