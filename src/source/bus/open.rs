//! Opening the real device nodes and checking the part, with failures explained in words a
//! technician can act on (used by the daemon and by `linegate probe`).

use std::path::{Path, PathBuf};

use linux_embedded_hal::spidev::{SpiModeFlags, SpidevOptions};
use linux_embedded_hal::{I2CError, I2cdev, SPIError, SpidevDevice};

use crate::config::{I2cSource, SpiSource};
use crate::driver::adxl345::{self, Adxl345, I2cInterface, SpiInterface};

use super::driver_config;

/// Which bus a problem is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusKind {
    I2c { address: u8 },
    Spi,
}

/// What is wrong, in the categories a technician acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The device node does not exist: the bus is not enabled.
    MissingNode,
    /// The node exists but this user may not open it.
    PermissionDenied,
    /// Nothing answered (I2C: no acknowledge; SPI: DEVID reads 0x00 or 0xFF).
    NoAnswer,
    /// Something answered with another device ID.
    WrongDevice(u8),
    /// Anything else, with the system's words.
    Other(String),
}

/// A failure to open or check a bus sensor: device, bus, problem, and the advice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.explain())]
pub struct BusProblem {
    pub device: PathBuf,
    pub bus: BusKind,
    pub problem: Problem,
}

impl BusProblem {
    /// The problem and what to do about it.
    pub fn explain(&self) -> String {
        let dev = self.device.display();
        let (bus, overlay, group) = match self.bus {
            BusKind::I2c { .. } => ("I2C", "dtparam=i2c_arm=on", "i2c"),
            BusKind::Spi => ("SPI", "dtparam=spi=on", "spi"),
        };
        match (&self.problem, self.bus) {
            (Problem::MissingNode, _) => format!(
                "{dev} does not exist: the {bus} bus is not enabled. Add `{overlay}` to \
                 /boot/firmware/config.txt (/boot/config.txt on older images), reboot, and check \
                 that {dev} appears (`ls /dev/{}*`)",
                if bus == "I2C" { "i2c-" } else { "spidev" }
            ),
            (Problem::PermissionDenied, _) => format!(
                "permission denied opening {dev}: add the service user to the `{group}` group \
                 (`sudo usermod -aG {group} USER`, then log in again or restart the service), or \
                 install a udev rule giving that group access to {dev}"
            ),
            (Problem::NoAnswer, BusKind::I2c { address }) => format!(
                "nothing answered at address {address:#04x} on {dev}: check the wiring (SDA, SCL, \
                 3.3 V, GND, CS tied high for I2C) and the address: the SDO/ALT ADDRESS pin selects \
                 0x53 when low, 0x1D when high (`i2cdetect -y {}` lists what answers)",
                i2c_bus_number(&self.device)
            ),
            (Problem::NoAnswer, BusKind::Spi) => format!(
                "no answer on {dev} (DEVID reads 0x00 or 0xFF): check the wiring (SCLK, MOSI→SDA, \
                 MISO←SDO, CS to the chip select of this spidev node), 3.3 V and GND"
            ),
            (Problem::WrongDevice(id), BusKind::I2c { address }) => format!(
                "the device at {address:#04x} on {dev} has DEVID {id:#04x}, not an ADXL345's 0xe5: \
                 another part answers at that address. The ADXL345 is at 0x53 with SDO/ALT ADDRESS \
                 low and 0x1D with it high; set `address` to match the wiring"
            ),
            (Problem::WrongDevice(id), BusKind::Spi) => format!(
                "the device on {dev} has DEVID {id:#04x}, not an ADXL345's 0xe5: check that CS goes \
                 to the ADXL345 and that the bus runs in SPI mode 3"
            ),
            (Problem::Other(why), _) => format!("{bus} sensor on {dev}: {why}"),
        }
    }
}

/// `/dev/i2c-1` → `1`, for the `i2cdetect` hint.
fn i2c_bus_number(device: &Path) -> String {
    let name = device.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name.strip_prefix("i2c-").unwrap_or("N").to_owned()
}

/// Classifies an error from opening a device node.
fn open_problem(e: &std::io::Error) -> Problem {
    match e.kind() {
        std::io::ErrorKind::NotFound => Problem::MissingNode,
        std::io::ErrorKind::PermissionDenied => Problem::PermissionDenied,
        _ => Problem::Other(e.to_string()),
    }
}

/// Classifies an I2C transfer error: no acknowledge (ENXIO, EREMOTEIO as the Raspberry Pi's
/// controller reports it, EIO) is "nothing answered".
fn i2c_problem(e: &I2CError) -> Problem {
    use linux_embedded_hal::i2cdev::linux::LinuxI2CError;
    let io = match e.inner() {
        LinuxI2CError::Errno(n) => std::io::Error::from_raw_os_error(*n),
        LinuxI2CError::Io(e) => match e.raw_os_error() {
            Some(n) => std::io::Error::from_raw_os_error(n),
            None => std::io::Error::new(e.kind(), e.to_string()),
        },
    };
    match io.raw_os_error() {
        Some(libc::ENXIO | libc::EREMOTEIO | libc::EIO) => Problem::NoAnswer,
        _ => open_problem(&io),
    }
}

fn driver_problem<E: std::fmt::Debug>(
    e: adxl345::Error<E>,
    classify: impl Fn(&E) -> Problem,
) -> Problem {
    match e {
        adxl345::Error::Bus(b) => classify(&b),
        adxl345::Error::WrongDevice(0x00 | 0xFF) => Problem::NoAnswer,
        adxl345::Error::WrongDevice(id) => Problem::WrongDevice(id),
        other @ (adxl345::Error::RateTooHighForI2c(_) | adxl345::Error::InvalidWatermark(_)) => {
            Problem::Other(other.to_string())
        }
    }
}

/// Opens the I2C bus, checks DEVID and configures the part.
pub fn open_i2c(s: &I2cSource) -> Result<Adxl345<I2cInterface<I2cdev>>, BusProblem> {
    let device = s.sensor.device.clone();
    let bus = BusKind::I2c { address: s.address.addr() };
    let fail = |problem| BusProblem { device: device.clone(), bus, problem };
    let i2c = I2cdev::new(&device).map_err(|e| fail(open_problem(&e.into())))?;
    let mut accel = Adxl345::new_i2c(i2c, s.address);
    accel.init(driver_config(&s.sensor)).map_err(|e| fail(driver_problem(e, i2c_problem)))?;
    Ok(accel)
}

/// Opens the SPI device in mode 3 at the configured speed, checks DEVID and configures the part.
pub fn open_spi(s: &SpiSource) -> Result<Adxl345<SpiInterface<SpidevDevice>>, BusProblem> {
    let device = s.sensor.device.clone();
    let fail = |problem| BusProblem { device: device.clone(), bus: BusKind::Spi, problem };
    let spi_problem =
        |e: &SPIError| open_problem(&std::io::Error::new(e.inner().kind(), e.to_string()));
    let mut spi = SpidevDevice::open(&device).map_err(|e| fail(spi_problem(&e)))?;
    let options = SpidevOptions::new()
        .bits_per_word(8)
        .max_speed_hz(s.max_speed_hz)
        .mode(SpiModeFlags::SPI_MODE_3)
        .build();
    spi.configure(&options).map_err(|e| fail(open_problem(&e)))?;
    let mut accel = Adxl345::new_spi(spi);
    accel.init(driver_config(&s.sensor)).map_err(|e| fail(driver_problem(e, spi_problem)))?;
    Ok(accel)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(bus: BusKind, problem: Problem) -> String {
        BusProblem { device: "/dev/i2c-1".into(), bus, problem }.explain()
    }

    #[test]
    fn each_problem_says_what_to_do() {
        let i2c = BusKind::I2c { address: 0x53 };
        assert!(problem(i2c, Problem::MissingNode).contains("dtparam=i2c_arm=on"));
        assert!(problem(BusKind::Spi, Problem::MissingNode).contains("dtparam=spi=on"));
        assert!(problem(i2c, Problem::PermissionDenied).contains("usermod -aG i2c"));
        assert!(problem(BusKind::Spi, Problem::PermissionDenied).contains("`spi` group"));
        let no_answer = problem(i2c, Problem::NoAnswer);
        assert!(no_answer.contains("0x53 when low, 0x1D when high"), "{no_answer}");
        assert!(no_answer.contains("i2cdetect -y 1"), "{no_answer}");
        assert!(problem(i2c, Problem::WrongDevice(0xE6)).contains("DEVID 0xe6"));
        assert!(problem(BusKind::Spi, Problem::NoAnswer).contains("0x00 or 0xFF"));
    }

    #[test]
    fn errors_are_classified() {
        let denied = std::io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(open_problem(&denied), Problem::PermissionDenied);
        let missing = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(open_problem(&missing), Problem::MissingNode);
        let nack = I2CError::from(linux_embedded_hal::i2cdev::linux::LinuxI2CError::Errno(
            libc::EREMOTEIO,
        ));
        assert_eq!(i2c_problem(&nack), Problem::NoAnswer);
        let wrong: adxl345::Error<()> = adxl345::Error::WrongDevice(0xFF);
        assert_eq!(driver_problem(wrong, |_| Problem::MissingNode), Problem::NoAnswer);
        let wrong: adxl345::Error<()> = adxl345::Error::WrongDevice(0x42);
        assert_eq!(driver_problem(wrong, |_| Problem::MissingNode), Problem::WrongDevice(0x42));
    }
}
