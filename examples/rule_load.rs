//! Runs the rule core over the benchmark load once (for `valgrind --tool=callgrind`, which
//! counts instructions: a noise-free way to compare two versions of the core).
//! `cargo run --release --example rule_load -- [SECONDS] [hot]`; with `hot`, the hot partition of
//! `benches/rule.rs` (one machine, 8 sensors, every event above the threshold, no duplicates).
//! With `generate-only` as the last argument the load is made but not decided: the difference of
//! the two instruction counts is the rule core's (`benches/instructions.sh`).
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use linegate::clock::{Clock, SystemClock};
use linegate::event::Event;
use linegate::rule::alert::AlertRecord;
use linegate::rule::{Engine, Params};
use linegate::synth::Load;

fn main() {
    let seconds = std::env::args().nth(1).map_or(2_000, |s| s.parse().unwrap());
    let hot = std::env::args().nth(2).is_some_and(|a| a == "hot");
    let decide = std::env::args().next_back().is_none_or(|a| a != "generate-only");
    let mut load = Load::new(if hot { 1 } else { 50 }, seconds);
    load.sensors_per_machine = if hot { 8 } else { 2 };
    load.burst_rate = if hot { 1.0 } else { 1.0 / 900.0 };
    if hot {
        load.duplicate_rate = 0.0;
    }
    let mut v: Vec<(i64, Event)> = Vec::new();
    load.generate(|at, e| v.push((at, e.clone())));
    let v = v.to_vec();
    let mut engine = Engine::new(Params::defaults("gw-bench"));
    let (mut out, mut records) = (Vec::new(), 0usize);
    let clock = SystemClock::new();
    let started = clock.monotonic_s();
    for (at, e) in v.iter().filter(|_| decide) {
        decide_one(&mut engine, *at, e, &mut out);
        records += out.len();
        out.clear();
    }
    let elapsed = clock.monotonic_s() - started;
    println!(
        "{} events in {:.1} ms ({:.2}M events/s), {records} alert records, {:?}",
        v.len(),
        elapsed * 1e3,
        v.len() as f64 / elapsed / 1e6,
        engine.state_size()
    );
}

/// One event through the core; not inlined, so that `callgrind --toggle-collect='*decide_one*'`
/// counts the rule core alone.
#[inline(never)]
fn decide_one(engine: &mut Engine, at: i64, e: &Event, out: &mut Vec<AlertRecord>) {
    engine.on_event(at, e, out);
}
