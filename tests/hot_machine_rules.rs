//! The hot machine on several rules: one machine, 8 sensors at 1 event/s each, every event above
//! every rule's threshold for a simulated day (`gen_trace 1 86400 8 hot`, 691 200 events), under
//! three measurement rules and a composite `all_of` over two of them
//! (`benches/support/hot_rules.toml`). Each rule's state stays bounded by its window, the
//! allowed lateness and the watermark bound, not by the incident's length (a day), and no alert
//! record grows past 16 KiB. The peak RSS of `replay` over the same day is measured by
//! `benches/hot_machine.sh` (docs/performance.md, hot machine).

use std::collections::BTreeMap;

use linegate::config::Config;
use linegate::rule::alert::AlertRecord;
use linegate::rule::{Engine, Params, StateSize};
use linegate::synth::Load;

/// The largest alert record goal (docs/performance.md).
const RECORD_MAX: usize = 16 * 1024;

const SENSORS: usize = 8;

fn config() -> Config {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/support/hot_rules.toml"),
    )
    .unwrap();
    Config::from_toml(&text, "hot_rules.toml").unwrap()
}

/// What one rule did over the day: its largest part of the state, its largest record, and its
/// records by kind.
#[derive(Debug, Default)]
struct Seen {
    peak: StateSize,
    /// The largest state in the first two hours, and after them (it must not grow then).
    early_peak: StateSize,
    late_peak: StateSize,
    largest_record: usize,
    kinds: BTreeMap<String, u32>,
}

fn max_size(a: &mut StateSize, b: &StateSize) {
    a.high_events = a.high_events.max(b.high_events);
    a.incidents = a.incidents.max(b.incidents);
    a.members = a.members.max(b.members);
}

/// Each record's rule, size and kind.
fn note(out: &mut Vec<AlertRecord>, seen: &mut BTreeMap<String, Seen>) {
    for rec in out.drain(..) {
        let s = seen.entry(rec.rule.clone()).or_default();
        let len = serde_json::to_string(&rec).unwrap().len();
        s.largest_record = s.largest_record.max(len);
        *s.kinds.entry(format!("{:?}", rec.kind).to_lowercase()).or_default() += 1;
    }
}

/// Each rule's part of the state `elapsed_ms` into the day.
fn sizes_at(engine: &Engine, elapsed_ms: i64, seen: &mut BTreeMap<String, Seen>) {
    for (rule, size) in engine.rule_sizes() {
        let s = seen.entry(rule.to_owned()).or_default();
        max_size(&mut s.peak, &size);
        match elapsed_ms < 2 * 3_600_000 {
            true => max_size(&mut s.early_peak, &size),
            false => max_size(&mut s.late_peak, &size),
        }
    }
}

#[test]
fn a_machine_hot_on_three_rules_and_a_composite_for_a_day_stays_bounded() {
    let config = config();
    let params = Params::from_config(&config);
    let names: Vec<String> = params
        .rules
        .iter()
        .map(|r| r.name.clone())
        .chain(params.composites.iter().map(|c| c.name.clone()))
        .collect();
    assert_eq!(names, ["warn", "alarm", "sustained", "warn-and-alarm"]);
    let mut engine = Engine::new(params.clone());
    let mut load = Load::new(1, 86_400);
    load.sensors_per_machine = SENSORS;
    load.burst_rate = 1.0; // as `gen_trace ... hot`
    load.duplicate_rate = 0.0;

    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    let mut shared_peak = StateSize::default();
    let mut out = Vec::new();
    let (mut events, mut last_at) = (0u64, 0i64);
    let start = load.start_ms;
    load.generate(|at, e| {
        engine.on_event(at, e, &mut out);
        note(&mut out, &mut seen);
        events += 1;
        last_at = at;
        // Every minute of event time: the state as the metrics would show it.
        if events % (SENSORS as u64 * 60) == 0 {
            sizes_at(&engine, e.ts_ms - start, &mut seen);
            let total = engine.state_size();
            shared_peak.machines = shared_peak.machines.max(total.machines);
            shared_peak.dedup_ids = shared_peak.dedup_ids.max(total.dedup_ids);
        }
    });
    assert_eq!(events, 691_200);
    // An hour later, with nothing more: every incident closes.
    engine.tick(last_at + 3_600_000, &mut out);
    note(&mut out, &mut seen);

    let time = &config.time;
    let lateness_s = (time.allowed_lateness_ms / 1000) as usize;
    for rule in &params.rules {
        let s = &seen[&rule.name];
        let window_s = (rule.window_ms / 1000) as usize;
        // The high-event index: the window, allowed lateness and watermark bound of each sensor
        // (the bound is 5 s here; a few seconds more for arrival jitter).
        let high_bound = SENSORS * (window_s + lateness_s + 10);
        // Members: the onset's evidence (a window of every sensor) and `also_max` further ones.
        let member_bound = SENSORS * window_s + rule.also_max as usize;
        assert!(s.peak.high_events <= high_bound, "{}: {s:?} over {high_bound}", rule.name);
        assert!(s.peak.members <= member_bound, "{}: {s:?} over {member_bound}", rule.name);
        assert!(s.peak.incidents <= 2, "{}: {s:?}", rule.name);
        assert!(s.peak.high_events > 0 && s.peak.members > 0, "{}: never hot: {s:?}", rule.name);
    }
    // The composite holds at most a few member incidents per member (one each, all day).
    let composite = &seen["warn-and-alarm"];
    assert!(composite.peak.members <= 4 && composite.peak.incidents <= 2, "{composite:?}");
    for (rule, s) in &seen {
        // One incident all day, opened once and closed once.
        assert_eq!(s.kinds.get("open"), Some(&1), "{rule}: {s:?}");
        assert_eq!(s.kinds.get("close"), Some(&1), "{rule}: {s:?}");
        assert!(s.largest_record <= RECORD_MAX, "{rule}: a record of {} bytes", s.largest_record);
        // Flat in duration: nothing grows after the first two hours.
        assert!(
            s.late_peak.high_events <= s.early_peak.high_events
                && s.late_peak.members <= s.early_peak.members,
            "{rule}: {s:?}"
        );
        println!(
            "{rule}: peak high events {}, members {}, incidents {}; largest record {} bytes; {:?}",
            s.peak.high_events, s.peak.members, s.peak.incidents, s.largest_record, s.kinds
        );
    }
    // Remembered ids are shared by the rules: bounded by lateness, not by the day.
    let dedup_bound = SENSORS * (lateness_s + 10) * 2;
    assert!(shared_peak.dedup_ids <= dedup_bound, "{shared_peak:?} over {dedup_bound}");
    assert_eq!(shared_peak.machines, 1);
}
