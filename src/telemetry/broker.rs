//! The MQTT forwarder's counters: kept by the forwarder (`crate::forward`), read by the metrics
//! sampler ([`BrokerState`]) and by `status` (is a broker session up).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::BrokerState;

/// Counters a caller may watch (tests, benchmarks, metrics).
#[derive(Debug, Default)]
pub struct ForwardStats {
    /// Connection attempts (each builds a client).
    pub attempts: AtomicU64,
    /// ConnAcks received.
    pub connects: AtomicU64,
    /// PUBLISHes handed to the client.
    pub publishes: AtomicU64,
    /// The most PUBLISHes ever awaiting a PUBACK at once.
    pub inflight_peak: AtomicUsize,
    /// True from a ConnAck until that connection ends.
    pub connected: AtomicBool,
    /// Connections that were up and ended other than by shutdown.
    pub disconnects: AtomicU64,
    /// PUBACKs received for PUBLISHes in flight.
    pub acknowledged: AtomicU64,
    /// PUBLISHes awaiting a PUBACK now.
    pub in_flight: AtomicUsize,
}

impl ForwardStats {
    /// A connection ended; `lost` when it was up and did not end by shutdown.
    pub fn session_ended(&self, lost: bool) {
        self.connected.store(false, Ordering::Relaxed);
        self.in_flight.store(0, Ordering::Relaxed);
        if lost {
            self.disconnects.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counters as the metrics take them.
    pub fn state(&self) -> BrokerState {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        BrokerState {
            connected: self.connected.load(Ordering::Relaxed),
            attempts: n(&self.attempts),
            connects: n(&self.connects),
            disconnects: n(&self.disconnects),
            publishes: n(&self.publishes),
            acknowledged: n(&self.acknowledged),
            in_flight: self.in_flight.load(Ordering::Relaxed) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forwarders_counters_become_the_broker_state() {
        let f = ForwardStats::default();
        f.attempts.store(2, Ordering::Relaxed);
        f.connects.store(1, Ordering::Relaxed);
        f.connected.store(true, Ordering::Relaxed);
        f.publishes.store(9, Ordering::Relaxed);
        f.acknowledged.store(7, Ordering::Relaxed);
        f.in_flight.store(2, Ordering::Relaxed);
        let want = BrokerState {
            connected: true,
            attempts: 2,
            connects: 1,
            disconnects: 0,
            publishes: 9,
            acknowledged: 7,
            in_flight: 2,
        };
        assert_eq!(f.state(), want);
    }
}
