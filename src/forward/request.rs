//! What the session core asks of the store and what it is given back: the values that pass
//! between [`super::Session`] and whoever carries them out (the shell, `client.rs` with
//! `fetch.rs`, against the store; the unit tests, against an in-memory outbox). Pure vocabulary.
//!
//! The session asks for at most one [`Read`] and one [`Write`] at a time. The answer to a read
//! goes back through [`super::Session::feed`], the end of a write through
//! [`super::Session::written`].

use crate::records::outbox::FrameRef;
use crate::records::outbox::{Bulk, OutboxRecord};
use crate::trace::SamplesRecord;

/// The streams the session reads the outbox in, each with its own cursor: alerts first; then
/// live records; then the backlog in two lanes, its events and gap notices, then its raw samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The backlog's alerts, scanned ahead of its other records.
    Alerts,
    /// Records younger than the connection, of every kind (the alerts among them go first).
    Live,
    /// The backlog's events and gap notices: small, and what alerts are reconciled with.
    Events,
    /// The backlog's raw samples: its bulk, read once its events are all handed over.
    Samples,
}

impl Stream {
    /// Whether a decoded record belongs to this stream (every record is live once it is younger
    /// than the connection: that is told by its sequence, not here).
    pub fn holds(self, rec: &OutboxRecord) -> bool {
        match self {
            Stream::Live => true,
            Stream::Alerts => matches!(rec, OutboxRecord::Alert { .. }),
            Stream::Events => matches!(rec, OutboxRecord::Event { .. } | OutboxRecord::Gap(_)),
            Stream::Samples => matches!(rec, OutboxRecord::Samples { .. }),
        }
    }

    /// Whether stored bytes may hold a record of this stream: false only when their first bytes
    /// say they are an event or raw samples of another stream ([`OutboxRecord::peek_bulk`]);
    /// anything else is decoded and then sorted by [`Stream::holds`].
    pub fn may_hold(self, bytes: &[u8]) -> bool {
        matches!(
            (self, OutboxRecord::peek_bulk(bytes)),
            (Stream::Live, _)
                | (_, None)
                | (Stream::Events, Some(Bulk::Event))
                | (Stream::Samples, Some(Bulk::Samples))
        )
    }
}

/// A read the session needs answered before it can go on.
#[derive(Debug, Clone, PartialEq)]
pub enum Read {
    /// The sequence the next outbox record will get: for the connection just accepted, the
    /// records below it are backlog.
    NextSeq,
    /// The records of `stream` among the next `limit` outbox records with sequence `> after`.
    Records { stream: Stream, after: u64, limit: usize },
    /// The raw samples of journal record `journal_pos`, named by an outbox `Samples` record:
    /// the block's encoded `frame` when it names one that reads back whole, else the line.
    Samples { journal_pos: u64, frame: Option<FrameRef> },
}

/// The answer to a [`Read`], of the same kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Fetched {
    NextSeq(u64),
    /// The records found, in sequence order, and the last sequence scanned (`None`: no record
    /// after `after`).
    Records {
        records: Vec<(u64, OutboxRecord)>,
        last: Option<u64>,
    },
    /// `None` when the journal record is gone (truncated) and no frame was read.
    Samples(Option<RawSamples>),
}

/// The raw samples of one block, as the drain got them.
#[derive(Debug, Clone, PartialEq)]
pub enum RawSamples {
    /// The block's frame as the decide stage encoded it (checked: a whole, valid frame).
    Encoded(Vec<u8>),
    /// Read back from the journal line (no frame, or it did not read back).
    Parsed(SamplesRecord),
}

/// A change the session asks of the store.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Ledger `Published` for `published` (records whose PUBLISH was written since the last
    /// time), then remove the acknowledged records `acked` with an `Acknowledged` ledger record.
    /// Either list may be empty. Not durable yet: the store's next commit makes it so (a
    /// checkpoint's, or a [`Write::Sync`]); a crash before loses it whole, and the records are
    /// sent again (at least once).
    Apply { published: Vec<u64>, acked: Vec<u64> },
    /// Make what was applied durable, unless a commit since already has: one fsync at most.
    Sync,
}

/// A [`Write`] done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Applied,
    Synced,
}

/// What the session wants done now, in this order: hand `publishes` to the client, then start
/// `read` and `write`.
#[derive(Debug, Default, PartialEq)]
pub struct Next {
    pub publishes: Vec<Publish>,
    pub read: Option<Read>,
    pub write: Option<Write>,
}

/// One PUBLISH to make (QoS 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Publish {
    pub topic: String,
    pub payload: Vec<u8>,
    pub retain: bool,
}
