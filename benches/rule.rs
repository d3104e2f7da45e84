//! The rule core alone: events per second through `Engine::on_event`, two loads side by side.
//!
//! - `on_event_200k`: 50 machines, 2 sensors each, 1 event/s with arrival jitter, a 5-minute
//!   high-vibration burst every ~15 minutes per machine, 0.1 % duplicates: 200k events.
//! - `hot_machine_24h`: the hot partition of issue 19: one machine, 8 sensors at 1 event/s each,
//!   every event above the threshold, for 24 h of event time: 691 200 events, one incident that
//!   lasts all day (no duplicates, so the count is exact).
#![allow(clippy::unwrap_used)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use linegate::event::Event;
use linegate::rule::{Engine, Params};
use linegate::synth::Load;

/// Every arrival of `load`, in arrival order.
fn arrivals(load: &Load) -> Vec<(i64, Event)> {
    let mut v = Vec::new();
    load.generate(|at, e| v.push((at, e.clone())));
    // Lay the events out in arrival order, as the parser hands them over (generation frees and
    // reuses heap holes, which would scatter them and measure cache misses on the input instead).
    let compact: Vec<(i64, Event)> = v.to_vec();
    drop(v);
    compact
}

fn mixed() -> Vec<(i64, Event)> {
    let mut load = Load::new(50, 2_000);
    load.sensors_per_machine = 2;
    load.burst_rate = 1.0 / 900.0;
    arrivals(&load)
}

fn hot_machine() -> Vec<(i64, Event)> {
    let mut load = Load::new(1, 86_400);
    load.sensors_per_machine = 8;
    load.burst_rate = 1.0; // every second of every sensor above the threshold (`gen_trace ... hot`)
    load.duplicate_rate = 0.0;
    let v = arrivals(&load);
    assert_eq!(v.len(), 691_200);
    v
}

fn bench(c: &mut Criterion, name: &str, arrivals: &[(i64, Event)]) {
    let mut g = c.benchmark_group("rule");
    g.throughput(Throughput::Elements(arrivals.len() as u64));
    g.sample_size(10);
    g.bench_function(name, |b| {
        b.iter_batched(
            || Engine::new(Params::defaults("gw-bench")),
            |mut engine| {
                let mut out = Vec::new();
                for (at, e) in arrivals {
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

fn rule(c: &mut Criterion) {
    bench(c, "on_event_200k", &mixed());
    bench(c, "hot_machine_24h", &hot_machine());
}

criterion_group!(benches, rule);
criterion_main!(benches);
