//! Benchmark driver for `benches/mqtt_drain.sh`: fills a store with a backlog, or drains it to a
//! broker and reports rates.
//!
//! `mqtt_drain fill STORE MINUTES SENSORS` — per sensor and second one event and one 1 s frame of
//!   3200 raw samples (journal `samples` line, its encoded frame beside it + outbox `Samples`
//!   record), as the pipeline would.
//! `mqtt_drain fill-events STORE MINUTES SENSORS` — the same events without the raw samples.
//! `mqtt_drain drain STORE PORT [CACHE_MIB [INFLIGHT [INFLIGHT_KIB]]]` — runs the forwarder
//!   (unpaced; store cache 64 MiB, window 64 and the daemon's byte window unless given, the
//!   daemon's acknowledgement settings) until the outbox is empty, i.e. every record is
//!   acknowledged and removed (looked at every 5 ms; made durable by the forwarder's sync at
//!   shutdown, after the clock stops); prints one JSON line with counts, seconds and rates. A
//!   subscriber of its own on `events/#` counts the events the broker delivers: the event rate
//!   is the events over the time until the last of them reached it (the backlog's raw samples
//!   go after its events), the sample rate the raw samples over the whole drain.
//! `mqtt_drain lines N FILE [frames]` — N event JSON lines for `mosquitto_pub -l` (same size as
//!   ours); with `frames`, every second line instead carries as many bytes as one of our encoded
//!   3200-sample frames (the same messages and bytes as the backlog of `fill`).
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use std::time::Duration;

use linegate::clock::{Clock, SystemClock};
use linegate::config::MqttForwardConfig;
use linegate::event::Unit;
use linegate::forward::{run, ForwarderConfig, SessionConfig};
use linegate::records::outbox::OutboxRecord;
use linegate::records::samples_codec::encode_block;
use linegate::store::{SharedStore, Store, StoreOptions};
use linegate::telemetry::ForwardStats;
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};

const T0: i64 = 1_700_000_000_000;
const RATE: usize = 3200;

fn event_json(sensor: usize, seq: u64) -> String {
    format!(
        r#"{{"event_id":"gw.s{sensor}.{seq}","machine":"m{}","sensor":"s{sensor}","seq":{seq},"ts_ms":{},"clock":{{"state":"synced","err_ms":2}},"metric":"accel_rms","unit":"g","schema":1,"quality":"good","value":0.2}}"#,
        sensor / 2,
        T0 + 1000 * seq as i64
    )
}

/// `frames` false: events only (the event rate against `mosquitto_pub` without raw samples).
fn fill(path: &str, minutes: u64, sensors: usize, frames: bool) {
    let mut store = Store::open(path.as_ref(), StoreOptions::default()).unwrap();
    let data: Vec<String> = (0..RATE).map(|i| format!("{:.4}", ((i % 97) as f64) / 97.0)).collect();
    let values: Vec<f64> = data.iter().map(|v| v.parse().unwrap()).collect();
    let data = data.join(",");
    for minute in 0..minutes {
        let mut lines = Vec::new();
        let mut recs = Vec::new();
        let first = store.next_journal_pos();
        for s in 0..60 {
            let second = minute * 60 + s;
            let t0 = T0 + 1000 * second as i64;
            for sensor in 0..sensors {
                let seq = second + 1;
                let machine = format!("m{}", sensor / 2);
                let line = format!(
                    r#"{{"at":{t0},"kind":"samples","machine":"{machine}","sensor":"s{sensor}","t0_ms":{t0},"rate_hz":3200,"unit":"g","axis":"z","data":[{data}]}}"#
                );
                let pos = first + lines.len() as u64;
                recs.push(OutboxRecord::Event {
                    machine: machine.clone(),
                    sensor: format!("s{sensor}"),
                    seq,
                    event_id: format!("gw.s{sensor}.{seq}"),
                    json: event_json(sensor, seq).into_bytes(),
                });
                if !frames {
                    // The journal keeps the event line instead (a checkpoint names a position).
                    lines.push((t0, event_json(sensor, seq).into_bytes()));
                    continue;
                }
                lines.push((t0, line.into_bytes()));
                recs.push(OutboxRecord::Samples {
                    machine,
                    sensor: format!("s{sensor}"),
                    journal_pos: pos,
                    t0_ms: t0,
                    rate_hz: RATE as f64,
                    n: RATE as u32,
                    frame: None,
                });
            }
        }
        let range = store.append_journal(&lines).unwrap();
        // Each block's encoded frame beside the lines, as the decide stage writes it.
        for r in &mut recs {
            if let OutboxRecord::Samples { t0_ms, frame, .. } = r {
                let block = encode_block(*t0_ms, RATE as f64, Unit::G, "z", &values);
                *frame = store.append_frame(&block).unwrap();
            }
        }
        let bytes: Vec<Vec<u8>> = recs.iter().map(OutboxRecord::encode).collect();
        store.checkpoint_with_ledger(range.end - 1, b"bench", &bytes, &[]).unwrap();
    }
}

/// Events delivered to the subscriber, and when the last of them arrived (monotonic ms).
#[derive(Default)]
struct Delivered {
    events: u64,
    /// Monotonic time of the first delivery with events (0: none yet).
    first_ms: i64,
    last_ms: i64,
}

/// Subscribes to `linegate/bench/events/#` at QoS 1 and, once the broker has confirmed it,
/// counts the events of every payload (one `"event_id"` per event) as they arrive.
async fn subscribe_events(
    port: u16,
    clock: Arc<SystemClock>,
) -> (tokio::task::JoinHandle<()>, Arc<Mutex<Delivered>>) {
    let mut o = MqttOptions::new("linegate-bench-sub", "127.0.0.1", port);
    o.set_max_packet_size(1 << 20, 1 << 20).set_keep_alive(Duration::from_secs(30));
    let (client, mut eventloop) = AsyncClient::new(o, 16);
    client.subscribe("linegate/bench/events/#", QoS::AtLeastOnce).await.unwrap();
    loop {
        if let Event::Incoming(Packet::SubAck(_)) = eventloop.poll().await.unwrap() {
            break;
        }
    }
    let delivered = Arc::new(Mutex::new(Delivered::default()));
    let d = delivered.clone();
    let task = tokio::spawn(async move {
        let _client = client; // the event loop ends when its client is dropped
        while let Ok(e) = eventloop.poll().await {
            if let Event::Incoming(Packet::Publish(p)) = e {
                let n = p.payload.windows(10).filter(|w| w == b"\"event_id\"").count();
                let mut d = d.lock().unwrap();
                d.events += n as u64;
                d.last_ms = clock.monotonic_ms();
                if d.first_ms == 0 {
                    d.first_ms = d.last_ms;
                }
            }
        }
    });
    (task, delivered)
}

/// `drain STORE PORT [CACHE_MIB [INFLIGHT [INFLIGHT_KIB]]]`: the store's page cache (`[store]
/// cache`, default 64 MiB) and the in-flight window (`[mqtt] inflight`, default 64, and
/// `inflight_bytes`, default the daemon's).
async fn drain(args: &[String]) {
    let (path, port) = (&args[2], args[3].parse().unwrap());
    let cache_mib: u64 = args.get(4).map_or(64, |a| a.parse().unwrap());
    let inflight: usize = args.get(5).map_or(64, |a| a.parse().unwrap());
    let inflight_bytes = args
        .get(6)
        .map_or(MqttForwardConfig::default().inflight_bytes, |a| a.parse::<usize>().unwrap() << 10);
    let opts = StoreOptions { cache_bytes: cache_mib << 20, ..StoreOptions::default() };
    let store = SharedStore::new(Store::open(path.as_ref(), opts).unwrap());
    let (mut events, mut frames, mut sample_bytes) = (0u64, 0u64, 0u64);
    for r in store.read().outbox_pending() {
        match OutboxRecord::decode(&r.unwrap().1).unwrap() {
            OutboxRecord::Event { .. } => events += 1,
            OutboxRecord::Samples { n, .. } => {
                frames += 1;
                sample_bytes += 4 * u64::from(n);
            }
            _ => {}
        }
    }
    let cfg = ForwarderConfig {
        host: "127.0.0.1".into(),
        port,
        client_id: "linegate-bench".into(),
        keep_alive: Duration::from_secs(30),
        credentials: None,
        tls: None,
        session: SessionConfig {
            topic_root: "linegate/bench".into(),
            inflight,
            inflight_bytes,
            max_packet: 256 * 1024,
            replay_rate: 0,
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
    // The allocator as `linegate run` keeps it: the trim the daemon's sampler does each second.
    let trim = tokio::spawn(async {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            linegate::memory::release_free_memory();
        }
    });
    let clock = Arc::new(SystemClock::new());
    let (subscriber, delivered) = subscribe_events(port, clock.clone()).await;
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let stats = Arc::new(ForwardStats::default());
    let src = store.clone();
    let start = clock.monotonic_ms();
    let task = tokio::spawn(run(
        cfg,
        src,
        Arc::new(tokio::sync::Notify::new()),
        clock.clone(),
        stop_rx,
        Some(stats.clone()),
    ));
    while !store.read().outbox_after(0, 1).unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let secs = (clock.monotonic_ms() - start) as f64 / 1000.0;
    // The last events' PUBLISHes to the subscriber may still be on their way.
    for _ in 0..1000 {
        if delivered.lock().unwrap().events >= events {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    subscriber.abort();
    let d = std::mem::take(&mut *delivered.lock().unwrap());
    assert!(d.events >= events, "the subscriber got {} of {events} events", d.events);
    let events_secs = (d.last_ms - start) as f64 / 1000.0;
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
    trim.abort();
    let publishes = stats.publishes.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "{}",
        serde_json::json!({
            "events": events, "frames": frames, "publishes": publishes, "seconds": secs,
            "events_seconds": events_secs, "events_delivered": d.events,
            "first_event_seconds": (d.first_ms - start) as f64 / 1000.0,
            "events_per_s": events as f64 / events_secs,
            "records_per_s": (events + frames) as f64 / secs,
            "sample_mb_per_s": sample_bytes as f64 / 1e6 / secs,
        })
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("fill") => fill(&args[2], args[3].parse().unwrap(), args[4].parse().unwrap(), true),
        Some("fill-events") => {
            fill(&args[2], args[3].parse().unwrap(), args[4].parse().unwrap(), false)
        }
        Some("drain") => {
            // As `linegate run` does before its runtime starts.
            linegate::memory::limit_arenas();
            tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(drain(&args))
        }
        Some("lines") => {
            let n: usize = args[2].parse().unwrap();
            let frames = args.get(4).is_some_and(|a| a == "frames");
            // A frame of one axis ("z") as `linegate::records::samples_codec` encodes it, as text.
            let frame = "f".repeat(linegate::records::samples_codec::encoded_len(1, RATE));
            let line = |i: usize| match frames && i % 2 == 1 {
                true => frame.clone(),
                false => event_json(i % 8, i as u64 / 8 + 1),
            };
            let text: String = (0..n).map(|i| line(i) + "\n").collect();
            std::fs::write(&args[3], text).unwrap();
        }
        _ => eprintln!(
            "usage: mqtt_drain fill|fill-events STORE MINUTES SENSORS | drain STORE PORT [CACHE_MIB [INFLIGHT [INFLIGHT_KIB]]] \
             | lines N FILE [frames]"
        ),
    }
}
