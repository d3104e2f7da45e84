//! An `accepted` ledger record encoded two ways, on the same records: `LedgerRecord::encode` (the
//! bytes the store keeps) against serde through ciborium (`records::cbor::encode`, what every
//! other record uses). One iteration encodes a batch of 1 000 records shaped like a burst's: ids,
//! machines and sensors of real length, times and positions of real size, every acceptance kind.
//! Both must give the same bytes; the run stops before timing anything if they do not.
#![allow(clippy::unwrap_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use linegate::records::cbor;
use linegate::records::ledger::{Acceptance, LedgerEntry, LedgerRecord, RuleTouch};

const BATCH: u64 = 1_000;

fn records() -> Vec<LedgerRecord> {
    let how = [Acceptance::Applied, Acceptance::LateApplied, Acceptance::TooLate];
    (0..BATCH)
        .map(|i| {
            let (machine, sensor) = (format!("press-{}", i % 16), format!("s{}", i % 4));
            let seq = 1_000_000 + i;
            LedgerRecord::new(
                1_700_000_000_000 + i as i64 * 250,
                LedgerEntry::Accepted {
                    event_id: format!("gw-line-3.{sensor}.{seq}"),
                    machine,
                    sensor,
                    seq,
                    ts_ms: 1_700_000_000_000 + i as i64 * 1000,
                    how: how[(i % 3) as usize],
                    journal_pos: 40_000_000 + i,
                    outbox_seq: 90_000_000 + i,
                    counted: i % 5 == 0,
                    rules: (i % 5 == 0)
                        .then(|| RuleTouch {
                            rule: "high-vibration".into(),
                            alert_id: Some(format!("gw-line-3/high-vibration/press-{}/1", i % 16)),
                        })
                        .into_iter()
                        .collect(),
                    watermark_ms: Some(1_700_000_000_000 + i as i64 * 1000 - 5000),
                },
            )
        })
        .collect()
}

fn ledger_encode(c: &mut Criterion) {
    let records = records();
    let by_serde = |r: &LedgerRecord| {
        let bytes = r.encode();
        cbor::encode(&bytes[..1], r)
    };
    for r in &records {
        assert_eq!(r.encode(), by_serde(r), "the two encodings differ on {r:?}");
    }

    let mut g = c.benchmark_group("ledger_encode");
    g.throughput(Throughput::Elements(BATCH));
    g.bench_function("accepted_by_hand", |b| {
        b.iter(|| {
            for r in black_box(&records) {
                black_box(r.encode());
            }
        })
    });
    let version = [records[0].encode()[0]];
    g.bench_function("accepted_by_serde", |b| {
        b.iter(|| {
            for r in black_box(&records) {
                black_box(cbor::encode(&version, r));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, ledger_encode);
criterion_main!(benches);
