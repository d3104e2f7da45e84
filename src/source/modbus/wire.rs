//! The RTU wire limit: how many block reads per second a serial line can carry at best.
//!
//! One read of `n` registers is a request of 8 bytes (unit, function, address, count, CRC) and a
//! response of `5 + 2n` bytes (unit, function, byte count, data, CRC). Each byte is an 11-bit
//! character (start, 8 data, parity or a second stop bit, stop), and each frame is followed by a
//! silent interval of 3.5 characters. The Modbus serial line specification fixes that interval at
//! 1.75 ms above 19200 baud, which is longer than 3.5 characters there; [`rtu_wire_limit`] uses
//! 3.5 characters, the more generous bound.

/// Bits per RTU character.
pub const BITS_PER_CHAR: f64 = 11.0;

/// Request and response bytes of one read of `registers` registers.
pub fn rtu_read_bytes(registers: u16) -> (u32, u32) {
    (8, 5 + 2 * u32::from(registers))
}

/// The most reads of `registers` registers per second at `baud`: both frames and two 3.5-character
/// gaps back to back, nothing else.
pub fn rtu_wire_limit(baud: u32, registers: u16) -> f64 {
    let (request, response) = rtu_read_bytes(registers);
    let chars = f64::from(request + response) + 2.0 * 3.5;
    f64::from(baud) / (chars * BITS_PER_CHAR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_registers_at_115200_baud() {
        // 8 + 21 bytes + 7 gap characters = 36 characters = 396 bits: 3.4375 ms per read.
        assert_eq!(rtu_read_bytes(8), (8, 21));
        assert!((rtu_wire_limit(115_200, 8) - 115_200.0 / 396.0).abs() < 1e-9);
        assert!((rtu_wire_limit(115_200, 8) - 290.909).abs() < 1e-3);
        // One register at 9600 baud: 8 + 7 + 7 = 22 characters = 242 bits.
        assert!((rtu_wire_limit(9_600, 1) - 9_600.0 / 242.0).abs() < 1e-9);
    }
}
