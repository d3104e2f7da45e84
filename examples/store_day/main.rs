//! A long run of the store under the issue-3 workload, with the
//! broker away the whole time (nothing is acknowledged), so the retention budget does all the work.
//!
//! `store_day DIR SECONDS MAX_BYTES [FROM_SECOND|auto]` simulates SECONDS (from FROM_SECOND on, to
//! go on with a run that stopped, on its store; `auto`: where its journal ends) of data from 8 sensors at 3200 Hz: each
//! sensor's one-second frame (3200 f32 behind a 16-byte header, 12 816 bytes) arrives at its own
//! offset within the second (a line of at least 1 KiB: it goes to a segment file, not into sled),
//! the journal is group-committed every 100 ms of data (append, then
//! `commit`: sled flush + fsync), and once per second the decide stage's checkpoint adds one
//! `Samples` and one `Event` outbox record per sensor (one batch, one fsync). Every 10 s of data
//! `shed_to_budget(MAX_BYTES)` runs, as the daemon does. The data is generated as fast as the store
//! takes it. Prints one JSON object: samples/s, fsyncs per second of data, commit latency
//! percentiles, size on disk against the live raw-sample bytes (and the largest size a budget
//! check saw, and the segment files' share), sheds (the longest one, and the outbox pages merged
//! after them), and the time to reopen the store at the end: `open_or_recover` (the start-up
//! check included), then what a start reads of it (the outbox's kept record count, the checkpoint,
//! positions, seq marks, duplicate pages): `ready_ms` is both. `count_ms` is a count of the
//! outbox from its pages, as a start did before the count was kept, checked equal. Every hour of
//! data but the last, sled writes its page table snapshot (`Store::snapshot_sled`, as the daemon
//! does), so the reopen at the end reads an hour of sled's log; how long those took is printed. A line on stderr per simulated day shows the sizes as they go (a week: `SECONDS` 604800).
//!
//! `store_day month DIR DAYS [SVG]`: normal operation instead of an outage, everything
//! acknowledged, `[store] history` 24 h (`store_day/month.rs`).
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::{Duration, Instant};

mod month;

use linegate::records::outbox::OutboxRecord;
use linegate::store::{Store, StoreOptions};

const SENSORS: u64 = 8;
const RATE: usize = 3200;
const T0: i64 = 1_700_000_000_000;

fn frame(sensor: u64, second: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 + 4 * RATE);
    v.extend_from_slice(&sensor.to_be_bytes());
    v.extend_from_slice(&second.to_be_bytes());
    for i in 0..RATE {
        let x = ((i as f32) * 0.05 + sensor as f32).sin() * 0.3 + (second % 7) as f32 * 0.01;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).is_some_and(|a| a == "month") {
        month::run(&args[2..]);
        return;
    }
    if !(4..=5).contains(&args.len()) {
        eprintln!("usage: store_day DIR SECONDS MAX_BYTES [FROM_SECOND|auto]");
        std::process::exit(2);
    }
    let dir = std::path::PathBuf::from(&args[1]);
    let seconds: u64 = args[2].parse().unwrap();
    let max_bytes: u64 = args[3].parse().unwrap();
    let mut s = Store::open(&dir, StoreOptions::default()).unwrap();
    // Goes on with a run that stopped (a store already holding seconds 0..FROM_SECOND); `auto`:
    // after the last second whose journal records the store holds (SENSORS records a second).
    let from: u64 = match args.get(4).map(String::as_str) {
        None => 0,
        Some("auto") => (s.next_journal_pos() - 1) / SENSORS,
        Some(a) => a.parse().unwrap(),
    };
    if from > 0 {
        eprintln!("going on from second {from}");
    }
    let mut commits = Vec::with_capacity((seconds - from) as usize * 11);
    let (mut fsyncs, mut sheds, mut shed_frames, mut peak) = (0u64, 0u64, 0u64, 0u64);
    let (mut shed_max, mut keys_before, mut keys_after) = (Duration::ZERO, 0u64, 0u64);
    let never = |_: &str, _: &str, _: i64, _: i64| false;
    let (mut snapshots, mut day_from) = (Vec::new(), 0);
    let start = Instant::now();
    for sec in from..seconds {
        let mut adds = Vec::with_capacity(2 * SENSORS as usize);
        // Ten group commits per second of data; sensor k's frame completes at k × 125 ms.
        for tick in 0..10u64 {
            let batch: Vec<(i64, Vec<u8>)> = (0..SENSORS)
                .filter(|k| k * 125 / 100 == tick)
                .map(|k| (T0 + (sec * 1000 + k * 125) as i64, frame(k, sec)))
                .collect();
            let ks: Vec<u64> = (0..SENSORS).filter(|k| k * 125 / 100 == tick).collect();
            let range = s.append_journal(&batch).unwrap();
            let t = Instant::now();
            s.commit().unwrap();
            commits.push(t.elapsed());
            fsyncs += 1;
            for (k, pos) in ks.into_iter().zip(range) {
                let t0_ms = T0 + (sec * 1000) as i64;
                adds.push(OutboxRecord::Samples {
                    machine: format!("m{}", k / 2),
                    sensor: format!("s{k}"),
                    journal_pos: pos,
                    t0_ms,
                    rate_hz: RATE as f64,
                    n: RATE as u32,
                    frame: None,
                });
                let json = format!(
                    r#"{{"event_id":"gw.s{k}.{sec}","machine":"m{}","sensor":"s{k}","seq":{sec},"ts_ms":{t0_ms},"metric":"accel_rms","unit":"g","value":0.21}}"#,
                    k / 2
                );
                adds.push(OutboxRecord::Event {
                    machine: format!("m{}", k / 2),
                    sensor: format!("s{k}"),
                    seq: sec,
                    event_id: format!("gw.s{k}.{sec}"),
                    json: json.into_bytes(),
                });
            }
        }
        let bytes: Vec<Vec<u8>> = adds.iter().map(OutboxRecord::encode).collect();
        let pos = s.next_journal_pos() - 1;
        let t = Instant::now();
        s.checkpoint(pos, b"decider state", &bytes).unwrap();
        commits.push(t.elapsed());
        fsyncs += 1;
        if sec % 10 == 9 {
            let t = Instant::now();
            let r = s.shed_to_budget(max_bytes, T0 + (sec * 1000) as i64, &never).unwrap();
            peak = peak.max(r.size_before);
            if r.triggered {
                shed_max = shed_max.max(t.elapsed());
                sheds += 1;
                shed_frames += r.frames;
                keys_before += r.compacted.keys_before;
                keys_after += r.compacted.keys_after;
            }
        }
        // Every hour of data, as the daemon does (`retention::SLED_SNAPSHOT_EVERY`); not
        // at the end, so the reopen below reads a whole hour of sled's log, as a start at the
        // worst moment would.
        if sec % 3600 == 3599 && sec + 1 < seconds {
            let t = Instant::now();
            assert!(s.snapshot_sled().unwrap(), "no reader is out");
            snapshots.push(t.elapsed());
        }
        if sec % 86_400 == 86_399 {
            let size = s.disk_usage().unwrap();
            let day = &mut snapshots[day_from..];
            day.sort();
            eprintln!(
                "day {}: {:.0} s, size {size} (sled {}), sheds {sheds}, sled snapshots {} (median {:.0} ms, max {:.0} ms)",
                sec / 86_400 + 1,
                start.elapsed().as_secs_f64(),
                size - dir_bytes(&dir.join(linegate::store::RAW_DIR)),
                day.len(),
                percentile(day, 0.5),
                percentile(day, 1.0),
            );
            day_from = snapshots.len();
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let size = s.disk_usage().unwrap();
    let live_frames = s
        .outbox_pending()
        .filter(|r| {
            let (_, b) = r.as_ref().unwrap();
            matches!(OutboxRecord::decode(b).unwrap(), OutboxRecord::Samples { .. })
        })
        .count() as u64;
    let live_raw = live_frames * (4 * RATE as u64);
    // The segment files' share of the size: the rest is sled's.
    let raw_dir = dir.join(linegate::store::RAW_DIR);
    let segment_bytes = dir_bytes(&raw_dir);
    let sled_bytes = size - segment_bytes;
    drop(s);
    let t = Instant::now();
    let (reopened, recovered) = Store::open_or_recover(&dir, StoreOptions::default(), T0).unwrap();
    let reopen_ms = t.elapsed().as_secs_f64() * 1000.0;
    assert!(recovered.is_none(), "the store needed recovery");
    // What a start reads besides (`app::resume`, `DecideStage::restore`).
    let depth = reopened.outbox_records();
    reopened.last_checkpoint().unwrap();
    reopened.source_positions().unwrap();
    reopened.sensor_book().unwrap();
    reopened.seq_marks().for_each(|m| drop(m.unwrap()));
    reopened.dedup_pages().for_each(|p| drop(p.unwrap()));
    for source in 0..SENSORS as u16 {
        reopened.journal_last_offset(source, reopened.checkpoint_pos()).unwrap();
    }
    let ready_ms = t.elapsed().as_secs_f64() * 1000.0;
    let t = Instant::now();
    let counted = reopened.count_outbox_records().unwrap();
    let count_ms = t.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(depth, counted, "the kept outbox count disagrees with the pages");
    drop(reopened);
    commits.sort();
    snapshots.sort();
    let samples = (seconds - from) * SENSORS * RATE as u64;
    println!(
        "{{\"from_second\":{from},\"data_seconds\":{seconds},\"samples\":{samples},\"wall_s\":{elapsed:.2},\
         \"samples_per_s\":{:.0},\"fsyncs_per_data_second\":{:.1},\"commit_p50_ms\":{:.2},\
         \"commit_p99_ms\":{:.2},\"commit_max_ms\":{:.2},\"max_bytes\":{max_bytes},\
         \"size_on_disk\":{size},\"peak_size_at_checks\":{peak},\"segment_bytes\":{segment_bytes},\"live_frames\":{live_frames},\"live_raw_bytes\":{live_raw},\
         \"disk_per_raw_byte\":{:.3},\"sheds\":{sheds},\"shed_frames\":{shed_frames},\
         \"shed_max_ms\":{:.0},\"pages_merged\":{keys_before},\"pages_after_merge\":{keys_after},\
         \"sled_bytes\":{sled_bytes},\"outbox_records\":{depth},\
         \"sled_snapshots\":{},\"sled_snapshot_p50_ms\":{:.1},\"sled_snapshot_max_ms\":{:.1},\
         \"reopen_ms\":{reopen_ms:.1},\"ready_ms\":{ready_ms:.1},\"count_ms\":{count_ms:.1}}}",
        samples as f64 / elapsed,
        fsyncs as f64 / (seconds - from) as f64,
        percentile(&commits, 0.5),
        percentile(&commits, 0.99),
        percentile(&commits, 1.0),
        size as f64 / live_raw.max(1) as f64,
        shed_max.as_secs_f64() * 1000.0,
        snapshots.len(),
        percentile(&snapshots, 0.5),
        percentile(&snapshots, 1.0),
    );
}

/// The bytes of the files directly in `dir` (0 when it is missing).
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0)
}
