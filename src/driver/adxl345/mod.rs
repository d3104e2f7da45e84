//! Analog Devices ADXL345 3-axis accelerometer over embedded-hal 1.0 I2C or SPI.
//!
//! One driver type, [`Adxl345`], for both buses: it owns the bus (or SPI device) and gives it
//! back with `destroy`. [`Adxl345::init`] checks the device ID, then configures full resolution,
//! the range, the output data rate and the FIFO in stream mode with a watermark, and starts
//! measuring. [`Adxl345::read_fifo`] drains what the FIFO holds; [`Adxl345::fifo_overrun`] says
//! whether samples were lost since the last drain.
//!
//! ```no_run
//! # fn demo<I: embedded_hal::i2c::I2c>(i2c: I) -> Result<(), linegate::driver::adxl345::Error<I::Error>> {
//! use linegate::driver::adxl345::{Adxl345, Config, DataRate, I2cAddress, Range, Sample};
//! let mut accel = Adxl345::new_i2c(i2c, I2cAddress::AltLow);
//! accel.init(Config { range: Range::G4, data_rate: DataRate::Hz800, watermark: 16 })?;
//! let mut buf = [Sample::default(); 33];
//! let n = accel.read_fifo(&mut buf)?;
//! let lost = accel.fifo_overrun()?;
//! # let _ = (n, lost);
//! let _i2c = accel.destroy();
//! # Ok(()) }
//! ```

mod interface;
pub mod registers;

pub use interface::{
    I2cAddress, I2cInterface, RegisterAccess, SpiInterface, FIFO_POP_GAP_NS, I2C_MAX_RATE, SPI_MODE,
};
pub use registers::{DataRate, FifoMode, Range};

use registers::{
    DATAX0, DATA_FORMAT, DATA_FORMAT_FULL_RES, DEVICE_ID, DEVID, FIFO_CTL, FIFO_CTL_SAMPLES_MASK,
    FIFO_STATUS, FIFO_STATUS_ENTRIES_MASK, INT_SOURCE, INT_SOURCE_OVERRUN, POWER_CTL,
    POWER_CTL_MEASURE, SAMPLE_BYTES,
};

/// g per LSB in full-resolution mode, on every range: 3.9 mg/LSB, i.e. 1/256 g.
pub const FULL_RES_G_PER_LSB: f64 = 1.0 / 256.0;

/// The largest FIFO watermark (`FIFO_CTL` samples field is 5 bits).
pub const MAX_WATERMARK: u8 = FIFO_CTL_SAMPLES_MASK;

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error<E> {
    /// The bus (I2C or SPI) reported an error.
    #[error("ADXL345 bus error: {0:?}")]
    Bus(E),
    /// `DEVID` did not read 0xE5: another part, or nothing, answers at this address.
    #[error(
        "ADXL345 not found: DEVID reads {0:#04x}, expected 0xe5 (wrong address, wiring or part)"
    )]
    WrongDevice(u8),
    /// The output data rate is above what the datasheet recommends over I2C.
    #[error(
        "ADXL345 output data rate {} Hz is too high for I2C (at most {} Hz); use SPI",
        .0.hz(),
        I2C_MAX_RATE.hz()
    )]
    RateTooHighForI2c(DataRate),
    /// The FIFO watermark is outside 1..=31 samples.
    #[error("ADXL345 FIFO watermark {0} is outside 1..=31 samples")]
    InvalidWatermark(u8),
}

/// Configuration applied by [`Adxl345::init`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Measurement range; resolution stays 1/256 g (full resolution).
    pub range: Range,
    /// Output data rate.
    pub data_rate: DataRate,
    /// FIFO watermark in samples, 1..=31.
    pub watermark: u8,
}

impl Default for Config {
    /// ±4 g, 800 Hz (allowed on both buses), watermark 16.
    fn default() -> Self {
        Config { range: Range::G4, data_rate: DataRate::Hz800, watermark: 16 }
    }
}

/// One raw X/Y/Z sample as the part reports it (right-justified, sign-extended).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    /// X axis, raw LSB.
    pub x: i16,
    /// Y axis, raw LSB.
    pub y: i16,
    /// Z axis, raw LSB.
    pub z: i16,
}

impl Sample {
    /// Decodes DATAX0..=DATAZ1 (little-endian i16 per axis).
    pub fn from_le_bytes(b: [u8; SAMPLE_BYTES]) -> Self {
        Sample {
            x: i16::from_le_bytes([b[0], b[1]]),
            y: i16::from_le_bytes([b[2], b[3]]),
            z: i16::from_le_bytes([b[4], b[5]]),
        }
    }

    /// Acceleration in g, given g per LSB (use [`FULL_RES_G_PER_LSB`] after `init`).
    pub fn to_g(&self, g_per_lsb: f64) -> (f64, f64, f64) {
        (
            f64::from(self.x) * g_per_lsb,
            f64::from(self.y) * g_per_lsb,
            f64::from(self.z) * g_per_lsb,
        )
    }
}

/// The ADXL345 driver, generic over the bus interface.
#[derive(Debug)]
pub struct Adxl345<IFACE> {
    iface: IFACE,
}

impl<I2C: embedded_hal::i2c::I2c> Adxl345<I2cInterface<I2C>> {
    /// A driver on an I2C bus at the given address. No bus traffic until `init`.
    pub fn new_i2c(i2c: I2C, address: I2cAddress) -> Self {
        Adxl345 { iface: I2cInterface { i2c, address: address.addr() } }
    }

    /// Gives the I2C bus back.
    pub fn destroy(self) -> I2C {
        self.iface.i2c
    }
}

impl<SPI: embedded_hal::spi::SpiDevice> Adxl345<SpiInterface<SPI>> {
    /// A driver on an SPI device (configured for [`SPI_MODE`]). No bus traffic until `init`.
    pub fn new_spi(spi: SPI) -> Self {
        Adxl345 { iface: SpiInterface { spi } }
    }

    /// Gives the SPI device back.
    pub fn destroy(self) -> SPI {
        self.iface.spi
    }
}

impl<IFACE: RegisterAccess> Adxl345<IFACE> {
    /// Checks the device ID and configures the part; see the module docs for the sequence.
    /// The configuration is validated before any bus traffic.
    pub fn init(&mut self, cfg: Config) -> Result<(), Error<IFACE::Error>> {
        if cfg.data_rate > IFACE::MAX_RATE {
            return Err(Error::RateTooHighForI2c(cfg.data_rate));
        }
        if cfg.watermark == 0 || cfg.watermark > MAX_WATERMARK {
            return Err(Error::InvalidWatermark(cfg.watermark));
        }
        let id = self.device_id()?;
        if id != DEVICE_ID {
            return Err(Error::WrongDevice(id));
        }
        // Configure in standby, then start measuring last.
        self.write(POWER_CTL, 0x00)?;
        self.write(DATA_FORMAT, DATA_FORMAT_FULL_RES | cfg.range.bits())?;
        self.write(registers::BW_RATE, cfg.data_rate.code())?;
        self.write(FIFO_CTL, FifoMode::Stream.bits() | cfg.watermark)?;
        self.write(POWER_CTL, POWER_CTL_MEASURE)
    }

    /// Reads `DEVID` (0xE5 on an ADXL345).
    pub fn device_id(&mut self) -> Result<u8, Error<IFACE::Error>> {
        let mut id = [0u8];
        self.iface.read_regs(DEVID, &mut id).map_err(Error::Bus)?;
        Ok(id[0])
    }

    /// Drains the FIFO into `out`, oldest first: reads `FIFO_STATUS` for the number of entries
    /// (up to 33: the 32-deep FIFO plus the output registers), then one multi-byte read of
    /// DATAX0..=DATAZ1 per entry, at most `out.len()`. Returns how many samples were written.
    pub fn read_fifo(&mut self, out: &mut [Sample]) -> Result<usize, Error<IFACE::Error>> {
        let mut status = [0u8];
        self.iface.read_fifo_regs(FIFO_STATUS, &mut status).map_err(Error::Bus)?;
        let entries = usize::from(status[0] & FIFO_STATUS_ENTRIES_MASK);
        let n = entries.min(out.len());
        for slot in &mut out[..n] {
            let mut raw = [0u8; SAMPLE_BYTES];
            self.iface.read_fifo_regs(DATAX0, &mut raw).map_err(Error::Bus)?;
            *slot = Sample::from_le_bytes(raw);
        }
        Ok(n)
    }

    /// Whether the FIFO overran (samples lost) since the data registers were last read:
    /// `INT_SOURCE` D0, set regardless of `INT_ENABLE` and cleared by reading the data.
    pub fn fifo_overrun(&mut self) -> Result<bool, Error<IFACE::Error>> {
        let mut src = [0u8];
        self.iface.read_regs(INT_SOURCE, &mut src).map_err(Error::Bus)?;
        Ok(src[0] & INT_SOURCE_OVERRUN != 0)
    }

    fn write(&mut self, reg: u8, value: u8) -> Result<(), Error<IFACE::Error>> {
        self.iface.write_reg(reg, value).map_err(Error::Bus)
    }
}

#[cfg(test)]
mod tests;
