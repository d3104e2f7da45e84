//! The read loop against `embedded-hal-mock` (I2C transaction lists) and a `ManualClock`:
//! block timing, overrun gaps, resyncs, clock steps, and the channel thread.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use embedded_hal::i2c::ErrorKind;
use embedded_hal_mock::eh1::i2c::{Mock as I2cMock, Transaction as I2cTx};

use super::*;
use crate::clock::ManualClock;
use crate::driver::adxl345::{I2cAddress, I2cInterface, Range};
use crate::event::ClockState;
use crate::stamp::clock::KernelEvidence;

const ADDR: u8 = 0x53;
const T: i64 = 1_700_000_000_000;
const SYNCED: KernelEvidence = KernelEvidence {
    unsynchronised: false,
    time_error: false,
    maxerror_us: 4_000,
    esterror_us: 500,
};

/// Kernel evidence a test can change while the reader runs.
#[derive(Debug, Clone)]
struct Script(Arc<Mutex<Option<KernelEvidence>>>);

impl KernelClock for Script {
    fn read(&mut self) -> Option<KernelEvidence> {
        *self.0.lock().unwrap()
    }
}

/// Sample `i` of the test stream: x = i, y = -i, z = 256 + i (1 g + i LSB).
fn sample_bytes(i: i16) -> Vec<u8> {
    [i, -i, 256 + i].iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// One poll as the bus carries it: INT_SOURCE (0x30, D0 = overrun), FIFO_STATUS (0x39),
/// then `n` reads of DATAX0..DATAZ1 (0x32) with samples `first..first + n`.
fn poll(overrun: bool, first: i16, n: i16) -> Vec<I2cTx> {
    let mut tx = vec![
        I2cTx::write_read(ADDR, vec![0x30], vec![u8::from(overrun)]),
        I2cTx::write_read(ADDR, vec![0x39], vec![n as u8]),
    ];
    tx.extend((first..first + n).map(|i| I2cTx::write_read(ADDR, vec![0x32], sample_bytes(i))));
    tx
}

fn sensor(axes: Vec<Axis>, block_ms: i64) -> BusSensor {
    BusSensor {
        device: "/dev/i2c-1".into(),
        rate: DataRate::Hz800,
        range: Range::G4,
        machine: "press-7".into(),
        sensor: "s1".into(),
        axes,
        block_ms,
    }
}

type Reader = BusReader<I2cInterface<I2cMock>, Arc<ManualClock>, Script>;

fn reader(tx: &[I2cTx], cfg: BusSensor) -> (Reader, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T));
    let kernel = Script(Arc::new(Mutex::new(Some(SYNCED))));
    let accel = Adxl345::new_i2c(I2cMock::new(tx), I2cAddress::AltLow);
    (BusReader::new(accel, clock.clone(), kernel, cfg), clock)
}

fn records(out: &[BusOutput]) -> Vec<&SamplesRecord> {
    out.iter().filter_map(|o| if let BusOutput::Samples(r) = o { Some(r) } else { None }).collect()
}

/// At 800 Hz one poll every 20 ms drains 16 samples; blocks of 100 ms hold 80.
#[test]
fn steady_stream_gives_contiguous_blocks_per_axis_in_g() {
    let tx: Vec<I2cTx> = (0..10).flat_map(|p| poll(false, p * 16, 16)).collect();
    let (mut r, clock) = reader(&tx, sensor(vec![Axis::X, Axis::Z], 100));
    let mut out = Vec::new();
    for _ in 0..10 {
        clock.advance(20);
        r.poll_once(&mut out).unwrap();
    }
    let recs = records(&out);
    assert_eq!(recs.len(), 4, "two blocks of two axes");
    // First poll: the last of 16 samples at T + 20, the first 15 × 1.25 ms before: T + 1.25,
    // rounded up to T + 2. The next block starts exactly 100 ms later.
    assert_eq!((recs[0].sensor.as_str(), recs[0].axis.as_deref()), ("s1.x", Some("x")));
    assert_eq!((recs[1].sensor.as_str(), recs[1].axis.as_deref()), ("s1.z", Some("z")));
    assert_eq!([recs[0].t0_ms, recs[2].t0_ms], [T + 2, T + 102]);
    assert_eq!(recs[0].data.len(), 80);
    assert_eq!(recs[0].data[3], 3.0 / 256.0);
    assert_eq!(recs[1].data[0], 1.0, "z = 256 LSB = 1 g");
    assert_eq!(recs[3].data[0], (256.0 + 80.0) / 256.0);
    assert_eq!(recs[0].rate_hz, 800.0);
    assert_eq!(
        recs[0].clock,
        Some(crate::event::ClockEvidence { state: ClockState::Synced, err_ms: Some(4) })
    );
    let s = r.stats();
    assert_eq!((s.polls, s.samples, s.overruns, s.resyncs), (10, 160, 0, 0));
    r.into_driver().destroy().done();
}

#[test]
fn overrun_ends_the_block_and_declares_a_gap_per_sensor() {
    let mut tx = poll(true, 0, 16); // an overflow before the first poll is no gap
    tx.extend(poll(true, 100, 33)); // the FIFO overflowed: samples 16..=99 were lost
    let (mut r, clock) = reader(&tx, sensor(vec![Axis::Y, Axis::Z], 1_000));
    let mut out = Vec::new();
    clock.advance(20);
    r.poll_once(&mut out).unwrap();
    clock.advance(120);
    r.poll_once(&mut out).unwrap();
    // Timeline: samples 0..16 at T+2 .. T+20.75; next due T + 22. The clock puts the first of the
    // 33 new samples at T + 140 - 32 × 1.25 = T + 100.
    let gaps: Vec<_> =
        out.iter().filter_map(|o| if let BusOutput::Gap(g) = o { Some(g) } else { None }).collect();
    assert_eq!(gaps.iter().map(|g| g.sensor.as_str()).collect::<Vec<_>>(), ["s1.y", "s1.z"]);
    assert_eq!(gaps[0].range, GapRange::Samples { from_ms: T + 22, to_ms: T + 100 });
    assert_eq!((gaps[1].reason.as_str(), gaps[1].declared_at_ms), ("overrun", T + 140));
    let recs = records(&out);
    assert_eq!(recs.len(), 2, "the block before the overrun is sent short, per axis");
    assert_eq!((recs[0].t0_ms, recs[0].data.len()), (T + 2, 16));
    r.flush(&mut out);
    let recs = records(&out);
    assert_eq!((recs[2].t0_ms, recs[2].data.len()), (T + 100, 33));
    assert_eq!(r.stats().overruns, 1);
    r.into_driver().destroy().done();
}

#[test]
fn clock_far_ahead_of_the_timeline_resyncs_without_a_gap() {
    let mut tx = poll(false, 0, 16);
    tx.extend(poll(false, 16, 16));
    let (mut r, clock) = reader(&tx, sensor(vec![Axis::Z], 1_000));
    let mut out = Vec::new();
    clock.advance(20);
    r.poll_once(&mut out).unwrap();
    clock.advance(500); // the sensor delivered far fewer samples than the clock says
    r.poll_once(&mut out).unwrap();
    r.flush(&mut out);
    let recs = records(&out);
    assert_eq!(recs.iter().map(|r| r.t0_ms).collect::<Vec<_>>(), vec![T + 2, T + 502]);
    assert!(!out.iter().any(|o| matches!(o, BusOutput::Gap(_))));
    assert_eq!(r.stats().resyncs, 1);
    r.into_driver().destroy().done();
}

#[test]
fn clock_step_is_sent_and_blocks_stay_continuous_in_holdover() {
    let tx: Vec<I2cTx> = (0..3).flat_map(|p| poll(false, p * 16, 16)).collect();
    let (mut r, clock) = reader(&tx, sensor(vec![Axis::Z], 1_000));
    let mut out = Vec::new();
    clock.advance(20);
    r.poll_once(&mut out).unwrap();
    clock.advance(20);
    clock.step_wall(-30_000);
    r.poll_once(&mut out).unwrap();
    clock.advance(20);
    r.poll_once(&mut out).unwrap();
    r.flush(&mut out);
    let step =
        out.iter().find_map(|o| if let BusOutput::ClockStep(s) = o { Some(s) } else { None });
    assert_eq!(step.map(|s| (s.size_ms, s.held_over)), Some((-30_000, true)));
    let recs = records(&out);
    assert_eq!(recs.len(), 1, "one block: the step did not move the timeline");
    assert_eq!((recs[0].t0_ms, recs[0].data.len()), (T + 2, 48));
    assert_eq!(recs[0].clock.map(|c| c.state), Some(ClockState::Holdover));
    r.into_driver().destroy().done();
}

#[test]
fn poll_period_is_half_the_fifo_fill_time() {
    assert_eq!(poll_period_us(DataRate::Hz3200), 5_000);
    assert_eq!(poll_period_us(DataRate::Hz800), 20_000);
    assert_eq!(poll_period_us(DataRate::Hz100), 160_000);
}

/// The thread: a channel of one record; the loop never blocks, sheds what does not fit, and stops
/// with the bus error that ends the mock's script.
#[test]
fn spawned_loop_sheds_under_backpressure_and_stops_on_a_bus_error() {
    let mut tx: Vec<I2cTx> = (0..3).flat_map(|p| poll(false, p * 16, 16)).collect();
    tx.push(I2cTx::write_read(ADDR, vec![0x30], vec![0]).with_error(ErrorKind::Other));
    let (r, _clock) = reader(&tx, sensor(vec![Axis::Z], 20)); // blocks of 16 samples
    let (sender, mut receiver) = tokio::sync::mpsc::channel(1);
    let handle = spawn(r, sender, Arc::new(AtomicBool::new(false)));
    let (driver, ended) = handle.join().unwrap();
    driver.destroy().done();
    let err = ended.unwrap_err();
    assert!(err.to_string().contains("bus error"), "{err}");
    let first = receiver.try_recv().unwrap();
    assert!(matches!(first, BusOutput::Samples(ref r) if r.data.len() == 16), "{first:?}");
    assert!(receiver.try_recv().is_err(), "the other two blocks were shed, not queued");
}

#[test]
fn shed_blocks_of_a_sensor_merge_into_one_gap() {
    let mut held = VecDeque::new();
    run::hold_gap(&mut held, "m", "s1", 0, 20);
    run::hold_gap(&mut held, "m", "s1", 20, 40);
    run::hold_gap(&mut held, "m", "s2", 20, 40);
    assert_eq!(held.len(), 2);
    let BusOutput::Gap(g) = &held[0] else { panic!("{held:?}") };
    assert_eq!(
        (g.range.clone(), g.reason.as_str()),
        (GapRange::Samples { from_ms: 0, to_ms: 40 }, "backpressure")
    );
}

use std::collections::VecDeque;
