//! Durable journal append of framed raw samples, 8 sensors at 3200 Hz, against the same samples
//! as plain per-sample sled inserts, side by side. One frame is one sensor-second: 3200 f32
//! (12.8 KB, opaque bytes) behind a 16-byte header. One iteration is one group commit of 32
//! frames (4 seconds of all 8 sensors, 102 400 samples): what arrives in 100 ms at 1M samples/s.
//! `journal/commit_only` times the commit (flush + fsync) alone. The frames go to segment files
//! (`src/store/segments.rs`); `journal_group_commit_32_frames_inline_in_sled` is the same with
//! every line kept inside sled (the store before segments). Long runs (a simulated day with
//! shedding, commit percentiles, restart-to-ready) are `examples/store_day/`.
#![allow(clippy::unwrap_used)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use linegate::store::{Store, StoreOptions};

const SENSORS: u64 = 8;
const RATE: u64 = 3200;
const FRAMES: u64 = 32;

/// Frame `k` of the run: sensor `k % 8`, second `k / 8`.
fn frame(k: u64) -> (i64, Vec<u8>) {
    let mut v = Vec::with_capacity(16 + 4 * RATE as usize);
    v.extend_from_slice(&(k % SENSORS).to_be_bytes());
    v.extend_from_slice(&(k / SENSORS).to_be_bytes());
    for i in 0..RATE {
        v.extend_from_slice(&((i as f32 * 0.001).sin() * (k as f32)).to_le_bytes());
    }
    (k as i64 * 1000, v)
}

fn store(c: &mut Criterion) {
    let mut g = c.benchmark_group("store");
    g.throughput(Throughput::Elements(FRAMES * RATE));
    g.sample_size(20);

    let tmp = tempfile::tempdir().unwrap();
    let mut s = Store::open(&tmp.path().join("journal"), StoreOptions::default()).unwrap();
    let mut k = 0;
    g.bench_function("journal_group_commit_32_frames", |b| {
        b.iter(|| {
            let batch: Vec<_> = (k..k + FRAMES).map(frame).collect();
            k += FRAMES;
            s.append_journal(&batch).unwrap();
            s.commit().unwrap();
        })
    });
    g.bench_function("journal_commit_only", |b| {
        b.iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            for _ in 0..iters {
                let batch: Vec<_> = (k..k + FRAMES).map(frame).collect();
                k += FRAMES;
                s.append_journal(&batch).unwrap();
                #[allow(clippy::disallowed_methods)] // a benchmark measures wall time
                let t = std::time::Instant::now();
                s.commit().unwrap();
                total += t.elapsed();
            }
            total
        })
    });
    drop(s);

    let inline = StoreOptions { raw_threshold: usize::MAX, ..StoreOptions::default() };
    let mut s = Store::open(&tmp.path().join("inline"), inline).unwrap();
    g.bench_function("journal_group_commit_32_frames_inline_in_sled", |b| {
        b.iter(|| {
            let batch: Vec<_> = (k..k + FRAMES).map(frame).collect();
            k += FRAMES;
            s.append_journal(&batch).unwrap();
            s.commit().unwrap();
        })
    });
    drop(s);

    let db =
        sled::Config::new().path(tmp.path().join("plain")).cache_capacity(64 << 20).open().unwrap();
    let tree = db.open_tree("samples").unwrap();
    let db_file = tmp.path().join("plain").join("db");
    let mut k = 0;
    g.bench_function("plain_sled_per_sample_inserts_32_frames", |b| {
        b.iter(|| {
            for f in k..k + FRAMES {
                let (_, bytes) = frame(f);
                for (i, sample) in bytes[16..].chunks_exact(4).enumerate() {
                    let mut key = [0u8; 18];
                    key[..8].copy_from_slice(&(f % SENSORS).to_be_bytes());
                    key[8..16].copy_from_slice(&(f / SENSORS).to_be_bytes());
                    key[16..].copy_from_slice(&(i as u16).to_be_bytes());
                    tree.insert(key, sample).unwrap();
                }
            }
            k += FRAMES;
            // The same durability as the store's commit: sled's flush, then a real fsync.
            db.flush().unwrap();
            std::fs::File::open(&db_file).unwrap().sync_all().unwrap();
        })
    });
    g.finish();
}

criterion_group!(benches, store);
criterion_main!(benches);
