//! `linegate probe --config F`: open every configured source, check it, show a few seconds of
//! readings, and explain failures in words a technician can act on.
//!
//! Bus sources: open the node, check DEVID (0xE5), configure, read for the requested time, print
//! the first readings and per axis the mean and the RMS about the mean (what `accel_rms` events
//! will carry), with overruns, gaps and the clock evidence of the blocks. Trace sources: the file
//! and its line count. The kernel's clock evidence (`adjtimex`) comes first, in words.

use std::io::{BufRead, BufReader, Write};

use crate::clock::{Clock, SystemClock};
use crate::config::{BusSensor, Config, SourceConfig};
use crate::driver::adxl345::{Adxl345, RegisterAccess};
use crate::source::bus::{self, BusOutput, BusReader, BusStats};
use crate::source::clock_quality::{describe, read_adjtimex, Adjtimex};

/// Probes every source of `config`, writing the report to `out`. Returns how many sources failed.
pub fn probe(config: &Config, seconds: f64, out: &mut dyn Write) -> std::io::Result<usize> {
    match read_adjtimex() {
        Ok(k) => writeln!(out, "clock: {}", describe(&k))?,
        Err(e) => writeln!(out, "clock: cannot read the kernel's clock state (adjtimex: {e})")?,
    }
    if config.source.is_empty() {
        writeln!(out, "no [[source]] configured")?;
    }
    let mut failed = 0;
    for (i, source) in config.source.iter().enumerate() {
        let result = match source {
            SourceConfig::Trace(t) => {
                writeln!(out, "source[{i}]: trace {}", t.path.display())?;
                count_lines(&t.path)
                    .map(|n| vec![format!("{n} lines")])
                    .map_err(|e| format!("cannot read trace file {}: {e}", t.path.display()))
            }
            SourceConfig::I2c(s) => {
                let addr = s.address.addr();
                writeln!(
                    out,
                    "source[{i}]: i2c {} address {addr:#04x}, {}",
                    s.sensor.device.display(),
                    what(&s.sensor)
                )?;
                bus::open_i2c(s)
                    .map_err(|e| e.to_string())
                    .and_then(|a| read_for(a, &s.sensor, seconds))
            }
            SourceConfig::Spi(s) => {
                writeln!(
                    out,
                    "source[{i}]: spi {} at {} Hz, {}",
                    s.sensor.device.display(),
                    s.max_speed_hz,
                    what(&s.sensor)
                )?;
                bus::open_spi(s)
                    .map_err(|e| e.to_string())
                    .and_then(|a| read_for(a, &s.sensor, seconds))
            }
            SourceConfig::Modbus(m) => {
                let reads = (seconds * m.poll_rate_hz).round().clamp(1.0, 1000.0) as u32;
                let report = crate::source::modbus::probe(m, reads);
                writeln!(out, "source[{i}]: {}", report.title)?;
                if report.ok {
                    Ok(report.lines)
                } else {
                    Err(report.lines.join("\n  "))
                }
            }
        };
        match result {
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
    }
    Ok(failed)
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

/// Reads an opened, configured sensor for `seconds` with the real clocks; the report lines.
fn read_for<I>(accel: Adxl345<I>, cfg: &BusSensor, seconds: f64) -> Result<Vec<String>, String>
where
    I: RegisterAccess,
    I::Error: std::fmt::Debug,
{
    let clock = SystemClock::new();
    let end = clock.monotonic_ms() + (seconds * 1000.0) as i64;
    let mut reader = BusReader::new(accel, SystemClock::new(), Adjtimex, cfg.clone());
    let mut all = Vec::new();
    bus::run(&mut reader, |out| {
        all.append(out);
        clock.monotonic_ms() < end
    })
    .map_err(|e| format!("reading failed: {e}"))?;
    reader.flush(&mut all);
    let mut lines = vec!["DEVID 0xe5: an ADXL345 answers and is configured".to_owned()];
    lines.extend(summarize(&all, reader.stats()));
    Ok(lines)
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
        let n = data.len() as f64;
        let mean = data.iter().sum::<f64>() / n;
        let rms = (data.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        let first: Vec<String> = data.iter().take(5).map(|x| format!("{x:+.3}")).collect();
        lines.push(format!(
            "{sensor} axis {axis}: {} samples, first {} g; mean {mean:+.4} g, RMS about the mean {rms:.4} g",
            data.len(),
            first.join(" ")
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
        lines.push(format!("timestamps: clock {:?}{err}", c.state).to_lowercase());
    }
    lines
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::event::{Clock as Evidence, ClockState, Unit};
    use crate::trace::SamplesRecord;

    #[test]
    fn summary_gives_mean_and_rms_about_the_mean_per_axis() {
        let rec = |data: Vec<f64>| {
            BusOutput::Samples(SamplesRecord {
                machine: "m".into(),
                sensor: "s1".into(),
                t0_ms: 0,
                rate_hz: 100.0,
                unit: Unit::G,
                axis: Some("z".into()),
                clock: Some(Evidence { state: ClockState::Synced, err_ms: Some(7) }),
                data,
            })
        };
        let outputs = [rec(vec![1.0, 1.5]), rec(vec![1.0, 0.5])];
        let stats = BusStats { polls: 4, overruns: 1, ..BusStats::default() };
        let lines = summarize(&outputs, stats);
        assert_eq!(
            lines[0],
            "s1 axis z: 4 samples, first +1.000 +1.500 +1.000 +0.500 g; mean +1.0000 g, RMS about the mean 0.3536 g"
        );
        assert_eq!(
            lines[1],
            "4 polls, 1 FIFO overruns (0 gaps declared), 0 resyncs, 0 clock steps"
        );
        assert_eq!(lines[2], "timestamps: clock synced, error ≤ 7 ms");
    }
}
