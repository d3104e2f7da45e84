//! One trend of the status page as inline SVG: data in, markup out, no script and no reference to
//! anything outside the page. The values are drawn as their buckets' smallest and largest values
//! (`crate::trend`: a spike survives the downsampling), over the shaded ISO 20816-3 zone bands
//! when the chart has them, with the incidents shaded from onset to end (or to the chart's end
//! while open) and the threshold as a dashed line. Axes are labelled with the quantity and its
//! unit, and with times of day in UTC and the date.
//!
//! The value axis runs from 0 (or the smallest value, when negative) to a little above the
//! largest of the values, the threshold and zone D's boundary, but no higher than
//! [`OFF_SCALE`] times the threshold (or zone D's boundary): a value above that is drawn at the
//! top edge and the chart says "off scale" with the largest value, so that one wild value does
//! not flatten the hour. A value, threshold or boundary that is not a finite number is refused
//! with an error naming it.

use std::fmt::Write as _;

use chrono::DateTime;

use super::status_page::escape;
use crate::timefmt::time;

/// How far above the threshold (or zone D's boundary) the value axis reaches at most.
pub const OFF_SCALE: f64 = 4.0;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 240.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 28.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 46.0;
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
const PLOT_H: f64 = HEIGHT - TOP - BOTTOM;

/// The zones' fills, A to D (the status page's zone colours).
const ZONE_FILL: [(&str, &str); 4] =
    [("A", "#d8f5d8"), ("B", "#eef8c8"), ("C", "#fff3c4"), ("D", "#f8d0d0")];

/// One bucket of values: the smallest and largest value whose event time fell in
/// `start_ms..end_ms`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub start_ms: i64,
    pub end_ms: i64,
    pub min: f64,
    pub max: f64,
}

/// An incident: from onset to end, or to the chart's end while it is open.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub label: String,
    pub onset_ms: i64,
    pub end_ms: Option<i64>,
}

/// What one chart shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart<'a> {
    /// Its heading, inside the SVG.
    pub title: &'a str,
    /// The measurement, as the axis names it: `velocity_rms`.
    pub quantity: &'a str,
    /// Its unit (`"1"`: none shown).
    pub unit: &'a str,
    pub start_ms: i64,
    pub end_ms: i64,
    /// Oldest first; may be empty.
    pub points: &'a [Point],
    pub threshold: Option<f64>,
    /// The boundaries of zones B, C and D, for a velocity of a machine with an ISO class.
    pub zones: Option<[f64; 3]>,
    pub incidents: &'a [Span],
}

/// Why a chart cannot be drawn.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChartError {
    #[error("the chart's time span is empty ({start} to {end})")]
    EmptySpan { start: String, end: String },
    #[error("{what} is not a finite number ({value})")]
    NotFinite { what: String, value: f64 },
}

/// `v` with three significant digits, trailing zeros dropped: `0.5`, `4.62`, `123`.
pub fn num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// `v` and its unit: `0.5 g`, `4.62 mm/s`, `31.4` (dimensionless).
pub fn with_unit(v: f64, unit: &str) -> String {
    match unit {
        "1" | "" => num(v),
        u => format!("{} {u}", num(v)),
    }
}

/// The value axis: its bottom, top and tick step, and whether a value lies above the top.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Scale {
    lo: f64,
    hi: f64,
    step: f64,
    off_scale: bool,
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice(raw: f64) -> f64 {
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * p).find(|&s| s >= raw).unwrap_or(10.0 * p)
}

fn scale(c: &Chart<'_>) -> Scale {
    let data_max = c.points.iter().map(|p| p.max).fold(f64::NEG_INFINITY, f64::max);
    let data_min = c.points.iter().map(|p| p.min).fold(f64::INFINITY, f64::min);
    let zone_d = c.zones.map(|z| z[2]);
    let reference = c.threshold.into_iter().chain(zone_d).fold(f64::NEG_INFINITY, f64::max);
    let reference = (reference > 0.0).then_some(reference);
    let wanted = [data_max, c.threshold.unwrap_or(0.0), zone_d.map_or(0.0, |d| d * 1.25)]
        .into_iter()
        .fold(0.0f64, f64::max);
    // Within a quarter of f64's range, so that the span and its ticks stay finite.
    let cap = reference.map_or(f64::MAX / 4.0, |r| (r * OFF_SCALE).min(f64::MAX / 4.0));
    let lo = data_min.min(0.0).max(-cap);
    let mut hi = (wanted * 1.1).min(cap);
    if hi <= lo {
        hi = lo + 1.0;
    }
    let step = nice((hi - lo) / 4.0);
    let hi = (hi / step).ceil() * step;
    let lo = (lo / step).floor() * step;
    Scale { lo, hi, step, off_scale: data_max > hi }
}

fn x_of(c: &Chart<'_>, t: i64) -> f64 {
    let f = (t as f64 - c.start_ms as f64) / (c.end_ms as f64 - c.start_ms as f64);
    LEFT + f.clamp(0.0, 1.0) * PLOT_W
}

fn y_of(s: &Scale, v: f64) -> f64 {
    let f = (s.hi - v) / (s.hi - s.lo);
    TOP + f.clamp(0.0, 1.0) * PLOT_H
}

/// The checks: a non-empty span, finite numbers everywhere.
fn check(c: &Chart<'_>) -> Result<(), ChartError> {
    if c.end_ms <= c.start_ms {
        return Err(ChartError::EmptySpan { start: time(c.start_ms), end: time(c.end_ms) });
    }
    let finite = |what: String, value: f64| {
        if value.is_finite() {
            Ok(())
        } else {
            Err(ChartError::NotFinite { what, value })
        }
    };
    for p in c.points {
        finite(format!("the value at {}", time(p.start_ms)), p.min)?;
        finite(format!("the value at {}", time(p.start_ms)), p.max)?;
    }
    if let Some(t) = c.threshold {
        finite("the threshold".into(), t)?;
    }
    for (z, b) in ["B", "C", "D"].iter().zip(c.zones.into_iter().flatten()) {
        finite(format!("zone {z}'s boundary"), b)?;
    }
    Ok(())
}

/// The chart as an `<svg>` element.
pub fn render(c: &Chart<'_>) -> Result<String, ChartError> {
    check(c)?;
    let s = scale(c);
    let mut h = String::new();
    let unit = match c.unit {
        "1" | "" => String::new(),
        u => format!(" ({})", escape(u)),
    };
    let _ = write!(
        h,
        "<svg class=\"trend\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         role=\"img\" font-family=\"sans-serif\" font-size=\"11\"><title>{}</title>\
         <rect class=\"plot\" x=\"{LEFT}\" y=\"{TOP}\" width=\"{PLOT_W}\" height=\"{PLOT_H}\" \
         fill=\"#fff\" stroke=\"#888\"/>",
        escape(c.title)
    );
    if let Some(z) = c.zones {
        zones(&mut h, &s, z);
    }
    for i in c.incidents {
        let end = i.end_ms.unwrap_or(c.end_ms);
        if end < c.start_ms || i.onset_ms > c.end_ms {
            continue;
        }
        let (x0, x1) = (x_of(c, i.onset_ms), x_of(c, end));
        let until = i.end_ms.map_or("still open".to_owned(), |e| format!("until {}", time(e)));
        let _ = write!(
            h,
            "<rect class=\"incident\" x=\"{x0:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{PLOT_H}\" \
             fill=\"#c0392b\" fill-opacity=\"0.18\"><title>incident {} from {} {until}</title></rect>",
            (x1 - x0).max(1.0),
            escape(&i.label),
            time(i.onset_ms)
        );
    }
    value_axis(&mut h, &s, c.quantity, &unit);
    time_axis(&mut h, c);
    if let Some(t) = c.threshold {
        let y = y_of(&s, t);
        let _ = write!(
            h,
            "<line class=\"threshold\" x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" \
             stroke=\"#c00\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" fill=\"#c00\">threshold {}</text>",
            LEFT + PLOT_W,
            LEFT + 4.0,
            (y - 4.0).max(TOP + 10.0),
            escape(&with_unit(t, c.unit))
        );
    }
    values(&mut h, c, &s);
    let _ = write!(
        h,
        "<text class=\"heading\" x=\"{LEFT}\" y=\"{:.1}\" font-size=\"13\" font-weight=\"bold\">{}</text>",
        TOP - 10.0,
        escape(c.title)
    );
    if s.off_scale {
        let peak = c.points.iter().fold(None::<&Point>, |a, p| match a {
            Some(a) if a.max >= p.max => Some(a),
            _ => Some(p),
        });
        if let Some(p) = peak {
            let _ = write!(
                h,
                "<text class=\"off-scale\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#a00\" \
                 font-weight=\"bold\">off scale: peak {} at {}</text>",
                LEFT + PLOT_W,
                TOP - 10.0,
                escape(&with_unit(p.max, c.unit)),
                time(p.start_ms)
            );
        }
    }
    h.push_str("</svg>");
    Ok(h)
}

fn zones(h: &mut String, s: &Scale, z: [f64; 3]) {
    let edges = [s.lo.min(0.0), z[0], z[1], z[2], s.hi];
    for (k, (name, fill)) in ZONE_FILL.iter().enumerate() {
        let (bottom, top) = (edges[k].max(s.lo), edges[k + 1].min(s.hi));
        if top <= bottom {
            continue;
        }
        let (y0, y1) = (y_of(s, top), y_of(s, bottom));
        let _ = write!(
            h,
            "<rect class=\"zone zone-{name}\" x=\"{LEFT}\" y=\"{y0:.1}\" width=\"{PLOT_W}\" \
             height=\"{:.1}\" fill=\"{fill}\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#555\">{name}</text>",
            y1 - y0,
            LEFT + PLOT_W + 6.0,
            (y0 + y1) / 2.0 + 4.0
        );
    }
}

fn value_axis(h: &mut String, s: &Scale, quantity: &str, unit: &str) {
    let mut v = s.lo;
    while v <= s.hi + s.step * 1e-9 {
        let y = y_of(s, v);
        let _ = write!(
            h,
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + PLOT_W,
            LEFT - 4.0,
            y + 4.0,
            num(v)
        );
        v += s.step;
    }
    let _ = write!(
        h,
        "<text class=\"axis-label\" transform=\"translate(14 {:.1}) rotate(-90)\" \
         text-anchor=\"middle\">{}{unit}</text>",
        TOP + PLOT_H / 2.0,
        escape(quantity)
    );
}

/// Tick steps for the time axis, in minutes.
const TIME_STEPS_MIN: [i64; 10] = [1, 2, 5, 10, 15, 30, 60, 120, 360, 720];

fn time_axis(h: &mut String, c: &Chart<'_>) {
    let span = c.end_ms - c.start_ms;
    let step =
        TIME_STEPS_MIN.iter().map(|m| m * 60_000).find(|s| span / s <= 6).unwrap_or(86_400_000);
    let mut t = c.start_ms.div_euclid(step) * step;
    if t < c.start_ms {
        t += step;
    }
    let bottom = TOP + PLOT_H;
    while t <= c.end_ms {
        let x = x_of(c, t);
        let label = DateTime::from_timestamp_millis(t).map_or(String::new(), |d| {
            d.format(if step < 60_000 { "%H:%M:%S" } else { "%H:%M" }).to_string()
        });
        let _ = write!(
            h,
            "<line x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
            bottom + 4.0,
            bottom + 16.0
        );
        t += step;
    }
    let day =
        |ms: i64| DateTime::from_timestamp_millis(ms).map(|d| d.format("%Y-%m-%d").to_string());
    let days = match (day(c.start_ms), day(c.end_ms)) {
        (Some(a), Some(b)) if a == b => a,
        (Some(a), Some(b)) => format!("{a} to {b}"),
        _ => String::new(),
    };
    let _ = write!(
        h,
        "<text class=\"axis-label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">time (UTC), {days}</text>",
        LEFT + PLOT_W / 2.0,
        HEIGHT - 8.0
    );
}

/// The values: a line through each run of adjacent buckets (down to its smallest value and up
/// to its largest, bucket by bucket), a dot for a bucket alone.
fn values(h: &mut String, c: &Chart<'_>, s: &Scale) {
    if c.points.is_empty() {
        let _ = write!(
            h,
            "<text class=\"empty\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#666\">\
             no values in this hour</text>",
            LEFT + PLOT_W / 2.0,
            TOP + PLOT_H / 2.0
        );
        return;
    }
    let mut run: Vec<(f64, f64, f64)> = Vec::new();
    let mut last_end = None;
    for p in c.points {
        if last_end != Some(p.start_ms) {
            line(h, &run);
            run.clear();
        }
        let x = x_of(c, p.start_ms + (p.end_ms - p.start_ms) / 2);
        run.push((x, y_of(s, p.min), y_of(s, p.max)));
        last_end = Some(p.end_ms);
    }
    line(h, &run);
}

fn line(h: &mut String, run: &[(f64, f64, f64)]) {
    match run {
        [] => {}
        [(x, lo, hi)] => {
            let _ = write!(
                h,
                "<line class=\"values\" x1=\"{x:.1}\" y1=\"{lo:.1}\" x2=\"{x:.1}\" y2=\"{hi:.1}\" \
                 stroke=\"#1f5fa8\" stroke-width=\"1.5\"/>\
                 <circle class=\"values\" cx=\"{x:.1}\" cy=\"{hi:.1}\" r=\"2.5\" fill=\"#1f5fa8\"/>"
            );
        }
        _ => {
            h.push_str("<polyline class=\"values\" fill=\"none\" stroke=\"#1f5fa8\" stroke-width=\"1.5\" points=\"");
            for (x, lo, hi) in run {
                let _ = write!(h, "{x:.1},{lo:.1} {x:.1},{hi:.1} ");
            }
            h.pop();
            h.push_str("\"/>");
        }
    }
}

#[cfg(test)]
mod tests;
