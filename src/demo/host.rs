//! The demo's Sparkplug B host (`linegate demo --sparkplug`): an MQTT client of its own on the
//! embedded broker, subscribed to `spBv1.0/{group}/#`, reading every message the way a SCADA host
//! would: births give each device's metric names, aliases and types, DDATA names metrics by alias
//! only and is resolved through them, `seq` must run without a gap from each NBIRTH. It decodes
//! with linegate's own prost types (`crate::sparkplug::proto`), which is enough to show the view;
//! the tests check the gateway with hosts nobody here wrote (`tests/sparkplug.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use prost::Message;

use super::DemoError;
use crate::sparkplug::proto::{datatype, payload, Payload};
use crate::sparkplug::{BD_SEQ, NAMESPACE};
use crate::timefmt;

/// A metric as a birth declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    pub name: String,
    pub alias: Option<u64>,
    pub datatype: u32,
}

/// What the host saw of one metric's DDATA values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Digest {
    pub values: u64,
    pub historical: u64,
    /// The earliest and latest original timestamps received.
    pub first_ts: Option<i64>,
    pub last_ts: Option<i64>,
    /// The value that came last, as text.
    pub last: String,
}

/// The host's view, built from every message received.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostView {
    /// Messages by type (`NBIRTH`, `NDEATH`, `DBIRTH`, `DDATA`, …).
    pub counts: BTreeMap<String, u64>,
    /// The last NBIRTH's `bdSeq` and metrics.
    pub node_birth: Option<(Option<u64>, Vec<Declared>)>,
    /// Per device, its last DBIRTH's metrics.
    pub births: BTreeMap<String, Vec<Declared>>,
    /// Per device and metric name, the DDATA values received.
    pub digest: BTreeMap<(String, String), Digest>,
    /// Historical values that came after a live value of the same metric in the same session.
    pub history_after_live: u64,
    /// What a host could not read: undecodable payloads, `seq` gaps, aliases no birth declared.
    pub problems: Vec<String>,
    /// The `seq` the next message of the node must carry (`None`: before an NBIRTH).
    expected_seq: Option<u64>,
    /// Per device: alias → metric name, from the births of the session.
    aliases: BTreeMap<String, BTreeMap<u64, String>>,
    /// Per device and metric: a live value came in this session.
    live_seen: BTreeMap<(String, String), bool>,
}

impl HostView {
    /// Takes one PUBLISH.
    pub fn take(&mut self, topic: &str, bytes: &[u8]) {
        let parts: Vec<&str> = topic.split('/').collect();
        let (kind, device) = match parts.as_slice() {
            [NAMESPACE, _group, kind, _node] => (*kind, None),
            [NAMESPACE, _group, kind, _node, device] => (*kind, Some(*device)),
            _ => return, // STATE and anything else that is not the node's
        };
        *self.counts.entry(kind.to_owned()).or_default() += 1;
        if !matches!(kind, "NBIRTH" | "NDEATH" | "DBIRTH" | "DDATA") {
            return;
        }
        let p = match Payload::decode(bytes) {
            Ok(p) => p,
            Err(e) => {
                self.problems.push(format!("{topic}: the payload does not decode: {e}"));
                return;
            }
        };
        match kind {
            "NDEATH" => {
                self.expected_seq = None;
                return;
            }
            "NBIRTH" => {
                self.aliases.clear();
                self.live_seen.clear();
                self.expected_seq = Some(0);
            }
            _ => {}
        }
        self.check_seq(topic, p.seq);
        let device = device.unwrap_or_default().to_owned();
        match kind {
            "NBIRTH" => {
                let bd_seq = p.metrics.iter().find(|m| m.name.as_deref() == Some(BD_SEQ));
                let bd_seq = bd_seq.and_then(|m| match m.value {
                    Some(payload::metric::Value::LongValue(v)) => Some(v),
                    _ => None,
                });
                self.node_birth = Some((bd_seq, declared(&p.metrics)));
            }
            "DBIRTH" => {
                let metrics = declared(&p.metrics);
                let table = self.aliases.entry(device.clone()).or_default();
                table.clear();
                table.extend(metrics.iter().filter_map(|m| Some((m.alias?, m.name.clone()))));
                self.births.insert(device, metrics);
            }
            _ => self.data(topic, &device, &p.metrics),
        }
    }

    fn check_seq(&mut self, topic: &str, seq: Option<u64>) {
        match (self.expected_seq, seq) {
            (Some(want), Some(got)) if want == got => {}
            (None, _) => self.problems.push(format!("{topic}: a message before any NBIRTH")),
            (want, got) => {
                self.problems.push(format!("{topic}: seq {got:?} where {want:?} was due"));
            }
        }
        self.expected_seq = seq.map(|s| (s + 1) % 256);
    }

    fn data(&mut self, topic: &str, device: &str, metrics: &[payload::Metric]) {
        for m in metrics {
            let name = match (&m.name, m.alias) {
                (Some(n), _) => Some(n.clone()),
                (None, Some(a)) => self.aliases.get(device).and_then(|t| t.get(&a)).cloned(),
                (None, None) => None,
            };
            let Some(name) = name else {
                self.problems.push(format!("{topic}: alias {:?} declared by no birth", m.alias));
                continue;
            };
            let key = (device.to_owned(), name);
            let historical = m.is_historical == Some(true);
            let live = self.live_seen.entry(key.clone()).or_default();
            if historical && *live {
                self.history_after_live += 1;
            }
            *live |= !historical;
            let d = self.digest.entry(key).or_default();
            d.values += 1;
            d.historical += u64::from(historical);
            if let Some(ts) = m.timestamp.and_then(|t| i64::try_from(t).ok()) {
                d.first_ts = Some(d.first_ts.map_or(ts, |f| f.min(ts)));
                d.last_ts = Some(d.last_ts.map_or(ts, |l| l.max(ts)));
            }
            d.last = value_text(m);
        }
    }

    /// Metric values received flagged `is_historical`.
    pub fn historical(&self) -> u64 {
        self.digest.values().map(|d| d.historical).sum()
    }

    /// Metric values received in DDATA.
    pub fn values(&self) -> u64 {
        self.digest.values().map(|d| d.values).sum()
    }

    /// The report, one line each.
    pub fn lines(&self, group: &str) -> Vec<String> {
        let mut out = vec![format!(
            "== Sparkplug B: the host's view of {NAMESPACE}/{group}/# (decoded with linegate's \
             prost types)"
        )];
        let counts: Vec<String> = ["NBIRTH", "DBIRTH", "DDATA", "NDEATH"]
            .iter()
            .map(|k| format!("{} {k}", self.counts.get(*k).copied().unwrap_or(0)))
            .collect();
        out.push(format!("messages: {}", counts.join(", ")));
        if let Some((bd_seq, metrics)) = &self.node_birth {
            let bd = bd_seq.map_or("none".to_owned(), |b| b.to_string());
            out.push(format!("NBIRTH (the last): bdSeq {bd}; {}", declared_list(metrics)));
        }
        for (device, metrics) in &self.births {
            out.push(format!("DBIRTH {device} (the last): {} metrics", metrics.len()));
            for m in metrics {
                let alias = m.alias.map_or("-".to_owned(), |a| a.to_string());
                out.push(format!("  alias {alias:>3}  {:<28} {}", m.name, type_name(m.datatype)));
            }
        }
        out.push("DDATA, per metric: values (historical), original timestamps, last value".into());
        for ((device, name), d) in &self.digest {
            out.push(format!(
                "  {device} {name:<28} {:>4} ({:>3} historical)  {} .. {}  last {}",
                d.values,
                d.historical,
                timefmt::time_or(d.first_ts, "-"),
                timefmt::time_or(d.last_ts, "-"),
                d.last
            ));
        }
        let order = if self.history_after_live == 0 {
            "each before the live values of its metric".to_owned()
        } else {
            format!("{} of them AFTER a live value of their metric", self.history_after_live)
        };
        out.push(format!(
            "sparkplug: {} values, {} of them historical (held while the broker was gone), {order}",
            self.values(),
            self.historical()
        ));
        if self.problems.is_empty() {
            out.push("sparkplug: every alias resolved by a birth; seq without a gap".into());
        }
        out.extend(self.problems.iter().map(|p| format!("  SPARKPLUG PROBLEM {p}")));
        out
    }

    /// True when a host read everything and history never followed live data.
    pub fn ok(&self) -> bool {
        self.problems.is_empty() && self.history_after_live == 0
    }
}

fn declared(metrics: &[payload::Metric]) -> Vec<Declared> {
    metrics
        .iter()
        .map(|m| Declared {
            name: m.name.clone().unwrap_or_default(),
            alias: m.alias,
            datatype: m.datatype.unwrap_or(0),
        })
        .collect()
}

fn declared_list(metrics: &[Declared]) -> String {
    let each: Vec<String> = metrics
        .iter()
        .map(|m| match m.alias {
            Some(a) => format!("{} {} (alias {a})", m.name, type_name(m.datatype)),
            None => format!("{} {}", m.name, type_name(m.datatype)),
        })
        .collect();
    format!("metrics: {}", each.join(", "))
}

fn type_name(t: u32) -> &'static str {
    match t {
        datatype::INT64 => "Int64",
        datatype::UINT32 => "UInt32",
        datatype::DOUBLE => "Double",
        datatype::BOOLEAN => "Boolean",
        datatype::STRING => "String",
        datatype::DATETIME => "DateTime",
        datatype::INT32 => "Int32",
        _ => "other",
    }
}

fn value_text(m: &payload::Metric) -> String {
    use payload::metric::Value as V;
    if m.is_null == Some(true) {
        return "null".into();
    }
    match (&m.value, m.datatype) {
        (Some(V::DoubleValue(d)), _) => format!("{d:.4}"),
        (Some(V::BooleanValue(b)), _) => b.to_string(),
        (Some(V::StringValue(s)), _) => s.clone(),
        (Some(V::LongValue(v)), Some(datatype::DATETIME)) => {
            i64::try_from(*v).map_or_else(|_| v.to_string(), timefmt::time)
        }
        (Some(V::LongValue(v)), _) => (*v as i64).to_string(),
        (Some(other), _) => format!("{other:?}"),
        (None, _) => "none".into(),
    }
}

/// Connects to the broker at `127.0.0.1:port`, subscribes to `spBv1.0/{group}/#` and returns once
/// the subscription is acknowledged; the view is built in the returned cell from then on.
pub async fn start(port: u16, group: &str) -> Result<Arc<Mutex<HostView>>, DemoError> {
    let view = Arc::new(Mutex::new(HostView::default()));
    let cell = view.clone();
    let filter = format!("{NAMESPACE}/{group}/#");
    super::subscriber::listen(
        "linegate-demo-sparkplug-host",
        port,
        &filter,
        move |topic, bytes| {
            if let Ok(mut v) = cell.lock() {
                v.take(topic, bytes);
            }
        },
    )
    .await?;
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use payload::metric::Value as V;

    const NODE: &str = "spBv1.0/plant/NBIRTH/gw";

    fn metric(name: Option<&str>, alias: u64, value: f64, ts: u64, hist: bool) -> payload::Metric {
        payload::Metric {
            name: name.map(str::to_owned),
            alias: Some(alias),
            timestamp: Some(ts),
            datatype: Some(datatype::DOUBLE),
            is_historical: hist.then_some(true),
            value: Some(V::DoubleValue(value)),
            ..Default::default()
        }
    }

    fn bytes(seq: u64, metrics: Vec<payload::Metric>) -> Vec<u8> {
        Payload { seq: Some(seq), metrics, ..Default::default() }.encode_to_vec()
    }

    fn birth(view: &mut HostView) {
        let bd = payload::Metric {
            name: Some(BD_SEQ.into()),
            datatype: Some(datatype::INT64),
            value: Some(V::LongValue(3)),
            ..Default::default()
        };
        view.take(NODE, &bytes(0, vec![bd]));
        let declared = metric(Some("s1/accel_rms"), 16, 0.0, 1, false);
        view.take("spBv1.0/plant/DBIRTH/gw/m1", &bytes(1, vec![declared]));
    }

    #[test]
    fn data_is_resolved_through_the_births_and_history_counted() {
        let mut v = HostView::default();
        birth(&mut v);
        let data = "spBv1.0/plant/DDATA/gw/m1";
        v.take(data, &bytes(2, vec![metric(None, 16, 0.5, 1_000, true)]));
        v.take(data, &bytes(3, vec![metric(None, 16, 0.25, 2_000, false)]));
        v.take("spBv1.0/STATE/scada", br#"{"online":true}"#);
        assert!(v.ok(), "{:?}", v.problems);
        assert_eq!(v.node_birth.as_ref().unwrap().0, Some(3));
        let d = &v.digest[&("m1".to_owned(), "s1/accel_rms".to_owned())];
        assert_eq!(
            (d.values, d.historical, d.first_ts, d.last_ts),
            (2, 1, Some(1_000), Some(2_000))
        );
        assert_eq!(d.last, "0.2500");
        assert_eq!((v.values(), v.historical(), v.counts["DDATA"]), (2, 1, 2));
        let lines = v.lines("plant").join("\n");
        assert!(lines.contains("alias  16  s1/accel_rms"), "{lines}");
        assert!(lines.contains("1970-01-01T00:00:01.000Z .. 1970-01-01T00:00:02.000Z"), "{lines}");
        assert!(lines.contains("2 values, 1 of them historical"), "{lines}");
    }

    #[test]
    fn gaps_unknown_aliases_and_history_after_live_data_are_problems() {
        let mut v = HostView::default();
        let data = "spBv1.0/plant/DDATA/gw/m1";
        v.take(data, &bytes(5, vec![metric(None, 16, 0.5, 1_000, false)]));
        assert_eq!(v.problems.len(), 2, "before a birth, and its alias unknown: {:?}", v.problems);
        let mut v = HostView::default();
        birth(&mut v);
        v.take(data, &bytes(2, vec![metric(None, 16, 0.5, 2_000, false)]));
        v.take(data, &bytes(3, vec![metric(None, 16, 0.5, 1_000, true)]));
        assert!(v.problems.is_empty(), "{:?}", v.problems);
        assert_eq!(v.history_after_live, 1);
        assert!(!v.ok());
        v.take(data, &bytes(9, vec![metric(None, 99, 0.5, 3_000, false)]));
        assert_eq!(v.problems.len(), 2, "{:?}", v.problems);
        assert!(v.problems[0].contains("seq Some(9) where Some(4) was due"), "{:?}", v.problems);
        v.take(data, b"\xff\xff");
        assert!(v.problems[2].contains("does not decode"), "{:?}", v.problems);
    }
}
