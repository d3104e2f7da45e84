//! The explanation as text for people: RFC 3339 times with milliseconds, values with their unit
//! at three significant digits (never rounded across the threshold), a line per event of the
//! window and a sentence per revision.

use std::io::{self, Write};

use crate::event::features::MeasureUnit;
use crate::timefmt::time;

use super::number::{beside, measure, sig, span};
use super::rule::RuleLine;
use super::window::{EventLine, Status};
use super::{Explanation, MEMBERS_PAGE};

/// Writes `x` to `out`.
pub fn write(x: &Explanation, out: &mut dyn Write) -> io::Result<()> {
    let latest = x.revisions.last().map(|r| &r.record);
    writeln!(out, "alert {} on {} ({} revision(s))", x.alert_id, x.machine, x.revisions.len())?;
    let decided_under = latest.map_or("", |a| a.rule_version.as_str());
    match &x.rule {
        Some(r) => {
            writeln!(out, "  {}", r.sentence())?;
            let quality: Vec<&str> = r.count_quality.iter().map(|q| q.as_str()).collect();
            let clock: Vec<&str> = r.count_clock.iter().map(|c| c.as_str()).collect();
            writeln!(out, "  counts quality {}; clock {}", quality.join(", "), clock.join(", "))?;
            if !decided_under.is_empty() && decided_under != r.rule_version {
                writeln!(
                    out,
                    "  decided under rule version {decided_under}: this configuration's rule \
                     differs, events are judged by it below"
                )?;
            }
            if let Some(d) = &r.defect {
                writeln!(out, "  defect: {}", d.text())?;
            }
        }
        None if x.composite.is_some() => {}
        None => writeln!(
            out,
            "  rule {}: not in this configuration (renamed or removed since); events are shown \
             as the ledger recorded them",
            latest.map_or("", |a| a.rule.as_str())
        )?,
    }
    if let Some(c) = &x.composite {
        c.write(decided_under, out)?;
    }
    if let Some(a) = latest.filter(|a| !a.asset.is_empty()) {
        let tags: Vec<String> = a
            .asset
            .iter()
            .map(|(k, v)| {
                format!("{k} {}", v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            })
            .collect();
        writeln!(out, "  asset: {}", tags.join(", "))?;
    }
    let w = &x.window;
    let end = w.end_ms.map_or("still open".to_owned(), |e| format!("end {}", time(e)));
    writeln!(out, "  incident: onset {}, {end}", time(w.onset_ms))?;
    // A composite alert's events are its members' (each member alert has its own window).
    if x.composite.is_none() {
        write_window(x, out)?;
    }
    writeln!(out, "revisions")?;
    for r in &x.revisions {
        let a = &r.record;
        let wm = a.watermark_ms.map_or("none yet".to_owned(), time);
        writeln!(
            out,
            "  revision {} {}: decided at {}, watermark {wm}: {}",
            a.revision,
            crate::decide::kind_name(a.kind),
            time(a.decided_at_ms),
            r.reason
        )?;
    }
    if !x.also.is_empty() {
        writeln!(out, "also: {}", x.also.join(", "))?;
    }
    if let Some(m) = &x.members {
        let first = m.page * MEMBERS_PAGE;
        writeln!(
            out,
            "members {}..{} of {} (page {} of {} per page): {}",
            first.min(m.total),
            first + m.event_ids.len(),
            m.total,
            m.page,
            MEMBERS_PAGE,
            m.event_ids.join(", ")
        )?;
    }
    writeln!(out, "transitions")?;
    for (seq, r) in &x.transitions {
        writeln!(out, "  #{seq} at {}: {}", time(r.at_ms), r.entry.describe())?;
    }
    Ok(())
}

fn write_window(x: &Explanation, out: &mut dyn Write) -> io::Result<()> {
    let w = &x.window;
    let before = w.events.iter().filter(|e| !e.after_onset).count();
    let after = w.events.len() - before;
    let length = x.rule.as_ref().map_or("the evidence".to_owned(), |r| span(r.window_ms));
    let mut head = format!(
        "window ({}, {}], onset − {length}: {before} event(s) of {}",
        time(w.from_ms),
        time(w.onset_ms),
        x.machine
    );
    if after > 0 {
        head.push_str(&format!("; in the incident after the onset: {after}"));
    }
    writeln!(out, "{head}")?;
    if w.left_out_before > 0 {
        writeln!(out, "  ({} earlier event(s) of the window not listed)", w.left_out_before)?;
    }
    let rows: Vec<(String, String, String)> = w
        .events
        .iter()
        .map(|e| (format!("{}#{}", e.sensor, e.seq), value(e, x.rule.as_ref()), status(e)))
        .collect();
    let name_w = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let value_w = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
    let mut marked = false;
    for (e, (name, value, status)) in w.events.iter().zip(&rows) {
        if e.after_onset && !marked {
            writeln!(out, "  -- onset {} --", time(w.onset_ms))?;
            marked = true;
        }
        writeln!(out, "  {}  {name:<name_w$}  {value:<value_w$}  {status}", time(e.ts_ms))?;
    }
    if w.left_out_after > 0 {
        writeln!(
            out,
            "  ({} further event(s) of the incident not listed; its counted ones: \
             linegate explain {} --members 0)",
            w.left_out_after, x.alert_id
        )?;
    }
    Ok(())
}

/// The value of an event beside the rule: `0.676 g`, `4.62 mm/s, zone C`, `env_bpfi 31.4`,
/// `0.70 m/s2 (0.0714 g)`; `?` when unknown.
fn value(e: &EventLine, rule: Option<&RuleLine>) -> String {
    let (Some(v), Some(unit)) = (e.value, e.unit) else { return "?".into() };
    let mut text = match rule {
        Some(r) if unit == MeasureUnit::One => {
            format!("{} {}", r.metric, r.threshold.map_or_else(|| sig(v, 3), |t| beside(v, t)))
        }
        Some(r) => match (unit.convert(v, r.unit), r.threshold) {
            (Some(_), Some(t)) if unit == r.unit => format!("{} {}", beside(v, t), unit.as_str()),
            (Some(c), Some(t)) => {
                format!("{} ({} {})", measure(v, unit), beside(c, t), r.unit.as_str())
            }
            _ => measure(v, unit),
        },
        None => measure(v, unit),
    };
    if let Some(z) = e.zone {
        text.push_str(&format!(", zone {z}"));
    }
    text
}

/// `counted`, `counted (late)`, `below threshold`, `not counted: quality bad`, `too late: …`.
fn status(e: &EventLine) -> String {
    let mut s = match e.status {
        Status::Counted if e.late => "counted (late)".to_owned(),
        Status::Counted => "counted".to_owned(),
        Status::BelowThreshold if e.late => "below threshold (late)".to_owned(),
        Status::BelowThreshold => "below threshold".to_owned(),
        Status::NotCounted => "not counted".to_owned(),
        Status::TooLate => "too late: accepted, never applied".to_owned(),
        Status::Unknown => "not counted".to_owned(),
    };
    if let Some(why) = &e.why {
        s.push_str(if e.status == Status::Counted { "; " } else { ": " });
        s.push_str(why);
    }
    if let (Status::Counted, Some(b)) = (e.status, e.samples) {
        s.push_str(&format!(" [raw samples block {}]", b.block_seq));
    }
    s
}
