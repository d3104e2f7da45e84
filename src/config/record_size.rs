//! How large a rule's alert records get (docs/contracts.md sections 6 and 9): a record lists
//! every event that made it, at least `count` of them for a measurement rule and its members'
//! for a composite, so its size follows the configuration. Refused: a rule whose records cannot fit in
//! one MQTT packet (`[mqtt] max_packet`) even with the shortest ids, which the forwarder would
//! have to drop; warned: one whose records come to more than [`RECORD_WARN_BYTES`] with ids of a
//! usual length (every revision of an incident is one such record in the ledger and at each
//! subscriber).

use super::rules::RuleKey;
use super::{Config, Ctx, Result};

/// The fewest bytes one evidence entry takes in a record: one-byte ids, a one-digit seq, no
/// `err_ms`, and the comma before it (`the_shortest_entry_takes_at_least_the_minimum`).
const EVIDENCE_MIN_BYTES: usize = 120;
/// The fewest bytes of a record besides its evidence (ids, times, rule version, flags).
const RECORD_MIN_BYTES: usize = 300;
/// An entry with ids of a usual length (`press-1.s1.123456`, `s1`) and `err_ms`.
const EVIDENCE_USUAL_BYTES: usize = 190;
/// A record with a usual gateway id, machine, rule name and asset tags, besides its evidence.
const RECORD_USUAL_BYTES: usize = 700;
/// A record larger than this, with ids of a usual length, is warned about (the hot-machine
/// benchmark's bound on a record).
const RECORD_WARN_BYTES: usize = 16 * 1024;

/// A rule's alert records as the configuration sets them: how many evidence entries they carry
/// at least, and the key that sets it.
struct RuleRecords {
    name: String,
    entries: usize,
    key: String,
}

/// Each rule's records: a measurement rule's `count`, a composite's members' together.
fn rule_records(c: &Config) -> Vec<RuleRecords> {
    let mut out: Vec<RuleRecords> = c
        .rules()
        .map(|r| RuleRecords {
            name: r.name.clone(),
            entries: r.count as usize,
            key: c.rule_key(r, "count"),
        })
        .collect();
    for comp in &c.composites {
        let entries = comp
            .spec
            .members()
            .iter()
            .filter_map(|m| c.rule_named(m))
            .fold(0usize, |n, r| n.saturating_add(r.count as usize));
        let key = RuleKey { index: Some(comp.index) }.named(&comp.name, comp.kind());
        out.push(RuleRecords { name: comp.name.clone(), entries, key });
    }
    out
}

/// `n` bytes for people: whole KiB as such, a fraction to one decimal.
fn kib(n: usize) -> String {
    if n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{:.1} KiB", n as f64 / 1024.0)
    }
}

/// The least a record of `entries` evidence entries takes, and what it takes with usual ids.
fn record_bytes(entries: usize) -> (usize, usize) {
    (
        RECORD_MIN_BYTES.saturating_add(entries.saturating_mul(EVIDENCE_MIN_BYTES)),
        RECORD_USUAL_BYTES.saturating_add(entries.saturating_mul(EVIDENCE_USUAL_BYTES)),
    )
}

impl Ctx<'_> {
    /// Refuses a rule whose every alert record is larger than `[mqtt] max_packet`.
    pub(super) fn check_record_sizes(&self, c: &Config) -> Result<()> {
        let max_packet = c.mqtt.forward.max_packet;
        for RuleRecords { name, entries, key } in rule_records(c) {
            let (least, _) = record_bytes(entries);
            if least <= max_packet {
                continue;
            }
            return Err(self.err(
                key,
                format!(
                    "each alert record of rule {name} lists at least {entries} evidence events, \
                     {least} bytes or more, more than one MQTT packet may carry \
                     (mqtt.max_packet = {max_packet} bytes): the forwarder could publish none of \
                     them; lower the count or raise mqtt.max_packet"
                ),
            ));
        }
        Ok(())
    }
}

impl Config {
    /// Rules whose alert records come to more than [`RECORD_WARN_BYTES`] with ids of a usual
    /// length, for [`Config::warnings`].
    pub(super) fn record_size_warnings(&self) -> Vec<String> {
        rule_records(self)
            .into_iter()
            .filter_map(|RuleRecords { name, entries, .. }| {
                let (_, usual) = record_bytes(entries);
                (usual > RECORD_WARN_BYTES).then(|| {
                    format!(
                        "rule {name}: each alert record lists at least {entries} evidence events, \
                         about {} with ids of a usual length (above {}; every revision is one \
                         record in the ledger and at each subscriber; mqtt.max_packet is {})",
                        kib(usual),
                        kib(RECORD_WARN_BYTES),
                        kib(self.mqtt.forward.max_packet)
                    )
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ClockEvidence, ClockState, Quality};
    use crate::rule::alert::EvidenceItem;

    fn entry(event_id: &str, sensor: &str, seq: u64, err_ms: Option<u32>) -> usize {
        let item = EvidenceItem {
            event_id: event_id.into(),
            sensor: sensor.into(),
            seq,
            ts_ms: 1_700_000_000_000,
            value: 1.0,
            unit: crate::event::Unit::G.into(),
            quality: Quality::Good,
            clock: ClockEvidence { state: ClockState::Synced, err_ms },
            samples: None,
        };
        serde_json::to_vec(&item).unwrap().len() + 1
    }

    /// The largest count saturates instead of wrapping (a 32-bit gateway's `usize`).
    #[test]
    fn the_largest_count_is_refused() {
        assert_eq!(record_bytes(usize::MAX).0, usize::MAX);
        let e = config(u32::MAX, 262_144).unwrap_err();
        assert!(e.contains("rule.count"), "{e}");
    }

    /// The bounds hold for what the serializer writes: the shortest entry is not below the
    /// minimum, a usual one not above the usual size.
    #[test]
    fn the_shortest_entry_takes_at_least_the_minimum() {
        let least = entry("a", "s", 1, None);
        assert!(least >= EVIDENCE_MIN_BYTES, "{least}");
        let usual = entry("press-1.s1.123456", "s1", 123_456, Some(2));
        assert!(usual <= EVIDENCE_USUAL_BYTES && usual + 40 > EVIDENCE_USUAL_BYTES, "{usual}");
    }

    fn config(count: u32, max_packet: u32) -> std::result::Result<Config, String> {
        let toml = format!(
            "[gateway]\nid = \"g\"\n[rule]\nthreshold = 1.0\nwindow = \"2m\"\ncount = {count}\n\
             [mqtt]\nmax_packet = {max_packet}\n"
        );
        Config::from_toml(&toml, "t.toml").map_err(|e| e.to_string())
    }

    /// A count whose records cannot fit a packet is refused naming the key; one that fits is
    /// accepted, with a warning once its records pass 16 KiB.
    #[test]
    fn records_larger_than_a_packet_are_refused_and_large_ones_warned() {
        let e = config(100, 8192).unwrap_err();
        assert!(e.contains("rule.count") && e.contains("mqtt.max_packet = 8192"), "{e}");
        assert!(config(60, 8192).is_ok());
        let big = config(100, 262_144).unwrap();
        let w = big.record_size_warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("rule high-vibration") && w[0].contains("100 evidence"), "{w:?}");
        assert!(w[0].contains("about 19.2 KiB") && w[0].contains("is 256 KiB)"), "{w:?}");
        assert!(config(3, 262_144).unwrap().record_size_warnings().is_empty());
    }

    /// A composite's records carry its members' evidence: two rules that fit on their own are
    /// refused together, naming the composite's members key.
    #[test]
    fn a_composite_carries_its_members_evidence() {
        let rule = |name: &str| {
            format!("[[rule]]\nname = \"{name}\"\nthreshold = 1.0\nwindow = \"2m\"\ncount = 40\n")
        };
        let toml = format!(
            "[gateway]\nid = \"g\"\n{}{}[[rule]]\nname = \"both\"\nall_of = [\"a\", \"b\"]\n\
             window = \"5m\"\n[mqtt]\nmax_packet = 8192\n",
            rule("a"),
            rule("b")
        );
        let e = Config::from_toml(&toml, "t.toml").unwrap_err().to_string();
        assert!(e.contains("rule[2] (both).all_of") && e.contains("80 evidence"), "{e}");
    }
}
