//! The two buses the ADXL345 speaks, behind one small register-access trait so the driver is
//! written once.
//!
//! - I2C: 7-bit address 0x53 (ALT ADDRESS pin low) or 0x1D (pin high). A read is a write of the
//!   start register followed by a repeated-start read; the part auto-increments the address.
//! - SPI (4-wire, mode 3 — [`SPI_MODE`]): the first byte is the register address with
//!   [`SPI_READ`] set to read and [`SPI_MULTI_BYTE`] set to auto-increment over several bytes.

use embedded_hal::i2c::I2c;
use embedded_hal::spi::{Mode, Operation, SpiDevice, MODE_3};

use super::registers::{SPI_MULTI_BYTE, SPI_READ};
use super::DataRate;

/// The SPI mode the ADXL345 needs (CPOL = 1, CPHA = 1); configure the `SpiDevice` with it.
pub const SPI_MODE: Mode = MODE_3;

/// The datasheet asks for at least 5 µs between the end of reading the data registers (CS going
/// high) and the start of the next FIFO read or `FIFO_STATUS` read; above 1.5 MHz SPI the address
/// byte alone is too short. On SPI the driver puts this delay (in ns) at the start of every FIFO
/// and `FIFO_STATUS` read. On I2C the address phase of the next read takes longer than that.
pub const FIFO_POP_GAP_NS: u32 = 5_000;

/// The fastest output data rate the driver allows over I2C; see [`RegisterAccess::MAX_RATE`].
///
/// 1600 Hz, as linegate's sensor issue asks for I2C at 400 kHz: one sample read (address, register,
/// repeated start, address, 6 data bytes) is about 81 bus bits, 200 µs at 400 kHz, within the
/// 625 µs sample period. The datasheet is more cautious — it recommends 800 Hz only at 400 kHz or
/// faster and 1600/3200 Hz only with SPI at 2 MHz or faster — so the read loop must count FIFO
/// overruns at this rate (board bring-up checks it for 60 s). 3200 Hz needs SPI.
pub const I2C_MAX_RATE: DataRate = DataRate::Hz1600;

/// The 7-bit I2C address, chosen by the ALT ADDRESS pin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum I2cAddress {
    /// ALT ADDRESS low: 0x53 (the common breakout-board default).
    AltLow,
    /// ALT ADDRESS high: 0x1D.
    AltHigh,
}

impl I2cAddress {
    /// The 7-bit address.
    pub const fn addr(self) -> u8 {
        match self {
            I2cAddress::AltLow => 0x53,
            I2cAddress::AltHigh => 0x1D,
        }
    }
}

/// The ADXL345 on an I2C bus (owns the bus).
#[derive(Debug)]
pub struct I2cInterface<I2C> {
    pub(crate) i2c: I2C,
    pub(crate) address: u8,
}

/// The ADXL345 on an SPI device (owns the device, which owns chip select).
#[derive(Debug)]
pub struct SpiInterface<SPI> {
    pub(crate) spi: SPI,
}

mod private {
    /// Seals [`super::RegisterAccess`]: only the two interfaces here implement it.
    pub trait Sealed {}
    impl<I2C> Sealed for super::I2cInterface<I2C> {}
    impl<SPI> Sealed for super::SpiInterface<SPI> {}
}

/// Register access over either bus. Sealed: implemented only by [`I2cInterface`] and
/// [`SpiInterface`].
pub trait RegisterAccess: private::Sealed {
    /// The bus error type.
    type Error;

    /// The fastest output data rate this bus can drain.
    const MAX_RATE: DataRate;

    /// Reads `buf.len()` consecutive registers starting at `start`.
    fn read_regs(&mut self, start: u8, buf: &mut [u8]) -> Result<(), Self::Error>;

    /// Writes one register.
    fn write_reg(&mut self, reg: u8, value: u8) -> Result<(), Self::Error>;

    /// Like `read_regs`, for reads that follow a FIFO pop (`FIFO_STATUS`, DATAX0..=DATAZ1):
    /// honours the datasheet's 5 µs gap where the bus itself does not.
    fn read_fifo_regs(&mut self, start: u8, buf: &mut [u8]) -> Result<(), Self::Error> {
        self.read_regs(start, buf)
    }
}

impl<I2C: I2c> RegisterAccess for I2cInterface<I2C> {
    type Error = I2C::Error;

    /// 800 Hz. The datasheet (Serial Communications) recommends 1600 and 3200 Hz only with SPI
    /// at 2 MHz or more, and 800 Hz only with a bus of 400 kHz or more: I2C tops out at 400 kHz
    /// (fast mode), so 800 Hz is the fastest recommended rate over I2C.
    const MAX_RATE: DataRate = I2C_MAX_RATE;

    fn read_regs(&mut self, start: u8, buf: &mut [u8]) -> Result<(), Self::Error> {
        self.i2c.write_read(self.address, &[start], buf)
    }

    fn write_reg(&mut self, reg: u8, value: u8) -> Result<(), Self::Error> {
        self.i2c.write(self.address, &[reg, value])
    }
}

impl<SPI: SpiDevice> SpiInterface<SPI> {
    fn command(start: u8, len: usize) -> u8 {
        let multi = if len > 1 { SPI_MULTI_BYTE } else { 0 };
        SPI_READ | multi | start
    }
}

impl<SPI: SpiDevice> RegisterAccess for SpiInterface<SPI> {
    type Error = SPI::Error;

    /// 3200 Hz, with the SPI clock at 2 MHz or more (the datasheet's maximum is 5 MHz).
    const MAX_RATE: DataRate = DataRate::Hz3200;

    fn read_regs(&mut self, start: u8, buf: &mut [u8]) -> Result<(), Self::Error> {
        let cmd = [Self::command(start, buf.len())];
        self.spi.transaction(&mut [Operation::Write(&cmd), Operation::Read(buf)])
    }

    fn write_reg(&mut self, reg: u8, value: u8) -> Result<(), Self::Error> {
        self.spi.write(&[reg, value])
    }

    fn read_fifo_regs(&mut self, start: u8, buf: &mut [u8]) -> Result<(), Self::Error> {
        let cmd = [Self::command(start, buf.len())];
        self.spi.transaction(&mut [
            Operation::DelayNs(FIFO_POP_GAP_NS),
            Operation::Write(&cmd),
            Operation::Read(buf),
        ])
    }
}
