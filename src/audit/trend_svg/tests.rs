use super::*;

const T0: i64 = 1_700_000_000_000;
const HOUR: i64 = 3_600_000;

fn chart<'a>(points: &'a [Point], incidents: &'a [Span]) -> Chart<'a> {
    Chart {
        title: "press-7: high-vibration",
        quantity: "accel_rms",
        unit: "g",
        start_ms: T0 - HOUR,
        end_ms: T0,
        points,
        threshold: Some(0.5),
        zones: None,
        incidents,
    }
}

/// Buckets of 15 s ending at `T0`, one per value, adjacent.
fn series(values: &[f64]) -> Vec<Point> {
    let n = values.len() as i64;
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let start = T0 - (n - i as i64) * 15_000;
            Point { start_ms: start, end_ms: start + 15_000, min: v * 0.9, max: v }
        })
        .collect()
}

/// Every number of every `points="…"` attribute and every `y`-like coordinate of `svg`, as
/// (x, y) pairs of the polylines.
fn polyline_points(svg: &str) -> Vec<(f64, f64)> {
    svg.split("<polyline")
        .skip(1)
        .flat_map(|p| {
            let from = p.find("points=\"").unwrap() + 8;
            let list = &p[from..from + p[from..].find('"').unwrap()];
            list.split(' ')
                .map(|xy| {
                    let (x, y) = xy.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn inside_plot((x, y): (f64, f64)) -> bool {
    (LEFT..=LEFT + PLOT_W).contains(&x) && (TOP..=TOP + PLOT_H).contains(&y)
}

#[test]
fn text_is_escaped_and_nothing_outside_the_page_is_referenced() {
    let pts = series(&[0.2, 0.3]);
    let c = Chart { title: "<m&\"x'>", unit: "m/s2<", ..chart(&pts, &[]) };
    let svg = render(&c).unwrap();
    assert!(svg.contains("<title>&lt;m&amp;&quot;x&#39;&gt;</title>"), "{svg}");
    assert!(svg.contains("accel_rms (m/s2&lt;)"), "{svg}");
    assert!(!svg.contains("<m&"), "{svg}");
    for banned in ["<script", "href", "src=", "url(", "http"] {
        assert!(!svg.contains(banned), "{banned} in {svg}");
    }
    assert!(svg.starts_with("<svg class=\"trend\"") && svg.ends_with("</svg>"));
}

#[test]
fn an_empty_series_draws_axes_threshold_and_says_so() {
    let svg = render(&chart(&[], &[])).unwrap();
    assert!(svg.contains("no values in this hour"), "{svg}");
    assert!(!svg.contains("class=\"values\""), "{svg}");
    assert!(svg.contains("class=\"threshold\""), "{svg}");
    assert!(svg.contains("threshold 0.5 g"), "{svg}");
    assert!(svg.contains("time (UTC), 2023-11-14"), "{svg}");
    assert!(svg.contains(">21:20<") && svg.contains(">22:10<"), "ticks every 10 min: {svg}");
    assert!(svg.contains("accel_rms (g)"), "{svg}");
}

#[test]
fn one_point_is_a_dot_and_adjacent_buckets_one_line() {
    let one = [Point { start_ms: T0 - 30_000, end_ms: T0 - 15_000, min: 0.1, max: 0.2 }];
    let svg = render(&chart(&one, &[])).unwrap();
    assert_eq!(svg.matches("<circle class=\"values\"").count(), 1, "{svg}");
    assert!(!svg.contains("<polyline"), "{svg}");
    let mut pts = series(&[0.1, 0.2, 0.3]);
    pts.push(Point { start_ms: T0 + 60_000, end_ms: T0 + 75_000, min: 0.4, max: 0.4 });
    let svg = render(&Chart { end_ms: T0 + 120_000, ..chart(&pts, &[]) }).unwrap();
    assert_eq!(svg.matches("<polyline").count(), 1, "{svg}");
    assert_eq!(svg.matches("<circle").count(), 1, "the bucket after a gap stands alone: {svg}");
    let line = polyline_points(&svg);
    assert_eq!(line.len(), 6, "down to min, up to max, per bucket");
    assert!(line.windows(2).all(|w| w[0].0 <= w[1].0), "in time order: {line:?}");
    assert!(line.iter().all(|&p| inside_plot(p)), "{line:?}");
}

#[test]
fn values_far_above_the_threshold_are_drawn_at_the_top_and_said_off_scale() {
    let pts = series(&[0.2, 1000.0, 0.3]);
    let svg = render(&chart(&pts, &[])).unwrap();
    assert!(svg.contains("off scale: peak 1000 g at 2023-11-14T22:12:50.000Z"), "{svg}");
    let line = polyline_points(&svg);
    assert!(line.iter().all(|&p| inside_plot(p)), "{line:?}");
    assert!(line.iter().any(|&(_, y)| y == TOP), "the spike at the top edge: {line:?}");
    // The axis reaches OFF_SCALE times the threshold: 2 g, in ticks of 0.5 g.
    assert!(svg.contains(">2</text>") && !svg.contains(">2.5</text>"), "{svg}");
    let no_threshold = render(&Chart { threshold: None, ..chart(&pts, &[]) }).unwrap();
    assert!(!no_threshold.contains("off scale"), "without a reference the axis grows");
    assert!(!no_threshold.contains("class=\"threshold\""));
}

#[test]
fn extreme_magnitudes_and_times_still_draw_inside_the_plot() {
    let pts = series(&[1e308, -1e308, f64::MAX]);
    let incidents = [Span { label: "i".into(), onset_ms: i64::MIN, end_ms: Some(i64::MAX) }];
    let svg = render(&Chart { threshold: None, ..chart(&pts, &incidents) }).unwrap();
    assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    assert!(polyline_points(&svg).into_iter().all(inside_plot), "{svg}");
    assert_eq!(svg.matches("class=\"incident\"").count(), 1, "{svg}");
}

#[test]
fn zones_and_incidents_are_shaded_where_they_are() {
    let pts = series(&[1.0, 3.0, 5.0]);
    let incidents = [
        Span { label: "gw/r/m/1".into(), onset_ms: T0 - 40_000, end_ms: None },
        Span { label: "gw/r/m/0".into(), onset_ms: T0 - 2 * HOUR, end_ms: Some(T0 - HOUR - 1) },
        Span { label: "<x>".into(), onset_ms: T0 - HOUR - 60_000, end_ms: Some(T0 - HOUR / 2) },
    ];
    let c = Chart {
        quantity: "velocity_rms",
        unit: "mm/s",
        threshold: Some(4.5),
        zones: Some([1.4, 2.8, 4.5]),
        ..chart(&pts, &incidents)
    };
    let svg = render(&c).unwrap();
    let zones: Vec<usize> =
        ["zone-A", "zone-B", "zone-C", "zone-D"].iter().map(|z| svg.find(z).unwrap()).collect();
    assert!(zones.windows(2).all(|w| w[0] < w[1]), "A to D, each once: {svg}");
    assert_eq!(svg.matches("class=\"incident\"").count(), 2, "the one before the hour left out");
    assert!(svg.contains("incident gw/r/m/1 from 2023-11-14T22:12:40.000Z still open"), "{svg}");
    assert!(svg.contains("incident &lt;x&gt;"), "{svg}");
    let open = svg.split("class=\"incident\"").nth(1).unwrap();
    let x: f64 = open[open.find("x=\"").unwrap() + 3..].split('"').next().unwrap().parse().unwrap();
    let w: f64 =
        open[open.find("width=\"").unwrap() + 7..].split('"').next().unwrap().parse().unwrap();
    assert!((x + w - (LEFT + PLOT_W)).abs() < 0.2, "open: to the chart's end ({x} + {w})");
    assert!(svg.contains("threshold 4.5 mm/s") && svg.contains("velocity_rms (mm/s)"), "{svg}");
}

#[test]
fn numbers_that_are_not_finite_are_refused_naming_them() {
    let mut pts = series(&[0.2, 0.3]);
    pts[1].max = f64::NAN;
    let e = render(&chart(&pts, &[])).unwrap_err();
    assert!(
        e.to_string().starts_with("the value at 2023-11-14T22:13:05.000Z is not a finite number"),
        "{e}"
    );
    let e = render(&Chart { threshold: Some(f64::INFINITY), ..chart(&[], &[]) }).unwrap_err();
    assert_eq!(e.to_string(), "the threshold is not a finite number (inf)");
    let e = render(&Chart { zones: Some([1.4, f64::NAN, 4.5]), ..chart(&[], &[]) }).unwrap_err();
    assert_eq!(e.to_string(), "zone C's boundary is not a finite number (NaN)");
    let e = render(&Chart { end_ms: T0 - HOUR, ..chart(&[], &[]) }).unwrap_err();
    assert!(matches!(e, ChartError::EmptySpan { .. }), "{e}");
}

#[test]
fn numbers_read_with_three_significant_digits() {
    let cases = [(0.5, "0.5"), (4.624, "4.62"), (123.4, "123"), (0.0, "0"), (-0.25, "-0.25")];
    for (v, text) in cases {
        assert_eq!(num(v), text);
    }
    assert_eq!(with_unit(31.4, "1"), "31.4");
    assert_eq!(with_unit(0.676, "g"), "0.676 g");
}
