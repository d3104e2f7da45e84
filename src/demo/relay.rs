//! The broker's network path, as the gateway sees it: a loopback TCP relay in front of the
//! embedded broker that the demo can cut and restore. Cut, it closes every relayed connection and
//! closes each new one at once, as a broker that went away would; the broker itself (and the
//! demo's subscriber, connected to it directly) keeps running, so nothing published before the
//! cut is lost on the subscriber's side and every gap in delivery is the gateway's to fill.

use std::net::{Ipv4Addr, SocketAddr};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::DemoError;

/// The relay: where the gateway connects, and the switch.
#[derive(Debug)]
pub struct Relay {
    pub port: u16,
    up: watch::Sender<bool>,
}

impl Relay {
    /// Listens on a free loopback port and relays every connection to `127.0.0.1:target`.
    pub async fn start(target: u16) -> Result<Relay, DemoError> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(DemoError::io("the relay's listener"))?;
        let port = listener.local_addr().map_err(DemoError::io("the relay's listener"))?.port();
        let (up, up_rx) = watch::channel(true);
        tokio::spawn(accept(listener, SocketAddr::from((Ipv4Addr::LOCALHOST, target)), up_rx));
        Ok(Relay { port, up })
    }

    /// Cuts (`false`) or restores (`true`) the path to the broker.
    pub fn set_up(&self, up: bool) {
        self.up.send_replace(up);
    }
}

async fn accept(listener: TcpListener, target: SocketAddr, up: watch::Receiver<bool>) {
    loop {
        let Ok((client, _)) = listener.accept().await else { continue };
        if !*up.borrow() {
            drop(client);
            continue;
        }
        tokio::spawn(relay(client, target, up.clone()));
    }
}

/// Copies both ways until either side closes or the path is cut.
async fn relay(mut client: TcpStream, target: SocketAddr, mut up: watch::Receiver<bool>) {
    let Ok(mut broker) = TcpStream::connect(target).await else { return };
    let _ = client.set_nodelay(true);
    let _ = broker.set_nodelay(true);
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut broker) => {}
        _ = up.wait_for(|up| !*up) => {}
    }
}
