//! The register map: which registers one block read covers and how they decode into channels.
//!
//! A pure core (no I/O): a [`BlockMap`] names a function (holding or input registers), a start
//! address and a register count; each [`Channel`] picks a value at a register offset inside the
//! block, of a [`ValueType`] spanning one or two registers, with a [`WordOrder`] for the
//! two-register types, and a scale into its unit. [`BlockMap::decode`] turns the registers of one
//! answered read into one value per channel.
//!
//! Word order: Modbus registers are 16-bit big-endian words; a 32-bit value spans two of them.
//! `big` puts the high word first (register `n` = bits 31..16, "ABCD"), `little` puts the low word
//! first ("CDAB", often called word swap). Bytes inside a register are always big-endian.

use serde::Deserialize;

use crate::event::Unit;

/// Which Modbus read function a block uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Function {
    /// Function code 0x03, read holding registers.
    Holding,
    /// Function code 0x04, read input registers.
    Input,
}

impl Function {
    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Function::Holding => "holding",
            Function::Input => "input",
        }
    }
}

/// How a channel's registers are read as a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ValueType {
    I16,
    U16,
    I32,
    U32,
    F32,
}

impl ValueType {
    /// How many 16-bit registers a value of this type spans.
    pub fn registers(self) -> u16 {
        match self {
            ValueType::I16 | ValueType::U16 => 1,
            ValueType::I32 | ValueType::U32 | ValueType::F32 => 2,
        }
    }

    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ValueType::I16 => "i16",
            ValueType::U16 => "u16",
            ValueType::I32 => "i32",
            ValueType::U32 => "u32",
            ValueType::F32 => "f32",
        }
    }
}

/// The order of the two registers of a 32-bit value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WordOrder {
    /// High word first ("ABCD"), the Modbus convention.
    Big,
    /// Low word first ("CDAB", word swap).
    Little,
}

/// One decoded channel: a sensor of the source's machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Channel {
    /// The sensor name of its samples; an identifier, unique per gateway.
    pub sensor: String,
    /// Register offset inside the block (0 = the block's first register).
    pub offset: u16,
    pub value_type: ValueType,
    /// Only matters for two-register types.
    pub word_order: WordOrder,
    /// The decoded number is multiplied by this to give a value in `unit`; finite, not 0.
    pub scale: f64,
    pub unit: Unit,
    /// Free text such as `"z"`, copied into the samples.
    pub axis: Option<String>,
}

/// One block read and its channels.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockMap {
    pub function: Function,
    /// The first register's protocol address (0-based, as on the wire).
    pub address: u16,
    /// Registers read, 1..=125 (the protocol's limit for one read).
    pub count: u16,
    /// Every channel lies inside `[0, count)`; at least one.
    pub channels: Vec<Channel>,
}

/// The largest register count one read may ask for (Modbus application protocol, 6.3/6.4).
pub const MAX_READ_REGISTERS: u16 = 125;

/// Why the registers of an answer could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterDecodeError {
    /// The device answered with another number of registers than the block asked for.
    #[error("the answer has {got} registers, the block at address {address} asked for {expected}")]
    WrongCount { address: u16, expected: u16, got: usize },
}

impl BlockMap {
    /// Decodes the registers of one answered read into one value per channel, in channel order.
    pub fn decode(&self, registers: &[u16]) -> Result<Vec<f64>, RegisterDecodeError> {
        if registers.len() != usize::from(self.count) {
            return Err(RegisterDecodeError::WrongCount {
                address: self.address,
                expected: self.count,
                got: registers.len(),
            });
        }
        let mut out = Vec::with_capacity(self.channels.len());
        for c in &self.channels {
            // Validation keeps every channel inside the block; a map built by hand that does not is
            // reported like a short answer rather than panicking.
            let at = usize::from(c.offset);
            let words = registers.get(at..at + usize::from(c.value_type.registers())).ok_or(
                RegisterDecodeError::WrongCount {
                    address: self.address,
                    expected: self.count,
                    got: registers.len(),
                },
            )?;
            out.push(decode_value(c.value_type, c.word_order, words) * c.scale);
        }
        Ok(out)
    }

    /// The register range `[address, address + count)` as text, for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} registers {}..{} ({} registers)",
            self.function.as_str(),
            self.address,
            u32::from(self.address) + u32::from(self.count),
            self.count
        )
    }
}

/// `words` holds exactly `value_type.registers()` registers.
fn decode_value(value_type: ValueType, order: WordOrder, words: &[u16]) -> f64 {
    let wide = || -> u32 {
        let (hi, lo) = match (order, words) {
            (WordOrder::Big, [a, b, ..]) => (*a, *b),
            (WordOrder::Little, [a, b, ..]) => (*b, *a),
            _ => (0, 0),
        };
        (u32::from(hi) << 16) | u32::from(lo)
    };
    let first = words.first().copied().unwrap_or(0);
    match value_type {
        ValueType::U16 => f64::from(first),
        ValueType::I16 => f64::from(first as i16),
        ValueType::U32 => f64::from(wide()),
        ValueType::I32 => f64::from(wide() as i32),
        ValueType::F32 => f64::from(f32::from_bits(wide())),
    }
}

#[cfg(test)]
mod tests {
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
}
