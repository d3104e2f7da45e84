//! The checkpoint's value in parts (`linegate::store::checkpoint_parts`): `decode` of any `c/`
//! value and further parts, the input framed as pieces `[len: u16 BE][bytes]` (the first is `c/`);
//! and `encode` of the input as a snapshot.
//!
//! Properties: never a panic, and no allocation beyond what the bytes can hold (libFuzzer's
//! `-rss_limit_mb` and `-malloc_limit_mb`, scripts/fuzz); what decodes encodes to parts that
//! decode to the same checkpoint; any snapshot encodes to parts of at most `PART_BYTES` (the
//! first with its header) that decode to it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linegate::store::checkpoint_parts::{decode, encode, PART_BYTES};

fuzz_target!(init: linegate_fuzz::write_seeds(linegate_fuzz::checkpoint_parts), |data: &[u8]| {
    let pieces = linegate_fuzz::unframe(data);
    if let Some((head, more)) = pieces.split_first() {
        if let Ok((pos, snapshot)) = decode(head, more) {
            let again = encode(pos, &snapshot);
            let more: Vec<&[u8]> = again[1..].iter().map(Vec::as_slice).collect();
            assert_eq!(decode(&again[0], &more), Ok((pos, snapshot)), "decoded, encoded, decoded");
        }
    }
    let parts = encode(7, data);
    assert!(parts.iter().skip(1).all(|p| p.len() <= PART_BYTES), "a part over the limit");
    assert!(parts[0].len() <= PART_BYTES + 15, "the first part over the limit");
    let more: Vec<&[u8]> = parts[1..].iter().map(Vec::as_slice).collect();
    assert_eq!(decode(&parts[0], &more), Ok((7, data.to_vec())), "round trip");
});
