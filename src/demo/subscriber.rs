//! The demo's independent subscriber: an MQTT client of its own (rumqttc, QoS 1) on the embedded
//! broker, subscribed to everything under the gateway's topic root, counting what arrives. It
//! decodes every payload the way a consumer would: event batches, alert records, raw-sample
//! frames, gap notices, the status topic.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};

use super::DemoError;
use crate::records::samples_codec::SamplesFrame;

/// What arrived, each thing once however often it was delivered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Arrivals {
    /// Event ids received on `events/...`.
    pub events: BTreeSet<String>,
    /// Of those, the ones that came with `"replayed": true` (sent from backlog).
    pub replayed: BTreeSet<String>,
    /// `(alert_id, revision)` received on `alerts/...`.
    pub alerts: BTreeSet<(String, u32)>,
    /// `(topic, t0_ms, first_index)` of the raw-sample frames received on `samples/...`.
    pub samples: BTreeSet<(String, i64, u32)>,
    /// Gap notices received.
    pub gaps: u64,
    /// Every PUBLISH received (redeliveries included).
    pub publishes: u64,
    /// The last status payload (`{"state":"online"}` / `offline`).
    pub status: Option<String>,
    /// Payloads that did not decode: topic and why.
    pub undecodable: Vec<String>,
}

impl Arrivals {
    /// Takes one PUBLISH on `topic` (under `root/`).
    pub fn take(&mut self, root: &str, topic: &str, payload: &[u8]) {
        self.publishes += 1;
        let suffix = topic.strip_prefix(root).and_then(|t| t.strip_prefix('/')).unwrap_or(topic);
        let kind = suffix.split('/').next().unwrap_or("");
        let bad = |why: String| format!("{topic}: {why}");
        match kind {
            "events" => match serde_json::from_slice::<EventBatch>(payload) {
                Ok(b) => {
                    for e in b.events {
                        if e.replayed {
                            self.replayed.insert(e.event_id.clone());
                        }
                        self.events.insert(e.event_id);
                    }
                }
                Err(e) => self.undecodable.push(bad(e.to_string())),
            },
            "alerts" => match serde_json::from_slice::<AlertHead>(payload) {
                Ok(a) => {
                    self.alerts.insert((a.alert_id, a.revision));
                }
                Err(e) => self.undecodable.push(bad(e.to_string())),
            },
            "samples" => match SamplesFrame::decode(payload) {
                Ok(f) => {
                    self.samples.insert((suffix.to_owned(), f.t0_ms, f.first_index));
                }
                Err(e) => self.undecodable.push(bad(e.to_string())),
            },
            "gaps" => self.gaps += 1,
            "status" => self.status = Some(String::from_utf8_lossy(payload).into_owned()),
            _ => self.undecodable.push(bad("unexpected topic".to_owned())),
        }
    }
}

#[derive(serde::Deserialize)]
struct EventBatch {
    events: Vec<EventHead>,
}

#[derive(serde::Deserialize)]
struct EventHead {
    event_id: String,
    #[serde(default)]
    replayed: bool,
}

#[derive(serde::Deserialize)]
struct AlertHead {
    alert_id: String,
    revision: u32,
}

/// Connects to the broker at `127.0.0.1:port`, subscribes to `root/#` and returns once the
/// subscription is acknowledged; arrivals are counted into the returned cell from then on.
pub async fn start(port: u16, root: &str) -> Result<Arc<Mutex<Arrivals>>, DemoError> {
    let arrivals = Arc::new(Mutex::new(Arrivals::default()));
    let (cell, prefix) = (arrivals.clone(), root.to_owned());
    let filter = format!("{root}/#");
    listen("linegate-demo-subscriber", port, &filter, move |topic, payload| {
        if let Ok(mut a) = cell.lock() {
            a.take(&prefix, topic, payload);
        }
    })
    .await?;
    Ok(arrivals)
}

/// Connects as `client_id` to the broker at `127.0.0.1:port`, subscribes to `filter` (QoS 1) and
/// returns once the subscription is acknowledged; from then on a task hands every PUBLISH to
/// `on_publish` (reconnecting after an error).
pub(super) async fn listen(
    client_id: &str,
    port: u16,
    filter: &str,
    mut on_publish: impl FnMut(&str, &[u8]) + Send + 'static,
) -> Result<(), DemoError> {
    let mut opts = MqttOptions::new(client_id, "127.0.0.1", port);
    opts.set_keep_alive(Duration::from_secs(30));
    opts.set_max_packet_size(1 << 20, 1 << 20);
    let (client, mut eventloop) = AsyncClient::new(opts, 64);
    client
        .subscribe(filter, QoS::AtLeastOnce)
        .await
        .map_err(|e| DemoError::Setup(format!("subscribing to {filter}: {e}")))?;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), eventloop.poll()).await {
            Ok(Ok(Event::Incoming(Packet::SubAck(_)))) => break,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(DemoError::Setup(format!("{client_id} cannot connect: {e}"))),
            Err(_) => return Err(DemoError::Setup("no SUBACK from the broker in 10 s".into())),
        }
    }
    let who = client_id.to_owned();
    tokio::spawn(async move {
        let _client = client; // dropping it would end the event loop
        loop {
            match eventloop.poll().await {
                Ok(Event::Incoming(Packet::Publish(p))) => on_publish(&p.topic, &p.payload),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!("{who}: {e}; reconnecting");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Unit;

    #[test]
    fn counts_each_thing_once_and_the_replayed_flag() {
        let mut a = Arrivals::default();
        let batch =
            br#"{"events":[{"event_id":"g.s.1","ts_ms":1},{"event_id":"g.s.2","replayed":true}]}"#;
        a.take("lg/gw", "lg/gw/events/m/s", batch);
        a.take("lg/gw", "lg/gw/events/m/s", batch);
        a.take("lg/gw", "lg/gw/alerts/m", br#"{"alert_id":"x","revision":1,"kind":"amend"}"#);
        let frame = SamplesFrame {
            t0_ms: 5,
            rate_hz: 10.0,
            first_index: 0,
            unit: Unit::G,
            axis: String::new(),
            values: vec![0.5],
        };
        a.take("lg/gw", "lg/gw/samples/m/s", &frame.encode());
        a.take("lg/gw", "lg/gw/status", br#"{"state":"online"}"#);
        a.take("lg/gw", "lg/gw/events/m/s", b"not json");
        assert_eq!(a.events, ["g.s.1".to_owned(), "g.s.2".to_owned()].into());
        assert_eq!(a.replayed, ["g.s.2".to_owned()].into());
        assert_eq!(a.alerts, [("x".to_owned(), 1)].into());
        assert_eq!(a.samples, [("samples/m/s".to_owned(), 5, 0)].into());
        assert_eq!((a.publishes, a.status.as_deref()), (6, Some(r#"{"state":"online"}"#)));
        assert_eq!(a.undecodable.len(), 1);
        assert!(a.undecodable[0].starts_with("lg/gw/events/m/s: "), "{:?}", a.undecodable);
    }
}
