//! Runs the rule core over the benchmark load once (for `valgrind --tool=callgrind`, which
//! counts instructions: a noise-free way to compare two versions of the core).
//! `cargo run --release --example rule_load -- [SECONDS]`
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use linegate::event::Event;
use linegate::rule::{Engine, Params};
use linegate::synth::Load;

fn main() {
    let seconds = std::env::args().nth(1).map_or(2_000, |s| s.parse().unwrap());
    let mut load = Load::new(50, seconds);
    load.sensors_per_machine = 2;
    load.burst_rate = 1.0 / 900.0;
    let mut v: Vec<(i64, Event)> = Vec::new();
    load.generate(|at, e| v.push((at, e.clone())));
    let v = v.to_vec();
    let mut engine = Engine::new(Params::defaults("gw-bench"));
    let (mut out, mut records) = (Vec::new(), 0usize);
    for (at, e) in &v {
        engine.on_event(*at, e, &mut out);
        records += out.len();
        out.clear();
    }
    println!("{} events, {records} alert records, {:?}", v.len(), engine.state_size());
}
