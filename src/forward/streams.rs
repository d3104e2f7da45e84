//! The outbox records the session holds in memory, one buffer per [`Stream`], and the reads that
//! top them up: a *fill pass*, asked for one [`Read`] at a time and fed the answers. Pure.
//!
//! A pass runs before each record is picked: up to [`ALERT_PAGES`] pages of the backlog's alerts
//! (so that an alert far behind is found quickly); one page of the backlog's events and gap
//! notices, more only while the pages hold none of them (so that a lane whose records are sparse
//! does not look drained while its cursor is short of the backlog's end); the same for raw
//! samples, only once the events are all handed over; one page of live records, when the outbox
//! may have grown since the last read of them came back empty ([`Streams::grew`]). A buffer is
//! topped up only below half of its size (alerts: below its size).
//!
//! Reading live records only when told the outbox grew keeps a drain's rounds free of reads:
//! each PUBACK starts a round, and a round with a read goes to a blocking thread and back.

use std::collections::VecDeque;

use super::request::{Read, Stream};
use crate::records::outbox::OutboxRecord;

/// Pages of backlog alerts scanned in one pass, at most.
pub(super) const ALERT_PAGES: u8 = 16;

/// Where a fill pass stands: the step whose read comes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    Alerts { pages: u8 },
    Events { first: bool },
    Samples { first: bool },
    Live,
    Done,
}

/// The four buffers with their cursors. See the module documentation.
#[derive(Debug)]
pub(super) struct Streams {
    /// Records below this sequence are backlog for the current connection.
    boundary: u64,
    /// Records per buffer, at most.
    size: usize,
    alert_cursor: u64,
    events_cursor: u64,
    samples_cursor: u64,
    live_cursor: u64,
    /// Alerts, of the backlog and live.
    alerts: VecDeque<(u64, OutboxRecord)>,
    live: VecDeque<(u64, OutboxRecord)>,
    /// The backlog's events and gap notices.
    events: VecDeque<(u64, OutboxRecord)>,
    /// The backlog's raw samples.
    samples: VecDeque<(u64, OutboxRecord)>,
    /// Live records may have been added past `live_cursor`: the next pass reads them.
    live_due: bool,
    pass: Pass,
}

impl Streams {
    pub(super) fn new(size: usize) -> Self {
        Streams {
            boundary: 1,
            size,
            alert_cursor: 0,
            events_cursor: 0,
            samples_cursor: 0,
            live_cursor: 0,
            alerts: VecDeque::new(),
            live: VecDeque::new(),
            events: VecDeque::new(),
            samples: VecDeque::new(),
            live_due: true,
            pass: Pass::Done,
        }
    }

    /// The outbox may have grown: the next pass reads live records. Until then a pass reads
    /// none once a read of them has come back empty.
    pub(super) fn grew(&mut self) {
        self.live_due = true;
    }

    /// A new connection whose backlog is every record below `boundary` (the outbox's next
    /// sequence at its ConnAck).
    pub(super) fn begin(&mut self, boundary: u64) {
        self.clear();
        self.boundary = boundary;
        self.live_cursor = boundary - 1;
    }

    /// The connection is gone: nothing buffered, backlog cursors back to the start.
    pub(super) fn clear(&mut self) {
        self.alert_cursor = 0;
        self.events_cursor = 0;
        self.samples_cursor = 0;
        self.alerts.clear();
        self.live.clear();
        self.events.clear();
        self.samples.clear();
        self.live_due = true;
        self.pass = Pass::Done;
    }

    /// The buffer of `stream` (alerts: the backlog's and the live ones).
    pub(super) fn buffer(&mut self, stream: Stream) -> &mut VecDeque<(u64, OutboxRecord)> {
        match stream {
            Stream::Alerts => &mut self.alerts,
            Stream::Live => &mut self.live,
            Stream::Events => &mut self.events,
            Stream::Samples => &mut self.samples,
        }
    }

    /// The record at the head of the buffer of `stream`.
    pub(super) fn head(&self, stream: Stream) -> Option<&(u64, OutboxRecord)> {
        match stream {
            Stream::Alerts => self.alerts.front(),
            Stream::Live => self.live.front(),
            Stream::Events => self.events.front(),
            Stream::Samples => self.samples.front(),
        }
    }

    pub(super) fn has_alerts(&self) -> bool {
        !self.alerts.is_empty()
    }

    pub(super) fn has_live(&self) -> bool {
        !self.live.is_empty()
    }

    /// The backlog lane to take from: events and gap notices while any are buffered, else raw
    /// samples; `None` with neither buffered.
    pub(super) fn backlog_lane(&self) -> Option<Stream> {
        match (self.events.is_empty(), self.samples.is_empty()) {
            (false, _) => Some(Stream::Events),
            (true, false) => Some(Stream::Samples),
            (true, true) => None,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.alerts.is_empty() && self.live.is_empty() && self.backlog_lane().is_none()
    }

    /// Starts a fill pass.
    pub(super) fn start_pass(&mut self) {
        self.pass = Pass::Alerts { pages: 0 };
    }

    /// The pass's next read; `None` once the pass is done.
    pub(super) fn next_read(&mut self) -> Option<Read> {
        let n = self.size;
        let last_backlog = self.boundary - 1;
        loop {
            let (stream, after, limit) = match self.pass {
                Pass::Alerts { pages } => {
                    if pages < ALERT_PAGES
                        && self.alert_cursor < last_backlog
                        && self.alerts.len() < n
                    {
                        (Stream::Alerts, self.alert_cursor, n)
                    } else {
                        self.pass = Pass::Events { first: true };
                        continue;
                    }
                }
                Pass::Events { first } => {
                    match lane_limit(&self.events, self.events_cursor, first, n, last_backlog) {
                        Some(limit) => (Stream::Events, self.events_cursor, limit),
                        None => {
                            let drained =
                                self.events.is_empty() && self.events_cursor >= last_backlog;
                            self.pass =
                                if drained { Pass::Samples { first: true } } else { Pass::Live };
                            continue;
                        }
                    }
                }
                Pass::Samples { first } => {
                    match lane_limit(&self.samples, self.samples_cursor, first, n, last_backlog) {
                        Some(limit) => (Stream::Samples, self.samples_cursor, limit),
                        None => {
                            self.pass = Pass::Live;
                            continue;
                        }
                    }
                }
                Pass::Live if self.live_due && self.live.len() < n / 2 => {
                    // Records added from here on are announced again (`grew`).
                    self.live_due = false;
                    (Stream::Live, self.live_cursor, n - self.live.len())
                }
                Pass::Live | Pass::Done => {
                    self.pass = Pass::Done;
                    return None;
                }
            };
            return Some(Read::Records { stream, after, limit });
        }
    }

    /// The answer to the pass's last read: the records found and the last sequence scanned.
    pub(super) fn feed(&mut self, records: Vec<(u64, OutboxRecord)>, last: Option<u64>) {
        let boundary = self.boundary;
        let (cursor, buf) = match &mut self.pass {
            Pass::Alerts { pages } => {
                *pages += 1;
                (&mut self.alert_cursor, &mut self.alerts)
            }
            Pass::Events { first } => {
                *first = false;
                (&mut self.events_cursor, &mut self.events)
            }
            Pass::Samples { first } => {
                *first = false;
                (&mut self.samples_cursor, &mut self.samples)
            }
            Pass::Live => {
                self.pass = Pass::Done;
                if let Some(s) = last {
                    self.live_cursor = s;
                    // More may follow the page: read on until a read finds nothing.
                    self.live_due = true;
                }
                for (s, r) in records {
                    match r {
                        OutboxRecord::Alert { .. } => self.alerts.push_back((s, r)),
                        _ => self.live.push_back((s, r)),
                    }
                }
                return;
            }
            Pass::Done => {
                tracing::error!("records fed to a fill pass that asked for none: dropped");
                return;
            }
        };
        *cursor = last.map_or(boundary - 1, |s| s.min(boundary - 1));
        buf.extend(records.into_iter().filter(|(s, _)| *s < boundary));
    }
}

/// How many records to scan for a backlog lane, when it is read: its buffer is below half, its
/// cursor short of the backlog's end, and this is the pass's first read of it or the pages so
/// far held none of its records.
fn lane_limit(
    buf: &VecDeque<(u64, OutboxRecord)>,
    cursor: u64,
    first: bool,
    n: usize,
    last_backlog: u64,
) -> Option<usize> {
    (buf.len() < n / 2 && cursor < last_backlog && (first || buf.is_empty())).then(|| n - buf.len())
}
