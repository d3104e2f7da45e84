use super::super::{Config, ConfigError};
use super::*;

const TCP: &str = r#"
[gateway]
id = "gw-01"

[[source]]
kind = "modbus-tcp"
host = "10.0.0.5"
unit_id = 3
machine = "press-7"
poll_rate = 100
timeout = "250ms"
block_length = "500ms"

[[source.block]]
function = "input"
address = 100
count = 4

[[source.block.channel]]
sensor = "p7-z"
offset = 2
type = "f32"
word_order = "little"
unit = "g"
axis = "z"

[[source.block.channel]]
sensor = "p7-x"
type = "i16"
scale = 0.001
unit = "m/s2"
"#;

const RTU: &str = r#"
[gateway]
id = "gw-01"

[[source]]
kind = "modbus-rtu"
path = "/dev/serial/by-id/usb-FTDI-if00"
machine = "pump-2"

[[source.block]]
address = 0

[[source.block.channel]]
sensor = "pump-2-de"
type = "u32"
unit = "mm/s"
"#;

fn modbus(c: &Config) -> &ModbusSource {
    match &c.source[0] {
        SourceConfig::Modbus(m) => m,
        other => panic!("not a modbus source: {other:?}"),
    }
}

/// `text` with `from` replaced by `to` must fail on `key` with a message naming the file, the key
/// and `why`.
#[track_caller]
fn fails(text: &str, from: &str, to: &str, key: &str, why: &str) {
    assert!(text.contains(from), "{from:?} not in the example");
    let err: ConfigError = Config::from_toml(&text.replacen(from, to, 1), "site.toml").unwrap_err();
    let msg = err.to_string();
    assert_eq!(err.key(), Some(key), "{msg}");
    assert!(msg.starts_with("site.toml") && msg.contains(why), "{msg}");
}

#[test]
fn tcp_source_with_every_key() {
    let c = Config::from_toml(TCP, "site.toml").unwrap();
    let m = modbus(&c);
    assert_eq!(m.kind(), "modbus-tcp");
    assert_eq!(m.endpoint(), "10.0.0.5:502");
    assert_eq!(m.transport, ModbusTransport::Tcp { host: "10.0.0.5".into(), port: 502 });
    assert_eq!((m.unit_id, m.poll_rate_hz, m.timeout_ms, m.block_polls), (3, 100.0, 250, 50));
    assert_eq!((m.reconnect_min_ms, m.reconnect_max_ms), (100, 30_000));
    let b = &m.blocks[0];
    assert_eq!((b.function, b.address, b.count), (Function::Input, 100, 4));
    assert_eq!(
        b.channels[0],
        Channel {
            sensor: "p7-z".into(),
            offset: 2,
            value_type: ValueType::F32,
            word_order: WordOrder::Little,
            scale: 1.0,
            unit: Unit::G,
            axis: Some("z".into()),
        }
    );
    assert_eq!((b.channels[1].offset, b.channels[1].scale), (0, 0.001));
}

#[test]
fn rtu_source_defaults() {
    let c = Config::from_toml(RTU, "site.toml").unwrap();
    let m = modbus(&c);
    assert_eq!(m.kind(), "modbus-rtu");
    assert_eq!(
        m.transport,
        ModbusTransport::Rtu(RtuPort {
            path: "/dev/serial/by-id/usb-FTDI-if00".into(),
            baud: 19_200,
            parity: Parity::Even,
            data_bits: 8,
            stop_bits: 1,
        })
    );
    assert_eq!((m.unit_id, m.poll_rate_hz, m.timeout_ms, m.block_polls), (1, 10.0, 500, 10));
    // The count defaults to what the channels need.
    assert_eq!((m.blocks[0].function, m.blocks[0].count), (Function::Holding, 2));
}

#[test]
fn unknown_and_wrong_kind_keys_name_the_key() {
    fails(TCP, "unit_id = 3", "unit = 3", "source[0].unit", "unknown field `unit`");
    fails(TCP, "count = 4", "cnt = 4", "source[0].block[0].cnt", "unknown field");
    fails(TCP, "axis = \"z\"", "axes = \"z\"", "source[0].block[0].channel[0].axes", "unknown");
    fails(TCP, "unit_id = 3", "baud = 9600", "source[0].baud", "modbus-rtu sources");
    fails(RTU, "machine", "host = \"a\"\nmachine", "source[0].host", "modbus-tcp sources");
}

#[test]
fn impossible_values_are_refused() {
    fails(TCP, "unit_id = 3", "unit_id = 256", "source[0].unit_id", "0..=255");
    fails(RTU, "machine", "unit_id = 0\nmachine", "source[0].unit_id", "1..=247");
    fails(TCP, "poll_rate = 100", "poll_rate = 0", "source[0].poll_rate", "(0, 1000]");
    fails(TCP, "timeout = \"250ms\"", "timeout = \"0s\"", "source[0].timeout", "longer than 0");
    fails(
        TCP,
        "timeout = \"250ms\"",
        "timeout = \"soon\"",
        "source[0].timeout",
        "invalid duration",
    );
    fails(TCP, "host = \"10.0.0.5\"", "", "source[0].host", "missing");
    fails(
        TCP,
        "machine = \"press-7\"",
        "machine = \"press 7\"",
        "source[0].machine",
        "[A-Za-z0-9_.-]",
    );
    fails(RTU, "path = \"/dev/serial/by-id/usb-FTDI-if00\"", "", "source[0].path", "by-id");
    fails(RTU, "machine", "parity = \"mark\"\nmachine", "source[0].parity", "unknown variant");
    fails(RTU, "machine", "stop_bits = 3\nmachine", "source[0].stop_bits", "1..=2");
    fails(TCP, "count = 4", "count = 3", "source[0].block[0].count", "need 4");
    fails(TCP, "count = 4", "count = 126", "source[0].block[0].count", "1..=125");
    fails(TCP, "type = \"f32\"", "type = \"f64\"", "source[0].block[0].channel[0].type", "f32");
    fails(TCP, "scale = 0.001", "scale = 0.0", "source[0].block[0].channel[1].scale", "not 0");
    fails(
        TCP,
        "sensor = \"p7-x\"",
        "sensor = \"p7-z\"",
        "source[0].block[0].channel[1].sensor",
        "twice",
    );
    fails(RTU, "unit = \"mm/s\"", "", "source[0].block[0].channel[0].unit", "missing");
    fails(RTU, "address = 0", "address = 65535\ncount = 2", "source[0].block[0].count", "65535");
    fails(
        RTU,
        "[[source.block]]\naddress = 0\n\n[[source.block.channel]]",
        "[[source.other]]",
        "source[0].other",
        "unknown",
    );
}
