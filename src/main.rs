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
    /// Open every configured source, check it, print a few seconds of readings, explain failures.
    Probe {
        #[arg(long)]
        config: PathBuf,
        /// How long to read each sensor.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Replay { trace, config, out, summary, rejected } => {
            run_replay(&trace, &config, &out, summary.as_deref(), rejected.as_deref())
        }
        Command::CheckConfig { config } => check_config(&config),
        Command::Probe { config, seconds } => probe(&config, seconds),
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
        }
    }
    Ok(())
}

fn probe(config: &Path, seconds: f64) -> Result<(), Error> {
    let c = Config::load(config)?;
    let failed = linegate::source::probe::probe(&c, seconds, &mut std::io::stdout().lock())?;
    match failed {
        0 => Ok(()),
        n => {
            Err(format!("{n} of {} source(s) failed the probe (see above)", c.source.len()).into())
        }
    }
}
