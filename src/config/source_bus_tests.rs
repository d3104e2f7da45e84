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
