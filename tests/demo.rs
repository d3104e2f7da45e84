//! `linegate demo --quick`, the real binary: the embedded broker, the outage, the backlog sent
//! after it, and the final reports. The decisions are those of the trace (deterministic); which
//! events go from backlog depends on the wall clock, so only their presence is asserted.
#![cfg(feature = "demo")]

mod support;

use support::{linegate, root, run};

#[test]
fn demo_delivers_everything_accepted_across_a_broker_outage_and_reconciles() {
    let out = run(linegate(&["demo", "--quick"]).current_dir(root()));
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    let all = format!("{stdout}\n--- stderr\n{stderr}");
    assert!(out.ok(), "{all}");
    // Progress: one line per phase and per second, the outage and the return.
    assert!(stderr.contains("BROKER GONE"), "{all}");
    assert!(stderr.contains("BROKER BACK"), "{all}");
    let down: Vec<&str> = stderr.lines().filter(|l| l.contains("broker DOWN |")).collect();
    assert!(!down.is_empty(), "{all}");
    assert!(stderr.trim_end().ends_with("PASS"), "{all}");
    assert!(stderr.contains("fixtures/traces/inner_race.jsonl, 2 rounds"), "{all}");
    // Two rounds of the CWRU recordings: one incident per machine and round for motor-a and
    // motor-b, each opened and closed; 44 events derived from the raw samples, 10 of them
    // motor-c's (the inner race of record 105, below the RMS rule's threshold).
    assert!(stdout.contains("== 4 alert(s), explained"), "{all}");
    assert_eq!(stdout.matches("  revision 1 close: ").count(), 4, "{all}");
    assert!(stdout.contains("44 accepted events, 8 alert records: 52 acknowledged, 0 queued"));
    assert!(stdout.contains("the gateway lost nothing it accepted"), "{all}");
    assert!(stdout.contains("alert records: 8 decided, 8 delivered"), "{all}");
    let events = stdout.lines().find(|l| l.starts_with("events: ")).unwrap();
    let replayed: u64 = events
        .strip_prefix("events: 44 accepted, 44 delivered (")
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("{events}"))
        .parse()
        .unwrap();
    assert!(replayed > 0, "the outage left a backlog that went out flagged: {events}");
    assert!(stdout.contains("demo: ok: everything accepted was delivered"), "{all}");
}
