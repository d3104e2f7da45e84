//! `promtool check metrics` (Prometheus' own parser and linter) on a text body, and reading a
//! running daemon's `/metrics`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use super::daemon::Daemon;
use super::{poll, DEADLINE};

/// promtool's verdict on `text`: (success, everything it printed).
pub fn check(text: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run promtool ({e}): install Debian's `prometheus` package (.ci/run does)"
            )
        });
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

/// `GET /metrics` on loopback `port`; `None` while nothing listens.
pub fn scrape(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// Scrapes `port` until `ok` holds for the body (for at most [`DEADLINE`]); that body. Fails the
/// test with the last scrape and `d`'s log.
#[track_caller]
pub fn scrape_until(d: &Daemon, port: u16, what: &str, ok: impl Fn(&str) -> bool) -> String {
    poll(DEADLINE, || scrape(port).filter(|b| ok(b))).unwrap_or_else(|| {
        panic!("metrics never showed {what}; last scrape:\n{:?}\nlog:\n{}", scrape(port), d.log())
    })
}

/// The value of the sample line `name` (with its labels, exactly) in `text`.
pub fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}
