//! Helpers shared by the fuzz targets: seed inputs built from the repository's fixtures and from
//! linegate's own encoders, and the configuration the decider targets restore under.
//!
//! Seeds are not committed. When `LINEGATE_FUZZ_SEEDS` names a directory (scripts/fuzz sets it
//! to the target's corpus directory), a target's `init` writes its seeds there before libFuzzer
//! reads the corpus; files already there are left alone.

use std::path::{Path, PathBuf};

use linegate::config::Config;
use linegate::decide::Decider;
use linegate::trace::parse::parse_line;

/// The repository root (the parent of this crate).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Writes `seeds` as `seed-NNN` files into `$LINEGATE_FUZZ_SEEDS`, when it is set.
pub fn write_seeds(seeds: impl FnOnce() -> Vec<Vec<u8>>) {
    let Some(dir) = std::env::var_os("LINEGATE_FUZZ_SEEDS") else { return };
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).expect("create the seed directory");
    for (i, seed) in seeds().into_iter().enumerate() {
        let path = dir.join(format!("seed-{i:03}"));
        if !path.exists() {
            std::fs::write(&path, seed).expect("write a seed");
        }
    }
}

/// The non-empty lines of the fixture traces named, each at most `max` bytes.
pub fn trace_lines(names: &[&str], max: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for name in names {
        let path = repo().join("fixtures/traces").join(format!("{name}.jsonl"));
        let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        out.extend(
            text.split(|&b| b == b'\n')
                .filter(|l| !l.is_empty() && l.len() <= max)
                .map(<[u8]>::to_vec),
        );
    }
    out
}

/// A few lines of each kind: events (schema 1 and 2, rejected ones too, some with `features`,
/// valid and not), samples and ticks.
pub fn some_trace_lines() -> Vec<Vec<u8>> {
    let mut lines =
        trace_lines(&["schema_versions_mixed", "poison", "samples_clock_jump", "duplicates"], 4096);
    lines.truncate(48);
    let features = [
        r#"{"accel_rms":0.61,"velocity_rms":4.62,"crest_factor":3.1,"kurtosis":3.02}"#,
        r#"{"env_bpfo":1.02,"env_bpfi":31.4,"env_bsf":0.97,"env_ftf":1.1}"#,
        r#"{}"#,
        r#"null"#,
        r#"{"velocity":1}"#,
        r#"{"kurtosis":NaN}"#,
        r#"{"env_bsf":-1}"#,
        r#"{"kurtosis":3,"kurtosis":4}"#,
    ];
    let events: Vec<Vec<u8>> = lines
        .iter()
        .filter(|l| l.windows(9).any(|w| w == b"\"event\":{"))
        .take(4)
        .cloned()
        .collect();
    for (i, f) in features.iter().enumerate() {
        let Some(line) = events.get(i % events.len().max(1)) else { break };
        let text = String::from_utf8_lossy(line);
        lines.push(
            text.replacen("\"event\":{", &format!("\"event\":{{\"features\":{f},"), 1).into(),
        );
    }
    lines
}

/// The `event` objects of some fixture lines, as their own JSON text.
pub fn some_events() -> Vec<Vec<u8>> {
    some_trace_lines()
        .iter()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_slice(l).ok()?;
            Some(serde_json::to_vec(v.get("event")?).expect("JSON serialises"))
        })
        .collect()
}

/// Every example configuration and fixture configuration.
pub fn configs() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for dir in ["config", "fixtures/traces"] {
        let mut paths: Vec<_> = std::fs::read_dir(repo().join(dir))
            .expect("read a configuration directory")
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        paths.sort();
        out.extend(paths.iter().map(|p| std::fs::read(p).expect("read a configuration")));
    }
    out
}

/// The configuration decider snapshots are restored under: every default.
pub fn decider_config() -> Config {
    Config::for_replay_defaults("gw-fuzz")
}

/// Decider snapshots taken while replaying fixture traces (after a few lines and at the end).
pub fn decider_snapshots() -> Vec<Vec<u8>> {
    let config = decider_config();
    let mut out = vec![Decider::new(&config).snapshot()];
    for name in ["three_in_two_minutes", "samples_clock_jump", "late_merges", "idle_sensor"] {
        let mut d = Decider::new(&config);
        let mut alerts = Vec::new();
        for (i, line) in trace_lines(&[name], usize::MAX).iter().enumerate() {
            let _ = d.line(&parse_line(line), &mut alerts);
            if i == 3 {
                out.push(d.snapshot());
            }
        }
        out.push(d.snapshot());
    }
    out
}

/// Samples frames of the raw samples in fixture lines, whole and split.
pub fn sample_frames() -> Vec<Vec<u8>> {
    use linegate::records::samples_codec::SamplesFrame;
    use linegate::trace::Arrival;
    let mut out = Vec::new();
    for line in trace_lines(&["samples_clock_jump"], usize::MAX).iter().take(2) {
        let Ok(tl) = parse_line(line) else { continue };
        let Arrival::Samples(s) = tl.arrival else { continue };
        let values: Vec<f32> = s.data.iter().map(|&v| v as f32).collect();
        let frame = |first: usize, n: usize| SamplesFrame {
            t0_ms: s.t0_ms,
            rate_hz: s.rate_hz,
            first_index: first as u32,
            unit: s.unit,
            axis: s.axis.clone().unwrap_or_default(),
            values: values[first..(first + n).min(values.len())].to_vec(),
        };
        out.extend([frame(0, 8).encode(), frame(4, 3).encode()]);
    }
    out
}

/// A gap of events 5 to 9 of sensor s1 of press-7, shed by the retention budget.
fn gap() -> linegate::records::outbox::GapNotice {
    use linegate::records::outbox::{GapNotice, GapRange};
    let (machine, sensor, reason) = ("press-7".into(), "s1".into(), "shed".into());
    let range = GapRange::Events { from_seq: 5, to_seq: 9 };
    GapNotice { machine, sensor, range, reason, declared_at_ms: 1_700_000_000_000 }
}

/// One outbox record of each kind.
pub fn outbox_records() -> Vec<Vec<u8>> {
    use linegate::records::outbox::{GapRange, OutboxRecord};
    let event = some_events().into_iter().next().expect("a fixture event");
    let mut samples_gap = gap();
    samples_gap.range = GapRange::Samples { from_ms: 1000, to_ms: 2000 };
    [
        OutboxRecord::Alert {
            machine: "press-7".into(),
            alert_id: "press-7-1700000000000".into(),
            revision: 2,
            json: br#"{"alert_id":"press-7-1700000000000"}"#.to_vec(),
        },
        OutboxRecord::Event {
            machine: "press-7".into(),
            sensor: "s1".into(),
            seq: 3,
            event_id: "gw-01.s1.3".into(),
            json: event,
        },
        fixture_samples(42),
        OutboxRecord::Gap(gap()),
        OutboxRecord::Gap(samples_gap),
    ]
    .iter()
    .map(OutboxRecord::encode)
    .collect()
}

/// The outbox record of the first samples line of a fixture, as journal record `journal_pos`.
fn fixture_samples(journal_pos: u64) -> linegate::records::outbox::OutboxRecord {
    use linegate::trace::Arrival;
    let line = &trace_lines(&["samples_clock_jump"], usize::MAX)[0];
    let Ok(Arrival::Samples(s)) = parse_line(line).map(|l| l.arrival) else {
        panic!("the fixture's first line is not samples")
    };
    let n = s.data.len() as u32;
    let (machine, sensor, t0_ms, rate_hz) = (s.machine, s.sensor, s.t0_ms, s.rate_hz);
    linegate::records::outbox::OutboxRecord::Samples {
        machine,
        sensor,
        journal_pos,
        t0_ms,
        rate_hz,
        n,
        frame: None,
    }
}

/// Ledger records of several kinds, a pruned summary and a sensor book folded from them.
pub fn ledger_records() -> Vec<Vec<u8>> {
    use linegate::records::ledger::{Acceptance, LedgerEntry, LedgerRecord, Operator, Salvage};
    use linegate::records::pruned::PrunedSummary;
    use linegate::records::sensors::SensorBook;
    let unreadable = [("journal".to_string(), 1)].into();
    let salvage =
        Salvage { unreadable, lost_journal: vec![(17, 18)], gaps: 1, ..Salvage::default() };
    let entries = [
        LedgerEntry::Accepted {
            event_id: "gw-01.s1.1".into(),
            machine: "press-7".into(),
            sensor: "s1".into(),
            seq: 1,
            ts_ms: 1_700_000_000_000,
            how: Acceptance::LateApplied,
            journal_pos: 3,
            outbox_seq: 4,
            counted: true,
            rules: Vec::new(),
            watermark_ms: None,
        },
        LedgerEntry::Acknowledged { outbox_seqs: vec![4, 5] },
        LedgerEntry::Released {
            quarantine_key: 7,
            journal_pos: 9,
            by: Some(Operator { uid: 1000, gid: 1000, pid: Some(42), via_socket: true }),
        },
        LedgerEntry::Shed { gap: gap(), journal_positions: vec![1, 2], bytes: 99, outbox_seq: 6 },
        LedgerEntry::Recovery {
            what: "store".into(),
            moved_to: Some("store.damaged".into()),
            lost: "nothing".into(),
            salvage: Some(salvage),
        },
    ];
    let records: Vec<LedgerRecord> =
        entries.into_iter().map(|e| LedgerRecord::new(1_700_000_000_500, e)).collect();
    let mut summary = PrunedSummary::new();
    let mut book = SensorBook::default();
    for (i, r) in records.iter().enumerate() {
        summary.absorb(i as u64 + 1, r);
        book.absorb(r.at_ms, &r.entry);
    }
    let mut out: Vec<Vec<u8>> = records.iter().map(LedgerRecord::encode).collect();
    out.extend([summary.encode(), book.encode()]);
    out
}

/// Pages of fixture trace lines (each behind a version byte, as journal records are), plain and
/// packed, and one with the empty entry a removed record leaves.
pub fn store_pages() -> Vec<Vec<u8>> {
    use linegate::store::page;
    let records: Vec<Vec<u8>> =
        some_trace_lines().into_iter().map(|l| [&[1][..], &l].concat()).collect();
    let mut out = Vec::new();
    for n in [2, 8, 40] {
        let plain = page::encode(records.iter().take(n).map(Vec::as_slice));
        out.push(page::pack(plain.clone()));
        out.push(plain);
    }
    out.push(page::pack(page::encode([&records[0][..], b"", &records[1][..]])));
    // Packed with holes (PACKED_HOLES): every third entry empty, as a shed leaves them.
    let holes = records.iter().take(40).enumerate().map(|(i, r)| match i % 3 {
        1 => &b""[..],
        _ => &r[..],
    });
    out.push(page::pack(page::encode(holes)));
    out
}

/// Checkpoint payloads holding fixture decider snapshots, and a quarantine entry.
pub fn checkpoint_payloads() -> Vec<Vec<u8>> {
    use linegate::records::checkpoint::{CheckpointPayload, QuarantineEntry};
    let mut out: Vec<Vec<u8>> = decider_snapshots()
        .into_iter()
        .take(3)
        .map(|decider| {
            CheckpointPayload {
                decider,
                offsets: [(0, 77)].into(),
                rule_version: "v".into(),
                rule_versions: Vec::new(),
            }
            .encode()
        })
        .collect();
    // The quarantine entries of the first rejected lines of the poison fixture.
    let rejected = trace_lines(&["poison"], 4096).into_iter().filter_map(|line| {
        let (at_ms, why) = parse_line(&line).err()?;
        let reason = why.reason.as_str().to_string();
        Some(QuarantineEntry {
            reason,
            detail: why.detail,
            at_ms,
            journal_pos: 9,
            derived: false,
            raw: line,
        })
    });
    out.extend(rejected.take(3).map(|q| q.encode()));
    out
}

/// One request line of each command, without the newline.
pub fn control_requests() -> Vec<Vec<u8>> {
    use linegate::audit::quarantine::Action;
    use linegate::control::protocol::{Command, Request};
    [
        Command::Inspect { json: true },
        Command::Status { json: false },
        Command::Explain { alert_id: "press-7-1".into(), json: true, members: Some(10) },
        Command::Reconcile { json: false, record: false },
        Command::Quarantine { action: Action::Release { id: 3, at: Some(1_700_000_000_000) } },
        Command::Quarantine { action: Action::List },
        Command::Dump { what: "ledger".into() },
    ]
    .into_iter()
    .map(|c| {
        let mut line = Request::new(c).to_line();
        line.pop();
        line
    })
    .collect()
}

/// `pieces` framed as `checkpoint_parts` reads its input: each `[len: u16 BE][bytes]`.
pub fn frame(pieces: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in pieces {
        let len = u16::try_from(p.len()).expect("a piece under 64 KiB");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// The pieces of [`frame`]d bytes; a cut-short last piece is what is left of it.
pub fn unframe(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let Some((len, rest)) = data.split_first_chunk::<2>() {
        let len = usize::from(u16::from_be_bytes(*len)).min(rest.len());
        let (piece, tail) = rest.split_at(len);
        out.push(piece);
        data = tail;
    }
    out
}

/// Checkpoints in parts (`c/` and its further parts, framed): fixture decider snapshots, and one
/// of version 1.
pub fn checkpoint_parts() -> Vec<Vec<u8>> {
    use linegate::store::checkpoint_parts::encode;
    let mut out: Vec<Vec<u8>> =
        decider_snapshots().iter().take(3).map(|s| frame(&encode(42, s))).collect();
    let mut v1 = vec![1];
    v1.extend_from_slice(&9u64.to_be_bytes());
    v1.extend_from_slice(b"snapshot");
    out.push(frame(&[v1]));
    out
}
