//! Writes a large synthetic trace (JSON Lines, docs/contracts.md section 8) for benchmarks.
//!
//! `gen_trace MACHINES SECONDS SENSORS_PER_MACHINE [hot] > trace.jsonl`: the load is
//! `linegate::synth::Load`: deterministic, mostly quiet, bursts of high vibration, arrival jitter
//! and 0.1 % duplicates. A tick every 10 s of ingest time. With `hot`, every machine stays above
//! the threshold the whole time (a damaged bearing left running).
//!
//! `gen_trace mixed MACHINES SECONDS [SEED] > trace.jsonl`: a trace as a real line network sends
//! it, deterministic from SEED (default 1): `linegate::synth::mixed_trace` (disorder within and
//! beyond the watermark bound, duplicates, id conflicts, too-late and future events, poison
//! lines, raw-sample blocks among the events). What was written, counted, goes to stderr.
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::unwrap_used)]

use std::io::{BufWriter, Write};

use linegate::synth::{mixed_trace, Load, MIXED_START_MS};
use serde_json::json;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "mixed") {
        let n: Vec<u64> = args[1..].iter().map(|a| a.parse().unwrap()).collect();
        let (machines, seconds, seed) = match n[..] {
            [m, s, seed] => (m, s, seed),
            [m, s] => (m, s, 1),
            _ => {
                eprintln!("usage: gen_trace mixed MACHINES SECONDS [SEED]");
                std::process::exit(2);
            }
        };
        let stdout = std::io::stdout();
        let mut w = BufWriter::with_capacity(1 << 20, stdout.lock());
        let counts = mixed_trace(machines as usize, seconds as i64, seed, MIXED_START_MS, |line| {
            w.write_all(line.as_bytes()).unwrap();
            w.write_all(b"\n").unwrap();
        });
        w.flush().unwrap();
        eprintln!("{counts:?}");
        return;
    }
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
