//! What was accepted against what arrived: every accepted event and every alert record in the
//! ledger must have reached the subscriber.

use std::collections::BTreeSet;

use super::subscriber::Arrivals;
use crate::records::ledger::{LedgerEntry, LedgerRecord};

/// The comparison.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delivery {
    pub accepted_events: usize,
    pub delivered_events: usize,
    /// Delivered events that came from backlog, flagged `"replayed": true`.
    pub replayed_events: usize,
    pub alert_records: usize,
    pub delivered_alerts: usize,
    pub sample_frames: usize,
    /// Accepted but never received: `event ID` / `alert ID revision N`.
    pub missing: Vec<String>,
}

impl Delivery {
    /// True when everything accepted arrived.
    pub fn ok(&self) -> bool {
        self.missing.is_empty()
    }
}

/// Compares the ledger with what the subscriber received.
pub fn compare(ledger: &[(u64, LedgerRecord)], arrived: &Arrivals) -> Delivery {
    let mut events = BTreeSet::new();
    let mut alerts = BTreeSet::new();
    for (_, r) in ledger {
        match &r.entry {
            LedgerEntry::Accepted { event_id, .. } => {
                events.insert(event_id.clone());
            }
            LedgerEntry::Alert { alert_id, revision, .. } => {
                alerts.insert((alert_id.clone(), *revision));
            }
            _ => {}
        }
    }
    let mut missing: Vec<String> =
        events.difference(&arrived.events).map(|e| format!("event {e}")).collect();
    missing
        .extend(alerts.difference(&arrived.alerts).map(|(a, r)| format!("alert {a} revision {r}")));
    Delivery {
        accepted_events: events.len(),
        delivered_events: events.intersection(&arrived.events).count(),
        replayed_events: arrived.replayed.len(),
        alert_records: alerts.len(),
        delivered_alerts: alerts.intersection(&arrived.alerts).count(),
        sample_frames: arrived.samples.len(),
        missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ledger::Acceptance;

    fn accepted(id: &str) -> (u64, LedgerRecord) {
        let entry = LedgerEntry::Accepted {
            event_id: id.into(),
            machine: "m".into(),
            sensor: "s".into(),
            seq: 1,
            ts_ms: 0,
            how: Acceptance::Applied,
            journal_pos: 1,
            outbox_seq: 1,
            counted: false,
            rules: Vec::new(),
            watermark_ms: None,
        };
        (1, LedgerRecord::new(0, entry))
    }

    #[test]
    fn everything_accepted_must_have_arrived() {
        let alert = LedgerEntry::Alert {
            alert_id: "a".into(),
            revision: 2,
            alert_kind: "amend".into(),
            machine: "m".into(),
            caused_by: None,
            outbox_seq: 3,
        };
        let ledger = vec![accepted("e1"), accepted("e2"), (2, LedgerRecord::new(0, alert))];
        let mut arrived = Arrivals {
            events: ["e1".to_owned(), "e2".to_owned(), "other".to_owned()].into(),
            replayed: ["e2".to_owned()].into(),
            ..Arrivals::default()
        };
        let d = compare(&ledger, &arrived);
        assert_eq!((d.accepted_events, d.delivered_events, d.replayed_events), (2, 2, 1));
        assert_eq!((d.alert_records, d.delivered_alerts), (1, 0));
        assert_eq!(d.missing, ["alert a revision 2"]);
        assert!(!d.ok());
        arrived.alerts.insert(("a".into(), 2));
        assert!(compare(&ledger, &arrived).ok());
    }
}
