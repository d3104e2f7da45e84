//! The metric table: every device metric the node has declared, with its alias, data type and
//! the last value sent. Kept in the store with the view's cursor (JSON, `n/spb/metrics`), so the
//! births after a restart declare every metric seen before, with the value last sent, and aliases
//! never change meaning.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::values::{Quality, Update, Value};

/// The alias of `Node Control/Rebirth`; device metrics get aliases from [`FIRST_DEVICE_ALIAS`].
pub(super) const REBIRTH_ALIAS: u64 = 1;
pub(super) const FIRST_DEVICE_ALIAS: u64 = 16;

/// One declared metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub alias: u64,
    pub datatype: u32,
    /// The last value sent, with its timestamp and quality (`None`: declared, none sent yet).
    pub last: Option<(Value, i64, Quality)>,
}

/// See the module documentation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Table {
    next_alias: u64,
    /// Device (machine) → metric name → entry.
    pub devices: BTreeMap<String, BTreeMap<String, Entry>>,
    /// Device → the last outbox sequence of it sent past the view's cursor, while held records
    /// drained and live ones of other devices went meanwhile (`session.rs`, "Fairness"). Kept
    /// here, stored with the cursor in one batch, so a restart does not send them again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sent_ahead: BTreeMap<String, u64>,
}

impl Table {
    /// The table from its stored bytes; empty bytes (none stored) or bytes that do not read (a
    /// warning) give an empty table: births then declare metrics as they come, with new aliases.
    pub fn decode(bytes: &[u8]) -> Table {
        if bytes.is_empty() {
            return Table::default();
        }
        serde_json::from_slice(bytes).unwrap_or_else(|e| {
            tracing::warn!(%e, "sparkplug: the stored metric table does not read: starting anew");
            Table::default()
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Declares `u`'s metric if it is new, or if its value's data type changed (a new alias then:
    /// an alias keeps its type). True when it was declared now: its device needs a new birth.
    pub fn declare(&mut self, u: &Update) -> bool {
        let datatype = u.value.datatype();
        let next = &mut self.next_alias;
        let metrics = self.devices.entry(u.device.clone()).or_default();
        match metrics.get(&u.name) {
            Some(e) if e.datatype == datatype => false,
            _ => {
                *next = (*next).max(FIRST_DEVICE_ALIAS);
                metrics.insert(u.name.clone(), Entry { alias: *next, datatype, last: None });
                *next += 1;
                true
            }
        }
    }

    /// The entry of `u`'s metric (declared before).
    pub fn entry(&self, u: &Update) -> Option<&Entry> {
        self.devices.get(&u.device)?.get(&u.name)
    }

    /// `u` was sent: its value becomes the metric's last one, unless a newer one was sent
    /// already (a historical value never replaces a newer one in the births).
    pub fn sent(&mut self, u: &Update) {
        let Some(e) = self.devices.get_mut(&u.device).and_then(|m| m.get_mut(&u.name)) else {
            return;
        };
        if e.last.as_ref().is_none_or(|(_, ts, _)| *ts <= u.ts_ms) {
            e.last = Some((u.value.clone(), u.ts_ms, u.quality));
        }
    }

    /// Every metric declared, across devices.
    pub fn metrics(&self) -> usize {
        self.devices.values().map(BTreeMap::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(device: &str, name: &str, value: Value, ts_ms: i64) -> Update {
        let (device, name) = (device.into(), name.into());
        Update { device, name, value, ts_ms, quality: Quality::Good }
    }

    #[test]
    fn aliases_are_unique_across_devices_and_survive_encoding() {
        let mut t = Table::default();
        assert!(t.declare(&u("m1", "s1/accel_rms", Value::Double(1.0), 5)));
        assert!(!t.declare(&u("m1", "s1/accel_rms", Value::Double(2.0), 6)), "known");
        assert!(t.declare(&u("m2", "s1/accel_rms", Value::Double(1.0), 5)));
        assert!(t.declare(&u("m1", "s1/accel_rms", Value::String("x".into()), 7)), "new type");
        let aliases: Vec<u64> =
            t.devices.values().flat_map(|m| m.values().map(|e| e.alias)).collect();
        assert_eq!(aliases, vec![18, 17], "m1's metric re-declared with a new alias");
        t.sent(&u("m2", "s1/accel_rms", Value::Double(3.0), 10));
        t.sent(&u("m2", "s1/accel_rms", Value::Double(2.0), 9));
        let back = Table::decode(&t.encode());
        assert_eq!(back, t);
        let last = &back.devices["m2"]["s1/accel_rms"].last;
        assert_eq!(last, &Some((Value::Double(3.0), 10, Quality::Good)), "older kept out");
        assert_eq!(Table::decode(b"{oops"), Table::default());
        assert_eq!(t.metrics(), 2);
    }
}
