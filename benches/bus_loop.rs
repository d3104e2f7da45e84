//! The bus read loop (`linegate::source::bus::BusReader`) against the SPI mock at 3200 Hz: one
//! second of data per iteration, as the loop polls it (200 polls, every 5 ms, of 16 samples:
//! INT_SOURCE, FIFO_STATUS, 16 multi-byte sample reads), with the clock model, the timeline and
//! one 1-second record per axis (x, y, z). The manual clock advances 5 ms per poll. Measures the
//! loop's CPU per sample (driver + mock bookkeeping + stamping + records), against the 312 µs
//! between samples at 3200 Hz; asserts zero overruns and every sample delivered.
#![allow(clippy::unwrap_used)]

#[path = "support/spi_tx.rs"]
mod spi_tx;

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use embedded_hal_mock::eh1::spi::{Mock as SpiMock, Transaction as SpiTx};
use linegate::clock::ManualClock;
use linegate::config::{Axis, BusSensor};
use linegate::driver::adxl345::{Adxl345, DataRate, Range};
use linegate::source::bus::{BusOutput, BusReader};
use linegate::source::clock_quality::KernelClock;
use linegate::stamp::clock::KernelEvidence;
use spi_tx::spi_read;

const POLLS: usize = 200;
const PER_POLL: usize = 16;

/// Kernel evidence that never changes: synchronised, 2 ms bound.
struct Synced;

impl KernelClock for Synced {
    fn read(&mut self) -> Option<KernelEvidence> {
        Some(KernelEvidence {
            unsynchronised: false,
            time_error: false,
            maxerror_us: 2_000,
            esterror_us: 100,
        })
    }
}

/// One second at 3200 Hz as the loop reads it.
fn one_second() -> Vec<SpiTx<u8>> {
    let mut tx = Vec::new();
    for p in 0..POLLS {
        spi_read(false, 0xB0, vec![0x00], &mut tx); // INT_SOURCE: no overrun
        spi_read(true, 0xB9, vec![PER_POLL as u8], &mut tx); // FIFO_STATUS: 16 entries
        for i in 0..PER_POLL {
            let v = ((p * PER_POLL + i) as i16).to_le_bytes();
            spi_read(true, 0xF2, vec![v[0], v[1], v[0], v[1], 0x00, 0x01], &mut tx);
        }
    }
    tx
}

fn sensor() -> BusSensor {
    BusSensor {
        device: "/dev/spidev0.0".into(),
        rate: DataRate::Hz3200,
        range: Range::G8,
        machine: "press-7".into(),
        sensor: "s2".into(),
        axes: vec![Axis::X, Axis::Y, Axis::Z],
        block_ms: 1_000,
    }
}

fn bus_loop(c: &mut Criterion) {
    let expectations = one_second();
    let mut g = c.benchmark_group("bus_loop");
    g.throughput(Throughput::Elements((POLLS * PER_POLL) as u64));
    g.sample_size(20);
    g.bench_function("spi_3200hz_1s_3_axes", |b| {
        b.iter_batched(
            || {
                let clock = Arc::new(ManualClock::new(1_700_000_000_000));
                let accel = Adxl345::new_spi(SpiMock::new(&expectations));
                (
                    BusReader::new(accel, clock.clone(), Synced, sensor()),
                    clock,
                    Vec::with_capacity(8),
                )
            },
            |(mut reader, clock, mut out)| {
                for _ in 0..POLLS {
                    clock.advance(5);
                    reader.poll_once(&mut out).unwrap();
                }
                let s = reader.stats();
                assert_eq!((s.samples, s.overruns, s.resyncs), ((POLLS * PER_POLL) as u64, 0, 0));
                let delivered: usize = out
                    .iter()
                    .map(|o| if let BusOutput::Samples(r) = o { r.data.len() } else { 0 })
                    .sum();
                assert_eq!(delivered, 3 * POLLS * PER_POLL, "one full block per axis");
                reader.into_driver().destroy().done();
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, bus_loop);
criterion_main!(benches);
