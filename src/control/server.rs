//! The daemon's side of the control socket: a Unix listener, at most [`MAX_CLIENTS`] clients at a
//! time (the next ones are told the daemon is busy and closed), a request read within
//! [`READ_TIMEOUT`] and [`REQUEST_MAX`] bytes, each command run on a blocking thread against the
//! shared store ([`View::Daemon`]), its output streamed back in frames, each written within
//! [`WRITE_TIMEOUT`]. Nothing here holds the store's lock while it waits for a client.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, Semaphore};

use super::protocol::{parse_request, BadRequest, Command, Frame, REQUEST_MAX};
use crate::audit::status::Live;
use crate::audit::view::{DaemonView, View};
use crate::audit::AuditError;
use crate::config::Config;
use crate::records::ledger::Operator;
use crate::store::SharedStore;
use crate::telemetry::Telemetry;

/// Clients served at once.
pub const MAX_CLIENTS: usize = 16;
/// A client must send its whole request within this.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Each frame of an answer must be taken by the client within this.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Output is sent in frames of about this many bytes (cut after a line).
const FRAME_BYTES: usize = 32 * 1024;

/// What the server needs of the daemon.
#[derive(Clone, Debug)]
pub struct Daemon {
    pub store: SharedStore,
    pub config: Arc<Config>,
    pub decide: mpsc::WeakSender<crate::decide::input::DecideBatch>,
    pub telemetry: Telemetry,
    pub started_ms: i64,
}

/// Binds the socket at `path` with mode 0660: a stale socket left by a daemon that was killed
/// is replaced; a socket another process answers on is an error.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("another process answers on {}", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
    Ok(listener)
}

/// Serves clients until `stop` completes, then removes the socket file.
pub async fn serve(
    listener: UnixListener,
    path: PathBuf,
    daemon: Daemon,
    stop: impl std::future::Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(MAX_CLIENTS));
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            a = listener.accept() => a,
        };
        let mut stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of descriptors, say: wait a little rather than spin.
                tracing::warn!(error = %e, "control socket: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            daemon.telemetry.metrics.control_request("busy");
            tokio::spawn(async move {
                let busy = Frame::Exit {
                    exit: 1,
                    error: Some(format!(
                        "busy: the daemon is serving {MAX_CLIENTS} control clients already; try again"
                    )),
                };
                let _ = tokio::time::timeout(
                    Duration::from_millis(100),
                    stream.write_all(&busy.to_line()),
                )
                .await;
            });
            continue;
        };
        let d = daemon.clone();
        tokio::spawn(async move {
            client(stream, d).await;
            drop(permit);
        });
    }
    let _ = std::fs::remove_file(&path);
}

/// One client: its request, the command, the answer.
async fn client(stream: UnixStream, d: Daemon) {
    let peer = match stream.peer_cred() {
        Ok(c) => Operator { uid: c.uid(), gid: c.gid(), pid: c.pid(), via_socket: true },
        Err(e) => {
            tracing::warn!(error = %e, "control socket: no peer credentials; closing");
            return;
        }
    };
    let (read, mut write) = stream.into_split();
    let mut line = Vec::new();
    let mut reader = BufReader::new(read).take(REQUEST_MAX as u64);
    let got = tokio::time::timeout(READ_TIMEOUT, reader.read_until(b'\n', &mut line)).await;
    let request = match got {
        Err(_) => {
            d.telemetry.metrics.control_request("timeout");
            let e = format!("no whole request within {} s", READ_TIMEOUT.as_secs());
            return finish(&mut write, 1, Some(e)).await;
        }
        Ok(Err(e)) => {
            d.telemetry.metrics.control_request("malformed");
            return finish(&mut write, 1, Some(format!("reading the request: {e}"))).await;
        }
        Ok(Ok(_)) if !line.ends_with(b"\n") && line.len() >= REQUEST_MAX => {
            Err(BadRequest::TooLong)
        }
        Ok(Ok(_)) => parse_request(line.strip_suffix(b"\n").unwrap_or(&line)),
    };
    let command = match request {
        Ok(r) => r.command,
        Err(e) => {
            d.telemetry.metrics.control_request("malformed");
            tracing::debug!(uid = peer.uid, pid = ?peer.pid, error = %e, "control socket: bad request");
            return finish(&mut write, 1, Some(e.to_string())).await;
        }
    };
    if command.mutates() {
        tracing::info!(uid = peer.uid, gid = peer.gid, pid = ?peer.pid, ?command, "control socket: mutation");
    } else {
        tracing::debug!(uid = peer.uid, pid = ?peer.pid, command = command.name(), "control socket");
    }
    let (tx, mut rx) = mpsc::channel::<Frame>(4);
    let run = {
        let d = d.clone();
        tokio::task::spawn_blocking(move || run_command(&d, peer, &command, tx))
    };
    while let Some(frame) = rx.recv().await {
        let sent = tokio::time::timeout(WRITE_TIMEOUT, write.write_all(&frame.to_line())).await;
        if !matches!(sent, Ok(Ok(()))) {
            // The client is gone or stalled: the command stops at its next write.
            d.telemetry.metrics.control_request("timeout");
            drop(rx);
            let _ = run.await;
            return;
        }
    }
    let outcome = match run.await {
        Ok(o) => o,
        Err(e) => (1, Some(format!("the command failed: {e}"))),
    };
    d.telemetry.metrics.control_request(if outcome.0 == 0 { "ok" } else { "failed" });
    finish(&mut write, outcome.0, outcome.1).await;
}

async fn finish(write: &mut tokio::net::unix::OwnedWriteHalf, exit: u8, error: Option<String>) {
    let frame = Frame::Exit { exit, error };
    let _ = tokio::time::timeout(WRITE_TIMEOUT, write.write_all(&frame.to_line())).await;
    let _ = write.shutdown().await;
}

/// Runs `command` on the daemon's store, sending its output as frames; returns the exit status
/// and the error message.
fn run_command(
    d: &Daemon,
    peer: Operator,
    command: &Command,
    tx: mpsc::Sender<Frame>,
) -> (u8, Option<String>) {
    let mut out = FrameWriter { buf: Vec::new(), tx };
    let mut view = View::Daemon(DaemonView { store: &d.store, decide: &d.decide, peer });
    let live = matches!(command, Command::Status { .. }).then(|| live(d));
    let r: Result<u8, AuditError> =
        super::run(&mut view, &d.config, live.as_ref(), command, &mut out);
    let flushed = out.flush();
    match (r, flushed) {
        (Ok(code), Ok(())) => (code, None),
        (Err(e), _) => (1, Some(e.to_string())),
        (Ok(_), Err(e)) => (1, Some(format!("sending the output: {e}"))),
    }
}

/// The status page of the running daemon (`GET /` on the metrics listener).
pub fn status_page(d: &Daemon) -> Result<String, String> {
    let peer = Operator::this_process();
    let view = View::Daemon(DaemonView { store: &d.store, decide: &d.decide, peer });
    let st = crate::audit::status::gather(&view, &d.config, Some(&live(d)))
        .map_err(|e| e.to_string())?;
    let book = d.telemetry.trends();
    let trends =
        crate::audit::status_trends::gather(&view, &d.config, &book).map_err(|e| e.to_string())?;
    Ok(crate::audit::status_page::render(&st, &trends))
}

/// What only the running process knows, for `status`.
fn live(d: &Daemon) -> Live {
    use std::sync::atomic::Ordering;
    let f = &d.telemetry.forward;
    let mqtt = f.attempts.load(Ordering::Relaxed) > 0;
    Live {
        pid: std::process::id(),
        started_ms: d.started_ms,
        now_ms: crate::clock::Clock::now_ms(&crate::clock::SystemClock::new()),
        broker_connected: mqtt.then(|| f.connected.load(Ordering::Relaxed)),
        clock: crate::source::clock_quality::kernel_clock_state().as_str().to_string(),
        drain_rate: d.telemetry.drain_rate(),
    }
}

/// Collects a command's output and sends it in frames cut after a line, so that each frame is
/// whole UTF-8.
#[derive(Debug)]
struct FrameWriter {
    buf: Vec<u8>,
    tx: mpsc::Sender<Frame>,
}

impl FrameWriter {
    fn send(&mut self, upto: usize) -> std::io::Result<()> {
        let rest = self.buf.split_off(upto);
        let chunk = std::mem::replace(&mut self.buf, rest);
        let out = String::from_utf8_lossy(&chunk).into_owned();
        self.tx
            .blocking_send(Frame::Out { out })
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client left"))
    }
}

impl Write for FrameWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= FRAME_BYTES {
            if let Some(nl) = self.buf.iter().rposition(|&b| b == b'\n') {
                self.send(nl + 1)?;
            }
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.send(self.buf.len())
    }
}
