//! `linegate explain` on golden traces decided by the real daemon (`run --exit-at-end`): the
//! text a maintenance engineer reads, compared whole with `fixtures/expected/*.explain.txt`
//! (`LINEGATE_BLESS=1 cargo test --test explain` rewrites them; review the diff), its `--json`
//! fields, and, on the CWRU recordings, the values of the frames that did not count, re-derived
//! from the history, against the reference frames.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::daemon::run_to_end;
use support::{cli, fixture, free_port, trace, trace_daemon_sections};

/// `name`'s trace decided by the daemon under `name.toml` (or `golden.toml`): the directory
/// and the configuration.
fn decided(name: &str, toml: &str) -> (tempfile::TempDir, PathBuf) {
    decided_under(name, std::fs::read_to_string(trace(toml)).unwrap())
}

/// `name`'s trace decided by the daemon under the configuration `head`.
fn decided_under(name: &str, head: String) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let tail = trace_daemon_sections(
        &dir.path().join("store"),
        "",
        free_port(),
        &trace(&format!("{name}.jsonl")),
        0.0,
    );
    let config = dir.path().join("gateway.toml");
    std::fs::write(&config, head + &tail).unwrap();
    run_to_end(&config, &["--no-forward"]);
    (dir, config)
}

/// Every alert id of the store, in archive order, each once.
fn alert_ids(config: &Path) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for line in cli(&["dump", "alerts"], config).lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let id = v["alert_id"].as_str().unwrap().to_owned();
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// `explain`'s text of every alert, each up to its transitions (the ledger's own lines, which
/// `tests/control.rs` checks).
fn explained(config: &Path) -> String {
    let mut out = String::new();
    for id in alert_ids(config) {
        let text = cli(&["explain", &id], config);
        out.push_str(text.split("\ntransitions\n").next().unwrap());
        out.push_str("\n\n");
    }
    out
}

fn compare(got: &str, want: &Path) {
    if std::env::var_os("LINEGATE_BLESS").is_some() {
        assert!(std::env::var_os("CI").is_none(), "bless locally, never in CI");
        std::fs::write(want, got).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(want)
        .unwrap_or_else(|e| panic!("{}: {e} (LINEGATE_BLESS=1 writes it)", want.display()));
    assert!(
        got == expected,
        "{} differs\n--- expected\n{expected}\n--- got\n{got}",
        want.display()
    );
}

#[test]
fn velocity_zones_explained_with_units_zones_and_reasons() {
    let (_dir, config) = decided("velocity_zones", "velocity_zones.toml");
    let text = explained(&config);
    compare(&text, &fixture("fixtures/expected/velocity_zones.explain.txt"));
    assert!(text.contains("velocity_rms ≥ 2.8 mm/s (zone C, group 2 rigid)"), "{text}");
    assert!(!text.contains("0000000"), "no 16-digit numbers: {text}");
}

#[test]
fn a_late_merge_explained_revision_by_revision() {
    let (_dir, config) = decided("late_merges", "golden.toml");
    let text = explained(&config);
    compare(&text, &fixture("fixtures/expected/late_merges.explain.txt"));
    assert!(text.contains("counted (late)"), "{text}");
    assert!(text.contains("→ supersede"), "{text}");
    assert!(text.contains("(superseded; this alert carries on) → amend"), "{text}");
}

/// A composite alert (docs/contracts.md section 4, composite rules): its rule, then one line per
/// member alert it cites, with the member's onset, its evidence count and the member rule's own
/// line; `--json` carries the same under `composite`.
#[test]
fn a_composite_alert_explained_member_by_member() {
    let (_dir, config) = decided("composite_all_of", "composite_all_of.toml");
    let text = explained(&config);
    compare(&text, &fixture("fixtures/expected/composite_all_of.explain.txt"));
    let id = alert_ids(&config).into_iter().find(|id| id.contains("/both/")).unwrap();
    let one = cli(&["explain", &id], &config);
    assert!(one.contains("all_of [vib, env] within 2 min"), "{one}");
    let member_lines: Vec<&str> = one.lines().filter(|l| l.starts_with("  member ")).collect();
    assert_eq!(member_lines.len(), 2, "{one}");
    assert!(member_lines[0].starts_with("  member vib: alert gw-test/vib/press-7/"), "{one}");
    assert!(member_lines[1].contains("2 evidence event(s)"), "{one}");
    let x: Value = serde_json::from_str(&cli(&["explain", &id, "--json"], &config)).unwrap();
    let members = x["composite"]["members"].as_array().unwrap();
    let rules: Vec<&str> = members.iter().map(|m| m["rule"].as_str().unwrap()).collect();
    assert_eq!(rules, ["vib", "env"], "{x}");
    assert!(members.iter().all(|m| m["onset_ms"].is_i64() && m["evidence"] == 2), "{x}");
    assert_eq!(x["composite"]["kind"], "all_of", "{x}");
}

#[test]
fn count_clock_says_which_events_did_not_count_for_their_clock() {
    let (_dir, config) = decided("count_clock", "count_clock.toml");
    let id = &alert_ids(&config)[0];
    let x: Value = serde_json::from_str(&cli(&["explain", id, "--json"], &config)).unwrap();
    assert_eq!(x["rule"]["count_clock"], serde_json::json!(["synced", "holdover"]));
    let events = x["window"]["events"].as_array().unwrap();
    let clock: Vec<&str> = events
        .iter()
        .filter(|e| e["status"] == "not_counted")
        .map(|e| e["why"].as_str().unwrap())
        .collect();
    assert_eq!(clock, ["clock stepped", "clock unsynced"], "{x}");
    let counted: Vec<&Value> = events
        .iter()
        .filter(|e| e["status"] == "counted" && e["after_onset"] == false)
        .map(|e| &e["event_id"])
        .collect();
    let evidence: Vec<&Value> =
        x["evidence"].as_array().unwrap().iter().map(|e| &e["event_id"]).collect();
    assert_eq!(counted, evidence, "the evidence is what counted up to the onset: {x}");
    assert!(events.iter().all(|e| e["ts_ms"].is_i64() && e["value"].is_f64()), "{x}");
    assert!(x["revisions"].as_array().unwrap().iter().all(|r| r["reason"].is_string()), "{x}");
}

/// Frames below the threshold are in no alert record: `explain` derives them again from the
/// history, and they are the frames the gateway cut, value for value.
#[test]
fn cwru_frames_that_did_not_count_are_derived_again_from_the_history() {
    let (_dir, config) = decided("cwru", "cwru.toml");
    let frames: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(fixture("fixtures/expected/cwru.frames.json")).unwrap(),
    )
    .unwrap();
    let reference = |id: &str| {
        frames.iter().find(|f| f["event_id"] == id).map(|f| f["value"].as_f64().unwrap())
    };
    let mut below = 0;
    for id in alert_ids(&config) {
        let x: Value = serde_json::from_str(&cli(&["explain", &id, "--json"], &config)).unwrap();
        for e in x["window"]["events"].as_array().unwrap() {
            let id = e["event_id"].as_str().unwrap();
            let want = reference(id).unwrap_or_else(|| panic!("{id} is not a reference frame"));
            let got = e["value"].as_f64().unwrap_or_else(|| panic!("{id} has no value: {e}"));
            assert!((got - want).abs() <= 1e-9 * want.abs(), "{id}: {got} against {want}");
            below += usize::from(e["status"] == "below_threshold");
        }
    }
    assert!(below >= 5, "frames below threshold were listed: {below}");
}

/// An inner-race rule over the envelope indicator on the CWRU recordings, with their asset table:
/// the alert names the defect frequency it looks at, and the indicator's values are bare numbers.
#[test]
fn an_envelope_alert_names_the_defect_it_points_at() {
    let head = format!(
        "[gateway]\nid = \"gw-cwru\"\n[rule]\nname = \"inner-race\"\nmetric = \"env_bpfi\"\n\
         threshold = 3\n[time]\nwatermark_bound = \"5s\"\nidle_timeout = \"30s\"\n{}",
        std::fs::read_to_string(fixture("fixtures/cwru/assets.toml")).unwrap()
    );
    let (_dir, config) = decided_under("cwru", head);
    let ids = alert_ids(&config);
    let b = ids.iter().find(|id| id.contains("/motor-b/")).expect("motor-b's inner race");
    let text = cli(&["explain", b], &config);
    assert!(text.contains("\n  defect: inner race: 5.415 × 29.95 Hz = 162.2 Hz\n"), "{text}");
    assert!(text.contains("env_bpfi ≥ 3, 3 events within 2 min"), "{text}");
    assert!(text.contains("  b-de#1  env_bpfi 19.8  counted"), "{text}");
    assert!(
        text.contains("3 events with env_bpfi ≥ 3 within 2 min on motor-b: b-de#1 at"),
        "{text}"
    );
    let x: Value = serde_json::from_str(&cli(&["explain", b, "--json"], &config)).unwrap();
    let d = &x["rule"]["defect"];
    assert_eq!((d["defect"].as_str(), d["part"].as_str()), (Some("bpfi"), Some("inner race")));
    assert!((d["frequency_hz"].as_f64().unwrap() - 5.4152 * 1797.0 / 60.0).abs() < 1e-9, "{x}");
}
