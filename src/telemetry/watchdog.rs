//! systemd notification (READY, STOPPING, STATUS) and a watchdog that pings only while the
//! pipeline makes progress.
//!
//! A daemon that is alive but stuck (a deadlocked stage, a wedged bus) should be restarted, so
//! the WATCHDOG=1 ping must mean "work is moving", not "the runtime is scheduling tasks". Stages
//! bump a shared [`Heartbeat`] counter whenever they finish a unit of work and say whether work
//! is pending; [`Progress`] (pure, time injected) decides from those whether to ping:
//!
//! - the counter moved since the last check: progress, ping;
//! - nothing is pending: idle is healthy, ping;
//! - work is pending and the counter has not moved for longer than `stall_after`: stalled, no
//!   ping, so systemd restarts the service once its `WatchdogSec` runs out.
//!
//! "Pending" must mean work this process can do now. A backlog that waits for an absent broker
//! is not pending work: counting it would restart the daemon in the middle of every outage.
//!
//! [`run`] pings at half the watchdog interval; [`spawn_systemd_watchdog`] starts it when systemd
//! asked for a watchdog (`WATCHDOG_USEC`). Without `NOTIFY_SOCKET` every notification is a no-op.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sd_notify::NotifyState;
use tokio::time::{Instant, MissedTickBehavior};

/// What stages report: a progress counter and whether work is waiting. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    inner: Arc<HeartbeatInner>,
}

#[derive(Debug, Default)]
struct HeartbeatInner {
    progress: AtomicU64,
    pending: AtomicBool,
}

impl Heartbeat {
    pub fn new() -> Self {
        Self::default()
    }
    /// A unit of work was done.
    pub fn bump(&self) {
        self.inner.progress.fetch_add(1, Ordering::Relaxed);
    }
    /// Whether work is waiting that this process could do now.
    pub fn set_pending(&self, pending: bool) {
        self.inner.pending.store(pending, Ordering::Relaxed);
    }
    pub fn progress(&self) -> u64 {
        self.inner.progress.load(Ordering::Relaxed)
    }
    pub fn pending(&self) -> bool {
        self.inner.pending.load(Ordering::Relaxed)
    }
}

/// The decision of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchdogVerdict {
    /// Progressing or idle: ping.
    Ping,
    /// Work pending and no progress for `for_ms`: do not ping.
    Stalled { for_ms: i64 },
}

/// The pure core: whether the pipeline is making progress, from successive readings of the
/// heartbeat at monotonic times (milliseconds).
#[derive(Debug, Clone)]
pub struct Progress {
    stall_after_ms: i64,
    last_counter: u64,
    /// When the counter last moved or the pipeline was last seen idle.
    healthy_at_ms: i64,
}

impl Progress {
    pub fn new(now_ms: i64, counter: u64, stall_after_ms: i64) -> Self {
        Progress { stall_after_ms, last_counter: counter, healthy_at_ms: now_ms }
    }

    pub fn check(&mut self, now_ms: i64, counter: u64, pending: bool) -> WatchdogVerdict {
        if counter != self.last_counter || !pending {
            self.last_counter = counter;
            self.healthy_at_ms = now_ms;
            return WatchdogVerdict::Ping;
        }
        let stuck = now_ms.saturating_sub(self.healthy_at_ms);
        if stuck > self.stall_after_ms {
            WatchdogVerdict::Stalled { for_ms: stuck }
        } else {
            WatchdogVerdict::Ping
        }
    }
}

/// Sends `states` to systemd; a failure is logged (a notification is never worth stopping for).
pub fn notify(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "systemd notification failed");
    }
}

/// READY=1 with a status line: the daemon serves.
pub fn ready(status: &str) {
    notify(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// STOPPING=1 with a status line: shutdown began.
pub fn stopping(status: &str) {
    notify(&[NotifyState::Stopping, NotifyState::Status(status)]);
}

/// STATUS=…: one line `systemctl status` shows.
pub fn status(status: &str) {
    notify(&[NotifyState::Status(status)]);
}

/// Checks the heartbeat every `interval / 2` and sends WATCHDOG=1 through `send` while
/// [`Progress`] says so; on becoming stalled, and on recovering, it sends a STATUS line and
/// logs. Returns when `shutdown` completes.
#[allow(clippy::disallowed_methods)] // the watchdog measures progress on tokio's clock (paused in its test)
pub async fn run(
    interval: Duration,
    stall_after: Duration,
    heartbeat: Heartbeat,
    mut send: impl FnMut(&[NotifyState<'_>]),
    shutdown: impl Future<Output = ()>,
) {
    let start = Instant::now();
    let elapsed_ms = || i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX);
    let stall_ms = i64::try_from(stall_after.as_millis()).unwrap_or(i64::MAX);
    let mut progress = Progress::new(elapsed_ms(), heartbeat.progress(), stall_ms);
    let mut ticks = tokio::time::interval((interval / 2).max(Duration::from_millis(1)));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut stalled = false;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = ticks.tick() => {}
        }
        match progress.check(elapsed_ms(), heartbeat.progress(), heartbeat.pending()) {
            WatchdogVerdict::Ping => {
                if stalled {
                    stalled = false;
                    tracing::info!("pipeline progressing again; watchdog pings resumed");
                    send(&[NotifyState::Status("progressing again")]);
                }
                send(&[NotifyState::Watchdog]);
            }
            WatchdogVerdict::Stalled { for_ms } if !stalled => {
                stalled = true;
                let line = format!("stalled: work pending and no progress for {for_ms} ms");
                tracing::error!("{line}; watchdog pings stopped");
                send(&[NotifyState::Status(&line)]);
            }
            WatchdogVerdict::Stalled { .. } => {}
        }
    }
}

/// Starts [`run`] with systemd's watchdog interval when systemd asked for one (`WATCHDOG_USEC`,
/// for this process); `None` otherwise.
pub fn spawn_systemd_watchdog(
    stall_after: Duration,
    heartbeat: Heartbeat,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Option<tokio::task::JoinHandle<()>> {
    let interval = sd_notify::watchdog_enabled()?;
    tracing::info!(?interval, ?stall_after, "systemd watchdog enabled");
    Some(tokio::spawn(run(interval, stall_after, heartbeat, notify, shutdown)))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn progress_pings_while_counter_moves_or_idle() {
        let mut p = Progress::new(0, 0, 5_000);
        assert_eq!(p.check(1_000, 1, true), WatchdogVerdict::Ping);
        assert_eq!(p.check(60_000, 1, false), WatchdogVerdict::Ping, "idle with nothing pending");
        assert_eq!(p.check(120_000, 1, false), WatchdogVerdict::Ping);
        assert_eq!(
            p.check(125_000, 1, true),
            WatchdogVerdict::Ping,
            "pending for exactly the threshold"
        );
        assert_eq!(p.check(125_001, 1, true), WatchdogVerdict::Stalled { for_ms: 5_001 });
        assert_eq!(p.check(200_000, 1, true), WatchdogVerdict::Stalled { for_ms: 80_000 });
        assert_eq!(p.check(200_001, 2, true), WatchdogVerdict::Ping, "progress again");
        assert_eq!(p.check(205_001, 2, true), WatchdogVerdict::Ping);
        assert_eq!(p.check(205_002, 2, true), WatchdogVerdict::Stalled { for_ms: 5_001 });
    }

    #[test]
    fn work_becoming_pending_starts_the_stall_clock_then() {
        let mut p = Progress::new(0, 7, 1_000);
        assert_eq!(p.check(50_000, 7, false), WatchdogVerdict::Ping);
        // Pending from here: a long idle stretch before does not count as being stuck.
        assert_eq!(p.check(50_500, 7, true), WatchdogVerdict::Ping);
        assert_eq!(p.check(51_001, 7, true), WatchdogVerdict::Stalled { for_ms: 1_001 });
    }

    #[test]
    fn heartbeat_clones_share_state() {
        let h = Heartbeat::new();
        let stage = h.clone();
        stage.bump();
        stage.bump();
        stage.set_pending(true);
        assert_eq!((h.progress(), h.pending()), (2, true));
    }

    /// Virtual time: a pipeline with work pending and no progress gets pings for `stall_after`,
    /// then none, then pings again once it progresses.
    #[tokio::test(start_paused = true)]
    #[allow(clippy::disallowed_methods)] // reads the paused clock it advances
    async fn pings_stop_when_stalled_and_resume_on_progress() {
        let heartbeat = Heartbeat::new();
        heartbeat.set_pending(true);
        let sent: Arc<Mutex<Vec<(u128, String)>>> = Arc::default();
        let start = Instant::now();
        let log = sent.clone();
        let send = move |states: &[NotifyState<'_>]| {
            let at = start.elapsed().as_millis();
            let text = states.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(";");
            log.lock().unwrap().push((at, text));
        };
        let stage = heartbeat.clone();
        let shutdown = async move {
            tokio::time::sleep(Duration::from_millis(10_500)).await;
            stage.bump();
            tokio::time::sleep(Duration::from_millis(3_000)).await;
        };
        run(Duration::from_secs(2), Duration::from_secs(5), heartbeat, send, shutdown).await;

        let sent = sent.lock().unwrap().clone();
        let mut expected: Vec<(u128, String)> =
            (0..=5).map(|s| (s * 1_000, "WATCHDOG=1".to_owned())).collect();
        expected.push((6_000, "STATUS=stalled: work pending and no progress for 6000 ms".into()));
        expected.push((11_000, "STATUS=progressing again".into()));
        expected.extend((11..=13).map(|s| (s * 1_000, "WATCHDOG=1".to_owned())));
        assert_eq!(sent, expected);
    }
}
