//! Modbus register-map decoding (`BlockMap::decode`): a block map (function, address, count and
//! channels of every value type, word order, offset and scale) and a device's answer, both from
//! the fuzz input.
//!
//! Properties: never a panic; an answer of the wrong length is `WrongCount`; a channel reaching
//! past its block (a map built by hand; validation refuses it) is an error, not a panic; for a
//! map whose channels lie inside the block, every value equals an independent decoding of the
//! registers' big-endian bytes in the channel's word order, times its scale.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use linegate::config::modbus_map::{
    BlockMap, Channel, Function, RegisterDecodeError, ValueType, WordOrder,
};
use linegate::event::Unit;

#[derive(Arbitrary, Debug)]
struct ArbChannel {
    offset: u16,
    value_type: u8,
    little: bool,
    scale: f64,
}

#[derive(Arbitrary, Debug)]
struct Input {
    input_registers: bool,
    address: u16,
    /// `None`: as many registers as the answer holds (the usual case).
    count: Option<u16>,
    channels: Vec<ArbChannel>,
    registers: Vec<u16>,
}

const TYPES: [ValueType; 5] =
    [ValueType::I16, ValueType::U16, ValueType::I32, ValueType::U32, ValueType::F32];

/// The value of `words` read as the bytes of a big-endian number: high word first for `Big`.
fn reference(t: ValueType, order: WordOrder, words: &[u16]) -> f64 {
    let [a, b] = match (t.registers(), order) {
        (1, _) => return one(t, words[0]),
        (_, WordOrder::Big) => [words[0], words[1]],
        (_, WordOrder::Little) => [words[1], words[0]],
    };
    let [a0, a1] = a.to_be_bytes();
    let [b0, b1] = b.to_be_bytes();
    let bytes = [a0, a1, b0, b1];
    match t {
        ValueType::I32 => f64::from(i32::from_be_bytes(bytes)),
        ValueType::U32 => f64::from(u32::from_be_bytes(bytes)),
        _ => f64::from(f32::from_be_bytes(bytes)),
    }
}

fn one(t: ValueType, w: u16) -> f64 {
    match t {
        ValueType::I16 => f64::from(i16::from_be_bytes(w.to_be_bytes())),
        _ => f64::from(w),
    }
}

fuzz_target!(|input: Input| {
    let channels: Vec<Channel> = input
        .channels
        .iter()
        .enumerate()
        .map(|(i, c)| Channel {
            sensor: format!("s{i}"),
            offset: c.offset,
            value_type: TYPES[usize::from(c.value_type) % TYPES.len()],
            word_order: if c.little { WordOrder::Little } else { WordOrder::Big },
            scale: c.scale,
            unit: Unit::G,
            axis: None,
        })
        .collect();
    let map = BlockMap {
        function: if input.input_registers { Function::Input } else { Function::Holding },
        address: input.address,
        count: input.count.unwrap_or(input.registers.len().min(usize::from(u16::MAX)) as u16),
        channels,
    };
    let _ = map.describe();
    let decoded = map.decode(&input.registers);
    if input.registers.len() != usize::from(map.count) {
        assert!(matches!(decoded, Err(RegisterDecodeError::WrongCount { .. })), "{decoded:?}");
        return;
    }
    let inside = map.channels.iter().all(|c| {
        usize::from(c.offset) + usize::from(c.value_type.registers()) <= input.registers.len()
    });
    let values = match decoded {
        Ok(values) => values,
        Err(e) => {
            assert!(!inside, "a map inside its block failed to decode: {e}");
            return;
        }
    };
    assert!(inside, "a channel outside its block decoded");
    assert_eq!(values.len(), map.channels.len());
    for (c, v) in map.channels.iter().zip(values) {
        let at = usize::from(c.offset);
        let want = reference(c.value_type, c.word_order, &input.registers[at..]) * c.scale;
        assert!(
            v.to_bits() == want.to_bits() || (v.is_nan() && want.is_nan()),
            "{c:?}: {v} != {want}"
        );
    }
});
