//! A Modbus register that holds a velocity the device measured itself (mm/s) is an event source
//! of `velocity_rms`: `linegate run` (the real binary) against pymodbus (tests/support/) serving
//! 1.0, 2.0, 3.0, 4.5 and 6.0 mm/s in turn at registers 110-111. Every reading becomes one
//! accepted event numbered 1, 2, 3, ..., none is quarantined, the journal holds them as
//! `readings` lines (docs/contracts.md section 8), and a `velocity_rms` rule with
//! `threshold = "zone-C"` (2.8 mm/s for an ISO group 2 machine on a rigid foundation) alerts on
//! them with the readings at or above it as its evidence. `linegate status` shows the machine's
//! latest velocity in its zone.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::daemon::Daemon;
use support::modbus::*;
use support::promtool::{sample, scrape};
use support::{cli, free_port, ledger, wait_until};

/// What the server serves at registers 110-111, in turn.
const SERVED: [f64; 5] = [1.0, 2.0, 3.0, 4.5, 6.0];
const SENSOR: &str = "fan-1-vel";

fn velocity_keys(port: u16) -> String {
    format!(
        "kind = \"modbus-tcp\"\nhost = \"127.0.0.1\"\nport = {port}\nmachine = \"fan-1\"\n\
         poll_rate = 20\ntimeout = \"300ms\"\nblock_length = \"250ms\"\n\
         reconnect_min = \"20ms\"\nreconnect_max = \"200ms\"\n\n\
         [[source.block]]\naddress = 110\n[[source.block.channel]]\nsensor = \"{SENSOR}\"\n\
         type = \"f32\"\nunit = \"mm/s\"\n"
    )
}

fn write_config(dir: &Path, port: u16, metrics: u16) -> PathBuf {
    let path = dir.join("linegate.toml");
    let text = format!(
        "[gateway]\nid = \"gw-vel\"\n\n[rule]\nmetric = \"velocity_rms\"\nunit = \"mm/s\"\n\
         threshold = \"zone-C\"\n\n[machines.fan-1]\niso_group = 2\nfoundation = \"rigid\"\n\n\
         [time]\nwatermark_bound = \"1s\"\n\n\
         [store]\npath = \"{}\"\ncommit_interval = \"50ms\"\n\n\
         [metrics]\nlisten = \"127.0.0.1:{metrics}\"\n\n[[source]]\n{}",
        dir.join("db").display(),
        velocity_keys(port)
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_velocity_register_gives_velocity_events_that_a_zone_rule_alerts_on() {
    let dir = tempfile::tempdir().unwrap();
    let (port, metrics) = (free_port(), free_port());
    let _server = server(&["--tcp", &port.to_string()]);
    wait_answer(&source(&velocity_keys(port))).await;
    let config = write_config(dir.path(), port, metrics);
    support::run(support::linegate(&["check-config"]).arg(&config)).success();

    let mut daemon = Daemon::start(&config, &[], &[]);
    let opened = "linegate_alert_records_total{kind=\"open\"}";
    wait_until("an open alert record and 40 accepted events", || {
        daemon.assert_running();
        let body = scrape(metrics).unwrap_or_default();
        sample(&body, opened).unwrap_or(0.0) >= 1.0
            && sample(&body, "linegate_accepted_total").unwrap_or(0.0) >= 40.0
    })
    .await;
    daemon.signal("TERM");
    wait_until("linegate to exit", || daemon.exited().is_some()).await;
    assert!(daemon.exited().unwrap().success(), "{}", daemon.log());

    // Every reading is an accepted event of its own, numbered 1, 2, 3, ...; nothing quarantined.
    let ledger = ledger(&config);
    let seqs: Vec<u64> = ledger
        .iter()
        .filter(|e| e["kind"] == "accepted")
        .map(|e| {
            assert_eq!(
                (e["machine"].as_str(), e["sensor"].as_str()),
                (Some("fan-1"), Some(SENSOR))
            );
            e["seq"].as_u64().unwrap()
        })
        .collect();
    assert!(seqs.len() >= 40, "{} accepted", seqs.len());
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let quarantined: Vec<_> = ledger.iter().filter(|e| e["kind"] == "quarantined").collect();
    assert!(quarantined.is_empty(), "{quarantined:?}");

    // The journal holds the device's readings as `readings` lines, the values it served, in turn.
    let export = cli(&["export"], &config);
    let mut values = Vec::new();
    for line in export.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()) {
        match line["kind"].as_str() {
            Some("readings") => {
                assert_eq!(
                    (line["unit"].as_str(), line["sensor"].as_str()),
                    (Some("mm/s"), Some(SENSOR))
                );
                values.extend(line["data"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()));
            }
            Some("tick") => {}
            other => panic!("unexpected line kind {other:?}: {line}"),
        }
    }
    assert_eq!(values.len(), seqs.len(), "one event per reading");
    let first = SERVED.iter().position(|&v| v == values[0]).expect("a served value");
    for (i, v) in values.iter().enumerate() {
        assert_eq!(*v, SERVED[(first + i) % SERVED.len()], "reading {i}: each poll reads the next");
    }

    // The zone-C rule alerted, its evidence being readings at or above 2.8 mm/s.
    let alerts: Vec<Value> = cli(&["dump", "alerts"], &config)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let open = alerts.iter().find(|a| a["kind"] == "open").expect("an open alert record");
    assert_eq!(open["machine"], "fan-1");
    let evidence = open["evidence"].as_array().unwrap();
    assert_eq!(evidence.len(), 3, "{open}");
    for e in evidence {
        assert_eq!(e["unit"], "mm/s", "{e}");
        assert!([3.0, 4.5, 6.0].contains(&e["value"].as_f64().unwrap()), "{e}");
        assert!(e["event_id"].as_str().unwrap().starts_with("gw-vel.fan-1-vel."), "{e}");
    }

    // `status` shows the machine's class and its latest velocity in its zone, text and JSON.
    let status: Value =
        serde_json::from_str(&cli(&["status", "--once", "--json"], &config)).unwrap();
    let machines = status["machines"].as_array().unwrap();
    let fan = machines.iter().find(|m| m["machine"] == "fan-1").expect("fan-1 in status");
    assert_eq!(fan["iso_class"], "group 2 rigid", "{fan}");
    let v = fan["velocity"]["mm_s"].as_f64().unwrap();
    assert!(SERVED.contains(&v), "{fan}");
    let zone = ["A", "B", "C", "D", "D"][SERVED.iter().position(|&s| s == v).unwrap()];
    assert_eq!(fan["velocity"]["zone"], zone, "{fan}");
    let text = cli(&["status", "--once"], &config);
    assert!(text.contains("fan-1 (group 2 rigid): "), "{text}");
    assert!(
        text.contains(&format!("velocity {v:.2} mm/s (zone {zone}, group 2 rigid) at ")),
        "{text}"
    );
}
