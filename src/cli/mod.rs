//! The `linegate` command line: its arguments and which library call each command makes.
//! `commands` holds what each command does around that call (files, runtime, output).

mod commands;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use commands::*;
use linegate::control::protocol::Command as Ask;

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
        /// Also a Sparkplug B edge node, with a host's view of it printed (births, DDATA).
        #[arg(long)]
        sparkplug: bool,
    },
    /// Run the whole decision path over a recorded trace, deterministically, without a broker.
    Replay {
        /// The trace: JSON Lines, one arrival per line (docs/contracts.md section 8).
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
        /// Every accepted event, received or derived (with its features), as JSON Lines.
        #[arg(long)]
        events: Option<PathBuf>,
        /// `LINE=FILE`: from trace line LINE on, FILE's configuration decides, continuing from
        /// the state decided so far (as the daemon at a restart with another rule). Repeatable.
        #[arg(long, value_name = "LINE=FILE")]
        switch_config: Vec<String>,
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
        /// Where the outbox goes.
        #[arg(long, value_enum, default_value_t = Forward::Mqtt)]
        forward: Forward,
        /// When stopping, how long the MQTT forwarder may keep publishing to empty the outbox
        /// (what is left stays queued for the next start).
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        drain_timeout: std::time::Duration,
    },
    /// Quarantined records: list, show, release (re-ingest) or drop them.
    Quarantine {
        #[command(subcommand)]
        action: linegate::audit::quarantine::Action,
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
        /// Also list the incident's further high events from the ledger (the whole membership
        /// that `also` cuts at `also_max`), this page of them: 1000 event IDs a page, from 0.
        #[arg(long, value_name = "PAGE")]
        members: Option<usize>,
    },
    /// Prove from the ledger that nothing accepted was lost, and say whether source data is
    /// missing: exit 0 when neither, 1 when the gateway lost something it accepted, 3 when it
    /// lost nothing but source data is missing undeclared (a hole, a silent sensor's tail).
    Reconcile {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        json: bool,
        /// Also write the verdict into the ledger (a `reconciled` record), through the daemon
        /// when one holds the store.
        #[arg(long)]
        record: bool,
    },
    /// Mark a failure injected on purpose in the ledger (`drill start NAME`, `drill end NAME`):
    /// `reconcile` shows each drill with what the ledger recorded while it was on.
    Drill {
        #[arg(value_enum)]
        phase: linegate::records::ledger::DrillPhase,
        /// 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', '-'.
        name: String,
        #[arg(long)]
        config: PathBuf,
    },
    /// Queue depths, journal positions, ledger length, quarantine count, size on disk, sensors.
    Inspect {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// One screen for the person at the gateway: machines, sensors (live, idle, silent), open
    /// incidents, outbox and backlog, broker, store, clock, restarts. Refreshes every second on a
    /// terminal.
    Status {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        json: bool,
        /// Print once and exit (the default when the output is not a terminal).
        #[arg(long)]
        once: bool,
    },
    /// Print the ledger, or the archived alert records, as JSON Lines.
    Dump {
        /// `ledger` or `alerts`.
        what: String,
        #[arg(long)]
        config: PathBuf,
    },
    /// Write the gateway's retained input (`[store] history`) as a trace: `replay` of it decides
    /// what the gateway decided.
    Export {
        #[arg(long)]
        config: PathBuf,
        #[command(flatten)]
        span: SpanArgs,
        /// Write the trace here instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// What another rule would have decided about the history: the history decided again under
    /// CONFIG's rule (without touching the running daemon), its incidents compared with the
    /// gateway's (added, removed, onset or end moved).
    Whatif {
        /// The configuration with the other rule (its [store] and [control] find the gateway).
        #[arg(long)]
        config: PathBuf,
        #[command(flatten)]
        span: SpanArgs,
        /// Write the other rule's alert records here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Compare only this rule's incidents (a rule CONFIG names), on both sides.
        #[arg(long)]
        rule: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Subscribe to a gateway's `events/#` and `gaps/#` on its broker and write a trace of what
    /// arrives (each event once, in ingest order): `replay` of it decides the gateway's incidents.
    Capture {
        /// The gateway's configuration: its [mqtt] broker, prefix and gateway id.
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// Stop after this long (`30s`, `2h`); otherwise at SIGINT or SIGTERM.
        #[arg(long = "for", value_parser = humantime::parse_duration)]
        duration: Option<std::time::Duration>,
        /// Also write the gap notices received here, one JSON object per line.
        #[arg(long)]
        gaps: Option<PathBuf>,
        /// The MQTT client id (its persistent session); default `{gateway client id}-capture`.
        #[arg(long)]
        client_id: Option<String>,
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

/// Which part of the history `export` and `whatif` take.
#[derive(clap::Args)]
struct SpanArgs {
    /// Records ingested at or after this time (RFC 3339, or Unix ms).
    #[arg(long, value_parser = parse_time)]
    from: Option<i64>,
    /// Records ingested before this time (RFC 3339, or Unix ms).
    #[arg(long, value_parser = parse_time)]
    to: Option<i64>,
    /// Only this machine's records (and ticks).
    #[arg(long)]
    machine: Option<String>,
}

impl SpanArgs {
    fn span(self) -> linegate::audit::export::Span {
        linegate::audit::export::Span { from_ms: self.from, to_ms: self.to, machine: self.machine }
    }
}

/// `linegate run --forward`: where the outbox goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Forward {
    /// Publish the outbox to the `[mqtt]` broker.
    Mqtt,
    /// Acknowledge every outbox record in-process (tests, demos, benchmarks).
    LocalAck,
}

pub(crate) fn main() -> ExitCode {
    let cli = Cli::parse();
    #[cfg(feature = "failpoints")]
    let _scenario = kill_at::setup();
    let result = match cli.command {
        Command::Replay { trace, config, out, summary, rejected, events, switch_config } => {
            let files = Replay {
                summary: summary.as_deref(),
                rejected: rejected.as_deref(),
                events: events.as_deref(),
            };
            run_replay(&trace, &config, &out, files, &switch_config)
        }
        #[cfg(feature = "demo")]
        Command::Demo { quick, trace, sparkplug } => demo(quick, trace, sparkplug),
        Command::CheckConfig { config } => check_config(&config),
        Command::Run { config, exit_at_end, no_forward, forward, drain_timeout } => {
            run(&config, exit_at_end, (!no_forward).then_some(forward), drain_timeout)
        }
        Command::Quarantine { action, config } => match config {
            None => Err("quarantine needs --config FILE".into()),
            Some(c) => audit(&c, Ask::Quarantine { action }),
        },
        Command::Explain { alert_id, config, json, members } => {
            audit(&config, Ask::Explain { alert_id, json, members })
        }
        Command::Reconcile { config, json, record } => {
            audit(&config, Ask::Reconcile { json, record })
        }
        Command::Drill { phase, name, config } => audit(&config, Ask::Drill { phase, name }),
        Command::Inspect { config, json } => audit(&config, Ask::Inspect { json }),
        Command::Status { config, json, once } => status(&config, json, once),
        Command::Dump { what, config } => audit(&config, Ask::Dump { what }),
        Command::Export { config, span, out } => {
            audit_to(&config, Ask::Export { span: span.span() }, out.as_deref())
        }
        Command::Whatif { config, span, out, rule, json } => {
            whatif(&config, span.span(), out.as_deref(), rule.as_deref(), json)
        }
        Command::Capture { config, out, duration, gaps, client_id } => {
            capture(&config, &out, duration, gaps.as_deref(), client_id)
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
