//! The store's pages, plain and packed (`linegate::store::page`): `unpack`, then `entries`, on
//! any bytes; and `pack` of a page made of the input's pieces.
//!
//! Properties: never a panic, and no allocation beyond what the bytes can hold (libFuzzer's
//! `-rss_limit_mb` and `-malloc_limit_mb`, scripts/fuzz); a value that unpacks to a page gives
//! records that make the same plain page again (a packed one's header giving their count and
//! bytes, `packed_totals`, its records without the empty entries when it has holes); a page cut from the input at its zero bytes packs to a value that
//! unpacks to exactly that page, with its count.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linegate::store::page;

fuzz_target!(init: linegate_fuzz::write_seeds(linegate_fuzz::store_pages), |data: &[u8]| {
    if let Ok(plain) = page::unpack(data) {
        if let Ok(records) = page::entries(&plain) {
            assert_eq!(page::encode(records.iter().copied()), plain[..], "entries re-encode");
            assert_eq!(page::count(data), Some(records.len() as u64), "count from the header");
            let bytes = records.iter().map(|r| r.len() as u64).sum();
            if data[0] == page::PACKED {
                assert_eq!(page::packed_totals(data), Some((records.len() as u64, bytes)));
            }
            if data[0] == page::PACKED_HOLES {
                let full = records.iter().filter(|r| !r.is_empty()).count() as u64;
                assert_eq!(page::packed_totals(data), Some((full, bytes)), "records, not holes");
            }
        }
    }
    let pieces: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    let plain = page::encode(pieces.iter().copied());
    let packed = page::pack(plain.clone());
    assert_eq!(page::unpack(&packed).as_deref(), Ok(&plain[..]), "pack round trip");
    assert_eq!(page::count(&packed), Some(pieces.len() as u64));
});
