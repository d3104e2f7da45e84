//! `replay` end to end on an in-memory JSONL trace (50 machines, 1 event/s each, 4000 s:
//! about 200k lines), lines per second. The side-by-side comparison with jq and the 24-hour
//! memory figure are in `benches/replay_vs_jq.sh`.
#![allow(clippy::unwrap_used)]

use std::io::Write;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use linegate::config::Config;
use linegate::replay::{replay, Sinks};
use linegate::synth::Load;
use serde_json::json;

fn trace() -> (Vec<u8>, u64) {
    let load = Load::new(50, 4_000);
    let (mut buf, mut n) = (Vec::new(), 0u64);
    load.generate(|at, e| {
        serde_json::to_writer(&mut buf, &json!({"at": at, "kind": "event", "event": e})).unwrap();
        buf.write_all(b"\n").unwrap();
        n += 1;
    });
    (buf, n)
}

fn bench(c: &mut Criterion) {
    let (buf, lines) = trace();
    let config = Config::for_replay_defaults("gw-bench");
    let mut g = c.benchmark_group("replay");
    g.throughput(Throughput::Elements(lines));
    g.sample_size(10);
    g.bench_function("jsonl_200k_lines", |b| {
        b.iter(|| {
            let mut sinks =
                Sinks { alerts: std::io::sink(), rejected: None::<std::io::Sink>, events: None };
            replay(&config, &buf[..], &mut sinks, |_| {}).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
