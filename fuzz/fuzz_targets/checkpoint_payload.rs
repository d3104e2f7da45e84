//! The checkpoint's records: `CheckpointPayload::decode` and `QuarantineEntry::decode`, then the
//! decider snapshot inside a payload restored as the decide stage restores it
//! (`Decider::restore`, under the default configuration).
//!
//! Properties: never a panic; decode∘encode round trips for both records; a payload whose
//! decider snapshot restores gives a decider whose own snapshot restores again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linegate::decide::Decider;
use linegate::records::checkpoint::{CheckpointPayload, QuarantineEntry};

fuzz_target!(init: linegate_fuzz::write_seeds(linegate_fuzz::checkpoint_payloads), |data: &[u8]| {
    if let Ok(q) = QuarantineEntry::decode(data) {
        assert_eq!(QuarantineEntry::decode(&q.encode()).as_ref(), Ok(&q), "quarantine round trip");
    }
    let Ok(p) = CheckpointPayload::decode(data) else { return };
    assert_eq!(CheckpointPayload::decode(&p.encode()).as_ref(), Ok(&p), "payload round trip");
    let config = linegate_fuzz::decider_config();
    if let Ok(d) = Decider::restore(&config, &p.decider) {
        Decider::restore(&config, &d.snapshot()).expect("a decider's own snapshot restores");
    }
});
