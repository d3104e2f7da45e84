//! `linegate capture`: a trace (docs/contracts.md section 8) rebuilt from what a gateway
//! publishes, for a central team that re-decides a fleet's input under a proposed rule without
//! access to the gateways. [`Capture`] is the pure part: it takes each PUBLISH on
//! `{prefix}/{gateway}/events/...` and `.../gaps/...` and keeps every event once (by `event_id`,
//! however often it was delivered), with its ingest time `at` (section 10); [`Capture::trace`]
//! writes them as `event` lines in ingest order. [`client`] is the MQTT shell.
//!
//! What a capture is not: the gateway's whole input. Raw samples reach MQTT as frames, not as
//! trace lines, so a capture carries the events the gateway derived from them (which decide the
//! same incidents); ticks are not published, so an incident still open at the end of a capture
//! may close later in the gateway than in `replay` of the capture; rejected records are not
//! published at all (they changed no decision). Gap notices are kept beside the trace.

pub mod client;

use std::collections::HashSet;
use std::io::Write;

use serde_json::{Map, Value};

/// What was captured.
#[derive(Debug, Default)]
pub struct Capture {
    /// `(at, event)` per distinct event id, in arrival order.
    events: Vec<(i64, Map<String, Value>)>,
    seen: HashSet<String>,
    /// Gap notices, each once, in arrival order.
    gaps: Vec<Value>,
    gaps_seen: HashSet<String>,
    /// PUBLISH packets taken (redeliveries included).
    pub publishes: u64,
    /// Payloads that could not be read: topic and why.
    pub undecodable: Vec<String>,
}

impl Capture {
    /// Takes one PUBLISH on `topic`; `root` is `{prefix}/{gateway}`.
    pub fn take(&mut self, root: &str, topic: &str, payload: &[u8]) {
        self.publishes += 1;
        let kind = topic.strip_prefix(root).and_then(|t| t.strip_prefix('/'));
        let kind = kind.and_then(|t| t.split('/').next()).unwrap_or("");
        let bad = |why: String| format!("{topic}: {why}");
        match kind {
            "events" => match serde_json::from_slice::<Batch>(payload) {
                Ok(b) => {
                    for e in b.events {
                        if let Err(why) = self.event(e) {
                            self.undecodable.push(bad(why));
                        }
                    }
                }
                Err(e) => self.undecodable.push(bad(e.to_string())),
            },
            "gaps" => match serde_json::from_slice::<Value>(payload) {
                Ok(g) => {
                    if self.gaps_seen.insert(g.to_string()) {
                        self.gaps.push(g);
                    }
                }
                Err(e) => self.undecodable.push(bad(e.to_string())),
            },
            _ => {}
        }
    }

    fn event(&mut self, mut e: Map<String, Value>) -> Result<(), String> {
        let at = e.remove("at").and_then(|v| v.as_i64()).ok_or("an event without \"at\"")?;
        e.remove("replayed");
        let id = e.get("event_id").and_then(Value::as_str).ok_or("an event without event_id")?;
        if self.seen.insert(id.to_owned()) {
            self.events.push((at, e));
        }
        Ok(())
    }

    /// Distinct events captured.
    pub fn events(&self) -> usize {
        self.events.len()
    }

    /// Distinct gap notices captured.
    pub fn gaps(&self) -> usize {
        self.gaps.len()
    }

    /// Writes the trace: one `event` line per distinct event, by ingest time (ties in arrival
    /// order). Returns the number of lines.
    pub fn trace(&mut self, out: &mut dyn Write) -> std::io::Result<u64> {
        // Stable: ties stay in arrival order.
        self.events.sort_by_key(|(at, _)| *at);
        for (at, e) in &self.events {
            let line = serde_json::json!({"at": at, "kind": "event", "event": e});
            writeln!(out, "{line}")?;
        }
        Ok(self.events.len() as u64)
    }

    /// Writes the gap notices, one JSON object per line, in arrival order.
    pub fn gap_lines(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for g in &self.gaps {
            writeln!(out, "{g}")?;
        }
        Ok(())
    }
}

#[derive(serde::Deserialize)]
struct Batch {
    events: Vec<Map<String, Value>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: &str, at: i64, replayed: bool) -> String {
        let r = if replayed { r#","replayed":true"# } else { "" };
        format!(r#"{{"event_id":"{id}","machine":"m","value":0.5,"at":{at}{r}}}"#)
    }

    #[test]
    fn each_event_once_in_ingest_order_without_at_or_replayed() {
        let mut c = Capture::default();
        let root = "lg/gw";
        let batch = |evs: &[String]| format!(r#"{{"events":[{}]}}"#, evs.join(","));
        c.take(
            root,
            "lg/gw/events/m/s1",
            batch(&[ev("b", 20, false), ev("c", 30, false)]).as_bytes(),
        );
        c.take(
            root,
            "lg/gw/events/m/s2",
            batch(&[ev("a", 10, true), ev("b", 20, true)]).as_bytes(),
        );
        c.take(root, "lg/gw/gaps/s1", br#"{"reason":"shed"}"#);
        c.take(root, "lg/gw/gaps/s1", br#"{"reason":"shed"}"#);
        c.take(root, "lg/gw/alerts/m", b"{}");
        c.take(root, "lg/gw/events/m/s1", b"not json");
        assert_eq!((c.events(), c.gaps(), c.publishes), (3, 1, 6));
        assert_eq!(c.undecodable.len(), 1, "{:?}", c.undecodable);
        let mut out = Vec::new();
        assert_eq!(c.trace(&mut out).unwrap(), 3);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            r#"{"at":10,"event":{"event_id":"a","machine":"m","value":0.5},"kind":"event"}"#
        );
        assert!(lines[1].contains(r#""event_id":"b""#) && lines[2].contains(r#""event_id":"c""#));
    }
}
