//! Whether an applied event counts for the rule, and if not, why (docs/contracts.md section 4):
//! the one predicate the engine decides with ([`super::Engine`]'s high events) and `linegate
//! explain` tells people with, so the two never disagree.

use super::{Reader, RuleParams};
use crate::event::features::MeasureUnit;
use crate::event::{ClockState, Event, Quality};

/// What the rule makes of one applied event, in the order it checks: the measurement, the
/// quality, the clock state, the threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Judgement {
    /// It counts: the measurement the rule read, in its unit (as the evidence shows it).
    Counts(f64, MeasureUnit),
    /// It carries neither the rule's metric as its `value` nor the feature.
    NoMeasurement,
    /// Its quality is not one the rule counts.
    Quality(Quality),
    /// Its clock state is not one the rule counts.
    Clock(ClockState),
    /// Below the machine's threshold in the rule's unit (or in a unit that does not convert to
    /// it): the measurement read, in its unit.
    Below(f64, MeasureUnit),
}

impl Judgement {
    pub fn counts(self) -> bool {
        matches!(self, Judgement::Counts(..))
    }
}

/// The judgement of `ev` under rule `p` against `threshold` (the machine's), read by `reader`.
#[inline]
pub(super) fn judge_with(p: &RuleParams, reader: Reader, threshold: f64, ev: &Event) -> Judgement {
    let Some((value, unit)) = reader.read(ev) else { return Judgement::NoMeasurement };
    if !p.count_quality.contains(&ev.quality) {
        return Judgement::Quality(ev.quality);
    }
    if !p.count_clock.contains(&ev.clock.state) {
        return Judgement::Clock(ev.clock.state);
    }
    if unit.convert(value, p.unit).is_some_and(|v| v >= threshold) {
        Judgement::Counts(value, unit)
    } else {
        Judgement::Below(value, unit)
    }
}

impl RuleParams {
    /// What the rule makes of `ev`, an applied event of machine `machine` (a too-late event is
    /// never applied, so never judged): exactly what the engine decides.
    pub fn judge(&self, machine: &str, ev: &Event) -> Judgement {
        judge_with(self, Reader::of(self), self.threshold_of(machine), ev)
    }

    /// The measurement the rule reads from `ev` and its unit: its `value` when its metric is the
    /// rule's, else the feature; `None` when it carries neither.
    pub fn measurement(&self, ev: &Event) -> Option<(f64, MeasureUnit)> {
        Reader::of(self).read(ev)
    }

    /// The threshold of machine `machine` in the rule's unit (`f64::INFINITY`: its events never
    /// count).
    pub fn machine_threshold(&self, machine: &str) -> f64 {
        self.threshold_of(machine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::features::Feature;

    fn ev(value: f64, quality: &str, clock: &str) -> Event {
        serde_json::from_value(serde_json::json!({
            "event_id": "m.s.1", "machine": "m", "sensor": "s", "seq": 1, "ts_ms": 1,
            "clock": {"state": clock, "err_ms": 2}, "metric": "accel_rms", "value": value,
            "unit": "m/s2", "schema": 1, "quality": quality
        }))
        .unwrap()
    }

    #[test]
    fn the_measurement_then_quality_then_clock_then_threshold() {
        let mut all = super::super::Params::defaults("gw");
        let p = all.rule_mut();
        p.count_clock = vec![ClockState::Synced];
        // 0.5 g is 4.903 m/s2.
        assert_eq!(
            p.judge("m", &ev(5.0, "good", "synced")),
            Judgement::Counts(5.0, MeasureUnit::Ms2)
        );
        assert_eq!(
            p.judge("m", &ev(4.9, "good", "synced")),
            Judgement::Below(4.9, MeasureUnit::Ms2)
        );
        assert_eq!(p.judge("m", &ev(5.0, "bad", "stepped")), Judgement::Quality(Quality::Bad));
        assert_eq!(
            p.judge("m", &ev(5.0, "good", "stepped")),
            Judgement::Clock(ClockState::Stepped)
        );
        p.thresholds.insert("m".into(), 0.6);
        assert!(!p.judge("m", &ev(5.0, "good", "synced")).counts(), "the machine's threshold");
        p.metric = Feature::VelocityRms;
        assert_eq!(p.judge("m", &ev(5.0, "good", "synced")), Judgement::NoMeasurement);
        assert_eq!(p.measurement(&ev(5.0, "good", "synced")), None);
    }
}
