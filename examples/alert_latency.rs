//! Alert latency benchmark (issue 4): from the ingest of the third high event to the alert's
//! PUBLISH leaving the forwarder's socket.
//!
//! `alert_latency STORE PORT ALERTS [INFLIGHT [REPLAY_RATE [INFLIGHT_KIB]]]` — STORE is a fresh directory or a
//! store filled by `mqtt_drain fill` (then the forwarder drains that backlog meanwhile and the
//! alerts must overtake it; `REPLAY_RATE` is `[mqtt] replay_rate`, default here 0 = unpaced, the
//! worst case; the daemon's default is 2000 records/s). `INFLIGHT` defaults to 64 and
//! `INFLIGHT_KIB` (`[mqtt] inflight_bytes`) to the daemon's default. PORT is a local broker. Prints one JSON line with the latency percentiles.
//!
//! Between the forwarder and the broker sits a TCP proxy of this process. For each alert, a
//! machine of its own (`lat{i}`, one sensor) gets three events above the rule's threshold,
//! one second apart in event time; the rule's `count` is 3 and the watermark bound 0 here, so the
//! third one raises the alert.
//! Measured, per alert, with one monotonic clock:
//! - **t0**: the third event's line arrives (before it is journaled);
//! - then what the pipeline does: the line is appended to the journal and committed (the
//!   ingest's group commit, real fsync), the rule decides it and returns the alert record, the
//!   checkpoint's batch (the outbox record with its ledger record) is applied, `outbox_grew` is
//!   notified, and the batch is committed under the store's shared lock (a second fsync) while
//!   the forwarder reads the alert from the outbox and hands its PUBLISH to rumqttc, which
//!   writes it;
//! - **t1**: the proxy reads the bytes holding the alert's topic from the forwarder's socket.
//!
//! Beside the total it reports the parts: up to the forwarder's wake-up (`to_wake`, split into
//! `lock_append`, `ingest_commit` and `lock_apply`: the waits for the store's lock and the
//! ingest's commit), up to the end of the checkpoint's commit (`to_commit`), and the forwarder's
//! (`forwarder`, from the wake-up to t1).
//!
//! The disk's own floor, side by side: between alerts (after alert `k` arrived, before the
//! 20 ms pause) the bench appends 1 KiB to a file beside the store (`STORE.fsync-probe`, the same
//! file system) and times its `fsync` alone, as the store's commit fsyncs sled's log. The journal line
//! behind an alert must be durable before the alert is published, so its latency cannot go below
//! one such fsync; the probe percentiles say how much of the alert's is the disk's.
//!
//! With `POLL_STATUS_MS=N` in the environment, the daemon's control socket is served on the same
//! store (in STORE, `control.sock`) and a client asks `status --json` every N ms throughout, as
//! an operator's `linegate status` would (issue 20): the JSON line then also has the status
//! requests' latencies (`status_*`).
//!
//! Not included: the pipeline's group-commit wait (`[store] commit_interval`, when the pipeline
//! waits for it before committing an alert) and the broker's delivery to subscribers. Alerts go
//! every 20 ms, so each is decided while the previous ones' PUBACKs are settled.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};

use linegate::clock::SystemClock;
use linegate::config::{Config, MqttForwardConfig, WatermarkBound};
use linegate::event::{ClockEvidence, ClockState, Event, Metric, Quality, Unit};
use linegate::forward::{run, ForwarderConfig, SessionConfig};
use linegate::records::outbox::OutboxRecord;
use linegate::rule::{Engine, Params};
use linegate::store::{SharedStore, Store, StoreOptions};

const T0: i64 = 1_800_000_000_000;
const MARK: &[u8] = b"/alerts/lat";

#[allow(clippy::disallowed_methods)] // a benchmark measures wall time
fn now() -> Instant {
    Instant::now()
}

/// Forwards `client` to the broker; reports `(alert number, when read)` for every alert topic in
/// what the client writes.
async fn proxy(client: TcpStream, broker: u16, seen: mpsc::UnboundedSender<(usize, Instant)>) {
    let upstream = TcpStream::connect(("127.0.0.1", broker)).await.unwrap();
    client.set_nodelay(true).unwrap();
    upstream.set_nodelay(true).unwrap();
    let (mut cr, mut cw) = client.into_split();
    let (mut ur, mut uw) = upstream.into_split();
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut ur, &mut cw).await;
    });
    let mut buf = vec![0u8; 1 << 16];
    let mut tail: Vec<u8> = Vec::new();
    loop {
        let n = match cr.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let at = now();
        tail.extend_from_slice(&buf[..n]);
        let mut from = 0;
        while let Some(i) = find(&tail[from..], MARK) {
            let digits = &tail[from + i + MARK.len()..];
            let len = digits.iter().take_while(|b| b.is_ascii_digit()).count();
            if len == digits.len() {
                break; // the number may go on in the next read
            }
            let k = std::str::from_utf8(&digits[..len]).unwrap().parse().unwrap();
            let _ = seen.send((k, at));
            from += i + MARK.len() + len;
        }
        let keep = tail.len().saturating_sub(from).min(64);
        tail.drain(..tail.len() - keep);
        if uw.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn event(machine: &str, seq: u64, ts_ms: i64, value: f64) -> Event {
    Event {
        event_id: format!("gw.{machine}.s1.{seq}"),
        machine: machine.into(),
        sensor: "s1".into(),
        seq,
        ts_ms,
        clock: ClockEvidence { state: ClockState::Synced, err_ms: Some(2) },
        metric: Metric::AccelRms,
        value,
        unit: Unit::G,
        schema: 1,
        quality: Quality::Good,
        samples: None,
        features: None,
    }
}

/// One probe: appends 1 KiB to `probe` and returns how long its fsync took, in ms.
fn probe_fsync(probe: &mut File) -> f64 {
    probe.write_all(&[b'p'; 1024]).unwrap();
    let t = now();
    probe.sync_all().unwrap();
    ms(now().duration_since(t))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

async fn bench(
    path: &str,
    broker: u16,
    alerts: usize,
    (inflight, replay_rate, inflight_bytes): (usize, u32, usize),
) {
    let store = SharedStore::new(Store::open(path.as_ref(), StoreOptions::default()).unwrap());
    let backlog = store.read().outbox_depth().unwrap().0;
    let poller = std::env::var("POLL_STATUS_MS")
        .ok()
        .map(|ms| status_poller(&store, path, ms.parse().unwrap()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((c, _)) = listener.accept().await {
            tokio::spawn(proxy(c, broker, seen_tx.clone()));
        }
    });
    let cfg = ForwarderConfig {
        host: "127.0.0.1".into(),
        port,
        client_id: "linegate-latency".into(),
        keep_alive: Duration::from_secs(30),
        credentials: None,
        tls: None,
        session: SessionConfig {
            topic_root: "linegate/bench".into(),
            inflight,
            inflight_bytes,
            max_packet: 256 * 1024,
            replay_rate,
            batch_events: 1000,
            buffer: 2048,
            stall_ms: 60_000,
            commit_acks: linegate::forward::COMMIT_ACKS,
            commit_ms: linegate::forward::COMMIT_MS,
            sync_ms: linegate::forward::SYNC_MS,
        },
        backoff_min: Duration::from_millis(100),
        backoff_max: Duration::from_secs(1),
    };
    let grew = Arc::new(Notify::new());
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let src = store.clone();
    let task =
        tokio::spawn(run(cfg, src, grew.clone(), Arc::new(SystemClock::new()), stop_rx, None));
    tokio::time::sleep(Duration::from_millis(300)).await; // connected, backlog under way
                                                          // Bound 0: the third event itself moves the watermark past the incident's onset, so it is the
                                                          // one that makes the alert due (with a bound the alert waits for the watermark, by design).
    let mut config = Config::for_replay_defaults("gw");
    config.time.watermark_bound = WatermarkBound::Fixed(0);
    let mut engine = Engine::new(Params::from_config(&config));
    // A checkpoint `status` can restore (a fresh decider's): the bench's own engine is not one.
    let checkpoint = linegate::records::checkpoint::CheckpointPayload {
        decider: linegate::decide::Decider::new(&config).snapshot(),
        offsets: Default::default(),
        rule_version: String::new(),
        rule_versions: Vec::new(),
    }
    .encode();
    // Per alert: total latency, the part up to the forwarder's wake-up (ingest commit, decide,
    // apply), the rest (the forwarder's: wake, read, PUBLISH, write; it overlaps the checkpoint's
    // commit), and the part up to the end of that commit.
    let (mut latencies, mut notified, mut forwarder, mut committed) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let probe_path = format!("{path}.fsync-probe");
    let mut probe = OpenOptions::new().create(true).append(true).open(&probe_path).unwrap();
    let mut fsyncs = Vec::new();
    // The third event's steps up to the wake-up: waiting for the store's lock to append, the
    // ingest's commit, waiting for the lock to apply the checkpoint.
    let (mut lock_append, mut ingest_commit, mut lock_apply) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..alerts {
        let machine = format!("lat{k}");
        let at = T0 + 10_000 * k as i64;
        let mut t0 = now();
        let mut out = Vec::new();
        for n in 1..=3u64 {
            let e = event(&machine, n, at + 1000 * n as i64, 0.9);
            let line = serde_json::to_vec(&e).unwrap();
            if n == 3 {
                t0 = now();
            }
            // The ingest: append, then the group commit under the shared lock.
            let mut s = store.write();
            let locked = now();
            let pos = s.append_journal(&[(e.ts_ms, line)]).unwrap().end - 1;
            let s = s.downgrade();
            let appended = now();
            tokio::task::block_in_place(|| s.commit().unwrap());
            drop(s);
            if n == 3 {
                lock_append.push(ms(locked.duration_since(t0)));
                ingest_commit.push(ms(now().duration_since(appended)));
            }
            out.clear();
            engine.on_event(e.ts_ms, &e, &mut out);
            // Earlier machines' incidents end as ingest time moves on: those records are not
            // what is measured and are left out.
            out.retain(|a| a.machine == machine);
            if n < 3 {
                assert!(out.is_empty(), "an alert before the third high event");
                continue;
            }
            let a = out.pop().expect("the third high event raises the alert");
            let rec = OutboxRecord::Alert {
                machine: a.machine.clone(),
                alert_id: a.alert_id.clone(),
                revision: a.revision,
                json: serde_json::to_vec(&a).unwrap(),
            };
            // The decide stage: apply, wake the forwarder, commit under the shared lock.
            let asked = now();
            let mut s = store.write();
            lock_apply.push(ms(now().duration_since(asked)));
            s.apply_checkpoint_with_archive(pos, &checkpoint, &[rec.encode()], &[], &[]).unwrap();
            let s = s.downgrade();
            notified.push(ms(now().duration_since(t0)));
            grew.notify_one();
            tokio::task::block_in_place(|| s.commit().unwrap());
            drop(s);
            committed.push(ms(now().duration_since(t0)));
        }
        let (got, t1) = tokio::time::timeout(Duration::from_secs(10), seen.recv())
            .await
            .expect("the alert reached the proxy within 10 s")
            .unwrap();
        assert_eq!(got, k, "alerts arrive in order");
        latencies.push(ms(t1.duration_since(t0)));
        forwarder.push(latencies[k] - notified[k]);
        fsyncs.push(tokio::task::block_in_place(|| probe_fsync(&mut probe)));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = store.read().outbox_depth().unwrap().0;
    let status = poller.map(StatusPoller::finish);
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
    drop(probe);
    std::fs::remove_file(&probe_path).unwrap();
    fsyncs.sort_by(f64::total_cmp);
    latencies.sort_by(f64::total_cmp);
    committed.sort_by(f64::total_cmp);
    notified.sort_by(f64::total_cmp);
    forwarder.sort_by(f64::total_cmp);
    for v in [&mut lock_append, &mut ingest_commit, &mut lock_apply] {
        v.sort_by(f64::total_cmp);
    }
    println!(
        "{}",
        serde_json::json!({
            "alerts": alerts, "backlog_records_at_start": backlog, "backlog_left": left,
            "p50_ms": percentile(&latencies, 0.5), "p99_ms": percentile(&latencies, 0.99),
            "max_ms": latencies[latencies.len() - 1],
            "to_wake_p50_ms": percentile(&notified, 0.5),
            "to_wake_p99_ms": percentile(&notified, 0.99),
            "to_commit_p50_ms": percentile(&committed, 0.5),
            "to_commit_p99_ms": percentile(&committed, 0.99),
            "forwarder_p50_ms": percentile(&forwarder, 0.5),
            "forwarder_p99_ms": percentile(&forwarder, 0.99),
            "lock_append_p99_ms": percentile(&lock_append, 0.99),
            "ingest_commit_p50_ms": percentile(&ingest_commit, 0.5),
            "ingest_commit_p99_ms": percentile(&ingest_commit, 0.99),
            "lock_apply_p99_ms": percentile(&lock_apply, 0.99),
            "disk_fsync_p50_ms": percentile(&fsyncs, 0.5),
            "disk_fsync_p99_ms": percentile(&fsyncs, 0.99),
            "status_polls": status.as_ref().map(Vec::len),
            "status_p50_ms": status.as_ref().map(|s| percentile(s, 0.5)),
            "status_p99_ms": status.as_ref().map(|s| percentile(s, 0.99)),
        })
    );
}

/// The control socket on the bench's store, and a client asking `status --json` every `every_ms`.
struct StatusPoller {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<f64>>,
    _server: tokio::task::JoinHandle<()>,
}

impl StatusPoller {
    /// Stops the client: its latencies, sorted.
    fn finish(self) -> Vec<f64> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut v = self.thread.join().unwrap();
        v.sort_by(f64::total_cmp);
        v
    }
}

fn status_poller(store: &SharedStore, path: &str, every_ms: u64) -> StatusPoller {
    use linegate::control::protocol::{Command, Request};
    use std::io::BufRead;
    let socket = std::path::Path::new(path).join("control.sock");
    let mut config = Config::for_replay_defaults("gw");
    config.store.path = path.into();
    let (tx, _rx) = mpsc::channel(1);
    let daemon = linegate::control::server::Daemon {
        store: store.clone(),
        config: Arc::new(config),
        decide: tx.downgrade(),
        telemetry: linegate::telemetry::Telemetry::new(),
        started_ms: 0,
    };
    let listener = linegate::control::server::bind(&socket).unwrap();
    let server = tokio::spawn(linegate::control::server::serve(
        listener,
        socket.clone(),
        daemon,
        std::future::pending(),
    ));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let halt = stop.clone();
    let thread = std::thread::spawn(move || {
        let mut took = Vec::new();
        let request = Request::new(Command::Status { json: true }).to_line();
        while !halt.load(std::sync::atomic::Ordering::Relaxed) {
            let t0 = now();
            let mut c = std::os::unix::net::UnixStream::connect(&socket).unwrap();
            c.write_all(&request).unwrap();
            let mut lines = std::io::BufReader::new(c);
            let mut line = String::new();
            while lines.read_line(&mut line).unwrap() > 0 && !line.starts_with("{\"exit\"") {
                line.clear();
            }
            assert!(line.starts_with("{\"exit\":0"), "status failed: {line}");
            took.push(ms(now().duration_since(t0)));
            std::thread::sleep(Duration::from_millis(every_ms));
        }
        took
    });
    StatusPoller { stop, thread, _server: server }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !(4..=7).contains(&args.len()) {
        eprintln!("usage: alert_latency STORE PORT ALERTS [INFLIGHT [REPLAY_RATE [INFLIGHT_KIB]]]");
        return;
    }
    let inflight = args.get(4).map_or(64, |a| a.parse().unwrap());
    let replay_rate = args.get(5).map_or(0, |a| a.parse().unwrap());
    let inflight_bytes = args
        .get(6)
        .map_or(MqttForwardConfig::default().inflight_bytes, |a| a.parse::<usize>().unwrap() << 10);
    // The allocator as `linegate run` sets it before its runtime starts.
    linegate::memory::limit_arenas();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench(
            &args[1],
            args[2].parse().unwrap(),
            args[3].parse().unwrap(),
            (inflight, replay_rate, inflight_bytes),
        ));
}
