//! The real `/metrics` output passes `promtool check metrics` (Prometheus' own parser and
//! linter) with no complaint: fetched over TCP from the endpoint on port 0 with every family
//! populated, and from the real daemon (`linegate run`) forwarding to a real mosquitto — the
//! session, its PUBLISHes and PUBACKs, the backlog drained, the journal's group commits and the
//! store's fsyncs all counted — and with the broker absent. promtool comes from Debian's
//! `prometheus` package, mosquitto from Debian's `mosquitto` (both installed by `.ci/run`).

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use linegate::event::ClockState;
use linegate::records::counts::Counts;
use linegate::rule::StateSize;
use linegate::telemetry::{http, BrokerState, Metrics, OutboxKind};
use support::daemon::Daemon;
use support::mqtt::Broker;
use support::promtool::{self, sample, scrape_until};
use support::{fixture, free_port};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Every family with some values, as a running daemon would have them.
fn populated() -> Metrics {
    let m = Metrics::new();
    m.set_watermarks(1_700_000_060_000, [("press-7", Some(1_700_000_055_000)), ("lathe-2", None)]);
    m.set_watermark_bounds([("press-7", "s1", 10_239), ("press-7", "s2", 5_000)]);
    m.set_machine_time("mill \"3\"\\b", 1_700_000_060_000, 1_700_000_059_250);
    let mut quarantined: BTreeMap<String, u64> = BTreeMap::new();
    quarantined.insert("malformed_json".into(), 4);
    quarantined.insert("clock_future".into(), 1);
    let counts = Counts {
        records: 1_000,
        accepted: 900,
        duplicates: 12,
        late_applied: 30,
        too_late: 2,
        quarantined,
        events_received: 700,
        events_derived: 212,
        samples_records: 250,
        ticks: 40,
        alerts: [("open".to_string(), 3), ("close".to_string(), 2)].into_iter().collect(),
        alerts_by_rule: BTreeMap::new(),
        peak_state: 321,
    };
    m.apply_counts(&counts);
    let size = StateSize {
        machines: 2,
        sensors: 4,
        high_events: 9,
        incidents: 1,
        members: 3,
        dedup_ids: 800,
    };
    m.set_rule_states(&size, 4, &[]);
    for s in [0.0004, 0.003, 0.02, 0.2, 30.0] {
        m.observe_processing_latency(s);
        m.observe_journal_commit(s / 2.0);
    }
    m.set_fsyncs(42);
    m.set_outbox(OutboxKind::Alert, 2, 1_024);
    m.set_outbox(OutboxKind::Samples, 30, 3_000_000);
    m.set_replay_progress(5_000, 250.0);
    m.set_broker(&BrokerState {
        connected: true,
        attempts: 3,
        connects: 2,
        disconnects: 1,
        publishes: 500,
        acknowledged: 480,
        in_flight: 20,
    });
    m.set_store_bytes(123_456_789);
    m.set_clock_state(ClockState::Synced);
    m.sensor_overruns("s1", 3);
    m
}

/// `GET /metrics` over a real connection: (status line, headers lower-cased, body).
async fn fetch(addr: std::net::SocketAddr, path: &str) -> (String, String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let (status, headers) = head.split_once("\r\n").unwrap();
    (status.to_owned(), headers.to_lowercase(), body.to_owned())
}

#[tokio::test]
async fn served_metrics_pass_promtool_and_name_every_family() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(http::serve(listener, populated(), None, async {
        let _ = stopped.await;
    }));

    let (status, headers, body) = fetch(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(headers.contains("content-type: text/plain; version=0.0.4"), "{headers}");

    let (ok, said) = promtool::check(&body);
    assert!(ok && said.trim().is_empty(), "promtool check metrics: {said}\n--- body:\n{body}");

    for family in [
        "linegate_lag_seconds gauge",
        "linegate_watermark_timestamp_seconds gauge",
        "linegate_watermark_bound_seconds gauge",
        "linegate_outbox_records gauge",
        "linegate_outbox_bytes gauge",
        "linegate_rule_state_entries gauge",
        "linegate_processing_latency_seconds histogram",
        "linegate_rejected_total counter",
        "linegate_duplicates_total counter",
        "linegate_late_applied_total counter",
        "linegate_too_late_total counter",
        "linegate_replay_backlog_records gauge",
        "linegate_replay_drain_rate_records_per_second gauge",
        "linegate_replay_eta_seconds gauge",
        "linegate_broker_connected gauge",
        "linegate_broker_connect_attempts_total counter",
        "linegate_broker_connects_total counter",
        "linegate_broker_disconnects_total counter",
        "linegate_broker_publishes_total counter",
        "linegate_broker_acknowledged_total counter",
        "linegate_broker_in_flight_publishes gauge",
        "linegate_store_disk_bytes gauge",
        "linegate_clock_state gauge",
        "linegate_sensor_overruns_total counter",
        "linegate_journal_commit_latency_seconds histogram",
        "linegate_fsyncs_total counter",
    ] {
        assert!(body.contains(&format!("\n# TYPE {family}\n")), "no `{family}` in:\n{body}");
    }
    for sample in [
        "linegate_lag_seconds{machine=\"press-7\"} 5.0",
        "linegate_watermark_timestamp_seconds{machine=\"press-7\"} 1700000055.0",
        "linegate_watermark_bound_seconds{machine=\"press-7\",sensor=\"s1\"} 10.239",
        "linegate_rejected_total{reason=\"malformed_json\"} 4",
        "linegate_rejected_total{reason=\"sensor_conflict\"} 0",
        "linegate_replay_eta_seconds 20.0",
        "linegate_broker_connects_total 2",
        "linegate_broker_disconnects_total 1",
        "linegate_broker_acknowledged_total 480",
        "linegate_broker_in_flight_publishes 20",
        "linegate_fsyncs_total 42",
        "linegate_clock_state{state=\"synced\"} 1",
        "linegate_clock_state{state=\"unknown\"} 0",
        "linegate_outbox_records{kind=\"gap\"} 0",
        "linegate_processing_latency_seconds_count 5",
    ] {
        assert!(body.contains(&format!("\n{sample}\n")), "no `{sample}` in:\n{body}");
    }
    assert!(!body.contains("lathe-2"), "a machine without a watermark has no lag yet");

    let (status, _, _) = fetch(addr, "/other").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// The check above can fail: promtool rejects what `prometheus-client` writes before our
/// conversion to format 0.0.4 (counters named without `_total` in their HELP and TYPE lines).
#[test]
fn promtool_rejects_the_unconverted_openmetrics_text() {
    let mut open = String::new();
    let mut registry = prometheus_client::registry::Registry::with_prefix("linegate");
    let counter: prometheus_client::metrics::counter::Counter = Default::default();
    registry.register("fsyncs", "fsync calls", counter);
    prometheus_client::encoding::text::encode(&mut open, &registry).unwrap();
    let (ok, said) = promtool::check(&open);
    assert!(!ok, "promtool accepted OpenMetrics counters: {said}");
    assert!(said.contains("linegate_fsyncs_total"), "{said}");
    let (ok, said) = promtool::check(&linegate::telemetry::exposition::openmetrics_to_text(&open));
    assert!(ok && said.trim().is_empty(), "{said}");
}

/// A `linegate run` on the CWRU fixture trace (77 raw samples records, 42 ticks) at full speed,
/// forwarding to a broker at `broker_port`, metrics on `metrics_port`; killed when dropped.
struct Run {
    daemon: Daemon,
    metrics_port: u16,
}

/// The one rule of [`Run::start`].
const ONE_RULE: &str = "[rule]\nthreshold = 0.5\nwindow = \"2m\"\ncount = 3\n";

impl Run {
    fn start(dir: &Path, broker_port: u16) -> Run {
        Run::with_rules(dir, broker_port, ONE_RULE)
    }

    /// [`Run::start`] with `rules` (the rule tables) instead of its one rule.
    fn with_rules(dir: &Path, broker_port: u16, rules: &str) -> Run {
        let metrics_port = free_port();
        let trace = fixture("fixtures/traces/cwru.jsonl");
        let text = format!(
            "[gateway]\nid = \"gw-metrics\"\n{rules}\
             [store]\npath = \"{}\"\ncommit_records = 20\ncommit_interval = \"20ms\"\n\
             [mqtt]\nhost = \"127.0.0.1\"\nport = {broker_port}\nprefix = \"lg\"\n\
             [metrics]\nlisten = \"127.0.0.1:{metrics_port}\"\n\
             [[source]]\nkind = \"trace\"\npath = \"{}\"\nspeed = 0.0\n",
            dir.join("db").display(),
            trace.display()
        );
        let config = dir.join("run.toml");
        std::fs::write(&config, text).unwrap();
        Run { daemon: Daemon::start(&config, &[], &[]), metrics_port }
    }

    /// Scrapes until `ok` holds for the body; returns that body, which must pass promtool.
    fn scrape_until(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let body = scrape_until(&self.daemon, self.metrics_port, what, ok);
        let (passed, said) = promtool::check(&body);
        assert!(passed && said.trim().is_empty(), "promtool: {said}\n--- body:\n{body}");
        body
    }
}

fn value(body: &str, name: &str) -> f64 {
    sample(body, name).unwrap_or_else(|| panic!("no sample `{name}` in:\n{body}"))
}

/// The journal's group commits and the store's fsyncs are counted by the running daemon.
fn check_store_work(body: &str) {
    assert!(value(body, "linegate_journal_commit_latency_seconds_count") >= 1.0);
    assert!(value(body, "linegate_journal_commit_latency_seconds_sum") > 0.0);
    // Each commit syncs every file of the database and its directory.
    assert!(value(body, "linegate_fsyncs_total") >= 2.0);
    assert!(value(body, "linegate_processing_latency_seconds_count") >= 1.0);
}

#[test]
fn a_daemon_forwarding_to_mosquitto_shows_its_session_acknowledgements_and_drained_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), free_port(), "");
    let d = Run::start(dir.path(), broker.port);
    // The frames published, not only the retained status: a backlog gauge of 0 sampled before
    // the decide stage wrote any record must not end the wait.
    let body = d.scrape_until("every record decided and the outbox drained", |b| {
        sample(b, "linegate_records_total") == Some(119.0)
            && sample(b, "linegate_broker_publishes_total").is_some_and(|n| n >= 77.0)
            && sample(b, "linegate_broker_acknowledged_total")
                == sample(b, "linegate_broker_publishes_total")
            && sample(b, "linegate_replay_backlog_records") == Some(0.0)
    });
    assert_eq!(value(&body, "linegate_broker_connected"), 1.0);
    assert!(value(&body, "linegate_broker_connects_total") >= 1.0);
    assert!(value(&body, "linegate_broker_connect_attempts_total") >= 1.0);
    let (published, acked) = (
        value(&body, "linegate_broker_publishes_total"),
        value(&body, "linegate_broker_acknowledged_total"),
    );
    // The 77 samples frames at least, each its own PUBLISH, and every one acknowledged.
    assert!(published >= 77.0 && acked == published, "{published} published, {acked} acked");
    assert_eq!(value(&body, "linegate_broker_in_flight_publishes"), 0.0);
    assert_eq!(value(&body, "linegate_replay_eta_seconds"), 0.0);
    assert_eq!(value(&body, "linegate_outbox_records{kind=\"samples\"}"), 0.0);
    check_store_work(&body);

    broker.stop();
    let body = d.scrape_until("the session lost", |b| {
        sample(b, "linegate_broker_disconnects_total").is_some_and(|n| n >= 1.0)
    });
    assert_eq!(value(&body, "linegate_broker_connected"), 0.0);
}

#[test]
fn a_daemon_without_its_broker_shows_no_session_and_a_backlog_that_does_not_drain() {
    let dir = tempfile::tempdir().unwrap();
    // Nobody listens there.
    let d = Run::start(dir.path(), free_port());
    let body = d.scrape_until("every record decided and a connection attempted", |b| {
        sample(b, "linegate_records_total") == Some(119.0)
            && sample(b, "linegate_broker_connect_attempts_total").is_some_and(|n| n >= 1.0)
            && sample(b, "linegate_replay_backlog_records").is_some_and(|n| n >= 77.0)
    });
    for zero in [
        "linegate_broker_connected",
        "linegate_broker_connects_total",
        "linegate_broker_disconnects_total",
        "linegate_broker_publishes_total",
        "linegate_broker_acknowledged_total",
        "linegate_broker_in_flight_publishes",
    ] {
        assert_eq!(value(&body, zero), 0.0, "{zero}");
    }
    assert_eq!(value(&body, "linegate_outbox_records{kind=\"samples\"}"), 77.0);
    assert!(body.contains("\nlinegate_replay_eta_seconds +Inf\n"), "nothing drains:\n{body}");
    check_store_work(&body);
}

/// With several rules (a composite among them), what each rule decided is its own series: every
/// rule's alert records by kind and its part of the rule state carry its `rule` label, the
/// shared parts none; and the output still passes promtool.
#[test]
fn a_daemon_with_several_rules_labels_each_rules_series() {
    let dir = tempfile::tempdir().unwrap();
    let rules = "[[rule]]\nname = \"vib\"\nthreshold = 0.5\nwindow = \"2m\"\ncount = 3\n\
                 [[rule]]\nname = \"vib-strong\"\nthreshold = 0.9\nwindow = \"2m\"\ncount = 2\n\
                 [[rule]]\nname = \"both\"\nall_of = [\"vib\", \"vib-strong\"]\nwindow = \"2m\"\n";
    // Nobody listens on the broker's port: the metrics do not depend on it.
    let d = Run::with_rules(dir.path(), free_port(), rules);
    let body = d.scrape_until("every record decided", |b| {
        sample(b, "linegate_records_total") == Some(119.0)
    });
    for rule in ["vib", "vib-strong", "both"] {
        for kind in ["open", "amend", "close", "supersede"] {
            let name = format!("linegate_alert_records_total{{rule=\"{rule}\",kind=\"{kind}\"}}");
            assert!(sample(&body, &name).is_some(), "no `{name}` in:\n{body}");
        }
        for part in ["high_events", "incidents", "members"] {
            let name = format!("linegate_rule_state_entries{{rule=\"{rule}\",part=\"{part}\"}}");
            assert!(sample(&body, &name).is_some(), "no `{name}` in:\n{body}");
        }
    }
    for part in ["machines", "sensors", "dedup_ids", "open_frames"] {
        let name = format!("linegate_rule_state_entries{{part=\"{part}\"}}");
        assert!(sample(&body, &name).is_some(), "no `{name}` in:\n{body}");
    }
    for unlabelled in ["linegate_alert_records_total{kind=", "{part=\"high_events\"}"] {
        assert!(!body.contains(unlabelled), "`{unlabelled}` beside the rules' own:\n{body}");
    }
    // Each rule's alert records are those replay decides of the same trace under it.
    let dir2 = tempfile::tempdir().unwrap();
    let trace = fixture("fixtures/traces/cwru.jsonl");
    let replayed = support::replay(&trace, &dir.path().join("run.toml"), dir2.path());
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&replayed.summary).unwrap()).unwrap();
    assert!(summary["alerts_by_rule"]["vib"]["open"].as_u64() > Some(0), "{summary}");
    for rule in ["vib", "vib-strong", "both"] {
        for kind in ["open", "amend", "close", "supersede"] {
            let name = format!("linegate_alert_records_total{{rule=\"{rule}\",kind=\"{kind}\"}}");
            let want = summary["alerts_by_rule"][rule][kind].as_f64().unwrap_or(0.0);
            assert_eq!(value(&body, &name), want, "{name}: summary {summary}");
        }
    }
}
