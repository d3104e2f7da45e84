//! The metrics as Prometheus text exposition format 0.0.4 (what `GET /metrics` serves).
//!
//! `prometheus-client` encodes OpenMetrics text, which differs from format 0.0.4 in three ways
//! that matter to a Prometheus text parser and to `promtool check metrics`: a counter's `# HELP`
//! and `# TYPE` lines name it without the `_total` its samples carry, `# UNIT` lines, and the
//! closing `# EOF`. [`openmetrics_to_text`] rewrites exactly those, and spells an infinite
//! gauge value `+Inf` as both formats require (the encoder writes Rust's `inf`); samples are
//! otherwise unchanged (label escaping and float spelling are the same in both formats). The
//! crate has no 0.0.4 encoder of its own (docs/decisions/0061-metrics-and-logs.md).

use prometheus_client::encoding::text::encode_registry;

use super::Metrics;

/// The `Content-Type` of format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The registry could not be written out (a label value or a metric refused to encode).
#[derive(Debug, thiserror::Error)]
#[error("metrics could not be encoded as text: {0}")]
pub struct EncodeError(#[from] std::fmt::Error);

/// Every family of `metrics`, in format 0.0.4.
pub fn encode(metrics: &Metrics) -> Result<String, EncodeError> {
    let mut open = String::with_capacity(16 * 1024);
    encode_registry(&mut open, metrics.registry())?;
    Ok(openmetrics_to_text(&open))
}

/// Rewrites OpenMetrics text (as `prometheus-client` writes it: `# HELP`, then `# TYPE`, then
/// an optional `# UNIT`, then samples) into format 0.0.4.
pub fn openmetrics_to_text(open: &str) -> String {
    let mut out = String::with_capacity(open.len() + 1024);
    // A `# HELP` line waits for its `# TYPE`, which decides the name it must carry.
    let mut held_help: Option<&str> = None;
    for line in open.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            flush_help(&mut out, held_help.take());
            held_help = Some(rest);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.rsplit_once(' ').unwrap_or((rest, "untyped"));
            let (exposed, kind) = match kind {
                "counter" if !name.ends_with("_total") => (format!("{name}_total"), kind),
                "unknown" => (name.to_owned(), "untyped"),
                _ => (name.to_owned(), kind),
            };
            if let Some(help) = held_help.take() {
                let (help_name, text) = help.split_once(' ').unwrap_or((help, ""));
                let help_name = if help_name == name { exposed.as_str() } else { help_name };
                push_line(&mut out, &format!("# HELP {help_name} {text}"));
            }
            push_line(&mut out, &format!("# TYPE {exposed} {kind}"));
            continue;
        }
        flush_help(&mut out, held_help.take());
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        push_sample(&mut out, line);
    }
    flush_help(&mut out, held_help);
    out
}

/// A sample line, with an infinite value spelled as the format requires (`+Inf`, `-Inf`): the
/// encoder writes floats with Rust's `Display`, which spells them `inf` and `-inf`.
fn push_sample(out: &mut String, line: &str) {
    match line.rsplit_once(' ') {
        Some((series, "inf")) => push_line(out, &format!("{series} +Inf")),
        Some((series, "-inf")) => push_line(out, &format!("{series} -Inf")),
        _ => push_line(out, line),
    }
}

fn flush_help(out: &mut String, help: Option<&str>) {
    if let Some(help) = help {
        push_line(out, &format!("# HELP {help}"));
    }
}

fn push_line(out: &mut String, line: &str) {
    out.push_str(line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_named_with_total_in_help_and_type() {
        let open =
            "# HELP x_fsyncs fsync calls.\n# TYPE x_fsyncs counter\nx_fsyncs_total 3\n# EOF\n";
        assert_eq!(
            openmetrics_to_text(open),
            "# HELP x_fsyncs_total fsync calls.\n# TYPE x_fsyncs_total counter\nx_fsyncs_total 3\n"
        );
    }

    #[test]
    fn unit_and_eof_lines_are_dropped_and_other_types_kept() {
        let open =
            "# HELP x_lag_seconds Lag.\n# TYPE x_lag_seconds gauge\n# UNIT x_lag_seconds seconds\n\
                    x_lag_seconds{machine=\"a\"} 1.5\n# HELP x_h H.\n# TYPE x_h histogram\n\
                    x_h_sum 0.0\nx_h_count 0\nx_h_bucket{le=\"+Inf\"} 0\n# HELP x_u U.\n\
                    # TYPE x_u unknown\nx_u 1\n# EOF\n";
        let text = openmetrics_to_text(open);
        assert!(!text.contains("# UNIT") && !text.contains("# EOF"), "{text}");
        assert!(text.contains("# TYPE x_lag_seconds gauge\nx_lag_seconds{machine=\"a\"} 1.5\n"));
        assert!(text.contains("# TYPE x_h histogram\nx_h_sum 0.0\n"));
        assert!(text.contains("# HELP x_u U.\n# TYPE x_u untyped\nx_u 1\n"));
    }

    #[test]
    fn infinite_values_are_spelled_as_the_format_requires() {
        let open = "# HELP e E.\n# TYPE e gauge\ne inf\ne{x=\"a inf\"} -inf\ne{x=\"inf\"} NaN\n";
        let text = openmetrics_to_text(open);
        assert!(text.ends_with("e +Inf\ne{x=\"a inf\"} -Inf\ne{x=\"inf\"} NaN\n"), "{text}");
    }

    #[test]
    fn a_counter_already_ending_in_total_and_a_help_without_type_are_kept() {
        let open = "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n# HELP b B.\nb 2\n";
        assert_eq!(openmetrics_to_text(open), open);
    }

    #[test]
    fn the_daemon_metrics_encode_with_every_counter_suffixed() {
        let text = encode(&Metrics::new()).unwrap();
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            if line.ends_with(" counter") {
                assert!(line.contains("_total counter"), "{line}");
            }
        }
        assert!(text.contains("# TYPE linegate_fsyncs_total counter\n"), "{text}");
        assert!(text.ends_with('\n'));
    }
}
