//! The decider snapshot decoder, as the store decodes it (`Decider::restore`, which decodes the
//! snapshot with `records::snapshot::decode` and the rule engine's and frame cutter's snapshots
//! inside it), under the default configuration; seeded with snapshots taken while replaying
//! fixture traces.
//!
//! Properties: never a panic; a restored decider's own snapshot restores with the same counts;
//! both deciders then decide an event, raw samples and a tick alike (the same verdicts, alert
//! records and counts: the determinism contract of src/records/snapshot.rs), without a panic,
//! counting each line. (A restored snapshot whose incident listed a member outside the incident
//! used to trip an assertion of the rule core when deciding; the restore now refuses it:
//! tests/fuzz_regressions.rs.)
//! The snapshot's bytes need not be equal: maps inside it are written in their own order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linegate::decide::Decider;
use linegate::trace::parse::parse_line;

const LINES: [&str; 3] = [
    r#"{"at":1700000000250,"kind":"event","event":{"event_id":"gw-01.s1.1","machine":"press-7","sensor":"s1","seq":1,"ts_ms":1700000000000,"clock":{"state":"synced"},"metric":"accel_rms","value":0.9,"unit":"g","schema":1,"quality":"good"}}"#,
    r#"{"at":1700000001050,"kind":"samples","machine":"press-1","sensor":"s2","t0_ms":1700000000000,"rate_hz":4,"unit":"g","data":[0.9,-0.9,0.9,-0.9]}"#,
    r#"{"at":1700000300000,"kind":"tick"}"#,
];

fuzz_target!(init: linegate_fuzz::write_seeds(linegate_fuzz::decider_snapshots), |data: &[u8]| {
    let config = linegate_fuzz::decider_config();
    let Ok(mut d) = Decider::restore(&config, data) else { return };
    let mut again =
        Decider::restore(&config, &d.snapshot()).expect("a decider's own snapshot restores");
    assert_eq!(again.counts(), d.counts(), "counts differ after restore");
    let records = d.counts().records;
    for line in LINES {
        let parsed = parse_line(line.as_bytes());
        let (mut alerts, mut alerts_again) = (Vec::new(), Vec::new());
        let verdict = d.line(&parsed, &mut alerts);
        assert_eq!(verdict, again.line(&parsed, &mut alerts_again), "{line}");
        assert_eq!(alerts, alerts_again, "{line}");
        assert_eq!(d.take_rejected_derived(), again.take_rejected_derived(), "{line}");
        d.note_state();
        again.note_state();
    }
    assert_eq!(again.counts(), d.counts(), "counts differ after deciding");
    assert_eq!(d.counts().records, records.wrapping_add(3), "records not counted");
});
