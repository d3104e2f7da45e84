//! The status page in a real browser (issue 22, part 1): headless Chromium (Debian's `chromium`,
//! which `scripts/setup` installs) loads `/` from a running daemon's metrics listener while a
//! paced trace streams; the DOM it built must show the machine with its open incident and its
//! evidence, every sensor with its state (one of them silent, its tail missing), the outbox, and
//! the page must refresh itself; each machine's trends must be inline SVG with the values, the
//! threshold, the incident and, for the velocity rule, the ISO zones, drawn at their size
//! (measured by a script the test adds to a copy of the page: the page has none); the page must
//! reference nothing outside itself. A screenshot
//! is kept as an artifact under `target/artifacts/status-page.png`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::daemon::Daemon;
use support::{linegate, poll, run, DEADLINE};

const T0: i64 = 1_700_000_000_000;

fn event(machine: &str, sensor: &str, seq: u64, t: i64, value: f64) -> String {
    let (metric, unit) =
        if machine == "fan-1" { ("velocity_rms", "mm/s") } else { ("accel_rms", "g") };
    format!(
        r#"{{"at":{at},"kind":"event","event":{{"event_id":"{machine}.{sensor}.{seq}","machine":"{machine}","sensor":"{sensor}","seq":{seq},"ts_ms":{ts},"clock":{{"state":"synced","err_ms":2}},"metric":"{metric}","unit":"{unit}","schema":1,"quality":"good","value":{value}}}}}"#,
        at = T0 + t * 1000 + 200,
        ts = T0 + t * 1000,
    )
}

/// s1 high from second 5 on (an incident that stays open), s2 quiet after second 20; fan-1's
/// velocity in zone B, then from second 10 on in zone D (an incident of the velocity rule).
fn write_trace(path: &Path) {
    let mut lines = Vec::new();
    for t in 0..600 {
        lines.push(event("press-7", "s1", t as u64 + 1, t, if t >= 5 { 0.8 } else { 0.1 }));
        if t < 20 {
            lines.push(event("press-7", "s2", t as u64 + 1, t, 0.1));
        }
        lines.push(event("fan-1", "v1", t as u64 + 1, t, if t >= 10 { 5.2 } else { 2.1 }));
    }
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// Two rules: the default one over `accel_rms`, and one over `velocity_rms` at zone C's
/// boundary of fan-1's ISO class (group 2 rigid: 2.8 mm/s).
const RULES: &str = "[[rule]]\nname = \"high-vibration\"\n[[rule]]\nname = \"severity\"\n\
    metric = \"velocity_rms\"\nthreshold = \"zone-C\"\n\
    [machines.fan-1]\niso_group = 2\nfoundation = \"rigid\"\n";

fn chromium(args: &[&str], url: &str) -> String {
    let out = Command::new("chromium")
        .args(["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        .args(["--no-first-run", "--virtual-time-budget=2000"])
        .args(args)
        .arg(url)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run chromium ({e}): Debian's `chromium` package, scripts/setup installs it"
            )
        });
    assert!(out.status.success(), "chromium: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The size Chromium lays the first trend with values out at, and the size of its values' line
/// (px): a copy of the page's DOM with a script added that writes both into the DOM.
fn measured_trend(dir: &Path, dom: &str) -> ((f64, f64), (f64, f64)) {
    let script = "<script>for (const s of document.querySelectorAll('svg.trend')) {\
        const v = s.querySelector('.values'); if (!v) continue;\
        const r = s.getBoundingClientRect(); const b = v.getBBox();\
        s.setAttribute('data-measured', [r.width, r.height, b.width, b.height].join(' '));}</script>";
    let page =
        dom.replace("http-equiv=\"refresh\"", "").replace("</body>", &format!("{script}</body>"));
    let copy = dir.join("measure.html");
    std::fs::write(&copy, page).unwrap();
    let measured = chromium(&["--dump-dom"], &format!("file://{}", copy.display()));
    let at = measured.find("data-measured=\"").expect("the script measured the trend") + 15;
    let v: Vec<f64> = measured[at..measured[at..].find('"').unwrap() + at]
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    ((v[0], v[1]), (v[2], v[3]))
}

#[test]
fn the_status_page_shows_machines_incidents_and_sensor_states_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    write_trace(&trace);
    let port = support::free_port();
    let config = dir.path().join("gateway.toml");
    let text = format!(
        "[gateway]\nid = \"gw-page\"\n{RULES}[time]\nallowed_lateness = \"30s\"\nidle_timeout = \"10s\"\n{}",
        support::trace_daemon_sections(&dir.path().join("store"), "", port, &trace, 10.0)
    );
    std::fs::write(&config, text).unwrap();
    let mut d = Daemon::start(&config, &["--no-forward"], &[]);
    // Until s2 is silent and the incident open (asked through the control socket).
    poll(DEADLINE, || {
        let r = run(linegate(&["status", "--once", "--json", "--config"]).arg(&config));
        let st: Value = serde_json::from_str(&r.stdout).ok()?;
        let silent =
            st["sensors"].as_array()?.iter().any(|s| s["sensor"] == "s2" && s["state"] == "silent");
        let open = |m: usize| {
            st["machines"][m]["open_incidents"].as_array().is_some_and(|i| !i.is_empty())
        };
        (silent && open(0) && open(1)).then_some(())
    })
    .expect("s2 silent and an incident open on each machine");
    let url = format!("http://127.0.0.1:{port}/");
    let dom = chromium(&["--dump-dom"], &url);
    d.assert_running();
    for needle in [
        "<span id=\"gateway\">gw-page</span>",
        "press-7/s1",
        "press-7/s2",
        "data-state=\"live\"",
        "data-state=\"silent\"",
        "missing: no longer expected in time",
        "gw-page/high-vibration/press-7/",
        "gw-page/severity/fan-1/",
        "press-7.s1.6 at 2023-11-14T22:13:25.000Z",
        "behind by",
        "id=\"outbox\"",
        "http-equiv=\"refresh\"",
    ] {
        assert!(dom.contains(needle), "{needle:?} not in the page's DOM:\n{dom}");
    }
    assert!(!dom.contains("<script"), "no script on the page");
    for attr in ["src=", "href="] {
        for (at, _) in dom.match_indices(attr) {
            let value = &dom[at + attr.len()..];
            assert!(value.starts_with("\"#"), "an external {attr} in the page: {}", &dom[at..]);
        }
    }
    for needle in [
        "<figure class=\"trend\" data-machine=\"press-7\" data-rule=\"high-vibration\"><svg class=\"trend\"",
        "press-7, rule high-vibration: accel_rms",
        "<polyline class=\"values\"",
        "class=\"threshold\"",
        "threshold 0.5 g",
        "class=\"incident\"",
        "accel_rms (g)",
        "time (UTC), 2023-11-14",
        "<figure class=\"trend\" data-machine=\"fan-1\" data-rule=\"severity\"><svg class=\"trend\"",
        "fan-1, rule severity: velocity_rms",
        "class=\"zone zone-A\"",
        "class=\"zone zone-D\"",
        "threshold 2.8 mm/s",
        "velocity_rms (mm/s)",
        "no values in this hour",
    ] {
        assert!(dom.contains(needle), "{needle:?} not in the page's trends:\n{dom}");
    }
    let (svg, line) = measured_trend(dir.path(), &dom);
    assert!(svg.0 >= 700.0 && svg.1 >= 230.0, "the trend drawn at {svg:?} px");
    assert!(line.0 > 1.0 && line.1 > 10.0, "its values drawn over {line:?} px");
    let artifacts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    chromium(&[&format!("--screenshot={}", shot.display()), "--window-size=1280,1400"], &url);
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{} bytes", png.len());
    d.signal("TERM");
    d.wait_success(DEADLINE);
}
