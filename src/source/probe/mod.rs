//! `linegate probe --config F`: open every configured source, check it, show a few seconds of
//! readings, and explain failures in words a technician can act on.
//!
//! Bus sources: open the node, check DEVID (0xE5), configure, read for the requested time, print
//! the first readings and per axis the mean and the RMS about the mean (what `accel_rms` events
//! will carry), with overruns, gaps and the clock evidence of the blocks. All three axes are read,
//! whatever the configuration exports. Modbus sources: a few polls of every block. Trace sources:
//! the file and its line count. The kernel's clock evidence (`adjtimex`) comes first, in words.
//!
//! With `--json` the text goes to standard error and standard output carries one JSON object per
//! source and line ([`report`]), the shape `board/raspberry-pi/hil.sh` reads.

use std::io::{BufRead, BufReader, Write};

use crate::clock::{Clock, SystemClock};
use crate::config::{Axis, BusSensor, Config, SourceConfig};
use crate::driver::adxl345::{Adxl345, RegisterAccess};
use crate::source::bus::{self, BusOutput, BusProblem, BusReader, BusStats};
use crate::source::clock_quality::{describe, read_adjtimex, Adjtimex};

pub mod report;

pub use report::SourceReport;

/// What probing one source gave: the text lines (or why it failed) and the JSON report.
struct Probed {
    text: Result<Vec<String>, String>,
    report: SourceReport,
}

/// Probes every source of `config`, writing the human report to `out` and, when `json` is given,
/// one [`SourceReport`] per source and line to it as soon as that source is done. Returns how
/// many sources failed.
pub fn probe(
    config: &Config,
    seconds: f64,
    out: &mut dyn Write,
    mut json: Option<&mut dyn Write>,
) -> std::io::Result<usize> {
    match read_adjtimex() {
        Ok(k) => writeln!(out, "clock: {}", describe(&k))?,
        Err(e) => writeln!(out, "clock: cannot read the kernel's clock state (adjtimex: {e})")?,
    }
    if config.source.is_empty() {
        writeln!(out, "no [[source]] configured")?;
    }
    let mut failed = 0;
    for (i, source) in config.source.iter().enumerate() {
        let probed = match source {
            SourceConfig::Trace(t) => {
                writeln!(out, "source[{i}]: trace {}", t.path.display())?;
                let lines = count_lines(&t.path)
                    .map_err(|e| format!("cannot read trace file {}: {e}", t.path.display()));
                Probed {
                    report: report::trace(t, &lines),
                    text: lines.map(|n| vec![format!("{n} lines")]),
                }
            }
            SourceConfig::I2c(s) => {
                let addr = s.address.addr();
                writeln!(
                    out,
                    "source[{i}]: i2c {} address {addr:#04x}, {}",
                    s.sensor.device.display(),
                    what(&s.sensor)
                )?;
                probe_bus(report::i2c_name(s), "i2c", &s.sensor, bus::open_i2c(s), seconds)
            }
            SourceConfig::Spi(s) => {
                writeln!(
                    out,
                    "source[{i}]: spi {} at {} Hz, {}",
                    s.sensor.device.display(),
                    s.max_speed_hz,
                    what(&s.sensor)
                )?;
                probe_bus(report::spi_name(s), "spi", &s.sensor, bus::open_spi(s), seconds)
            }
            SourceConfig::Modbus(m) => {
                let reads = (seconds * m.poll_rate_hz).round().clamp(1.0, 1000.0) as u32;
                let probed = crate::source::modbus::probe(m, reads);
                writeln!(out, "source[{i}]: {}", probed.title)?;
                Probed {
                    report: report::modbus(m, &probed, reads),
                    text: if probed.ok { Ok(probed.lines) } else { Err(probed.lines.join("\n  ")) },
                }
            }
        };
        match probed.text {
            Ok(lines) => {
                for l in lines {
                    writeln!(out, "  {l}")?;
                }
            }
            Err(why) => {
                failed += 1;
                writeln!(out, "  FAILED: {why}")?;
            }
        }
        if let Some(json) = json.as_mut() {
            let line = serde_json::to_string(&probed.report).map_err(std::io::Error::other)?;
            writeln!(json, "{line}")?;
            json.flush()?;
        }
    }
    Ok(failed)
}

/// Reads an opened bus sensor (or explains why it did not open): text and report.
fn probe_bus<I>(
    name: String,
    kind: &'static str,
    cfg: &BusSensor,
    opened: Result<Adxl345<I>, BusProblem>,
    seconds: f64,
) -> Probed
where
    I: RegisterAccess,
    I::Error: std::fmt::Debug,
{
    let accel = match opened {
        Ok(a) => a,
        Err(p) => {
            let report = report::bus_problem(name, kind, cfg, &p);
            return Probed { text: Err(p.to_string()), report };
        }
    };
    match read_for(accel, cfg, seconds) {
        Ok(read) => {
            let mut lines = vec!["DEVID 0xe5: an ADXL345 answers and is configured".to_owned()];
            lines.extend(summarize(&read.outputs, read.stats));
            Probed { text: Ok(lines), report: report::bus_read(name, kind, cfg, &read) }
        }
        Err(why) => {
            Probed { report: report::bus_failed_read(name, kind, cfg, why.clone()), text: Err(why) }
        }
    }
}

fn what(s: &BusSensor) -> String {
    format!("{} Hz, ±{} g → {}/{}", s.rate.hz(), range_g(s), s.machine, s.sensor)
}

fn range_g(s: &BusSensor) -> u32 {
    use crate::driver::adxl345::Range;
    match s.range {
        Range::G2 => 2,
        Range::G4 => 4,
        Range::G8 => 8,
        Range::G16 => 16,
    }
}

fn count_lines(path: &std::path::Path) -> std::io::Result<usize> {
    let mut n = 0;
    for line in BufReader::new(std::fs::File::open(path)?).lines() {
        line?;
        n += 1;
    }
    Ok(n)
}

/// Reads an opened, configured sensor for `seconds` with the real clocks, all three axes
/// whatever the configuration exports (the probe checks the part, not the export).
fn read_for<I>(accel: Adxl345<I>, cfg: &BusSensor, seconds: f64) -> Result<report::BusRead, String>
where
    I: RegisterAccess,
    I::Error: std::fmt::Debug,
{
    let clock = SystemClock::new();
    let start = clock.monotonic_ms();
    let end = start + (seconds * 1000.0) as i64;
    let all_axes = BusSensor { axes: vec![Axis::X, Axis::Y, Axis::Z], ..cfg.clone() };
    let mut reader = BusReader::new(accel, SystemClock::new(), Adjtimex, all_axes);
    let mut outputs = Vec::new();
    bus::run(&mut reader, |out| {
        outputs.append(out);
        clock.monotonic_ms() < end
    })
    .map_err(|e| format!("reading failed: {e}"))?;
    reader.flush(&mut outputs);
    let seconds = (clock.monotonic_ms() - start) as f64 / 1000.0;
    Ok(report::BusRead { outputs, stats: reader.stats(), seconds })
}

/// The report of a read: per record sensor/axis the first readings, mean and RMS about the mean;
/// overruns, gaps, clock steps and the clock evidence of the last block.
pub fn summarize(outputs: &[BusOutput], stats: BusStats) -> Vec<String> {
    use std::collections::BTreeMap;
    let mut per_axis: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let (mut gaps, mut steps, mut clock) = (0, 0, None);
    for o in outputs {
        match o {
            BusOutput::Samples(r) => {
                let key = (r.sensor.clone(), r.axis.clone().unwrap_or_default());
                per_axis.entry(key).or_default().extend(&r.data);
                clock = r.clock;
            }
            BusOutput::Gap(_) => gaps += 1,
            BusOutput::ClockStep(_) => steps += 1,
        }
    }
    let mut lines = Vec::new();
    for ((sensor, axis), data) in &per_axis {
        let Some(s) = crate::source::spread::Spread::of(data) else { continue };
        let first: Vec<String> = data.iter().take(5).map(|x| format!("{x:+.3}")).collect();
        lines.push(format!(
            "{sensor} axis {axis}: {} samples, first {} g; mean {:+.4} g, RMS about the mean {:.4} g",
            s.n,
            first.join(" "),
            s.mean,
            s.rms
        ));
    }
    if per_axis.is_empty() {
        lines.push("no samples were read".to_owned());
    }
    lines.push(format!(
        "{} polls, {} FIFO overruns ({} gaps declared), {} resyncs, {} clock steps",
        stats.polls, stats.overruns, gaps, stats.resyncs, steps
    ));
    if let Some(c) = clock {
        let err = c.err_ms.map(|e| format!(", error ≤ {e} ms")).unwrap_or_default();
        lines.push(format!("timestamps: clock {}{err}", c.state.as_str()));
    }
    lines
}

#[cfg(test)]
mod tests;
