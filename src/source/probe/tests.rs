//! The probe's text summary and its `--json` report, the latter from a bus reader over
//! `embedded-hal-mock` (I2C transaction lists) and a `ManualClock`, checked field by field and by
//! the verdict script `hil.sh` applies to it (board/raspberry-pi/probe_check.py).

use std::sync::Arc;

use embedded_hal_mock::eh1::i2c::{Mock as I2cMock, Transaction as I2cTx};

use super::report::{self, BusRead};
use super::*;
use crate::clock::ManualClock;
use crate::config::I2cSource;
use crate::driver::adxl345::{DataRate, I2cAddress, Range};
use crate::event::{ClockEvidence as Evidence, ClockState, Unit};
use crate::source::bus::Problem;
use crate::source::clock_quality::KernelClock;
use crate::stamp::clock::KernelEvidence;
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
    assert_eq!(lines[1], "4 polls, 1 FIFO overruns (0 gaps declared), 0 resyncs, 0 clock steps");
    assert_eq!(lines[2], "timestamps: clock synced, error ≤ 7 ms");
}

const ADDR: u8 = 0x53;

/// A kernel whose clock state cannot be read.
struct NoKernel;

impl KernelClock for NoKernel {
    fn read(&mut self) -> Option<KernelEvidence> {
        None
    }
}

/// Sample `i` of a breakout lying flat: x ±2 LSB, y -5 LSB, z 1 g (256 LSB) with one knock of
/// +64 LSB at sample 7 and -64 LSB at sample 8.
fn at_rest(i: usize) -> [i16; 3] {
    let z = match i {
        7 => 256 + 64,
        8 => 256 - 64,
        _ => 256,
    };
    [if i.is_multiple_of(2) { 2 } else { -2 }, -5, z]
}

/// One poll on the bus: INT_SOURCE (no overrun), FIFO_STATUS (16 entries), 16 samples.
fn poll(first: usize) -> Vec<I2cTx> {
    let mut tx = vec![
        I2cTx::write_read(ADDR, vec![0x30], vec![0]),
        I2cTx::write_read(ADDR, vec![0x39], vec![16]),
    ];
    for i in first..first + 16 {
        let bytes = at_rest(i).iter().flat_map(|v| v.to_le_bytes()).collect();
        tx.push(I2cTx::write_read(ADDR, vec![0x32], bytes));
    }
    tx
}

fn source() -> I2cSource {
    I2cSource {
        address: I2cAddress::AltLow,
        sensor: BusSensor {
            device: "/dev/i2c-1".into(),
            rate: DataRate::Hz800,
            range: Range::G4,
            machine: "press-7".into(),
            sensor: "s1".into(),
            axes: vec![Axis::X, Axis::Y, Axis::Z],
            block_ms: 100,
        },
    }
}

/// 0.2 s at 800 Hz: ten polls of 16 samples, 20 ms apart, on a manual clock.
fn read_mock() -> BusRead {
    let s = source();
    let tx: Vec<I2cTx> = (0..10).flat_map(|p| poll(p * 16)).collect();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let accel = Adxl345::new_i2c(I2cMock::new(&tx), s.address);
    let mut reader = BusReader::new(accel, clock.clone(), NoKernel, s.sensor.clone());
    let mut outputs = Vec::new();
    for _ in 0..10 {
        clock.advance(20);
        reader.poll_once(&mut outputs).unwrap();
    }
    reader.flush(&mut outputs);
    let stats = reader.stats();
    reader.into_driver().destroy().done();
    BusRead { outputs, stats, seconds: 0.2 }
}

#[test]
fn json_report_of_a_bus_read_has_the_documented_fields() {
    let s = source();
    let r = report::bus_read(report::i2c_name(&s), "i2c", &s.sensor, &read_mock());
    let v = serde_json::to_value(&r).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let mut documented = [
        "source", "kind", "ok", "devid", "rate_hz", "seconds", "samples", "overruns", "mean_g",
        "rms_g", "peak_g", "error",
    ];
    documented.sort_unstable();
    assert_eq!(keys, documented);
    let lsb = 1.0 / 256.0;
    assert_eq!(v["source"], "i2c:/dev/i2c-1@0x53");
    assert_eq!((v["ok"].as_bool(), v["devid"].as_u64()), (Some(true), Some(229)));
    assert_eq!((v["rate_hz"].as_f64(), v["seconds"].as_f64()), (Some(800.0), Some(0.2)));
    assert_eq!((v["samples"].as_u64(), v["overruns"].as_u64()), (Some(160), Some(0)));
    assert!(v["error"].is_null());
    let axes = |k: &str| [&v[k]["x"], &v[k]["y"], &v[k]["z"]].map(|a| a.as_f64().unwrap());
    assert_eq!(axes("mean_g"), [0.0, -5.0 * lsb, 1.0]);
    let rms_z = ((2.0 * 64.0 * 64.0) / 160.0f64).sqrt() * lsb;
    let rms = axes("rms_g");
    assert_eq!(rms[..2], [2.0 * lsb, 0.0]);
    assert!((rms[2] - rms_z).abs() < 1e-12, "{rms:?}");
    assert_eq!(axes("peak_g"), [2.0 * lsb, 0.0, 64.0 * lsb]);
}

#[test]
fn json_report_of_a_problem_carries_the_advice_and_the_devid_read() {
    let s = source();
    let problem = BusProblem {
        device: "/dev/i2c-1".into(),
        bus: bus::BusKind::I2c { address: ADDR },
        problem: Problem::WrongDevice(0x68),
    };
    let r = report::bus_problem(report::i2c_name(&s), "i2c", &s.sensor, &problem);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!((v["ok"].as_bool(), v["devid"].as_u64()), (Some(false), Some(0x68)));
    assert!(v["error"].as_str().unwrap().contains("DEVID 0x68"), "{v}");
    assert!(v["mean_g"].is_null() && v["samples"] == 0, "{v}");
}

/// Runs board/raspberry-pi/probe_check.py on `reports` (JSON Lines); its output and exit code.
fn probe_check(check: &[&str], reports: &[&SourceReport]) -> (String, Option<i32>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("probe.json");
    let lines: String = reports.iter().map(|r| serde_json::to_string(r).unwrap() + "\n").collect();
    std::fs::write(&file, lines).unwrap();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("board/raspberry-pi/probe_check.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(check[0])
        .arg(&file)
        .args(&check[1..])
        .output()
        .unwrap();
    (String::from_utf8_lossy(&out.stdout).into_owned(), out.status.code())
}

#[test]
fn hil_verdicts_accept_the_json_of_a_breakout_at_rest_and_name_a_failed_one() {
    let s = source();
    let good = report::bus_read(report::i2c_name(&s), "i2c", &s.sensor, &read_mock());
    let (out, code) = probe_check(&["wiring"], &[&good]);
    assert_eq!((out.as_str(), code), ("PASS i2c:/dev/i2c-1@0x53: DEVID 0xE5\n", Some(0)));
    let (out, code) = probe_check(&["rest", "--axis", "z", "--seconds", "0.2"], &[&good]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("PASS i2c:/dev/i2c-1@0x53: 160 samples at 800 Hz"), "{out}");
    let missing = BusProblem {
        device: "/dev/i2c-1".into(),
        bus: bus::BusKind::I2c { address: ADDR },
        problem: Problem::MissingNode,
    };
    let bad = report::bus_problem(report::i2c_name(&s), "i2c", &s.sensor, &missing);
    let (out, code) = probe_check(&["wiring"], &[&good, &bad]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("FAIL i2c:/dev/i2c-1@0x53: probe failed: /dev/i2c-1 does not exist"));
}
