//! The status page (`GET /` on the metrics listener): what `linegate status` says, as one
//! server-rendered HTML page for the person standing at the machine. No script, no external
//! asset (a line-side network has no internet), read-only, refreshing itself every
//! [`REFRESH_S`] seconds. Delay and gaps are shown as what they are: a sensor behind says by how
//! much, a quiet sensor's tail says whether it is delayed (idle, may still come in time) or
//! missing (silent). Times in RFC 3339 and "x ago". Per machine and rule, an inline SVG trend of
//! the last hour (`super::status_trends`, drawn by `super::trend_svg`).

use std::fmt::Write as _;

use super::status::{words, Drain, OpenIncident, SensorRow, Status};
use super::status_trends::Trends;
use crate::records::sensors::SensorState;
use crate::timefmt::time;

/// Seconds between the page's own refreshes.
pub const REFRESH_S: u32 = 5;

/// `text` safe inside HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:1em 2em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #bbb;padding:.3em .6em;text-align:left}\
th{background:#eee}.live{background:#d8f5d8}.idle{background:#fff3c4}.silent{background:#f8d0d0}\
.zone-A{background:#d8f5d8}.zone-B{background:#eef8c8}.zone-C{background:#fff3c4}.zone-D{background:#f8d0d0}\
.bad{color:#a00;font-weight:bold}.muted{color:#666}h2{margin-top:1.2em}\
.trends{display:flex;flex-wrap:wrap;gap:1em}figure.trend{margin:0}";

/// The page for `st`, with `trends` after the machines.
pub fn render(st: &Status, trends: &Trends) -> String {
    let mut h = String::new();
    let now = st.daemon.as_ref().map_or(st.reference_ms, |l| l.now_ms);
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_S}\">\
         <title>linegate {gw}</title><style>{STYLE}</style></head><body>\
         <h1>linegate gateway <span id=\"gateway\">{gw}</span></h1>",
        gw = escape(&st.gateway)
    );
    match &st.daemon {
        Some(l) => {
            let _ = write!(
                h,
                "<p id=\"daemon\">running, pid {}, up {} (since {}); page at {}, refreshed every {REFRESH_S} s. \
                 {}.</p>",
                l.pid,
                words(l.now_ms - l.started_ms),
                time(l.started_ms),
                time(l.now_ms),
                st.rules
                    .iter()
                    .map(|r| format!(
                        "Rule <b>{}</b> version <code>{}</code>",
                        escape(&r.rule),
                        escape(&r.rule_version)
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        None => h.push_str("<p id=\"daemon\" class=\"bad\">not running</p>"),
    }
    let _ = write!(
        h,
        "<p>Sensor states and lags are taken at ingest time {}.</p>",
        time(st.reference_ms)
    );
    machines(&mut h, st);
    super::status_trends::section(&mut h, trends);
    sensors(&mut h, &st.sensors);
    outbox(&mut h, st);
    h.push_str("<h2>Gateway</h2><table id=\"gateway-state\">");
    let broker = match &st.daemon {
        None => "not running".to_string(),
        Some(l) => match l.broker_connected {
            None => "no MQTT forwarder".into(),
            Some(true) => "session up".into(),
            Some(false) => "<span class=\"bad\">DOWN: records wait in the outbox</span>".into(),
        },
    };
    let _ = write!(h, "<tr><th>broker</th><td id=\"broker\">{broker}</td></tr>");
    if let Some(sp) = &st.sparkplug {
        let line = escape(&super::status::sparkplug_line(sp));
        let _ = write!(h, "<tr><th>Sparkplug B</th><td id=\"sparkplug\">{line}</td></tr>");
    }
    let budget = match st.store_budget_bytes {
        0 => "no budget".to_string(),
        b => format!("{:.1} % of {b} bytes", st.store_bytes as f64 * 100.0 / b as f64),
    };
    let _ = write!(h, "<tr><th>store</th><td>{} bytes ({budget})</td></tr>", st.store_bytes);
    let _ = write!(h, "<tr><th>quarantine</th><td>{} record(s)</td></tr>", st.quarantined);
    if let Some(l) = &st.daemon {
        let _ = write!(h, "<tr><th>clock</th><td id=\"clock\">{}</td></tr>", escape(&l.clock));
    }
    for (what, r) in [("last restart", &st.last_restart), ("last recovery", &st.last_recovery)] {
        let text = match r {
            None => "none".to_string(),
            Some(r) => format!(
                "{} ({} ago): {}",
                time(r.at_ms),
                words(now - r.at_ms),
                escape(&r.entry.describe())
            ),
        };
        let _ = write!(h, "<tr><th>{what}</th><td>{text}</td></tr>");
    }
    h.push_str("</table></body></html>\n");
    h
}

/// One open incident: its alert, the rule that decided it, its revision, onset and evidence.
fn incident(h: &mut String, i: &OpenIncident) {
    let ev: Vec<String> = i
        .evidence
        .iter()
        .map(|(id, ts)| format!("<li>{} at {}</li>", escape(id), time(*ts)))
        .collect();
    let more = if i.also_count > 0 {
        format!("<li class=\"muted\">and {} more high events</li>", i.also_count)
    } else {
        String::new()
    };
    let rule = escape(&i.rule);
    let _ = write!(
        h,
        "<div class=\"incident\" data-rule=\"{rule}\"><b>{}</b> (rule {rule}) revision {}, since {}<ul>{}{more}</ul></div>",
        escape(&i.alert_id),
        i.revision,
        time(i.onset_ms),
        ev.join("")
    );
}

fn machines(h: &mut String, st: &Status) {
    h.push_str("<h2>Machines</h2><table id=\"machines\"><tr><th>machine</th><th>asset</th><th>velocity</th><th>watermark</th><th>lag</th><th>open incidents</th></tr>");
    if st.machines.is_empty() {
        h.push_str("<tr><td colspan=\"6\" class=\"muted\">none yet</td></tr>");
    }
    for m in &st.machines {
        let wm = m.watermark_ms.map_or("none yet".to_string(), time);
        let lag = m.lag_ms.map_or(String::new(), |l| format!("behind by {}", words(l)));
        let mut inc = String::new();
        for i in &m.open_incidents {
            incident(&mut inc, i);
        }
        if inc.is_empty() {
            inc.push_str("<span class=\"muted\">none</span>");
        }
        let zone = m.asset.velocity.as_ref().and_then(|v| v.zone).unwrap_or("none");
        let _ = write!(
            h,
            "<tr class=\"machine\" data-zone=\"{zone}\"><td>{}</td><td>{}</td><td class=\"zone-{zone}\">{}</td><td>{wm}</td><td>{lag}</td><td>{inc}</td></tr>",
            escape(&m.machine),
            escape(&m.asset.asset_text()),
            escape(&m.asset.velocity_text())
        );
    }
    h.push_str("</table>");
}

fn sensors(h: &mut String, rows: &[SensorRow]) {
    h.push_str("<h2>Sensors</h2><table id=\"sensors\"><tr><th>sensor</th><th>state</th><th>last event</th><th>received</th><th>its tail</th><th>declared gaps</th></tr>");
    for s in rows {
        let state = s.state.as_str();
        let last = match (s.last_seq, s.last_ts_ms) {
            (Some(seq), Some(ts)) => format!("seq {seq} at {}", time(ts)),
            _ => "never heard from".into(),
        };
        let received = s.quiet_ms.map_or(String::new(), |q| format!("{} ago", words(q)));
        let tail = match s.state {
            SensorState::Live => "<span class=\"muted\">none</span>",
            SensorState::Idle => "delayed: may still come in time",
            SensorState::Silent => "<span class=\"bad\">missing: no longer expected in time</span>",
        };
        let gaps: Vec<String> = s.gaps.iter().map(|(r, n)| format!("{n} {}", escape(r))).collect();
        let gaps = if gaps.is_empty() { "none".into() } else { gaps.join(", ") };
        let _ = write!(
            h,
            "<tr class=\"sensor {state}\" data-state=\"{state}\"><td>{}/{}</td><td>{state}</td><td>{last}</td><td>{received}</td><td>{tail}</td><td>{gaps}</td></tr>",
            escape(&s.machine),
            escape(&s.sensor)
        );
    }
    h.push_str("</table>");
}

fn outbox(h: &mut String, st: &Status) {
    let (n, b, drain) = st.backlog();
    let eta = match drain {
        Drain::Empty => "empty".to_string(),
        Drain::Eta(s) => format!("backlog ETA {}", words((s * 1000.0) as i64)),
        Drain::NotDraining => "<span class=\"bad\">not draining</span>".to_string(),
        Drain::NoDaemon => "waiting for the daemon".to_string(),
    };
    let _ = write!(
        h,
        "<h2>Outbox</h2><p id=\"outbox\">{n} records, {b} bytes: {eta}</p><table><tr><th>kind</th><th>records</th><th>bytes</th></tr>"
    );
    for (k, (n, b)) in &st.outbox {
        let _ = write!(h, "<tr><td>{k}</td><td>{n}</td><td>{b}</td></tr>");
    }
    h.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("<b a=\"1\">&'"), "&lt;b a=&quot;1&quot;&gt;&amp;&#39;");
    }

    #[test]
    fn an_open_incident_names_its_rule() {
        let mut h = String::new();
        let i = OpenIncident {
            alert_id: "gw/press-7/zone-d/1".into(),
            rule: "zone-d".into(),
            revision: 2,
            onset_ms: 1_700_000_000_000,
            evidence: vec![("press-7.s1.6".into(), 1_700_000_000_000)],
            also_count: 0,
        };
        incident(&mut h, &i);
        assert!(h.starts_with("<div class=\"incident\" data-rule=\"zone-d\">"), "{h}");
        assert!(h.contains("</b> (rule zone-d) revision 2, since 2023-11-14T22:13:20.000Z"), "{h}");
    }
}
