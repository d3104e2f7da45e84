//! `linegate probe --json`: one JSON object per configured source, the shape documented in
//! board/raspberry-pi/README.md ("Probe output") and read by `board/raspberry-pi/hil.sh`.
//!
//! Bus sources fill every documented field; Modbus sources add `channels` (the spread of each
//! configured channel, in its own unit) and leave the per-axis fields `null`; trace sources add
//! `lines`. `kind` names the source kind.

use std::collections::BTreeMap;

use serde::Serialize;

use super::super::bus::{BusOutput, BusProblem, BusStats, Problem};
use super::super::modbus::ProbeReport;
use super::super::spread::Spread;
use crate::config::{BusSensor, I2cSource, ModbusSource, SpiSource, TraceSource};
use crate::driver::adxl345::registers::DEVICE_ID;

/// One source's line of `linegate probe --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceReport {
    /// The same for every run of the same configuration: `i2c:/dev/i2c-1@0x53`,
    /// `spi:/dev/spidev0.0`, `modbus-tcp:10.0.0.5:502/unit1`, `trace:PATH`.
    pub source: String,
    pub kind: &'static str,
    /// The source opened (bus sources: and DEVID read 0xE5) and was read.
    pub ok: bool,
    /// The DEVID register as read; `null` if never read (and for non-bus sources).
    pub devid: Option<u8>,
    /// The configured output data rate (Modbus: polls per second).
    pub rate_hz: Option<f64>,
    /// How long samples were read.
    pub seconds: f64,
    /// x/y/z sample triples read (Modbus: reads answered; trace: 0).
    pub samples: u64,
    /// FIFO overruns seen.
    pub overruns: u64,
    pub mean_g: Option<Axes>,
    pub rms_g: Option<Axes>,
    pub peak_g: Option<Axes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channels: Option<BTreeMap<String, ChannelJson>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<usize>,
    /// `null`, or the actionable sentence.
    pub error: Option<String>,
}

/// A value per axis, in g.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Axes {
    pub x: f64,
    pub y: f64,
    pub z: f64,
}

/// The readings of one Modbus channel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelJson {
    pub unit: &'static str,
    pub readings: usize,
    pub mean: Option<f64>,
    pub rms: Option<f64>,
    pub peak: Option<f64>,
}

/// What a bus read gave: every output, the reader's counters, and how long it read.
#[derive(Debug, Clone, Default)]
pub struct BusRead {
    pub outputs: Vec<BusOutput>,
    pub stats: BusStats,
    pub seconds: f64,
}

/// The name of an I2C source.
pub fn i2c_name(s: &I2cSource) -> String {
    format!("i2c:{}@{:#04x}", s.sensor.device.display(), s.address.addr())
}

/// The name of an SPI source.
pub fn spi_name(s: &SpiSource) -> String {
    format!("spi:{}", s.sensor.device.display())
}

/// The name of a Modbus source.
pub fn modbus_name(m: &ModbusSource) -> String {
    format!("{}:{}/unit{}", m.kind(), m.endpoint(), m.unit_id)
}

/// The name of a trace source.
pub fn trace_name(t: &TraceSource) -> String {
    format!("trace:{}", t.path.display())
}

fn empty(source: String, kind: &'static str) -> SourceReport {
    SourceReport {
        source,
        kind,
        ok: false,
        devid: None,
        rate_hz: None,
        seconds: 0.0,
        samples: 0,
        overruns: 0,
        mean_g: None,
        rms_g: None,
        peak_g: None,
        channels: None,
        lines: None,
        error: None,
    }
}

/// Per axis (`x`, `y`, `z`) the spread of every sample read.
pub fn axis_spreads(outputs: &[BusOutput]) -> BTreeMap<String, Spread> {
    let mut per_axis: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for o in outputs {
        if let BusOutput::Samples(r) = o {
            per_axis.entry(r.axis.clone().unwrap_or_default()).or_default().extend(&r.data);
        }
    }
    per_axis.into_iter().filter_map(|(a, v)| Spread::of(&v).map(|s| (a, s))).collect()
}

/// The report of a bus sensor that opened (DEVID 0xE5) and was read.
pub fn bus_read(name: String, kind: &'static str, cfg: &BusSensor, read: &BusRead) -> SourceReport {
    let spreads = axis_spreads(&read.outputs);
    let axes = |f: fn(&Spread) -> f64| {
        let get = |a: &str| spreads.get(a).map(f);
        Some(Axes { x: get("x")?, y: get("y")?, z: get("z")? })
    };
    let mean_g = axes(|s| s.mean);
    SourceReport {
        ok: true,
        devid: Some(DEVICE_ID),
        rate_hz: Some(f64::from(cfg.rate.hz())),
        seconds: read.seconds,
        samples: read.stats.samples,
        overruns: read.stats.overruns,
        mean_g,
        rms_g: axes(|s| s.rms),
        peak_g: axes(|s| s.peak),
        error: mean_g.is_none().then(|| "no samples were read".to_owned()),
        ..empty(name, kind)
    }
}

/// The report of a bus sensor that could not be opened or checked.
pub fn bus_problem(
    name: String,
    kind: &'static str,
    cfg: &BusSensor,
    problem: &BusProblem,
) -> SourceReport {
    let devid = match problem.problem {
        Problem::WrongDevice(id) => Some(id),
        _ => None,
    };
    SourceReport {
        devid,
        rate_hz: Some(f64::from(cfg.rate.hz())),
        error: Some(problem.explain()),
        ..empty(name, kind)
    }
}

/// The report of a bus sensor that opened but failed while being read.
pub fn bus_failed_read(
    name: String,
    kind: &'static str,
    cfg: &BusSensor,
    why: String,
) -> SourceReport {
    SourceReport {
        devid: Some(DEVICE_ID),
        rate_hz: Some(f64::from(cfg.rate.hz())),
        error: Some(why),
        ..empty(name, kind)
    }
}

/// The report of a Modbus probe of `reads` polls.
pub fn modbus(m: &ModbusSource, report: &ProbeReport, reads: u32) -> SourceReport {
    let channels = report
        .channels
        .iter()
        .map(|c| {
            let json = ChannelJson {
                unit: c.unit,
                readings: c.spread.map_or(0, |s| s.n),
                mean: c.spread.map(|s| s.mean),
                rms: c.spread.map(|s| s.rms),
                peak: c.spread.map(|s| s.peak),
            };
            (c.sensor.clone(), json)
        })
        .collect();
    let answered = report.channels.iter().filter_map(|c| c.spread.map(|s| s.n)).max();
    SourceReport {
        ok: report.ok,
        rate_hz: Some(m.poll_rate_hz),
        seconds: f64::from(reads) / m.poll_rate_hz,
        samples: answered.unwrap_or(0) as u64,
        channels: Some(channels),
        error: (!report.ok).then(|| report.lines.join(" ")),
        ..empty(modbus_name(m), m.kind())
    }
}

/// The report of a trace source: its line count, or why it cannot be read.
pub fn trace(t: &TraceSource, lines: &Result<usize, String>) -> SourceReport {
    SourceReport {
        ok: lines.is_ok(),
        lines: lines.as_ref().ok().copied(),
        error: lines.as_ref().err().cloned(),
        ..empty(trace_name(t), "trace")
    }
}
