//! The `linegate` command line. Thin: parses arguments and calls the library.

use std::fs::File;
use std::io::{BufReader, BufWriter, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use linegate::config::{Config, SourceConfig};
use linegate::replay::{replay, Sinks};

#[derive(Parser)]
#[command(name = "linegate", version, about = "Edge gateway for industrial vibration monitoring")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    #[cfg(feature = "demo")]
    /// The whole daemon on real bearing recordings against an embedded MQTT broker, with the
    /// broker taken away mid-run: alerts explained, reconcile, delivered vs accepted (< 60 s).
    Demo {
        /// A shorter run (about 15 s), for tests.
        #[arg(long)]
        quick: bool,
        /// The CWRU trace to build the demo from (default: fixtures/traces/cwru.jsonl).
        #[arg(long)]
        trace: Option<PathBuf>,
    },
    /// Run the whole decision path over a recorded trace, deterministically, without a broker.
    Replay {
        /// The trace: JSON Lines, one arrival per line (CONTRACTS section 8).
        trace: PathBuf,
        #[arg(long)]
        config: PathBuf,
        /// Alert records, one JSON object per line, in decision order.
        #[arg(long)]
        out: PathBuf,
        /// Counts of what happened to every record, as one JSON object.
        #[arg(long)]
        summary: Option<PathBuf>,
        /// Every rejected record with its line, reason and raw bytes, as JSON Lines.
        #[arg(long)]
        rejected: Option<PathBuf>,
    },
    /// Check a configuration file and print what it means.
    CheckConfig { config: PathBuf },
    /// Run the durable pipeline: sources → journal → decide → outbox (→ forwarder).
    Run {
        #[arg(long)]
        config: PathBuf,
        /// Stop once every source is at its end and everything is decided and checkpointed.
        #[arg(long)]
        exit_at_end: bool,
        /// Keep outbox records queued (no forwarder).
        #[arg(long, conflicts_with = "forward")]
        no_forward: bool,
        /// `mqtt` (the default): publish the outbox to the `[mqtt]` broker; `local-ack`:
        /// acknowledge every outbox record in-process (tests, demos).
        #[arg(long)]
        forward: Option<String>,
        /// When stopping, how long the MQTT forwarder may keep publishing to empty the outbox
        /// (what is left stays queued for the next start).
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        drain_timeout: std::time::Duration,
    },
    /// Quarantined records: list, show, release (re-ingest) or drop them.
    Quarantine {
        #[command(subcommand)]
        action: linegate::app::audit::quarantine::Action,
        #[arg(long, global = true)]
        config: Option<PathBuf>,
    },
    /// An alert: every revision, its evidence events, their raw samples and every transition.
    Explain {
        alert_id: String,
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Prove from the ledger that nothing accepted was lost; non-zero exit when something is
    /// unaccounted for.
    Reconcile {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Queue depths, journal positions, ledger length, quarantine count, size on disk.
    Inspect {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Print the ledger, or the archived alert records, as JSON Lines.
    Dump {
        /// `ledger` or `alerts`.
        what: String,
        #[arg(long)]
        config: PathBuf,
    },
    /// Turn a captured `samples/...` MQTT payload (docs/samples-encoding.md) into JSON Lines: a
    /// header, then one `{"i", "t_ms", "v"}` per sample.
    Decode { file: PathBuf },
    /// Open every configured source, check it, print a few seconds of readings, explain failures.
    Probe {
        #[arg(long)]
        config: PathBuf,
        /// How long to read each sensor (Modbus: this many seconds of polls).
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// One JSON object per source and line on standard output (board/raspberry-pi/README.md,
        /// "Probe output"); the text goes to standard error.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    #[cfg(feature = "failpoints")]
    let _scenario = kill_at::setup();
    let result = match cli.command {
        Command::Replay { trace, config, out, summary, rejected } => {
            run_replay(&trace, &config, &out, summary.as_deref(), rejected.as_deref())
        }
        #[cfg(feature = "demo")]
        Command::Demo { quick, trace } => demo(quick, trace),
        Command::CheckConfig { config } => check_config(&config),
        Command::Run { config, exit_at_end, no_forward, forward, drain_timeout } => {
            let forward =
                if no_forward { None } else { Some(forward.as_deref().unwrap_or("mqtt")) };
            run(&config, exit_at_end, forward, drain_timeout)
        }
        Command::Quarantine { action, config } => match config {
            None => Err("quarantine needs --config FILE".into()),
            Some(c) => audit(&c, |store| action.run(store)),
        },
        Command::Explain { alert_id, config, json } => {
            audit(&config, |store| linegate::app::audit::explain::explain(store, &alert_id, json))
        }
        Command::Reconcile { config, json } => reconcile(&config, json),
        Command::Inspect { config, json } => {
            audit(&config, |store| linegate::app::audit::inspect::inspect(store, json))
        }
        Command::Dump { what, config } => {
            audit(&config, |store| linegate::app::audit::dump(store, &what))
        }
        Command::Decode { file } => decode(&file),
        Command::Probe { config, seconds, json } => probe(&config, seconds, json),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("linegate: {e}");
            ExitCode::FAILURE
        }
    }
}

type Error = Box<dyn std::error::Error>;

/// `linegate run`: a tokio runtime around `linegate::app::run`, stopped by SIGTERM or SIGINT.
/// `forward`: the forwarder's name, `None` for none.
fn run(
    config: &Path,
    exit_at_end: bool,
    forward: Option<&str>,
    drain: std::time::Duration,
) -> Result<(), Error> {
    let config = Config::load(config)?;
    let forward = match forward {
        None => None,
        Some("mqtt") => {
            let credentials = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from);
            let cfg =
                linegate::forward::ForwarderConfig::from_config(&config, credentials.as_deref())?;
            Some(linegate::app::forward_mqtt::mqtt(cfg, drain))
        }
        Some("local-ack") => Some(linegate::app::forward::local_ack()),
        Some(other) => {
            return Err(format!("--forward {other:?}: the forwarders are mqtt and local-ack").into())
        }
    };
    let default_filter = std::env::var("LINEGATE_LOG").unwrap_or_else(|_| "info".to_owned());
    let sink = linegate::telemetry::logging::init(&default_filter)?;
    tracing::debug!(?sink, "logging");
    linegate::app::memory::limit_arenas();
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
fn demo(quick: bool, trace: Option<PathBuf>) -> Result<(), Error> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LINEGATE_LOG").unwrap_or_else(|_| {
                // The demo's own lines tell the outage; the forwarder's retries would repeat it.
                tracing_subscriber::EnvFilter::new("warn,rumqttd=off,linegate::forward=error")
            }),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let base = if quick {
        linegate::demo::DemoOptions::quick()
    } else {
        linegate::demo::DemoOptions::full()
    };
    let opts = linegate::demo::DemoOptions { trace, ..base };
    if linegate::demo::run(&opts)? {
        Ok(())
    } else {
        std::process::exit(1)
    }
}

fn reconcile(config: &Path, json: bool) -> Result<(), Error> {
    let c = Config::load(config)?;
    audit(config, |store| linegate::app::audit::reconcile::reconcile(store, &c, json))
}

/// Runs an audit command on the store named by the configuration; exit code 1 on `Ok(false)`.
fn audit(
    config: &Path,
    f: impl FnOnce(&mut linegate::store::Store) -> Result<bool, linegate::app::audit::AuditError>,
) -> Result<(), Error> {
    let c = Config::load(config)?;
    let mut store = linegate::app::audit::open(&c.store.path)?;
    if f(&mut store)? {
        Ok(())
    } else {
        std::process::exit(1)
    }
}

/// With the `failpoints` feature: `FAILPOINTS` configures failpoints (the `fail` crate), and
/// `LINEGATE_KILL_AT=point:nth` kills this process with SIGKILL at the nth hit of `point` (the
/// crash tests).
#[cfg(feature = "failpoints")]
mod kill_at {
    use std::sync::atomic::{AtomicU64, Ordering};

    pub(super) fn setup() -> fail::FailScenario<'static> {
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

fn open(path: &Path) -> Result<File, Error> {
    File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()).into())
}

fn create(path: &Path) -> Result<BufWriter<File>, Error> {
    let f = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    Ok(BufWriter::with_capacity(1 << 16, f))
}

fn run_replay(
    trace: &Path,
    config: &Path,
    out: &Path,
    summary: Option<&Path>,
    rejected: Option<&Path>,
) -> Result<(), Error> {
    let config = Config::load(config)?;
    let input = open(trace)?;
    let total = input.metadata().map(|m| m.len()).unwrap_or(0);
    let input = BufReader::with_capacity(1 << 20, input);
    let mut sinks = Sinks { alerts: create(out)?, rejected: rejected.map(create).transpose()? };
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(total);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} replay [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    });
    let s = replay(&config, input, &mut sinks, |done| {
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

fn decode(path: &Path) -> Result<(), Error> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let frame = linegate::samples_codec::SamplesFrame::decode(&bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = std::io::stdout().lock();
    std::io::Write::write_all(&mut out, frame.to_json_lines().as_bytes())?;
    Ok(())
}

fn check_config(path: &Path) -> Result<(), Error> {
    let c = Config::load(path)?;
    println!("{}: ok", path.display());
    println!("  gateway {}", c.gateway.id);
    println!(
        "  rule {}: {} >= {} {} ({} in {} ms), {} machine override(s)",
        c.rule.name,
        c.rule.metric.as_str(),
        c.rule.threshold,
        c.rule.unit.as_str(),
        c.rule.count,
        c.rule.window_ms,
        c.rule.machines.len()
    );
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

fn probe(config: &Path, seconds: f64, json: bool) -> Result<(), Error> {
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
