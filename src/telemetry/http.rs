//! `GET /metrics` over HTTP/1.1 (hyper 1): the Prometheus scrape endpoint on `[metrics] listen`,
//! and the status page at `/` (`crate::audit::status_page`) when the daemon gives one.
//!
//! Two routes. `GET` (and `HEAD`) of `/metrics` answer 200 with format 0.0.4, of `/` the page
//! (HTML, rendered on a blocking thread: it reads the store); any other method on them is 405,
//! a request with a body 413, any other path 404. The listener is bound by the caller ([`bind`]
//! for `[metrics] listen`), so tests bind port 0 and the daemon can bind before it drops
//! privileges or reports READY.
//!
//! No client can keep the others out ([`Limits`]). One request per connection: every response
//! closes it. The request head must arrive within [`HEAD_TIMEOUT`] of the connection's accept,
//! with at most [`MAX_HEAD_BYTES`] and [`MAX_HEADERS`] header fields (else 431); the response
//! must be taken by the client within [`WRITE_TIMEOUT`] of its first byte. At most
//! [`MAX_CONNECTIONS`] connections are open; when all are, a newcomer takes the place of one
//! waiting on its client (for the rest of its request head, or to read its response): of the
//! address holding the most connections, the oldest. A connection given up on is reset, so the
//! kernel does not keep what its client did not read. Accepting waits while the last
//! connections accepted have not been looked at, so it cannot outrun serving, and the listen
//! queue holds [`LISTEN_BACKLOG`] connections. Responses are made whole before a byte is
//! written and hold nothing while they wait on their client; the page renders once for all
//! the requests that arrive while it renders, so requests cannot pile up work on the store.
//!
//! When `shutdown` completes, the listener closes and open connections are abandoned: a scrape
//! is read-only, so cutting one short loses nothing.

mod connections;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Body as _, Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinSet};

use self::connections::{Activity, ClientIo, Slots};
use super::exposition::{self, CONTENT_TYPE as TEXT_FORMAT};
use super::Metrics;

/// Connections open at once. Prometheus uses one per target and scrape; a browser on the status
/// page one or two.
pub const MAX_CONNECTIONS: usize = 64;

/// Time a client has, from its connection's accept, to send its whole request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// Time a client has to take the whole response, from its first byte written (Prometheus'
/// default scrape timeout).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest request head (request line and headers), in bytes.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;

/// Most header fields in a request.
pub const MAX_HEADERS: usize = 32;

/// Connections the kernel holds for the listener until it accepts them. While every place is
/// taken by a connection being answered, newcomers wait here; beyond it, the kernel drops their
/// SYNs and they retry after a second or more.
pub const LISTEN_BACKLOG: i32 = 1024;

/// Connections accepted and not yet looked at by their task, at most.
const MAX_UNPOLLED: usize = 4;

/// How long accepting pauses when the process is out of file descriptors.
const OUT_OF_FILES_PAUSE: Duration = Duration::from_millis(50);

/// The listener's limits: [`Limits::DEFAULT`] in the daemon; tests may shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// [`MAX_CONNECTIONS`]
    pub max_connections: usize,
    /// [`HEAD_TIMEOUT`]
    pub head_timeout: Duration,
    /// [`WRITE_TIMEOUT`]
    pub write_timeout: Duration,
    /// [`MAX_HEAD_BYTES`]
    pub max_head_bytes: usize,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        max_connections: MAX_CONNECTIONS,
        head_timeout: HEAD_TIMEOUT,
        write_timeout: WRITE_TIMEOUT,
        max_head_bytes: MAX_HEAD_BYTES,
    };
}

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

/// Serves `metrics` (and `page` at `/`) on `listener` within [`Limits::DEFAULT`] until
/// `shutdown` completes. Errors of one connection are logged and end only that connection; an
/// error of the listener itself is returned.
pub async fn serve(
    listener: TcpListener,
    metrics: Metrics,
    page: Option<Page>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    serve_within(listener, metrics, page, Limits::DEFAULT, shutdown).await
}

/// [`serve`] within `limits`.
pub async fn serve_within(
    listener: TcpListener,
    metrics: Metrics,
    page: Option<Page>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".to_owned());
    if let Err(e) = lengthen_listen_queue(&listener) {
        tracing::warn!(%addr, error = %e, "metrics endpoint: the listen queue stays as bound");
    }
    let answers = Arc::new(Answers { metrics, page: page.map(PageRenderer::new) });
    let mut tasks = JoinSet::new();
    let mut slots: Slots<AbortHandle> = Slots::new();
    let mut displaced = 0u64;
    let waiting = Arc::new(tokio::sync::Notify::new());
    tokio::pin!(shutdown);
    loop {
        // Newcomers wait in the listen queue while the connections accepted last are not yet
        // looked at (so accepting cannot outrun serving, and a client that sent its head with
        // its connection is answered before more newcomers need places), and while every place
        // is taken and no connection waits on its client.
        let room = slots.unpolled() < MAX_UNPOLLED
            && (slots.len() < limits.max_connections || slots.victim().is_some());
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            () = waiting.notified(), if !room => {}
            Some(ended) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                let id = match ended {
                    Ok((id, ())) => id,
                    Err(e) => e.id(),
                };
                if let Some(key) = slots.find(|h| h.id() == id) {
                    slots.remove(key);
                }
            }
            accepted = listener.accept(), if room => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) if is_out_of_files(&e) => {
                        tracing::warn!(error = %e, "metrics endpoint: cannot accept, pausing");
                        tokio::time::sleep(OUT_OF_FILES_PAUSE).await;
                        continue;
                    }
                    Err(e) if is_per_connection(&e) => {
                        tracing::debug!(error = %e, "metrics endpoint: accept failed");
                        continue;
                    }
                    Err(source) => return Err(ServeError { addr, what: "accept", source }),
                };
                if slots.len() >= limits.max_connections {
                    let Some(handle) = slots.victim().and_then(|key| slots.remove(key)) else {
                        tracing::warn!(%peer, "metrics endpoint: connections full, none waiting on its client: closing the new one");
                        continue;
                    };
                    handle.abort();
                    displaced += 1;
                    if displaced.is_power_of_two() {
                        tracing::warn!(
                            %peer,
                            displaced,
                            max = limits.max_connections,
                            "metrics endpoint: connections full; closed ones waiting on their clients to let new ones in"
                        );
                    }
                }
                let activity = Activity::new(waiting.clone());
                let handle =
                    tasks.spawn(connection(stream, peer, activity.clone(), answers.clone(), limits));
                slots.insert(peer.ip(), activity, handle);
                // The new connection's task runs next: a client that sent its head with its
                // connection is being answered, and so is kept, before the next accept.
                tokio::task::yield_now().await;
            }
        }
    }
}

/// Sets the listen queue of `listener` to [`LISTEN_BACKLOG`] (Linux takes a second `listen`
/// on a listening socket as a new length; tokio binds with 128).
#[allow(unsafe_code)]
fn lengthen_listen_queue(listener: &TcpListener) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: listen(2) on a descriptor the listener owns for the whole call; no memory passed.
    let done = unsafe { libc::listen(listener.as_raw_fd(), LISTEN_BACKLOG) };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// One connection: one request read and answered within `limits`.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    activity: Arc<Activity>,
    answers: Arc<Answers>,
    limits: Limits,
) {
    let io = TokioIo::new(ClientIo::new(stream, activity.clone(), limits.write_timeout));
    let service = service_fn(move |req| {
        activity.serving();
        let answers = answers.clone();
        async move { Ok::<_, Infallible>(answers.respond(&req).await) }
    });
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .max_header_size(limits.max_head_bytes)
        .max_headers(MAX_HEADERS)
        .keep_alive(false)
        .serve_connection(io, service)
        .await;
    if let Err(e) = served {
        tracing::debug!(%peer, error = %e, "metrics endpoint: connection ended");
    }
}

/// Out of file descriptors: the listener is fine, the process must wait for some to close.
fn is_out_of_files(e: &std::io::Error) -> bool {
    e.raw_os_error().is_some_and(|code| code == libc::EMFILE || code == libc::ENFILE)
}

/// Accept errors that concern one connection (or a momentary shortage) rather than the listener.
fn is_per_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted | WouldBlock)
}

/// What the endpoint answers with.
struct Answers {
    metrics: Metrics,
    page: Option<PageRenderer>,
}

impl Answers {
    /// The answer to one request.
    async fn respond(&self, req: &Request<Incoming>) -> Response<Full<Bytes>> {
        let path = req.uri().path();
        let page = self.page.as_ref().filter(|_| path == "/");
        if path != "/metrics" && page.is_none() {
            return plain(StatusCode::NOT_FOUND, "not found: metrics are at /metrics\n");
        }
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD are allowed\n");
            r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        if !req.body().is_end_stream() {
            return plain(StatusCode::PAYLOAD_TOO_LARGE, "a request here carries no body\n");
        }
        let head = req.method() == Method::HEAD;
        if let Some(page) = page {
            return match page.render().await {
                Ok(html) => {
                    let mut r = Response::new(Full::new(if head { Bytes::new() } else { html }));
                    let html = HeaderValue::from_static("text/html; charset=utf-8");
                    r.headers_mut().insert(CONTENT_TYPE, html);
                    r
                }
                Err(e) => plain(StatusCode::INTERNAL_SERVER_ERROR, &format!("status: {e}\n")),
            };
        }
        match exposition::encode(&self.metrics) {
            Ok(text) => {
                let body = if head { Bytes::new() } else { Bytes::from(text) };
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
}

/// The status page, rendered on a blocking thread one at a time: a request takes the result of
/// a rendering that began after it arrived, if one has finished by the time its turn comes, so
/// any number of requests at once cost at most two renderings.
struct PageRenderer {
    page: Page,
    /// Renderings begun so far.
    begun: AtomicU64,
    /// The last rendering finished: its number (1 for the first) and its result.
    last: tokio::sync::Mutex<(u64, Result<Bytes, String>)>,
}

impl PageRenderer {
    fn new(page: Page) -> Self {
        PageRenderer {
            page,
            begun: AtomicU64::new(0),
            last: tokio::sync::Mutex::new((0, Err(String::new()))),
        }
    }

    async fn render(&self) -> Result<Bytes, String> {
        let arrived = self.begun.load(Ordering::SeqCst);
        let mut last = self.last.lock().await;
        if last.0 > arrived {
            return last.1.clone();
        }
        let number = self.begun.fetch_add(1, Ordering::SeqCst) + 1;
        let page = self.page.clone();
        let rendered = match tokio::task::spawn_blocking(move || page()).await {
            Ok(r) => r.map(Bytes::from),
            Err(e) => Err(e.to_string()),
        };
        *last = (number, rendered.clone());
        rendered
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(text.to_owned())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

#[cfg(test)]
mod tests;
