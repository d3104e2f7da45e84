//! The operations files of issue 22 part 2, checked against the daemon they watch:
//!
//! - `ops/prometheus/linegate.rules.yml` passes `promtool check rules`, and its unit tests
//!   (`ops/prometheus/linegate.rules.test.yml`) pass `promtool test rules`; every alert has a
//!   `severity`, a summary and a description, and a test case where it fires and one where it
//!   does not.
//! - `ops/grafana/linegate.json` is a dashboard with panels, a data source variable and the
//!   `gateway` variable; every query parses in Prometheus and filters `instance=~"$gateway"`.
//! - Every `linegate_` name in the rules, their tests and the dashboard's queries is one the
//!   daemon exports: the `# TYPE` lines of the real exposition (`exposition::encode`), with a
//!   histogram's `_bucket`, `_sum` and `_count`. A family with data-driven labels has no `# TYPE`
//!   line before its first series, so the test gives each one a series through its setter.
//!
//! promtool comes from Debian's `prometheus` package, which `scripts/setup` installs; without it
//! these tests fail, they never skip. The YAML is read crudely (no YAML parser among the
//! dependencies): `key: value` lines and block scalars, enough for the files as written here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use linegate::rule::StateSize;
use linegate::telemetry::exposition::encode;
use linegate::telemetry::Metrics;
use serde_json::Value;

const RULES: &str = "ops/prometheus/linegate.rules.yml";
const RULE_TESTS: &str = "ops/prometheus/linegate.rules.test.yml";
const DASHBOARD: &str = "ops/grafana/linegate.json";

/// What the rules must watch (issue 22): a name each, exported by the daemon.
const RULES_WATCH: [&str; 9] = [
    "linegate_broker_connected",
    "linegate_replay_eta_seconds",
    "linegate_sensor_state",
    "linegate_lag_seconds",
    "linegate_store_budget_bytes",
    "linegate_quarantine_records",
    "linegate_clock_state",
    "linegate_last_recovery_timestamp_seconds",
    "linegate_allowed_lateness_seconds",
];

/// What the dashboard's panels must show (issue 22).
const DASHBOARD_SHOWS: [&str; 12] = [
    "linegate_lag_seconds",
    "linegate_watermark_timestamp_seconds",
    "linegate_sensor_state",
    "linegate_outbox_records",
    "linegate_replay_eta_seconds",
    "linegate_broker_connected",
    "linegate_alert_records_total",
    "linegate_rejected_total",
    "linegate_store_disk_bytes",
    "linegate_store_budget_bytes",
    "linegate_journal_commit_latency_seconds_bucket",
    "linegate_clock_state",
];

const GATEWAY_FILTER: &str = "instance=~\"$gateway\"";

fn repo_path(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_path(path)).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// Runs promtool in `dir`; fails the test with everything it printed unless it exits 0.
fn promtool(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("promtool").args(args).current_dir(dir).output().unwrap_or_else(|e| {
        panic!(
            "cannot run promtool ({e}): scripts/setup installs it (Debian's `prometheus` \
             package); these checks do not skip without it"
        )
    });
    let said =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool {} failed ({}):\n{said}", args.join(" "), out.status);
    said
}

/// The series names of one family: a histogram's `_bucket`, `_sum` and `_count`.
fn series_names(name: &str, kind: &str) -> Vec<String> {
    match kind {
        "histogram" => ["_bucket", "_sum", "_count"].iter().map(|s| format!("{name}{s}")).collect(),
        "summary" => vec![name.to_owned(), format!("{name}_sum"), format!("{name}_count")],
        _ => vec![name.to_owned()],
    }
}

/// Every series name the daemon exports: the `# TYPE` lines of its exposition, with every family
/// whose labels come from data given a series through the public setters.
fn exported() -> BTreeSet<String> {
    let m = Metrics::new();
    m.set_machine_time("press-7", 2_000, 1_000);
    m.set_watermark_bounds([("press-7", "s1", 1_000)]);
    m.set_rule_states(&StateSize::default(), 0, &[]);
    m.sensor_overruns("s1", 0);
    m.set_sensor("press-7", "s1", "live", Some(1_000));
    m.gaps_declared("overrun", 0);
    m.control_request("ok");
    let text = encode(&m).unwrap();
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else { continue };
        let (name, kind) = rest.split_once(' ').unwrap_or_else(|| panic!("bad line {line:?}"));
        names.extend(series_names(name, kind));
    }
    assert!(names.len() > 40, "too few families in the exposition:\n{text}");
    names
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every `linegate_…` identifier in `text`, with the byte offset just past it.
fn linegate_names(text: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("linegate_") {
        if text[..at].chars().next_back().is_some_and(is_name_char) {
            continue; // inside a longer identifier
        }
        let len = text[at..].find(|c: char| !is_name_char(c)).unwrap_or(text.len() - at);
        found.push((text[at..at + len].to_owned(), at + len));
    }
    found
}

/// Fails the test naming every `linegate_` name of `text` that the daemon does not export.
#[track_caller]
fn assert_exported(exported: &BTreeSet<String>, what: &str, text: &str) {
    let unknown: BTreeSet<_> = linegate_names(text)
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| !exported.contains(n))
        .collect();
    assert!(
        unknown.is_empty(),
        "{what} names metrics the daemon does not export: {unknown:?}\nin: {text}\nexported: \
         {exported:?}"
    );
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The values of every `key:` in YAML `text`, in order: plain or quoted on the key's line, or a
/// block scalar (`|`, `>`, `>-`, …) on the more indented lines after it. Keys may start a
/// sequence item (`- key: value`).
fn yaml_values(text: &str, key: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut values = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        let mut body = line.trim_start();
        let mut key_indent = indent(line);
        if let Some(item) = body.strip_prefix("- ") {
            body = item.trim_start();
            key_indent = line.len() - body.len();
        }
        let Some(rest) = body.strip_prefix(key).and_then(|r| r.strip_prefix(':')) else {
            continue;
        };
        let rest = rest.trim();
        if rest.starts_with('|') || rest.starts_with('>') {
            let mut block = Vec::new();
            while i < lines.len() && (lines[i].trim().is_empty() || indent(lines[i]) > key_indent) {
                block.push(lines[i].trim());
                i += 1;
            }
            values.push(block.join("\n"));
        } else {
            let unquoted = rest
                .strip_prefix('\'')
                .and_then(|r| r.strip_suffix('\''))
                .or_else(|| rest.strip_prefix('"').and_then(|r| r.strip_suffix('"')))
                .unwrap_or(rest);
            values.push(unquoted.to_owned());
        }
    }
    values
}

/// The alerting rules of the rules file: name → the text of its rule (from its `- alert:` line
/// to the next one).
fn alert_rules(text: &str) -> BTreeMap<String, String> {
    let mut rules: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.trim_start().strip_prefix("- alert:") {
            rules.push((name.trim().to_owned(), String::new()));
        }
        if let Some((_, body)) = rules.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    let count = rules.len();
    let map: BTreeMap<_, _> = rules.into_iter().collect();
    assert_eq!(map.len(), count, "an alert name is used twice in {RULES}");
    map
}

/// The only value of `key` in `rule`.
#[track_caller]
fn one(rule: &str, key: &str) -> String {
    let values = yaml_values(rule, key);
    assert_eq!(values.len(), 1, "one `{key}` expected in the rule:\n{rule}");
    values.into_iter().next().unwrap()
}

#[test]
fn the_alerting_rules_pass_promtool_check_and_their_unit_tests() {
    let dir = repo_path("ops/prometheus");
    let rules = alert_rules(&read(RULES));
    let said = promtool(&dir, &["check", "rules", "linegate.rules.yml"]);
    assert!(said.contains(&format!("SUCCESS: {} rules found", rules.len())), "{said}");
    let said = promtool(&dir, &["test", "rules", "linegate.rules.test.yml"]);
    assert!(said.contains("SUCCESS"), "{said}");
}

#[test]
fn every_alert_says_how_bad_and_what_to_do_and_is_tested_firing_and_not_firing() {
    let rules = alert_rules(&read(RULES));
    assert!(rules.len() >= 9, "issue 22 asks for nine alerts: {:?}", rules.keys());
    for (name, rule) in &rules {
        assert!(
            name.starts_with("Linegate") && name.chars().all(|c| c.is_ascii_alphanumeric()),
            "alert names are CamelCase and start with Linegate: {name}"
        );
        let severity = one(rule, "severity");
        assert!(["critical", "warning"].contains(&severity.as_str()), "{name}: {severity}");
        for key in ["summary", "description"] {
            assert!(one(rule, key).len() > 20, "{name}: its {key} says too little");
        }
    }

    // Each `alertname:` of the tests with its `exp_alerts:`: `[]` is a case where the alert
    // must not fire, a list one where it must.
    let tests = read(RULE_TESTS);
    let (mut fires, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    let mut current: Option<String> = None;
    for line in tests.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("alertname:") {
            current = Some(name.trim().to_owned());
        } else if let Some(expected) = line.strip_prefix("exp_alerts:") {
            let name = current.take().unwrap_or_else(|| panic!("exp_alerts without alertname"));
            assert!(rules.contains_key(&name), "{RULE_TESTS} tests an unknown alert {name}");
            match expected.trim() {
                "[]" => quiet.insert(name),
                "" => fires.insert(name),
                other => panic!("{name}: write exp_alerts as [] or a block list, not {other}"),
            };
        }
    }
    for name in rules.keys() {
        assert!(fires.contains(name), "{RULE_TESTS}: no case where {name} fires");
        assert!(quiet.contains(name), "{RULE_TESTS}: no case where {name} does not fire");
    }
}

#[test]
fn the_rules_and_their_tests_name_only_metrics_the_daemon_exports() {
    let exported = exported();
    let text = read(RULES);
    let rules = alert_rules(&text);
    let mut watched = BTreeSet::new();
    for (name, rule) in &rules {
        let expr = one(rule, "expr");
        assert!(
            !linegate_names(&expr).is_empty() || expr.contains("up{job=\"linegate\"}"),
            "{name} watches no linegate metric: {expr}"
        );
        assert_exported(&exported, &format!("the expr of {name}"), &expr);
        watched.extend(linegate_names(&expr).into_iter().map(|(n, _)| n));
    }
    for name in RULES_WATCH {
        assert!(watched.contains(name), "no rule watches {name}: {watched:?}");
    }
    // Annotations name metrics too, and the unit tests' input series must be the real names.
    assert_exported(&exported, RULES, &text);
    assert_exported(&exported, RULE_TESTS, &read(RULE_TESTS));
}

/// Every panel of the dashboard, those inside rows included; rows themselves left out.
fn panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for p in list.as_array().into_iter().flatten() {
            if p["type"] == "row" {
                walk(&p["panels"], out);
            } else {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD)).unwrap_or_else(|e| panic!("{DASHBOARD}: {e}"))
}

/// (panel title, expr) of every query of every panel.
fn queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(dashboard) {
        let title = p["title"].as_str().unwrap_or("(untitled)").to_owned();
        let targets = p["targets"].as_array().filter(|t| !t.is_empty());
        for t in targets.unwrap_or_else(|| panic!("panel {title:?} has no query")) {
            let expr =
                t["expr"].as_str().unwrap_or_else(|| panic!("{title:?}: a query without expr"));
            assert!(!expr.trim().is_empty(), "{title:?}: an empty query");
            out.push((title.clone(), expr.to_owned()));
        }
    }
    out
}

#[test]
fn the_dashboard_is_importable_with_a_gateway_variable_and_panels() {
    let d = dashboard();
    assert!(d["title"].is_string() && d["uid"].is_string(), "a title and a uid");
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 36), "{}", d["schemaVersion"]);
    let vars = d["templating"]["list"].as_array().expect("templating.list");
    let var = |name: &str| {
        vars.iter().find(|v| v["name"] == name).unwrap_or_else(|| panic!("no variable {name}"))
    };
    let source = var("datasource");
    assert_eq!((&source["type"], &source["query"]), (&"datasource".into(), &"prometheus".into()));
    let gateway = var("gateway");
    assert_eq!(gateway["type"], "query");
    let query = gateway["query"]["query"].as_str().or(gateway["query"].as_str()).unwrap_or("");
    assert_eq!(query, "label_values(linegate_broker_connected, instance)");

    let all = panels(&d);
    assert!(all.len() >= 11, "issue 22 lists eleven panels, the dashboard has {}", all.len());
    let mut ids = BTreeSet::new();
    for p in &all {
        let title = &p["title"];
        assert!(ids.insert(p["id"].as_u64().expect("a numeric id")), "id {} twice", p["id"]);
        assert!(p["gridPos"]["w"].is_u64() && p["gridPos"]["h"].is_u64(), "{title}: gridPos");
        let sources = std::iter::once(&p["datasource"])
            .chain(p["targets"].as_array().into_iter().flatten().map(|t| &t["datasource"]));
        for s in sources {
            assert_eq!(s["uid"], "${datasource}", "{title}: the data source is the variable");
        }
    }
    let shown: BTreeSet<String> =
        queries(&d).iter().flat_map(|(_, e)| linegate_names(e)).map(|(n, _)| n).collect();
    for name in DASHBOARD_SHOWS {
        assert!(shown.contains(name), "no panel shows {name}: {shown:?}");
    }
}

#[test]
fn every_dashboard_query_names_exported_metrics_of_the_chosen_gateways() {
    let exported = exported();
    let d = dashboard();
    let mut exprs = queries(&d);
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"] == "query" {
            let q = v["query"]["query"].as_str().or(v["query"].as_str()).unwrap_or("");
            exprs.push((format!("variable {}", v["name"]), q.to_owned()));
        }
    }
    for (title, expr) in &exprs {
        assert_exported(&exported, &format!("panel {title:?}"), expr);
        if title == "variable \"gateway\"" {
            continue; // the list of gateways itself
        }
        assert!(expr.contains(GATEWAY_FILTER), "{title:?} does not filter the gateway: {expr}");
        // Each selector of a linegate metric, not just one of them.
        for (name, end) in linegate_names(expr) {
            let matchers = expr[end..].strip_prefix('{').and_then(|r| r.split_once('}'));
            assert!(
                matchers.is_some_and(|(m, _)| m.contains(GATEWAY_FILTER)),
                "{title:?}: {name} is not filtered by {GATEWAY_FILTER}: {expr}"
            );
        }
    }
}

/// Every panel query is valid PromQL: promtool checks them as recording rules, with Grafana's
/// variables replaced by values.
#[test]
fn every_dashboard_query_parses_in_prometheus() {
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (n, (title, expr)) in queries(&dashboard()).iter().enumerate() {
        let promql = expr
            .replace("$gateway", ".*")
            .replace("$machine", ".*")
            .replace("$__rate_interval", "1m")
            .replace("$__interval", "1m")
            .replace("$__range", "1h");
        assert!(!promql.contains('$'), "{title:?}: an unknown variable in {expr}");
        // A JSON string is a YAML double-quoted scalar.
        let quoted = serde_json::to_string(&promql).unwrap();
        rules.push_str(&format!("      - record: dashboard:query_{n}\n        expr: {quoted}\n"));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dashboard.yml"), &rules).unwrap();
    promtool(dir.path(), &["check", "rules", "dashboard.yml"]);
}

/// The crude YAML reading above finds what it must (it decides what the other tests check).
#[test]
fn yaml_values_reads_plain_quoted_and_block_values() {
    let text = "a:\n  - alert: X\n    expr: >-\n      up == 0\n      or b\n    for: 5m\n    labels:\n      severity: 'warning'\n  - alert: Y\n    expr: z > 1\n";
    assert_eq!(yaml_values(text, "expr"), ["up == 0\nor b", "z > 1"]);
    assert_eq!(yaml_values(text, "severity"), ["warning"]);
    assert_eq!(alert_rules(text).keys().collect::<Vec<_>>(), ["X", "Y"]);
    let names = linegate_names("rate(linegate_a_total{x=\"1\"}[5m]) / xlinegate_b + linegate_c");
    assert_eq!(
        names.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["linegate_a_total", "linegate_c"]
    );
}
