//! `GET /metrics` over HTTP/1.1 (hyper 1): the Prometheus scrape endpoint on `[metrics] listen`,
//! and the status page at `/` (`crate::audit::status_page`) when the daemon gives one.
//!
//! Two routes. `GET` (and `HEAD`) of `/metrics` answer 200 with format 0.0.4, of `/` the page
//! (HTML, rendered on a blocking thread: it reads the store); any other method on them is 405,
//! any other path 404. The listener is bound by the caller ([`bind`] for `[metrics] listen`), so
//! tests bind port 0 and the daemon can bind before it drops privileges or reports READY.
//!
//! Each connection runs in its own task; at most [`MAX_CONNECTIONS`] at a time (a further one is
//! closed at once), and a client that sends no complete request head within [`HEADER_TIMEOUT`]
//! is dropped. When `shutdown` completes, the listener closes and open connections are
//! abandoned: a scrape is read-only, so cutting one short loses nothing.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use super::exposition::{self, CONTENT_TYPE as TEXT_FORMAT};
use super::Metrics;

/// Concurrent connections served; Prometheus uses one per target.
pub const MAX_CONNECTIONS: usize = 16;

/// Time a client has to send its request head.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The endpoint could not go on accepting connections.
#[derive(Debug, thiserror::Error)]
#[error("metrics endpoint on {addr}: {what}: {source}")]
pub struct ServeError {
    addr: String,
    what: &'static str,
    #[source]
    source: std::io::Error,
}

/// Renders the status page (blocking work); its error is shown as a 500 in words.
pub type Page = std::sync::Arc<dyn Fn() -> Result<String, String> + Send + Sync>;

/// Binds `[metrics] listen`. A failure is logged, not fatal: the gateway's data path matters more
/// than its scrape endpoint (and a second instance, or a test, may hold the port).
pub async fn bind(listen: &str) -> Option<TcpListener> {
    match TcpListener::bind(listen).await {
        Ok(l) => {
            let addr = l.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| listen.into());
            tracing::info!(%addr, "metrics at http://{addr}/metrics");
            Some(l)
        }
        Err(e) => {
            tracing::error!(listen, error = %e, "metrics endpoint not served: cannot bind");
            None
        }
    }
}

/// Serves `metrics` (and `page` at `/`) on `listener` until `shutdown` completes. Errors of one
/// connection are logged and end only that connection; an error of the listener itself is
/// returned.
pub async fn serve(
    listener: TcpListener,
    metrics: Metrics,
    page: Option<Page>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".to_owned());
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) if is_per_connection(&e) => {
                        tracing::debug!(error = %e, "metrics endpoint: accept failed");
                        continue;
                    }
                    Err(source) => return Err(ServeError { addr, what: "accept", source }),
                };
                if connections.len() >= MAX_CONNECTIONS {
                    tracing::warn!(%peer, "metrics endpoint: too many connections, closing one");
                    continue;
                }
                let metrics = metrics.clone();
                let page = page.clone();
                connections.spawn(async move {
                    let service = service_fn(move |req| {
                        let (metrics, page) = (metrics.clone(), page.clone());
                        async move { Ok::<_, Infallible>(respond(&metrics, page, &req).await) }
                    });
                    let served = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEADER_TIMEOUT)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                    if let Err(e) = served {
                        tracing::debug!(%peer, error = %e, "metrics endpoint: connection ended");
                    }
                });
            }
        }
    }
}

/// Accept errors that concern one connection (or a momentary shortage) rather than the listener.
fn is_per_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted | WouldBlock)
        || e.raw_os_error().is_some_and(|code| code == libc::EMFILE || code == libc::ENFILE)
}

/// The answer to one request.
async fn respond(
    metrics: &Metrics,
    page: Option<Page>,
    req: &Request<Incoming>,
) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let page = page.filter(|_| path == "/");
    if path != "/metrics" && page.is_none() {
        return plain(StatusCode::NOT_FOUND, "not found: metrics are at /metrics\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD are allowed\n");
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if let Some(page) = page {
        return match tokio::task::spawn_blocking(move || page()).await {
            Ok(Ok(html)) => {
                let body =
                    if req.method() == Method::HEAD { Bytes::new() } else { Bytes::from(html) };
                let mut r = Response::new(Full::new(body));
                let html = HeaderValue::from_static("text/html; charset=utf-8");
                r.headers_mut().insert(CONTENT_TYPE, html);
                r
            }
            Ok(Err(e)) => plain(StatusCode::INTERNAL_SERVER_ERROR, &format!("status: {e}\n")),
            Err(e) => plain(StatusCode::INTERNAL_SERVER_ERROR, &format!("status: {e}\n")),
        };
    }
    match exposition::encode(metrics) {
        Ok(text) => {
            let body = if req.method() == Method::HEAD { Bytes::new() } else { Bytes::from(text) };
            let mut r = Response::new(Full::new(body));
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT));
            r
        }
        Err(e) => {
            tracing::error!(error = %e, "metrics endpoint");
            plain(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e}\n"))
        }
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(text.to_owned())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

#[cfg(test)]
mod tests {
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

        let ok =
            exchange(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("content-type: text/plain; version=0.0.4"), "{ok}");
        assert!(ok.contains("\nlinegate_fsyncs_total 7\n"), "{ok}");

        let head =
            exchange(addr, "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && !head.contains("linegate_"), "{head}");

        let missing =
            exchange(addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
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
}
