//! An ADXL345 bus source (`i2c`, `spi`) in `linegate run`: the FIFO read loop
//! ([`crate::source::bus`]) on its own thread, its output turned into live items
//! ([`super::live`]).
//!
//! The read loop never blocks: when its channel is full it sheds a block and declares the gap
//! (reason `backpressure`); overruns are declared by the loop too (reason `overrun`), and each
//! one counts in `linegate_sensor_overruns_total` of every sensor it declares a gap for. A bus error
//! ends the loop; a supervisor thread reopens the device after a backoff (the open explains what
//! is wrong in the log, e.g. a missing device node or a permission), and the hole between the
//! last block before the fault and the first after it is declared (reason `sensor_fault`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::live::{ingest_live, Adapter, Holes, LiveItem, Now};
use super::{IngestError, Params};
use crate::clock::{Clock, SystemClock};
use crate::config::{BusSensor, SourceConfig};
use crate::driver::adxl345::{Adxl345, RegisterAccess};
use crate::source::bus::{self, BusOutput, BusReader};
use crate::source::clock_quality::Adjtimex;
use crate::source::modbus::poller::Backoff;
use crate::store::SharedStore;
use crate::telemetry::Metrics;

/// Reason of the hole a bus fault leaves.
pub(super) const SENSOR_FAULT: &str = "sensor_fault";
/// Records the read loop may queue before it sheds.
pub(super) const CHANNEL_RECORDS: usize = 64;

/// Bus output to live items: gaps and clock steps as they are, samples through [`Holes`];
/// overrun gaps counted in the metrics.
#[derive(Debug)]
pub(super) struct BusAdapter {
    holes: Holes,
    metrics: Metrics,
}

impl BusAdapter {
    /// The adapter of `sensor`; its exported sensors' overrun counters appear at 0.
    pub(super) fn new(sensor: &BusSensor, metrics: Metrics) -> Self {
        for &axis in &sensor.axes {
            metrics.sensor_overruns(&sensor.sensor_for(axis), 0);
        }
        BusAdapter { holes: Holes::new(SENSOR_FAULT, sensor.block_ms + 1_000), metrics }
    }
}

impl Adapter for BusAdapter {
    type Item = BusOutput;

    fn convert(&mut self, item: BusOutput, now: Now, out: &mut Vec<LiveItem>) {
        match item {
            BusOutput::Samples(r) => self.holes.samples(r, now, out),
            BusOutput::Gap(g) => {
                if g.reason == bus::OVERRUN {
                    self.metrics.sensor_overruns(&g.sensor, 1);
                }
                self.holes.declared(&g);
                out.push(LiveItem::Gap(g));
            }
            BusOutput::ClockStep(s) => out.push(LiveItem::ClockStep(s)),
        }
    }

    fn idle(&mut self, now: Now, out: &mut Vec<LiveItem>) {
        self.holes.idle(now, out);
    }
}

/// Runs the read loop of bus source `config` (i2c or spi) and ingests what it yields until
/// `stop`.
pub(super) async fn ingest(
    p: Params,
    config: SourceConfig,
    store: SharedStore,
    tx: mpsc::Sender<crate::decide::input::DecideBatch>,
    stop: watch::Receiver<bool>,
) -> Result<(), IngestError> {
    let sensor = match &config {
        SourceConfig::I2c(s) => s.sensor.clone(),
        SourceConfig::Spi(s) => s.sensor.clone(),
        other => {
            return Err(IngestError::UnsupportedSource {
                index: p.source.into(),
                kind: other.kind(),
            })
        }
    };
    let (bus_tx, bus_rx) = mpsc::channel(CHANNEL_RECORDS);
    let halt = Arc::new(AtomicBool::new(false));
    let supervisor = {
        let halt = halt.clone();
        let sensor = sensor.clone();
        std::thread::spawn(move || supervise(&config, &sensor, bus_tx, &halt))
    };
    let adapter = BusAdapter::new(&sensor, p.telemetry.metrics.clone());
    let ended =
        ingest_live(p, adapter, bus_rx, Box::new(SystemClock::new()), store, tx, stop).await;
    halt.store(true, Ordering::Relaxed);
    let joined = tokio::task::spawn_blocking(move || supervisor.join()).await?;
    joined.map_err(|_| IngestError::StageGone("bus source"))?;
    ended
}

/// Opens the device, runs the read loop until it fails or `halt`, and reopens after a backoff,
/// until `halt` (or the receiving side is gone).
fn supervise(
    config: &SourceConfig,
    sensor: &BusSensor,
    tx: mpsc::Sender<BusOutput>,
    halt: &Arc<AtomicBool>,
) {
    let device = sensor.device.display().to_string();
    let mut backoff = Backoff::new(200, 30_000, SystemClock::new().now_ms() as u64);
    while !halt.load(Ordering::Relaxed) && !tx.is_closed() {
        let opened = match config {
            SourceConfig::I2c(s) => bus::open_i2c(s).map(|a| read(a, sensor, &tx, halt)),
            SourceConfig::Spi(s) => bus::open_spi(s).map(|a| read(a, sensor, &tx, halt)),
            _ => return,
        };
        match opened {
            Ok(Ok(())) => backoff.reset(),
            Ok(Err(e)) => {
                tracing::error!(device = %device, "bus read loop failed: {e}; reopening");
                backoff.fail();
            }
            Err(problem) => {
                tracing::error!(device = %device, "{problem}");
                backoff.fail();
            }
        }
        pause(backoff.delay_ms(), halt);
    }
}

/// Runs one read loop on an opened sensor until it ends; the error that ended it, if any.
fn read<I>(
    accel: Adxl345<I>,
    sensor: &BusSensor,
    tx: &mpsc::Sender<BusOutput>,
    halt: &Arc<AtomicBool>,
) -> Result<(), String>
where
    I: RegisterAccess + Send + 'static,
    I::Error: std::fmt::Debug + Send + 'static,
{
    let reader = BusReader::new(accel, SystemClock::new(), Adjtimex, sensor.clone());
    let handle = bus::spawn(reader, tx.clone(), halt.clone());
    match handle.join() {
        Ok((_driver, Ok(stats))) => {
            tracing::info!("bus read loop stopped: {stats:?}");
            Ok(())
        }
        Ok((_driver, Err(e))) => Err(e.to_string()),
        Err(_) => Err("the read loop panicked".to_owned()),
    }
}

/// Sleeps `ms`, waking early when `halt` is set.
fn pause(ms: u64, halt: &AtomicBool) {
    let mut left = ms;
    while left > 0 && !halt.load(Ordering::Relaxed) {
        let step = left.min(50);
        std::thread::sleep(Duration::from_millis(step));
        left -= step;
    }
}
