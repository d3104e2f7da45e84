//! For an alert on an envelope indicator (`env_bpfo`, `env_bpfi`, `env_bsf`, `env_ftf`), the
//! envelope peaks behind each evidence event: the frame's raw samples are taken from the demo's
//! trace (the samples the gateway cut the frame from), their features computed again with the
//! machine's parameters (`linegate::features`, as the frame cutter does), and the indicator's
//! defect frequency, peak, floor and ratio printed, with whether the ratio is the event's.

use crate::config::MachineAsset;
use crate::decide::machine_features;
use crate::features::{AccelUnit, Bearing, Defect, Extractor, Indicator};
use crate::rule::alert::EvidenceItem;

/// The defect an indicator's feature name points at (`env_bpfi`: the inner race).
pub fn defect_of(metric: &str) -> Option<Defect> {
    Defect::ALL.into_iter().find(|d| d.feature() == metric)
}

/// The samples (in g) of `sensor`'s frame starting at `from_ms`, from the trace's samples lines,
/// and their rate.
pub fn frame_samples(lines: &[String], sensor: &str, from_ms: i64) -> Option<(Vec<f64>, f64)> {
    let mut out = Vec::new();
    let mut rate = None;
    for line in lines.iter().filter(|l| l.contains("\"kind\":\"samples\"")) {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        if v["sensor"] != sensor || v["unit"] != "g" {
            continue;
        }
        let (t0, r) = (v["t0_ms"].as_i64()?, v["rate_hz"].as_f64()?);
        for (i, x) in v["data"].as_array()?.iter().enumerate() {
            let t = t0 as f64 + i as f64 * 1000.0 / r;
            if (t / 1000.0).floor() as i64 * 1000 == from_ms {
                out.push(x.as_f64()?);
                rate = Some(r);
            }
        }
    }
    Some((out, rate?))
}

/// One line per evidence item: its indicator computed again from its frame's samples.
pub fn evidence_lines(
    lines: &[String],
    asset: &MachineAsset,
    defect: Defect,
    evidence: &[EvidenceItem],
) -> Vec<String> {
    let mut ex = Extractor::new();
    let features = machine_features(asset);
    evidence
        .iter()
        .map(|e| {
            let Some(samples) = e.samples else {
                return format!("  {}: no raw samples", e.event_id);
            };
            let found = frame_samples(lines, &e.sensor, samples.from_ms);
            let Some((frame, rate)) = found.filter(|(f, _)| !f.is_empty()) else {
                return format!("  {}: its frame's samples are not in the trace", e.event_id);
            };
            let params = features.params(AccelUnit::G, rate);
            let computed = ex.extract(&frame, &params).ok();
            let indicator =
                computed.and_then(|f| f.envelope).and_then(|env| env.get(defect).copied());
            match indicator.zip(features.bearing) {
                Some((i, bearing)) => describe(&e.event_id, &i, &bearing, e.value),
                None => {
                    format!("  {}: no {} indicator for this frame", e.event_id, defect.feature())
                }
            }
        })
        .collect()
}

/// `c-de.2: env_bpfi 13.2 = peak 12.451 (m/s²)² at 162 Hz / floor 0.943 (m/s²)²; inner race
/// 5.4152 × 29.95 Hz = 162.2 Hz; as the event`.
fn describe(event_id: &str, i: &Indicator, bearing: &Bearing, event_value: f64) -> String {
    let order = bearing.orders.each().into_iter().find(|(d, _)| *d == i.defect).map(|(_, o)| o);
    let same = if i.value == event_value { "as the event" } else { "NOT the event's value" };
    format!(
        "  {event_id}: {} {:.1} = peak {:.3} (m/s²)² at {:.0} Hz / floor {:.3} (m/s²)²; {} {} × \
         {:.2} Hz = {:.1} Hz; {same}",
        i.defect.feature(),
        i.value,
        i.peak,
        i.peak_hz,
        i.floor,
        i.defect.part(),
        order.unwrap_or(f64::NAN),
        bearing.shaft_hz,
        i.defect_hz,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indicators_name_their_defect() {
        assert_eq!(defect_of("env_bpfi"), Some(Defect::Bpfi));
        assert_eq!(defect_of("env_ftf"), Some(Defect::Ftf));
        assert_eq!(defect_of("accel_rms"), None);
    }

    #[test]
    fn a_frame_is_gathered_across_records_of_its_sensor_only() {
        let line = |sensor: &str, t0: i64, data: &str| {
            format!(
                "{{\"at\":1,\"kind\":\"samples\",\"machine\":\"m\",\"sensor\":\"{sensor}\",\
                 \"t0_ms\":{t0},\"rate_hz\":4,\"unit\":\"g\",\"data\":[{data}]}}"
            )
        };
        let lines = vec![
            line("s", 500, "1,2,3"),
            line("other", 1000, "9,9"),
            line("s", 1250, "4,5,6"),
            "{\"at\":2,\"kind\":\"tick\"}".to_owned(),
        ];
        // Samples at 500, 750 | 1000, 1250, 1500, 1750 | 2000 ms.
        assert_eq!(frame_samples(&lines, "s", 1000), Some((vec![3.0, 4.0, 5.0, 6.0], 4.0)));
        assert_eq!(frame_samples(&lines, "s", 0), Some((vec![1.0, 2.0], 4.0)));
        assert_eq!(frame_samples(&lines, "s", 5000), None);
    }
}
