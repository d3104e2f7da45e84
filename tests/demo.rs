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
    // Two rounds of the CWRU recordings and two rules: per round one RMS incident on motor-a
    // and one on motor-b, and one inner-race incident (env_bpfi) on motor-c, whose RMS stays
    // below the RMS rule's threshold; each opened and closed. 44 events derived from the raw
    // samples, 10 of them motor-c's.
    assert!(stdout.contains("== 6 alert(s), explained"), "{all}");
    assert_eq!(stdout.matches("  revision 1 close: ").count(), 6, "{all}");
    assert_eq!(stdout.matches("\nalert gw-cwru/inner-race/motor-c/").count(), 2, "{all}");
    assert!(!stdout.contains("gw-cwru/high-vibration/motor-c/"), "{all}");
    assert!(stdout.contains("44 accepted events, 12 alert records: 56 acknowledged, 0 queued"));
    // The inner-race alerts explained down to their envelope peaks: every evidence frame's
    // peak at the inner race's frequency, its value the event's.
    let peaks = "envelope peaks behind the evidence (inner race, computed again from each frame's \
                 raw samples):";
    assert_eq!(stdout.matches(peaks).count(), 2, "{all}");
    // An evidence frame's line: `  gw-cwru.c-de.N: env_bpfi …` (explain's rule line, `rule
    // inner-race (…): env_bpfi ≥ 5`, is not one).
    let evidence: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("  gw-cwru.c-de.") && l.contains(": env_bpfi "))
        .collect();
    assert_eq!(evidence.len(), 6, "{all}");
    for line in evidence {
        assert!(line.contains(" at 162 Hz / floor "), "{line}");
        assert!(line.ends_with("inner race 5.4152 × 29.95 Hz = 162.2 Hz; as the event"), "{line}");
    }
    assert!(stdout.contains("the gateway lost nothing it accepted"), "{all}");
    assert!(stdout.contains("alert records: 12 decided, 12 delivered"), "{all}");
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

/// `linegate demo --quick --sparkplug`: the same run with the gateway also a Sparkplug B edge
/// node, and the host's view printed before the usual reports: births with aliases and types,
/// the DDATA digest, the values held during the outage sent as historical, first.
#[test]
fn demo_with_sparkplug_shows_the_hosts_view_and_the_outage_as_history() {
    let out = run(linegate(&["demo", "--quick", "--sparkplug"]).current_dir(root()));
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    let all = format!("{stdout}\n--- stderr\n{stderr}");
    assert!(out.ok(), "{all}");
    assert!(stderr.contains("Sparkplug B edge node gw-cwru in group demo"), "{all}");
    assert!(stderr.contains("| Sparkplug "), "progress counts the host's values: {all}");
    let view = stdout.find("== Sparkplug B: the host's view of spBv1.0/demo/#").expect(&all);
    assert!(view < stdout.find("== 6 alert(s), explained").expect(&all), "{all}");
    // Births: the node's bdSeq and rebirth command, every machine's metrics with alias and type.
    let counts = stdout.lines().find(|l| l.starts_with("messages: ")).expect(&all);
    let nbirths: u32 = counts["messages: ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!(nbirths >= 2, "births again after the outage: {counts}");
    assert!(stdout.contains("Node Control/Rebirth Boolean (alias 1)"), "{all}");
    for machine in ["motor-a", "motor-b", "motor-c"] {
        assert!(stdout.contains(&format!("DBIRTH {machine} (the last): ")), "{all}");
    }
    let declared = |name: &str, kind: &str| {
        stdout.lines().any(|l| l.starts_with("  alias ") && l.contains(name) && l.ends_with(kind))
    };
    assert!(declared("/accel_rms ", "Double"), "{all}");
    assert!(declared("/env_bpfi ", "Double"), "{all}");
    assert!(declared("high-vibration/incident_open ", "Boolean"), "{all}");
    assert!(declared("inner-race/onset ", "DateTime"), "{all}");
    // The digest: original timestamps in RFC 3339, and values held during the outage.
    let digest = stdout.lines().filter(|l| l.starts_with("  motor-") && l.contains("Z .. "));
    assert!(digest.count() >= 3, "a digest line per metric, times in RFC 3339: {all}");
    let summary = stdout.lines().find(|l| l.starts_with("sparkplug: ") && l.contains(" values, "));
    let summary = summary.expect(&all);
    let historical: u64 = summary
        .split(", ")
        .nth(1)
        .and_then(|p| p.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(historical > 0, "the outage's values came as history: {summary}");
    assert!(summary.ends_with("each before the live values of its metric"), "{summary}");
    assert!(stdout.contains("sparkplug: every alias resolved by a birth; seq without a gap"));
    assert!(!stdout.contains("SPARKPLUG PROBLEM"), "{all}");
    // The usual demo, unchanged.
    assert!(stdout.contains("demo: ok: everything accepted was delivered"), "{all}");
    assert!(stderr.trim_end().ends_with("PASS"), "{all}");
}
