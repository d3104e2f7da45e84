//! The trace line parser (`linegate::trace::parse::parse_line`) on arbitrary bytes.
//!
//! Properties: never a panic; the same bytes give the same verdict; the fast path equals the
//! exact path (`exact_line`); an accepted line written out again as JSON parses to the same line
//! (for schema-1 events, samples and ticks); an accepted event line carries exactly what
//! `parse_event` makes of its `event` object; where the parser gives the event's span, it is the
//! bytes serde_json borrows as the line's `event` member.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linegate::event::parse::parse_event;
use linegate::trace::parse::{exact_line, parse_line, parse_line_and_event_span, MAX_LINE_BYTES};
use linegate::trace::{Arrival, TraceLine};
use serde_json::json;
use serde_json::value::RawValue;
use std::collections::HashMap;

fuzz_target!(
    init: linegate_fuzz::write_seeds(linegate_fuzz::some_trace_lines),
    |data: &[u8]| {
        let verdict = parse_line(data);
        assert_eq!(verdict, parse_line(data), "not deterministic");
        if data.len() <= MAX_LINE_BYTES {
            if let Ok(text) = std::str::from_utf8(data) {
                assert_eq!(verdict, exact_line(data, text), "fast and exact paths disagree");
            }
        }
        let (again, span) = parse_line_and_event_span(data);
        assert_eq!(again, verdict, "the spanning parse judged otherwise");
        if let Some(span) = span {
            let members: HashMap<&str, &RawValue> =
                serde_json::from_slice(data).expect("accepted is JSON");
            assert_eq!(&data[span], members["event"].get().as_bytes(), "event span differs");
        }
        if let Ok(line) = &verdict {
            if let Some(again) = rewrite(line) {
                assert_eq!(parse_line(&again).as_ref(), Ok(line), "rewritten line differs");
            }
            if let Arrival::Event(e) = &line.arrival {
                let v: serde_json::Value = serde_json::from_slice(data).expect("accepted is JSON");
                let event = serde_json::to_string(&v["event"]).expect("JSON serialises");
                // Re-serialising drops nothing but formatting: NaN cannot be in an accepted line.
                assert_eq!(parse_event(&event).as_ref(), Ok(e), "event judged otherwise alone");
            }
        }
    }
);

/// The line as JSON written from its parsed form; `None` for a schema-2 event (upcast on parse,
/// so not re-serialisable as schema 2; documented in docs/event-schema-2.md).
fn rewrite(line: &TraceLine) -> Option<Vec<u8>> {
    let v = match &line.arrival {
        Arrival::Tick => json!({"at": line.at, "kind": "tick"}),
        Arrival::Event(e) if e.schema == 1 => json!({"at": line.at, "kind": "event", "event": e}),
        Arrival::Event(_) => return None,
        Arrival::Samples(s) | Arrival::Readings(s) => {
            let kind =
                if matches!(line.arrival, Arrival::Readings(_)) { "readings" } else { "samples" };
            let mut v = json!({
                "at": line.at, "kind": kind, "machine": s.machine, "sensor": s.sensor,
                "t0_ms": s.t0_ms, "rate_hz": s.rate_hz, "unit": s.unit.as_str(), "data": s.data,
            });
            if let Some(axis) = &s.axis {
                v["axis"] = json!(axis);
            }
            if let Some(clock) = &s.clock {
                v["clock"] = json!(clock);
            }
            v
        }
    };
    Some(serde_json::to_vec(&v).expect("JSON serialises"))
}
