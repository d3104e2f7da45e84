//! `store_day month DIR DAYS [SVG]`: the store in normal operation for DAYS simulated days, as
//! `linegate run --forward local-ack` leaves it with 8 event sensors and `[store] history = "24h"`,
//! compressed in time (the data as fast as the store takes it).
//!
//! Every 10 s of data: 80 event lines (8 sensors, one a second, 300–330 bytes each, as a trace
//! source journals them) appended to the journal; a checkpoint adding their 80 `Event` outbox
//! records and 80 `Accepted` ledger records (one batch, one fsync); then all 80 published and
//! acknowledged at once (`Published` and `Acknowledged` ledger records, one batch, one fsync), as
//! `--forward local-ack` does. Every simulated minute the ledger is pruned to the last 24 h of
//! ingest time (`retention::prune`, without its per-check cap) and the journal's history
//! truncated at the same horizon (the decide stage's `truncate_history`). Every simulated hour
//! sled writes its page table snapshot (`Store::snapshot_sled`, the daemon's hourly reopen).
//!
//! At the end of every simulated day the store is closed and its size sampled: the directory's
//! bytes, and the live data sled holds (the sum of every key and value of every tree, read by
//! opening sled directly); then the restart-to-ready (`open_or_recover` and what a start reads)
//! is timed and the run goes on with the reopened store. One JSON line per day on stdout; with
//! SVG, the sizes plotted there (`write_svg`).
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::time::Instant;

use linegate::records::ledger::{Acceptance, LedgerEntry, LedgerRecord};
use linegate::records::outbox::OutboxRecord;
use linegate::store::{Store, StoreOptions, PRUNE_BATCH};

use super::T0;

const SENSORS: u64 = 8;
/// Seconds of data per checkpoint (and per acknowledgement).
const BLOCK: u64 = 10;
const HISTORY_MS: i64 = 24 * 3600 * 1000;
const DAY: u64 = 86_400;

/// One simulated day's sample.
struct Day {
    day: u64,
    store_bytes: u64,
    live_bytes: u64,
    ready_ms: f64,
    wall_s: f64,
}

fn event_line(at: i64, k: u64, sec: u64, value: f64) -> Vec<u8> {
    let (m, ts) = (k / 2, T0 + (sec * 1000) as i64);
    format!(
        r#"{{"at":{at},"kind":"event","event":{{"event_id":"gw.m{m}.s{k}.{sec}","machine":"m{m}","sensor":"s{k}","seq":{sec},"ts_ms":{ts},"clock":{{"state":"synced","err_ms":2}},"metric":"accel_rms","value":{value:.4},"unit":"g","schema":1,"quality":"good"}}}}"#
    )
    .into_bytes()
}

/// The bytes of the files under `dir`, subdirectories included.
fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => tree_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// The key and value bytes of every tree of the closed store in `dir`.
fn live_bytes(dir: &Path) -> u64 {
    let db = linegate::store::open_sled_directly(dir).expect("open sled");
    let mut total = 0u64;
    for name in db.tree_names() {
        let tree = db.open_tree(&name).expect("open tree");
        for kv in tree.iter() {
            let (k, v) = kv.expect("read tree");
            total += (k.len() + v.len()) as u64;
        }
    }
    total
}

/// Opens the store as a start does and reads what a start reads (as the outage run's end does).
fn ready(dir: &Path, now_ms: i64) -> (Store, f64) {
    let t = Instant::now();
    let (s, recovered) =
        Store::open_or_recover(dir, StoreOptions::default(), now_ms).expect("reopen");
    assert!(recovered.is_none(), "the store needed recovery");
    s.outbox_records();
    s.last_checkpoint().expect("checkpoint");
    s.source_positions().expect("positions");
    s.sensor_book().expect("sensor book");
    s.seq_marks().for_each(|m| drop(m.expect("seq mark")));
    s.dedup_pages().for_each(|p| drop(p.expect("dedup page")));
    s.journal_last_offset(0, s.checkpoint_pos()).expect("offset");
    (s, t.elapsed().as_secs_f64() * 1000.0)
}

pub fn run(args: &[String]) {
    let (dir, days, svg) = match args {
        [d, n] => (Path::new(d), n.parse::<u64>().expect("DAYS"), None),
        [d, n, svg] => (Path::new(d), n.parse::<u64>().expect("DAYS"), Some(Path::new(svg))),
        _ => {
            eprintln!("usage: store_day month DIR DAYS [SVG]");
            std::process::exit(2);
        }
    };
    let mut s = Store::open(dir, StoreOptions::default()).expect("open");
    let start = Instant::now();
    let mut samples = Vec::new();
    let decider = vec![0x5au8; 2048];
    for block in 0..days * DAY / BLOCK {
        let sec0 = block * BLOCK;
        let mut lines = Vec::with_capacity((BLOCK * SENSORS) as usize);
        for sec in sec0..sec0 + BLOCK {
            for k in 0..SENSORS {
                let at = T0 + (sec * 1000 + 50 + k * 40) as i64;
                let value = 0.05 + 0.3 * (((sec * 7 + k * 13) % 97) as f64 / 97.0);
                lines.push((at, sec, k, event_line(at, k, sec, value)));
            }
        }
        let at_end = lines.last().map_or(T0, |l| l.0);
        let batch: Vec<(i64, Vec<u8>)> = lines.iter().map(|l| (l.0, l.3.clone())).collect();
        let range = s.append_journal(&batch).expect("append");
        let first_seq = s.next_outbox_seq();
        let mut adds = Vec::with_capacity(lines.len());
        let mut ledger = Vec::with_capacity(lines.len());
        for (i, ((at, sec, k, json), pos)) in lines.into_iter().zip(range.clone()).enumerate() {
            let (machine, sensor) = (format!("m{}", k / 2), format!("s{k}"));
            let event_id = format!("gw.{machine}.{sensor}.{sec}");
            ledger.push(LedgerRecord::new(
                at,
                LedgerEntry::Accepted {
                    event_id: event_id.clone(),
                    machine: machine.clone(),
                    sensor: sensor.clone(),
                    seq: sec,
                    ts_ms: T0 + (sec * 1000) as i64,
                    how: Acceptance::Applied,
                    journal_pos: pos,
                    outbox_seq: first_seq + i as u64,
                    counted: true,
                    rules: Vec::new(),
                    watermark_ms: Some(T0 + (sec * 1000) as i64 - 5000),
                },
            ));
            adds.push(OutboxRecord::Event { machine, sensor, seq: sec, event_id, json }.encode());
        }
        s.checkpoint_with_ledger(range.end - 1, &decider, &adds, &ledger).expect("checkpoint");
        let seqs: Vec<u64> = (first_seq..s.next_outbox_seq()).collect();
        let published = LedgerEntry::Published { outbox_seqs: seqs.clone() };
        let acked = LedgerEntry::Acknowledged { outbox_seqs: seqs.clone() };
        let acks = [LedgerRecord::new(at_end, published), LedgerRecord::new(at_end, acked)];
        s.outbox_ack_many(&seqs, &acks).expect("acknowledge");
        let end = sec0 + BLOCK;
        if end.is_multiple_of(60) {
            let horizon = at_end - HISTORY_MS;
            while s.prune_ledger(horizon, PRUNE_BATCH).expect("prune").ledger_records > 0 {}
            s.set_history_floor(range.end);
            let keep = s.journal_history_start(horizon, range.end).expect("history start");
            if keep > s.journal_start() {
                s.truncate_journal_before(keep).expect("truncate history");
            }
        }
        if end.is_multiple_of(3600) && !end.is_multiple_of(DAY) {
            assert!(s.snapshot_sled().expect("snapshot"), "no reader is out");
        }
        if end.is_multiple_of(DAY) {
            drop(s);
            let store_bytes = tree_bytes(dir);
            let live = live_bytes(dir);
            let (again, ready_ms) = ready(dir, at_end);
            s = again;
            let d = Day {
                day: end / DAY,
                store_bytes,
                live_bytes: live,
                ready_ms,
                wall_s: start.elapsed().as_secs_f64(),
            };
            println!(
                "{{\"day\":{},\"store_bytes\":{},\"live_bytes\":{},\"overhead\":{:.2},\"ready_ms\":{:.1},\"wall_s\":{:.0}}}",
                d.day,
                d.store_bytes,
                d.live_bytes,
                d.store_bytes as f64 / d.live_bytes.max(1) as f64,
                d.ready_ms,
                d.wall_s
            );
            samples.push(d);
        }
    }
    if let Some(svg) = svg {
        std::fs::write(svg, write_svg(&samples)).expect("write the SVG");
    }
}

/// A line chart of the store's size and the live data in it, per simulated day (MB), with the
/// day-7 level ×1.1 dashed: plain SVG, no plotting library.
fn write_svg(days: &[Day]) -> String {
    let (w, h, left, right, top, bottom) = (640.0, 320.0, 60.0, 20.0, 30.0, 40.0);
    let max_mb = days.iter().map(|d| d.store_bytes as f64 / 1e6).fold(1.0, f64::max) * 1.15;
    let n = days.last().map_or(1, |d| d.day).max(2) as f64;
    let x = |day: f64| left + (day - 1.0) / (n - 1.0) * (w - left - right);
    let y = |mb: f64| h - bottom - mb / max_mb * (h - top - bottom);
    let line = |f: &dyn Fn(&Day) -> f64| {
        days.iter()
            .map(|d| format!("{:.1},{:.1}", x(d.day as f64), y(f(d))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n\
         <text x=\"{left}\" y=\"18\" font-size=\"13\">The store over a simulated month: 8 sensors, history 24 h, all acknowledged (MB)</text>\n"
    );
    let step = if max_mb > 200.0 {
        50.0
    } else if max_mb > 50.0 {
        20.0
    } else {
        5.0
    };
    let mut mb = 0.0;
    while mb <= max_mb {
        s += &format!(
            "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{mb:.0}</text>\n",
            w - right,
            y(mb),
            y(mb),
            left - 6.0,
            y(mb) + 4.0
        );
        mb += step;
    }
    for d in days.iter().filter(|d| d.day == 1 || d.day % 5 == 0) {
        s += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            x(d.day as f64),
            h - bottom + 16.0,
            d.day
        );
    }
    s += &format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">simulated day</text>\n",
        (left + w - right) / 2.0,
        h - 6.0
    );
    if let Some(d7) = days.iter().find(|d| d.day == 7) {
        let limit = d7.store_bytes as f64 / 1e6 * 1.1;
        s += &format!(
            "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#c00\" stroke-dasharray=\"4 3\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#c00\" text-anchor=\"end\">1.1 × day 7</text>\n",
            w - right,
            y(limit),
            y(limit),
            w - right,
            y(limit) - 4.0
        );
    }
    let store = line(&|d| d.store_bytes as f64 / 1e6);
    let live = line(&|d| d.live_bytes as f64 / 1e6);
    s += &format!(
        "<polyline fill=\"none\" stroke=\"#1f5fbf\" stroke-width=\"2\" points=\"{store}\"/>\n"
    );
    s += &format!(
        "<polyline fill=\"none\" stroke=\"#2a9d4b\" stroke-width=\"2\" points=\"{live}\"/>\n"
    );
    s += &format!(
        "<text x=\"{:.1}\" y=\"40\" fill=\"#1f5fbf\">the store on disk</text><text x=\"{:.1}\" y=\"54\" fill=\"#2a9d4b\">live keys and values in sled</text>\n</svg>\n",
        left + 10.0,
        left + 10.0
    );
    s
}
