//! Real parts for the MQTT tests: a mosquitto broker per test (own port, own config file in a
//! tempdir), an independent subscriber (`mosquitto_sub`, hex payloads), a TCP proxy that can hold
//! or delay the broker's replies, and a real `Store` filled the way the pipeline fills it.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use linegate::records::outbox::OutboxRecord;
use linegate::store::{SharedStore, Store, StoreOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream as TokioStream};
use tokio::sync::watch;

use super::{free_port, poll, wait_for, DEADLINE};

/// A mosquitto process with its config file.
pub struct Broker {
    pub port: u16,
    pub conf: PathBuf,
    child: Option<Child>,
}

impl Broker {
    /// Starts mosquitto on `port` with `extra` config lines; waits until it accepts connections.
    pub fn start(dir: &Path, port: u16, extra: &str) -> Broker {
        let conf = dir.join(format!("mosquitto-{port}.conf"));
        let text = format!(
            "user root\nlistener {port} 127.0.0.1\nallow_anonymous true\nlog_dest file {}\n\
             log_type all\n{extra}\n",
            dir.join(format!("mosquitto-{port}.log")).display()
        );
        std::fs::write(&conf, text).unwrap();
        let mut b = Broker { port, conf, child: None };
        b.restart();
        b
    }

    pub fn restart(&mut self) {
        // Debian installs the broker in /usr/sbin, which a non-root PATH may lack.
        let exe = ["/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or("mosquitto");
        let child = Command::new(exe)
            .arg("-c")
            .arg(&self.conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mosquitto must be installed (.ci/run installs it)");
        self.child = Some(child);
        let port = self.port;
        wait_for("mosquitto to listen", || TcpStream::connect(("127.0.0.1", port)).is_ok());
    }

    /// Stops the broker (SIGTERM) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
            let _ = c.wait();
        }
    }

    /// The broker's process id while it runs (to stop and continue it: a stalled broker).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log(&self) -> String {
        let log = self.conf.with_file_name(format!("mosquitto-{}.log", self.port));
        std::fs::read_to_string(log).unwrap_or_default()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `mosquitto_sub` on `{root}/#` at QoS 1, recording `topic hex-payload` lines.
pub struct Subscriber {
    out: PathBuf,
    child: Child,
    port: u16,
    /// Arguments for `mosquitto_sub` alone (the session).
    own: Vec<String>,
    /// Arguments for `mosquitto_sub` and the probe's `mosquitto_pub` (TLS, credentials).
    args: Vec<String>,
}

impl Subscriber {
    /// Starts and waits (at most [`DEADLINE`]) until it receives a probe published on
    /// `{root}/probe`. A `mosquitto_sub` that exited (a refused first connection) is started
    /// again. `args` go to both `mosquitto_sub` and the probe's `mosquitto_pub`.
    pub fn start(dir: &Path, port: u16, root: &str, args: &[&str]) -> Subscriber {
        Self::start_with(dir, port, root, &[], args)
    }

    /// Like [`Subscriber::start`], with a persistent session (`clean session` off) under
    /// `client_id`: while it is away, the broker queues what it would have received, and a
    /// subscriber started again with the same id gets it.
    pub fn with_session(dir: &Path, port: u16, root: &str, client_id: &str) -> Subscriber {
        Self::start_with(dir, port, root, &["-c", "-i", client_id], &[])
    }

    fn start_with(dir: &Path, port: u16, root: &str, own: &[&str], args: &[&str]) -> Subscriber {
        let out = dir.join(format!("sub-{port}-{}.txt", free_port()));
        let own: Vec<String> = own.iter().map(|s| s.to_string()).collect();
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let child = Self::spawn(&out, port, root, &[own.as_slice(), &args].concat());
        let mut s = Subscriber { out, child, port, own, args };
        let probe = format!("{root}/probe");
        let received = poll(DEADLINE, || {
            if let Ok(Some(_)) = s.child.try_wait() {
                s.child = Self::spawn(&s.out, port, root, &[s.own.as_slice(), &s.args].concat());
            }
            let _ = Command::new("mosquitto_pub")
                .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q", "1", "-t", &probe])
                .args(["-m", "probe"])
                .args(&s.args)
                .status();
            s.messages().iter().any(|(t, _)| *t == probe).then_some(())
        });
        assert!(received.is_some(), "timed out waiting for the subscriber to receive a probe");
        s
    }

    /// `mosquitto_sub` on `{root}/#` at QoS 1, appending `topic hex-payload` lines to `out`.
    fn spawn(out: &Path, port: u16, root: &str, args: &[String]) -> Child {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(out).unwrap();
        Command::new("mosquitto_sub")
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q", "1", "-F", "%t %x"])
            .args(["-t", &format!("{root}/#")])
            .args(args)
            .stdout(file)
            .stderr(Stdio::null())
            .spawn()
            .expect("mosquitto_sub must be installed (.ci/run installs it)")
    }

    /// Everything received so far, in arrival order (probes included).
    pub fn messages(&self) -> Vec<(String, Vec<u8>)> {
        let Ok(text) = std::fs::read_to_string(&self.out) else { return Vec::new() };
        // Only whole lines: the last piece is empty or a line still being written (which may be
        // cut anywhere, even after a whole number of hex digits).
        let mut lines: Vec<&str> = text.split('\n').collect();
        lines.pop();
        lines
            .into_iter()
            .filter_map(|l| {
                let (t, hex) = l.split_once(' ').unwrap_or((l, ""));
                let bytes: Option<Vec<u8>> = (0..hex.len() / 2)
                    .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
                    .collect();
                (hex.len() % 2 == 0).then_some(())?;
                Some((t.to_owned(), bytes?))
            })
            .collect()
    }

    /// Messages on topics containing `part`.
    pub fn on(&self, part: &str) -> Vec<(String, Vec<u8>)> {
        self.messages().into_iter().filter(|(t, _)| t.contains(part)).collect()
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Events `(event_id, seq, ts_ms, replayed)` in the `events/...` payloads received, in order.
pub fn received_events(msgs: &[(String, Vec<u8>)]) -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    for (t, p) in msgs.iter().filter(|(t, _)| t.contains("/events/")) {
        let v: serde_json::Value = serde_json::from_slice(p).unwrap();
        for e in v["events"].as_array().unwrap() {
            out.push((t.clone(), e.clone()));
        }
    }
    out
}

/// A TCP proxy in front of the broker: `open` false refuses connections and cuts existing ones;
/// replies from the broker reach the client `delay` late (each chunk, pipelined).
pub struct Proxy {
    pub port: u16,
    pub open: watch::Sender<bool>,
}

impl Proxy {
    pub async fn start(upstream: u16, delay: Duration) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (open, open_rx) = watch::channel(true);
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else { return };
                if !*open_rx.borrow() {
                    continue; // dropped: refused
                }
                tokio::spawn(pipe(client, upstream, delay, open_rx.clone()));
            }
        });
        Proxy { port, open }
    }
}

// The delay is paced by tokio's clock, which these tests never pause.
#[allow(clippy::disallowed_methods)]
async fn pipe(
    client: TokioStream,
    upstream: u16,
    delay: Duration,
    mut open: watch::Receiver<bool>,
) {
    let Ok(server) = TokioStream::connect(("127.0.0.1", upstream)).await else { return };
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let up = async move {
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = cr.read(&mut buf).await {
            if n == 0 || sw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    };
    let down_read = async move {
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = sr.read(&mut buf).await {
            if n == 0 || tx.send((tokio::time::Instant::now() + delay, buf[..n].to_vec())).is_err()
            {
                break;
            }
        }
    };
    let down_write = async move {
        while let Some((at, bytes)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if cw.write_all(&bytes).await.is_err() {
                break;
            }
        }
    };
    let closed = async move {
        while *open.borrow() {
            if open.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = up => {}
        _ = async { tokio::join!(down_read, down_write) } => {}
        _ = closed => {}
    }
}

/// A real store in `dir`, filled the way the pipeline fills it.
pub struct TestStore {
    pub store: SharedStore,
}

impl TestStore {
    pub fn open(dir: &Path) -> TestStore {
        let store = Store::open(&dir.join("store"), StoreOptions::default()).unwrap();
        TestStore { store: SharedStore::new(store) }
    }

    /// Appends `lines` to the journal and checkpoints with `records`; a record built by
    /// `records` may name the journal position of line `i` as `first + i`.
    pub fn add(&self, lines: &[Vec<u8>], records: impl FnOnce(u64) -> Vec<OutboxRecord>) {
        let mut s = self.store.write();
        let mut lines: Vec<(i64, Vec<u8>)> = lines.iter().map(|l| (0, l.clone())).collect();
        if lines.is_empty() {
            lines.push((0, b"{\"at\":0,\"kind\":\"tick\"}".to_vec()));
        }
        let range = s.append_journal(&lines).unwrap();
        let recs: Vec<Vec<u8>> = records(range.start).iter().map(OutboxRecord::encode).collect();
        s.checkpoint_with_ledger(range.end - 1, b"decider", &recs, &[]).unwrap();
    }

    pub fn pending(&self) -> usize {
        self.store.read().outbox_pending().count()
    }
}

pub fn event_json(machine: &str, sensor: &str, seq: u64) -> Vec<u8> {
    format!(
        r#"{{"event_id":"{machine}.{sensor}.{seq}","machine":"{machine}","sensor":"{sensor}","seq":{seq},"ts_ms":{},"clock":{{"state":"synced","err_ms":2}},"metric":"accel_rms","unit":"g","schema":1,"quality":"good","value":0.2}}"#,
        1_700_000_000_000 + 1000 * seq
    )
    .into_bytes()
}

pub fn event(machine: &str, sensor: &str, seq: u64) -> OutboxRecord {
    OutboxRecord::Event {
        machine: machine.into(),
        sensor: sensor.into(),
        seq,
        event_id: format!("{machine}.{sensor}.{seq}"),
        json: event_json(machine, sensor, seq),
    }
}

pub fn alert(machine: &str, n: u32) -> OutboxRecord {
    let json = format!(
        r#"{{"alert_id":"gw/high-vibration/{machine}/{n}","revision":0,"kind":"open","machine":"{machine}","also":[]}}"#
    );
    OutboxRecord::Alert {
        machine: machine.into(),
        alert_id: format!("gw/high-vibration/{machine}/{n}"),
        revision: 0,
        json: json.into_bytes(),
    }
}

/// A trace `samples` line of `n` samples and its outbox record at journal position `pos`.
pub fn samples_line(machine: &str, sensor: &str, t0_ms: i64, n: usize) -> Vec<u8> {
    let data: Vec<String> = (0..n).map(|i| format!("{}", (i % 100) as f64 / 64.0)).collect();
    format!(
        r#"{{"at":{t0_ms},"kind":"samples","machine":"{machine}","sensor":"{sensor}","t0_ms":{t0_ms},"rate_hz":3200,"unit":"g","axis":"z","data":[{}]}}"#,
        data.join(",")
    )
    .into_bytes()
}

pub fn samples(machine: &str, sensor: &str, pos: u64, t0_ms: i64, n: u32) -> OutboxRecord {
    OutboxRecord::Samples {
        machine: machine.into(),
        sensor: sensor.into(),
        journal_pos: pos,
        t0_ms,
        rate_hz: 3200.0,
        n,
        frame: None,
    }
}
