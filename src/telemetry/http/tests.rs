use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use super::*;

/// Sends `request` on a fresh connection and reads the whole response.
async fn exchange(addr: std::net::SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn the_page_is_at_the_root_when_given() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let page: Page = std::sync::Arc::new(|| Ok("<html>gw</html>".to_string()));
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, Metrics::new(), Some(page), async {
        let _ = stopped.await;
    }));
    let got = exchange(addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
    assert!(got.contains("content-type: text/html; charset=utf-8"), "{got}");
    assert!(got.ends_with("<html>gw</html>"), "{got}");
    let other = exchange(addr, "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn routes_statuses_and_shutdown() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let metrics = Metrics::new();
    metrics.set_fsyncs(7);
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, metrics, None, async {
        let _ = stopped.await;
    }));

    let ok = exchange(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(ok.contains("content-type: text/plain; version=0.0.4"), "{ok}");
    assert!(ok.contains("\nlinegate_fsyncs_total 7\n"), "{ok}");

    let head =
        exchange(addr, "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && !head.contains("linegate_"), "{head}");

    let missing = exchange(addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert!(missing.starts_with("HTTP/1.1 404 Not Found\r\n"), "{missing}");

    let post = exchange(
        addr,
        "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(post.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{post}");
    assert!(post.contains("allow: GET, HEAD"), "{post}");

    let garbage = exchange(addr, "\x16\x03\x01 not http\r\n\r\n").await;
    assert!(garbage.is_empty() || garbage.starts_with("HTTP/1.1 400"), "{garbage}");

    // Shutdown, seen through the server's own result (after the listener closes, a connect
    // may reach whoever binds the same port next): it ran until told to stop, then returned
    // Ok promptly, dropping the listener it owned.
    assert!(!server.is_finished(), "the server stopped before its shutdown");
    stop.send(()).unwrap();
    let served = tokio::time::timeout(Duration::from_secs(10), server).await;
    served.expect("serve did not return within 10 s of its shutdown").unwrap().unwrap();
}

/// A server on port 0 within `limits` (the page, if given, at `/`), stopped when the sender is
/// dropped or sent to.
async fn start(
    limits: Limits,
    page: Option<Page>,
) -> (std::net::SocketAddr, oneshot::Sender<()>, tokio::task::JoinHandle<Result<(), ServeError>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve_within(listener, Metrics::new(), page, limits, async {
        let _ = stopped.await;
    }));
    (addr, stop, server)
}

/// What the server sends on `s` until it closes it, and whether it reset the connection
/// (rather than closing it in order), within a deadline.
async fn rest_of(s: &mut TcpStream) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        let mut buf = [0u8; 65536];
        loop {
            match s.read(&mut buf).await {
                Ok(0) => return false,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(e) => panic!("reading: {e}"),
            }
        }
    })
    .await;
    let reset = read.expect("the server did not close the connection within 30 s");
    (out, reset)
}

#[tokio::test]
async fn an_oversized_head_is_431_and_a_request_with_a_body_is_413() {
    let (addr, stop, server) = start(Limits::DEFAULT, None).await;
    let long = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(MAX_HEAD_BYTES)
    );
    let got = exchange(addr, &long).await;
    assert!(got.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "{got}");
    let many: String = (0..=MAX_HEADERS).map(|i| format!("X-H{i}: 1\r\n")).collect();
    let got = exchange(addr, &format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{many}\r\n")).await;
    assert!(got.starts_with("HTTP/1.1 431 "), "{got}");

    let sized = "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
    let got = exchange(addr, sized).await;
    assert!(got.starts_with("HTTP/1.1 413 Payload Too Large\r\n"), "{got}");
    assert!(got.ends_with("a request here carries no body\n") && !got.contains("linegate_"));
    let chunked = "GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    let got = exchange(addr, chunked).await;
    assert!(got.starts_with("HTTP/1.1 413 "), "{got}");

    // A head just within the limits is answered, and closes its connection.
    let fits = format!("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n", "a".repeat(7000));
    let got = exchange(addr, &fits).await;
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{}", &got[..got.len().min(200)]);
    assert!(got.contains("\r\nconnection: close\r\n"), "{}", &got[..got.len().min(400)]);
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_full_listener_closes_the_oldest_connection_waiting_on_its_client() {
    let limits =
        Limits { max_connections: 3, head_timeout: Duration::from_secs(600), ..Limits::DEFAULT };
    let (addr, stop, server) = start(limits, None).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
        held.push(s);
    }
    // Each newcomer closes the oldest of those still sending their heads (the head timeout is
    // far away: nothing else closes them).
    for i in 0..2 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
        let (got, reset) = rest_of(&mut held[i]).await;
        assert!(got.is_empty() && reset, "connection {i}: {got:?}, reset: {reset}");
        held.push(s);
    }
    // A scrape gets in while the three places are taken, and is answered.
    let got = exchange(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
    assert_eq!(rest_of(&mut held[2]).await, (vec![], true), "the third was the oldest left");
    // The two newest still wait for their heads: finishing one is answered.
    held[4].write_all(b"Host: x\r\n\r\n").await.unwrap();
    let (got, reset) = rest_of(&mut held[4]).await;
    let got = String::from_utf8(got).unwrap();
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n") && !reset, "{got}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_response_its_client_does_not_take_in_time_is_cut_off() {
    const BIG: usize = 16 << 20; // beyond what loopback's socket buffers hold
    let page: Page = std::sync::Arc::new(|| Ok("x".repeat(BIG)));
    let limits = Limits { write_timeout: Duration::from_millis(500), ..Limits::DEFAULT };
    let (addr, stop, server) = start(limits, Some(page)).await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut s = socket.connect(addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    // Not reading for longer than the write timeout is the point of the test.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (got, reset) = rest_of(&mut s).await;
    assert!(got.len() < BIG, "the whole page arrived ({} bytes): nothing cut it off", got.len());
    assert!(reset, "after {} bytes, closed in order: the kernel kept the rest", got.len());
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_page_renders_once_for_the_requests_that_arrive_while_it_renders() {
    use std::sync::atomic::AtomicUsize;
    let calls = std::sync::Arc::new(AtomicUsize::new(0));
    let (open, gate) = std::sync::mpsc::channel::<()>();
    let gate = std::sync::Mutex::new(gate);
    let counted = calls.clone();
    let page: Page = std::sync::Arc::new(move || {
        let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = gate.lock().unwrap().recv(); // the gate: open once, open for good
        Ok(format!("render {n}"))
    });
    let renderer = std::sync::Arc::new(PageRenderer::new(page));
    let first = tokio::spawn({
        let r = renderer.clone();
        async move { r.render().await }
    });
    let rendering = tokio::time::timeout(Duration::from_secs(30), async {
        while calls.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    rendering.await.expect("the first rendering began within 30 s");
    let waiting: Vec<_> = (0..9)
        .map(|_| {
            let r = renderer.clone();
            tokio::spawn(async move { r.render().await })
        })
        .collect();
    tokio::task::yield_now().await; // (a current-thread runtime: the nine take their turns)
    drop(open);
    assert_eq!(first.await.unwrap().unwrap(), Bytes::from("render 1"));
    for w in waiting {
        // They arrived while the first rendering ran: one more began after them, for all.
        assert_eq!(w.await.unwrap().unwrap(), Bytes::from("render 2"));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}
