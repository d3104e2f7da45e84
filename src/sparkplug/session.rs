//! The Sparkplug B edge-node session core: births, deaths, sequence numbers, aliases, historical
//! flags, the primary host's `STATE` and the rebirth command, as a state machine without I/O in
//! the manner of the forwarder's session (`crate::forward::Session`). The shell (`client.rs`)
//! feeds it connection events, incoming messages, outbox records and the time, and publishes what
//! it returns.
//!
//! # Rules it keeps (Sparkplug B 3.0)
//!
//! - Every MQTT connection has a birth/death sequence `bdSeq` (given by the shell from the store,
//!   +1 per connection); its NDEATH, the connection's will, and its NBIRTH carry the same one.
//! - Births (NBIRTH, then one DBIRTH per device) go after a ConnAck once the node may publish:
//!   at once without a primary host, else once its `STATE` says online; again on a
//!   `Node Control/Rebirth` command. NBIRTH has `seq` 0; every later message of the node takes
//!   the next `seq`, 0 after 255.
//! - A DBIRTH declares every metric of its device (name, alias, data type, last value sent); a
//!   record with a metric its device has not declared in this session gets a new DBIRTH before
//!   its DDATA. DDATA names metrics by alias only.
//! - Nothing is published while the connection is down or the primary host is offline. Records
//!   older than the moment births went out (outbox sequence below `boundary`) are sent with
//!   `is_historical`, oldest first; younger ones are live.
//! - The primary host's `STATE` going offline after the births ends the session: NDEATH, then
//!   DISCONNECT ([`Session::take_end`]); the shell connects again and waits for `STATE` online
//!   before the next births (Sparkplug B 3.0: an edge node terminates its session with a server
//!   where its primary host is offline; with one server, "the next one" is the same one).
//!
//! # Fairness: live data is not starved by held data
//!
//! Held records drain at the JSON forwarder's pace (`[mqtt] replay_rate` records a second) from
//! the cursor, in outbox order ([`Session::take`]). Meanwhile a second reader looks at the live
//! records ([`Session::live_after`], [`Session::take_live`]): those of a device (a machine) with
//! nothing held go at once, as live values; those of a device with held records wait for the
//! cursor, so per device, hence per metric, every held value precedes the newer live ones. Which
//! devices hold records is found by the shell's scan of the held range after the births
//! ([`Session::scan_due`], [`Session::scanned`]). What a device sent ahead of the cursor is kept
//! in the metric table (`sent_ahead`), stored with the cursor, and the cursor's reader skips it.

use std::collections::{BTreeMap, BTreeSet};

use prost::Message;

use super::proto::{datatype, payload, Payload};
use super::table::{Entry, Table, REBIRTH_ALIAS};
use super::values::{device, updates, Quality, Update, Value};
use crate::config::IsoClass;
use crate::forward::Pace;
use crate::records::outbox::OutboxRecord;

/// The namespace of Sparkplug B topics.
pub const NAMESPACE: &str = "spBv1.0";
pub const REBIRTH: &str = "Node Control/Rebirth";
pub const BD_SEQ: &str = "bdSeq";

/// What the session needs to know.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    pub group_id: String,
    /// The edge node id: the gateway id.
    pub node_id: String,
    /// The primary host application whose `STATE` the node waits for, if any.
    pub primary_host: Option<String>,
    /// Machines' ISO classes (for `iso_zone`).
    pub iso: BTreeMap<String, IsoClass>,
    /// Held records handed over per second while they drain (the JSON forwarder's
    /// `replay_rate`); 0: unpaced.
    pub replay_rate: u32,
}

/// Sparkplug message types the node sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    NBirth,
    NDeath,
    DBirth,
    DData,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::NBirth => "NBIRTH",
            Kind::NDeath => "NDEATH",
            Kind::DBirth => "DBIRTH",
            Kind::DData => "DDATA",
        }
    }
}

/// A message to publish. Births and deaths go at QoS 1 (a death as the will too), data at QoS 0,
/// as Sparkplug B requires; none is retained.
#[derive(Debug, Clone, PartialEq)]
pub struct Publish {
    pub kind: Kind,
    pub topic: String,
    pub payload: Vec<u8>,
    /// Historical metric values it carries.
    pub historical: usize,
}

impl Publish {
    pub fn qos1(&self) -> bool {
        self.kind != Kind::DData
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct Session {
    cfg: SessionConfig,
    table: Table,
    bd_seq: u8,
    /// The `seq` of the next message.
    seq: u8,
    connected: bool,
    host_online: bool,
    /// Births went out in this connection (and the host has not gone offline since).
    birthed: bool,
    /// Devices born in this session.
    born: BTreeSet<String>,
    /// Records below this outbox sequence are historical.
    boundary: u64,
    /// The last outbox sequence handed over.
    cursor: u64,
    /// The last outbox sequence whose messages were all written and stored as sent: a new
    /// connection goes on from here.
    stored: u64,
    /// The metric table as stored with `stored`.
    stored_table: Table,
    /// True once the primary host went offline after the births: the session must end.
    end: bool,
    /// The pace of held records.
    pace: Pace,
    /// While held records drain: the devices that have some (`None` until the scan said).
    held: Option<BTreeSet<String>>,
    /// While held records drain: the last outbox sequence the live reader looked at.
    live_pos: u64,
}

impl Session {
    /// A session over the view's stored place: `table` its metric table, `cursor` the last outbox
    /// sequence it sent.
    pub fn new(cfg: SessionConfig, table: Table, cursor: u64) -> Self {
        Session {
            pace: Pace::new(cfg.replay_rate),
            cfg,
            end: false,
            held: None,
            live_pos: 0,
            stored_table: table.clone(),
            table,
            bd_seq: 0,
            seq: 0,
            connected: false,
            host_online: false,
            birthed: false,
            born: BTreeSet::new(),
            boundary: 0,
            cursor,
            stored: cursor,
        }
    }

    fn topic(&self, kind: &str, device: Option<&str>) -> String {
        let base = format!("{NAMESPACE}/{}/{kind}/{}", self.cfg.group_id, self.cfg.node_id);
        match device {
            Some(d) => format!("{base}/{d}"),
            None => base,
        }
    }

    /// The topic of commands to the node.
    pub fn ncmd_topic(&self) -> String {
        self.topic("NCMD", None)
    }

    /// The primary host's `STATE` topic (Sparkplug B 3.0), when one is configured.
    pub fn state_topic(&self) -> Option<String> {
        self.cfg.primary_host.as_ref().map(|h| format!("{NAMESPACE}/STATE/{h}"))
    }

    /// A new connection is about to be made with birth/death sequence `bd_seq`: its NDEATH, the
    /// will to connect with.
    pub fn begin(&mut self, bd_seq: u8, now_ms: i64) -> Publish {
        self.on_disconnect();
        self.bd_seq = bd_seq;
        self.death(now_ms)
    }

    /// The NDEATH of the current connection (the will; also published before a clean
    /// disconnect, when the broker would not send the will).
    pub fn death(&self, now_ms: i64) -> Publish {
        let payload = Payload {
            timestamp: Some(ms(now_ms)),
            metrics: vec![self.bd_seq_metric(now_ms)],
            ..Default::default()
        };
        Publish {
            kind: Kind::NDeath,
            topic: self.topic("NDEATH", None),
            payload: payload.encode_to_vec(),
            historical: 0,
        }
    }

    fn bd_seq_metric(&self, now_ms: i64) -> payload::Metric {
        payload::Metric {
            name: Some(BD_SEQ.into()),
            timestamp: Some(ms(now_ms)),
            datatype: Some(datatype::INT64),
            value: Some(payload::metric::Value::LongValue(u64::from(self.bd_seq))),
            ..Default::default()
        }
    }

    /// The broker accepted the connection; `next_outbox` is the outbox's next sequence now.
    /// Births go at once unless a primary host is configured (then they wait for its `STATE`).
    pub fn on_connack(&mut self, next_outbox: u64, now_ms: i64) -> Vec<Publish> {
        self.connected = true;
        self.host_online = self.cfg.primary_host.is_none();
        if self.host_online {
            self.births(next_outbox, now_ms)
        } else {
            Vec::new()
        }
    }

    /// The connection is gone: what was handed over but not stored as sent goes again.
    pub fn on_disconnect(&mut self) {
        self.cursor = self.stored;
        self.table = self.stored_table.clone();
        self.connected = false;
        self.birthed = false;
        self.host_online = false;
        self.born.clear();
        self.held = None;
        self.end = false;
    }

    /// The primary host's `STATE` message: online, births (unless already sent); offline,
    /// nothing more is published until it is online again, and a session whose births went out
    /// must end ([`Session::take_end`]). A payload that does not read is ignored (a warning).
    pub fn on_state(&mut self, payload: &[u8], next_outbox: u64, now_ms: i64) -> Vec<Publish> {
        let Some(online) = parse_state(payload) else {
            tracing::warn!(payload = %String::from_utf8_lossy(payload),
                "sparkplug: a STATE message that does not read: ignored");
            return Vec::new();
        };
        if !self.connected {
            return Vec::new();
        }
        if !online {
            if self.host_online {
                tracing::info!("sparkplug: primary host offline: holding everything");
            }
            self.end |= self.birthed;
            self.host_online = false;
            self.birthed = false;
            self.born.clear();
            self.held = None;
            return Vec::new();
        }
        self.host_online = true;
        if self.birthed {
            return Vec::new();
        }
        tracing::info!("sparkplug: primary host online");
        self.births(next_outbox, now_ms)
    }

    /// A command to the node: `Node Control/Rebirth` = true re-sends the births (only while the
    /// node may publish). Anything else is ignored.
    pub fn on_ncmd(&mut self, bytes: &[u8], next_outbox: u64, now_ms: i64) -> Vec<Publish> {
        let Ok(p) = Payload::decode(bytes) else {
            tracing::warn!("sparkplug: an NCMD payload that does not decode: ignored");
            return Vec::new();
        };
        let rebirth = p.metrics.iter().any(|m| {
            let named = m.name.as_deref() == Some(REBIRTH) || m.alias == Some(REBIRTH_ALIAS);
            named && m.value == Some(payload::metric::Value::BooleanValue(true))
        });
        if !rebirth || !self.connected || !self.host_online {
            return Vec::new();
        }
        tracing::info!("sparkplug: rebirth requested");
        self.births(next_outbox, now_ms)
    }

    /// Whether outbox records may be handed over now.
    pub fn live(&self) -> bool {
        self.connected && self.host_online && self.birthed
    }

    /// True once: the primary host went offline after the births, so the session ends (NDEATH,
    /// DISCONNECT) and a new one waits for it.
    pub fn take_end(&mut self) -> bool {
        std::mem::take(&mut self.end)
    }

    /// Held records remain to be handed over (below `boundary`, after the cursor).
    pub fn draining(&self) -> bool {
        self.live() && self.cursor.saturating_add(1) < self.boundary
    }

    /// While draining, until [`Session::scanned`]: the outbox range `(after, before)` whose
    /// records' devices hold data.
    pub fn scan_due(&self) -> Option<(u64, u64)> {
        (self.draining() && self.held.is_none()).then_some((self.cursor, self.boundary))
    }

    /// The scan's answer: per device, its last outbox sequence in the range. A device whose
    /// last one was sent ahead already holds nothing.
    pub fn scanned(&mut self, last: BTreeMap<String, u64>) {
        let ahead = &self.table.sent_ahead;
        let held = last.into_iter().filter(|(d, seq)| ahead.get(d).is_none_or(|a| a < seq));
        self.held = Some(held.map(|(d, _)| d).collect());
    }

    /// How many records with metric values (raw samples do not count) the next read after the
    /// cursor may take: unbounded unless draining, then what the pace allows (`None`: none now).
    pub fn read_budget(&mut self, now_ms: i64) -> Option<usize> {
        if !self.draining() {
            return Some(usize::MAX);
        }
        self.pace.refill(now_ms);
        self.pace.budget()
    }

    /// While draining (once scanned): where the live reader reads from.
    pub fn live_after(&self) -> Option<u64> {
        (self.draining() && self.held.is_some()).then(|| self.live_pos.max(self.cursor))
    }

    /// The last outbox sequence handed over.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Records through `seq` are handed over (those that carried no metric values included).
    pub fn pass(&mut self, seq: u64) {
        self.cursor = self.cursor.max(seq);
    }

    /// Everything through `seq` was written and the store says so.
    pub fn stored(&mut self, seq: u64) {
        self.stored = self.stored.max(seq);
        self.stored_table = self.table.clone();
    }

    pub fn bd_seq(&self) -> u8 {
        self.bd_seq
    }

    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Hands over outbox records (in sequence order, after the cursor): their metric values
    /// as DDATA per device, with a DBIRTH first for a device with metrics it has not declared;
    /// records a device sent ahead are left out. The cursor moves past them. Nothing while not
    /// [`Session::live`].
    pub fn take(&mut self, records: &[(u64, OutboxRecord)], now_ms: i64) -> Vec<Publish> {
        if !self.live() {
            return Vec::new();
        }
        let mut chosen = Vec::with_capacity(records.len());
        for (seq, record) in records {
            self.cursor = self.cursor.max(*seq);
            let ahead = device(record).and_then(|d| self.table.sent_ahead.get(d));
            if ahead.is_none_or(|a| seq > a) {
                chosen.push((*seq, record));
            }
        }
        let cursor = self.cursor;
        self.table.sent_ahead.retain(|_, a| *a > cursor);
        self.pace.spend(chosen.iter().filter(|(seq, _)| *seq < self.boundary).count());
        self.messages(&chosen, now_ms)
    }

    /// While draining: live records read after [`Session::live_after`] through `last_read`.
    /// Those of devices with nothing held go now; the others are left to the cursor's reader.
    pub fn take_live(
        &mut self,
        records: &[(u64, OutboxRecord)],
        last_read: u64,
        now_ms: i64,
    ) -> Vec<Publish> {
        let Some(held) = self.held.take().filter(|_| self.draining()) else { return Vec::new() };
        let mut chosen = Vec::new();
        for (seq, record) in records {
            let Some(d) = device(record).filter(|d| !held.contains(*d)) else { continue };
            let ahead = self.table.sent_ahead.entry(d.to_owned()).or_default();
            if *seq > *ahead {
                *ahead = *seq;
                chosen.push((*seq, record));
            }
        }
        self.held = Some(held);
        self.live_pos = self.live_pos.max(last_read);
        self.messages(&chosen, now_ms)
    }

    /// The DDATA (and DBIRTHs) of `records`.
    fn messages(&mut self, records: &[(u64, &OutboxRecord)], now_ms: i64) -> Vec<Publish> {
        // Per device, in record order; devices in order of first appearance.
        let mut order: Vec<String> = Vec::new();
        let mut per_device: BTreeMap<String, Vec<(Update, bool)>> = BTreeMap::new();
        for (seq, record) in records {
            let historical = *seq < self.boundary;
            for u in updates(record, &self.cfg.iso) {
                if !per_device.contains_key(&u.device) {
                    order.push(u.device.clone());
                }
                per_device.entry(u.device.clone()).or_default().push((u, historical));
            }
        }
        let mut out = Vec::new();
        for device in order {
            let list = per_device.remove(&device).unwrap_or_default();
            let mut declared = false;
            for (u, _) in &list {
                declared |= self.table.declare(u);
            }
            if declared || !self.born.contains(&device) {
                out.push(self.device_birth(&device, now_ms));
            }
            let metrics = list
                .iter()
                .filter_map(|(u, historical)| {
                    let e = self.table.entry(u)?;
                    Some(data_metric(e, u, *historical))
                })
                .collect::<Vec<_>>();
            let historical = list.iter().filter(|(_, h)| *h).count();
            let payload = self.payload(now_ms, metrics);
            out.push(Publish {
                kind: Kind::DData,
                topic: self.topic("DDATA", Some(&device)),
                payload,
                historical,
            });
            for (u, _) in &list {
                self.table.sent(u);
            }
        }
        out
    }

    /// NBIRTH and every device's DBIRTH; `seq` starts again at 0; records from `next_outbox` on
    /// are live.
    fn births(&mut self, next_outbox: u64, now_ms: i64) -> Vec<Publish> {
        self.seq = 0;
        self.birthed = true;
        self.born.clear();
        self.boundary = next_outbox;
        self.held = None;
        self.live_pos = next_outbox.saturating_sub(1);
        self.pace.restart(now_ms);
        let rebirth = payload::Metric {
            name: Some(REBIRTH.into()),
            alias: Some(REBIRTH_ALIAS),
            timestamp: Some(ms(now_ms)),
            datatype: Some(datatype::BOOLEAN),
            value: Some(payload::metric::Value::BooleanValue(false)),
            ..Default::default()
        };
        let metrics = vec![self.bd_seq_metric(now_ms), rebirth];
        let nbirth = Publish {
            kind: Kind::NBirth,
            topic: self.topic("NBIRTH", None),
            payload: self.payload(now_ms, metrics),
            historical: 0,
        };
        let devices: Vec<String> = self.table.devices.keys().cloned().collect();
        let mut out = vec![nbirth];
        out.extend(devices.iter().map(|d| self.device_birth(d, now_ms)));
        out
    }

    fn device_birth(&mut self, device: &str, now_ms: i64) -> Publish {
        self.born.insert(device.to_owned());
        let metrics = self.table.devices.get(device).map_or_else(Vec::new, |m| {
            m.iter().map(|(name, e)| birth_metric(name, e, now_ms)).collect()
        });
        Publish {
            kind: Kind::DBirth,
            topic: self.topic("DBIRTH", Some(device)),
            payload: self.payload(now_ms, metrics),
            historical: 0,
        }
    }

    /// A payload with the next `seq`.
    fn payload(&mut self, now_ms: i64, metrics: Vec<payload::Metric>) -> Vec<u8> {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let p = Payload {
            timestamp: Some(ms(now_ms)),
            metrics,
            seq: Some(u64::from(seq)),
            ..Default::default()
        };
        p.encode_to_vec()
    }
}

fn ms(t: i64) -> u64 {
    u64::try_from(t).unwrap_or(0)
}

fn quality_property(q: Quality) -> payload::PropertySet {
    payload::PropertySet {
        keys: vec!["Quality".into()],
        values: vec![payload::PropertyValue {
            r#type: Some(datatype::INT32),
            is_null: None,
            value: Some(payload::property_value::Value::IntValue(q.code() as u32)),
        }],
    }
}

fn metric_value(v: &Value) -> payload::metric::Value {
    use payload::metric::Value as V;
    match v {
        Value::Double(d) => V::DoubleValue(*d),
        Value::Boolean(b) => V::BooleanValue(*b),
        Value::String(s) => V::StringValue(s.clone()),
        // Int64 travels as the two's complement in `long_value` (Sparkplug B 3.0).
        Value::Int64(i) => V::LongValue(*i as u64),
        Value::DateTime(t) => V::LongValue(ms(*t)),
    }
}

/// A metric of a DBIRTH: name, alias, type, the last value sent (or null when none was).
fn birth_metric(name: &str, e: &Entry, now_ms: i64) -> payload::Metric {
    let mut m = payload::Metric {
        name: Some(name.to_owned()),
        alias: Some(e.alias),
        datatype: Some(e.datatype),
        ..Default::default()
    };
    match &e.last {
        Some((v, ts, q)) => {
            m.timestamp = Some(ms(*ts));
            m.value = Some(metric_value(v));
            m.properties = Some(quality_property(*q));
        }
        None => {
            m.timestamp = Some(ms(now_ms));
            m.is_null = Some(true);
        }
    }
    m
}

/// A metric of a DDATA: alias only, its own timestamp, quality, and whether it is historical.
fn data_metric(e: &Entry, u: &Update, historical: bool) -> payload::Metric {
    payload::Metric {
        alias: Some(e.alias),
        timestamp: Some(ms(u.ts_ms)),
        datatype: Some(e.datatype),
        is_historical: historical.then_some(true),
        properties: Some(quality_property(u.quality)),
        value: Some(metric_value(&u.value)),
        ..Default::default()
    }
}

/// A `STATE` payload: Sparkplug B 3.0's `{"online": bool, "timestamp": ms}`, or 2.2's bare
/// `ONLINE`/`OFFLINE`.
fn parse_state(payload: &[u8]) -> Option<bool> {
    #[derive(serde::Deserialize)]
    struct State {
        online: bool,
    }
    if let Ok(s) = serde_json::from_slice::<State>(payload) {
        return Some(s.online);
    }
    match payload.trim_ascii() {
        b"ONLINE" => Some(true),
        b"OFFLINE" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
