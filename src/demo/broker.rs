//! The demo's MQTT broker: rumqttd embedded in this process, on a free loopback port, MQTT 3.1.1
//! only, no TLS, no websockets, no console, no metrics endpoint.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use rumqttd::{Broker, Config, ConnectionSettings, RouterConfig, ServerSettings};

use super::DemoError;
use crate::clock::{Clock, SystemClock};

/// The largest packet the broker takes: above the forwarder's default `max_packet` (256 KiB).
const MAX_PAYLOAD: usize = 1 << 20;

/// A free TCP port on 127.0.0.1 (bound once and released: rumqttd binds its own listener and does
/// not report the port it got).
pub fn free_port() -> Result<u16, DemoError> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(DemoError::io("a free port"))?;
    Ok(l.local_addr().map_err(DemoError::io("a free port"))?.port())
}

/// Starts the broker on `127.0.0.1:port` on threads of its own (they live as long as the process)
/// and waits until it accepts connections.
pub fn start(port: u16) -> Result<(), DemoError> {
    let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let server = ServerSettings {
        name: "demo-v4".to_owned(),
        listen,
        tls: None,
        next_connection_delay_ms: 1,
        connections: ConnectionSettings {
            connection_timeout_ms: 5_000,
            max_payload_size: MAX_PAYLOAD,
            max_inflight_count: 256,
            auth: None,
            external_auth: None,
            dynamic_filters: true,
        },
    };
    let config = Config {
        id: 0,
        router: RouterConfig {
            max_connections: 16,
            max_outgoing_packet_count: 1_000,
            max_segment_size: 16 << 20,
            max_segment_count: 4,
            ..RouterConfig::default()
        },
        v4: Some(HashMap::from([("1".to_owned(), server)])),
        ..Config::default()
    };
    std::thread::Builder::new()
        .name("mqtt-broker".to_owned())
        .spawn(move || {
            if let Err(e) = Broker::new(config).start() {
                tracing::error!("embedded MQTT broker stopped: {e}");
            }
        })
        .map_err(DemoError::io("the broker thread"))?;
    let clock = SystemClock::new();
    let deadline = clock.monotonic_ms() + 10_000;
    while TcpStream::connect(listen).is_err() {
        if clock.monotonic_ms() > deadline {
            return Err(DemoError::Setup(format!(
                "the embedded MQTT broker did not listen on {listen} within 10 s"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}
