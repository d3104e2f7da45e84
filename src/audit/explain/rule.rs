//! The rule an alert was decided by, as the configuration gives it for the alert's machine: its
//! metric, threshold with unit (a zone threshold with its ISO class), window and count, and for
//! an envelope-indicator rule the bearing defect it points at.

use serde::Serialize;

use crate::config::assets::IsoClass;
use crate::config::{Config, Threshold};
use crate::event::features::{Feature, MeasureUnit};
use crate::event::{ClockState, Quality};
use crate::features::Defect;
use crate::rule::{Params, RuleParams};

use super::number::{exact, sig, span, with_unit};

/// The rule for one machine, as `explain` shows it.
///
/// A measurement rule's. A composite rule (`all_of`, `sequence`; docs/contracts.md section 4)
/// has none: its alert is shown by `super::composite`, its line and one line per member alert,
/// each with its member rule's line from [`rule_for`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleLine {
    pub name: String,
    pub metric: Feature,
    /// The unit of the threshold; `"1"` for a dimensionless measurement.
    pub unit: MeasureUnit,
    /// The machine's threshold in `unit`; null when it never resolves (no event of the machine
    /// counts: a zone threshold for a machine without an ISO class).
    pub threshold: Option<f64>,
    /// As configured: `0.5`, `zone-C`.
    pub threshold_written: String,
    /// For a zone threshold that resolves: the zone and the machine's ISO class.
    pub zone: Option<ZoneNote>,
    pub window_ms: i64,
    pub count: u32,
    pub count_quality: Vec<Quality>,
    pub count_clock: Vec<ClockState>,
    /// The version of the rule in this configuration (the alert's own is in its records).
    pub rule_version: String,
    /// For an envelope-indicator rule on a machine with a bearing and a shaft speed: the defect
    /// frequency the indicator looks at.
    pub defect: Option<DefectLine>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ZoneNote {
    /// `C`.
    pub zone: String,
    /// `group 2 rigid`.
    pub class: String,
}

/// `inner race: 5.415 × 29.95 Hz = 162.2 Hz`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DefectLine {
    /// `bpfi`.
    pub defect: &'static str,
    /// `inner race`.
    pub part: &'static str,
    pub order: f64,
    pub shaft_hz: f64,
    pub frequency_hz: f64,
}

/// A rule found for an alert: what `explain` shows, and the parameters the rule core judges
/// events with.
#[derive(Debug, Clone)]
pub struct Rule {
    pub line: RuleLine,
    pub params: RuleParams,
    /// The machine's ISO class, for the zone of a velocity.
    pub iso: Option<IsoClass>,
}

/// The rule named `name` in `config`, for machine `machine`; `None` when the configuration has
/// no rule of that name (it was renamed or removed since the alert was decided).
///
/// The one place a rule is looked up by the name an alert record carries: with several rules
/// (`[[rule]]`) this finds the one of that name among them.
pub fn rule_for(config: &Config, name: &str, machine: &str) -> Option<Rule> {
    let r = config.rule_named(name)?;
    let written = r.threshold_for(machine);
    let threshold = config.rule_threshold_for(r, machine);
    let asset = config.machines.get(machine);
    let zone = match written {
        Threshold::Zone(z) => asset
            .and_then(|a| a.iso)
            .map(|iso| ZoneNote { zone: z.as_str().to_owned(), class: iso.describe() }),
        Threshold::Value(_) => None,
    };
    let defect = defect_of(r.metric).and_then(|d| {
        let (bearing, shaft_hz) = asset.and_then(|a| a.bearing.zip(a.shaft_hz()))?;
        let o = &bearing.orders;
        let order = match d {
            Defect::Bpfo => o.bpfo,
            Defect::Bpfi => o.bpfi,
            Defect::Bsf => o.bsf,
            Defect::Ftf => o.ftf,
        };
        Some(DefectLine {
            defect: d.name(),
            part: d.part(),
            order,
            shaft_hz,
            frequency_hz: order * shaft_hz,
        })
    });
    Some(Rule {
        line: RuleLine {
            name: r.name.clone(),
            metric: r.metric,
            unit: r.unit,
            threshold,
            threshold_written: written.to_string(),
            zone,
            window_ms: r.window_ms,
            count: r.count,
            count_quality: r.count_quality.clone(),
            count_clock: r.count_clock.clone(),
            rule_version: crate::config::rule_version::rule_version_of(config, r),
            defect,
        },
        params: Params::from_config(config).rules.into_iter().find(|p| p.name == name)?,
        iso: asset.and_then(|a| a.iso),
    })
}

/// The defect an envelope indicator names.
fn defect_of(f: Feature) -> Option<Defect> {
    match f {
        Feature::EnvBpfo => Some(Defect::Bpfo),
        Feature::EnvBpfi => Some(Defect::Bpfi),
        Feature::EnvBsf => Some(Defect::Bsf),
        Feature::EnvFtf => Some(Defect::Ftf),
        _ => None,
    }
}

impl RuleLine {
    /// The threshold in words: `0.5 g`, `4.5 mm/s (zone C, group 2 rigid)`, `3` for a
    /// dimensionless one; `never reached (zone-C does not resolve for this machine)`.
    pub fn threshold_text(&self) -> String {
        let Some(t) = self.threshold else {
            return format!(
                "never reached ({} does not resolve for this machine: no ISO class)",
                self.threshold_written
            );
        };
        let text = with_unit(exact(t), self.unit);
        match &self.zone {
            Some(z) => format!("{text} (zone {}, {})", z.zone, z.class),
            None => text,
        }
    }

    /// `≥ 0.5 g` with the metric: `accel_rms ≥ 0.5 g`.
    pub fn condition(&self) -> String {
        format!("{} ≥ {}", self.metric, self.threshold_text())
    }

    /// `rule high-vibration (version …): accel_rms ≥ 0.5 g, 3 events within 2 min`.
    pub fn sentence(&self) -> String {
        format!(
            "rule {} (version {}): {}, {} events within {}",
            self.name,
            self.rule_version,
            self.condition(),
            self.count,
            span(self.window_ms)
        )
    }
}

impl DefectLine {
    /// `inner race: 5.415 × 29.95 Hz = 162.2 Hz`.
    pub fn text(&self) -> String {
        format!(
            "{}: {} × {} Hz = {} Hz",
            self.part,
            sig(self.order, 4),
            sig(self.shaft_hz, 4),
            sig(self.frequency_hz, 4)
        )
    }
}
