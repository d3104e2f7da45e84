//! Helpers for the Modbus tests: the pymodbus server (`modbus_server.py` beside this file) and
//! socat pty pairs as child processes, readiness by polling with a deadline, and what the server
//! serves, computed independently of linegate's decoder.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use linegate::clock::{Clock, ManualClock, SystemClock};
use linegate::config::{Config, ModbusSource, SourceConfig};
use linegate::source::modbus::{link, ModbusOutput, PollStats};
use linegate::trace::SamplesRecord;
use tokio::sync::mpsc;

use super::{fixture, DEADLINE};

/// Event time of poll slot 0 in every test (the injected clock's wall time).
pub const ANCHOR_MS: i64 = 1_700_000_000_000;

/// A child process killed (and reaped) when dropped.
#[derive(Debug)]
pub struct Child(std::process::Child);

impl Child {
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `modbus_server.py` with `args`.
pub fn server(args: &[&str]) -> Child {
    let child = Command::new("python3")
        .arg(fixture("tests/support/modbus_server.py"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 with pymodbus (see .ci/run)");
    Child(child)
}

/// A pair of linked pseudo-terminals: `server_end` and `client_end` are symlinks socat makes.
pub fn socat(dir: &Path) -> (Child, PathBuf, PathBuf) {
    let (a, b) = (dir.join("server-end"), dir.join("client-end"));
    let child = Command::new("socat")
        .arg("-d")
        .arg("-d")
        .arg(format!("pty,raw,echo=0,link={}", a.display()))
        .arg(format!("pty,raw,echo=0,link={}", b.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("socat (see .ci/run)");
    (Child(child), a, b)
}

/// Waits (at most [`DEADLINE`]) until the device of `source` answers a read of its first block.
pub async fn wait_answer(source: &ModbusSource) {
    let clock = SystemClock::new();
    loop {
        if let Ok(mut ctx) = link::connect(source).await {
            if let Ok(Ok(_)) = link::read_block(&mut ctx, &source.blocks[0], 500).await {
                return;
            }
        }
        assert!(
            clock.monotonic_ms() < DEADLINE.as_millis() as i64,
            "{} never answered",
            source.endpoint()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The modbus source of `[[source]]` keys `keys` (a config file's text after `kind = ...`).
pub fn source(keys: &str) -> ModbusSource {
    let text = format!("[gateway]\nid = \"gw-test\"\n\n[[source]]\n{keys}");
    match Config::from_toml(&text, "test.toml").unwrap().source.remove(0) {
        SourceConfig::Modbus(m) => m,
        other => panic!("not modbus: {other:?}"),
    }
}

/// The server's register map as channels, in the block at 100, plus `extra` blocks.
pub fn map_keys(extra: &str) -> String {
    format!(
        r#"
[[source.block]]
address = 100
count = 8
[[source.block.channel]]
sensor = "i16"
type = "i16"
scale = 0.001
unit = "g"
[[source.block.channel]]
sensor = "f32-big"
offset = 1
type = "f32"
unit = "g"
[[source.block.channel]]
sensor = "f32-little"
offset = 3
type = "f32"
word_order = "little"
unit = "g"
axis = "z"
[[source.block.channel]]
sensor = "i32-little"
offset = 5
type = "i32"
word_order = "little"
scale = 0.000001
unit = "g"
[[source.block.channel]]
sensor = "index"
offset = 7
type = "u16"
unit = "g"
{extra}"#
    )
}

/// The `[[source]]` keys of a Modbus TCP source on `port` serving [`map_keys`]: machine `m1`,
/// 100 Hz, 100 ms blocks, quick reconnects.
pub fn tcp_keys(port: u16) -> String {
    format!(
        "kind = \"modbus-tcp\"\nhost = \"127.0.0.1\"\nport = {port}\nmachine = \"m1\"\n\
         poll_rate = 100\ntimeout = \"300ms\"\nblock_length = \"100ms\"\n\
         reconnect_min = \"20ms\"\nreconnect_max = \"200ms\"\n{}",
        map_keys("")
    )
}

/// A running poller: its output channel, its counters and its task.
pub struct Polling {
    pub rx: mpsc::Receiver<ModbusOutput>,
    pub stats: Arc<PollStats>,
    pub task: tokio::task::JoinHandle<()>,
}

/// Starts `linegate::source::modbus::run` on `source` with a manual clock at [`ANCHOR_MS`].
pub fn poll(source: ModbusSource) -> Polling {
    let (tx, rx) = mpsc::channel(64);
    let stats = Arc::new(PollStats::default());
    let s = Arc::clone(&stats);
    let task = tokio::spawn(async move {
        let clock = ManualClock::new(ANCHOR_MS);
        linegate::source::modbus::run(&source, &clock, tx, &s).await;
    });
    Polling { rx, stats, task }
}

impl Polling {
    /// Receives until `done` holds for what was received so far (or the deadline passes).
    pub async fn collect_until(
        &mut self,
        got: &mut Vec<ModbusOutput>,
        mut done: impl FnMut(&[ModbusOutput], &PollStats) -> bool,
    ) {
        let clock = SystemClock::new();
        while !done(got, &self.stats) {
            let spent = Duration::from_millis(clock.monotonic_ms().max(0) as u64);
            let left = DEADLINE.saturating_sub(spent);
            match tokio::time::timeout(left.min(Duration::from_millis(100)), self.rx.recv()).await {
                Ok(Some(item)) => got.push(item),
                Ok(None) => panic!("the poller stopped"),
                Err(_) => {
                    assert!(!left.is_zero(), "deadline passed; stats {:?}", self.stats.snapshot())
                }
            }
        }
    }
}

/// The samples records in `got` of `sensor`.
pub fn records<'a>(got: &'a [ModbusOutput], sensor: &str) -> Vec<&'a SamplesRecord> {
    got.iter()
        .filter_map(|o| match o {
            ModbusOutput::Samples(r) if r.sensor == sensor => Some(r),
            _ => None,
        })
        .collect()
}

/// The values the server encodes, decoded the obvious way from `fixtures/traces/cwru.jsonl`.
pub fn served_samples() -> Vec<f64> {
    let text = std::fs::read_to_string(fixture("fixtures/traces/cwru.jsonl")).unwrap();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["kind"] == "samples" {
            return v["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        }
    }
    panic!("no samples record");
}

/// Checks every record of every value channel against the server's values at the indices the
/// `index` channel reports for the same polls; returns how many polls were checked.
pub fn check_values(got: &[ModbusOutput]) -> usize {
    let samples = served_samples();
    let index = records(got, "index");
    let mut checked = 0;
    for sensor in ["i16", "f32-big", "f32-little", "i32-little"] {
        let recs = records(got, sensor);
        assert_eq!(recs.len(), index.len(), "{sensor}: one record per index record");
        for (r, ix) in recs.iter().zip(&index) {
            assert_eq!((r.t0_ms, r.data.len()), (ix.t0_ms, ix.data.len()), "{sensor}: same polls");
            assert_eq!((r.machine.as_str(), r.clock), ("m1", None));
            for (value, i) in r.data.iter().zip(&ix.data) {
                let x = samples[*i as usize % samples.len()];
                let expected = match sensor {
                    "i16" => f64::from(((x * 1000.0 + 0.5).floor() as i64) as i16) * 0.001,
                    "i32-little" => f64::from(((x * 1e6 + 0.5).floor() as i64) as i32) * 0.000001,
                    _ => f64::from(x as f32),
                };
                assert_eq!(*value, expected, "{sensor} at served index {i}");
                checked += 1;
            }
        }
    }
    // Within a record the server's index advances by one per poll: no answer was taken twice or
    // for another poll's.
    for r in &index {
        assert!(r.data.windows(2).all(|w| w[1] == w[0] + 1.0), "indices {:?}", r.data);
        assert_eq!((r.t0_ms - ANCHOR_MS) % 10, 0, "slot times at 100 polls/s");
    }
    checked
}
