//! Driving a [`BusReader`]: the paced poll loop, and a thread that feeds a bounded channel.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::mpsc::Sender;

use super::{BusError, BusOutput, BusReader, BusStats};
use crate::clock::Clock;
use crate::driver::adxl345::{Adxl345, RegisterAccess};
use crate::records::outbox::{GapNotice, GapRange};
use crate::source::clock_quality::KernelClock;

/// How a spawned loop ended: the driver (to reopen or give back) and the stats or the error.
pub type LoopEnd<I> = (Adxl345<I>, Result<BusStats, BusError<<I as RegisterAccess>::Error>>);

/// Polls `reader` every `poll_period_us` (deadlines on the monotonic clock, so the period does
/// not drift; after a stall the schedule restarts rather than polling in a burst) and hands each
/// poll's outputs to `deliver`, which takes them out of the vector and returns `false` to stop.
pub fn run<I, C, K>(
    reader: &mut BusReader<I, C, K>,
    mut deliver: impl FnMut(&mut Vec<BusOutput>) -> bool,
) -> Result<(), BusError<I::Error>>
where
    I: RegisterAccess,
    I::Error: std::fmt::Debug,
    C: Clock,
    K: KernelClock,
{
    let period_us = reader.poll_period_us() as f64;
    let mut out = Vec::new();
    let (mut start_ms, mut k) = (reader.monotonic_ms() as f64, 0.0);
    loop {
        reader.poll_once(&mut out)?;
        if !deliver(&mut out) {
            return Ok(());
        }
        k += 1.0;
        let due_ms = start_ms + k * period_us / 1000.0;
        let now_ms = reader.monotonic_ms() as f64;
        if due_ms > now_ms {
            std::thread::sleep(Duration::from_micros(((due_ms - now_ms) * 1000.0) as u64));
        } else if now_ms - due_ms > period_us / 1000.0 {
            (start_ms, k) = (now_ms, 0.0);
        }
    }
}

/// Runs `reader` on its own thread until `stop` is set or the receiver is dropped, sending its
/// outputs on `tx` without ever blocking the read loop: when the channel is full a samples record
/// is shed and declared as a gap (reason `"backpressure"`); gaps and clock steps wait in a local
/// queue until there is room. The thread ends with the driver (to reopen or give back) and how
/// the loop ended.
pub fn spawn<I, C, K>(
    mut reader: BusReader<I, C, K>,
    tx: Sender<BusOutput>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<LoopEnd<I>>
where
    I: RegisterAccess + Send + 'static,
    I::Error: std::fmt::Debug + Send + 'static,
    C: Clock + 'static,
    K: KernelClock + 'static,
{
    std::thread::spawn(move || {
        let mut held: VecDeque<BusOutput> = VecDeque::new();
        let mut shed = 0u64;
        let ended = run(&mut reader, |out| {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            for o in out.drain(..) {
                let o = match o {
                    o @ BusOutput::Samples(_) if !held.is_empty() => o,
                    o => match tx.try_send(o) {
                        Ok(()) => continue,
                        Err(TrySendError::Closed(_)) => return false,
                        Err(TrySendError::Full(o)) => o,
                    },
                };
                match o {
                    BusOutput::Samples(r) => {
                        shed += 1;
                        let to_ms =
                            r.t0_ms + (r.data.len() as f64 * 1000.0 / r.rate_hz).ceil() as i64;
                        hold_gap(&mut held, &r.machine, &r.sensor, r.t0_ms, to_ms);
                    }
                    other => held.push_back(other),
                }
            }
            while let Some(o) = held.pop_front() {
                match tx.try_send(o) {
                    Ok(()) => {}
                    Err(TrySendError::Closed(_)) => return false,
                    Err(TrySendError::Full(o)) => {
                        held.push_front(o);
                        break;
                    }
                }
            }
            true
        });
        let stats = BusStats { shed_records: shed, ..reader.stats() };
        (reader.into_driver(), ended.map(|()| stats))
    })
}

/// Declares `[from_ms, to_ms)` of a sensor as shed, extending the last held gap of that sensor
/// when it ends where this one starts.
pub(super) fn hold_gap(
    held: &mut VecDeque<BusOutput>,
    machine: &str,
    sensor: &str,
    from_ms: i64,
    to_ms: i64,
) {
    for o in held.iter_mut().rev() {
        if let BusOutput::Gap(g) = o {
            if let GapRange::Samples { to_ms: end, .. } = &mut g.range {
                if g.sensor == sensor && g.reason == "backpressure" && *end >= from_ms {
                    *end = (*end).max(to_ms);
                    return;
                }
            }
        }
    }
    held.push_back(BusOutput::Gap(GapNotice {
        machine: machine.to_owned(),
        sensor: sensor.to_owned(),
        range: GapRange::Samples { from_ms, to_ms },
        reason: "backpressure".to_owned(),
        declared_at_ms: to_ms, // the block end: about when it was read
    }));
}
