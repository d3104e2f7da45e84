//! What each command does around its library call: files, the runtime, output.

use std::fs::File;
use std::io::{BufReader, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};

use linegate::config::{Config, SourceConfig};
use linegate::control::protocol::Command;
use linegate::replay::{replay, replay_switching, Sinks};

use super::Forward;

pub(crate) type Error = Box<dyn std::error::Error>;

/// `linegate run`: a tokio runtime around `linegate::app::run`, stopped by SIGTERM or SIGINT.
/// `forward`: `None` for none.
pub(crate) fn run(
    config: &Path,
    exit_at_end: bool,
    forward: Option<Forward>,
    drain: std::time::Duration,
) -> Result<(), Error> {
    let config = Config::load(config)?;
    let forward = match forward {
        None => None,
        Some(Forward::Mqtt) => {
            let credentials = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from);
            let cfg =
                linegate::forward::ForwarderConfig::from_config(&config, credentials.as_deref())?;
            let spb = linegate::sparkplug::ShellConfig::from_config(&config, &cfg);
            let slot = linegate::app::forward::mqtt(cfg, drain);
            Some(match spb {
                Some(spb) => linegate::app::forward::with_sparkplug(slot, spb),
                None => linegate::app::forward::without_sparkplug(slot),
            })
        }
        Some(Forward::LocalAck) => Some(linegate::app::forward::local_ack()),
    };
    let default_filter = std::env::var("LINEGATE_LOG").unwrap_or_else(|_| "info".to_owned());
    let sink = linegate::telemetry::logging::init(&default_filter)?;
    tracing::debug!(?sink, "logging");
    let arenas = linegate::memory::limit_arenas();
    match &arenas.ignored {
        Some(raw) => tracing::warn!(
            value = %raw,
            arenas = arenas.max,
            "MALLOC_ARENA_MAX is not a positive count: ignored, malloc arenas capped at the default"
        ),
        None => tracing::debug!(arenas = arenas.max, "malloc arenas capped"),
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let store = linegate::store::StoreOptions {
        cache_bytes: config.store.cache_bytes,
        ..linegate::store::StoreOptions::default()
    };
    let opts = linegate::app::RunOptions { exit_at_end, forward, store };
    linegate::app::shutdown::abort_on_panic();
    let result = rt.block_on(linegate::app::shutdown::run_until_signal(config, opts));
    // Blocking threads still busy after a shutdown timeout must not hold the exit up.
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    result?;
    Ok(())
}

#[cfg(feature = "demo")]
/// `linegate demo`: exit 1 when reconcile fails or something accepted was not delivered.
pub(crate) fn demo(quick: bool, trace: Option<PathBuf>, sparkplug: bool) -> Result<(), Error> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // The demo's own lines tell the outage; the forwarders' retries would repeat it.
    let quiet = "warn,rumqttd=off,linegate::forward=error,linegate::sparkplug=error";
    let filter = std::env::var("LINEGATE_LOG")
        .ok()
        .and_then(|v| linegate::telemetry::logging::targets(&v).ok())
        .unwrap_or_else(|| linegate::telemetry::logging::targets(quiet).expect("a valid filter"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    tracing_subscriber::registry().with(filter).with(fmt).init();
    let base = if quick {
        linegate::demo::DemoOptions::quick()
    } else {
        linegate::demo::DemoOptions::full()
    };
    let opts = linegate::demo::DemoOptions { trace, sparkplug, ..base };
    if linegate::demo::run(&opts)? {
        Ok(())
    } else {
        std::process::exit(1)
    }
}

/// Runs an audit command: through the running daemon's control socket when one answers, on the
/// store opened directly otherwise; the same output either way. Exits with the command's status.
pub(crate) fn audit(config: &Path, command: Command) -> Result<(), Error> {
    audit_to(config, command, None)
}

/// [`audit`] with its output in file `out` (created or truncated) instead of standard output.
pub(crate) fn audit_to(config: &Path, command: Command, out: Option<&Path>) -> Result<(), Error> {
    use std::io::Write;
    let c = Config::load(config)?;
    let mut out: Box<dyn Write> = match out {
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
        Some(path) => Box::new(create(path)?),
    };
    let code = ask_or_open(&c, command, &mut out)?;
    out.flush()?;
    if code == 0 {
        Ok(())
    } else {
        std::process::exit(i32::from(code))
    }
}

/// Runs `command` through the running daemon's control socket when one answers, on the store
/// opened directly otherwise; returns its exit status.
fn ask_or_open(c: &Config, command: Command, out: &mut dyn std::io::Write) -> Result<u8, Error> {
    let socket = linegate::control::socket_path(c);
    Ok(match linegate::control::client::connect(&socket)? {
        Some(stream) => linegate::control::client::ask(stream, &socket, command, out)?,
        None => {
            let mut store = linegate::audit::open(&c.store.path, &socket)?;
            let mut view = linegate::audit::view::View::Own(&mut store);
            linegate::control::run(&mut view, c, None, &command, out)?
        }
    })
}

/// `linegate whatif`: the history exported (through the daemon when one runs), replayed under
/// `config`'s rules, its incidents compared with the gateway's archived ones (only `rule`'s on
/// both sides when given).
pub(crate) fn whatif(
    config: &Path,
    span: linegate::audit::export::Span,
    out: Option<&Path>,
    rule: Option<&str>,
    json: bool,
) -> Result<(), Error> {
    use linegate::rule::alert::AlertRecord;
    use linegate::whatif::{incidents, Report};
    use std::io::{BufRead, Write};
    let c = Config::load(config)?;
    // Every rule's version, by name when there are several; only `rule`'s when given.
    let mut versions = linegate::config::rule_version::rule_versions(&c);
    if let Some(r) = rule {
        let names: Vec<&str> = versions.iter().map(|(n, _)| n.as_str()).collect();
        let names = names.join(", ");
        versions.retain(|(n, _)| n == r);
        if versions.is_empty() {
            return Err(format!(
                "--rule {r:?}: {} has no such rule (it has {names})",
                config.display()
            )
            .into());
        }
    }
    let dir = tempfile::tempdir()?;
    let trace = dir.path().join("history.jsonl");
    let machine = span.machine.clone();
    {
        let mut w = create(&trace)?;
        ask_or_open(&c, Command::Export { span }, &mut w)?;
        w.flush()?;
    }
    let mut archive = Vec::new();
    ask_or_open(&c, Command::Dump { what: "alerts".into() }, &mut archive)?;
    let mut alerts = Vec::new();
    let mut sinks = Sinks { alerts: &mut alerts, rejected: None::<std::io::Sink>, events: None };
    let summary = replay(&c, BufReader::new(File::open(&trace)?), &mut sinks, |_| {})?;
    // The span the export covers: the ingest times of its first and last lines (in decision
    // order), the only lines read here besides the replay's own pass.
    let (mut head, mut tail) = (None, None);
    for line in BufReader::new(File::open(&trace)?).split(b'\n') {
        let line = line?;
        if head.is_none() {
            head = Some(line.clone());
        }
        tail = Some(line);
    }
    let at = |line: Option<Vec<u8>>| match linegate::trace::parse::parse_line(&line?) {
        Ok(l) => Some(l.at),
        Err((at, _)) => at,
    };
    let (first, last, records) = (at(head), at(tail), summary.counts.records);
    let parse = |bytes: &[u8]| -> Result<Vec<AlertRecord>, Error> {
        let lines = bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty());
        Ok(lines.map(serde_json::from_slice).collect::<Result<_, _>>()?)
    };
    let within = |i: &linegate::whatif::Incident| {
        first.is_some_and(|f| i.first_decided_at_ms >= f)
            && last.is_some_and(|l| i.first_decided_at_ms <= l)
            && machine.as_ref().is_none_or(|m| &i.machine == m)
            && rule.is_none_or(|r| i.rule == r)
    };
    let archived = parse(&archive)?;
    let gateway: Vec<_> = incidents(&archived).into_iter().filter(within).collect();
    let decided = parse(&alerts)?;
    let candidate: Vec<_> =
        incidents(&decided).into_iter().filter(|i| rule.is_none_or(|r| i.rule == r)).collect();
    if let Some(path) = out {
        let mut f = create(path)?;
        f.write_all(&alerts)?;
        f.flush()?;
    }
    let version = match versions.as_slice() {
        [(_, one)] => one.clone(),
        all => all.iter().map(|(n, v)| format!("{n} {v}")).collect::<Vec<_>>().join(", "),
    };
    let report = Report::new((first, last, records), &gateway, &candidate, version);
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer(&mut stdout, &report)?;
        writeln!(stdout)?;
    } else {
        report.write_text(&mut stdout)?;
    }
    Ok(())
}

/// `linegate capture`: subscribes until `duration` has passed or a signal comes, then writes the
/// trace (and the gap notices).
pub(crate) fn capture(
    config: &Path,
    out: &Path,
    duration: Option<std::time::Duration>,
    gaps: Option<&Path>,
    client_id: Option<String>,
) -> Result<(), Error> {
    use linegate::capture::{client, Capture};
    use std::io::Write;
    let c = Config::load(config)?;
    let credentials = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from);
    let mqtt = linegate::forward::ForwarderConfig::from_config(&c, credentials.as_deref())?;
    let client_id = client_id.unwrap_or_else(|| format!("{}-capture", mqtt.client_id));
    let opts = client::CaptureOptions { mqtt, client_id };
    // Check that the files can be written before capturing for hours.
    let mut trace = create(out)?;
    let mut gap_file = gaps.map(create).transpose()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut cap = Capture::default();
    let mut shown = (usize::MAX, usize::MAX);
    rt.block_on(async {
        let stop = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let term = async {
                match term.as_mut() {
                    Some(t) => {
                        t.recv().await;
                    }
                    None => std::future::pending().await,
                }
            };
            let timer = async {
                match duration {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = term => {}
                () = timer => {}
            }
        };
        let progress = |c: &Capture| {
            if (c.events(), c.gaps()) != shown {
                shown = (c.events(), c.gaps());
                eprintln!(
                    "capture: {} events, {} gaps ({} publishes)",
                    shown.0, shown.1, c.publishes
                );
            }
        };
        client::run(&opts, &mut cap, stop, progress, |n| eprintln!("capture: {n}")).await;
    });
    let lines = cap.trace(&mut trace)?;
    trace.flush()?;
    if let Some(f) = gap_file.as_mut() {
        cap.gap_lines(f)?;
        f.flush()?;
    }
    for u in &cap.undecodable {
        eprintln!("capture: not read: {u}");
    }
    eprintln!(
        "capture: wrote {lines} events to {} ({} gap notices, {} payloads not read)",
        out.display(),
        cap.gaps(),
        cap.undecodable.len()
    );
    Ok(())
}

/// A time on the command line: RFC 3339 (`2026-01-01T00:00:00Z`, `2026-01-01 00:00:00`) or Unix
/// milliseconds.
pub(crate) fn parse_time(s: &str) -> Result<i64, String> {
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    let t = humantime::parse_rfc3339_weak(s).map_err(|e| {
        format!("{s:?} is not a time: give RFC 3339 (2026-01-01T00:00:00Z) or Unix ms ({e})")
    })?;
    let ms =
        t.duration_since(std::time::UNIX_EPOCH).map_err(|_| format!("{s:?} is before 1970"))?;
    i64::try_from(ms.as_millis()).map_err(|_| format!("{s:?} is too far in the future"))
}

/// `linegate status`: once, or every second on a terminal until interrupted (`--once` prints
/// once).
pub(crate) fn status(config: &Path, json: bool, once: bool) -> Result<(), Error> {
    let watch = !once && !json && std::io::stdout().is_terminal();
    if !watch {
        return audit(config, Command::Status { json });
    }
    loop {
        // Clear the screen and go home, then the report.
        print!("\x1b[2J\x1b[H");
        audit(config, Command::Status { json })?;
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// With the `failpoints` feature: `FAILPOINTS` configures failpoints (the `fail` crate), and
/// `LINEGATE_KILL_AT=point:nth` kills this process with SIGKILL at the nth hit of `point` (the
/// crash tests).
#[cfg(feature = "failpoints")]
pub(crate) mod kill_at {
    use std::sync::atomic::{AtomicU64, Ordering};

    pub(crate) fn setup() -> fail::FailScenario<'static> {
        let scenario = fail::FailScenario::setup();
        if let Ok(spec) = std::env::var("LINEGATE_KILL_AT") {
            let (point, nth) = spec.rsplit_once(':').unwrap_or((spec.as_str(), "1"));
            let nth: u64 = nth.parse().unwrap_or(1);
            let hits = AtomicU64::new(0);
            let r = fail::cfg_callback(point.to_string(), move || {
                if hits.fetch_add(1, Ordering::SeqCst) + 1 == nth {
                    kill_self();
                }
            });
            if let Err(e) = r {
                eprintln!("linegate: LINEGATE_KILL_AT={spec}: {e}");
            }
        }
        scenario
    }

    /// SIGKILL to this process (through kill(1): no unsafe code), then wait for it.
    fn kill_self() {
        let pid = std::process::id().to_string();
        let _ = std::process::Command::new("kill").args(["-KILL", &pid]).status();
        loop {
            std::thread::park();
        }
    }
}

pub(crate) fn open(path: &Path) -> Result<File, Error> {
    File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()).into())
}

pub(crate) fn create(path: &Path) -> Result<BufWriter<File>, Error> {
    let f = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    Ok(BufWriter::with_capacity(1 << 16, f))
}

/// The optional files of `linegate replay`.
pub(crate) struct Replay<'a> {
    pub summary: Option<&'a Path>,
    pub rejected: Option<&'a Path>,
    pub events: Option<&'a Path>,
}

/// `--switch-config LINE=FILE` values: the line and the loaded configuration, in line order.
fn switches(values: &[String]) -> Result<Vec<(u64, Config)>, Error> {
    let mut out = Vec::new();
    for v in values {
        let bad =
            || format!("--switch-config {v:?}: give LINE=FILE, LINE a trace line number from 1");
        let (line, file) = v.split_once('=').ok_or_else(bad)?;
        let line: u64 = line.trim().parse().ok().filter(|&l| l >= 1).ok_or_else(bad)?;
        out.push((line, Config::load(Path::new(file))?));
    }
    out.sort_by_key(|(line, _)| *line);
    Ok(out)
}

pub(crate) fn run_replay(
    trace: &Path,
    config: &Path,
    out: &Path,
    files: Replay<'_>,
    switch_config: &[String],
) -> Result<(), Error> {
    let Replay { summary, rejected, events } = files;
    let config = Config::load(config)?;
    let switches = switches(switch_config)?;
    let input = open(trace)?;
    let total = input.metadata().map(|m| m.len()).unwrap_or(0);
    let input = BufReader::with_capacity(1 << 20, input);
    let events = match events {
        Some(path) => Some(Box::new(create(path)?) as Box<dyn Write>),
        None => None,
    };
    let mut sinks =
        Sinks { alerts: create(out)?, rejected: rejected.map(create).transpose()?, events };
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(total);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} replay [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    });
    let s = replay_switching(&config, &switches, input, &mut sinks, |done| {
        if let Some(bar) = &bar {
            bar.set_position(done);
        }
    })
    .map_err(|e| format!("replay of {}: {e}", trace.display()))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let text = serde_json::to_string_pretty(&s)?;
    if let Some(path) = summary {
        std::fs::write(path, format!("{text}\n"))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let rejected: u64 = s.counts.quarantined.values().sum();
    eprintln!(
        "linegate: {} records, {} accepted ({} late applied, {} too late), {} duplicates, {} rejected, {} alert records",
        s.counts.records,
        s.counts.accepted,
        s.counts.late_applied,
        s.counts.too_late,
        s.counts.duplicates,
        rejected,
        s.counts.alerts.values().sum::<u64>()
    );
    Ok(())
}

pub(crate) fn decode(path: &Path) -> Result<(), Error> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let frame = linegate::records::samples_codec::SamplesFrame::decode(&bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = std::io::stdout().lock();
    std::io::Write::write_all(&mut out, frame.to_json_lines().as_bytes())?;
    Ok(())
}

pub(crate) fn check_config(path: &Path) -> Result<(), Error> {
    let c = Config::load(path)?;
    println!("{}: ok", path.display());
    println!("  gateway {}", c.gateway.id);
    for rule in c.rules() {
        let unit = match (rule.threshold, rule.unit.as_str()) {
            (linegate::config::Threshold::Zone(_), _) => "(ISO 20816-3, per machine)",
            (_, "1") => "(dimensionless)",
            (_, u) => u,
        };
        println!(
            "  rule {}: {} >= {} {unit} ({} in {}), {} machine override(s), version {}",
            rule.name,
            rule.metric.as_str(),
            rule.threshold,
            rule.count,
            linegate::timefmt::duration(rule.window_ms),
            rule.machines.len(),
            linegate::config::rule_version::rule_version_of(&c, rule)
        );
    }
    for k in &c.composites {
        println!(
            "  rule {}: {} [{}] within {}, version {}",
            k.name,
            k.kind(),
            k.spec.members().join(", "),
            linegate::timefmt::duration(k.spec.window_ms()),
            linegate::config::rule_version::composite_version(&c, k)
        );
    }
    let several = !c.more_rules.is_empty();
    for (name, asset) in &c.machines {
        println!("  machine {name}: {}", asset.summary());
        for rule in c.rules() {
            let t = rule.threshold_for(name);
            if let linegate::config::Threshold::Zone(_) = t {
                let of = if several { format!("{}: ", rule.name) } else { String::new() };
                match c.rule_threshold_for(rule, name) {
                    Some(mm_s) => println!("    {of}threshold {t} = {mm_s} mm/s"),
                    None => println!("    {of}threshold {t}: no ISO class, never counts"),
                }
            }
        }
    }
    for w in c.warnings() {
        println!("  warning: {w}");
    }
    println!("  control socket {}", linegate::control::socket_path(&c).display());
    match &c.sparkplug {
        None => println!("  sparkplug off"),
        Some(s) => println!(
            "  sparkplug B edge node {}/{} (one device per machine), primary host {}",
            s.group_id,
            c.gateway.id,
            s.primary_host.as_deref().unwrap_or("none")
        ),
    }
    for (i, source) in c.source.iter().enumerate() {
        match source {
            SourceConfig::I2c(s) => println!("  source[{i}]: {}", s.summary()),
            SourceConfig::Spi(s) => println!("  source[{i}]: {}", s.summary()),
            SourceConfig::Trace(t) => {
                println!("  source[{i}]: trace {} at speed {}", t.path.display(), t.speed);
                if !t.path.is_file() {
                    return Err(format!(
                        "{}: key `source[{i}].path`: trace file {} does not exist",
                        path.display(),
                        t.path.display()
                    )
                    .into());
                }
            }
            SourceConfig::Modbus(m) => {
                let channels: usize = m.blocks.iter().map(|b| b.channels.len()).sum();
                println!(
                    "  source[{i}]: {} {} unit {}, machine {}, {} block(s), {} channel(s) at {} polls/s",
                    m.kind(),
                    m.endpoint(),
                    m.unit_id,
                    m.machine,
                    m.blocks.len(),
                    channels,
                    m.poll_rate_hz
                );
            }
        }
    }
    Ok(())
}

pub(crate) fn probe(config: &Path, seconds: f64, json: bool) -> Result<(), Error> {
    let c = Config::load(config)?;
    let failed = if json {
        let mut stdout = std::io::stdout().lock();
        linegate::source::probe::probe(&c, seconds, &mut std::io::stderr(), Some(&mut stdout))?
    } else {
        linegate::source::probe::probe(&c, seconds, &mut std::io::stdout().lock(), None)?
    };
    match failed {
        0 => Ok(()),
        n => {
            Err(format!("{n} of {} source(s) failed the probe (see above)", c.source.len()).into())
        }
    }
}
