//! The session core's settings, from `[mqtt]`: read by the session (`session.rs`) and by the
//! payload batching (`batch.rs`), which the session drives; kept apart so that neither module
//! imports the other for them.

/// Settings of the session core (from `[mqtt]`).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    /// `{prefix}/{gateway}`: every topic starts with it.
    pub topic_root: String,
    /// PUBLISHes awaiting PUBACK, at most.
    pub inflight: usize,
    /// Payload bytes awaiting PUBACK above which only alerts are handed over.
    pub inflight_bytes: usize,
    /// The broker's maximum packet size, in bytes, that every PUBLISH must fit.
    pub max_packet: usize,
    /// Backlog records per second; 0 means unpaced.
    pub replay_rate: u32,
    /// Events in one `{"events": [...]}` payload, at most.
    pub batch_events: usize,
    /// Records held in memory per stream (alerts, live) and backlog lane (events, raw samples),
    /// at most.
    pub buffer: usize,
    /// With PUBLISHes in flight and no PUBACK for this long, the connection is stalled.
    pub stall_ms: i64,
    /// Acknowledged records that make applying them due at once (no fsync; the store applies
    /// them in chunks).
    pub commit_acks: usize,
    /// Acknowledgements are applied this long after the oldest one not yet applied, at most.
    pub commit_ms: i64,
    /// Applied acknowledgements are made durable this long after the first of them, at most
    /// (unless a checkpoint's commit has done it already).
    pub sync_ms: i64,
}
