//! `linegate run` in the background: started with a log file beside its configuration, watched
//! (its log, its exit), signalled, and killed if the test ends first.

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::Duration;

use linegate::clock::{Clock, SystemClock};

use super::{linegate, poll, DEADLINE};

/// A running `linegate run`; SIGKILLed and reaped when dropped before it exited.
pub struct Daemon {
    child: Child,
    exited: Option<ExitStatus>,
    log: PathBuf,
}

impl Daemon {
    /// `linegate run --config CONFIG ARGS` with `LINEGATE_LOG=info` and `env` (which may override
    /// it); its stderr goes to CONFIG with the extension `log`.
    pub fn start(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let log = config.with_extension("log");
        let child = linegate(&["run", "--config"])
            .arg(config)
            .args(args)
            .env("LINEGATE_LOG", "info")
            .env("NO_COLOR", "1")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Daemon { child, exited: None, log }
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many lines of its log contain `needle`.
    pub fn log_count(&self, needle: &str) -> usize {
        self.log().lines().filter(|l| l.contains(needle)).count()
    }

    /// Its exit status, once it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().unwrap();
        }
        self.exited
    }

    /// Fails the test, with the log, if it has exited.
    #[track_caller]
    pub fn assert_running(&mut self) {
        if let Some(status) = self.exited() {
            panic!("linegate run exited ({status}); its log:\n{}", self.log());
        }
    }

    /// Sends `signal` (`TERM`, `INT`, …).
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let sent = std::process::Command::new("kill").arg(format!("-{signal}")).arg(&pid).status();
        assert!(sent.unwrap().success(), "kill -{signal} {pid}");
    }

    /// SIGKILL (unless it already exited), and reaps it: when this returns the process is gone,
    /// its sockets closed, so the next command cannot reach a dying daemon.
    pub fn kill(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            self.exited = self.child.wait().ok();
        }
    }

    /// Waits at most `within` for its exit: the status, and the time the wait took.
    #[track_caller]
    pub fn wait(&mut self, within: Duration) -> (ExitStatus, Duration) {
        let clock = SystemClock::new();
        let Some(status) = poll(within, || self.exited()) else {
            panic!("linegate run did not exit within {within:?}; its log:\n{}", self.log())
        };
        (status, Duration::from_millis(clock.monotonic_ms().max(0) as u64))
    }

    /// Waits for its exit, which must be a success; the time the wait took.
    #[track_caller]
    pub fn wait_success(&mut self, within: Duration) -> Duration {
        let (status, took) = self.wait(within);
        assert!(status.success(), "linegate run: {status}; its log:\n{}", self.log());
        took
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `linegate run --exit-at-end --config CONFIG ARGS` to its end, which must be exit 0.
#[track_caller]
pub fn run_to_end(config: &Path, args: &[&str]) -> Daemon {
    let mut d = Daemon::start(config, &[&["--exit-at-end"], args].concat(), &[]);
    d.wait_success(DEADLINE);
    d
}
