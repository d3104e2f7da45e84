//! The ledger's decoders: `LedgerRecord::decode`, `PrunedSummary::decode` (the pruned-ledger
//! summary) and `SensorBook::decode`, each on the same bytes.
//!
//! Properties: never a panic; each decoded value encodes to bytes that decode to the same value
//! (decode∘encode round trip); a decoded ledger record folds into an empty and into a decoded
//! summary and sensor book, twice (as pruning and reconcile fold records), without a panic, and
//! the folded summary and book round-trip too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linegate::records::ledger::LedgerRecord;
use linegate::records::pruned::PrunedSummary;
use linegate::records::sensors::SensorBook;

fuzz_target!(init: linegate_fuzz::write_seeds(linegate_fuzz::ledger_records), |data: &[u8]| {
    let record = LedgerRecord::decode(data).ok();
    if let Some(r) = &record {
        assert_eq!(LedgerRecord::decode(&r.encode()).as_ref(), Ok(r), "ledger round trip");
    }
    let summary = PrunedSummary::decode(data).ok();
    if let Some(s) = &summary {
        assert_eq!(PrunedSummary::decode(&s.encode()).as_ref(), Ok(s), "summary round trip");
        let _ = s.records();
    }
    let book = SensorBook::decode(data).ok();
    if let Some(b) = &book {
        assert_eq!(SensorBook::decode(&b.encode()).as_ref(), Ok(b), "book round trip");
        let _ = b.newest_at_ms();
    }
    let Some(r) = record else { return };
    for (mut s, mut b) in [
        (PrunedSummary::new(), SensorBook::default()),
        (summary.unwrap_or_default(), book.unwrap_or_default()),
    ] {
        for seq in [1, 2] {
            s.absorb(seq, &r);
            b.absorb(r.at_ms, &r.entry);
        }
        assert_eq!(PrunedSummary::decode(&s.encode()).as_ref(), Ok(&s), "folded summary");
        assert_eq!(SensorBook::decode(&b.encode()).as_ref(), Ok(&b), "folded book");
    }
});
