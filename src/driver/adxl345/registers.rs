//! ADXL345 register addresses, bit fields and the typed values written into them.
//!
//! Names follow the datasheet's register map (Analog Devices ADXL345, "Register Map" and
//! "Register Definitions"). Only the registers this driver touches are listed.

/// Device ID register; reads [`DEVICE_ID`] on every ADXL345.
pub const DEVID: u8 = 0x00;
/// Data rate and power mode control (rate code in D3..D0, `LOW_POWER` in D4).
pub const BW_RATE: u8 = 0x2C;
/// Power-saving features control (`Measure` in D3).
pub const POWER_CTL: u8 = 0x2D;
/// Source of interrupts (read only): which events have occurred.
pub const INT_SOURCE: u8 = 0x30;
/// Data format control: `FULL_RES` in D3, range in D1..D0.
pub const DATA_FORMAT: u8 = 0x31;
/// X-axis data 0 (low byte); DATAX1, DATAY0..DATAZ1 follow at 0x33..=0x37.
pub const DATAX0: u8 = 0x32;
/// FIFO control: mode in D7..D6, trigger in D5, samples (watermark) in D4..D0.
pub const FIFO_CTL: u8 = 0x38;
/// FIFO status (read only): trigger event in D7, entries in D5..D0.
pub const FIFO_STATUS: u8 = 0x39;

/// The fixed value of `DEVID` (0o345).
pub const DEVICE_ID: u8 = 0xE5;

/// `POWER_CTL` D3: measurement mode (0 = standby).
pub const POWER_CTL_MEASURE: u8 = 0x08;
/// `DATA_FORMAT` D3: full resolution (3.9 mg/LSB, i.e. 1/256 g, on every range).
pub const DATA_FORMAT_FULL_RES: u8 = 0x08;
/// `INT_SOURCE` D0: the FIFO overran (samples were lost).
pub const INT_SOURCE_OVERRUN: u8 = 0x01;
/// `INT_SOURCE` D1: the FIFO holds at least the watermark number of samples.
pub const INT_SOURCE_WATERMARK: u8 = 0x02;
/// `FIFO_STATUS` D5..D0: number of samples available (the FIFO plus the output registers).
pub const FIFO_STATUS_ENTRIES_MASK: u8 = 0x3F;
/// `FIFO_CTL` D4..D0: the samples (watermark) field.
pub const FIFO_CTL_SAMPLES_MASK: u8 = 0x1F;

/// Bytes of one X/Y/Z sample: DATAX0..=DATAZ1, little-endian i16 per axis.
pub const SAMPLE_BYTES: usize = 6;
/// Samples the FIFO itself holds; `FIFO_STATUS` may report one more (the output registers).
pub const FIFO_DEPTH: usize = 32;

/// SPI: set in the command byte to read (clear to write).
pub const SPI_READ: u8 = 0x80;
/// SPI: set in the command byte for a multi-byte (auto-incrementing) access.
pub const SPI_MULTI_BYTE: u8 = 0x40;

/// Measurement range (`DATA_FORMAT` D1..D0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// ±2 g
    G2,
    /// ±4 g
    G4,
    /// ±8 g
    G8,
    /// ±16 g
    G16,
}

impl Range {
    /// The range bits of `DATA_FORMAT`.
    pub const fn bits(self) -> u8 {
        match self {
            Range::G2 => 0b00,
            Range::G4 => 0b01,
            Range::G8 => 0b10,
            Range::G16 => 0b11,
        }
    }
}

/// Output data rate (`BW_RATE` D3..D0, normal power). Bandwidth is half the rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DataRate {
    /// 100 Hz (the power-on default)
    Hz100,
    /// 200 Hz
    Hz200,
    /// 400 Hz
    Hz400,
    /// 800 Hz: the fastest recommended over I2C (400 kHz)
    Hz800,
    /// 1600 Hz: SPI only (the datasheet recommends SPI at 2 MHz or more)
    Hz1600,
    /// 3200 Hz: SPI only (the datasheet recommends SPI at 2 MHz or more)
    Hz3200,
}

impl DataRate {
    /// The rate code of `BW_RATE`.
    pub const fn code(self) -> u8 {
        match self {
            DataRate::Hz100 => 0x0A,
            DataRate::Hz200 => 0x0B,
            DataRate::Hz400 => 0x0C,
            DataRate::Hz800 => 0x0D,
            DataRate::Hz1600 => 0x0E,
            DataRate::Hz3200 => 0x0F,
        }
    }

    /// Samples per second.
    pub const fn hz(self) -> u32 {
        match self {
            DataRate::Hz100 => 100,
            DataRate::Hz200 => 200,
            DataRate::Hz400 => 400,
            DataRate::Hz800 => 800,
            DataRate::Hz1600 => 1600,
            DataRate::Hz3200 => 3200,
        }
    }
}

/// FIFO mode (`FIFO_CTL` D7..D6). The driver's `init` uses [`FifoMode::Stream`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FifoMode {
    /// FIFO bypassed: only the output registers hold data.
    Bypass,
    /// Collect up to 32 samples, then stop.
    Fifo,
    /// Keep the newest 32 samples, overwriting the oldest (and flagging overrun).
    Stream,
    /// Stream until a trigger, then keep the samples around it.
    Trigger,
}

impl FifoMode {
    /// The mode bits, already shifted into D7..D6.
    pub const fn bits(self) -> u8 {
        match self {
            FifoMode::Bypass => 0x00,
            FifoMode::Fifo => 0x40,
            FifoMode::Stream => 0x80,
            FifoMode::Trigger => 0xC0,
        }
    }
}
