//! The MQTT shell of `linegate capture`: an rumqttc client of its own, with a persistent session
//! (clean session off, a fixed client id), subscribed at QoS 1 to the gateway's `events/#` and
//! `gaps/#`, so that what the broker queued while the capture was away (its own reconnect, a
//! broker restart with persistence) still reaches it. It reconnects by itself and subscribes
//! again after every CONNACK.

use std::future::Future;
use std::time::Duration;

use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS, TlsConfiguration, Transport};

use super::Capture;
use crate::forward::ForwarderConfig;

/// Where and how to connect: the gateway's `[mqtt]` settings, another client id.
#[derive(Debug, Clone)]
pub struct CaptureOptions {
    pub mqtt: ForwarderConfig,
    pub client_id: String,
}

impl CaptureOptions {
    /// `{prefix}/{gateway}`: the gateway's topic root.
    pub fn root(&self) -> &str {
        &self.mqtt.session.topic_root
    }
}

/// Captures into `capture` until `stop` completes; `progress` is called about once a second
/// with what was taken so far, and `note` with each connection event worth telling.
pub async fn run(
    opts: &CaptureOptions,
    capture: &mut Capture,
    stop: impl Future<Output = ()>,
    mut progress: impl FnMut(&Capture),
    mut note: impl FnMut(&str),
) {
    let cfg = &opts.mqtt;
    let mut o = MqttOptions::new(&opts.client_id, &cfg.host, cfg.port);
    o.set_keep_alive(cfg.keep_alive)
        .set_clean_session(false)
        .set_max_packet_size(cfg.session.max_packet, cfg.session.max_packet);
    if let Some((u, p)) = &cfg.credentials {
        o.set_credentials(u, p);
    }
    if let Some(tls) = &cfg.tls {
        o.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(tls.clone())));
    }
    let (client, mut eventloop) = AsyncClient::new(o, 64);
    let root = opts.root().to_owned();
    let topics = [format!("{root}/events/#"), format!("{root}/gaps/#")];
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            _ = tick.tick() => progress(capture),
            ev = eventloop.poll() => match ev {
                Ok(Event::Incoming(Packet::ConnAck(c))) => {
                    note(&format!(
                        "connected to {}:{} as {} (session present: {})",
                        cfg.host, cfg.port, opts.client_id, c.session_present
                    ));
                    for t in &topics {
                        if let Err(e) = client.try_subscribe(t, QoS::AtLeastOnce) {
                            note(&format!("cannot subscribe to {t}: {e}"));
                        }
                    }
                }
                Ok(Event::Incoming(Packet::SubAck(_))) => {
                    note(&format!("subscribed to {}", topics.join(" and ")));
                }
                Ok(Event::Incoming(Packet::Publish(p))) => capture.take(&root, &p.topic, &p.payload),
                Ok(_) => {}
                Err(e) => {
                    note(&format!("connection to {}:{}: {e}; retrying in 1 s", cfg.host, cfg.port));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            },
        }
    }
    let _ = client.try_disconnect();
    progress(capture);
}
