//! Where the daemon's `tracing` output goes: journald when systemd connected our stderr to the
//! journal, else human-readable lines on stderr.
//!
//! systemd sets `JOURNAL_STREAM=DEVICE:INODE` for a service whose stdout or stderr goes to the
//! journal. As systemd.exec(5) recommends, it counts only if it names the file our stderr *is*:
//! a child started from a service with its stderr redirected inherits the variable but not the
//! stream. Then events go to journald natively (`tracing-journald`: priority, target, fields as
//! journal fields) instead of as text lines that lose their level.
//!
//! The filter is `RUST_LOG`'s target syntax (`info`, `linegate=debug,sled=warn`, ...: a
//! `tracing_subscriber::filter::Targets`, without `EnvFilter`'s span and field directives);
//! without `RUST_LOG` the caller's default applies.

use std::ffi::OsStr;
use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Where log events go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sink {
    /// journald's native protocol.
    Journald,
    /// Text lines on stderr.
    Stderr,
}

/// Logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("RUST_LOG: {0}")]
    Filter(String),
    #[error("a global tracing subscriber is already installed: {0}")]
    AlreadySet(String),
}

/// `JOURNAL_STREAM`'s value as `(device, inode)`; `None` when it is not `DEVICE:INODE` in decimal.
pub fn parse_journal_stream(value: &OsStr) -> Option<(u64, u64)> {
    let (dev, ino) = value.to_str()?.split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

/// The sink for a process whose `JOURNAL_STREAM` is `journal_stream` and whose stderr is the file
/// `stderr` (device, inode), when it could be examined.
pub fn choose_sink(journal_stream: Option<&OsStr>, stderr: Option<(u64, u64)>) -> Sink {
    match (journal_stream.and_then(parse_journal_stream), stderr) {
        (Some(stream), Some(err)) if stream == err => Sink::Journald,
        _ => Sink::Stderr,
    }
}

/// Device and inode of this process's stderr.
fn stderr_identity() -> Option<(u64, u64)> {
    let fd = std::io::stderr().as_fd().try_clone_to_owned().ok()?;
    let meta = std::fs::File::from(fd).metadata().ok()?;
    Some((meta.dev(), meta.ino()))
}

/// A filter in `RUST_LOG`'s target syntax: `info`, `linegate=debug,sled=warn`, `off`.
pub fn targets(spec: &str) -> Result<Targets, LoggingError> {
    spec.parse::<Targets>().map_err(|e| LoggingError::Filter(format!("{spec:?}: {e}")))
}

/// Installs the global subscriber: filter from `RUST_LOG`, else `default_filter`; journald when
/// systemd gave us a journal stream (falling back to stderr if journald's socket cannot be
/// opened), else stderr. Returns the sink chosen.
pub fn init(default_filter: &str) -> Result<Sink, LoggingError> {
    let filter = match std::env::var_os("RUST_LOG") {
        Some(v) => targets(&v.to_string_lossy())?,
        None => targets(default_filter)?,
    };
    let wanted = choose_sink(std::env::var_os("JOURNAL_STREAM").as_deref(), stderr_identity());
    let (journald, journald_error) = match wanted {
        Sink::Journald => match tracing_journald::layer() {
            Ok(layer) => (Some(layer), None),
            Err(e) => (None, Some(e)),
        },
        Sink::Stderr => (None, None),
    };
    let sink = if journald.is_some() { Sink::Journald } else { Sink::Stderr };
    let fmt = journald.is_none().then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(journald)
        .with(fmt)
        .try_init()
        .map_err(|e| LoggingError::AlreadySet(e.to_string()))?;
    if let Some(e) = journald_error {
        tracing::warn!(error = %e, "journald socket unavailable; logging to stderr");
    }
    Ok(sink)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_in_rust_log_target_syntax_and_a_bad_one_named() {
        use tracing::level_filters::LevelFilter;
        let t = targets("warn,linegate=debug,sled=off").unwrap();
        assert_eq!(t.default_level(), Some(LevelFilter::WARN));
        assert!(t.would_enable("linegate::store", &tracing::Level::DEBUG));
        assert!(!t.would_enable("sled::pagecache", &tracing::Level::ERROR));
        assert!(!t.would_enable("rumqttc", &tracing::Level::INFO));
        let e = targets("linegate=loud").unwrap_err().to_string();
        assert!(e.contains("linegate=loud"), "{e}");
    }

    #[test]
    fn journal_stream_counts_only_when_it_names_our_stderr() {
        let v = OsStr::new("64769:123456");
        assert_eq!(parse_journal_stream(v), Some((64769, 123_456)));
        assert_eq!(choose_sink(Some(v), Some((64769, 123_456))), Sink::Journald);
        // Inherited from a service, but stderr was redirected elsewhere.
        assert_eq!(choose_sink(Some(v), Some((64769, 999))), Sink::Stderr);
        assert_eq!(choose_sink(Some(v), None), Sink::Stderr);
        assert_eq!(choose_sink(None, Some((64769, 123_456))), Sink::Stderr);
    }

    #[test]
    fn malformed_journal_stream_means_stderr() {
        for bad in ["", "1", "a:b", "1:2:3", "-1:2", "1:"] {
            assert_eq!(parse_journal_stream(OsStr::new(bad)), None, "{bad:?}");
            assert_eq!(choose_sink(Some(OsStr::new(bad)), Some((1, 2))), Sink::Stderr, "{bad:?}");
        }
    }

    #[test]
    fn stderr_can_be_identified() {
        assert!(stderr_identity().is_some());
    }
}
