//! Sensor drivers: pure register-level code, generic over the embedded-hal 1.0 bus traits.
//!
//! Nothing here opens a device node, reads a clock or sleeps on its own: the caller hands in a
//! bus (`linux-embedded-hal` on a board, `embedded-hal-mock` in tests) and gets it back with
//! `destroy`. Delays the part needs between bus operations are expressed as bus operations
//! (`Operation::DelayNs` on SPI) so the bus implementation carries them out.
//!
//! - [`adxl345`]: Analog Devices ADXL345 accelerometer over I2C or SPI, FIFO stream mode.

pub mod adxl345;
