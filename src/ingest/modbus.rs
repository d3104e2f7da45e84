//! A Modbus source (`modbus-tcp`, `modbus-rtu`) in `linegate run`: the poller
//! ([`crate::source::modbus::run`]) on its own task, its output turned into live items
//! ([`super::live`]).
//!
//! - Sample blocks get the clock evidence of the moment they arrived (the clock-quality model
//!   fed by `adjtimex`, as for bus sensors); a clock step is ledgered.
//! - Polls the device answered with an exception are declared a gap, reason `device_exception`:
//!   the readings exist but carry no value.
//! - Polls without an answer (a timeout, a dead connection, slots skipped while reconnecting)
//!   leave holes in the records; [`Holes`] declares them, reason `no_answer`, when the device
//!   answers again, and while an outage lasts.
//!
//! The poller waits for room in its channel, so it never sheds; what a slow pipeline costs it is
//! skipped poll slots, declared like any other poll without an answer.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::live::{ingest_live, Adapter, Holes, LiveItem, Now};
use super::{IngestError, Params};
use crate::clock::SystemClock;
use crate::config::ModbusSource;
use crate::source::clock_quality::{Adjtimex, KernelClock};
use crate::source::modbus::{ModbusOutput, PollStats};
use crate::stamp::clock::{ClockModel, ClockModelConfig, ClockReading, KernelEvidence};
use crate::store::SharedStore;

/// Reason of a gap left by polls without an answer.
pub(super) const NO_ANSWER: &str = "no_answer";
/// Reason of a gap of polls answered with a device exception.
pub(super) const DEVICE_EXCEPTION: &str = "device_exception";
/// Kernel clock evidence is read at most this often (monotonic ms).
const KERNEL_EVERY_MS: i64 = 1_000;

/// The clock-quality model of a source whose samples are stamped elsewhere: evidence for each
/// record as it arrives, and the steps for the ledger.
#[derive(Debug)]
pub(super) struct ClockEvidence<K> {
    model: ClockModel,
    kernel: K,
    kernel_last: Option<KernelEvidence>,
    kernel_read_at: i64,
}

impl<K: KernelClock> ClockEvidence<K> {
    pub(super) fn new(mut kernel: K, now: Now) -> Self {
        let kernel_last = kernel.read();
        let first =
            ClockReading { mono_ms: now.mono_ms, real_ms: now.real_ms, kernel: kernel_last };
        ClockEvidence {
            model: ClockModel::new(ClockModelConfig::default(), first),
            kernel,
            kernel_last,
            kernel_read_at: now.mono_ms,
        }
    }

    /// Observes the clocks at `now` (a step goes to `out`) and returns the evidence for data
    /// stamped now.
    pub(super) fn observe(
        &mut self,
        now: Now,
        out: &mut Vec<LiveItem>,
    ) -> crate::event::ClockEvidence {
        if now.mono_ms - self.kernel_read_at >= KERNEL_EVERY_MS {
            self.kernel_last = self.kernel.read();
            self.kernel_read_at = now.mono_ms;
        }
        let reading =
            ClockReading { mono_ms: now.mono_ms, real_ms: now.real_ms, kernel: self.kernel_last };
        match self.model.observe(reading) {
            Ok(Some(step)) => out.push(LiveItem::ClockStep(step)),
            Ok(None) => {}
            // Cannot happen with one monotonic clock; the evidence of the last reading stands.
            Err(e) => tracing::warn!("{e}"),
        }
        self.model.stamp(now.mono_ms).clock
    }
}

/// Modbus output to live items; see the module documentation.
#[derive(Debug)]
pub(super) struct ModbusAdapter<K> {
    holes: Holes,
    clock: ClockEvidence<K>,
}

impl<K: KernelClock> ModbusAdapter<K> {
    pub(super) fn new(source: &ModbusSource, kernel: K, now: Now) -> Self {
        ModbusAdapter {
            holes: Holes::new(NO_ANSWER, horizon_ms(source)),
            clock: ClockEvidence::new(kernel, now),
        }
    }
}

/// How long after its first poll a record may arrive: a block's polls, a timeout for each
/// block read in the last poll, and a second to spare.
pub(super) fn horizon_ms(s: &ModbusSource) -> i64 {
    let block_ms = (f64::from(s.block_polls.max(1)) * 1000.0 / s.poll_rate_hz).ceil() as i64;
    block_ms + s.blocks.len() as i64 * s.timeout_ms as i64 + 1_000
}

impl<K: KernelClock + 'static> Adapter for ModbusAdapter<K> {
    type Item = ModbusOutput;

    fn convert(&mut self, item: ModbusOutput, now: Now, out: &mut Vec<LiveItem>) {
        let evidence = self.clock.observe(now, out);
        match item {
            ModbusOutput::Samples(mut r) => {
                r.clock = r.clock.or(Some(evidence));
                self.holes.samples(r, now, out);
            }
            ModbusOutput::Bad(b) => self.holes.undelivered(
                &b.machine,
                &b.sensor,
                b.t0_ms,
                b.rate_hz,
                b.polls as usize,
                DEVICE_EXCEPTION,
                now,
                out,
            ),
        }
    }

    fn idle(&mut self, now: Now, out: &mut Vec<LiveItem>) {
        self.clock.observe(now, out);
        self.holes.idle(now, out);
    }
}

/// Runs the poller of source `p.source` and ingests what it yields until `stop`.
pub(super) async fn ingest(
    p: Params,
    source: ModbusSource,
    store: SharedStore,
    tx: mpsc::Sender<crate::decide::input::DecideBatch>,
    stop: watch::Receiver<bool>,
) -> Result<(), IngestError> {
    let clock = SystemClock::new();
    let adapter = ModbusAdapter::new(&source, Adjtimex, Now::read(&clock));
    let (poll_tx, poll_rx) = mpsc::channel(64);
    let stats = Arc::new(PollStats::default());
    let poller = {
        let stats = stats.clone();
        tokio::spawn(async move {
            crate::source::modbus::run(&source, &SystemClock::new(), poll_tx, &stats).await;
        })
    };
    let ended = ingest_live(p, adapter, poll_rx, Box::new(clock), store, tx, stop).await;
    // The poller stops when its channel's receiver is gone; do not wait out a pending timeout.
    poller.abort();
    tracing::info!("modbus source stopped: {:?}", stats.snapshot());
    ended
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, SourceConfig};
    use crate::records::outbox::GapRange;
    use crate::source::modbus::BadReadings;
    use crate::trace::SamplesRecord;

    struct NoKernel;
    impl KernelClock for NoKernel {
        fn read(&mut self) -> Option<KernelEvidence> {
            None
        }
    }

    const T: i64 = 1_700_000_000_000;

    fn source() -> ModbusSource {
        let text = "[gateway]\nid = \"gw\"\n[[source]]\nkind = \"modbus-tcp\"\nhost = \"h\"\n\
                    machine = \"m\"\npoll_rate = 100\ntimeout = \"200ms\"\nblock_length = \"1s\"\n\
                    [[source.block]]\naddress = 0\n[[source.block.channel]]\nsensor = \"s\"\n\
                    type = \"u16\"\nunit = \"g\"\n";
        match Config::from_toml(text, "t.toml").unwrap().source.remove(0) {
            SourceConfig::Modbus(m) => m,
            other => panic!("{other:?}"),
        }
    }

    fn rec(t0_ms: i64, n: usize) -> ModbusOutput {
        ModbusOutput::Samples(SamplesRecord {
            machine: "m".into(),
            sensor: "s".into(),
            t0_ms,
            rate_hz: 100.0,
            unit: crate::event::Unit::G,
            axis: None,
            clock: None,
            data: vec![0.5; n],
        })
    }

    fn now(mono_ms: i64) -> Now {
        Now { real_ms: T + mono_ms, mono_ms }
    }

    fn gaps(out: &[LiveItem]) -> Vec<(GapRange, String)> {
        out.iter()
            .filter_map(|i| match i {
                LiveItem::Gap(g) => Some((g.range.clone(), g.reason.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn missed_polls_exceptions_and_outages_become_gaps() {
        let s = source();
        assert_eq!(horizon_ms(&s), 1_000 + 200 + 1_000);
        let mut a = ModbusAdapter::new(&s, NoKernel, now(0));
        let mut out = Vec::new();
        a.convert(rec(T, 100), now(1_000), &mut out);
        a.convert(rec(T + 1_000, 100), now(2_000), &mut out);
        assert!(gaps(&out).is_empty(), "contiguous records leave no gap");
        // Three polls without an answer, then an exception for two polls, then answers again.
        a.convert(rec(T + 2_030, 97), now(3_000), &mut out);
        let bad = BadReadings {
            machine: "m".into(),
            sensor: "s".into(),
            t0_ms: T + 3_000,
            rate_hz: 100.0,
            polls: 2,
            unit: crate::event::Unit::G,
            axis: None,
            exception: 2,
        };
        a.convert(ModbusOutput::Bad(bad), now(3_020), &mut out);
        a.convert(rec(T + 3_020, 98), now(4_000), &mut out);
        let want = [
            (GapRange::Samples { from_ms: T + 2_000, to_ms: T + 2_030 }, NO_ANSWER.to_owned()),
            (
                GapRange::Samples { from_ms: T + 3_000, to_ms: T + 3_020 },
                DEVICE_EXCEPTION.to_owned(),
            ),
        ];
        assert_eq!(gaps(&out), want);
        let LiveItem::Samples(r) = &out[0] else { panic!("{out:?}") };
        assert_eq!(r.clock.map(|c| c.state), Some(crate::event::ClockState::Unknown));
        // The device goes away: nothing is declared within the horizon plus ten seconds ...
        out.clear();
        a.idle(now(4_000 + 2_200 + 9_000), &mut out);
        assert!(out.is_empty(), "{out:?}");
        // ... then what is certainly lost, and the late record's samples in it are dropped.
        a.idle(now(4_000 + 2_200 + 10_000), &mut out);
        assert_eq!(
            gaps(&out),
            [(GapRange::Samples { from_ms: T + 4_000, to_ms: T + 14_000 }, NO_ANSWER.to_owned())]
        );
        out.clear();
        a.convert(rec(T + 13_000, 200), now(17_000), &mut out);
        let LiveItem::Samples(r) = &out[0] else { panic!("{out:?}") };
        assert_eq!((r.t0_ms, r.data.len()), (T + 14_000, 100));
        assert_eq!(a.holes.dropped_samples, 100);
    }
}
