//! `linegate probe` for Modbus sources: read the configured blocks a few times, print the readings
//! and their RMS, and explain failures in words a technician can act on.
//!
//! Entry points: [`probe`] (blocking; builds its own single-threaded runtime, so call it outside
//! any tokio runtime) and [`probe_async`] (inside one). Both return a [`ProbeReport`] whose
//! `Display` is the text to print; `ok` is false when the device could not be read at all or
//! answered only with exceptions.

use std::fmt;
use std::io;
use std::time::Duration;

use super::link::{self, ConnectError, ReadError};
use crate::config::modbus_map::{BlockMap, Function};
use crate::config::{ModbusSource, ModbusTransport};
use crate::source::spread::Spread;

/// What `probe` found out, as lines of text.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeReport {
    /// `modbus-tcp 10.0.0.5:502 unit 1 (machine press-7)`.
    pub title: String,
    /// Readings, RMS per channel, and explanations of what failed.
    pub lines: Vec<String>,
    /// True when at least one read was answered with registers.
    pub ok: bool,
    /// Per configured channel, in block order: its sensor, unit and the spread of its readings.
    pub channels: Vec<ChannelSpread>,
}

/// The readings of one channel during a probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelSpread {
    pub sensor: String,
    pub unit: &'static str,
    /// `None` when no read of its block was answered.
    pub spread: Option<Spread>,
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.title)?;
        for line in &self.lines {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// Blocking [`probe_async`]: reads every block of `source` `reads` times at its poll rate.
pub fn probe(source: &ModbusSource, reads: u32) -> ProbeReport {
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt.block_on(probe_async(source, reads)),
        Err(e) => ProbeReport {
            title: title(source),
            lines: vec![format!("cannot start the I/O runtime: {e}")],
            ok: false,
            channels: Vec::new(),
        },
    }
}

/// Reads every block of `source` `reads` times at its poll rate and reports.
pub async fn probe_async(source: &ModbusSource, reads: u32) -> ProbeReport {
    let mut report =
        ProbeReport { title: title(source), lines: Vec::new(), ok: false, channels: Vec::new() };
    let mut ctx = match link::connect(source).await {
        Ok(ctx) => ctx,
        Err(e) => {
            report.lines.push(format!("FAILED: {e}"));
            report.lines.push(explain_connect(&e, source));
            return report;
        }
    };
    let channels: Vec<(&str, &'static str)> = source
        .blocks
        .iter()
        .flat_map(|b| b.channels.iter().map(|c| (c.sensor.as_str(), c.unit.as_str())))
        .collect();
    let mut values: Vec<Vec<f64>> = vec![Vec::new(); channels.len()];
    let mut explained = Vec::new();
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / source.poll_rate_hz));
    'reads: for read in 1..=reads.max(1) {
        interval.tick().await;
        let mut column = 0;
        let mut parts = Vec::new();
        for block in &source.blocks {
            match link::read_block(&mut ctx, block, source.timeout_ms).await {
                Ok(Ok(registers)) => match block.decode(&registers) {
                    Ok(decoded) => {
                        for (c, v) in block.channels.iter().zip(decoded) {
                            parts.push(format!("{} = {v:.6} {}", c.sensor, c.unit.as_str()));
                            values[column].push(v);
                            column += 1;
                        }
                    }
                    Err(e) => parts.push(format!("{}: {e}", block.describe())),
                },
                Ok(Err(code)) => {
                    column += block.channels.len();
                    parts.push(format!(
                        "{}: device exception {code} (quality bad)",
                        block.describe()
                    ));
                    if !explained.contains(&code) {
                        explained.push(code);
                        report.lines.push(explain_exception(code, block, source.unit_id));
                    }
                }
                Err(e) => {
                    report.lines.push(format!("read {read}: FAILED: {e}"));
                    report.lines.push(explain_read(&e, source));
                    break 'reads;
                }
            }
        }
        report.lines.push(format!("read {read}: {}", parts.join(", ")));
    }
    for (&(sensor, unit), v) in channels.iter().zip(&values) {
        let spread = Spread::of(v);
        report.channels.push(ChannelSpread { sensor: sensor.to_owned(), unit, spread });
        let Some(s) = spread else {
            report.lines.push(format!("{sensor}: no readings"));
            continue;
        };
        report.ok = true;
        report.lines.push(format!(
            "{sensor}: {} readings, mean {:.6}, RMS about the mean {:.6}",
            s.n, s.mean, s.rms
        ));
    }
    report
}

fn title(source: &ModbusSource) -> String {
    format!(
        "{} {} unit {} (machine {})",
        source.kind(),
        source.endpoint(),
        source.unit_id,
        source.machine
    )
}

/// What to check when the connection could not be opened.
pub fn explain_connect(e: &ConnectError, source: &ModbusSource) -> String {
    let endpoint = source.endpoint();
    match e {
        ConnectError::Timeout { .. } => format!(
            "Nothing answered at {endpoint}: check that the device is powered and on the network, \
             its IP address, and any firewall between the gateway and the device."
        ),
        ConnectError::Io { source: io, .. } => match io.kind() {
            io::ErrorKind::ConnectionRefused => format!(
                "{endpoint} refused the connection: the device is reachable but nothing listens on \
                 that port. Check the port (Modbus TCP is usually 502) and that Modbus TCP is \
                 enabled on the device."
            ),
            _ => format!(
                "Check the host name or address and the network route to {endpoint} ({io})."
            ),
        },
        ConnectError::Serial { kind, .. } => match kind {
            tokio_serial::ErrorKind::Io(io::ErrorKind::NotFound) => format!(
                "The serial device {endpoint} does not exist: is the USB-RS485 adapter plugged in? \
                 `ls -l /dev/serial/by-id/` lists the adapters by name; put that path in the \
                 config so the adapter is found again after it is replugged."
            ),
            tokio_serial::ErrorKind::Io(io::ErrorKind::PermissionDenied) => format!(
                "Permission denied on {endpoint}: add the user linegate runs as to the `dialout` \
                 group (`sudo usermod -aG dialout USER`, then log in again or restart the \
                 service), or install the udev rule from board/."
            ),
            tokio_serial::ErrorKind::NoDevice => format!(
                "{endpoint} is in use by another program (a second linegate, a terminal program \
                 or ModemManager): stop it and probe again."
            ),
            _ => format!(
                "{endpoint} could not be set to the configured baud rate, parity and stop bits: \
                 check that it is a serial device."
            ),
        },
    }
}

/// What to check when a read gave neither registers nor an exception.
pub fn explain_read(e: &ReadError, source: &ModbusSource) -> String {
    let unit = source.unit_id;
    match (e, &source.transport) {
        (ReadError::Timeout(ms), ModbusTransport::Rtu(p)) => format!(
            "No answer from unit {unit} within {ms} ms. Check the wiring (A/B not swapped, common \
             ground, 120 ohm termination at both ends of the bus), that the device is set to \
             {} baud, parity {:?}, {} data and {} stop bit(s), and that its unit id is {unit}.",
            p.baud, p.parity, p.data_bits, p.stop_bits
        ),
        (ReadError::Timeout(ms), ModbusTransport::Tcp { .. }) => format!(
            "The connection is open but unit {unit} did not answer within {ms} ms. Check the \
             unit id (gateways to RS-485 route by it; many devices answer 1 or 255), and for a \
             gateway, the serial side behind it."
        ),
        (ReadError::Frame(_), ModbusTransport::Rtu(_)) => "Garbled answers (CRC or framing \
             errors): check that baud rate, parity and stop bits match the device, the cable \
             shield and termination, and that no second master polls the same bus."
            .to_owned(),
        (ReadError::Frame(_), ModbusTransport::Tcp { .. }) => "The answer was not valid Modbus \
             TCP: check that the port belongs to a Modbus TCP server (not RTU over TCP or \
             another protocol)."
            .to_owned(),
        (ReadError::Transport(_), _) => format!(
            "The connection to {} broke: a replugged adapter, a rebooted device or a network \
             drop. The daemon reopens it by itself; if this repeats, check cabling and power.",
            source.endpoint()
        ),
    }
}

/// What a device exception code means for the configured block.
pub fn explain_exception(code: u8, block: &BlockMap, unit: u8) -> String {
    let what = block.describe();
    let (name, advice) = match code {
        1 => (
            "illegal function",
            format!(
                "the device does not serve {} registers; try function = \"{}\"",
                block.function.as_str(),
                match block.function {
                    Function::Holding => "input",
                    Function::Input => "holding",
                }
            ),
        ),
        2 => (
            "illegal data address",
            format!(
                "{what} are not all readable on this device. Addresses are 0-based: register \
                 40101 in a manual is holding address 100, 30001 is input address 0"
            ),
        ),
        3 => ("illegal data value", "the device refuses this count; read fewer registers".into()),
        4 => (
            "server device failure",
            "the device reports an internal fault; check the sensor attached to it".into(),
        ),
        5 | 6 => (
            "device busy",
            "the device cannot keep up; lower poll_rate or read fewer registers".into(),
        ),
        10 => (
            "gateway path unavailable",
            format!("the Modbus gateway has no route to unit {unit}; check its unit id mapping"),
        ),
        11 => (
            "gateway target failed to respond",
            format!("the gateway got no answer from unit {unit}: check the device behind it"),
        ),
        _ => ("not a standard exception", "see the device's manual".into()),
    };
    format!("Device exception {code} ({name}) reading {what}: {advice}.")
}
