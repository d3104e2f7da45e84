//! `linegate demo`: the whole daemon on real CWRU bearing recordings, against a real MQTT broker,
//! with an outage in the middle, in well under a minute and with nothing to set up.
//!
//! 1. A trace is made from `fixtures/traces/cwru.jsonl` and `inner_race.jsonl` beside it
//!    ([`trace`]: two rounds of their opening recordings, 150 s of trace time apart) in a
//!    temporary directory, with two rules: `cwru.toml`'s (`accel_rms`, 3 seconds at 0.5 g in 2
//!    minutes) and `inner_race.toml`'s (`env_bpfi` at 5), and `inner_race.toml`'s asset entry of
//!    the third machine, `motor-c` (the SKF 6205 at 1797 rpm).
//! 2. An MQTT broker (rumqttd, [`broker`]) starts in this process on a free loopback port; the
//!    gateway reaches it through a [`relay`] the demo can cut; an independent [`subscriber`]
//!    (rumqttc, QoS 1) is connected to the broker directly and counts what arrives.
//! 3. `linegate run`'s pipeline (`app::run`, with the MQTT forwarder of `app::forward`)
//!    replays the trace at `speed` times its pace into a store in the temporary directory.
//! 4. Before the second round the relay is cut: the forwarder loses the broker, the second
//!    round's records wait in the outbox; the relay is restored, the backlog drains (events
//!    flagged `"replayed": true`).
//! 5. With `--sparkplug` (`DemoOptions::sparkplug`), the gateway is also a Sparkplug B edge node
//!    (`[sparkplug]` in group `demo`, through the same relay, so the outage holds its values
//!    too), and a Sparkplug [`host`] on the broker reads `spBv1.0/demo/#`: the births (metrics,
//!    aliases, types) and a digest of the DDATA (values, original timestamps, historical flags)
//!    are printed before the reports below.
//! 6. At the end: every alert explained (`linegate explain`; for the `env_bpfi` rule's alerts
//!    also the envelope peaks behind their evidence, [`envelope`]), the reconcile report
//!    (`linegate reconcile`), and what was accepted against what arrived ([`delivery`]).
//!
//! Progress goes to standard error, one line a second and one per phase; the reports to
//! standard output. The result is false when reconcile fails or something accepted did not
//! arrive.

pub mod broker;
pub mod delivery;
pub mod envelope;
pub mod host;
pub mod relay;
pub mod subscriber;
pub mod trace;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::app::{self, ForwardSlot, RunOptions};
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::forward::ForwarderConfig;
use crate::store::SharedStore;

/// Why the demo could not run (as opposed to running and finding a problem).
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("the pipeline failed: {0}")]
    Run(#[from] app::AppError),
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
}

impl DemoError {
    fn io(what: &str) -> impl Fn(std::io::Error) -> DemoError + '_ {
        move |source| DemoError::Io { what: what.to_owned(), source }
    }
}

/// How the demo runs.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// The CWRU trace; by default `fixtures/traces/cwru.jsonl` here or in the source tree.
    pub trace: Option<PathBuf>,
    /// Trace time per wall time.
    pub speed: f64,
    /// Backlog records per second once the broker is back.
    pub replay_rate: u32,
    /// The gateway is also a Sparkplug B edge node, and the host's view is printed.
    pub sparkplug: bool,
}

impl DemoOptions {
    /// About 30 s: the outage lasts 7.5 s.
    pub fn full() -> DemoOptions {
        DemoOptions { trace: None, speed: 12.0, replay_rate: 50, sparkplug: false }
    }

    /// About 15 s (tests): the same trace, faster.
    pub fn quick() -> DemoOptions {
        DemoOptions { trace: None, speed: 30.0, replay_rate: 100, sparkplug: false }
    }
}

/// The rounds of the demo trace.
const PLAN: trace::Plan =
    trace::Plan { rounds: 2, period_ms: 150_000, tick_ms: 5_000, tail_ms: 150_000 };
/// The broker goes away this long (trace time) before the second round, and comes back this long
/// after its start.
const OUTAGE_BEFORE_MS: i64 = 45_000;
const OUTAGE_AFTER_MS: i64 = 45_000;
/// The rule and time settings of the CWRU trace.
const CWRU_TOML: &str = include_str!("../../fixtures/traces/cwru.toml");
/// The inner-race golden's configuration: its machine's asset entry.
const INNER_RACE_TOML: &str = include_str!("../../fixtures/traces/inner_race.toml");
/// The machine of the inner-race golden, with the CWRU rig's bearing.
const BEARING_MACHINE: &str = "[machines.motor-c]";
const TOPIC_PREFIX: &str = "linegate";
/// The Sparkplug group of the demo's edge node.
const SPARKPLUG_GROUP: &str = "demo";

/// Runs the demo; `Ok(false)` when reconcile failed or something accepted did not arrive.
pub fn run(opts: &DemoOptions) -> Result<bool, DemoError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(DemoError::io("the async runtime"))?;
    rt.block_on(run_async(opts))
}

fn find_trace(opts: &DemoOptions) -> Result<PathBuf, DemoError> {
    if let Some(t) = &opts.trace {
        return Ok(t.clone());
    }
    let here = PathBuf::from("fixtures/traces/cwru.jsonl");
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/traces/cwru.jsonl");
    [here, built].into_iter().find(|p| p.is_file()).ok_or_else(|| {
        DemoError::Setup(
            "fixtures/traces/cwru.jsonl not found: run the demo from the repository root, or \
             pass --trace PATH"
                .into(),
        )
    })
}

/// Prints one progress line.
fn say(clock: &SystemClock, start: i64, what: impl std::fmt::Display) {
    let t = (clock.monotonic_ms() - start) as f64 / 1000.0;
    eprintln!("demo {t:5.1}s  {what}");
}

async fn run_async(opts: &DemoOptions) -> Result<bool, DemoError> {
    let clock = SystemClock::new();
    let start = clock.monotonic_ms();
    let cwru_path = find_trace(opts)?;
    let piece_path = cwru_path.with_file_name("inner_race.jsonl");
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(DemoError::io(&format!("reading {}", p.display())))
    };
    let (cwru, piece) = (read(&cwru_path)?, read(&piece_path)?);
    let demo = trace::build(&[("cwru.jsonl", &cwru), ("inner_race.jsonl", &piece)], PLAN)
        .map_err(|e| DemoError::Setup(format!("{}: {e}", cwru_path.display())))?;
    let dir = tempfile::Builder::new()
        .prefix("linegate-demo-")
        .tempdir()
        .map_err(DemoError::io("a temporary directory"))?;
    let trace_path = dir.path().join("demo.jsonl");
    std::fs::write(&trace_path, demo.lines.join("\n") + "\n")
        .map_err(DemoError::io("writing the demo trace"))?;
    say(
        &clock,
        start,
        format_args!(
            "setup: {} lines ({} raw-sample records of {} and {}, {} rounds) in {}",
            demo.lines.len(),
            demo.samples_records,
            cwru_path.display(),
            piece_path.display(),
            PLAN.rounds,
            dir.path().display()
        ),
    );

    let broker_port = broker::free_port()?;
    broker::start(broker_port)?;
    let relay = relay::Relay::start(broker_port).await?;
    let config_path = dir.path().join("demo.toml");
    let config_text = demo_config(dir.path(), &trace_path, relay.port, opts)?;
    std::fs::write(&config_path, config_text).map_err(DemoError::io("writing demo.toml"))?;
    let config = Config::load(&config_path)?;
    let root = format!("{TOPIC_PREFIX}/{}", config.gateway.id);
    let arrivals = subscriber::start(broker_port, &root).await?;
    let host =
        if opts.sparkplug { Some(host::start(broker_port, SPARKPLUG_GROUP).await?) } else { None };
    say(
        &clock,
        start,
        format_args!(
            "setup: MQTT broker (rumqttd) on 127.0.0.1:{broker_port}, the gateway's path to it \
             on 127.0.0.1:{}, subscriber on {root}/#",
            relay.port
        ),
    );

    let mut fwd = ForwarderConfig::from_config(&config, None)
        .map_err(|e| DemoError::Setup(format!("forwarder settings: {e}")))?;
    fwd.backoff_min = Duration::from_millis(200);
    fwd.backoff_max = Duration::from_secs(1);
    let spb = crate::sparkplug::ShellConfig::from_config(&config, &fwd);
    let mut slot = app::forward::mqtt(fwd, Duration::from_secs(20));
    if let Some(spb) = spb {
        slot = app::forward::with_sparkplug(slot, spb);
        say(
            &clock,
            start,
            format_args!(
                "setup: Sparkplug B edge node {} in group {SPARKPLUG_GROUP}, through the same \
                 path; a Sparkplug host on {}/{SPARKPLUG_GROUP}/#",
                config.gateway.id,
                crate::sparkplug::NAMESPACE
            ),
        );
    }
    let (slot, store_cell) = observed(slot);
    let opts_run = RunOptions { exit_at_end: true, forward: Some(slot), ..Default::default() };
    let pipeline = tokio::spawn(app::run(config.clone(), opts_run, std::future::pending()));
    let run_start = clock.monotonic_ms();
    let wall = |trace_ms: i64| run_start + (trace_ms as f64 / opts.speed) as i64;
    let second_round = demo.round_starts.get(1).copied().unwrap_or(demo.first_at) - demo.first_at;
    let (cut_at, back_at) =
        (wall(second_round - OUTAGE_BEFORE_MS), wall(second_round + OUTAGE_AFTER_MS));
    say(
        &clock,
        start,
        format_args!(
            "run: the pipeline replays the trace at {}x ({:.0} s); the broker goes away at {:.1}s \
             for {:.1} s",
            opts.speed,
            (demo.last_at - demo.first_at) as f64 / opts.speed / 1000.0,
            (cut_at - start) as f64 / 1000.0,
            (back_at - cut_at) as f64 / 1000.0
        ),
    );

    let mut phase = Phase::Live;
    let mut peak_outbox = 0u64;
    let mut next_tick = clock.monotonic_ms() + 1000;
    tokio::pin!(pipeline);
    let ran = loop {
        tokio::select! {
            r = &mut pipeline => break r,
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
        let now = clock.monotonic_ms();
        if phase == Phase::Live && now >= cut_at {
            relay.set_up(false);
            phase = Phase::Down;
            say(
                &clock,
                start,
                "BROKER GONE: every connection to it is cut; records queue in the outbox",
            );
        } else if phase == Phase::Down && now >= back_at {
            relay.set_up(true);
            phase = Phase::Back;
            say(&clock, start, "BROKER BACK: the forwarder reconnects and sends the backlog");
        }
        if now >= next_tick {
            next_tick += 1000;
            let store = store_cell.lock().ok().and_then(|s| s.clone());
            let depth = match store {
                Some(s) => tokio::task::spawn_blocking(move || depth(&s)).await.ok().flatten(),
                None => None,
            };
            if let Some(d) = &depth {
                peak_outbox = peak_outbox.max(d.outbox_records);
            }
            say(&clock, start, progress(phase, depth, &arrivals, host.as_ref()));
        }
    };
    ran.map_err(app::AppError::from)??;
    say(&clock, start, "run: every trace line decided, the outbox drained; the pipeline stopped");
    let store = store_cell
        .lock()
        .ok()
        .and_then(|s| s.clone())
        .ok_or_else(|| DemoError::Setup("the forwarder never started".into()))?;
    // The broker has acknowledged everything; the subscriber may still be receiving the last.
    let ledger = {
        let mut s = store.write();
        crate::audit::view::View::Own(&mut s).ledger()?.records
    };
    let settle = clock.monotonic_ms() + 5_000;
    let mut delivered = delivery::compare(&ledger, &snapshot(&arrivals));
    while !delivered.ok() && clock.monotonic_ms() < settle {
        tokio::time::sleep(Duration::from_millis(50)).await;
        delivered = delivery::compare(&ledger, &snapshot(&arrivals));
    }
    let mut ok = true;
    if let Some(host) = &host {
        ok &= host_report(host, &clock).await?;
    }
    ok &= report(&store, &config, &demo.lines, &delivered, peak_outbox, &snapshot(&arrivals))?;
    say(&clock, start, if ok { "PASS" } else { "FAIL" });
    Ok(ok)
}

/// Where the demo is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Live,
    Down,
    Back,
}

/// The outbox and journal now.
#[derive(Debug, Clone, Copy)]
struct Depth {
    journaled: u64,
    outbox_records: u64,
    outbox_bytes: u64,
}

fn depth(store: &SharedStore) -> Option<Depth> {
    let s = store.read();
    let (outbox_records, outbox_bytes) = s.outbox_depth().ok()?;
    Some(Depth { journaled: s.next_journal_pos().saturating_sub(1), outbox_records, outbox_bytes })
}

fn snapshot(arrivals: &Arc<Mutex<subscriber::Arrivals>>) -> subscriber::Arrivals {
    arrivals.lock().map(|a| a.clone()).unwrap_or_default()
}

fn progress(
    phase: Phase,
    depth: Option<Depth>,
    arrivals: &Arc<Mutex<subscriber::Arrivals>>,
    host: Option<&Arc<Mutex<host::HostView>>>,
) -> String {
    let a = snapshot(arrivals);
    let broker = match phase {
        Phase::Live | Phase::Back => "broker up  ",
        Phase::Down => "broker DOWN",
    };
    let store = depth.map_or("store opening".to_owned(), |d| {
        format!(
            "journal {:4} lines, outbox {:4} records {:7.1} KiB",
            d.journaled,
            d.outbox_records,
            d.outbox_bytes as f64 / 1024.0
        )
    });
    let sparkplug = host.and_then(|h| h.lock().ok()).map_or(String::new(), |h| {
        format!(" | Sparkplug {} values ({} historical)", h.values(), h.historical())
    });
    format!(
        "{broker} | {store} | received {} events ({} replayed), {} alert records, {} sample \
         frames{sparkplug}",
        a.events.len(),
        a.replayed.len(),
        a.alerts.len(),
        a.samples.len()
    )
}

/// The Sparkplug host's view, printed once the edge node's clean NDEATH arrived (or 5 s passed:
/// a host then reports what it has); true when the host read everything and history came first.
async fn host_report(
    host: &Arc<Mutex<host::HostView>>,
    clock: &SystemClock,
) -> Result<bool, DemoError> {
    use std::io::Write;
    let view = || host.lock().map(|h| h.clone()).unwrap_or_default();
    // Every NBIRTH has its NDEATH once the node stopped cleanly (the outage's by the will).
    let dead = |h: &host::HostView| {
        let n = |k: &str| h.counts.get(k).copied().unwrap_or(0);
        n("NBIRTH") > 0 && n("NDEATH") >= n("NBIRTH")
    };
    let settle = clock.monotonic_ms() + 5_000;
    while !dead(&view()) && clock.monotonic_ms() < settle {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let h = view();
    let mut out = std::io::stdout().lock();
    for line in h.lines(SPARKPLUG_GROUP) {
        writeln!(out, "{line}").map_err(DemoError::io("writing the report"))?;
    }
    Ok(h.ok() && h.values() > 0)
}

/// The forwarder slot `inner`, handing the pipeline's store to the returned cell when it starts
/// (the demo watches the outbox through it, and audits the store after the run).
fn observed(inner: ForwardSlot) -> (ForwardSlot, Arc<Mutex<Option<SharedStore>>>) {
    let cell = Arc::new(Mutex::new(None));
    let seen = cell.clone();
    let slot: ForwardSlot = Box::new(move |ctx| {
        if let Ok(mut c) = seen.lock() {
            *c = Some(ctx.store.clone());
        }
        inner(ctx)
    });
    (slot, cell)
}

/// The configuration: two rules, cwru.toml's (accel_rms) and inner_race.toml's (env_bpfi), as
/// `[[rule]]` tables; cwru.toml's time; inner_race.toml's asset entry of `motor-c`; the store and
/// trace in `dir`, the broker through the relay.
fn demo_config(
    dir: &Path,
    trace: &Path,
    relay_port: u16,
    opts: &DemoOptions,
) -> Result<String, DemoError> {
    let sparkplug = if opts.sparkplug {
        format!("[sparkplug]\nenabled = true\ngroup_id = \"{SPARKPLUG_GROUP}\"\n\n")
    } else {
        String::new()
    };
    let part = |text: &'static str, file: &str, header: &str| {
        table(text, header).ok_or_else(|| {
            DemoError::Setup(format!("fixtures/traces/{file} has no {header} table"))
        })
    };
    let machine = part(INNER_RACE_TOML, "inner_race.toml", BEARING_MACHINE)?;
    let bearing_rule = part(INNER_RACE_TOML, "inner_race.toml", "[rule]")?;
    part(CWRU_TOML, "cwru.toml", "[rule]")?;
    let cwru = CWRU_TOML.replacen("\n[rule]\n", "\n[[rule]]\n", 1);
    let bearing_rule = bearing_rule.replacen("[rule]", "[[rule]]", 1);
    Ok(format!(
        "{cwru}\n{bearing_rule}\n\n{machine}\n\n\
         [store]\npath = {store:?}\ncommit_interval = \"20ms\"\n\n\
         [mqtt]\nhost = \"127.0.0.1\"\nport = {relay_port}\nprefix = \"{TOPIC_PREFIX}\"\n\
         keep_alive = \"5s\"\nreplay_rate = {rate}\n\n{sparkplug}\
         [[source]]\nkind = \"trace\"\npath = {trace:?}\nspeed = {speed:?}\n",
        store = dir.join("store").display().to_string(),
        trace = trace.display().to_string(),
        rate = opts.replay_rate,
        speed = opts.speed,
    ))
}

/// The latest revision of every alert in the store.
fn latest_revisions(
    store: &crate::store::Store,
) -> Result<Vec<crate::rule::alert::AlertRecord>, DemoError> {
    let mut latest: Vec<crate::rule::alert::AlertRecord> = Vec::new();
    for json in crate::audit::archived_alerts(store)? {
        let Ok(a) = serde_json::from_slice::<crate::rule::alert::AlertRecord>(&json) else {
            continue;
        };
        match latest.iter_mut().find(|l| l.alert_id == a.alert_id) {
            Some(l) if a.revision > l.revision => *l = a,
            Some(_) => {}
            None => latest.push(a),
        }
    }
    Ok(latest)
}

/// For an alert of a rule over an envelope indicator: the envelope peaks behind its evidence
/// ([`envelope`]); nothing for other alerts.
fn envelope_peaks(
    config: &Config,
    trace_lines: &[String],
    alert: &crate::rule::alert::AlertRecord,
) -> Vec<String> {
    let metric = config.rule_named(&alert.rule).map(|r| r.metric.as_str());
    let (Some(defect), Some(asset)) =
        (metric.and_then(envelope::defect_of), config.machines.get(&alert.machine))
    else {
        return Vec::new();
    };
    let mut out = vec![format!(
        "  envelope peaks behind the evidence ({}, computed again from each frame's raw samples):",
        defect.part()
    )];
    out.extend(envelope::evidence_lines(trace_lines, asset, defect, &alert.evidence));
    out
}

/// The table of `text` that starts with the line `header`, up to the next table.
fn table(text: &str, header: &str) -> Option<String> {
    let start = match text.strip_prefix(header) {
        Some(_) => 0,
        None => text.find(&format!("\n{header}\n"))? + 1,
    };
    let rest = &text[start..];
    let end = rest[header.len()..].find("\n[").map_or(rest.len(), |i| header.len() + i + 1);
    // Comments and blank lines at its end belong to the next table.
    let lines: Vec<&str> = rest[..end].lines().collect();
    let keep = lines.iter().rposition(|l| !l.trim().is_empty() && !l.starts_with('#'))?;
    Some(lines[..=keep].join("\n"))
}

/// Prints the alerts explained, the reconcile report and the delivery counts; true when all is
/// well.
fn report(
    store: &SharedStore,
    config: &Config,
    trace_lines: &[String],
    d: &delivery::Delivery,
    peak_outbox: u64,
    arrived: &subscriber::Arrivals,
) -> Result<bool, DemoError> {
    use std::io::Write;
    let mut s = store.write();
    let mut ids: Vec<String> = Vec::new();
    for json in crate::audit::archived_alerts(&s)? {
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap_or_default();
        if let Some(id) = v["alert_id"].as_str().filter(|id| !ids.iter().any(|i| i == id)) {
            ids.push(id.to_owned());
        }
    }
    let mut out = std::io::stdout().lock();
    let io = DemoError::io("writing the report");
    writeln!(out, "== {} alert(s), explained (linegate explain)", ids.len()).map_err(&io)?;
    drop(out);
    let latest = latest_revisions(&s)?;
    let mut view = crate::audit::view::View::Own(&mut s);
    for id in &ids {
        crate::audit::explain::explain(
            &mut view,
            config,
            id,
            false,
            None,
            &mut std::io::stdout().lock(),
        )?;
        if let Some(alert) = latest.iter().find(|a| &a.alert_id == id) {
            let mut out = std::io::stdout().lock();
            for line in envelope_peaks(config, trace_lines, alert) {
                writeln!(out, "{line}").map_err(&io)?;
            }
        }
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "== reconcile (linegate reconcile)").map_err(&io)?;
    drop(out);
    let reconciled = crate::audit::reconcile::reconcile(
        &mut view,
        config,
        false,
        &mut std::io::stdout().lock(),
    )? != crate::audit::reconcile::EXIT_GATEWAY_LOST;
    let mut out = std::io::stdout().lock();
    writeln!(out, "== delivered to the subscriber vs accepted").map_err(&io)?;
    writeln!(
        out,
        "events: {} accepted, {} delivered ({} of them replayed from the outbox after the outage)",
        d.accepted_events, d.delivered_events, d.replayed_events
    )
    .map_err(&io)?;
    writeln!(out, "alert records: {} decided, {} delivered", d.alert_records, d.delivered_alerts)
        .map_err(&io)?;
    writeln!(
        out,
        "raw-sample frames delivered: {}; MQTT messages received: {}; largest outbox seen: {} records",
        d.sample_frames, arrived.publishes, peak_outbox
    )
    .map_err(&io)?;
    for m in &d.missing {
        writeln!(out, "  NOT DELIVERED {m}").map_err(&io)?;
    }
    for u in &arrived.undecodable {
        writeln!(out, "  UNDECODABLE {u}").map_err(&io)?;
    }
    let ok = reconciled && d.ok() && arrived.undecodable.is_empty();
    writeln!(out, "demo: {}", if ok { "ok: everything accepted was delivered" } else { "FAILED" })
        .map_err(&io)?;
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_cut_up_to_the_next() {
        let text = "[a]\nx = 1\n\n[machines.m]\nrpm = 1\n# next\n\n[time]\ny = 2\n";
        let cut = |header| table(text, header);
        assert_eq!(cut("[machines.m]").as_deref(), Some("[machines.m]\nrpm = 1"));
        assert_eq!(cut("[a]").as_deref(), Some("[a]\nx = 1"));
        assert_eq!(cut("[time]").as_deref(), Some("[time]\ny = 2"));
        assert_eq!(cut("[machines]"), None);
    }

    #[test]
    fn the_demo_configuration_loads_with_the_bearing_machine() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("demo.toml");
        let text =
            demo_config(dir.path(), &dir.path().join("t.jsonl"), 1883, &DemoOptions::quick());
        std::fs::write(&path, text.unwrap()).unwrap();
        let config = Config::load(&path).unwrap();
        let rules: Vec<(&str, &str)> =
            config.rules().map(|r| (r.name.as_str(), r.metric.as_str())).collect();
        assert_eq!(rules, [("high-vibration", "accel_rms"), ("inner-race", "env_bpfi")]);
        assert_eq!(config.rule_threshold_for(&config.rule, "motor-b"), Some(0.511));
        let asset = &config.machines["motor-c"];
        assert_eq!(asset.rpm, Some(1797.0));
        assert!(asset.envelope_missing().is_empty(), "{asset:?}");
        assert_eq!(config.sparkplug, None);
        let opts = DemoOptions { sparkplug: true, ..DemoOptions::quick() };
        let text = demo_config(dir.path(), &dir.path().join("t.jsonl"), 1883, &opts);
        std::fs::write(&path, text.unwrap()).unwrap();
        let config = Config::load(&path).unwrap();
        assert_eq!(config.sparkplug.map(|s| s.group_id).as_deref(), Some(SPARKPLUG_GROUP));
    }
}
