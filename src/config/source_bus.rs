//! `[[source]]` with `kind = "i2c"` or `kind = "spi"`: an ADXL345 accelerometer on a bus.
//!
//! ```toml
//! [[source]]
//! kind = "i2c"
//! device = "/dev/i2c-1"     # required
//! address = 0x53            # 0x53 (SDO/ALT ADDRESS low, the default) or 0x1D (high)
//! rate_hz = 800             # 100, 200, 400, 800, 1600 (I2C at most 1600; default 800)
//! range_g = 4               # 2, 4, 8, 16 (default 4)
//! machine = "press-7"       # required: the rule's key
//! sensor = "s1"             # required
//! axes = ["z"]              # any of "x", "y", "z", no repeats (default ["z"])
//! block = "1s"              # samples per record sent downstream (default "1s")
//!
//! [[source]]
//! kind = "spi"
//! device = "/dev/spidev0.0" # required
//! max_speed_hz = 5000000    # 100 kHz..=5 MHz (default 5 MHz; >= 2 MHz for 1600 and 3200 Hz)
//! mode = 3                  # the ADXL345 needs SPI mode 3; only 3 is accepted
//! rate_hz = 3200            # up to 3200 on SPI
//! # range_g, machine, sensor, axes, block as for i2c
//! ```
//!
//! With one axis the records' sensor name is `sensor`; with several, `{sensor}.{axis}` (one
//! sensor per axis, since events are per sensor).

use std::path::PathBuf;

use serde::Deserialize;

use super::{duration, not_identifier, Ctx, Result};
use crate::driver::adxl345::{DataRate, I2cAddress, Range, I2C_MAX_RATE};
use crate::event::is_identifier;

pub use crate::event::schema2::Axis;

/// What both buses share: the sensor, its settings and where its samples go.
#[derive(Debug, Clone, PartialEq)]
pub struct BusSensor {
    /// The device node (`/dev/i2c-1`, `/dev/spidev0.0`); non-empty.
    pub device: PathBuf,
    pub rate: DataRate,
    pub range: Range,
    pub machine: String,
    pub sensor: String,
    /// Non-empty, no repeats, in the order written.
    pub axes: Vec<Axis>,
    /// Samples per record downstream, as a duration; 10 ms..=10 s.
    pub block_ms: i64,
}

impl BusSensor {
    /// The sensor name the records of `axis` carry (see the module documentation).
    pub fn sensor_for(&self, axis: Axis) -> String {
        if self.axes.len() == 1 {
            self.sensor.clone()
        } else {
            format!("{}.{}", self.sensor, axis.as_str())
        }
    }
}

/// `kind = "i2c"`.
#[derive(Debug, Clone, PartialEq)]
pub struct I2cSource {
    pub address: I2cAddress,
    pub sensor: BusSensor,
}

/// `kind = "spi"` (always SPI mode 3).
#[derive(Debug, Clone, PartialEq)]
pub struct SpiSource {
    /// 100_000..=5_000_000.
    pub max_speed_hz: u32,
    pub sensor: BusSensor,
}

impl BusSensor {
    /// `800 Hz ±4 g, axes z → press-7/s1` for `check-config`.
    fn summary(&self) -> String {
        let axes: Vec<&str> = self.axes.iter().map(|a| a.as_str()).collect();
        format!(
            "{} Hz, axes {}, blocks of {} ms → {}/{}",
            self.rate.hz(),
            axes.join(","),
            self.block_ms,
            self.machine,
            self.sensor
        )
    }
}

impl I2cSource {
    /// One line for `check-config`.
    pub fn summary(&self) -> String {
        format!(
            "i2c {} address {:#04x}, {}",
            self.sensor.device.display(),
            self.address.addr(),
            self.sensor.summary()
        )
    }
}

impl SpiSource {
    /// One line for `check-config`.
    pub fn summary(&self) -> String {
        format!(
            "spi {} at {} Hz mode 3, {}",
            self.sensor.device.display(),
            self.max_speed_hz,
            self.sensor.summary()
        )
    }
}

/// Both kinds' keys (`kind` taken out); `validate_i2c` / `validate_spi` refuse the other bus's.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBusSource {
    address: Option<i64>,
    max_speed_hz: Option<i64>,
    mode: Option<i64>,
    device: Option<String>,
    rate_hz: Option<i64>,
    range_g: Option<i64>,
    machine: Option<String>,
    sensor: Option<String>,
    axes: Option<Vec<Axis>>,
    block: Option<String>,
}

const SPI_MAX_HZ: i64 = 5_000_000;
const SPI_MIN_HZ: i64 = 100_000;
const RATES: [DataRate; 6] = [
    DataRate::Hz100,
    DataRate::Hz200,
    DataRate::Hz400,
    DataRate::Hz800,
    DataRate::Hz1600,
    DataRate::Hz3200,
];

impl Ctx<'_> {
    pub(super) fn validate_i2c(&self, prefix: &str, raw: RawBusSource) -> Result<I2cSource> {
        let spi_key = [("max_speed_hz", raw.max_speed_hz), ("mode", raw.mode)];
        if let Some((k, _)) = spi_key.iter().find(|(_, v)| v.is_some()) {
            return Err(self
                .err(format!("{prefix}.{k}"), "unknown key for an i2c source (it is an spi key)"));
        }
        let address = match raw.address {
            None | Some(0x53) => I2cAddress::AltLow,
            Some(0x1D) => I2cAddress::AltHigh,
            Some(a) => {
                return Err(self.err(
                    format!("{prefix}.address"),
                    format!(
                        "{a:#04x} is not an ADXL345 address: 0x53 (SDO/ALT ADDRESS pin low) or \
                         0x1D (pin high)"
                    ),
                ))
            }
        };
        let sensor = self.validate_bus_sensor(prefix, raw, I2C_MAX_RATE, "I2C")?;
        Ok(I2cSource { address, sensor })
    }

    pub(super) fn validate_spi(&self, prefix: &str, raw: RawBusSource) -> Result<SpiSource> {
        if raw.address.is_some() {
            return Err(self.err(
                format!("{prefix}.address"),
                "unknown key for an spi source (it is an i2c key)",
            ));
        }
        let speed = raw.max_speed_hz.unwrap_or(SPI_MAX_HZ);
        if !(SPI_MIN_HZ..=SPI_MAX_HZ).contains(&speed) {
            return Err(self.err(
                format!("{prefix}.max_speed_hz"),
                format!(
                    "must be in {SPI_MIN_HZ}..={SPI_MAX_HZ} (the ADXL345's 5 MHz), got {speed}"
                ),
            ));
        }
        if let Some(mode) = raw.mode.filter(|&m| m != 3) {
            return Err(self.err(
                format!("{prefix}.mode"),
                format!("the ADXL345 needs SPI mode 3 (CPOL = 1, CPHA = 1), got {mode}"),
            ));
        }
        let sensor = self.validate_bus_sensor(prefix, raw, DataRate::Hz3200, "SPI")?;
        let max_speed_hz = u32::try_from(speed).unwrap_or(5_000_000);
        Ok(SpiSource { max_speed_hz, sensor })
    }

    fn validate_bus_sensor(
        &self,
        prefix: &str,
        raw: RawBusSource,
        max_rate: DataRate,
        bus: &str,
    ) -> Result<BusSensor> {
        let key = |k: &str| format!("{prefix}.{k}");
        let device = match raw.device {
            None => {
                return Err(self.err(key("device"), "missing; the device node, e.g. /dev/i2c-1"))
            }
            Some(d) if d.is_empty() => return Err(self.err(key("device"), "must not be empty")),
            Some(d) => PathBuf::from(d),
        };
        let hz = raw.rate_hz.unwrap_or(800);
        let rate = RATES.into_iter().find(|r| i64::from(r.hz()) == hz).ok_or_else(|| {
            self.err(
                key("rate_hz"),
                format!("{hz} is not an ADXL345 rate (100, 200, 400, 800, 1600, 3200)"),
            )
        })?;
        if rate > max_rate {
            return Err(self.err(
                key("rate_hz"),
                format!("{hz} Hz is too fast for {bus} (at most {} Hz); use SPI", max_rate.hz()),
            ));
        }
        let range = match raw.range_g.unwrap_or(4) {
            2 => Range::G2,
            4 => Range::G4,
            8 => Range::G8,
            16 => Range::G16,
            g => {
                return Err(self.err(key("range_g"), format!("must be 2, 4, 8 or 16 (g), got {g}")))
            }
        };
        let machine = self.identifier(&key("machine"), raw.machine)?;
        let sensor = self.identifier(&key("sensor"), raw.sensor)?;
        let axes = raw.axes.unwrap_or_else(|| vec![Axis::Z]);
        if axes.is_empty() {
            return Err(self.err(key("axes"), "must list at least one of \"x\", \"y\", \"z\""));
        }
        for (i, a) in axes.iter().enumerate() {
            if axes[..i].contains(a) {
                return Err(self.err(
                    format!("{prefix}.axes[{i}]"),
                    format!("axis {:?} is listed twice", a.as_str()),
                ));
            }
        }
        let block_ms = match raw.block.as_deref() {
            None => 1_000,
            Some(t) => duration::parse_ms(t).map_err(|e| self.err(key("block"), e))?,
        };
        if !(10..=10_000).contains(&block_ms) || block_ms % 10 != 0 {
            return Err(self.err(
                key("block"),
                format!("must be a multiple of 10ms in 10ms..=10s, got {block_ms} ms"),
            ));
        }
        let s = BusSensor { device, rate, range, machine, sensor, axes, block_ms };
        if let Some(a) = s.axes.iter().find(|&&a| !is_identifier(&s.sensor_for(a))) {
            return Err(self.err(key("sensor"), not_identifier("sensor", &s.sensor_for(*a))));
        }
        Ok(s)
    }

    /// A required identifier (`machine`, `sensor`).
    fn identifier(&self, key: &str, v: Option<String>) -> Result<String> {
        let what = key.rsplit('.').next().unwrap_or(key);
        match v {
            None => Err(self.err(key, format!("missing; every bus source names its {what}"))),
            Some(v) if !is_identifier(&v) => Err(self.err(key, not_identifier(what, &v))),
            Some(v) => Ok(v),
        }
    }
}

#[cfg(test)]
mod tests {
    //! `kind = "i2c"` and `kind = "spi"`: defaults, every refusal naming file, key and why.

    use super::*;
    use crate::config::{Config, ConfigError, SourceConfig};

    const FILE: &str = "bus.toml";

    fn parse(source: &str) -> Result<Config, ConfigError> {
        Config::from_toml(&format!("[gateway]\nid = \"gw-01\"\n\n[[source]]\n{source}"), FILE)
    }

    #[track_caller]
    fn refused(source: &str, key: &str, why: &str) {
        let e = parse(source).unwrap_err();
        let text = e.to_string();
        assert_eq!(e.key(), Some(key), "{text}");
        assert!(text.contains(FILE) && text.contains(why), "{text}");
    }

    const I2C: &str =
        "kind = \"i2c\"\ndevice = \"/dev/i2c-1\"\nmachine = \"press-7\"\nsensor = \"s1\"\n";
    const SPI: &str =
        "kind = \"spi\"\ndevice = \"/dev/spidev0.0\"\nmachine = \"press-7\"\nsensor = \"s1\"\n";

    #[test]
    fn i2c_defaults() {
        let c = parse(I2C).unwrap();
        let expected = I2cSource {
            address: I2cAddress::AltLow,
            sensor: BusSensor {
                device: "/dev/i2c-1".into(),
                rate: DataRate::Hz800,
                range: Range::G4,
                machine: "press-7".into(),
                sensor: "s1".into(),
                axes: vec![Axis::Z],
                block_ms: 1_000,
            },
        };
        assert_eq!(c.source, vec![SourceConfig::I2c(expected)]);
    }

    #[test]
    fn spi_full_and_sensor_names_per_axis() {
        let c = parse(&format!(
            "{SPI}max_speed_hz = 2000000\nmode = 3\nrate_hz = 3200\nrange_g = 16\naxes = [\"x\", \"z\"]\nblock = \"250ms\"\n"
        ))
        .unwrap();
        let SourceConfig::Spi(s) = &c.source[0] else { panic!("{:?}", c.source) };
        assert_eq!(s.max_speed_hz, 2_000_000);
        assert_eq!(
            (s.sensor.rate, s.sensor.range, s.sensor.block_ms),
            (DataRate::Hz3200, Range::G16, 250)
        );
        assert_eq!(s.sensor.sensor_for(Axis::X), "s1.x");
        assert_eq!(s.sensor.sensor_for(Axis::Z), "s1.z");
        let c = parse(&format!("{I2C}address = 0x1D\nrate_hz = 1600\n")).unwrap();
        let SourceConfig::I2c(s) = &c.source[0] else { panic!("{:?}", c.source) };
        assert_eq!((s.address, s.sensor.rate), (I2cAddress::AltHigh, DataRate::Hz1600));
        assert_eq!(s.sensor.sensor_for(Axis::Z), "s1", "one axis: the sensor's own name");
    }

    #[test]
    fn refusals_name_the_key() {
        refused(
            &format!("{I2C}address = 0x54\n"),
            "source[0].address",
            "0x53 (SDO/ALT ADDRESS pin low)",
        );
        refused(&format!("{I2C}rate_hz = 3200\n"), "source[0].rate_hz", "too fast for I2C");
        refused(&format!("{I2C}rate_hz = 1000\n"), "source[0].rate_hz", "not an ADXL345 rate");
        refused(&format!("{I2C}range_g = 3\n"), "source[0].range_g", "2, 4, 8 or 16");
        refused(&format!("{I2C}mode = 3\n"), "source[0].mode", "spi key");
        refused(&format!("{I2C}axes = []\n"), "source[0].axes", "at least one");
        refused(&format!("{I2C}axes = [\"z\", \"z\"]\n"), "source[0].axes[1]", "listed twice");
        refused(&format!("{I2C}axes = [\"w\"]\n"), "source[0].axes[0]", "unknown variant");
        refused(&format!("{I2C}block = \"1ms\"\n"), "source[0].block", "multiple of 10ms");
        refused(&format!("{I2C}colour = 1\n"), "source[0].colour", "unknown field");
        refused("kind = \"i2c\"\nmachine = \"m\"\nsensor = \"s\"\n", "source[0].device", "missing");
        refused(
            "kind = \"i2c\"\ndevice = \"/dev/i2c-1\"\nsensor = \"s\"\n",
            "source[0].machine",
            "missing",
        );
        refused(
            "kind = \"i2c\"\ndevice = \"/dev/i2c-1\"\nmachine = \"m\"\nsensor = \"a b\"\n",
            "source[0].sensor",
            "[A-Za-z0-9_.-]",
        );
        refused(&format!("{SPI}mode = 0\n"), "source[0].mode", "SPI mode 3");
        refused(&format!("{SPI}max_speed_hz = 10000000\n"), "source[0].max_speed_hz", "5 MHz");
        refused(&format!("{SPI}address = 0x53\n"), "source[0].address", "i2c key");
    }
}
