//! The listener's connections as its limits see them: what each one waits for ([`Activity`]),
//! the table that picks one to close when a newcomer needs its place ([`Slots`]), and the stream
//! wrapper that ends a response its client does not take in time ([`ClientIo`]).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Sleep;

/// What a connection is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Accepted; its request head has not been waited for yet (a client that sends its head
    /// with its connection is answered without ever waiting).
    New = 0,
    /// Waiting for the client to send the rest of its request head.
    Head = 1,
    /// The head is in: the response is being made or written.
    Serving = 2,
    /// Writing the response, and the client is not reading it (the socket's buffer is full).
    Blocked = 3,
}

impl Phase {
    /// Waiting on its client.
    pub(super) fn waits(self) -> bool {
        matches!(self, Phase::Head | Phase::Blocked)
    }
}

/// A connection's [`Phase`], shared by its task and the table; `waiting` is told each time a
/// connection is first looked at or begins to wait on its client.
#[derive(Debug)]
pub(super) struct Activity {
    phase: AtomicU8,
    waiting: Arc<Notify>,
}

impl Activity {
    pub(super) fn new(waiting: Arc<Notify>) -> Arc<Self> {
        Arc::new(Activity { phase: AtomicU8::new(Phase::New as u8), waiting })
    }

    pub(super) fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::New,
            1 => Phase::Head,
            2 => Phase::Serving,
            _ => Phase::Blocked,
        }
    }

    /// The request head is in.
    pub(super) fn serving(&self) {
        let was = self.phase.swap(Phase::Serving as u8, Ordering::Relaxed);
        if was == Phase::New as u8 {
            self.waiting.notify_one();
        }
    }

    fn change(&self, from: Phase, to: Phase) {
        let (from, to) = (from as u8, to as u8);
        if self.phase.compare_exchange(from, to, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            self.waiting.notify_one();
        }
    }

    /// A read had to wait for the client: before the head is in, the connection waits on it.
    fn read_waits(&self) {
        self.change(Phase::New, Phase::Head);
    }

    /// A write of the response had to wait (`true`) or went through (`false`).
    fn write_blocked(&self, blocked: bool) {
        if blocked {
            self.change(Phase::Serving, Phase::Blocked);
        } else {
            self.change(Phase::Blocked, Phase::Serving);
        }
    }
}

/// The open connections, oldest first, each with its peer, its activity and a handle `H` (the
/// listener's: its task's abort handle).
#[derive(Debug)]
pub(super) struct Slots<H> {
    next: u64,
    open: BTreeMap<u64, Slot<H>>,
    per_peer: HashMap<IpAddr, usize>,
}

#[derive(Debug)]
struct Slot<H> {
    peer: IpAddr,
    activity: Arc<Activity>,
    handle: H,
}

impl<H> Slots<H> {
    pub(super) fn new() -> Self {
        Slots { next: 0, open: BTreeMap::new(), per_peer: HashMap::new() }
    }

    pub(super) fn len(&self) -> usize {
        self.open.len()
    }

    /// Takes in a new connection; its key, newer than every key given before.
    pub(super) fn insert(&mut self, peer: IpAddr, activity: Arc<Activity>, handle: H) -> u64 {
        let key = self.next;
        self.next += 1;
        self.open.insert(key, Slot { peer, activity, handle });
        *self.per_peer.entry(peer).or_default() += 1;
        key
    }

    /// Takes a connection out (it ended, or is being closed); its handle.
    pub(super) fn remove(&mut self, key: u64) -> Option<H> {
        let slot = self.open.remove(&key)?;
        if let Some(n) = self.per_peer.get_mut(&slot.peer) {
            *n -= 1;
            if *n == 0 {
                self.per_peer.remove(&slot.peer);
            }
        }
        Some(slot.handle)
    }

    /// Connections whose task has not looked at them yet.
    pub(super) fn unpolled(&self) -> usize {
        self.open.values().filter(|s| s.activity.phase() == Phase::New).count()
    }

    /// The key of the connection whose handle satisfies `is`.
    pub(super) fn find(&self, is: impl Fn(&H) -> bool) -> Option<u64> {
        self.open.iter().find(|(_, s)| is(&s.handle)).map(|(&k, _)| k)
    }

    /// The connection to close so that a newcomer gets its place: one waiting on its client
    /// (for the rest of its request head, or to read its response), of the peer holding the
    /// most connections, the oldest of those. `None` while no connection waits on its client.
    pub(super) fn victim(&self) -> Option<u64> {
        self.open
            .iter()
            .filter(|(_, s)| s.activity.phase().waits())
            .map(|(&key, s)| {
                let held = self.per_peer.get(&s.peer).copied().unwrap_or(0);
                (std::cmp::Reverse(held), key)
            })
            .min()
            .map(|(_, key)| key)
    }
}

/// A stream that can be told to end with a reset rather than an orderly close.
pub(super) trait Reset {
    /// Its close, when it comes, resets the connection (`SO_LINGER` 0).
    fn reset_on_close(&self);
}

impl Reset for tokio::net::TcpStream {
    fn reset_on_close(&self) {
        let _ = self.set_zero_linger();
    }
}

/// A client's stream. Its writes must all be done within `limit` of the first: a response that
/// its client does not take in time ends with [`io::ErrorKind::TimedOut`]. Whether a read or a
/// write had to wait is told to the connection's [`Activity`]. Dropped while waiting on its
/// client (closed for a newcomer, or out of time) without having been shut down, it resets the
/// connection: what the client did not take is thrown away at once, not kept by the kernel
/// until the client reads it or its retries give up.
pub(super) struct ClientIo<S: Reset> {
    inner: S,
    activity: Arc<Activity>,
    limit: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
    shut_down: bool,
}

impl<S: Reset> Drop for ClientIo<S> {
    fn drop(&mut self) {
        if !self.shut_down && self.activity.phase().waits() {
            self.inner.reset_on_close();
        }
    }
}

impl<S: Reset> ClientIo<S> {
    pub(super) fn new(inner: S, activity: Arc<Activity>, limit: Duration) -> Self {
        ClientIo { inner, activity, limit, deadline: None, shut_down: false }
    }

    /// `Err` once the time for writing has run out; the first call starts it.
    fn in_time(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let limit = self.limit;
        let deadline = self.deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client did not take the response within {limit:?}"),
            )),
            Poll::Pending => Ok(()),
        }
    }

    fn note<T>(&self, polled: Poll<T>) -> Poll<T> {
        self.activity.write_blocked(polled.is_pending());
        polled
    }
}

impl<S: AsyncRead + Reset + Unpin> AsyncRead for ClientIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if polled.is_pending() {
            self.activity.read_waits();
        }
        polled
    }
}

impl<S: AsyncWrite + Reset + Unpin> AsyncWrite for ClientIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.in_time(cx)?;
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note(polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.in_time(cx)?;
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.note(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.in_time(cx)?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.shut_down |= polled.is_ready();
        polled
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use tokio::io::AsyncWriteExt;

    use super::*;

    impl Reset for tokio::io::DuplexStream {
        fn reset_on_close(&self) {}
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    #[test]
    fn the_victim_waits_on_its_client_belongs_to_the_busiest_peer_and_is_the_oldest() {
        let mut slots = Slots::new();
        let waiting = Arc::new(Notify::new());
        let act: Vec<_> = (0..6).map(|_| Activity::new(waiting.clone())).collect();
        let a0 = slots.insert(ip(1), act[0].clone(), ());
        let b0 = slots.insert(ip(2), act[1].clone(), ());
        let b1 = slots.insert(ip(2), act[2].clone(), ());
        let a1 = slots.insert(ip(1), act[3].clone(), ());
        let b2 = slots.insert(ip(2), act[4].clone(), ());
        assert_eq!(slots.victim(), None, "none has waited for its client yet");
        assert_eq!(slots.unpolled(), 5);
        for a in &act[..5] {
            a.read_waits();
        }
        assert_eq!(slots.unpolled(), 0);
        // Peer 2 holds three: its oldest goes first, though peer 1's is older.
        assert_eq!(slots.victim(), Some(b0));
        // A connection being answered is never chosen; one blocked on a client that does not
        // read its response is, as one waiting for the rest of its head.
        act[1].serving();
        act[2].serving();
        act[2].write_blocked(true);
        act[2].read_waits();
        assert_eq!(act[2].phase(), Phase::Blocked, "a read while answering changes nothing");
        assert_eq!(slots.victim(), Some(b1));
        act[2].write_blocked(false);
        assert_eq!(slots.victim(), Some(b2));
        act[4].serving();
        assert_eq!(slots.victim(), Some(a0), "peer 1's oldest: peer 2 has none waiting");
        slots.remove(a0);
        slots.remove(a1);
        assert_eq!(slots.victim(), None, "all three left are being answered");
        assert_eq!(slots.len(), 3);
        assert_eq!(slots.remove(b0), Some(()));
        assert_eq!(slots.remove(b0), None);
        let c = slots.insert(ip(3), act[5].clone(), ());
        assert!(c > b2, "keys grow with age");
        act[5].read_waits();
        assert_eq!(slots.victim(), Some(c));
    }

    #[tokio::test(start_paused = true)]
    async fn a_response_not_taken_in_time_ends_and_a_blocked_write_is_told() {
        let (near, _far) = tokio::io::duplex(64);
        let activity = Activity::new(Arc::new(Notify::new()));
        activity.serving();
        let mut w = ClientIo::new(near, activity.clone(), Duration::from_secs(3));
        w.write_all(&[7; 64]).await.unwrap();
        assert_eq!(activity.phase(), Phase::Serving, "a write that went through");
        // Nobody reads: the next write waits, told as blocked, until 3 s after the first.
        let waited = tokio::time::timeout(Duration::from_millis(2900), w.write_all(&[7; 64])).await;
        assert!(waited.is_err(), "the write ended before its time: {waited:?}");
        assert_eq!(activity.phase(), Phase::Blocked);
        let e = w.write_all(&[7; 64]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(e.to_string().contains("within 3s"), "{e}");
    }
}
