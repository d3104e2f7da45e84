//! Codec-style tests: annotated register arrays as a device would send them, and what they decode
//! to. The expected numbers are written out by hand from the bit patterns, not computed by the
//! code under test.

use super::*;

fn channel(offset: u16, value_type: ValueType, word_order: WordOrder, scale: f64) -> Channel {
    Channel {
        sensor: format!("s{offset}"),
        offset,
        value_type,
        word_order,
        scale,
        unit: Unit::G,
        axis: None,
    }
}

fn block(count: u16, channels: Vec<Channel>) -> BlockMap {
    BlockMap { function: Function::Holding, address: 100, count, channels }
}

#[test]
fn sixteen_bit_values_signed_and_unsigned() {
    let map = block(
        3,
        vec![
            channel(0, ValueType::I16, WordOrder::Big, 1.0),
            channel(1, ValueType::U16, WordOrder::Big, 1.0),
            channel(2, ValueType::I16, WordOrder::Big, 0.001),
        ],
    );
    let registers = [
        0xFF38, // i16: -200
        0xFF38, // u16: 65336
        0x04D2, // i16: 1234, scaled by 0.001 → 1.234
    ];
    let v = map.decode(&registers).unwrap();
    assert_eq!(v[0], -200.0);
    assert_eq!(v[1], 65_336.0);
    assert!((v[2] - 1.234).abs() < 1e-12);
}

#[test]
fn thirty_two_bit_integers_in_both_word_orders() {
    let map = block(
        6,
        vec![
            channel(0, ValueType::U32, WordOrder::Big, 1.0),
            channel(2, ValueType::U32, WordOrder::Little, 1.0),
            channel(4, ValueType::I32, WordOrder::Big, 1.0),
        ],
    );
    let registers = [
        0x0001, 0x0002, // big: 0x0001_0002 = 65538
        0x0002, 0x0001, // little (low word first): 0x0001_0002 = 65538
        0xFFFF, 0xFFFE, // big i32: 0xFFFF_FFFE = -2
    ];
    assert_eq!(map.decode(&registers).unwrap(), vec![65_538.0, 65_538.0, -2.0]);
}

#[test]
fn float32_in_both_word_orders_and_scaled() {
    let map = block(
        4,
        vec![
            channel(0, ValueType::F32, WordOrder::Big, 1.0),
            channel(2, ValueType::F32, WordOrder::Little, 9.806_65),
        ],
    );
    let registers = [
        0x3FC0, 0x0000, // big: 0x3FC0_0000 = 1.5
        0x0000, 0xBF80, // little: 0xBF80_0000 = -1.0, times 9.80665
    ];
    assert_eq!(map.decode(&registers).unwrap(), vec![1.5, -9.806_65]);
}

#[test]
fn a_channel_may_sit_anywhere_inside_the_block() {
    let map = block(5, vec![channel(3, ValueType::I32, WordOrder::Little, 0.5)]);
    let registers = [
        0xDEAD, 0xBEEF, 0x0000, // not decoded
        0xFFFC, 0xFFFF, // little i32: 0xFFFF_FFFC = -4, times 0.5
    ];
    assert_eq!(map.decode(&registers).unwrap(), vec![-2.0]);
}

#[test]
fn an_answer_of_the_wrong_length_is_an_error_naming_the_block() {
    let map = block(2, vec![channel(0, ValueType::F32, WordOrder::Big, 1.0)]);
    let e = map.decode(&[0x3FC0]).unwrap_err();
    assert_eq!(e, RegisterDecodeError::WrongCount { address: 100, expected: 2, got: 1 });
    assert!(e.to_string().contains("address 100"), "{e}");
    assert!(map.decode(&[0, 0, 0]).is_err());
}

#[test]
fn a_hand_built_map_reaching_past_its_block_is_an_error_not_a_panic() {
    let map = block(1, vec![channel(0, ValueType::U32, WordOrder::Big, 1.0)]);
    assert!(map.decode(&[7]).is_err());
}

#[test]
fn register_counts_per_type() {
    assert_eq!(ValueType::I16.registers(), 1);
    assert_eq!(ValueType::U16.registers(), 1);
    assert_eq!(ValueType::I32.registers(), 2);
    assert_eq!(ValueType::U32.registers(), 2);
    assert_eq!(ValueType::F32.registers(), 2);
    assert_eq!(block(4, vec![]).describe(), "holding registers 100..104 (4 registers)");
}
