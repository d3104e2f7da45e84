//! What the integration tests share. Every test file that needs it says `mod support;` and then
//! `use support::...;` (never `#[path]`), so each test binary compiles the same tree:
//!
//! - here: the `linegate` binary ([`linegate`] builds the command, [`run`] runs it and captures
//!   its output, [`Ran::success`] fails the test with both outputs unless it exited 0; [`cli`],
//!   [`ledger`] and [`replay`] are the common cases), fixture paths ([`root`], [`fixture`],
//!   [`trace`]), [`free_port`], and waiting for a condition with a deadline ([`poll`],
//!   [`wait_for`], [`wait_until`]): tests never sleep to synchronise;
//! - [`daemon`]: `linegate run` in the background, its log, signals and exit;
//! - [`crashes`]: the failpoints, trace and replay reference of the crash and power-loss tests;
//! - [`incidents`]: the brute-force reference of docs/contracts.md section 4;
//! - [`composite`]: the composite rules of a configuration and their brute-force reference;
//! - [`applied`]: which events of a trace the rule counts, from the trace and its configuration
//!   alone (the reference's input for the golden traces);
//! - [`modbus`], [`mqtt`], [`promtool`]: the real peers (pymodbus and socat, mosquitto and
//!   `mosquitto_sub`, Prometheus' `promtool`) and what the tests read from them;
//! - [`powercut`]: a FUSE filesystem that holds what no fsync covered, and cuts the power.
//!
//! Where unit tests in `src/` go is in docs/testing-conventions.md.
#![allow(dead_code)] // each test binary uses a part of it

pub mod applied;
pub mod composite;
pub mod crashes;
pub mod daemon;
pub mod incidents;
pub mod modbus;
pub mod mqtt;
pub mod powercut;
pub mod promtool;
pub mod rehearsal;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;

use linegate::clock::{Clock, SystemClock};
use serde_json::Value;

/// The binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_linegate");

/// How long any wait for a condition may take before the test fails (CI machines are shared).
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The repository root, where the example configurations' relative paths point.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A file of the repository by its path from the root (`fixtures/expected/cwru.frames.json`).
pub fn fixture(rel: &str) -> PathBuf {
    root().join(rel)
}

/// A trace or configuration in `fixtures/traces`.
pub fn trace(name: &str) -> PathBuf {
    root().join("fixtures/traces").join(name)
}

/// A TCP port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A trace line carrying one good, synced event of `machine`/`sensor` with `seq`, event time
/// `ts` and value `value` (accel_rms in g), ingested at `at`.
pub fn event_line(machine: &str, sensor: &str, seq: i64, ts: i64, value: f64, at: i64) -> String {
    format!(
        r#"{{"at":{at},"kind":"event","event":{{"event_id":"{machine}.{sensor}.{seq}","machine":"{machine}","sensor":"{sensor}","seq":{seq},"ts_ms":{ts},"clock":{{"state":"synced","err_ms":2}},"metric":"accel_rms","unit":"g","schema":1,"quality":"good","value":{value}}}}}"#
    )
}

/// Seconds `from..to` of machine m1's two sensors `a` and `b` (event time from `t0`), one event
/// each per second, arriving 300 ms late; a burst every 4 minutes (12 s at 0.6 g, then 6 s at
/// 0.8 g): a threshold of 0.5 sees each burst from its start, one of 0.7 only its second part.
pub fn burst_lines(t0: i64, from: i64, to: i64) -> Vec<String> {
    let mut out = Vec::new();
    for s in from..to {
        let ts = t0 + s * 1000;
        for sensor in ["a", "b"] {
            let value = match s % 240 {
                30..42 => 0.6,
                42..48 => 0.8,
                _ => 0.1,
            };
            out.push(event_line("m1", sensor, s + 1, ts, value, ts + 300));
        }
    }
    out
}

/// Appends `lines` to the trace at `path` (created if need be).
pub fn append_lines(path: &Path, lines: &[String]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    f.write_all((lines.join("\n") + "\n").as_bytes()).unwrap();
}

/// The sections a trace-fed daemon's configuration ends with: `[store]` at `store` (with `extra`
/// store keys), `[metrics]` on loopback `port`, and one trace source reading `trace` at `speed`.
pub fn trace_daemon_sections(
    store: &Path,
    extra: &str,
    port: u16,
    trace: &Path,
    speed: f64,
) -> String {
    format!(
        r#"
[store]
path = "{store}"
{extra}
[metrics]
listen = "127.0.0.1:{port}"

[[source]]
kind = "trace"
path = "{trace}"
speed = {speed:?}
"#,
        store = store.display(),
        trace = trace.display(),
    )
}

// ---- The binary

/// `linegate ARGS`, to which the caller adds arguments, environment or directory before [`run`]
/// (or `spawn`). It never inherits a service manager's sockets (notify, watchdog, journal).
pub fn linegate(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    cmd.env_remove("NOTIFY_SOCKET").env_remove("WATCHDOG_USEC").env_remove("JOURNAL_STREAM");
    cmd
}

/// A finished command: how it ended and what it printed.
#[derive(Debug)]
pub struct Ran {
    /// Its arguments, for messages.
    pub what: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn ok(&self) -> bool {
        self.status.success()
    }

    /// Standard output, after failing the test (with both outputs) unless it exited 0.
    #[track_caller]
    pub fn success(self) -> String {
        assert!(
            self.ok(),
            "linegate {} failed: {}\n--- stdout\n{}\n--- stderr\n{}",
            self.what,
            self.status,
            self.stdout,
            self.stderr
        );
        self.stdout
    }
}

/// Runs `cmd` to its end, capturing its output (which must be UTF-8).
pub fn run(cmd: &mut Command) -> Ran {
    let what: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let what = what.join(" ");
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd.get_program()));
    let text = |bytes: Vec<u8>, name: &str| {
        String::from_utf8(bytes).unwrap_or_else(|e| panic!("linegate {what}: {name}: {e}"))
    };
    let (stdout, stderr) = (text(out.stdout, "stdout"), text(out.stderr, "stderr"));
    Ran { what, status: out.status, stdout, stderr }
}

/// `linegate reconcile ARGS --config CONFIG`, which must find that the gateway lost nothing it
/// accepted (exit 0, or 3 when source data is missing undeclared, such as a sensor of the trace
/// that went silent before its end): its standard output.
#[track_caller]
pub fn reconciled(args: &[&str], config: &Path) -> String {
    let r = run(linegate(args).arg("--config").arg(config));
    assert!(
        matches!(r.status.code(), Some(0 | 3)),
        "linegate {} says the gateway lost data ({}):\n{}\n{}",
        r.what,
        r.status,
        r.stdout,
        r.stderr
    );
    r.stdout
}

/// `linegate ARGS --config CONFIG`, which must exit 0: its standard output.
#[track_caller]
pub fn cli(args: &[&str], config: &Path) -> String {
    run(linegate(args).arg("--config").arg(config)).success()
}

/// The entries of the ledger of `config`'s store (`linegate dump ledger`), in ledger order.
pub fn ledger(config: &Path) -> Vec<Value> {
    cli(&["dump", "ledger"], config)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["entry"].clone())
        .collect()
}

/// The files `linegate replay` wrote.
pub struct Replayed {
    pub alerts: PathBuf,
    pub summary: PathBuf,
}

impl Replayed {
    /// The alert records, one JSON text each.
    pub fn alert_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.alerts).unwrap().lines().map(String::from).collect()
    }

    /// The number of events it accepted (from the summary).
    pub fn accepted(&self) -> u64 {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&self.summary).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", self.summary.display()));
        v["accepted"].as_u64().unwrap()
    }
}

/// `linegate replay TRACE --config CONFIG`, which must succeed; its alerts and summary are
/// written to `dir`.
pub fn replay(trace: &Path, config: &Path, dir: &Path) -> Replayed {
    let r = Replayed {
        alerts: dir.join("replay.alerts.jsonl"),
        summary: dir.join("replay.summary.json"),
    };
    let mut cmd = linegate(&["replay"]);
    cmd.arg(trace).arg("--config").arg(config);
    cmd.arg("--out").arg(&r.alerts).arg("--summary").arg(&r.summary);
    run(&mut cmd).success();
    r
}

// ---- Waiting for a condition

/// Calls `ready` every 20 ms until it gives a value, for at most `within`: that value, or `None`
/// once the time is up (for callers that explain a timeout themselves).
pub fn poll<T>(within: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    let clock = SystemClock::new();
    loop {
        if let Some(v) = ready() {
            return Some(v);
        }
        if clock.monotonic_ms() > within.as_millis() as i64 {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `ready` holds, for at most [`DEADLINE`]; fails the test naming `what`.
#[track_caller]
pub fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    if poll(DEADLINE, || ready().then_some(())).is_none() {
        panic!("timed out ({DEADLINE:?}) waiting for {what}");
    }
}

/// [`wait_for`] inside a test's async runtime: it sleeps without holding a worker thread.
pub async fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let clock = SystemClock::new();
    while !ready() {
        assert!(
            clock.monotonic_ms() <= DEADLINE.as_millis() as i64,
            "timed out ({DEADLINE:?}) waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Replaces outbox record `seq` in the closed store at `dir` by `bytes`, in place: on the page
/// of its checkpoint (under the key of the page's first record) or under its own key.
pub fn damage_outbox_record(dir: &Path, seq: u64, bytes: &[u8]) {
    let db = linegate::store::open_sled_directly(dir).unwrap();
    let state = db.open_tree("state").unwrap();
    let key = [&b"o/"[..], &seq.to_be_bytes()].concat();
    let (k, v) = state.range(&b"o/"[..]..=&key[..]).next_back().unwrap().unwrap();
    let first = u64::from_be_bytes(k[2..].try_into().unwrap());
    if linegate::store::page::is_page(&v) {
        // A page a checkpoint added is packed; it is written back plain, as acknowledgements do.
        let page = linegate::store::page::unpack(&v).unwrap();
        let mut records = linegate::store::page::entries(&page).unwrap();
        records[(seq - first) as usize] = bytes;
        state.insert(k, linegate::store::page::encode(records)).unwrap();
    } else {
        assert_eq!(first, seq, "outbox record {seq} is not in the store");
        state.insert(k, bytes).unwrap();
    }
    db.flush().unwrap();
}
