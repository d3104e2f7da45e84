//! What the crash tests share (`tests/crash.rs`, SIGKILL; `tests/power_loss.rs`, power cuts):
//! the named failpoints of the store's boundaries, a seeded generator, the trace they feed the
//! real binary, what `linegate replay` decides for it, and the check of a finished store against
//! that.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use linegate::config::Config;
use linegate::decide::{Decider, Outcome};
use linegate::trace::parse::parse_line;
use linegate::trace::{Arrival, TraceLine};

use super::{cli, ledger, reconciled, replay};

/// What replay decides: the accepted event ids, the alert records (JSON lines), how many records
/// were quarantined.
pub type Reference = (BTreeSet<String>, BTreeSet<String>, u64);

/// Every boundary the issue names, as failpoints.
pub const POINTS: &[&str] = &[
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
pub const ONCE_PER_START: &[&str] = &["app::start::after_restart", "app::resume::before_catch_up"];

/// Points a run may pass only a few times: the forwarder acknowledges once per checkpoint it is
/// woken for, and a checkpoint covers up to two batches when the decide stage is ahead of the
/// disk. A kill at a later pass often never came, and the test ran out of rounds (2 in 12 runs,
/// 2026-12-06).
pub const FEW_PER_RUN: &[&str] = &["store::outbox::before_ack"];

/// Points only a run with a forwarder passes: a round without one skips them in the rotation
/// (taken there, the run ended unkilled and so did the round, and the point could come up in
/// such rounds again and again: on 2026-12-07 the crash test ran out of rounds once in
/// `scripts/test`, and its seed took 39 of the 42 rounds alone; 22 with the skip).
pub const WITH_FORWARDER: &[&str] = &["store::outbox::before_ack"];

/// The pass of point `p` at which to kill: the first for a point passed once per start or only
/// a few times per run, else one of the first five.
pub fn kill_pass(p: &str, rng: &mut Rng) -> u64 {
    if ONCE_PER_START.contains(&p) || FEW_PER_RUN.contains(&p) {
        1
    } else {
        1 + rng.below(5)
    }
}

/// How many kills or cuts (the number in variable `count_var`, else `default`) and the seed of
/// the random choices (variable `seed_var`, else one from the process id), printed under `what`
/// so that a failing run can be repeated.
pub fn count_and_seed(count_var: &str, default: usize, seed_var: &str, what: &str) -> (usize, u64) {
    let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let n = number(count_var).map_or(default, |n| n as usize);
    let seed = number(seed_var).unwrap_or(u64::from(std::process::id()) * 2_654_435_761 + 1);
    eprintln!("{what}: seed {seed} ({seed_var}), at least {n} ({count_var})");
    (n, seed)
}

/// A small deterministic generator (xorshift).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

pub fn event(machine: &str, sensor: &str, seq: u64, ts: i64, value: f64) -> String {
    format!(
        r#"{{"event_id":"{machine}.{sensor}.{seq}","machine":"{machine}","sensor":"{sensor}","seq":{seq},"ts_ms":{ts},"clock":{{"state":"synced","err_ms":2}},"metric":"accel_rms","unit":"g","schema":1,"quality":"good","value":{value}}}"#
    )
}

/// About 3000 lines over 20 minutes of event time: events of 4 sensors on 2 machines with
/// bursts above threshold, late (within allowed lateness) and too-late arrivals, duplicates,
/// poison lines, raw samples of a third machine, ticks, and a final late tick.
pub fn make_trace() -> String {
    trace_of(1200, 3_600_000)
}

/// [`make_trace`] over `seconds` of events, its final tick `tail_ms` after them (and 100 s).
pub fn trace_of(seconds: i64, tail_ms: i64) -> String {
    const T0: i64 = 1_700_000_000_000;
    let mut rng = Rng(0x5eed_1234_abcd);
    let mut lines: Vec<(i64, u64, String)> = Vec::new();
    let mut order = 0u64;
    let mut push = |at: i64, text: String, lines: &mut Vec<(i64, u64, String)>| {
        order += 1;
        lines.push((at, order, text));
    };
    for s in 0..seconds {
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
    let end = T0 + (seconds + 100) * 1000 + tail_ms;
    push(end, format!(r#"{{"at":{end},"kind":"tick"}}"#), &mut lines);
    lines.sort_by_key(|(at, order, _)| (*at, *order));
    let mut out = String::new();
    for (_, _, l) in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// The `[gateway]`, `[rule]` and `[time]` sections of the crash tests' configurations.
pub fn config_head(gateway: &str) -> String {
    format!(
        r#"[gateway]
id = "{gateway}"

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
"#
    )
}

/// What replay decides for the trace: accepted ids, alert lines, rejected count.
pub fn reference(trace: &Path, config: &Path, dir: &Path) -> Reference {
    let alerts = replay(trace, config, dir).alert_lines().into_iter().collect();
    let cfg = Config::load(config).unwrap();
    let mut d = Decider::new(&cfg).reporting();
    let mut accepted = BTreeSet::new();
    let mut sink = Vec::new();
    for line in std::fs::read(trace).unwrap().split(|&b| b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let parsed = parse_line(line);
        let _ = d.line(&parsed, &mut sink);
        for o in d.take_outcomes() {
            // An outcome without its event is the line's own event's.
            let line_event = match &parsed {
                Ok(TraceLine { arrival: Arrival::Event(e), .. }) => Some(e.clone()),
                _ => None,
            };
            if let Outcome::Accepted { event, .. } = o {
                let id = event.or(line_event).expect("an accepted event").event_id;
                assert!(accepted.insert(id), "replay accepted an id twice");
            }
        }
    }
    let rejected = d.counts().quarantined.values().sum();
    (accepted, alerts, rejected)
}

/// Checks the store of a finished round against replay.
pub fn check(config: &Path, want: &Reference, round: usize) {
    eprintln!("round {round}: checking the store");
    reconciled(&["reconcile"], config);
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
