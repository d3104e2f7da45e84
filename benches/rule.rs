//! The rule core alone: events per second through `Engine::on_event` on a generated load
//! (50 machines, 2 sensors each, 1 event/s with arrival jitter, a 5-minute high-vibration burst
//! every ~15 minutes per machine, 0.1 % duplicates): 200k events per iteration.
#![allow(clippy::unwrap_used)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use linegate::event::Event;
use linegate::rule::{Engine, Params};
use linegate::synth::Load;

fn load() -> Vec<(i64, Event)> {
    let mut load = Load::new(50, 2_000);
    load.sensors_per_machine = 2;
    load.burst_rate = 1.0 / 900.0;
    let mut v = Vec::new();
    load.generate(|at, e| v.push((at, e.clone())));
    // Lay the events out in arrival order, as the parser hands them over (generation frees and
    // reuses heap holes, which would scatter them and measure cache misses on the input instead).
    let compact: Vec<(i64, Event)> = v.to_vec();
    drop(v);
    compact
}

fn rule(c: &mut Criterion) {
    let arrivals = load();
    let mut g = c.benchmark_group("rule");
    g.throughput(Throughput::Elements(arrivals.len() as u64));
    g.sample_size(10);
    g.bench_function("on_event_200k", |b| {
        b.iter_batched(
            || Engine::new(Params::defaults("gw-bench")),
            |mut engine| {
                let mut out = Vec::new();
                for (at, e) in &arrivals {
                    engine.on_event(*at, e, &mut out);
                    out.clear();
                }
                engine
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, rule);
criterion_main!(benches);
