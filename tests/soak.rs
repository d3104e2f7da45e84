//! The soak (issue 42, part 5): the real daemon with a live Modbus TCP source (pymodbus) and a
//! trace source (`synth::mixed_trace`: disorder, duplicates, id conflicts, too-late and future
//! events, poison lines, raw blocks), forwarding to a real mosquitto watched by an independent
//! subscriber (`mosquitto_sub` with a persistent session), while faults come one after another
//! at random moments: SIGKILL of the daemon (restarted after a pause), a broker restart, a slow
//! broker (mosquitto stopped with SIGSTOP for seconds), a power cut (the store lives on the
//! power-cut harness, `tests/support/powercut/`: the daemon is SIGKILLed, what no fsync covered
//! is dropped, half the cuts tear the last unsynced write, and the daemon starts on what
//! survived), a sensor that goes silent and returns (the Modbus server killed and started
//! again), and control-socket clients hammering (`status --json` from several threads, and raw
//! connections sending garbage). A daemon that finds damage while running exits asking for a
//! salvage (docs/decisions/0029-damage-found-while-running.md); it is started again, as systemd
//! would, and the salvages are counted.
//!
//! At the end, with every fault undone: every trace line was journaled; every accepted event
//! and alert record of the ledger reached the subscriber or is covered by a gap notice it
//! received; `reconcile` finds nothing lost (exit 0, or 3 when a source's data is missing,
//! which it names); and the archived alert records equal `linegate replay` of `linegate
//! export`. The totals (faults by kind, records, events, alerts, gaps) are printed.
//!
//! `LINEGATE_SOAK_SECONDS` sets the length of the faults phase (default 180: CI's run, about
//! 4 min in all); `LINEGATE_SOAK_SEED` the seed of the trace and of the faults.
//! `benches/soak.sh HOURS` runs it for hours.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use linegate::clock::{Clock, SystemClock};
use linegate::synth::{mixed_trace, Rng};
use serde_json::Value;
use support::daemon::Daemon;
use support::modbus::{server, tcp_keys, Child};
use support::mqtt::{received_events, Broker, Subscriber};
use support::powercut::PowerCut;
use support::promtool::scrape;
use support::{cli, free_port, ledger, linegate, poll, replay, run, DEADLINE};

const ROOT: &str = "lg/gw-soak";
/// Machines in the trace (two event sensors each, a raw sensor on the first).
const MACHINES: usize = 4;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The kinds of fault, in the order the totals are printed.
const FAULTS: [&str; 6] =
    ["sigkill", "power_cut", "broker_restart", "slow_broker", "sensor_silent", "hammer"];

/// Sleeps between `from_ms` and `to_ms` (drawn from `rng`): the length of a fault, or the
/// random moment of the next one, is the point of these sleeps, not a synchronisation.
fn pause(rng: &mut Rng, from_ms: u64, to_ms: u64) {
    std::thread::sleep(Duration::from_millis(from_ms + rng.next_u64() % (to_ms - from_ms)));
}

/// The configuration: the store on the power-cut mount `mnt`, the control socket beside it (a
/// socket cannot live on the harness), a trace source, a Modbus TCP source, MQTT to `broker`,
/// metrics on `port`.
fn write_config(
    dir: &Path,
    mnt: &Path,
    trace: &Path,
    modbus: u16,
    broker: u16,
    port: u16,
) -> std::path::PathBuf {
    let path = dir.join("gateway.toml");
    let text = format!(
        "[gateway]\nid = \"gw-soak\"\n\n[rule]\nthreshold = 0.9\nwindow = \"2m\"\ncount = 3\n\n\
         [store]\npath = \"{store}\"\ncommit_interval = \"50ms\"\n\n\
         [control]\nsocket = \"{socket}\"\n\n\
         [metrics]\nlisten = \"127.0.0.1:{port}\"\n\n\
         [mqtt]\nhost = \"127.0.0.1\"\nport = {broker}\nprefix = \"lg\"\n\n\
         [[source]]\nkind = \"trace\"\npath = \"{trace}\"\nspeed = 1.0\n\n[[source]]\n{modbus}",
        store = mnt.join("db").display(),
        socket = dir.join("control.sock").display(),
        trace = trace.display(),
        modbus = tcp_keys(modbus),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `linegate status --json` from `threads` threads and a raw control-socket connection sending
/// garbage, for `ms` milliseconds: the requests answered. Every status must succeed.
fn hammer(config: &Path, socket: &Path, threads: usize, ms: i64) -> u64 {
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let config = config.to_owned();
            std::thread::spawn(move || {
                let (clock, mut n) = (SystemClock::new(), 0u64);
                while clock.monotonic_ms() < ms {
                    run(linegate(&["status", "--json", "--config"]).arg(&config)).success();
                    n += 1;
                }
                n
            })
        })
        .collect();
    // A client that sends nonsense and one that connects and says nothing, for the duration.
    let garbage = UnixStream::connect(socket).map(|mut s| {
        let _ = s.write_all(b"{\"not\": \"a request\"\n\x00\xff\n");
        s
    });
    let idle = UnixStream::connect(socket);
    let n = workers.into_iter().map(|w| w.join().unwrap()).sum();
    drop((garbage, idle));
    n
}

/// Everything `subs` received, as (topic, JSON payload), probes left out.
fn received(subs: &[&Subscriber]) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for s in subs {
        for (t, p) in s.messages() {
            if let Ok(v) = serde_json::from_slice::<Value>(&p) {
                out.push((t, v));
            }
        }
    }
    out
}

/// Whether a received gap notice covers event `seq` at `ts_ms` of `sensor`.
fn covered(gaps: &[Value], sensor: &str, seq: u64, ts_ms: i64) -> bool {
    gaps.iter().any(|g| {
        let r = &g["range"];
        g["sensor"] == sensor
            && match r["kind"].as_str() {
                Some("events") => {
                    (r["from_seq"].as_u64().unwrap()..=r["to_seq"].as_u64().unwrap()).contains(&seq)
                }
                Some("samples") => {
                    (r["from_ms"].as_i64().unwrap()..r["to_ms"].as_i64().unwrap()).contains(&ts_ms)
                }
                _ => false,
            }
    })
}

/// The daemon at work: one that exited asking for a salvage (damage found while running) is
/// started again, as its service manager would, and the salvage counted; any other exit fails.
fn keep_running(daemon: &mut Daemon, config: &Path, marker: &Path, salvages: &mut u64) {
    if let Some(status) = daemon.exited() {
        assert!(marker.exists(), "linegate run exited ({status}); its log:\n{}", daemon.log());
        eprintln!("soak: the daemon asked for a salvage ({status}); starting it again");
        *daemon = Daemon::start(config, &[], &[]);
        *salvages += 1;
    }
}

/// The samples of `body` that say something waits: outbox records by kind, the replay backlog,
/// journal records not yet decided. As (line, value).
fn waiting(body: &str) -> Vec<(String, f64)> {
    const WAITING: [&str; 3] = [
        "linegate_outbox_records{",
        "linegate_replay_backlog_records ",
        "linegate_journal_undecided_records ",
    ];
    body.lines()
        .filter(|l| WAITING.iter().any(|w| l.starts_with(w)))
        .filter_map(|l| Some((l.to_owned(), l.rsplit(' ').next()?.parse().ok()?)))
        .collect()
}

#[test]
fn soak_with_every_fault() {
    let seconds = env_u64("LINEGATE_SOAK_SECONDS", 180);
    let seed = env_u64("LINEGATE_SOAK_SEED", 42);
    let dir = tempfile::tempdir().unwrap();
    let clock = SystemClock::new();

    // The trace: as long as the faults phase at speed 1, its tail of late arrivals cut off.
    let start_ms = clock.now_ms() + 1000;
    let end_ms = start_ms + seconds as i64 * 1000 * 9 / 10;
    // Besides, a machine high for 20 s of every minute, so that alerts come and go.
    let mut hot = (0..).map(|s: i64| {
        let (ts, value) = (start_ms + s * 1000, if s % 60 < 20 { 0.95 } else { 0.2 });
        (ts + 200, support::event_line("hot", "s0", s + 1, ts, value, ts + 200))
    });
    let mut next_hot = hot.next().unwrap();
    let (mut lines, mut last_at) = (Vec::new(), start_ms);
    mixed_trace(MACHINES, seconds as i64 * 9 / 10, seed, start_ms, |l| {
        let at = serde_json::from_str::<Value>(l).ok().and_then(|v| v["at"].as_i64());
        last_at = at.unwrap_or(last_at);
        while next_hot.0 <= last_at.min(end_ms) {
            lines.push(std::mem::replace(&mut next_hot, hot.next().unwrap()).1);
        }
        if at.is_none_or(|at| at <= end_ms) {
            lines.push(l.to_owned());
        }
    });
    let trace = dir.path().join("trace.jsonl");
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();

    let persistence = format!(
        "persistence true\npersistence_location {}/\nmax_queued_messages 0\n",
        dir.path().display()
    );
    let mut broker = Broker::start(dir.path(), free_port(), &persistence);
    let sub = Subscriber::with_session(dir.path(), broker.port, ROOT, "soak-subscriber");
    let modbus_port = free_port();
    let modbus_args = ["--tcp".to_owned(), modbus_port.to_string()];
    let modbus_args: Vec<&str> = modbus_args.iter().map(String::as_str).collect();
    let mut modbus: Option<Child> = Some(server(&modbus_args));
    let (backing, mnt) = (dir.path().join("disk"), dir.path().join("mnt"));
    std::fs::create_dir(&backing).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    let mut power = Some(PowerCut::mount(&backing, &mnt));
    let port = free_port();
    let config = write_config(dir.path(), &mnt, &trace, modbus_port, broker.port, port);
    let socket = dir.path().join("control.sock");
    let marker = mnt.join("db").join(linegate::store::SALVAGE_MARKER);
    let mut daemon = Daemon::start(&config, &[], &[]);

    let mut rng = Rng::new(seed ^ 0x50a4);
    let mut faults: BTreeMap<&str, u64> = FAULTS.iter().map(|f| (*f, 0)).collect();
    let (mut status_requests, mut salvages, mut torn) = (0, 0, 0);
    let until = clock.monotonic_ms() + seconds as i64 * 1000;
    while clock.monotonic_ms() < until {
        pause(&mut rng, 500, 3000);
        keep_running(&mut daemon, &config, &marker, &mut salvages);
        let fault = FAULTS[(rng.next_u64() % FAULTS.len() as u64) as usize];
        match fault {
            "sigkill" => {
                daemon.kill();
                daemon.wait(DEADLINE);
                pause(&mut rng, 1, 1500);
                daemon = Daemon::start(&config, &[], &[]);
            }
            "power_cut" => {
                daemon.kill();
                let tear = rng.next_u64();
                let tear = tear.is_multiple_of(2).then_some(tear / 2);
                let cut = power.take().expect("the store is mounted").cut(tear);
                torn += u64::from(cut.torn_at.is_some());
                power = Some(PowerCut::mount(&backing, &mnt));
                pause(&mut rng, 1, 1500);
                daemon = Daemon::start(&config, &[], &[]);
            }
            "broker_restart" => {
                broker.stop();
                pause(&mut rng, 100, 3000);
                broker.restart();
            }
            "slow_broker" => {
                let pid = broker.pid().expect("the broker runs").to_string();
                assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
                pause(&mut rng, 500, 4000);
                assert!(Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());
            }
            "sensor_silent" => {
                if let Some(mut m) = modbus.take() {
                    m.kill();
                }
                pause(&mut rng, 1000, 6000);
                modbus = Some(server(&modbus_args));
            }
            _ => {
                // The daemon may still be starting after a kill: a listener, not the file a
                // killed daemon left behind.
                support::wait_for("the control socket", || {
                    keep_running(&mut daemon, &config, &marker, &mut salvages);
                    UnixStream::connect(&socket).is_ok()
                });
                let ms = 500 + (rng.next_u64() % 1500) as i64;
                status_requests += hammer(&config, &socket, 3, ms);
            }
        }
        *faults.get_mut(fault).unwrap() += 1;
    }

    // Every fault undone. The Modbus server goes for good (its sensors' tails then show as
    // silent, which `reconcile` reports with exit 3); the trace is read to its end and the
    // outbox drained before the daemon stops. The Modbus source goes on ticking and declaring
    // its silence, so record counts never stand still: settled is the trace source's
    // `source_ended` record in the ledger and nothing waiting to be decided or sent.
    drop(modbus.take());
    // Only the trace's own end counts: a 2-hour run once settled on another `source_ended`
    // record while the trace was 4 106 lines short of its end (crossed batches had attributed
    // trace events to the Modbus source, so a restart declared the trace's sensors removed from
    // the configuration); every such record is listed below and in the failure message.
    let (mut ended, mut last, mut asked_ms) = (false, String::new(), None::<i64>);
    let mut source_ended = Vec::new();
    let settled = poll(Duration::from_secs(seconds.max(60) + 60), || {
        keep_running(&mut daemon, &config, &marker, &mut salvages);
        let body = scrape(port)?;
        let waits = waiting(&body);
        last = waits.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>().join("\n");
        let idle = waits.iter().all(|(_, v)| *v == 0.0);
        let now = clock.monotonic_ms();
        if idle && !ended && asked_ms.is_none_or(|a| now - a >= 2000) {
            asked_ms = Some(now);
            let r = run(linegate(&["dump", "ledger", "--config"]).arg(&config));
            source_ended = r
                .stdout
                .lines()
                .filter(|l| l.contains(r#""kind":"source_ended""#))
                .map(String::from)
                .collect::<Vec<_>>();
            ended = r.ok() && source_ended.iter().any(|l| l.contains(r#""reason":"end_of_trace""#));
        }
        (idle && ended).then_some(())
    });
    if settled.is_none() {
        panic!(
            "the daemon never settled; its log:\n{}\n\
             the trace source ended (source_ended in the ledger): {ended}; waiting:\n{last}\n\
             source_ended records:\n{}",
            daemon.log(),
            source_ended.join("\n")
        );
    }
    // The configuration never changes, so the only tails declared are the trace's, at its end.
    for l in &source_ended {
        assert!(l.contains(r#""reason":"end_of_trace""#), "a tail declared before its end: {l}");
    }
    daemon.signal("TERM");
    daemon.wait_success(DEADLINE);
    // What the broker queued for the subscriber while it was away, taken by a second client
    // with the same session.
    let late = Subscriber::with_session(dir.path(), broker.port, ROOT, "soak-subscriber");

    // Every trace line was journaled, in order, beside the Modbus source's blocks.
    let export = dir.path().join("export.jsonl");
    let out = cli(&["export"], &config);
    std::fs::write(&export, &out).unwrap();
    let of_trace: BTreeSet<&str> = lines.iter().map(String::as_str).collect();
    let (exported, live): (Vec<&str>, Vec<&str>) = out.lines().partition(|l| of_trace.contains(l));
    let differ = (0..exported.len().max(lines.len()))
        .find(|&i| exported.get(i).copied() != lines.get(i).map(String::as_str));
    if let Some(i) = differ {
        panic!(
            "the trace journaled differs at line {i} of {} ({} exported): {:?} against {:?}",
            lines.len(),
            exported.len(),
            exported.get(i),
            lines.get(i)
        );
    }
    // The Modbus source journals its blocks and, while it has none, ticks.
    let other = live.iter().find(|l| !l.contains(r#""machine":"m1""#) && !l.contains(r#""tick""#));
    assert!(other.is_none(), "a journaled line of neither source: {other:?}");

    // The alerts decided equal `replay` of the exported history.
    let archived: BTreeSet<String> =
        cli(&["dump", "alerts"], &config).lines().map(String::from).collect();
    let want = replay(&export, &config, dir.path());
    assert_eq!(archived, want.alert_lines().into_iter().collect(), "alerts against replay");

    // Every accepted event and alert record reached the subscriber or lies in a declared gap.
    let book = ledger(&config);
    let wanted_events: Vec<&Value> = book.iter().filter(|e| e["kind"] == "accepted").collect();
    let wanted_alerts: BTreeSet<(String, u64)> = book
        .iter()
        .filter(|e| e["kind"] == "alert")
        .map(|e| (e["alert_id"].as_str().unwrap().to_owned(), e["revision"].as_u64().unwrap()))
        .collect();
    let ids = |got: &[(String, Value)]| -> BTreeSet<String> {
        let msgs: Vec<(String, Vec<u8>)> =
            got.iter().map(|(t, v)| (t.clone(), serde_json::to_vec(v).unwrap())).collect();
        received_events(&msgs)
            .into_iter()
            .map(|(_, e)| e["event_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let got = poll(DEADLINE, || {
        let got = received(&[&sub, &late]);
        let events = ids(&got);
        wanted_events
            .iter()
            .all(|e| events.contains(e["event_id"].as_str().unwrap()))
            .then_some(got)
    })
    .unwrap_or_else(|| received(&[&sub, &late]));
    let events = ids(&got);
    let gaps: Vec<Value> =
        got.iter().filter(|(t, _)| t.contains("/gaps/")).map(|(_, v)| v.clone()).collect();
    let mut in_gaps = 0;
    for e in &wanted_events {
        if events.contains(e["event_id"].as_str().unwrap()) {
            continue;
        }
        let (sensor, seq, ts) = (
            e["sensor"].as_str().unwrap(),
            e["seq"].as_u64().unwrap(),
            e["ts_ms"].as_i64().unwrap(),
        );
        assert!(covered(&gaps, sensor, seq, ts), "event {e} neither delivered nor in a gap");
        in_gaps += 1;
    }
    let alerts: BTreeSet<(String, u64)> = got
        .iter()
        .filter(|(t, _)| t.contains("/alerts/"))
        .map(|(_, a)| (a["alert_id"].as_str().unwrap().to_owned(), a["revision"].as_u64().unwrap()))
        .collect();
    let missing: Vec<_> = wanted_alerts.difference(&alerts).collect();
    assert!(missing.is_empty(), "alert records never delivered: {missing:?}");

    // `reconcile`: nothing the gateway accepted is lost; missing source data only where the
    // faults and the trace put it (the Modbus sensors' silences, the trace's quarantined ids).
    let r = run(linegate(&["reconcile", "--json", "--config"]).arg(&config));
    let code = r.status.code();
    assert!(matches!(code, Some(0 | 3)), "reconcile: {code:?}\n{}\n{}", r.stdout, r.stderr);
    let report: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(report["gateway_lost_nothing"], true, "{report:#}");
    println!(
        "soak: {seconds} s, seed {seed}: faults {faults:?} ({} in all; {torn} cuts tore a write, \
         {salvages} salvages), {status_requests} status requests; {} trace lines, {} accepted events ({in_gaps} in declared gaps), {} alert \
         records, {} gap notices received; reconcile exit {code:?}",
        faults.values().sum::<u64>(),
        lines.len(),
        wanted_events.len(),
        wanted_alerts.len(),
        gaps.len(),
    );
    println!("soak: source_ended records in the ledger:\n{}", source_ended.join("\n"));
    println!(
        "reconcile: gateway_lost_nothing {}, source_complete {}, silent tails {}",
        report["gateway_lost_nothing"],
        report["source_complete"],
        report["silent_tails"].as_array().map_or(0, Vec::len)
    );
}
