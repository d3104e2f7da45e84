//! What one journal record's decisions ([`Decided`]) become: outbox records, ledger records and
//! archive records, gathered until the next checkpoint. Pure: no store, no clock (ingest time is
//! the record's), no deciding (the decider has decided; this only maps).
//!
//! Outbox and ledger sequences are only known when the checkpoint is written (another writer,
//! such as shedding, may add records meanwhile), so records are gathered with sequences relative
//! to the checkpoint batch and [`Pending::finish`] adds the bases. Where the archive records go
//! (their keys) is the store's business: they leave here as [`Archived`] values.

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::decider::{kind_name, Decided, LineError, Outcome};
use crate::event::parse::member_span;
use crate::event::rejection::Rejection;
use crate::event::Event;
use crate::records::checkpoint::QuarantineEntry;
use crate::records::journal::JournalRecord;
use crate::records::ledger::{LedgerEntry, LedgerRecord};
use crate::records::outbox::{encode_event_with_at, FrameRef, OutboxRecord};
use crate::records::samples_codec::encode_block;
use crate::rule::alert::AlertRecord;
use crate::trace::{Arrival, TraceLine};

/// Outputs gathered since the last checkpoint.
#[derive(Debug, Default)]
pub struct Pending {
    outbox: Vec<Queued>,
    /// Ledger records; `outbox_seq` fields are indexes into `outbox` until `finish`.
    ledger: Vec<LedgerRecord>,
    /// Alert archive records.
    alerts: Vec<Archived>,
    /// Quarantined records with the index of their `Quarantined` ledger record.
    quarantine: Vec<(usize, QuarantineEntry)>,
    /// Journal records decided.
    pub records: usize,
    /// Samples records taken since the last [`Pending::take_samples`]: `(machine, sensor,
    /// journal position, t0_ms, end_ms)`.
    samples: Vec<(String, String, u64, i64, i64)>,
    /// Each `Samples` outbox record's block, encoded once (`samples_codec::encode_block`): the
    /// index of the record in `outbox`, and the frame's bytes.
    frames: Vec<(usize, Vec<u8>)>,
}

/// An outbox record of the batch: an event's is encoded at once (nothing in it waits for the
/// checkpoint, and its names then move into the ledger record instead of being copied), any
/// other is kept as it is until [`Pending::finish`] (a samples record learns there where its
/// frame went).
#[derive(Debug)]
enum Queued {
    Encoded(Vec<u8>),
    Record(OutboxRecord),
}

/// An event's JSON object with `"zone":"C"` (the ISO 20816-3 zone of its velocity, docs/contracts.md
/// section 10) added before its closing brace; the original bytes otherwise unchanged. An
/// event's own keys never include `zone` (section 2 rejects unknown keys).
fn with_zone(json: &[u8], zone: &str) -> Vec<u8> {
    let Some((b'}', inner)) = json.trim_ascii_end().split_last() else { return json.to_vec() };
    let mut out = Vec::with_capacity(json.len() + 12);
    out.extend_from_slice(inner);
    if inner.trim_ascii_end().last() != Some(&b'{') {
        out.push(b',');
    }
    out.extend_from_slice(b"\"zone\":\"");
    out.extend_from_slice(zone.as_bytes());
    out.extend_from_slice(b"\"}");
    out
}

/// One checkpoint batch: encoded outbox records, ledger records, archive records.
pub type Batch = (Vec<Vec<u8>>, Vec<LedgerRecord>, Vec<Archived>);

/// A record for the store's archives, beside the outbox and the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Archived {
    /// An alert record revision, as JSON.
    Alert { alert_id: String, revision: u32, json: Vec<u8> },
    /// A rejected record kept in quarantine under its id (its `Quarantined` ledger sequence),
    /// encoded.
    Quarantined { id: u64, entry: Vec<u8> },
}

/// The `event` member of a trace line, as its original bytes.
#[derive(Deserialize)]
struct EventBytes<'a> {
    #[serde(borrow)]
    event: &'a RawValue,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// The batch with real sequences: outbox record `i` gets `outbox_base + i`, ledger record
    /// `j` gets `ledger_base + j` (a quarantined record's id is its ledger sequence). Each
    /// block's encoded frame is handed to `put_frame` first, and the `Samples` record names
    /// where it put it (`None`: nowhere). Leaves this empty.
    pub fn finish<E>(
        &mut self,
        outbox_base: u64,
        ledger_base: u64,
        mut put_frame: impl FnMut(&[u8]) -> Result<Option<FrameRef>, E>,
    ) -> Result<Batch, E> {
        for (i, bytes) in std::mem::take(&mut self.frames) {
            if let Some(Queued::Record(OutboxRecord::Samples { frame, .. })) =
                self.outbox.get_mut(i)
            {
                *frame = put_frame(&bytes)?;
            }
        }
        let mut ledger = std::mem::take(&mut self.ledger);
        for r in &mut ledger {
            match &mut r.entry {
                LedgerEntry::Accepted { outbox_seq, .. }
                | LedgerEntry::Alert { outbox_seq, .. }
                | LedgerEntry::GapDeclared { outbox_seq, .. } => *outbox_seq += outbox_base,
                LedgerEntry::Quarantined { quarantine_key, .. } => *quarantine_key += ledger_base,
                _ => {}
            }
        }
        let mut puts = std::mem::take(&mut self.alerts);
        for (i, q) in std::mem::take(&mut self.quarantine) {
            puts.push(Archived::Quarantined { id: ledger_base + i as u64, entry: q.encode() });
        }
        let outbox = std::mem::take(&mut self.outbox)
            .into_iter()
            .map(|q| match q {
                Queued::Encoded(bytes) => bytes,
                Queued::Record(r) => r.encode(),
            })
            .collect();
        self.records = 0;
        Ok((outbox, ledger, puts))
    }

    /// The samples records taken since the last call.
    pub fn take_samples(&mut self) -> Vec<(String, String, u64, i64, i64)> {
        std::mem::take(&mut self.samples)
    }

    /// A gap the decide stage declares itself (`gateway_down`): its outbox record for
    /// `gaps/{sensor}` and its `GapDeclared` ledger record, in this batch.
    pub fn gap(&mut self, gap: crate::records::outbox::GapNotice, at_ms: i64) {
        let outbox_seq = self.outbox.len() as u64;
        self.ledger.push(LedgerRecord::new(
            at_ms,
            LedgerEntry::GapDeclared { gap: gap.clone(), outbox_seq },
        ));
        self.outbox.push(Queued::Record(OutboxRecord::Gap(gap)));
    }

    /// Gathers what journal record `rec` decided into ([`super::Decider::record`]). Inside the
    /// decide stage's span, the line's own accepted event's ID is recorded on it.
    pub fn add(&mut self, rec: &JournalRecord, decided: Decided) {
        let Decided { at, mut parsed, event_span, result, outcomes, rejected_derived, alerts } =
            decided;
        self.records += 1;
        for outcome in outcomes {
            self.outcome(outcome, at, rec, event_span.clone(), &mut parsed);
        }
        for (ev, why) in rejected_derived {
            let raw = serde_json::to_vec(&ev).unwrap_or_default();
            self.quarantined(at, rec.pos, &why, raw, true);
        }
        match (&parsed, result) {
            (_, Err((_, why))) => self.quarantined(at, rec.pos, &why, rec.line.clone(), false),
            (Ok(tl), Ok(())) => {
                if let Arrival::Samples(s) = &tl.arrival {
                    let end = s.t0_ms as f64 + s.data.len() as f64 * 1000.0 / s.rate_hz;
                    let key = (s.machine.clone(), s.sensor.clone());
                    self.samples.push((key.0, key.1, rec.pos, s.t0_ms, end.ceil() as i64));
                    let axis = s.axis.as_deref().unwrap_or_default();
                    let frame = encode_block(s.t0_ms, s.rate_hz, s.unit, axis, &s.data);
                    self.frames.push((self.outbox.len(), frame));
                    self.outbox.push(Queued::Record(OutboxRecord::Samples {
                        machine: s.machine.clone(),
                        sensor: s.sensor.clone(),
                        journal_pos: rec.pos,
                        t0_ms: s.t0_ms,
                        rate_hz: s.rate_hz,
                        n: u32::try_from(s.data.len()).unwrap_or(u32::MAX),
                        frame: None,
                    }));
                }
            }
            (Err(_), Ok(())) => {}
        }
        for a in alerts {
            self.alert(a, at);
        }
    }

    /// `event_span`: where the line's event is, when the parser said. An outcome of the line's
    /// own event takes that event out of `parsed` (its names move into the records).
    fn outcome(
        &mut self,
        outcome: Outcome,
        at: i64,
        rec: &JournalRecord,
        event_span: Option<Range<usize>>,
        parsed: &mut Result<TraceLine, LineError>,
    ) {
        match outcome {
            Outcome::Accepted { event, how, derived, counted, zone, rules, watermark_ms } => {
                let Some(event) = event.or_else(|| take_line_event(parsed)) else {
                    // Not reached: an outcome without its event is the line's own event's.
                    tracing::error!(journal_pos = rec.pos, "an accepted event with no event");
                    return;
                };
                if derived {
                    tracing::trace!(event_id = %event.event_id, "derived event accepted");
                } else {
                    tracing::Span::current().record("event_id", event.event_id.as_str());
                }
                let json = match event_span {
                    _ if derived => None,
                    Some(span) => rec.line.get(span).map(Cow::Borrowed),
                    None => original_event_bytes(&rec.line),
                };
                let mut json = json.unwrap_or_else(|| Cow::Owned(serialise(&event)));
                if let Some(zone) = zone {
                    json = Cow::Owned(with_zone(&json, zone.as_str()));
                }
                let Event { event_id, machine, sensor, seq, ts_ms, .. } = event;
                let outbox_seq = self.outbox.len() as u64;
                self.outbox.push(Queued::Encoded(encode_event_with_at(
                    &machine, &sensor, seq, &event_id, &json, at,
                )));
                self.ledger.push(LedgerRecord::new(
                    at,
                    LedgerEntry::Accepted {
                        event_id,
                        machine,
                        sensor,
                        seq,
                        ts_ms,
                        how,
                        journal_pos: rec.pos,
                        outbox_seq,
                        counted,
                        rules,
                        watermark_ms,
                    },
                ));
            }
            Outcome::Duplicate { event_id, .. } => self.ledger.push(LedgerRecord::new(
                at,
                LedgerEntry::Duplicate { event_id, journal_pos: rec.pos },
            )),
        }
    }

    fn quarantined(&mut self, at: i64, pos: u64, why: &Rejection, raw: Vec<u8>, derived: bool) {
        let reason = why.reason.as_str().to_string();
        let idx = self.ledger.len();
        self.quarantine.push((
            idx,
            QuarantineEntry {
                reason: reason.clone(),
                detail: why.detail.clone(),
                at_ms: Some(at),
                journal_pos: pos,
                derived,
                raw,
            },
        ));
        // The key is this record's own ledger sequence: relative here, made absolute by `finish`.
        self.ledger.push(LedgerRecord::new(
            at,
            LedgerEntry::Quarantined { reason, journal_pos: pos, quarantine_key: idx as u64 },
        ));
    }

    fn alert(&mut self, a: AlertRecord, at: i64) {
        let json = serialise(&a);
        let (alert_id, revision) = (a.alert_id.clone(), a.revision);
        self.alerts.push(Archived::Alert { alert_id, revision, json: json.clone() });
        self.ledger.push(LedgerRecord::new(
            at,
            LedgerEntry::Alert {
                alert_id: a.alert_id.clone(),
                revision: a.revision,
                alert_kind: kind_name(a.kind).into(),
                machine: a.machine.clone(),
                caused_by: a.caused_by.clone(),
                outbox_seq: self.outbox.len() as u64,
            },
        ));
        self.outbox.push(Queued::Record(OutboxRecord::Alert {
            machine: a.machine,
            alert_id: a.alert_id,
            revision: a.revision,
            json,
        }));
    }
}

/// The event of a parsed event line, its names moved out (left empty in `parsed`).
fn take_line_event(parsed: &mut Result<TraceLine, LineError>) -> Option<Event> {
    let Ok(TraceLine { arrival: Arrival::Event(ev), .. }) = parsed else { return None };
    Some(Event {
        event_id: std::mem::take(&mut ev.event_id),
        machine: std::mem::take(&mut ev.machine),
        sensor: std::mem::take(&mut ev.sensor),
        features: ev.features.take(),
        ..*ev
    })
}

/// The `event` member's bytes as the line has them: found by the byte scanner where the line is
/// plain JSON, else by serde_json (the same bytes either way).
fn original_event_bytes(line: &[u8]) -> Option<Cow<'_, [u8]>> {
    let plain = std::str::from_utf8(line).ok().and_then(|text| member_span(text, "event"));
    match plain {
        Some(span) => line.get(span).map(Cow::Borrowed),
        None => event_bytes_by_serde(line).map(Cow::Owned),
    }
}

fn event_bytes_by_serde(line: &[u8]) -> Option<Vec<u8>> {
    serde_json::from_slice::<EventBytes<'_>>(line).ok().map(|e| e.event.get().as_bytes().to_vec())
}

fn serialise<T: serde::Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::decide::{decide, Decider};
    use crate::records::journal::Origin;
    use crate::trace::parse::parse_line_and_event_span;

    /// The event's bytes found by the scanner are those serde_json borrows, and where the
    /// scanner gives up, serde_json answers.
    #[test]
    fn the_event_bytes_are_those_serde_json_finds() {
        let event = r#"{"event_id":"a.1","clock":{"state":"synced","err_ms":null},"value":0.5,"replayed":true}"#;
        let lines = [
            format!(r#"{{"at":1,"kind":"event","event":{event}}}"#),
            format!("{{ \"event\" :\n {event} , \"at\": 1 }}  "),
            r#"{"at":1,"event":{"event_id":"a\u0031"},"kind":"event"}"#.to_owned(),
            format!(r#"{{"at":-1,"event":{event}}}"#),
            format!(r#"{{"event":{event},"event":{event}}}"#),
            format!(r#"{{"event":{event}}} x"#),
            format!(r#"{{"at":[1],"event":{event}}}"#),
            r#"{"at":1,"kind":"tick"}"#.to_owned(),
            r#"{"event":"not an object"}"#.to_owned(),
        ];
        let mut plain = 0;
        for line in &lines {
            let b = line.as_bytes();
            assert_eq!(
                original_event_bytes(b).map(Cow::into_owned),
                event_bytes_by_serde(b),
                "{line}"
            );
            plain += usize::from(member_span(line, "event").is_some());
        }
        assert_eq!(plain, 3, "the first two lines and the string are plain");
        let deep = format!(r#"{{"event":{}1{}}}"#, "{\"a\":".repeat(20), "}".repeat(20));
        assert_eq!(member_span(&deep, "event"), None, "deeper than 16 levels");
        let by_span = original_event_bytes(deep.as_bytes()).map(Cow::into_owned);
        assert_eq!(by_span, event_bytes_by_serde(deep.as_bytes()));
    }

    /// An accepted event's outbox JSON is its bytes as the line has them, plus `at`: whether the
    /// parser gave their span (plain JSON, spaces around) or the scanner had to find them (an
    /// escape in the line sends it down another path).
    #[test]
    fn the_outbox_keeps_the_event_s_own_bytes_on_every_path() {
        let event = r#"{ "event_id": "press-1.s1.1", "machine": "press-1", "sensor": "s1", "seq": 1, "ts_ms": 1700000000000, "clock": {"state": "synced"}, "metric": "accel_rms", "value": 0.2, "unit": "g", "schema": 1, "quality": "good" }"#;
        let plain = format!(r#"{{"at": 1700000000300, "kind": "event", "event":  {event} }}"#);
        let escaped = plain.replace(r#""kind": "event""#, r#""kind": "ev\u0065nt""#);
        for (line, spanned) in [(plain, true), (escaped, false)] {
            let (_, span) = parse_line_and_event_span(line.as_bytes());
            assert_eq!(span.is_some(), spanned, "{line}");
            let rec = JournalRecord { pos: 1, at: 1, origin: None, line: line.into_bytes() };
            let mut decider = Decider::new(&Config::for_replay_defaults("gw")).reporting();
            let mut pending = Pending::default();
            decide(&mut decider, &mut pending, &rec, None);
            let want = crate::records::outbox::event_json_with_at(event.as_bytes(), 1700000000300);
            let (outbox, _, _) = pending.finish(0, 0, |_| Ok::<_, ()>(None)).unwrap();
            let records: Vec<_> = outbox.iter().map(|b| OutboxRecord::decode(b).unwrap()).collect();
            match records.as_slice() {
                [OutboxRecord::Event { json, .. }] => assert_eq!(json, &want),
                other => panic!("{other:?}"),
            }
        }
    }

    /// A record decides the same whether its line comes parsed (by the ingest, `super::input`)
    /// or not: events, a duplicate, a tick, a rejected line, and a record released from
    /// quarantine, whose ingest time is its own and not its line's.
    #[test]
    fn a_line_parsed_by_the_sender_decides_as_one_parsed_here() {
        let event = |id: &str, ts: i64, value: f64| {
            format!(
                r#"{{"at": {at}, "kind": "event", "event": {{"event_id": "{id}", "machine": "m1", "sensor": "s1", "seq": 1, "ts_ms": {ts}, "clock": {{"state": "synced"}}, "metric": "accel_rms", "value": {value}, "unit": "g", "schema": 1, "quality": "good"}}}}"#,
                at = ts + 100
            )
        };
        let t = 1_700_000_000_000i64;
        let lines = [
            event("e1", t, 0.9),
            event("e2", t + 1_000, 0.95),
            event("e2", t + 1_000, 0.95),
            format!(r#"{{"at": {}, "kind": "tick"}}"#, t + 2_000),
            "{not json".to_string(),
            event("e3", t + 3_000, 0.97),
            event("e4", t + 4_000, 0.2),
        ];
        let released = Origin { source: Origin::RELEASED, end_offset: 0 };
        let records: Vec<JournalRecord> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| JournalRecord {
                pos: i as u64 + 1,
                at: t + 5_000 + i as i64,
                origin: (i == 6).then_some(released),
                line: l.clone().into_bytes(),
            })
            .collect();
        let decide_all = |given: bool| {
            let mut decider = Decider::new(&Config::for_replay_defaults("gw")).reporting();
            let mut pending = Pending::default();
            for rec in &records {
                let parsed = given.then(|| parse_line_and_event_span(&rec.line));
                decide(&mut decider, &mut pending, rec, parsed);
            }
            let (outbox, ledger, puts) = pending.finish(0, 0, |_| Ok::<_, ()>(None)).unwrap();
            (outbox, ledger.iter().map(|r| r.encode()).collect::<Vec<_>>(), puts)
        };
        let (outbox, ledger, puts) = decide_all(false);
        assert!(outbox.len() >= 4, "four events accepted, one a duplicate");
        assert!(!puts.is_empty(), "the line that is not JSON is quarantined");
        assert_eq!(decide_all(true), (outbox, ledger, puts));
    }

    /// Events of a machine with an ISO class carry the zone of their velocity (docs/contracts.md
    /// section 10), after their own bytes and before `at`; no other event changes.
    #[test]
    fn events_with_a_velocity_of_a_machine_with_an_iso_class_carry_its_zone() {
        let toml =
            "[gateway]\nid = \"gw\"\n[machines.fan-1]\niso_group = 2\nfoundation = \"rigid\"\n";
        let config = Config::from_toml(toml, "t.toml").unwrap();
        let t = 1_700_000_000_000i64;
        let event = |id: &str, machine: &str, metric: &str, unit: &str, value: f64| {
            format!(
                r#"{{"event_id":"{id}","machine":"{machine}","sensor":"{id}","seq":1,"ts_ms":{t},"clock":{{"state":"synced"}},"metric":"{metric}","value":{value},"unit":"{unit}","schema":1,"quality":"good"}}"#
            )
        };
        let events = [
            event("a", "fan-1", "velocity_rms", "mm/s", 6.0),
            event("b", "pump-2", "velocity_rms", "mm/s", 6.0),
            event("c", "fan-1", "accel_rms", "g", 0.4),
        ];
        let mut lines: Vec<String> = events
            .iter()
            .map(|e| format!(r#"{{"at":{},"kind":"event","event":{e}}}"#, t + 100))
            .collect();
        lines.push(format!(
            r#"{{"at":{},"kind":"readings","machine":"fan-1","sensor":"v","t0_ms":{t},"rate_hz":2,"unit":"mm/s","data":[1.0,3.0]}}"#,
            t + 200
        ));
        let mut decider = Decider::new(&config).reporting();
        let mut pending = Pending::default();
        for (i, line) in lines.iter().enumerate() {
            let rec = JournalRecord {
                pos: i as u64 + 1,
                at: 1,
                origin: None,
                line: line.clone().into_bytes(),
            };
            decide(&mut decider, &mut pending, &rec, None);
        }
        let (outbox, _, _) = pending.finish(0, 0, |_| Ok::<_, ()>(None)).unwrap();
        let json: Vec<String> = outbox
            .iter()
            .map(|b| match OutboxRecord::decode(b).unwrap() {
                OutboxRecord::Event { json, .. } => String::from_utf8(json).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect();
        let at = |j: &str, at: i64| crate::records::outbox::event_json_with_at(j.as_bytes(), at);
        let zoned = events[0].replace(r#""good"}"#, r#""good","zone":"D"}"#);
        assert_eq!(json[0].as_bytes(), at(&zoned, t + 100), "group 2 rigid: D from 4.5 mm/s");
        assert_eq!(json[1].as_bytes(), at(&events[1], t + 100), "pump-2 has no ISO class");
        assert_eq!(json[2].as_bytes(), at(&events[2], t + 100), "no velocity");
        let zones: Vec<Option<String>> = json[3..]
            .iter()
            .map(|j| {
                serde_json::from_str::<serde_json::Value>(j).unwrap()["zone"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        assert_eq!(zones, [Some("A".to_owned()), Some("C".to_owned())], "1.0 and 3.0 mm/s");
    }
}
