//! The metrics listener under hostile clients (issue 42, part 3). While 500 clients hold
//! half-open connections (a request line, then nothing; each connects again as soon as the
//! listener closes it) and 50 hold connections whose response they never read (a full request
//! for `/metrics` through a 1 KiB receive buffer; each connects again when the listener gives
//! up on it), a scraper gets 100 answers of 100 from `/metrics`, each within 100 ms, and 100 of
//! 100 from the status page at `/`.
//!
//! Generous for the attack, strict for the goal. The attack runs on a thread of its own, as
//! fast as it can, from ten addresses (127.0.0.10 to .19: devices on the line network); the
//! scraper is Prometheus on another (127.0.0.2). The listening socket has a 16 KiB send
//! buffer, which the connections it accepts inherit, so a 75 KiB response does not fit in the
//! kernel's buffers and the slow readers' responses really wait on them (over loopback's
//! default buffers it would be written whole and the connection closed at once). Before every
//! tenth scrape the test counts, in `/proc/net/tcp`, the attack's connections the kernel holds
//! open: at least three quarters of the listener's places, whatever the attack's own thread
//! got of the CPU.
//!
//! The open-file limit: the attack holds 550 sockets and the listener at most
//! `MAX_CONNECTIONS` (64), about 620 descriptors in this process, within the usual default of
//! 1024; the soft limit is raised to 4096 (or the hard limit) all the same, so that a smaller
//! default does not fail the test for the wrong reason.

mod support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use linegate::clock::{Clock, SystemClock};
use linegate::telemetry::http::{self, Page};
use linegate::telemetry::Metrics;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

const HALF_OPEN: usize = 500;
const SLOW_READERS: usize = 50;
const SCRAPES: usize = 100;
const WITHIN: Duration = Duration::from_millis(100);
/// The attack comes from this many devices (addresses 127.0.0.10 and on), the scrapes from
/// another ([`SCRAPER`]), as a Prometheus server and devices on a line network do.
const DEVICES: usize = 10;
const SCRAPER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// Raises the soft limit on open files to 4096 (at most the hard limit).
fn raise_open_files() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        let want = 4096.min(lim.rlim_max);
        if lim.rlim_cur < want {
            lim.rlim_cur = want;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        }
    }
}

/// Connections to `port` on loopback that the kernel holds open from their client's side now:
/// the attack as the listener meets it, whether or not the attack's own thread has run lately.
fn held(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let to = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[2] == to && f[3] == "01"
        })
        .count()
}

/// Sets SO_SNDBUF of `listener`, which the connections it accepts inherit.
fn set_send_buffer(listener: &tokio::net::TcpListener, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt reads `bytes` for the length given; the descriptor is the listener's.
    let set = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(set, 0, "setsockopt SO_SNDBUF: {}", std::io::Error::last_os_error());
}

/// Metrics of a large gateway: 24 machines of 8 sensors (about 75 KiB of text).
fn metrics() -> Metrics {
    let m = Metrics::new();
    for machine in 0..24 {
        let machine = format!("press-{machine}");
        m.set_machine_time(&machine, 1_700_000_060_000, 1_700_000_059_000);
        for sensor in 0..8 {
            let sensor = format!("{machine}-s{sensor}");
            m.set_sensor(&machine, &sensor, "live", Some(1_700_000_059_500));
        }
    }
    m.set_fsyncs(7);
    m
}

/// A status page of about 24 KiB.
fn page() -> Page {
    let rows: String =
        (0..600).map(|i| format!("<tr><td>press-{i}</td><td>live</td></tr>\n")).collect();
    let html = format!("<html><body><table>\n{rows}</table><p id=\"end\">gw</p></body></html>");
    Arc::new(move || Ok(html.clone()))
}

/// What the attack did, as its clients saw it.
#[derive(Default)]
struct Attack {
    /// Half-open clients that sent their request line at least once.
    started: AtomicUsize,
    /// Half-open connections established (their request line sent), counted once each.
    connections: AtomicUsize,
    /// Times the listener closed a half-open connection (each then connected again).
    closed: AtomicUsize,
    /// Slow readers whose response began to arrive at least once.
    slow_started: AtomicUsize,
    /// Slow readers' connections whose response began to arrive, counted once each.
    slow: AtomicUsize,
}

async fn connect(
    from: IpAddr,
    addr: SocketAddr,
    recv_buffer: Option<u32>,
) -> std::io::Result<tokio::net::TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    if let Some(size) = recv_buffer {
        socket.set_recv_buffer_size(size)?;
    }
    socket.connect(addr).await
}

/// The address of attacking device `i` (of [`DEVICES`]).
fn device(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + (i % DEVICES) as u8))
}

/// One half-open client: sends a request line, waits for the listener to close the connection,
/// and starts again, for as long as the attack runs.
async fn half_open(from: IpAddr, addr: SocketAddr, attack: Arc<Attack>) {
    let mut buf = [0u8; 4096];
    let mut first = true;
    loop {
        let Ok(mut s) = connect(from, addr, None).await else {
            // Out of ports or descriptors for a moment: the attack backs off and goes on.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if s.write_all(b"GET / HTTP/1.1\r\n").await.is_err() {
            continue;
        }
        attack.connections.fetch_add(1, Ordering::Relaxed);
        if std::mem::take(&mut first) {
            attack.started.fetch_add(1, Ordering::Relaxed);
        }
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
        attack.closed.fetch_add(1, Ordering::Relaxed);
    }
}

/// One slow reader: a full request for `/metrics` through a 1 KiB receive buffer; once the
/// response begins to arrive it is never read, and when the listener gives up on the
/// connection (or closes it unanswered) the reader connects again.
async fn slow_reader(from: IpAddr, addr: SocketAddr, attack: Arc<Attack>) {
    let mut first = true;
    loop {
        let Ok(mut s) = connect(from, addr, Some(1024)).await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: gw\r\n\r\n").await.is_err() {
            continue;
        }
        if !matches!(s.peek(&mut [0u8; 1]).await, Ok(n) if n > 0) {
            continue; // closed unanswered
        }
        attack.slow.fetch_add(1, Ordering::Relaxed);
        if std::mem::take(&mut first) {
            attack.slow_started.fetch_add(1, Ordering::Relaxed);
        }
        // Checking every 20 ms whether the listener closed it paces the attack, nothing more.
        while !closed_by_peer(&s) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The peer closed (or reset) the connection, whatever is still unread.
fn closed_by_peer(s: &tokio::net::TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLRDHUP, revents: 0 };
    // SAFETY: poll reads and writes the one pollfd passed, and waits not at all.
    let n = unsafe { libc::poll(&mut fd, 1, 0) };
    n < 0 || fd.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

/// One scrape of `path` on a new connection from `from`: the time it took (s), or what went
/// wrong.
async fn scrape(from: IpAddr, addr: SocketAddr, path: &str, expect: &str) -> Result<f64, String> {
    let clock = SystemClock::new();
    let exchange = async {
        let mut s = connect(from, addr, None).await.map_err(|e| format!("connect: {e}"))?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: gw\r\n\r\n");
        s.write_all(request.as_bytes()).await.map_err(|e| format!("write: {e}"))?;
        let mut got = Vec::new();
        match s.read_to_end(&mut got).await {
            Ok(_) => Ok(got),
            Err(e) => Err(format!("read after {} bytes: {e}", got.len())),
        }
    };
    let got = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| "no answer within 10 s".to_owned())??;
    let took = clock.monotonic_s();
    let text = String::from_utf8_lossy(&got);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("no head in {text:?}"))?;
    if !head.starts_with("HTTP/1.1 200 OK\r\n") {
        return Err(format!("answered {head:?}"));
    }
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|n| n.parse::<usize>().ok());
    if length != Some(body.len()) || !body.contains(expect) {
        return Err(format!("a body of {} bytes, content-length {length:?}", body.len()));
    }
    Ok(took)
}

/// `SCRAPES` scrapes of `path` one after the other from [`SCRAPER`]: the failures, and the
/// times of the others; `least_held` is lowered to the connections held before every tenth.
async fn scrapes(
    addr: SocketAddr,
    path: &str,
    expect: &str,
    least_held: &mut usize,
) -> (Vec<String>, Vec<f64>) {
    let (mut failed, mut took) = (Vec::new(), Vec::new());
    for i in 0..SCRAPES {
        if i % 10 == 0 {
            *least_held = (*least_held).min(held(addr.port()));
        }
        match scrape(SCRAPER, addr, path, expect).await {
            Ok(s) => took.push(s),
            Err(e) => failed.push(format!("scrape {i} of {path}: {e}")),
        }
    }
    took.sort_by(f64::total_cmp);
    (failed, took)
}

#[test]
fn scrapes_are_answered_while_hostile_clients_hold_connections() {
    raise_open_files();
    // The listener, on a runtime of its own as in the daemon (two workers).
    let (bound, addr_rx) = std::sync::mpsc::channel();
    let (stop_server, server_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            // Bound as the daemon binds it (a backlog of 1024).
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            set_send_buffer(&listener, 16 * 1024);
            bound.send(listener.local_addr().unwrap()).unwrap();
            http::serve(listener, metrics(), Some(page()), async {
                let _ = server_stopped.await;
            })
            .await
        })
    });
    let addr: SocketAddr = addr_rx.recv().unwrap();

    // The attack, on a runtime of its own.
    let attack = Arc::new(Attack::default());
    let (stop_attack, attack_stopped) = tokio::sync::oneshot::channel::<()>();
    let attacker = std::thread::spawn({
        let attack = attack.clone();
        move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                for i in 0..SLOW_READERS {
                    tokio::spawn(slow_reader(device(i), addr, attack.clone()));
                }
                for i in 0..HALF_OPEN {
                    tokio::spawn(half_open(device(i), addr, attack.clone()));
                }
                let _ = attack_stopped.await;
            });
            rt.shutdown_background();
        }
    });
    support::wait_for("every attacking connection established", || {
        attack.slow_started.load(Ordering::Relaxed) == SLOW_READERS
            && attack.started.load(Ordering::Relaxed) == HALF_OPEN
    });
    let count = |c: &AtomicUsize| c.load(Ordering::Relaxed);
    let before = (count(&attack.closed), count(&attack.connections), count(&attack.slow));
    let clock = SystemClock::new();

    let scraper = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut least_held = usize::MAX;
    let (mut failed, metrics_took) =
        scraper.block_on(scrapes(addr, "/metrics", "\nlinegate_fsyncs_total 7\n", &mut least_held));
    let (page_failed, page_took) =
        scraper.block_on(scrapes(addr, "/", "<p id=\"end\">gw</p>", &mut least_held));
    failed.extend(page_failed);

    let closed = count(&attack.closed) - before.0;
    let slow = count(&attack.slow) - before.2;
    let connections = count(&attack.connections) - before.1;
    let seconds = clock.monotonic_s();
    stop_attack.send(()).unwrap();
    attacker.join().unwrap();
    stop_server.send(()).unwrap();
    server.join().unwrap().unwrap();

    let summary = |took: &[f64]| match (took.first(), took.get(took.len() / 2), took.last()) {
        (Some(min), Some(median), Some(max)) => format!(
            "{} answered, {:.1} / {:.1} / {:.1} ms (min / median / max)",
            took.len(),
            min * 1e3,
            median * 1e3,
            max * 1e3
        ),
        _ => "none answered".to_owned(),
    };
    let report = format!(
        "/metrics: {}; /: {}; meanwhile ({seconds:.1} s) the half-open clients made \
         {connections} connections and the listener closed {closed}; the slow readers were \
         sent {slow} responses they did not read; at least {least_held} connections held",
        summary(&metrics_took),
        summary(&page_took)
    );
    eprintln!("{report}");
    assert!(failed.is_empty(), "{} scrapes failed: {failed:#?}\n{report}", failed.len());
    let late: Vec<_> =
        metrics_took.iter().chain(&page_took).filter(|&&s| s > WITHIN.as_secs_f64()).collect();
    assert!(
        late.is_empty(),
        "{} scrapes took longer than {WITHIN:?}: {late:?}\n{report}",
        late.len()
    );
    // The attack went on throughout: before every tenth scrape it held most of the listener's
    // places, the listener kept closing its connections to let scrapes in, and its clients kept
    // connecting again.
    assert!(least_held >= http::MAX_CONNECTIONS * 3 / 4, "{report}");
    assert!(closed > 0 && connections > 0 && slow > 0, "{report}");
}
