//! The ADXL345 FIFO read loop against the SPI mock: one second of data at 3200 Hz per
//! iteration, as 100 drains of 32 samples (FIFO_STATUS, 32 multi-byte sample reads, then
//! INT_SOURCE for the overrun flag, which the mock reports clear). Measures the driver plus the
//! mock's bookkeeping, not a real bus: it shows the driver's own cost per sample is far below
//! the 312 µs between samples at 3200 Hz.
#![allow(clippy::unwrap_used)]

#[path = "support/spi_tx.rs"]
mod spi_tx;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use embedded_hal_mock::eh1::spi::{Mock as SpiMock, Transaction as SpiTx};
use linegate::driver::adxl345::{Adxl345, Sample};
use spi_tx::spi_read;

const DRAINS: usize = 100;
const PER_DRAIN: usize = 32;

/// One second at 3200 Hz as the bus would carry it.
fn one_second() -> Vec<SpiTx<u8>> {
    let mut tx = Vec::new();
    for d in 0..DRAINS {
        spi_read(true, 0xB9, vec![PER_DRAIN as u8], &mut tx); // FIFO_STATUS: 32 entries
        for i in 0..PER_DRAIN {
            let v = ((d * PER_DRAIN + i) as i16).to_le_bytes();
            // DATAX0..DATAZ1, multi-byte read
            spi_read(true, 0xF2, vec![v[0], v[1], v[0], v[1], 0x00, 0x01], &mut tx);
        }
        spi_read(false, 0xB0, vec![0x00], &mut tx); // INT_SOURCE: no overrun
    }
    tx
}

fn driver(c: &mut Criterion) {
    let expectations = one_second();
    let mut g = c.benchmark_group("driver");
    g.throughput(Throughput::Elements((DRAINS * PER_DRAIN) as u64));
    g.sample_size(20);
    g.bench_function("spi_fifo_3200hz_1s", |b| {
        b.iter_batched(
            || Adxl345::new_spi(SpiMock::new(&expectations)),
            |mut accel| {
                let mut buf = [Sample::default(); 33];
                let (mut samples, mut overruns) = (0usize, 0usize);
                for _ in 0..DRAINS {
                    samples += accel.read_fifo(&mut buf).unwrap();
                    overruns += usize::from(accel.fifo_overrun().unwrap());
                }
                assert_eq!((samples, overruns), (DRAINS * PER_DRAIN, 0));
                accel.destroy().done();
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, driver);
criterion_main!(benches);
