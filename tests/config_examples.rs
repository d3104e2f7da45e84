//! Every example configuration in `config/*.toml` must load.

mod support;

use std::path::{Path, PathBuf};

use linegate::config::{Config, SourceConfig, TraceSource, WatermarkBound};
use support::{fixture, linegate, root, run};

fn config_dir() -> PathBuf {
    fixture("config")
}

fn example_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(config_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_config_loads() {
    let files = example_files();
    assert!(files.len() >= 2, "expected at least 2 example configs, found {files:?}");
    let failures: Vec<String> =
        files.iter().filter_map(|path| Config::load(path).err().map(|e| e.to_string())).collect();
    assert!(failures.is_empty(), "example configs that do not load:\n{}", failures.join("\n"));
}

#[test]
fn demo_config_is_the_contract_example() {
    let c = Config::load(&config_dir().join("demo.toml")).unwrap();
    assert_eq!(c.gateway.id, "gw-01");
    assert_eq!(c.rule.window_ms, 120_000);
    assert_eq!(c.rule.count, 3);
    assert_eq!(c.rule.threshold_for("press-7"), 0.8);
    assert_eq!(c.rule.threshold_for("press-1"), 0.5);
    assert_eq!(c.time.watermark_bound, WatermarkBound::Fixed(5_000));
    assert_eq!(c.time.allowed_lateness_ms, 600_000);
    assert_eq!(
        c.source,
        vec![SourceConfig::Trace(TraceSource {
            path: PathBuf::from("fixtures/traces/cwru.jsonl"),
            speed: 0.0,
        })]
    );
}

#[test]
fn trace_config_uses_the_auto_bound_in_real_time() {
    let c = Config::load(&config_dir().join("trace.toml")).unwrap();
    assert_eq!(c.time.watermark_bound, WatermarkBound::Auto);
    assert_eq!(
        c.source,
        vec![SourceConfig::Trace(TraceSource {
            path: PathBuf::from("fixtures/traces/cwru.jsonl"),
            speed: 1.0,
        })]
    );
}

/// `linegate check-config` accepts every example (from the repository root, where their relative
/// paths point) and names the key and file of a trace that does not exist.
#[test]
fn check_config_accepts_the_examples_and_names_a_missing_trace() {
    let check = |config: &Path| run(linegate(&["check-config"]).arg(config).current_dir(root()));
    for name in ["demo.toml", "trace.toml"] {
        let stdout = check(&config_dir().join(name)).success();
        assert!(stdout.contains("source[0]: trace"), "{name}: {stdout}");
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[gateway]\nid = \"gw-1\"\n\n[[source]]\nkind = \"trace\"\npath = \"no/such.jsonl\"\n",
    )
    .unwrap();
    let out = check(&bad);
    assert!(!out.ok(), "{out:?}");
    let err = &out.stderr;
    assert!(
        err.contains("bad.toml") && err.contains("source[0].path") && err.contains("no/such.jsonl"),
        "{err}"
    );
}
