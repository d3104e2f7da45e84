//! The async poller: reads every block of a source at its poll rate and sends sample blocks.
//!
//! Poll slot `k` is due `k / poll_rate` seconds after the start; its event time is the wall-clock
//! reading at the start plus the same offset ([`super::block`]), so records of one source are
//! contiguous and never overlap, and gaps are real gaps. A poll that overruns its slot skips the
//! slots it overran (counted in `skipped_slots`); nothing is made up for them.
//!
//! Failures: a device exception is an answer (quality `bad` readings, the connection stays).
//! A timeout, a garbled answer or a failed connection closes the connection; it is reopened
//! (TCP reconnect, or the serial device reopened by its configured path) after a backoff that
//! starts at `reconnect_min`, doubles per consecutive failure up to `reconnect_max`, and is
//! jittered to 50..100 % so that many gateways do not retry in step. Any answer resets it.
//!
//! The poller stops when the receiving side of its channel is dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_modbus::client::Context;

use super::block::{BlockAssembler, ChannelMeta, ModbusOutput, PollOutcome};
use super::link::{self, ReadError};
use crate::clock::Clock;
use crate::config::ModbusSource;

/// Counters of one poller, readable while it runs (metrics come later).
#[derive(Debug, Default)]
pub struct PollStats {
    /// Poll slots in which the blocks were read (each block read is one call).
    pub polls: AtomicU64,
    /// Block reads answered with registers.
    pub answers: AtomicU64,
    /// Block reads answered with a device exception.
    pub exceptions: AtomicU64,
    pub timeouts: AtomicU64,
    /// Garbled answers (CRC, framing, mismatched header, wrong length).
    pub frame_errors: AtomicU64,
    /// Connections that failed while in use (closed, reset, device unplugged).
    pub transport_errors: AtomicU64,
    /// Failed attempts to open a connection.
    pub connect_failures: AtomicU64,
    /// Successful connections after the first.
    pub reconnects: AtomicU64,
    /// Slots that passed without a poll (overrun, or waiting to reconnect).
    pub skipped_slots: AtomicU64,
}

/// A plain copy of [`PollStats`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub polls: u64,
    pub answers: u64,
    pub exceptions: u64,
    pub timeouts: u64,
    pub frame_errors: u64,
    pub transport_errors: u64,
    pub connect_failures: u64,
    pub reconnects: u64,
    pub skipped_slots: u64,
}

impl PollStats {
    pub fn snapshot(&self) -> StatsSnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatsSnapshot {
            polls: g(&self.polls),
            answers: g(&self.answers),
            exceptions: g(&self.exceptions),
            timeouts: g(&self.timeouts),
            frame_errors: g(&self.frame_errors),
            transport_errors: g(&self.transport_errors),
            connect_failures: g(&self.connect_failures),
            reconnects: g(&self.reconnects),
            skipped_slots: g(&self.skipped_slots),
        }
    }
}

fn bump(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

/// Bounded exponential backoff with jitter; pure given its seed.
#[derive(Debug)]
pub struct Backoff {
    min_ms: u64,
    max_ms: u64,
    failures: u32,
    state: u64,
}

impl Backoff {
    pub fn new(min_ms: u64, max_ms: u64, seed: u64) -> Self {
        Backoff { min_ms, max_ms: max_ms.max(min_ms), failures: 0, state: seed | 1 }
    }

    /// Records a failure.
    pub fn fail(&mut self) {
        self.failures = self.failures.saturating_add(1);
    }

    /// The delay before the next attempt after `n` consecutive failures: `min * 2^(n-1)` capped
    /// at `max`, times a factor in [0.5, 1); 0 when nothing failed.
    pub fn delay_ms(&mut self) -> u64 {
        if self.failures == 0 {
            return 0;
        }
        let doubled = self.min_ms.saturating_mul(1u64 << (self.failures - 1).min(40));
        let base = doubled.min(self.max_ms);
        // xorshift64: enough to spread retries, needs no dependency.
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        let unit = (self.state >> 11) as f64 / (1u64 << 53) as f64;
        ((base as f64) * (0.5 + 0.5 * unit)).round() as u64
    }

    /// Any answer from the device: the next failure starts again at `min`.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// Failures since the last reset.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

/// Polls `source` until `tx`'s receiver is dropped. Event times start at `clock.now_ms()`.
#[allow(clippy::disallowed_methods)] // the poll schedule is paced by tokio's clock (paused in tests)
pub async fn run(
    source: &ModbusSource,
    clock: &dyn Clock,
    tx: mpsc::Sender<ModbusOutput>,
    stats: &PollStats,
) {
    let anchor_ms = clock.now_ms();
    let mut assemblers: Vec<BlockAssembler> = source
        .blocks
        .iter()
        .map(|b| {
            let meta = b
                .channels
                .iter()
                .map(|c| ChannelMeta {
                    sensor: c.sensor.clone(),
                    unit: c.unit,
                    axis: c.axis.clone(),
                })
                .collect();
            BlockAssembler::new(
                &source.machine,
                meta,
                source.poll_rate_hz,
                anchor_ms,
                source.block_polls,
            )
        })
        .collect();
    let period_ns = (1e9 / source.poll_rate_hz).round().max(1.0) as u64;
    let start = Instant::now();
    let due = |k: u64| start + Duration::from_nanos(period_ns.saturating_mul(k));
    let slot_now =
        || (Instant::now().duration_since(start).as_nanos() / u128::from(period_ns)) as u64;
    let mut backoff = Backoff::new(
        source.reconnect_min_ms,
        source.reconnect_max_ms,
        anchor_ms as u64 ^ 0x9E37_79B9_7F4A_7C15,
    );
    let mut link: Option<Context> = None;
    let mut connected_before = false;
    let mut out = Vec::new();
    let mut k: u64 = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(due(k)) => {}
            _ = tx.closed() => return,
        }
        let ctx = match link.as_mut() {
            Some(ctx) => ctx,
            None => {
                let delay = Duration::from_millis(backoff.delay_ms());
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = tx.closed() => return,
                }
                match link::connect(source).await {
                    Ok(ctx) => {
                        if connected_before {
                            bump(&stats.reconnects, 1);
                        }
                        connected_before = true;
                        tracing::info!(source = %source.endpoint(), "modbus connected");
                        link.insert(ctx)
                    }
                    Err(e) => {
                        bump(&stats.connect_failures, 1);
                        backoff.fail();
                        tracing::warn!(source = %source.endpoint(), "modbus: {e}");
                        k = skip_to(slot_now(), k, stats);
                        continue;
                    }
                }
            }
        };
        let now = slot_now();
        k = skip_to(now, k, stats);
        bump(&stats.polls, 1);
        let mut failed: Option<ReadError> = None;
        for (block, assembler) in source.blocks.iter().zip(assemblers.iter_mut()) {
            if failed.is_some() {
                assembler.push(k, PollOutcome::Missing, &mut out);
                continue;
            }
            let outcome = match link::read_block(ctx, block, source.timeout_ms).await {
                Ok(Ok(registers)) => match block.decode(&registers) {
                    Ok(values) => {
                        bump(&stats.answers, 1);
                        PollOutcome::Values(values)
                    }
                    Err(e) => {
                        failed = Some(ReadError::Frame(e.to_string()));
                        PollOutcome::Missing
                    }
                },
                Ok(Err(code)) => {
                    bump(&stats.exceptions, 1);
                    PollOutcome::Exception(code)
                }
                Err(e) => {
                    failed = Some(e);
                    PollOutcome::Missing
                }
            };
            assembler.push(k, outcome, &mut out);
        }
        match failed {
            None => backoff.reset(),
            Some(e) => {
                let counter = match &e {
                    ReadError::Timeout(_) => &stats.timeouts,
                    ReadError::Frame(_) => &stats.frame_errors,
                    ReadError::Transport(_) => &stats.transport_errors,
                };
                bump(counter, 1);
                backoff.fail();
                tracing::warn!(source = %source.endpoint(), "modbus: {e}; reconnecting");
                link = None;
            }
        }
        for item in out.drain(..) {
            if tx.send(item).await.is_err() {
                return;
            }
        }
        k += 1;
    }
}

/// The slot to poll next: `k`, or the current slot when the poller has fallen behind.
fn skip_to(now: u64, k: u64, stats: &PollStats) -> u64 {
    if now > k {
        bump(&stats.skipped_slots, now - k);
        now
    } else {
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_with_jitter_and_resets() {
        let mut b = Backoff::new(100, 1_000, 42);
        assert_eq!(b.delay_ms(), 0);
        let delays: Vec<u64> = (0..8)
            .map(|_| {
                b.fail();
                b.delay_ms()
            })
            .collect();
        let bases = [100, 200, 400, 800, 1_000, 1_000, 1_000, 1_000];
        for (d, base) in delays.iter().zip(bases) {
            assert!(*d >= base / 2 && *d <= base, "{delays:?}");
        }
        assert!(delays[4..].iter().any(|d| *d != delays[4]), "jittered: {delays:?}");
        assert_eq!(b.failures(), 8);
        b.reset();
        b.fail();
        assert!(b.delay_ms() <= 100);
    }

    #[test]
    fn a_late_poll_skips_the_slots_it_overran() {
        let stats = PollStats::default();
        assert_eq!(skip_to(3, 3, &stats), 3);
        assert_eq!(skip_to(7, 4, &stats), 7);
        assert_eq!(stats.snapshot().skipped_slots, 3);
    }
}
