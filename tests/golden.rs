//! Golden traces: `linegate replay` must reproduce every fixture's expected alerts and summary
//! byte for byte. The scenarios and their expected meaning are described in
//! fixtures/traces/make_golden.py. No expected file rests on a hand review alone: the final
//! incidents of its alerts must be the brute-force reference's (`support::incidents`) over the
//! events the rule applies, and its summary's counts those same events' counts. Those events are
//! derived from the trace and its configuration alone by `support::applied` (validation,
//! duplicates, lateness, and the frames of raw samples, `samples_clock_jump`'s included), never
//! from the crate's replay output.
//! `LINEGATE_BLESS=1 cargo test --test golden` rewrites them (then review the diff!); with `CI`
//! set, it fails instead, so CI never passes by rewriting what it checks. A blessed file is still
//! held to the reference.

mod support;

use std::path::Path;

use linegate::rule::alert::AlertRecord;
use serde_json::Value;
use support::applied::{self, Rules};
use support::composite::{self, Composite};
use support::incidents::{check_revisions, final_incidents, FinalIncident};
use support::{fixture, linegate, replay, run, trace};

/// The goldens whose scenario has no incident (make_golden.py says why). The reference must find
/// one in every other, so that no expectation passes by both sides being empty.
const WITHOUT_INCIDENTS: [&str; 5] =
    ["exactly_two_minutes_apart", "too_late", "id_conflict", "clock_future", "poison"];

/// Runs the binary on `fixtures/traces/{name}.jsonl` and compares with `fixtures/expected/`,
/// then holds the expected files to the reference.
fn golden(name: &str) -> Vec<AlertRecord> {
    let own = trace(&format!("{name}.toml"));
    let config = if own.exists() { own } else { trace("golden.toml") };
    let dir = tempfile::tempdir().unwrap();
    let out = replay(&trace(&format!("{name}.jsonl")), &config, dir.path());
    let expected = fixture("fixtures/expected");
    let (alerts, summary) = (
        expected.join(format!("{name}.alerts.jsonl")),
        expected.join(format!("{name}.summary.json")),
    );
    compare(&out.alerts, &alerts);
    compare(&out.summary, &summary);
    let records: Vec<AlertRecord> =
        out.alert_lines().iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    check_revisions(&records);
    agrees_with_the_reference(name, &config, &alerts, &summary);
    records
}

/// The final incidents of the expected alerts are the brute-force reference's over the events
/// `support::applied` derives from the trace, and the expected summary counts those events.
fn agrees_with_the_reference(name: &str, config: &Path, alerts: &Path, summary: &Path) {
    let rules = Rules::load(config);
    let applied = applied::derive(&trace(&format!("{name}.jsonl")), &rules);
    let text = std::fs::read_to_string(alerts).unwrap();
    let records: Vec<AlertRecord> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // Each rule's records against its own reference (docs/contracts.md section 4: every rule is
    // decided on its own over the same events); no record of a rule not configured.
    let per_rule = applied.rule_incidents(&rules);
    for (rule, want) in &per_rule {
        let of_rule: Vec<AlertRecord> =
            records.iter().filter(|r| &r.rule == rule).cloned().collect();
        assert_eq!(
            final_incidents(&of_rule),
            *want,
            "{}: rule {rule}'s final incidents (left) are not the brute-force reference's (right)",
            alerts.display()
        );
    }
    let composites = Composite::load(config);
    for c in &composites {
        composite_agrees(c, &per_rule, &records, alerts);
    }
    let names: Vec<&str> = per_rule.iter().map(|(r, _)| r.as_str()).collect();
    let composite_names: Vec<&str> = composites.iter().map(|c| c.name.as_str()).collect();
    let known = |r: &str| names.contains(&r) || composite_names.contains(&r);
    assert!(records.iter().all(|r| known(&r.rule)), "{}", alerts.display());
    let want: Vec<_> = per_rule.iter().flat_map(|(_, w)| w).collect();
    assert_eq!(
        want.is_empty(),
        WITHOUT_INCIDENTS.contains(&name),
        "{name}: the reference finds {} incidents; WITHOUT_INCIDENTS says otherwise",
        want.len()
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap();
    let n =
        |key: &str| s[key].as_u64().unwrap_or_else(|| panic!("{}: no {key}", summary.display()));
    let quarantined = s["quarantined"].as_object().unwrap().values().map(|v| v.as_u64().unwrap());
    let got = applied::Counts {
        records: n("records"),
        accepted: n("accepted"),
        duplicates: n("duplicates"),
        too_late: n("too_late"),
        quarantined: quarantined.sum(),
        events_derived: n("events_derived"),
    };
    assert_eq!(got, applied.counts, "{}: counts (left) against the reference's", summary.display());
    // With several rules, the alert records by rule and kind are the expected records'.
    let mut by_rule = serde_json::Map::new();
    for r in records.iter().filter(|_| names.len() + composite_names.len() > 1) {
        let kinds = by_rule.entry(r.rule.clone()).or_insert_with(|| serde_json::json!({}));
        let kind = serde_json::to_value(r.kind).unwrap().as_str().unwrap().to_owned();
        let n = kinds[&kind].as_u64().unwrap_or(0);
        kinds[&kind] = (n + 1).into();
    }
    let listed = s.get("alerts_by_rule").cloned().unwrap_or_else(|| serde_json::json!({}));
    assert_eq!(listed, Value::Object(by_rule), "{}: alerts_by_rule", summary.display());
}

/// A composite rule's final alerts are, machine by machine, the brute-force reference's over
/// its members' reference incidents (docs/contracts.md section 4, composite rules), and it has
/// some: no composite golden passes by both sides being empty.
fn composite_agrees(
    c: &Composite,
    per_rule: &[(String, Vec<FinalIncident>)],
    records: &[AlertRecord],
    alerts: &Path,
) {
    let mut machines: Vec<&str> =
        per_rule.iter().flat_map(|(_, v)| v.iter().map(|i| i.machine.as_str())).collect();
    machines.sort_unstable();
    machines.dedup();
    let mut found = 0;
    for m in machines {
        let members: Vec<(String, Vec<(i64, i64)>)> = per_rule
            .iter()
            .filter(|(r, _)| c.members.contains(r))
            .map(|(r, v)| (r.clone(), composite::spans(v, m)))
            .collect();
        let want = c.reference(&members);
        let got = composite::final_composites(records, &c.name, m);
        assert_eq!(
            got,
            want,
            "{}: composite rule {} on {m}: final incidents (left) against the reference",
            alerts.display(),
            c.name
        );
        found += want.len();
    }
    assert!(found > 0, "{}: composite rule {} has no incident", alerts.display(), c.name);
}

fn compare(got: &Path, want: &Path) {
    let got_bytes = std::fs::read(got).unwrap();
    if std::env::var_os("LINEGATE_BLESS").is_some() {
        assert!(
            std::env::var_os("CI").is_none(),
            "LINEGATE_BLESS is set in CI (CI is set): blessing rewrites {} with whatever the \
             build produced and would pass any output; bless locally and review the diff",
            want.display()
        );
        std::fs::write(want, &got_bytes).unwrap();
        return;
    }
    let want_bytes = std::fs::read(want)
        .unwrap_or_else(|e| panic!("{}: {e} (LINEGATE_BLESS=1 writes it)", want.display()));
    if got_bytes != want_bytes {
        panic!(
            "{} differs\n--- expected\n{}\n--- got\n{}",
            want.display(),
            String::from_utf8_lossy(&want_bytes),
            String::from_utf8_lossy(&got_bytes)
        );
    }
}

macro_rules! golden_tests {
    ($($name:ident),* $(,)?) => {
        $( #[test] fn $name() { golden(stringify!($name)); } )*

        /// Every trace in fixtures/traces has a test above.
        #[test]
        fn every_trace_has_a_golden_test() {
            let listed = [$(stringify!($name)),*];
            for entry in std::fs::read_dir(fixture("fixtures/traces")).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "jsonl") {
                    let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
                    assert!(
                        listed.contains(&stem.as_str()) || stem == "cwru",
                        "{stem}.jsonl has no golden test"
                    );
                }
            }
        }
    };
}

golden_tests!(
    three_in_two_minutes,
    exactly_two_minutes_apart,
    equal_timestamps,
    incident_extended,
    two_incidents,
    late_creates_incident,
    late_moves_onset,
    late_merges,
    too_late,
    duplicates,
    id_conflict,
    idle_sensor,
    clock_future,
    poison,
    two_machines_interleaved,
    per_machine_threshold,
    ms2_events,
    schema_versions_mixed,
    early,
    auto_bound,
    samples_clock_jump,
    also_max,
    count_clock,
    velocity_zones,
    inner_race,
    several_rules,
    composite_all_of,
    composite_sequence,
);

/// The traces cut from the CWRU recordings by the scripts of fixtures/cwru/ (make_trace.py,
/// make_inner_race.py), which need the data directory, not make_golden.py.
const FROM_CWRU: [&str; 2] = ["cwru.jsonl", "inner_race.jsonl"];

/// fixtures/traces/make_golden.py, which describes every golden, writes exactly the committed
/// traces (all but those cut from the CWRU recordings).
#[test]
fn make_golden_writes_the_committed_traces() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("python3")
        .arg(trace("make_golden.py"))
        .arg(dir.path())
        .output()
        .expect("python3 runs make_golden.py");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut written = 0;
    for entry in std::fs::read_dir(fixture("fixtures/traces")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap();
        if !name.ends_with(".jsonl") || FROM_CWRU.contains(&name) {
            continue;
        }
        let fresh = std::fs::read(dir.path().join(name))
            .unwrap_or_else(|e| panic!("make_golden.py does not write {name}: {e}"));
        assert!(fresh == std::fs::read(&path).unwrap(), "{name} differs from make_golden.py's");
        written += 1;
    }
    let made = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(made, written, "make_golden.py writes a trace that is not committed");
    assert!(written > 20, "only {written} goldens");
}

/// A derived event the rule rejects is kept in `--rejected` with its reason and its content.
#[test]
fn rejected_derived_events_are_kept_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let rejected = dir.path().join("rejected.jsonl");
    run(linegate(&["replay"])
        .arg(trace("samples_clock_jump.jsonl"))
        .args(["--config".as_ref(), trace("golden.toml").as_os_str()])
        .args(["--out".as_ref(), dir.path().join("alerts.jsonl").as_os_str()])
        .args(["--rejected".as_ref(), rejected.as_os_str()]))
    .success();
    let text = std::fs::read_to_string(&rejected).unwrap();
    let rows: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!(rows[0]["reason"], "clock_future");
    assert_eq!(rows[0]["derived"], true);
    assert_eq!(rows[0]["line"], 4);
    let raw: serde_json::Value = serde_json::from_str(rows[0]["raw"].as_str().unwrap()).unwrap();
    assert_eq!(raw["event_id"], "gw-test.s1.3");
}
