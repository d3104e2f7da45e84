//! Crash tests of `linegate run` (issue 3): the real binary on a trace source, killed with
//! SIGKILL at every named failpoint (`LINEGATE_KILL_AT=point:nth`, the `failpoints` feature) and
//! at random moments, restarted until a run ends by itself, then checked: `linegate reconcile`
//! passes, and against `linegate replay` of the same trace the accepted event ids are equal
//! (none lost, none ledgered twice), the alert records are equal as a set of
//! `(alert_id, revision, content)` (archive and ledger alike), and `export` of the history is
//! the trace, line for line.
//!
//! `LINEGATE_CRASH_KILLS=N` (default 50) sets how many kills at least; `LINEGATE_CRASH_SEED`
//! the seed of the random choices (printed).
#![cfg(feature = "failpoints")]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

use linegate::config::Config;
use linegate::decider::{Decider, Outcome};
use linegate::trace::parse::parse_line;
use support::daemon::Daemon;
use support::{cli, ledger, reconciled, replay, DEADLINE};

/// Every boundary the issue names, as failpoints.
const POINTS: &[&str] = &[
    "store::journal::after_append",  // after journal append, before fsync
    "store::commit::before_fsync",   // ditto, inside the commit
    "store::segments::after_write",  // raw lines in their segment, references not yet in sled
    "store::segments::before_fsync", // a commit: before the segment's fdatasync
    "app::ingest::after_commit",     // after fsync, before the source position advances
    "store::checkpoint::before_apply", // before the state batch
    "store::checkpoint::after_apply", // after the state batch, before the forwarder is woken
    "app::decide::before_commit",    // the forwarder woken, the state batch not yet committed
    "app::decide::after_checkpoint", // after the checkpoint's commit, before truncation
    "store::outbox::before_ack",     // after publish, before the acknowledgement's removal
    "app::start::after_restart",     // during recovery: after the Restart record
    "app::resume::before_catch_up",  // during recovery: before replaying the journal
];

/// The points a process passes once, at start-up.
const ONCE_PER_START: &[&str] = &["app::start::after_restart", "app::resume::before_catch_up"];

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn event(machine: &str, sensor: &str, seq: u64, ts: i64, value: f64) -> String {
    format!(
        r#"{{"event_id":"{machine}.{sensor}.{seq}","machine":"{machine}","sensor":"{sensor}","seq":{seq},"ts_ms":{ts},"clock":{{"state":"synced","err_ms":2}},"metric":"accel_rms","unit":"g","schema":1,"quality":"good","value":{value}}}"#
    )
}

/// About 3000 lines over 20 minutes of event time: events of 4 sensors on 2 machines with
/// bursts above threshold, late (within allowed lateness) and too-late arrivals, duplicates,
/// poison lines, raw samples of a third machine, ticks, and a final late tick.
fn make_trace() -> String {
    const T0: i64 = 1_700_000_000_000;
    let mut rng = Rng(0x5eed_1234_abcd);
    let mut lines: Vec<(i64, u64, String)> = Vec::new();
    let mut order = 0u64;
    let mut push = |at: i64, text: String, lines: &mut Vec<(i64, u64, String)>| {
        order += 1;
        lines.push((at, order, text));
    };
    for s in 0..1200i64 {
        let ts = T0 + s * 1000;
        for (mi, machine) in ["press-1", "press-2"].iter().enumerate() {
            for sensor in ["s1", "s2"] {
                let sensor = format!("{sensor}{mi}");
                let burst = (s / 60 + mi as i64) % 4 == 0 && s % 20 < 3;
                let value = if burst { 0.7 + (s % 3) as f64 * 0.05 } else { 0.2 };
                let seq = s as u64 + 1;
                let ev = event(machine, &sensor, seq, ts, value);
                let delay = match rng.below(100) {
                    0 => 30_000,                 // late, within allowed lateness
                    1 if s > 700 => 11 * 60_000, // too late
                    _ => 200,
                };
                let at = ts + delay;
                push(at, format!(r#"{{"at":{at},"kind":"event","event":{ev}}}"#), &mut lines);
                if rng.below(200) == 0 {
                    let at = at + 5_000;
                    push(at, format!(r#"{{"at":{at},"kind":"event","event":{ev}}}"#), &mut lines);
                }
            }
        }
        if s % 4 == 0 {
            // 180 samples (3.6 s at 50 Hz): a line of about 1.5 KB, over the store's raw threshold
            // (1 KiB), so raw frames go to segment files and those are crashed too.
            let data: Vec<String> = (0..180)
                .map(|i| {
                    let amp = if (s / 30) % 5 == 0 { 0.9 } else { 0.1 };
                    format!("{:.4}", amp * ((i as f64) * 0.7).sin())
                })
                .collect();
            let at = ts + 300;
            push(
                at,
                format!(
                    r#"{{"at":{at},"kind":"samples","machine":"mill-3","sensor":"v3","t0_ms":{ts},"rate_hz":50,"unit":"g","data":[{}]}}"#,
                    data.join(",")
                ),
                &mut lines,
            );
        }
        if s % 97 == 0 {
            push(
                ts + 400,
                format!(r#"{{"at":{},"kind":"event","event":{{"oops":1}}}}"#, ts + 400),
                &mut lines,
            );
            push(ts + 401, "not json at all".into(), &mut lines);
        }
        if s % 50 == 0 {
            push(ts + 500, format!(r#"{{"at":{},"kind":"tick"}}"#, ts + 500), &mut lines);
        }
    }
    let end = T0 + 1300 * 1000 + 3_600_000;
    push(end, format!(r#"{{"at":{end},"kind":"tick"}}"#), &mut lines);
    lines.sort_by_key(|(at, order, _)| (*at, *order));
    let mut out = String::new();
    for (_, _, l) in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

fn config_text(dir: &Path, trace: &Path) -> String {
    format!(
        r#"[gateway]
id = "gw-crash"

[rule]
name = "high-vibration"
metric = "accel_rms"
unit = "g"
threshold = 0.5
window = "2m"
count = 3

[time]
watermark_bound = "5s"
allowed_lateness = "10m"
idle_timeout = "30s"
max_future = "5s"

[store]
path = "{}"
commit_records = 200
commit_interval = "20ms"

[[source]]
kind = "trace"
path = "{}"
speed = 0.0
"#,
        dir.join("db").display(),
        trace.display()
    )
}

/// How one run ended.
#[derive(Debug, PartialEq)]
enum End {
    Killed,
    Exited,
}

fn run(config: &Path, forward: bool, kill_at: Option<String>, kill_after_ms: Option<u64>) -> End {
    let mut args = vec!["--exit-at-end"];
    args.extend(if forward { &["--forward", "local-ack"][..] } else { &["--no-forward"] });
    let mut env = vec![("LINEGATE_LOG", "warn")];
    if let Some(k) = &kill_at {
        env.push(("LINEGATE_KILL_AT", k));
    }
    let mut d = Daemon::start(config, &args, &env);
    if let Some(ms) = kill_after_ms {
        // The kill's moment is the point of the test, not a synchronisation.
        std::thread::sleep(Duration::from_millis(ms));
        d.kill();
    }
    // Far more than a run takes: only a hang reaches it.
    let (status, _) = d.wait(DEADLINE * 5);
    match status.signal() {
        Some(9) => End::Killed,
        _ => {
            assert!(status.success(), "linegate run failed: {status:?}\n{}", d.log());
            End::Exited
        }
    }
}

/// What replay decides for the trace: accepted ids, alert lines, rejected count.
fn reference(trace: &Path, config: &Path, dir: &Path) -> (BTreeSet<String>, BTreeSet<String>, u64) {
    let alerts = replay(trace, config, dir).alert_lines().into_iter().collect();
    let cfg = Config::load(config).unwrap();
    let mut d = Decider::new(&cfg).reporting();
    let mut accepted = BTreeSet::new();
    let mut sink = Vec::new();
    for line in std::fs::read(trace).unwrap().split(|&b| b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let _ = d.line(&parse_line(line), &mut sink);
        for o in d.take_outcomes() {
            if let Outcome::Accepted { event, .. } = o {
                assert!(accepted.insert(event.event_id), "replay accepted an id twice");
            }
        }
    }
    let rejected = d.counts().quarantined.values().sum();
    (accepted, alerts, rejected)
}

/// Checks the store of a finished round against replay, and its history against the trace:
/// `export` writes every line of the trace once, in order, however often the daemon was killed
/// (so `replay` of the export decides what replay of the trace does: the archive, checked below).
fn check(
    config: &Path,
    trace: &Path,
    want: &(BTreeSet<String>, BTreeSet<String>, u64),
    round: usize,
) {
    eprintln!("round {round}: checking the store");
    reconciled(&["reconcile"], config);
    let exported = cli(&["export"], config);
    assert!(
        exported == std::fs::read_to_string(trace).unwrap(),
        "round {round}: the export of the history is not the trace ({} lines)",
        exported.lines().count()
    );
    let mut accepted = BTreeMap::<String, u32>::new();
    let mut alert_keys = BTreeSet::new();
    let mut quarantined = 0;
    for e in &ledger(config) {
        match e["kind"].as_str().unwrap() {
            "accepted" => *accepted.entry(e["event_id"].as_str().unwrap().into()).or_default() += 1,
            "alert" => {
                alert_keys.insert((
                    e["alert_id"].as_str().unwrap().to_string(),
                    e["revision"].as_u64().unwrap(),
                ));
            }
            "quarantined" => quarantined += 1,
            _ => {}
        }
    }
    let twice: Vec<_> = accepted.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "round {round}: events ledgered twice: {twice:?}");
    let got: BTreeSet<String> = accepted.into_keys().collect();
    let lost: Vec<_> = want.0.difference(&got).collect();
    let extra: Vec<_> = got.difference(&want.0).collect();
    assert!(lost.is_empty() && extra.is_empty(), "round {round}: lost {lost:?}, extra {extra:?}");
    let alerts: BTreeSet<String> =
        cli(&["dump", "alerts"], config).lines().map(String::from).collect();
    assert_eq!(alerts, want.1, "round {round}: archived alert records differ from replay");
    let want_keys: BTreeSet<(String, u64)> = want
        .1
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["alert_id"].as_str().unwrap().to_string(), v["revision"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(alert_keys, want_keys, "round {round}: ledgered alert records differ from replay");
    assert_eq!(quarantined, want.2, "round {round}: quarantined records differ from replay");
}

#[test]
fn sigkill_at_every_failpoint_and_at_random_loses_and_doubles_nothing() {
    let kills_wanted: usize =
        std::env::var("LINEGATE_CRASH_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let seed: u64 = std::env::var("LINEGATE_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::from(std::process::id()) * 2_654_435_761 + 1);
    eprintln!("crash test: seed {seed} (LINEGATE_CRASH_SEED), at least {kills_wanted} kills");
    let mut rng = Rng(seed | 1);
    // tmpfs when there is one: a SIGKILL leaves the page cache intact, so what this test proves
    // (process-crash consistency) does not depend on the disk, and fsyncs there cost nothing.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let trace = dir.path().join("trace.jsonl");
    std::fs::write(&trace, make_trace()).unwrap();
    let config = dir.path().join("replay.toml");
    std::fs::write(&config, config_text(&dir.path().join("unused"), &trace)).unwrap();
    let want = reference(&trace, &config, dir.path());
    assert!(want.0.len() > 4000 && want.1.len() > 10 && want.2 > 10, "the trace exercises little");
    let (mut kills, mut round, mut point_i) = (0usize, 0usize, 0usize);
    let mut killed_at = BTreeSet::new();
    while kills < kills_wanted || killed_at.len() < POINTS.len() {
        round += 1;
        let rdir = dir.path().join(format!("round{round}"));
        std::fs::create_dir_all(&rdir).unwrap();
        let config = rdir.join("config.toml");
        std::fs::write(&config, config_text(&rdir, &trace)).unwrap();
        let forward = round % 2 == 1;
        for cycle in 0.. {
            let killing = cycle < 25;
            let (kill_at, after) = if !killing {
                (None, None)
            } else if cycle % 3 == 2 {
                (None, Some(20 + rng.below(400)))
            } else {
                let p = POINTS[point_i % POINTS.len()];
                point_i += 1;
                // A start-up point passes once per process: only its first pass can kill.
                let nth = if ONCE_PER_START.contains(&p) { 1 } else { 1 + rng.below(5) };
                (Some((p, nth)), None)
            };
            let spec = kill_at.map(|(p, n)| format!("{p}:{n}"));
            match run(&config, forward, spec, after) {
                End::Killed => {
                    kills += 1;
                    if let Some((p, _)) = kill_at {
                        killed_at.insert(p);
                    }
                }
                End::Exited => break,
            }
        }
        check(&config, &trace, &want, round);
        if !forward {
            // Nothing was acknowledged: the raw frames are still queued, in segment files.
            let raw = rdir.join("db").join(linegate::store::RAW_DIR);
            let segments = std::fs::read_dir(&raw).unwrap().count();
            assert!(segments > 0, "round {round}: no segment file in {}", raw.display());
        }
        // About 6 kills per round: the limit grows with LINEGATE_CRASH_KILLS.
        assert!(
            round < 30 + kills_wanted / 4,
            "too many rounds: kills {kills}, points hit {killed_at:?}"
        );
    }
    eprintln!("crash test: {kills} kills over {round} rounds, every failpoint hit");
}
