//! `[[source]]` with `kind = "modbus-tcp"` or `kind = "modbus-rtu"`: validated types and their
//! validation. The register map types themselves are in [`super::modbus_map`].
//!
//! ```toml
//! [[source]]
//! kind = "modbus-rtu"            # or "modbus-tcp" with host = "...", port = 502
//! path = "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A50285BI-if00-port0"
//! baud = 19200                   # parity = "even", data_bits = 8, stop_bits = 1 are the defaults
//! unit_id = 1
//! machine = "press-7"
//! poll_rate = 50                 # polls per second
//! timeout = "200ms"              # around every call
//! block_length = "1s"            # samples per record: this much time of polls
//!
//! [[source.block]]
//! function = "holding"           # or "input"
//! address = 100                  # 0-based protocol address
//! count = 2                      # default: just enough for the channels
//!
//! [[source.block.channel]]
//! sensor = "press-7-de"
//! offset = 0                     # register offset inside the block
//! type = "f32"                   # i16, u16, i32, u32, f32
//! word_order = "big"             # or "little" (low word first)
//! scale = 1.0
//! unit = "g"                     # or "m/s2"; "mm/s": a velocity the device measures itself,
//!                                # one velocity_rms event per poll (a `readings` line)
//! axis = "z"
//! ```

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Deserialize;

use super::modbus_map::{BlockMap, Channel, Function, ValueType, WordOrder, MAX_READ_REGISTERS};
use super::{not_identifier, Ctx, Result, SourceConfig};
use crate::event::{is_identifier, Unit};

/// A validated Modbus source: one device (unit id) behind one transport, polled at a fixed rate.
#[derive(Debug, Clone, PartialEq)]
pub struct ModbusSource {
    /// The machine every channel belongs to; an identifier.
    pub machine: String,
    pub transport: ModbusTransport,
    /// The device's unit (slave) id: 1..=247 on RTU, 0..=255 on TCP.
    pub unit_id: u8,
    /// Polls per second, in (0, 1000]. Key `poll_rate`, default 10.
    pub poll_rate_hz: f64,
    /// Around every connect and call, > 0. Key `timeout`, default 500 ms.
    pub timeout_ms: u64,
    /// Polls per record: `block_length` (default 1 s) at the poll rate, at least 1.
    pub block_polls: u32,
    /// First reconnect delay (key `reconnect_min`, default 100 ms); doubles per failed attempt up
    /// to `reconnect_max_ms` (key `reconnect_max`, default 30 s), each delay jittered.
    pub reconnect_min_ms: u64,
    pub reconnect_max_ms: u64,
    /// Read in order at every poll; at least one.
    pub blocks: Vec<BlockMap>,
}

/// How the device is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum ModbusTransport {
    /// `kind = "modbus-tcp"`: `host` (required) and `port` (default 502).
    Tcp { host: String, port: u16 },
    /// `kind = "modbus-rtu"`.
    Rtu(RtuPort),
}

/// A serial line for Modbus RTU.
#[derive(Debug, Clone, PartialEq)]
pub struct RtuPort {
    /// Required. Prefer `/dev/serial/by-id/...`: it names the adapter, not the order it was
    /// plugged in, so a reopened adapter is found again.
    pub path: PathBuf,
    /// Default 19200.
    pub baud: u32,
    /// Default `even` (the Modbus serial line default).
    pub parity: Parity,
    /// 7 or 8, default 8.
    pub data_bits: u8,
    /// 1 or 2, default 1.
    pub stop_bits: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Parity {
    None,
    Even,
    Odd,
}

impl ModbusSource {
    /// `"modbus-tcp"` or `"modbus-rtu"`.
    pub fn kind(&self) -> &'static str {
        match self.transport {
            ModbusTransport::Tcp { .. } => "modbus-tcp",
            ModbusTransport::Rtu(_) => "modbus-rtu",
        }
    }

    /// Where the device is, for messages: `host:port` or the serial path.
    pub fn endpoint(&self) -> String {
        match &self.transport {
            ModbusTransport::Tcp { host, port } => format!("{host}:{port}"),
            ModbusTransport::Rtu(p) => p.path.display().to_string(),
        }
    }
}

/// The TOML shape of both kinds; keys of the other kind are refused after deserializing.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModbus {
    machine: Option<String>,
    host: Option<String>,
    port: Option<i64>,
    path: Option<String>,
    baud: Option<i64>,
    parity: Option<Parity>,
    data_bits: Option<i64>,
    stop_bits: Option<i64>,
    unit_id: Option<i64>,
    poll_rate: Option<f64>,
    timeout: Option<String>,
    block_length: Option<String>,
    reconnect_min: Option<String>,
    reconnect_max: Option<String>,
    block: Option<Vec<RawBlock>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBlock {
    function: Option<Function>,
    address: Option<i64>,
    count: Option<i64>,
    channel: Option<Vec<RawChannel>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChannel {
    sensor: Option<String>,
    offset: Option<i64>,
    #[serde(rename = "type")]
    value_type: Option<ValueType>,
    word_order: Option<WordOrder>,
    scale: Option<f64>,
    unit: Option<Unit>,
    axis: Option<String>,
}

impl Ctx<'_> {
    /// Validates the keys of a modbus source; `kind` has been taken out of `table`.
    pub(super) fn validate_modbus(
        &self,
        prefix: &str,
        tcp: bool,
        table: toml::Table,
    ) -> Result<SourceConfig> {
        let raw: RawModbus = self.deserialize(toml::Value::Table(table), prefix, None)?;
        let key = |k: &str| format!("{prefix}.{k}");
        let other_kind = if tcp {
            [("path", raw.path.is_some()), ("baud", raw.baud.is_some())]
                .into_iter()
                .chain([("parity", raw.parity.is_some()), ("data_bits", raw.data_bits.is_some())])
                .chain([("stop_bits", raw.stop_bits.is_some())])
                .find(|(_, present)| *present)
        } else {
            [("host", raw.host.is_some()), ("port", raw.port.is_some())]
                .into_iter()
                .find(|(_, present)| *present)
        };
        if let Some((k, _)) = other_kind {
            let (this, that) =
                if tcp { ("modbus-tcp", "modbus-rtu") } else { ("modbus-rtu", "modbus-tcp") };
            return Err(self.err(key(k), format!("is a key of {that} sources, not {this}")));
        }
        let machine = raw.machine.ok_or_else(|| {
            self.err(key("machine"), "missing; name the machine this device is on")
        })?;
        if !is_identifier(&machine) {
            return Err(self.err(key("machine"), not_identifier("machine name", &machine)));
        }
        let transport = if tcp {
            let host = raw.host.filter(|h| !h.is_empty() && !h.contains(char::is_whitespace));
            let host = host.ok_or_else(|| {
                self.err(key("host"), "missing or empty; the device's host name or address")
            })?;
            let port = self.ranged(&key("port"), raw.port.unwrap_or(502), 1, 65_535)?;
            ModbusTransport::Tcp { host, port: port as u16 }
        } else {
            let path = raw.path.filter(|p| !p.is_empty()).ok_or_else(|| {
                self.err(
                    key("path"),
                    "missing or empty; the serial device, e.g. /dev/serial/by-id/usb-...",
                )
            })?;
            ModbusTransport::Rtu(RtuPort {
                path: PathBuf::from(path),
                baud: self.ranged(&key("baud"), raw.baud.unwrap_or(19_200), 300, 4_000_000)? as u32,
                parity: raw.parity.unwrap_or(Parity::Even),
                data_bits: self.ranged(&key("data_bits"), raw.data_bits.unwrap_or(8), 7, 8)? as u8,
                stop_bits: self.ranged(&key("stop_bits"), raw.stop_bits.unwrap_or(1), 1, 2)? as u8,
            })
        };
        let unit_max = if tcp { 255 } else { 247 };
        let unit_id =
            self.ranged(&key("unit_id"), raw.unit_id.unwrap_or(1), i64::from(!tcp), unit_max)?
                as u8;
        let poll_rate_hz = raw.poll_rate.unwrap_or(10.0);
        if !(poll_rate_hz > 0.0 && poll_rate_hz <= 1000.0) {
            return Err(self.err(
                key("poll_rate"),
                format!("must be in (0, 1000] polls per second, got {poll_rate_hz}"),
            ));
        }
        let positive = |k: &str, text: Option<&str>, default: i64| -> Result<u64> {
            let ms = self.duration(&key(k), text, default)?;
            u64::try_from(ms)
                .ok()
                .filter(|&ms| ms > 0)
                .ok_or_else(|| self.err(key(k), "must be longer than 0"))
        };
        let timeout_ms = positive("timeout", raw.timeout.as_deref(), 500)?;
        let block_ms = positive("block_length", raw.block_length.as_deref(), 1_000)?;
        let block_polls = ((block_ms as f64 * poll_rate_hz / 1000.0).round() as u32).max(1);
        let reconnect_min_ms = positive("reconnect_min", raw.reconnect_min.as_deref(), 100)?;
        let reconnect_max_ms = positive("reconnect_max", raw.reconnect_max.as_deref(), 30_000)?;
        if reconnect_max_ms < reconnect_min_ms {
            return Err(self.err(key("reconnect_max"), "must not be shorter than reconnect_min"));
        }
        let raw_blocks = raw.block.unwrap_or_default();
        if raw_blocks.is_empty() {
            return Err(self.err(
                key("block"),
                "missing; a modbus source needs at least one [[source.block]] to read",
            ));
        }
        let mut sensors = BTreeSet::new();
        let mut blocks = Vec::with_capacity(raw_blocks.len());
        for (b, raw_block) in raw_blocks.into_iter().enumerate() {
            blocks.push(self.validate_block(
                &key(&format!("block[{b}]")),
                raw_block,
                &mut sensors,
            )?);
        }
        Ok(SourceConfig::Modbus(ModbusSource {
            machine,
            transport,
            unit_id,
            poll_rate_hz,
            timeout_ms,
            block_polls,
            reconnect_min_ms,
            reconnect_max_ms,
            blocks,
        }))
    }

    fn validate_block(
        &self,
        prefix: &str,
        raw: RawBlock,
        sensors: &mut BTreeSet<String>,
    ) -> Result<BlockMap> {
        let key = |k: &str| format!("{prefix}.{k}");
        let function = raw.function.unwrap_or(Function::Holding);
        let address = raw
            .address
            .ok_or_else(|| self.err(key("address"), "missing; the block's first register"))?;
        let address = self.ranged(&key("address"), address, 0, 65_535)? as u16;
        let raw_channels = raw.channel.unwrap_or_default();
        if raw_channels.is_empty() {
            return Err(self.err(key("channel"), "missing; a block needs at least one channel"));
        }
        let mut channels = Vec::with_capacity(raw_channels.len());
        for (c, rc) in raw_channels.into_iter().enumerate() {
            let ck = |k: &str| format!("{prefix}.channel[{c}].{k}");
            let sensor = rc.sensor.ok_or_else(|| self.err(ck("sensor"), "missing"))?;
            if !is_identifier(&sensor) {
                return Err(self.err(ck("sensor"), not_identifier("sensor name", &sensor)));
            }
            if !sensors.insert(sensor.clone()) {
                return Err(self.err(ck("sensor"), format!("sensor {sensor:?} is used twice")));
            }
            let value_type = rc
                .value_type
                .ok_or_else(|| self.err(ck("type"), "missing; one of i16, u16, i32, u32, f32"))?;
            let scale = rc.scale.unwrap_or(1.0);
            if !scale.is_finite() || scale == 0.0 {
                return Err(self.err(ck("scale"), format!("must be finite and not 0, got {scale}")));
            }
            let offset = self.ranged(&ck("offset"), rc.offset.unwrap_or(0), 0, 124)? as u16;
            channels.push(Channel {
                sensor,
                offset,
                value_type,
                word_order: rc.word_order.unwrap_or(WordOrder::Big),
                scale,
                unit: rc
                    .unit
                    .ok_or_else(|| self.err(ck("unit"), "missing; \"g\", \"m/s2\" or \"mm/s\""))?,
                axis: rc.axis,
            });
        }
        let span = channels.iter().map(|c| c.offset + c.value_type.registers()).max().unwrap_or(1);
        let count = match raw.count {
            None => i64::from(span),
            Some(n) => n,
        };
        let count = self.ranged(&key("count"), count, 1, i64::from(MAX_READ_REGISTERS))? as u16;
        if span > count {
            return Err(self.err(
                key("count"),
                format!("{count} registers do not cover the channels, which need {span}"),
            ));
        }
        if u32::from(address) + u32::from(count) > 65_536 {
            return Err(self.err(key("count"), "the block runs past register 65535"));
        }
        Ok(BlockMap { function, address, count, channels })
    }

    /// `v` if it lies in `lo..=hi`, else an error naming the range.
    fn ranged(&self, key: &str, v: i64, lo: i64, hi: i64) -> Result<i64> {
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(self.err(key, format!("must be in {lo}..={hi}, got {v}")))
        }
    }
}

#[cfg(test)]
mod tests;
