//! Writes a large synthetic trace (JSON Lines, docs/contracts.md section 8) for benchmarks:
//! `cargo run --release --example gen_trace -- MACHINES SECONDS SENSORS_PER_MACHINE [hot] > trace.jsonl`
//! The load is `linegate::synth::Load`: deterministic, mostly quiet, bursts of high vibration,
//! arrival jitter and 0.1 % duplicates. A tick every 10 s of ingest time. With `hot`, every
//! machine stays above the threshold the whole time (a damaged bearing left running).
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::io::{BufWriter, Write};

use linegate::synth::Load;
use serde_json::json;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let hot = args.last().is_some_and(|a| a == "hot");
    if hot {
        args.pop();
    }
    let args: Vec<i64> = args.iter().map(|a| a.parse().unwrap()).collect();
    let (machines, seconds, sensors) = match args[..] {
        [m, s, n] => (m, s, n),
        [m, s] => (m, s, 1),
        _ => (50, 3600, 1),
    };
    let mut load = Load::new(machines as usize, seconds);
    load.sensors_per_machine = sensors as usize;
    if hot {
        load.burst_rate = 1.0;
    }
    let stdout = std::io::stdout();
    let mut w = BufWriter::with_capacity(1 << 20, stdout.lock());
    let mut next_tick = load.start_ms;
    load.generate(|at, e| {
        if at >= next_tick {
            serde_json::to_writer(&mut w, &json!({"at": next_tick, "kind": "tick"})).unwrap();
            w.write_all(b"\n").unwrap();
            next_tick += 10_000;
        }
        serde_json::to_writer(&mut w, &json!({"at": at, "kind": "event", "event": e})).unwrap();
        w.write_all(b"\n").unwrap();
    });
    w.flush().unwrap();
}
