//! The forwarder against a real mosquitto and an independent subscriber (`mosquitto_sub`):
//! steady flow, broker restarts with and without persistence, a slow broker, an oversized
//! record, TLS with a client certificate, a wrong password. Every assertion is on what the
//! subscriber received and on what is left in the real store.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use linegate::clock::SystemClock;
use linegate::forward::{run, ForwarderConfig, SessionConfig};
use linegate::records::outbox::{GapNotice, GapRange, OutboxRecord};
use linegate::records::samples_codec::SamplesFrame;
use linegate::telemetry::ForwardStats;
use support::mqtt::*;
use support::{free_port, wait_until};
use tokio::sync::{watch, Notify};

const ROOT: &str = "lg/gw";
/// Event time of `seq` 0 (the events of `support/mqtt.rs` are one second apart from it).
const T0_MS: i64 = 1_700_000_000_000;

fn config(port: u16) -> ForwarderConfig {
    ForwarderConfig {
        host: "127.0.0.1".into(),
        port,
        client_id: format!("linegate-test-{port}"),
        keep_alive: Duration::from_secs(30),
        credentials: None,
        tls: None,
        session: SessionConfig {
            topic_root: ROOT.into(),
            inflight: 16,
            inflight_bytes: 128 * 1024,
            max_packet: 256 * 1024,
            replay_rate: 0,
            batch_events: 50,
            buffer: 256,
            stall_ms: 60_000,
            commit_acks: 64,
            commit_ms: 20,
            sync_ms: 200,
        },
        backoff_min: Duration::from_millis(100),
        backoff_max: Duration::from_millis(1000),
    }
}

struct Running {
    shutdown: watch::Sender<bool>,
    notify: Arc<Notify>,
    stats: Arc<ForwardStats>,
    task: tokio::task::JoinHandle<Result<(), linegate::forward::ForwardError>>,
}

fn spawn(cfg: ForwarderConfig, store: &TestStore) -> Running {
    let (shutdown, rx) = watch::channel(false);
    let notify = Arc::new(Notify::new());
    let stats = Arc::new(ForwardStats::default());
    let src = store.store.clone();
    let task = tokio::spawn(run(
        cfg,
        src,
        notify.clone(),
        Arc::new(SystemClock::new()),
        rx,
        Some(stats.clone()),
    ));
    Running { shutdown, notify, stats, task }
}

impl Running {
    async fn stop(self) {
        self.shutdown.send(true).unwrap();
        self.task.await.unwrap().unwrap();
    }
}

/// Events of `sensors`, seqs `from..=to`, in outbox order sensor by sensor interleaved.
fn events(sensors: &[&str], from: u64, to: u64) -> Vec<OutboxRecord> {
    (from..=to).flat_map(|q| sensors.iter().map(move |s| event("m1", s, q))).collect()
}

/// Received events deduplicated on `event_id` (first arrival kept), by sensor, in arrival order.
fn by_sensor(events: &[(String, serde_json::Value)]) -> BTreeMap<String, Vec<serde_json::Value>> {
    let mut seen = BTreeSet::new();
    let mut out: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for (_, e) in events {
        if seen.insert(e["event_id"].as_str().unwrap().to_owned()) {
            out.entry(e["sensor"].as_str().unwrap().to_owned()).or_default().push(e.clone());
        }
    }
    out
}

fn seqs(evs: &[serde_json::Value]) -> Vec<u64> {
    evs.iter().map(|e| e["seq"].as_u64().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_flow_delivers_every_record_as_it_was_put_in() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), free_port(), "");
    let sub = Subscriber::start(dir.path(), broker.port, ROOT, &[]);
    let store = TestStore::open(dir.path());
    let fw = spawn(config(broker.port), &store);
    wait_until("connect", || fw.stats.connects.load(Ordering::Relaxed) == 1).await;

    let lines = vec![samples_line("m1", "s1", 1_700_000_000_000, 3200)];
    let mut put = Vec::new();
    store.add(&lines, |pos| {
        let mut r = events(&["s1", "s2"], 1, 30);
        r.push(alert("m1", 1));
        r.push(samples("m1", "s1", pos, 1_700_000_000_000, 3200));
        r.push(OutboxRecord::Gap(GapNotice {
            machine: "m1".into(),
            sensor: "s2".into(),
            range: GapRange::Events { from_seq: 31, to_seq: 40 },
            reason: "sensor_fault".into(),
            declared_at_ms: 5,
        }));
        r.push(alert("m1", 2));
        put = r.clone();
        r
    });
    fw.notify.notify_one();
    wait_until("outbox drained", || store.pending() == 0).await;
    wait_until("all delivered", || received_events(&sub.messages()).len() == 60).await;

    let got = by_sensor(&received_events(&sub.messages()));
    for s in ["s1", "s2"] {
        assert_eq!(seqs(&got[s]), (1..=30).collect::<Vec<_>>(), "{s} in seq order");
        for e in &got[s] {
            let orig: serde_json::Value =
                serde_json::from_slice(&event_json("m1", s, e["seq"].as_u64().unwrap())).unwrap();
            assert_eq!(*e, orig, "delivered exactly as put in, original ts_ms, not replayed");
        }
    }
    let alerts: Vec<Vec<u8>> = sub.on("/alerts/m1").into_iter().map(|(_, p)| p).collect();
    let want: Vec<Vec<u8>> = put
        .iter()
        .filter_map(|r| match r {
            OutboxRecord::Alert { json, .. } => Some(json.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(alerts, want, "alert bytes equal to the records put in");
    let frames = sub.on("/samples/m1/s1");
    assert_eq!(frames.len(), 1);
    let f = SamplesFrame::decode(&frames[0].1).unwrap();
    assert_eq!((f.t0_ms, f.rate_hz, f.values.len()), (1_700_000_000_000, 3200.0, 3200));
    assert_eq!(f.values[3], 3.0 / 64.0);
    let gaps = sub.on("/gaps/s2");
    let g: serde_json::Value = serde_json::from_slice(&gaps[0].1).unwrap();
    assert_eq!(
        (g["reason"].as_str(), g["range"]["to_seq"].as_u64()),
        (Some("sensor_fault"), Some(40))
    );
    assert_eq!(sub.on("/status")[0].1, br#"{"state":"online"}"#);
    fw.stop().await;
}

/// Broker stopped while records keep coming (until the forwarder, refused again and again, waits
/// its longest backoff between attempts), then restarted.
async fn broker_restart(persistence: bool) {
    let dir = tempfile::tempdir().unwrap();
    let extra = if persistence {
        format!("persistence true\npersistence_location {}/\n", dir.path().display())
    } else {
        "persistence false\n".to_owned()
    };
    let mut broker = Broker::start(dir.path(), free_port(), &extra);
    let proxy = Proxy::start(broker.port, Duration::ZERO).await;
    let sub = Subscriber::start(dir.path(), broker.port, ROOT, &[]);
    let store = TestStore::open(dir.path());
    let fw = spawn(config(proxy.port), &store);
    store.add(&[], |_| events(&["s1", "s2"], 1, 20));
    fw.notify.notify_one();
    wait_until("first part delivered", || received_events(&sub.messages()).len() == 40).await;
    wait_until("first part acknowledged", || store.pending() == 0).await;

    let attempts_before = fw.stats.attempts.load(Ordering::Relaxed);
    broker.stop();
    proxy.open.send(false).unwrap();
    drop(sub);
    // Each second of the outage: a raw-samples block of s1 and the events of s1 and s2.
    let t0 = |seq: u64| T0_MS + 1000 * seq as i64;
    let lines: Vec<Vec<u8>> = (21..=60).map(|q| samples_line("m1", "s1", t0(q), 64)).collect();
    store.add(&lines, |pos| {
        let mut r = Vec::new();
        for (i, q) in (21..=60).enumerate() {
            r.push(samples("m1", "s1", pos + i as u64, t0(q), 64));
            r.extend(events(&["s1", "s2"], q, q));
        }
        r.push(alert("m1", 1));
        r
    });
    fw.notify.notify_one();
    // The outage lasts until the forwarder, its session lost, has tried five times more: the wait
    // before the fifth was its longest backoff (100 ms doubling up to 1 s).
    wait_until("five connection attempts during the outage", || {
        fw.stats.attempts.load(Ordering::Relaxed) >= attempts_before + 5
    })
    .await;
    assert_eq!(store.pending(), 121, "nothing leaves the outbox while the broker is away");

    broker.restart();
    let sub = Subscriber::start(dir.path(), broker.port, ROOT, &[]);
    proxy.open.send(true).unwrap();
    wait_until("backlog acknowledged", || store.pending() == 0).await;
    wait_until("backlog delivered", || {
        received_events(&sub.messages()).len() >= 80 && sub.on("/samples/").len() >= 40
    })
    .await;
    let msgs = sub.messages();
    let last_event = msgs.iter().rposition(|(t, _)| t.contains("/events/")).unwrap();
    let first_frame = msgs.iter().position(|(t, _)| t.contains("/samples/")).unwrap();
    assert!(last_event < first_frame, "the backlog's events all arrive before its raw samples");
    let mut frames: Vec<i64> = Vec::new();
    for (_, p) in sub.on("/samples/m1/s1") {
        let f = SamplesFrame::decode(&p).unwrap();
        assert_eq!(f.values.len(), 64);
        if !frames.contains(&f.t0_ms) {
            frames.push(f.t0_ms);
        }
    }
    assert_eq!(frames, (21..=60).map(t0).collect::<Vec<_>>(), "every frame, in time order");
    let got = by_sensor(&received_events(&msgs));
    for s in ["s1", "s2"] {
        assert_eq!(seqs(&got[s]), (21..=60).collect::<Vec<_>>(), "{s}: order intact after dedup");
        assert!(got[s].iter().all(|e| e["replayed"] == true), "{s}: backlog marked replayed");
        assert!(got[s]
            .iter()
            .all(|e| e["ts_ms"].as_i64().unwrap() == t0(e["seq"].as_u64().unwrap())));
    }
    assert_eq!(sub.on("/alerts/m1").len(), 1);
    assert!(fw.stats.connects.load(Ordering::Relaxed) >= 2);
    fw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_restart_without_persistence_loses_nothing() {
    broker_restart(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_restart_with_persistence_loses_nothing() {
    broker_restart(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_broker_keeps_the_window_bounded_and_alerts_first() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), free_port(), "");
    let proxy = Proxy::start(broker.port, Duration::from_millis(200)).await;
    let sub = Subscriber::start(dir.path(), broker.port, ROOT, &[]);
    let store = TestStore::open(dir.path());
    store.add(&[], |_| events(&["s1", "s2"], 1, 150));
    let mut cfg = config(proxy.port);
    cfg.session.inflight = 4;
    cfg.session.batch_events = 5;
    let fw = spawn(cfg, &store);
    wait_until("some backlog delivered", || sub.on("/events/").len() >= 6).await;
    store.add(&[], |_| vec![alert("m1", 1), alert("m1", 2)]);
    fw.notify.notify_one();
    wait_until("drained", || store.pending() == 0).await;
    wait_until("delivered", || received_events(&sub.messages()).len() >= 300).await;
    let msgs = sub.messages();
    let first_alert = msgs.iter().position(|(t, _)| t.contains("/alerts/")).unwrap();
    let events_after = msgs[first_alert..].iter().filter(|(t, _)| t.contains("/events/")).count();
    assert!(events_after >= 30, "alerts overtook the backlog: {events_after} event payloads after");
    let peak = fw.stats.inflight_peak.load(Ordering::Relaxed);
    assert!(peak <= 4, "in-flight PUBLISHes peaked at {peak} with a window of 4");
    for (s, evs) in by_sensor(&received_events(&msgs)) {
        assert_eq!(seqs(&evs), (1..=150).collect::<Vec<_>>(), "{s}");
    }
    fw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_records_are_split_or_declared_and_never_loop() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), free_port(), "max_packet_size 8192\n");
    let sub = Subscriber::start(dir.path(), broker.port, ROOT, &[]);
    let store = TestStore::open(dir.path());
    let lines = vec![samples_line("m1", "s1", 1_700_000_000_000, 6400)];
    store.add(&lines, |pos| {
        let huge = format!(r#"{{"event_id":"m1.s1.1","seq":1,"pad":"{}"}}"#, "x".repeat(9000));
        vec![
            OutboxRecord::Event {
                machine: "m1".into(),
                sensor: "s1".into(),
                seq: 1,
                event_id: "m1.s1.1".into(),
                json: huge.into_bytes(),
            },
            event("m1", "s1", 2),
            samples("m1", "s1", pos, 1_700_000_000_000, 6400),
        ]
    });
    let mut cfg = config(broker.port);
    cfg.session.max_packet = 8192;
    let fw = spawn(cfg, &store);
    wait_until("drained", || store.pending() == 0).await;
    wait_until("frames delivered", || {
        sub.on("/samples/")
            .iter()
            .map(|(_, p)| SamplesFrame::decode(p).unwrap().values.len())
            .sum::<usize>()
            == 6400
    })
    .await;
    let gap: serde_json::Value = serde_json::from_slice(&sub.on("/gaps/s1")[0].1).unwrap();
    assert_eq!(
        (gap["reason"].as_str(), gap["range"]["from_seq"].as_u64()),
        (Some("oversized"), Some(1))
    );
    assert_eq!(seqs(&by_sensor(&received_events(&sub.messages()))["s1"]), vec![2]);
    let mut frames: Vec<SamplesFrame> =
        sub.on("/samples/").iter().map(|(_, p)| SamplesFrame::decode(p).unwrap()).collect();
    frames.sort_by_key(|f| f.first_index);
    assert!(frames.len() >= 4);
    assert_eq!(frames[1].time_ms(0), frames[0].time_ms(frames[0].values.len()));
    assert!(!broker.log().contains("exceeds"), "the broker refused nothing");
    fw.stop().await;
}

fn openssl(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl must be installed")
        .success();
    assert!(ok, "openssl {args:?}");
}

/// CA, server (IP 127.0.0.1) and client certificates, made now; nothing is committed.
fn make_certs(dir: &Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let mut ca = vec![
        "req",
        "-x509",
        "-days",
        "2",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ];
    ca.extend(ec);
    openssl(dir, &ca);
    for (name, ext) in
        [("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")]
    {
        let mut req = vec!["req", "-subj", "/CN=linegate-gw", "-keyout"];
        let (key, csr, pem) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.pem"));
        req.extend([key.as_str(), "-out", csr.as_str()]);
        req.extend(ec);
        openssl(dir, &req);
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        let extfile = format!("{name}.ext");
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-days",
                "2",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-extfile",
                &extfile,
            ],
        );
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("client.key"), std::fs::Permissions::from_mode(0o600))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_certs(d);
    let tls_port = free_port();
    let extra = format!(
        "listener {tls_port} 127.0.0.1\ncafile {0}/ca.pem\ncertfile {0}/server.pem\n\
         keyfile {0}/server.key\nrequire_certificate true\n",
        d.display()
    );
    let broker = Broker::start(d, free_port(), &extra);
    let sub = Subscriber::start(d, broker.port, ROOT, &[]);
    let store = TestStore::open(d);
    store.add(&[], |_| events(&["s1"], 1, 10));
    let tls = linegate::config::MqttTls {
        ca_file: d.join("ca.pem"),
        client_cert: Some((d.join("client.pem"), d.join("client.key"))),
    };
    let mut cfg = config(tls_port);
    cfg.tls = Some(linegate::forward::client_config(&tls, None).unwrap());
    let fw = spawn(cfg, &store);
    wait_until("drained over TLS", || store.pending() == 0).await;
    wait_until("delivered", || received_events(&sub.messages()).len() == 10).await;
    assert!(broker.log().contains("linegate-test"), "our client connected");
    fw.stop().await;

    // Without the client certificate the broker refuses the handshake: nothing is acknowledged.
    store.add(&[], |_| events(&["s1"], 11, 11));
    let mut cfg = config(tls_port);
    cfg.tls = Some(
        linegate::forward::client_config(
            &linegate::config::MqttTls { client_cert: None, ..tls },
            None,
        )
        .unwrap(),
    );
    let fw = spawn(cfg, &store);
    wait_until("retries", || fw.stats.attempts.load(Ordering::Relaxed) >= 2).await;
    assert_eq!(fw.stats.connects.load(Ordering::Relaxed), 0);
    assert_eq!(store.pending(), 1);
    fw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_retries_with_backoff_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pw = d.join("passwd");
    let ok = std::process::Command::new("mosquitto_passwd")
        .args(["-c", "-b"])
        .arg(&pw)
        .args(["gw", "right"])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let extra = format!("allow_anonymous false\npassword_file {}\n", pw.display());
    let broker = Broker::start(d, free_port(), &extra);
    let sub = Subscriber::start(d, broker.port, ROOT, &["-u", "gw", "-P", "right"]);
    let store = TestStore::open(d);
    store.add(&[], |_| events(&["s1"], 1, 10));
    let mut cfg = config(broker.port);
    cfg.credentials = Some(("gw".into(), "wrong".into()));
    let fw = spawn(cfg.clone(), &store);
    wait_until("three refused attempts", || fw.stats.attempts.load(Ordering::Relaxed) >= 3).await;
    assert_eq!(fw.stats.connects.load(Ordering::Relaxed), 0);
    assert_eq!(store.pending(), 10, "nothing acknowledged");
    assert!(sub.on("/events/").is_empty());
    assert!(broker.log().contains("not authorised"), "the broker saw the bad password");
    fw.stop().await;

    // Restarted from the store alone with the right password: everything goes.
    cfg.credentials = Some(("gw".into(), "right".into()));
    let fw = spawn(cfg, &store);
    wait_until("drained", || store.pending() == 0).await;
    wait_until("delivered", || received_events(&sub.messages()).len() == 10).await;
    let got = by_sensor(&received_events(&sub.messages()));
    assert!(got["s1"].iter().all(|e| e["replayed"] == true), "pending at connect: replayed");
    fw.stop().await;
}

#[test]
fn decode_turns_a_captured_payload_into_readable_samples() {
    let dir = tempfile::tempdir().unwrap();
    let frame = SamplesFrame {
        t0_ms: 1_700_000_000_000,
        rate_hz: 3200.0,
        first_index: 3200,
        unit: linegate::event::Unit::G,
        axis: "z".into(),
        values: vec![0.25, -0.5],
    };
    let good = dir.path().join("frame.bin");
    std::fs::write(&good, frame.encode()).unwrap();
    let stdout = support::run(support::linegate(&["decode"]).arg(&good)).success();
    let lines: Vec<serde_json::Value> =
        stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["count"], 2);
    assert_eq!(lines[2]["i"], 3201);
    assert_eq!(lines[2]["t_ms"], 1_700_000_001_000.312_5);
    assert_eq!(lines[2]["v"], -0.5);
    let bad = dir.path().join("bad.bin");
    std::fs::write(&bad, b"{\"events\":[]}").unwrap();
    let out = support::run(support::linegate(&["decode"]).arg(&bad));
    assert!(!out.ok(), "{out:?}");
    let err = &out.stderr;
    assert!(err.contains("bad.bin") && err.contains("shorter than"), "{err}");
}
