//! Transaction-list tests against `embedded-hal-mock`. Register addresses and values are written
//! as literal bytes (not the driver's constants) so the tests check the register facts too.

use embedded_hal::i2c::ErrorKind as I2cErrorKind;
use embedded_hal::spi::{ErrorKind as SpiErrorKind, ErrorType, Operation, SpiDevice};
use embedded_hal_mock::eh1::i2c::{Mock as I2cMock, Transaction as I2cTx};
use embedded_hal_mock::eh1::spi::{Mock as SpiMock, Transaction as SpiTx};

use super::*;

const ADDR: u8 = 0x53; // ALT ADDRESS low

fn cfg(range: Range, data_rate: DataRate, watermark: u8) -> Config {
    Config { range, data_rate, watermark }
}

// ---- SPI framing helpers: every SpiDevice call is start .. end around its operations ----

/// A register read: command byte (0x80 read | 0x40 multi-byte | address), then the response.
fn spi_read(cmd: u8, response: &[u8]) -> Vec<SpiTx<u8>> {
    vec![
        SpiTx::transaction_start(),
        SpiTx::write_vec(vec![cmd]),
        SpiTx::read_vec(response.to_vec()),
        SpiTx::transaction_end(),
    ]
}

/// A read after a FIFO pop: the 5 µs gap first, then as `spi_read`.
fn spi_fifo_read(cmd: u8, response: &[u8]) -> Vec<SpiTx<u8>> {
    vec![
        SpiTx::transaction_start(),
        SpiTx::delay(5_000),
        SpiTx::write_vec(vec![cmd]),
        SpiTx::read_vec(response.to_vec()),
        SpiTx::transaction_end(),
    ]
}

/// A register write: address byte (0x80 clear), value.
fn spi_write(reg: u8, value: u8) -> Vec<SpiTx<u8>> {
    vec![SpiTx::transaction_start(), SpiTx::write_vec(vec![reg, value]), SpiTx::transaction_end()]
}

// ---- I2C ----

#[test]
fn i2c_init_writes_the_documented_sequence() {
    let expectations = [
        I2cTx::write_read(ADDR, vec![0x00], vec![0xE5]), // DEVID 0x00 reads 0xE5: an ADXL345
        I2cTx::write(ADDR, vec![0x2D, 0x00]), // POWER_CTL 0x2D = 0x00: standby while configuring
        I2cTx::write(ADDR, vec![0x31, 0x09]), // DATA_FORMAT 0x31 = FULL_RES 0x08 | ±4 g 0b01
        I2cTx::write(ADDR, vec![0x2C, 0x0D]), // BW_RATE 0x2C = rate code 0x0D: 800 Hz
        I2cTx::write(ADDR, vec![0x38, 0x90]), // FIFO_CTL 0x38 = stream 0x80 | watermark 16 0x10
        I2cTx::write(ADDR, vec![0x2D, 0x08]), // POWER_CTL 0x2D = Measure 0x08
    ];
    let mut accel = Adxl345::new_i2c(I2cMock::new(&expectations), I2cAddress::AltLow);
    accel.init(Config::default()).unwrap();
    accel.destroy().done();
}

#[test]
fn i2c_wrong_device_id_is_reported_with_what_was_found() {
    let expectations = [
        I2cTx::write_read(0x1D, vec![0x00], vec![0xE6]), // DEVID at 0x1D (ALT high) reads 0xE6
    ];
    let mut accel = Adxl345::new_i2c(I2cMock::new(&expectations), I2cAddress::AltHigh);
    let err = accel.init(Config::default()).unwrap_err();
    assert_eq!(err, Error::WrongDevice(0xE6));
    accel.destroy().done();
}

#[test]
fn i2c_fifo_read_decodes_little_endian_signed_samples() {
    let expectations = [
        I2cTx::write_read(ADDR, vec![0x39], vec![0x03]), // FIFO_STATUS 0x39: 3 entries
        I2cTx::write_read(
            ADDR,
            vec![0x32], // DATAX0 0x32, auto-increment to DATAZ1 0x37
            vec![
                0x01, 0x00, // X = 1
                0xFF, 0xFF, // Y = -1
                0x00, 0x01, // Z = 256 (1 g)
            ],
        ),
        I2cTx::write_read(
            ADDR,
            vec![0x32],
            vec![
                0x00, 0x80, // X = i16::MIN
                0xFF, 0x7F, // Y = i16::MAX
                0x00, 0xFF, // Z = -256 (-1 g)
            ],
        ),
        I2cTx::write_read(
            ADDR,
            vec![0x32],
            vec![
                0x34, 0x12, // X = 0x1234
                0xCC, 0xFE, // Y = -0x134 (-308)
                0x00, 0x00, // Z = 0
            ],
        ),
    ];
    let mut accel = Adxl345::new_i2c(I2cMock::new(&expectations), I2cAddress::AltLow);
    let mut out = [Sample::default(); 33];
    let n = accel.read_fifo(&mut out).unwrap();
    assert_eq!(n, 3);
    assert_eq!(out[0], Sample { x: 1, y: -1, z: 256 });
    assert_eq!(out[1], Sample { x: i16::MIN, y: i16::MAX, z: -256 });
    assert_eq!(out[2], Sample { x: 0x1234, y: -308, z: 0 });
    assert_eq!(out[3], Sample::default(), "nothing written past n");
    accel.destroy().done();
}

#[test]
fn i2c_fifo_read_stops_at_the_buffer_and_masks_the_trigger_bit() {
    let expectations = [
        // FIFO_STATUS 0x39 = 0xA1: FIFO_TRIG (D7) set, D6 reserved, entries (D5..D0) = 33
        I2cTx::write_read(ADDR, vec![0x39], vec![0xA1]),
        I2cTx::write_read(ADDR, vec![0x32], vec![2, 0, 3, 0, 4, 0]), // X 2, Y 3, Z 4
        I2cTx::write_read(ADDR, vec![0x32], vec![5, 0, 6, 0, 7, 0]), // X 5, Y 6, Z 7
    ];
    let mut accel = Adxl345::new_i2c(I2cMock::new(&expectations), I2cAddress::AltLow);
    let mut out = [Sample::default(); 2];
    assert_eq!(accel.read_fifo(&mut out).unwrap(), 2);
    assert_eq!(out[1], Sample { x: 5, y: 6, z: 7 });
    accel.destroy().done();
}

#[test]
fn i2c_empty_fifo_reads_only_the_status() {
    let expectations = [
        I2cTx::write_read(ADDR, vec![0x39], vec![0x00]), // FIFO_STATUS 0x39: 0 entries
    ];
    let mut accel = Adxl345::new_i2c(I2cMock::new(&expectations), I2cAddress::AltLow);
    let mut out = [Sample::default(); 32];
    assert_eq!(accel.read_fifo(&mut out).unwrap(), 0);
    accel.destroy().done();
}

#[test]
fn i2c_overrun_flag_is_int_source_bit_0() {
    let expectations = [
        // INT_SOURCE 0x30 = 0x83: DATA_READY D7 | Watermark D1 | Overrun D0
        I2cTx::write_read(ADDR, vec![0x30], vec![0x83]),
        // INT_SOURCE 0x30 = 0x82: DATA_READY D7 | Watermark D1, no overrun
        I2cTx::write_read(ADDR, vec![0x30], vec![0x82]),
    ];
    let mut accel = Adxl345::new_i2c(I2cMock::new(&expectations), I2cAddress::AltLow);
    assert!(accel.fifo_overrun().unwrap());
    assert!(!accel.fifo_overrun().unwrap());
    accel.destroy().done();
}

#[test]
fn i2c_bus_errors_propagate_as_bus() {
    let expectations = [
        // DEVID 0x00: the bus fails (e.g. NACK)
        I2cTx::write_read(ADDR, vec![0x00], vec![0x00]).with_error(I2cErrorKind::Other),
        I2cTx::write_read(ADDR, vec![0x39], vec![0x02]), // FIFO_STATUS 0x39: 2 entries
        // DATAX0 0x32: the first sample read fails
        I2cTx::write_read(ADDR, vec![0x32], vec![0; 6]).with_error(I2cErrorKind::Other),
    ];
    let mut accel = Adxl345::new_i2c(I2cMock::new(&expectations), I2cAddress::AltLow);
    let err = accel.init(Config::default()).unwrap_err();
    assert_eq!(err, Error::Bus(I2cErrorKind::Other));
    let mut out = [Sample::default(); 4];
    let err = accel.read_fifo(&mut out).unwrap_err();
    assert_eq!(err, Error::Bus(I2cErrorKind::Other));
    accel.destroy().done();
}

#[test]
fn i2c_rejects_3200_hz_before_any_bus_traffic() {
    let mut accel = Adxl345::new_i2c(I2cMock::new(&[]), I2cAddress::AltLow);
    let err = accel.init(cfg(Range::G2, DataRate::Hz3200, 16)).unwrap_err();
    assert_eq!(err, Error::RateTooHighForI2c(DataRate::Hz3200));
    accel.destroy().done(); // no transaction was expected, none happened
}

#[test]
fn i2c_runs_at_1600_hz() {
    let expectations = [
        I2cTx::write_read(ADDR, vec![0x00], vec![0xE5]), // DEVID 0x00 reads 0xE5: an ADXL345
        I2cTx::write(ADDR, vec![0x2D, 0x00]), // POWER_CTL 0x2D = 0x00: standby while configuring
        I2cTx::write(ADDR, vec![0x31, 0x08]), // DATA_FORMAT 0x31 = FULL_RES 0x08 | ±2 g 0b00
        I2cTx::write(ADDR, vec![0x2C, 0x0E]), // BW_RATE 0x2C = rate code 0x0E: 1600 Hz
        I2cTx::write(ADDR, vec![0x38, 0x90]), // FIFO_CTL 0x38 = stream 0x80 | watermark 16 0x10
        I2cTx::write(ADDR, vec![0x2D, 0x08]), // POWER_CTL 0x2D = Measure 0x08
    ];
    let mut accel = Adxl345::new_i2c(I2cMock::new(&expectations), I2cAddress::AltLow);
    accel.init(cfg(Range::G2, DataRate::Hz1600, 16)).unwrap();
    accel.destroy().done();
}

#[test]
fn invalid_watermarks_are_rejected_before_any_bus_traffic() {
    let mut accel = Adxl345::new_i2c(I2cMock::new(&[]), I2cAddress::AltLow);
    for wm in [0, 32, 255] {
        let err = accel.init(cfg(Range::G2, DataRate::Hz100, wm)).unwrap_err();
        assert_eq!(err, Error::InvalidWatermark(wm));
    }
    accel.destroy().done();
}

// ---- SPI ----

#[test]
fn spi_init_at_3200_hz_writes_the_documented_sequence() {
    let expectations: Vec<SpiTx<u8>> = [
        spi_read(0x80, &[0xE5]), // read 0x80 | DEVID 0x00 -> 0xE5
        spi_write(0x2D, 0x00),   // POWER_CTL 0x2D = 0x00: standby
        spi_write(0x31, 0x0B), // DATA_FORMAT 0x31 = FULL_RES 0x08 | ±16 g 0b11 (SPI bit D6 = 0: 4-wire)
        spi_write(0x2C, 0x0F), // BW_RATE 0x2C = rate code 0x0F: 3200 Hz
        spi_write(0x38, 0x9F), // FIFO_CTL 0x38 = stream 0x80 | watermark 31 0x1F
        spi_write(0x2D, 0x08), // POWER_CTL 0x2D = Measure 0x08
    ]
    .concat();
    let mut accel = Adxl345::new_spi(SpiMock::new(&expectations));
    accel.init(cfg(Range::G16, DataRate::Hz3200, 31)).unwrap();
    accel.destroy().done();
}

#[test]
fn spi_wrong_device_id() {
    let expectations = spi_read(0x80, &[0xFF]); // DEVID reads 0xFF: MISO floating high
    let mut accel = Adxl345::new_spi(SpiMock::new(&expectations));
    let err = accel.init(Config::default()).unwrap_err();
    assert_eq!(err, Error::WrongDevice(0xFF));
    accel.destroy().done();
}

#[test]
fn spi_fifo_read_uses_multi_byte_reads_with_the_pop_gap() {
    let expectations: Vec<SpiTx<u8>> = [
        // 0xB9 = read 0x80 | FIFO_STATUS 0x39 (single byte: no 0x40); 2 entries
        spi_fifo_read(0xB9, &[0x02]),
        // 0xF2 = read 0x80 | multi-byte 0x40 | DATAX0 0x32
        spi_fifo_read(
            0xF2,
            &[
                0x00, 0xFE, // X = -512 (-2 g)
                0x80, 0x00, // Y = 128 (0.5 g)
                0xF0, 0xFF, // Z = -16
            ],
        ),
        spi_fifo_read(0xF2, &[0x10, 0x00, 0x20, 0x00, 0x30, 0x00]), // X 16, Y 32, Z 48
    ]
    .concat();
    let mut accel = Adxl345::new_spi(SpiMock::new(&expectations));
    let mut out = [Sample::default(); 32];
    assert_eq!(accel.read_fifo(&mut out).unwrap(), 2);
    assert_eq!(out[0], Sample { x: -512, y: 128, z: -16 });
    assert_eq!(out[1], Sample { x: 16, y: 32, z: 48 });
    accel.destroy().done();
}

#[test]
fn spi_overrun_flag() {
    let expectations: Vec<SpiTx<u8>> = [
        spi_read(0xB0, &[0x01]), // read 0x80 | INT_SOURCE 0x30 -> Overrun D0 only
        spi_read(0xB0, &[0x80]), // INT_SOURCE -> DATA_READY only
    ]
    .concat();
    let mut accel = Adxl345::new_spi(SpiMock::new(&expectations));
    assert!(accel.fifo_overrun().unwrap());
    assert!(!accel.fifo_overrun().unwrap());
    accel.destroy().done();
}

/// The SPI mock cannot inject errors, so a device that always fails stands in for a broken bus.
#[derive(Debug, Default)]
struct FailingSpi {
    calls: usize,
}

impl ErrorType for FailingSpi {
    type Error = SpiErrorKind;
}

impl SpiDevice for FailingSpi {
    fn transaction(&mut self, _ops: &mut [Operation<'_, u8>]) -> Result<(), SpiErrorKind> {
        self.calls += 1;
        Err(SpiErrorKind::ModeFault)
    }
}

#[test]
fn spi_bus_errors_propagate_as_bus() {
    let mut accel = Adxl345::new_spi(FailingSpi::default());
    let bus = Error::Bus(SpiErrorKind::ModeFault);
    assert_eq!(accel.init(Config::default()).unwrap_err(), bus);
    assert_eq!(accel.fifo_overrun().unwrap_err(), bus);
    assert_eq!(accel.read_fifo(&mut [Sample::default(); 4]).unwrap_err(), bus);
    assert_eq!(accel.destroy().calls, 3, "each call stopped at its first failure");
}

// ---- values and messages ----

#[test]
fn to_g_is_one_256th_g_per_lsb() {
    let s = Sample { x: 256, y: -512, z: 64 };
    assert_eq!(s.to_g(FULL_RES_G_PER_LSB), (1.0, -2.0, 0.25));
    assert_eq!(SPI_MODE, embedded_hal::spi::MODE_3);
}

#[test]
fn errors_say_what_was_wrong() {
    let e: Error<I2cErrorKind> = Error::WrongDevice(0x00);
    assert!(e.to_string().contains("DEVID reads 0x00, expected 0xe5"), "{e}");
    let e: Error<I2cErrorKind> = Error::RateTooHighForI2c(DataRate::Hz3200);
    assert!(e.to_string().contains("3200 Hz is too high for I2C (at most 1600 Hz)"), "{e}");
    let e: Error<I2cErrorKind> = Error::InvalidWatermark(0);
    assert!(e.to_string().contains("watermark 0 is outside 1..=31"), "{e}");
    let e = Error::Bus(I2cErrorKind::Other);
    assert!(e.to_string().contains("bus error"), "{e}");
}

#[test]
fn register_codes_match_the_datasheet_tables() {
    // BW_RATE rate codes (D3..D0), normal power
    let rates = [
        (DataRate::Hz100, 0x0A),
        (DataRate::Hz200, 0x0B),
        (DataRate::Hz400, 0x0C),
        (DataRate::Hz800, 0x0D),
        (DataRate::Hz1600, 0x0E),
        (DataRate::Hz3200, 0x0F),
    ];
    for (rate, code) in rates {
        assert_eq!(rate.code(), code, "{rate:?}");
    }
    // DATA_FORMAT range bits (D1..D0)
    let ranges = [(Range::G2, 0), (Range::G4, 1), (Range::G8, 2), (Range::G16, 3)];
    for (range, bits) in ranges {
        assert_eq!(range.bits(), bits, "{range:?}");
    }
    // FIFO_CTL mode bits (D7..D6)
    let modes = [
        (FifoMode::Bypass, 0x00),
        (FifoMode::Fifo, 0x40),
        (FifoMode::Stream, 0x80),
        (FifoMode::Trigger, 0xC0),
    ];
    for (mode, bits) in modes {
        assert_eq!(mode.bits(), bits, "{mode:?}");
    }
}
