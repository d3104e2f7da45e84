//! The event parser (`linegate::event::parse::parse_event`) on arbitrary text, both schema
//! versions (the seeds hold schema-1 and schema-2 events).
//!
//! Properties: never a panic; the same text gives the same verdict; the fast path equals the
//! exact path (`exact_event`, as the unit tests in src/event/parse/tests.rs compare them); an
//! accepted event has a finite, non-negative value without negative zero; an accepted schema-1
//! event serialised again parses to the same event with the same fingerprint.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linegate::event::parse::{exact_event, parse_event, MAX_EVENT_BYTES};

fuzz_target!(init: linegate_fuzz::write_seeds(linegate_fuzz::some_events), |data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else { return };
    let verdict = parse_event(raw);
    assert_eq!(verdict, parse_event(raw), "not deterministic");
    if raw.len() <= MAX_EVENT_BYTES {
        assert_eq!(verdict, exact_event(raw), "fast and exact paths disagree");
    }
    let Ok(e) = verdict else { return };
    assert!(e.value.is_finite() && e.value.is_sign_positive(), "value {}", e.value);
    assert!(e.schema == 1 || e.schema == 2, "schema {}", e.schema);
    if e.schema == 1 {
        let again = parse_event(&serde_json::to_string(&e).expect("an event serialises"));
        assert_eq!(again.as_ref(), Ok(&e), "a re-serialised event differs");
        assert_eq!(again.map(|a| a.fingerprint()), Ok(e.fingerprint()));
    }
});
