//! The live ingest with a bus sensor in process: an ADXL345 on an `embedded-hal-mock` I2C bus,
//! the real read loop thread, the live ingest into a real store, and the decide stage started
//! only after the source ended (the slowest decide stage there is).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use embedded_hal::i2c::ErrorKind;
use embedded_hal_mock::eh1::i2c::{Mock as I2cMock, Transaction as I2cTx};
use tokio::sync::Notify;

use super::*;
use crate::clock::ManualClock;
use crate::config::{Config, SourceConfig};
use crate::decide::stage::DecideStage;
use crate::driver::adxl345::{Adxl345, I2cAddress};
use crate::ingest::bus::BusAdapter;
use crate::records::ledger::LedgerEntry;
use crate::records::outbox::OutboxRecord;
use crate::source::bus::{spawn, BusReader};
use crate::source::clock_quality::KernelClock;
use crate::stamp::clock::KernelEvidence;
use crate::store::{Store, StoreOptions};
use crate::telemetry::captured::trace_of;

const ADDR: u8 = 0x53;
const T: i64 = 1_700_000_000_000;

/// A clock whose monotonic time moves `step_ms` at every reading (so the read loop, which reads
/// it about twice a poll, sees time pass at the sensor's pace without sleeping), and whose wall
/// clock steps back 30 s at reading `step_at`.
struct PacedClock {
    inner: ManualClock,
    step_ms: i64,
    readings: AtomicI64,
    step_at: i64,
}

impl Clock for PacedClock {
    fn now_ms(&self) -> i64 {
        self.inner.now_ms()
    }
    fn monotonic_ms(&self) -> i64 {
        if self.readings.fetch_add(1, Ordering::SeqCst) == self.step_at {
            self.inner.step_wall(-30_000);
        }
        self.inner.advance(self.step_ms);
        self.inner.monotonic_ms()
    }
}

struct Synced;
impl KernelClock for Synced {
    fn read(&mut self) -> Option<KernelEvidence> {
        Some(KernelEvidence {
            unsynchronised: false,
            time_error: false,
            maxerror_us: 4_000,
            esterror_us: 500,
        })
    }
}

/// One poll: INT_SOURCE (D0 = overrun), FIFO_STATUS, then `n` samples with z = 256 + i LSB
/// (about 1 g) and a vibration of ±40 LSB on every other sample.
fn poll(overrun: bool, first: i16, n: i16) -> Vec<I2cTx> {
    let mut tx = vec![
        I2cTx::write_read(ADDR, vec![0x30], vec![u8::from(overrun)]),
        I2cTx::write_read(ADDR, vec![0x39], vec![n as u8]),
    ];
    tx.extend((first..first + n).map(|i| {
        let z = 256 + if i % 2 == 0 { 40 } else { -40 };
        let bytes: Vec<u8> = [i, -i, z].iter().flat_map(|v| v.to_le_bytes()).collect();
        I2cTx::write_read(ADDR, vec![0x32], bytes)
    }));
    tx
}

fn config(dir: &std::path::Path) -> Config {
    let text = format!(
        "[gateway]\nid = \"gw\"\n[store]\npath = \"{}\"\ncommit_records = 8\n\
         [[source]]\nkind = \"i2c\"\ndevice = \"/dev/i2c-1\"\nrate_hz = 800\nrange_g = 4\n\
         machine = \"press-7\"\nsensor = \"s1\"\naxes = [\"z\"]\nblock = \"100ms\"\n",
        dir.join("db").display()
    );
    Config::from_toml(&text, "test.toml").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bus_sensor_is_journaled_decided_and_its_gaps_and_clock_steps_ledgered() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let SourceConfig::I2c(i2c) = &config.source[0] else { panic!("i2c expected") };
    let sensor = i2c.sensor.clone();
    // 800 Hz: 16 samples (20 ms) a poll; 4 s of data, an overrun after 2 s, then a bus error.
    let mut script: Vec<I2cTx> = (0..100).flat_map(|p| poll(false, p * 16, 16)).collect();
    script.extend(poll(true, 1600, 32));
    script.extend((0..100).flat_map(|p| poll(false, 1632 + p * 16, 16)));
    script.push(I2cTx::write_read(ADDR, vec![0x30], vec![0]).with_error(ErrorKind::Other));
    let clock = PacedClock {
        inner: ManualClock::new(T),
        step_ms: 10,
        readings: AtomicI64::new(0),
        step_at: 150,
    };
    let accel = Adxl345::new_i2c(I2cMock::new(&script), I2cAddress::AltLow);
    let reader = BusReader::new(accel, clock, Synced, sensor.clone());
    let (bus_tx, bus_rx) = mpsc::channel(64);
    let bus = spawn(reader, bus_tx, Arc::new(AtomicBool::new(false)));

    let store = SharedStore::new(Store::open(&config.store.path, StoreOptions::default()).unwrap());
    // Room for one batch, and nobody reading yet: the ingest must not wait for the decide stage.
    let (tx, rx) = mpsc::channel(1);
    let (_stop_tx, stop) = watch::channel(false);
    let telemetry = crate::telemetry::Telemetry::new();
    let p = Params {
        source: 0,
        resume_at: 0,
        commit_records: 8,
        commit_interval_ms: 50,
        telemetry: telemetry.clone(),
        raw_threshold: StoreOptions::default().raw_threshold,
    };
    let at = Box::new(ManualClock::new(T + 10_000));
    let adapter = BusAdapter::new(&sensor, telemetry.metrics.clone());
    ingest_live(p, adapter, bus_rx, at, store.clone(), tx, stop).await.unwrap();
    let (driver, ended) = bus.join().unwrap();
    driver.destroy().done();
    let stats = ended.unwrap_err().to_string();
    assert!(stats.contains("bus error"), "{stats}");

    let stage = DecideStage::restore(
        &config,
        store.clone(),
        Arc::new(Notify::new()),
        crate::telemetry::Telemetry::new(),
    )
    .unwrap();
    tokio::task::spawn_blocking(move || stage.run(1, rx)).await.unwrap().unwrap();

    let s = store.read();
    let ledger: Vec<LedgerEntry> = s.ledger_from(1).map(|r| r.unwrap().1.entry).collect();
    let accepted: Vec<(String, u64)> = ledger
        .iter()
        .filter_map(|e| match e {
            LedgerEntry::Accepted { event_id, seq, .. } => Some((event_id.clone(), *seq)),
            _ => None,
        })
        .collect();
    assert!(accepted.len() >= 3, "one event per whole second: {accepted:?}");
    for (i, (id, seq)) in accepted.iter().enumerate() {
        assert_eq!((id.as_str(), *seq), (format!("gw.s1.{}", i + 1).as_str(), i as u64 + 1));
    }
    let gaps: Vec<&GapNotice> = ledger
        .iter()
        .filter_map(|e| match e {
            LedgerEntry::GapDeclared { gap, .. } => Some(gap),
            _ => None,
        })
        .collect();
    assert_eq!(gaps.len(), 1, "the overrun, nothing shed: {gaps:?}");
    assert_eq!((gaps[0].sensor.as_str(), gaps[0].reason.as_str()), ("s1", "overrun"));
    let step = ledger.iter().find_map(|e| match e {
        LedgerEntry::ClockStep { step_ms, .. } => Some(*step_ms),
        _ => None,
    });
    assert_eq!(step, Some(-30_000));
    let outbox: Vec<OutboxRecord> =
        s.outbox_pending().map(|r| OutboxRecord::decode(&r.unwrap().1).unwrap()).collect();
    assert!(outbox.iter().any(|r| matches!(r, OutboxRecord::Gap(g) if g.reason == "overrun")));
    let samples = outbox.iter().filter(|r| matches!(r, OutboxRecord::Samples { .. })).count();
    assert!(samples >= 39, "about 40 blocks of 100 ms kept for forwarding: {samples}");
    // Each block's line (818 bytes) is kept in sled, below `raw_threshold`: no segment is being
    // written, so no block has an encoded frame, and the drain reads the line.
    for r in &outbox {
        if let OutboxRecord::Samples { journal_pos, frame, .. } = r {
            assert_eq!(*frame, None, "journal record {journal_pos}");
        }
    }
    // Every journaled line was decided: the checkpoint is at the journal's end.
    assert_eq!(s.checkpoint_pos() + 1, s.next_journal_pos());

    // The overrun and the group commits reached the metrics.
    let text = crate::telemetry::exposition::encode(&telemetry.metrics).unwrap();
    assert!(text.contains("\nlinegate_sensor_overruns_total{sensor=\"s1\"} 1\n"), "{text}");
    let commits = text
        .lines()
        .find_map(|l| l.strip_prefix("linegate_journal_commit_latency_seconds_count "))
        .and_then(|n| n.parse::<u64>().ok());
    assert!(commits.is_some_and(|n| n >= 5), "about 40 blocks, 8 a commit: {commits:?}");
}

/// A block of three readings of press-7's sensor s1.
fn press_block() -> SamplesRecord {
    SamplesRecord {
        machine: "press-7".into(),
        sensor: "s1".into(),
        t0_ms: T,
        rate_hz: 3200.0,
        unit: Unit::G,
        axis: Some("z".into()),
        clock: Some(ClockEvidence { state: crate::event::ClockState::Holdover, err_ms: Some(12) }),
        data: vec![0.1, -0.003_906_25, 1.0 / 3.0],
    }
}

#[test]
fn samples_lines_parse_back_to_the_same_record() {
    let r = press_block();
    let line = samples_line(T + 5, &r);
    let parsed = crate::trace::parse::parse_line(&line).unwrap();
    assert_eq!(parsed.at, T + 5);
    assert_eq!(parsed.arrival, crate::trace::Arrival::Samples(r));
    let tick = crate::trace::parse::parse_line(&tick_line(T)).unwrap();
    assert_eq!(tick.arrival, crate::trace::Arrival::Tick);
}

/// The simplest adapter: samples records as they come.
struct Passthrough;

impl Adapter for Passthrough {
    type Item = SamplesRecord;
    fn convert(&mut self, item: SamplesRecord, _: Now, out: &mut Vec<LiveItem>) {
        out.push(LiveItem::Samples(item));
    }
    fn idle(&mut self, _: Now, _: &mut Vec<LiveItem>) {}
}

/// The source stage's span: one per block read, naming the source and what the block became.
#[test]
fn the_source_span_names_each_block_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = SharedStore::new(Store::open(dir.path(), StoreOptions::default()).unwrap());
    let (tx, _rx) = mpsc::channel(8);
    let (_stop_tx, stop) = watch::channel(false);
    let (blocks, input) = mpsc::channel(4);
    for t0_ms in [T, T + 1_000] {
        let r = SamplesRecord { t0_ms, rate_hz: 4.0, data: vec![0.1; 4], ..press_block() };
        blocks.try_send(r).unwrap();
    }
    drop(blocks);
    let p = Params {
        source: 3,
        resume_at: 0,
        commit_records: 8,
        commit_interval_ms: 50,
        telemetry: crate::telemetry::Telemetry::new(),
        raw_threshold: StoreOptions::default().raw_threshold,
    };
    let clock = Box::new(ManualClock::new(T));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let ingest = ingest_live(p, Passthrough, input, clock, store.clone(), tx, stop);
    let (ended, text) = trace_of(|| rt.block_on(ingest));
    ended.unwrap();
    let block = "source{source=3 records=1 samples=4 gaps=0}";
    assert_eq!(text.matches(block).count(), 2, "{text}");
    assert_eq!(store.read().next_journal_pos(), 3, "both blocks journaled");
}
