//! The control socket's protocol, version 1 (docs/operations.md, "The control socket"): pure
//! values and their parsing, no I/O.
//!
//! A client sends one request, a JSON object on one line of at most [`REQUEST_MAX`] bytes:
//! `{"v":1,"command":{"inspect":{"json":true}}}`. The daemon answers with JSON lines: any number
//! of `{"out":"…"}` (the command's output, in order), then exactly one `{"exit":N}`, or
//! `{"exit":N,"error":"…"}` when the command failed (the message a direct run prints on standard
//! error), and closes the connection. A request that is not understood gets only the final line.

use serde::{Deserialize, Serialize};

use crate::audit::quarantine::Action;

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;

/// The longest request line, newline included.
pub const REQUEST_MAX: usize = 64 * 1024;

/// What a client asks. Each is the command of the same name, with its options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    Inspect {
        json: bool,
    },
    Status {
        json: bool,
    },
    Explain {
        alert_id: String,
        json: bool,
        members: Option<usize>,
    },
    Reconcile {
        json: bool,
        /// Write the verdict into the ledger (a `reconciled` record).
        #[serde(default)]
        record: bool,
    },
    /// Marks a drill's start or end in the ledger.
    Drill {
        phase: crate::records::ledger::DrillPhase,
        name: String,
    },
    Quarantine {
        action: Action,
    },
    Dump {
        what: String,
    },
    Export {
        span: crate::audit::export::Span,
    },
}

impl Command {
    /// True for the commands that change the store (their peer is logged and ledgered).
    pub fn mutates(&self) -> bool {
        matches!(
            self,
            Command::Quarantine { action: Action::Release { .. } | Action::Drop { .. } }
                | Command::Reconcile { record: true, .. }
                | Command::Drill { .. }
        )
    }

    /// The command's name, for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Inspect { .. } => "inspect",
            Command::Status { .. } => "status",
            Command::Explain { .. } => "explain",
            Command::Reconcile { .. } => "reconcile",
            Command::Drill { .. } => "drill",
            Command::Quarantine { .. } => "quarantine",
            Command::Dump { .. } => "dump",
            Command::Export { .. } => "export",
        }
    }
}

/// One request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub v: u32,
    pub command: Command,
}

impl Request {
    pub fn new(command: Command) -> Request {
        Request { v: VERSION, command }
    }

    /// The request as sent: one JSON line.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

/// Why a request line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRequest {
    #[error("the request is longer than {REQUEST_MAX} bytes")]
    TooLong,
    #[error("the request is not UTF-8 JSON of protocol version {VERSION}: {0}")]
    Malformed(String),
    #[error("protocol version {0} is not spoken here (this daemon speaks version {VERSION})")]
    Version(u32),
}

/// Parses one request line (without its newline).
pub fn parse_request(line: &[u8]) -> Result<Request, BadRequest> {
    if line.len() >= REQUEST_MAX {
        return Err(BadRequest::TooLong);
    }
    // The version first, so an older or newer client hears why rather than a parse error.
    #[derive(Deserialize)]
    struct Versioned {
        v: u32,
    }
    match serde_json::from_slice::<Versioned>(line) {
        Ok(Versioned { v }) if v != VERSION => return Err(BadRequest::Version(v)),
        Ok(_) => {}
        Err(e) => return Err(BadRequest::Malformed(e.to_string())),
    }
    serde_json::from_slice(line).map_err(|e| BadRequest::Malformed(e.to_string()))
}

/// One line of an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Frame {
    /// A piece of the command's output.
    Out { out: String },
    /// The end: the exit status, and the error when the command failed.
    Exit {
        exit: u8,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

impl Frame {
    /// The frame as sent: one JSON line.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_and_names_what_it_does() {
        let r =
            Request::new(Command::Explain { alert_id: "a1".into(), json: false, members: Some(2) });
        let line = r.to_line();
        assert_eq!(
            std::str::from_utf8(&line).unwrap(),
            "{\"v\":1,\"command\":{\"explain\":{\"alert_id\":\"a1\",\"json\":false,\"members\":2}}}\n"
        );
        assert_eq!(parse_request(&line[..line.len() - 1]).unwrap(), r);
        let drop = Command::Quarantine { action: Action::Drop { id: 3 } };
        assert!(drop.mutates());
        assert!(!Command::Quarantine { action: Action::List }.mutates());
        assert_eq!(
            parse_request(
                br#"{"v":1,"command":{"quarantine":{"action":{"release":{"id":4,"at":null}}}}}"#
            )
            .unwrap()
            .command,
            Command::Quarantine { action: Action::Release { id: 4, at: None } }
        );
    }

    #[test]
    fn bad_requests_say_what_was_wrong() {
        assert_eq!(parse_request(br#"{"v":2,"command":"x"}"#), Err(BadRequest::Version(2)));
        let e = parse_request(b"\x00\xffgarbage").unwrap_err();
        assert!(matches!(e, BadRequest::Malformed(_)), "{e}");
        let e = parse_request(br#"{"v":1,"command":{"format_disk":{}}}"#).unwrap_err();
        assert!(e.to_string().contains("format_disk"), "{e}");
        let e = parse_request(br#"{"v":1,"command":{"inspect":{"json":true,"x":1}}}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
        assert_eq!(parse_request(&vec![b' '; REQUEST_MAX]), Err(BadRequest::TooLong));
    }

    #[test]
    fn frames_are_one_json_line_each() {
        let out = Frame::Out { out: "a\n\"b\"".into() };
        assert_eq!(out.to_line(), b"{\"out\":\"a\\n\\\"b\\\"\"}\n");
        let end = Frame::Exit { exit: 3, error: None };
        assert_eq!(end.to_line(), b"{\"exit\":3}\n");
        let back: Frame = serde_json::from_slice(b"{\"exit\":1,\"error\":\"no\"}").unwrap();
        assert_eq!(back, Frame::Exit { exit: 1, error: Some("no".into()) });
        let back: Frame = serde_json::from_slice(b"{\"out\":\"x\"}").unwrap();
        assert_eq!(back, Frame::Out { out: "x".into() });
    }
}
