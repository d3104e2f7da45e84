//! The status page's trends: per machine, for every measurement rule, the last hour of the
//! measurement the rule reads (the decider's [`TrendBook`], as of the last checkpoint), with the
//! machine's threshold (its override or resolved zone), the ISO 20816-3 zone bands of its class
//! for `velocity_rms`, and the rule's incidents on the machine from the alert archive. The hour
//! ends at the machine's newest value (event time), so a replayed or delayed trace is drawn
//! where its values are. Drawn by [`super::trend_svg`].

use std::fmt::Write as _;

use super::status_page::escape;
use super::trend_svg::{render, Chart, Point, Span};
use super::view::View;
use super::AuditError;
use crate::config::Config;
use crate::event::features::Feature;
use crate::rule::alert::AlertKind;
use crate::rule::Params;
use crate::trend::{TrendBook, WINDOW_MS};

/// One rule's trend on one machine.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleTrend {
    pub rule: String,
    pub metric: Feature,
    /// The rule's unit, which the values are in.
    pub unit: &'static str,
    pub points: Vec<Point>,
    /// `None`: no threshold resolves for the machine (its events never count).
    pub threshold: Option<f64>,
    pub zones: Option<[f64; 3]>,
    pub incidents: Vec<Span>,
}

/// One machine's trends over the hour `start_ms..end_ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineTrends {
    pub machine: String,
    pub start_ms: i64,
    pub end_ms: i64,
    pub rules: Vec<RuleTrend>,
}

/// Every machine's trends, and how they are kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trends {
    /// Buckets per hour (`[metrics] trend_points`; 0: no trends are kept).
    pub points: u32,
    pub width_ms: i64,
    pub machines: Vec<MachineTrends>,
}

/// The trends of `book` under `config`, with the incidents of the store's alert archive.
pub fn gather(view: &View<'_>, config: &Config, book: &TrendBook) -> Result<Trends, AuditError> {
    let mut trends =
        Trends { points: book.points(), width_ms: book.width_ms(), machines: Vec::new() };
    if book.machines().next().is_none() {
        return Ok(trends);
    }
    let params = Params::from_config(config);
    let alerts = view.read(super::status::latest_alerts)?;
    let width = book.width_ms();
    for (machine, kept) in book.machines() {
        let (start_ms, end_ms) = (kept.newest_ms.saturating_sub(WINDOW_MS), kept.newest_ms);
        let mut rules = Vec::new();
        for (i, r) in params.rules.iter().enumerate() {
            let points = kept.series.get(i).into_iter().flat_map(|s| s.buckets());
            let points = points
                .map(|b| Point {
                    start_ms: b.index * width,
                    end_ms: (b.index + 1) * width,
                    min: b.min,
                    max: b.max,
                })
                .filter(|p| p.end_ms > start_ms)
                .collect();
            let threshold = Some(r.machine_threshold(machine)).filter(|t| t.is_finite());
            let zones = (r.metric == Feature::VelocityRms)
                .then(|| config.machines.get(machine).and_then(|a| a.iso))
                .flatten()
                .map(|c| c.boundaries());
            let incidents = alerts
                .values()
                .filter(|a| a.machine == machine && a.rule == r.name)
                .filter(|a| a.kind != AlertKind::Supersede)
                .map(|a| Span { label: a.alert_id.clone(), onset_ms: a.onset_ms, end_ms: a.end_ms })
                .collect();
            rules.push(RuleTrend {
                rule: r.name.clone(),
                metric: r.metric,
                unit: r.unit.as_str(),
                points,
                threshold,
                zones,
                incidents,
            });
        }
        trends.machines.push(MachineTrends {
            machine: machine.to_owned(),
            start_ms,
            end_ms,
            rules,
        });
    }
    Ok(trends)
}

/// The page's trends section.
pub fn section(h: &mut String, trends: &Trends) {
    h.push_str("<h2>Trends</h2>");
    if trends.points == 0 {
        h.push_str(
            "<p id=\"trends\" class=\"muted\">off (<code>[metrics] trend_points = 0</code>)</p>",
        );
        return;
    }
    let _ = write!(
        h,
        "<p id=\"trends\" class=\"muted\">Per machine and rule, the hour of event time up to the \
         machine's newest value: each {} s bucket's smallest and largest value, the threshold \
         (dashed), the ISO zones for a velocity and the incidents (shaded red), from what the \
         daemon decided since it started, as of its last checkpoint.</p>",
        trends.width_ms / 1000
    );
    if trends.machines.is_empty() {
        h.push_str("<p class=\"muted\">no values yet</p>");
    }
    for m in &trends.machines {
        let _ = write!(h, "<h3>{}</h3><div class=\"trends\">", escape(&m.machine));
        for r in &m.rules {
            let title = format!("{}, rule {}: {}", m.machine, r.rule, r.metric.as_str());
            let chart = Chart {
                title: &title,
                quantity: r.metric.as_str(),
                unit: r.unit,
                start_ms: m.start_ms,
                end_ms: m.end_ms,
                points: &r.points,
                threshold: r.threshold,
                zones: r.zones,
                incidents: &r.incidents,
            };
            let svg = render(&chart).unwrap_or_else(|e| {
                format!("<p class=\"bad\">{}: {}</p>", escape(&title), escape(&e.to_string()))
            });
            let _ = write!(
                h,
                "<figure class=\"trend\" data-machine=\"{}\" data-rule=\"{}\">{svg}</figure>",
                escape(&m.machine),
                escape(&r.rule)
            );
        }
        h.push_str("</div>");
    }
}
