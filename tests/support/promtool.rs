//! `promtool check metrics` (Prometheus' own parser and linter) on a text body.
#![allow(dead_code, clippy::unwrap_used)]

use std::io::Write;
use std::process::{Command, Stdio};

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
