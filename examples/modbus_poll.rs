//! Reads one Modbus block back to back and reports reads per second against the RTU wire limit:
//! `cargo run --release --example modbus_poll -- CONFIG [SECONDS] [TRIALS]`
//! CONFIG holds one `[[source]]` of kind modbus-rtu or modbus-tcp; its first block is read.
//! Prints one line per trial and then the median as JSON (benches/modbus_rtu.sh runs it).
#![allow(clippy::print_stdout, clippy::unwrap_used)]
#![allow(clippy::disallowed_methods)] // a benchmark measures wall time

use std::path::PathBuf;
use std::time::Duration;

use linegate::config::{Config, ModbusTransport, SourceConfig};
use linegate::source::modbus::{link, wire};
use tokio::time::Instant;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = Config::load(&PathBuf::from(&args[0])).unwrap();
    let seconds: f64 = args.get(1).map_or(3.0, |s| s.parse().unwrap());
    let trials: usize = args.get(2).map_or(5, |s| s.parse().unwrap());
    let Some(SourceConfig::Modbus(source)) = config.source.first() else {
        panic!("the config's first source must be a modbus source");
    };
    let block = &source.blocks[0];
    let mut ctx = link::connect(source).await.unwrap();
    let mut rates = Vec::new();
    for trial in 1..=trials {
        let (mut answers, mut failures) = (0u64, 0u64);
        let start = Instant::now();
        let end = start + Duration::from_secs_f64(seconds);
        while Instant::now() < end {
            match link::read_block(&mut ctx, block, source.timeout_ms).await {
                Ok(Ok(_)) => answers += 1,
                _ => {
                    failures += 1;
                    ctx = link::connect(source).await.unwrap();
                }
            }
        }
        let rate = answers as f64 / start.elapsed().as_secs_f64();
        println!("trial {trial}: {answers} reads, {failures} failed, {rate:.1} reads/s");
        rates.push(rate);
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    if median == 0.0 {
        eprintln!("no read was answered");
        std::process::exit(1);
    }
    let (limit, baud) = match &source.transport {
        ModbusTransport::Rtu(p) => (wire::rtu_wire_limit(p.baud, block.count), p.baud),
        ModbusTransport::Tcp { .. } => (f64::NAN, 0),
    };
    println!(
        "{{\"registers\": {}, \"baud\": {baud}, \"median_reads_per_s\": {median:.1}, \
         \"wire_limit_reads_per_s\": {limit:.1}, \"ratio\": {:.3}}}",
        block.count,
        median / limit
    );
}
