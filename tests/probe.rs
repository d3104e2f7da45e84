//! `linegate probe` on this machine, which has no I2C or SPI buses: a missing device node gives
//! the message a technician can act on and a non-zero exit code; a trace source is counted. With
//! `--json`, one object per source on standard output.

mod support;

use support::{linegate, run, Ran};

fn probe(config: &str) -> (Ran, String) {
    probe_with(config, &[])
}

fn probe_with(config: &str, extra: &[&str]) -> (Ran, String) {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    std::fs::write(&trace, "{\"at\": 1, \"kind\": \"tick\"}\n{\"at\": 2, \"kind\": \"tick\"}\n")
        .unwrap();
    let path = dir.path().join("probe.toml");
    let text = config.replace("TRACE", &trace.display().to_string());
    std::fs::write(&path, format!("[gateway]\nid = \"gw-1\"\n{text}")).unwrap();
    let out = run(linegate(&["probe", "--seconds", "0.1", "--config"]).arg(&path).args(extra));
    let text = format!("{}{}", out.stdout, out.stderr);
    (out, text)
}

#[test]
fn missing_i2c_node_says_enable_the_overlay_and_fails() {
    assert!(
        !std::path::Path::new("/dev/i2c-99").exists(),
        "this test needs /dev/i2c-99 to be absent"
    );
    let (out, text) = probe(
        "[[source]]\nkind = \"i2c\"\ndevice = \"/dev/i2c-99\"\nmachine = \"m\"\nsensor = \"s\"\n\
         [[source]]\nkind = \"trace\"\npath = \"TRACE\"\n",
    );
    assert!(!out.ok(), "{text}");
    assert!(text.contains("/dev/i2c-99 does not exist"), "{text}");
    assert!(text.contains("dtparam=i2c_arm=on"), "{text}");
    assert!(text.contains("reboot"), "{text}");
    assert!(text.contains("2 lines"), "the trace source is still probed: {text}");
    assert!(text.contains("1 of 2 source(s) failed"), "{text}");
    assert!(text.starts_with("clock: "), "the clock evidence comes first: {text}");
}

#[test]
fn missing_spi_node_says_enable_spi() {
    let (out, text) = probe(
        "[[source]]\nkind = \"spi\"\ndevice = \"/dev/spidev9.9\"\nmachine = \"m\"\nsensor = \"s\"\n",
    );
    assert!(!out.ok(), "{text}");
    assert!(text.contains("dtparam=spi=on"), "{text}");
}

#[test]
fn a_trace_only_config_probes_clean() {
    let (out, text) = probe("[[source]]\nkind = \"trace\"\npath = \"TRACE\"\n");
    assert!(out.ok(), "{text}");
    assert!(text.contains("source[0]: trace") && text.contains("2 lines"), "{text}");
}

#[test]
fn json_gives_one_object_per_source_on_stdout_and_the_text_on_stderr() {
    let (out, text) = probe_with(
        "[[source]]\nkind = \"i2c\"\ndevice = \"/dev/i2c-99\"\naddress = 0x1D\nrate_hz = 400\n\
         machine = \"m\"\nsensor = \"s\"\n[[source]]\nkind = \"trace\"\npath = \"TRACE\"\n",
        &["--json"],
    );
    assert!(!out.ok(), "{text}");
    let stdout = &out.stdout;
    let objects: Vec<serde_json::Value> =
        stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(objects.len(), 2, "{stdout}");
    let i2c = &objects[0];
    assert_eq!(i2c["source"], "i2c:/dev/i2c-99@0x1d", "{i2c}");
    assert_eq!((i2c["ok"].as_bool(), i2c["rate_hz"].as_f64()), (Some(false), Some(400.0)));
    assert!(i2c["devid"].is_null() && i2c["mean_g"].is_null(), "{i2c}");
    assert!(i2c["error"].as_str().unwrap().contains("dtparam=i2c_arm=on"), "{i2c}");
    let trace = &objects[1];
    assert_eq!((trace["kind"].as_str(), trace["ok"].as_bool()), (Some("trace"), Some(true)));
    assert_eq!(trace["lines"], 2, "{trace}");
    let stderr = &out.stderr;
    assert!(stderr.starts_with("clock: ") && stderr.contains("2 lines"), "{stderr}");
}
