//! The CLI's side of the control socket: connect, send one request, copy the output frames to
//! a writer, return the exit status. Whether a daemon answers at all is [`connect`]'s question:
//! no socket, or one nobody listens on (a daemon that was killed), means "open the store
//! directly"; a socket this user may not use is an error that names the group to join.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::protocol::{Command, Frame, Request};

/// How long a client waits for each piece of an answer (a reconcile of a long ledger takes a
/// while; a daemon that says nothing for this long is stuck).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// Why the daemon could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "permission denied on the control socket {}: it is for root and the group {group}; \
         run as root or join the group (`sudo usermod -aG {group} $USER`, then log in again)",
        .path.display()
    )]
    Refused { path: PathBuf, group: String },
    #[error("the control socket {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the daemon's answer on {} is not protocol version 1: {why}", .path.display())]
    Protocol { path: PathBuf, why: String },
    #[error("{0}")]
    Command(String),
}

/// A connection to the running daemon, or `None` when none listens at `path` (no socket file,
/// or a stale one).
pub fn connect(path: &Path) -> Result<Option<UnixStream>, ClientError> {
    match UnixStream::connect(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(ClientError::Refused { path: path.to_path_buf(), group: group_of(path) })
        }
        Err(source) => Err(ClientError::Io { path: path.to_path_buf(), source }),
    }
}

/// The name of the group owning `path` (or of its directory when the file cannot be seen).
fn group_of(path: &Path) -> String {
    let gid = std::fs::metadata(path)
        .or_else(|_| std::fs::metadata(path.parent().unwrap_or(Path::new("/"))))
        .map(|m| m.gid());
    match gid {
        Ok(gid) => group_name(gid).unwrap_or_else(|| gid.to_string()),
        Err(_) => "linegate".to_string(),
    }
}

fn group_name(gid: u32) -> Option<String> {
    let text = std::fs::read_to_string("/etc/group").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let _ = f.next();
        (f.next()?.parse::<u32>().ok()? == gid).then(|| name.to_string())
    })
}

/// Sends `command` on `stream` and copies its output to `out`. Returns the exit status; a
/// command that failed is a [`ClientError::Command`] with the daemon's message.
pub fn ask(
    mut stream: UnixStream,
    path: &Path,
    command: Command,
    out: &mut dyn Write,
) -> Result<u8, ClientError> {
    let io = |source| ClientError::Io { path: path.to_path_buf(), source };
    stream.set_read_timeout(Some(ANSWER_TIMEOUT)).map_err(io)?;
    stream.set_write_timeout(Some(ANSWER_TIMEOUT)).map_err(io)?;
    stream.write_all(&Request::new(command).to_line()).map_err(io)?;
    let mut lines = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        if lines.read_until(b'\n', &mut line).map_err(io)? == 0 {
            return Err(ClientError::Protocol {
                path: path.to_path_buf(),
                why: "the daemon closed the connection before the end of the answer".into(),
            });
        }
        let frame: Frame = serde_json::from_slice(&line)
            .map_err(|e| ClientError::Protocol { path: path.to_path_buf(), why: e.to_string() })?;
        match frame {
            Frame::Out { out: text } => out.write_all(text.as_bytes()).map_err(io)?,
            Frame::Exit { exit, error: None } => return Ok(exit),
            Frame::Exit { error: Some(e), .. } => return Err(ClientError::Command(e)),
        }
    }
}
