//! The CBOR of an `accepted` ledger record written by hand: the same bytes as ciborium writes
//! for it through serde (a map of `at_ms` and `entry`, the entry a map of `kind` and its
//! fields in declaration order, every integer and length in its shortest form), in about a tenth
//! of the instructions. An event line makes one such record, and a checkpoint encodes them under
//! the store's exclusive lock; every other record goes through serde. Reading is serde's alone.
//! The test below checks the bytes against ciborium's on arbitrary records.

#[cfg(test)]
use super::RuleTouch;
use super::{Acceptance, LedgerEntry, LedgerRecord};
use crate::records::cbor_write::{head, int, map, text};

/// `prefix` then `record`'s CBOR when it is an `accepted` record; `None` for any other.
pub(super) fn encode(prefix: &[u8], record: &LedgerRecord) -> Option<Vec<u8>> {
    let LedgerEntry::Accepted {
        event_id,
        machine,
        sensor,
        seq,
        ts_ms,
        how,
        journal_pos,
        outbox_seq,
        counted,
        rules,
        watermark_ms,
    } = &record.entry
    else {
        return None;
    };
    let mut v =
        Vec::with_capacity(prefix.len() + 192 + event_id.len() + machine.len() + sensor.len());
    let out = &mut v;
    out.extend_from_slice(prefix);
    map(out, 2);
    text(out, "at_ms");
    int(out, record.at_ms);
    text(out, "entry");
    map(out, 10 + u64::from(!rules.is_empty()) + u64::from(watermark_ms.is_some()));
    text(out, "kind");
    text(out, "accepted");
    text(out, "event_id");
    text(out, event_id);
    text(out, "machine");
    text(out, machine);
    text(out, "sensor");
    text(out, sensor);
    text(out, "seq");
    head(out, 0, *seq);
    text(out, "ts_ms");
    int(out, *ts_ms);
    text(out, "how");
    text(
        out,
        match how {
            Acceptance::Applied => "applied",
            Acceptance::LateApplied => "late_applied",
            Acceptance::TooLate => "too_late",
        },
    );
    text(out, "journal_pos");
    head(out, 0, *journal_pos);
    text(out, "outbox_seq");
    head(out, 0, *outbox_seq);
    text(out, "counted");
    out.push(if *counted { 0xF5 } else { 0xF4 });
    if !rules.is_empty() {
        text(out, "rules");
        head(out, 4, rules.len() as u64);
        for r in rules {
            map(out, 1 + u64::from(r.alert_id.is_some()));
            text(out, "rule");
            text(out, &r.rule);
            if let Some(id) = &r.alert_id {
                text(out, "alert_id");
                text(out, id);
            }
        }
    }
    if let Some(w) = watermark_ms {
        text(out, "watermark_ms");
        int(out, *w);
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn by_serde(r: &LedgerRecord) -> Vec<u8> {
        let mut out = Vec::new();
        ciborium::into_writer(r, &mut out).unwrap();
        out
    }

    fn accepted(
        (at_ms, seq, ts_ms, journal_pos, outbox_seq): (i64, u64, i64, u64, u64),
        (event_id, machine, sensor): (String, String, String),
        (how, counted): (u8, bool),
        (rules, watermark_ms): (Vec<(String, Option<String>)>, Option<i64>),
    ) -> LedgerRecord {
        let rules =
            rules.into_iter().map(|(rule, alert_id)| RuleTouch { rule, alert_id }).collect();
        let how = [Acceptance::Applied, Acceptance::LateApplied, Acceptance::TooLate][how as usize];
        LedgerRecord::new(
            at_ms,
            LedgerEntry::Accepted {
                event_id,
                machine,
                sensor,
                seq,
                ts_ms,
                how,
                journal_pos,
                outbox_seq,
                counted,
                rules,
                watermark_ms,
            },
        )
    }

    /// Integers at every boundary of CBOR's lengths, both signs.
    fn edge_i64() -> impl Strategy<Value = i64> {
        let edges: Vec<i64> =
            [0i64, 23, 24, 255, 256, 65_535, 65_536, 4_294_967_295, 4_294_967_296]
                .iter()
                .flat_map(|&e| [e, -e, -e - 1, e + 1])
                .chain([i64::MIN, i64::MAX, 1_700_000_000_000])
                .collect();
        prop_oneof![proptest::sample::select(edges), any::<i64>()]
    }

    fn edge_u64() -> impl Strategy<Value = u64> {
        prop_oneof![edge_i64().prop_map(|v| v.unsigned_abs()), any::<u64>()]
    }

    proptest! {
        /// The bytes are ciborium's, to the last one.
        #[test]
        fn an_accepted_record_is_written_as_ciborium_writes_it(
            ints in (edge_i64(), edge_u64(), edge_i64(), edge_u64(), edge_u64()),
            strings in (".{0,40}", "[a-z0-9-]{0,30}", "\\PC{0,300}"),
            how in (0u8..3, any::<bool>()),
            touched in (
                proptest::collection::vec(("[a-z-]{0,20}", proptest::option::of("\\PC{0,40}")), 0..4),
                proptest::option::of(edge_i64()),
            ),
        ) {
            let r = accepted(ints, strings, how, touched);
            prop_assert_eq!(encode(&[1], &r), Some([&[1][..], &by_serde(&r)].concat()));
        }
    }

    /// Another kind of record is left to serde.
    #[test]
    fn another_record_is_left_to_serde() {
        let r =
            LedgerRecord::new(1, LedgerEntry::Duplicate { event_id: "e".into(), journal_pos: 2 });
        assert_eq!(encode(&[1], &r), None);
    }
}
