//! The outbox record decoder (`OutboxRecord::decode`) and its byte peek (`peek_bulk`); and the
//! page framing the store keeps a checkpoint's records in (`store::page::entries`).
//!
//! Page property: bytes that read as a page encode back to exactly themselves, and each record
//! on it goes through the decoder like any other.
//!
//! Properties: never a panic; where both answer, `peek_bulk` agrees with `decode` (a record it
//! calls an event or raw samples decodes as one); a decoded record encodes to bytes that decode
//! to the same record and re-encode identically (encode∘decode∘encode = encode), and that
//! `peek_bulk` classifies exactly by the record's kind.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linegate::records::outbox::{Bulk, OutboxRecord};

fn kind(r: &OutboxRecord) -> Option<Bulk> {
    match r {
        OutboxRecord::Event { .. } => Some(Bulk::Event),
        OutboxRecord::Samples { .. } => Some(Bulk::Samples),
        OutboxRecord::Alert { .. } | OutboxRecord::Gap(_) => None,
    }
}

fuzz_target!(init: linegate_fuzz::write_seeds(linegate_fuzz::outbox_records), |data: &[u8]| {
    if let Ok(records) = linegate::store::page::entries(data) {
        assert_eq!(linegate::store::page::encode(records.iter().copied()), data, "page framing");
        for r in records {
            let _ = OutboxRecord::decode(r);
        }
        return;
    }
    let peek = OutboxRecord::peek_bulk(data);
    let Ok(record) = OutboxRecord::decode(data) else { return };
    if peek.is_some() {
        assert_eq!(peek, kind(&record), "peek_bulk disagrees with decode: {record:?}");
    }
    let _ = record.topic_suffix();
    let bytes = record.encode();
    assert_eq!(OutboxRecord::peek_bulk(&bytes), kind(&record), "peek of the encoding");
    let again = OutboxRecord::decode(&bytes).expect("an encoded record decodes");
    assert_eq!(again.encode(), bytes, "encode∘decode∘encode differs from encode");
    if !matches!(record, OutboxRecord::Samples { rate_hz, .. } if rate_hz.is_nan()) {
        assert_eq!(again, record, "decode∘encode differs");
    }
});
