//! What cannot work, refused across sections (docs/contracts.md sections 4 and 12): each rule
//! against the asset table and the sources' sample rates. Each refusal names the key to change
//! and why; [`Config::warnings`] says what works only in part.
//!
//! Refused:
//! - a zone threshold for a machine named in the rule's overrides whose asset entry has no ISO
//!   class (or which has no entry);
//! - a `velocity_rms` rule with a live source of raw acceleration whose Nyquist frequency is not
//!   above its machine's velocity band top (1000 Hz): an ADXL345 on I2C (at most 1600 Hz) never
//!   gives a velocity;
//! - an `env_*` rule for a machine of a live source, or named in the rule's overrides, without
//!   `rpm`, `bearing` and `envelope_band` in its asset entry;
//! - an envelope band whose top is above the Nyquist frequency of a live source of its machine.
//!
//! Trace sources declare no rate (each `samples` line carries its own), so they are checked by
//! none of these.

use super::assets::{velocity_band, MachineAsset};
use super::frequency::show_hz;
use super::threshold::Threshold;
use super::{Config, Ctx, Result, RuleConfig, SourceConfig};
use crate::event::features::Quantity;
use crate::event::Unit;

/// A live source of raw acceleration samples: one sensor of one machine at one rate.
struct Sampler<'a> {
    machine: &'a str,
    sensor: String,
    rate_hz: f64,
    /// The key that sets the rate.
    rate_key: String,
    /// The key that names the machine.
    machine_key: String,
    /// How to sample faster, for the velocity refusal.
    faster: &'static str,
}

fn samplers(c: &Config) -> Vec<Sampler<'_>> {
    let mut out = Vec::new();
    for (i, s) in c.source.iter().enumerate() {
        let bus = match s {
            SourceConfig::I2c(b) => Some((&b.sensor, "use SPI at 3200 Hz")),
            SourceConfig::Spi(b) => Some((&b.sensor, "set rate_hz = 3200")),
            SourceConfig::Trace(_) | SourceConfig::Modbus(_) => None,
        };
        if let Some((b, faster)) = bus {
            for &axis in &b.axes {
                out.push(Sampler {
                    machine: &b.machine,
                    sensor: b.sensor_for(axis),
                    rate_hz: f64::from(b.rate.hz()),
                    rate_key: format!("source[{i}].rate_hz"),
                    machine_key: format!("source[{i}].machine"),
                    faster,
                });
            }
        }
        if let SourceConfig::Modbus(m) = s {
            // A channel in mm/s measures velocity itself: it is no sampler of acceleration.
            let accel = m.blocks.iter().flat_map(|b| &b.channels).filter(|ch| ch.unit != Unit::MmS);
            for ch in accel {
                out.push(Sampler {
                    machine: &m.machine,
                    sensor: ch.sensor.clone(),
                    rate_hz: m.poll_rate_hz,
                    rate_key: format!("source[{i}].poll_rate"),
                    machine_key: format!("source[{i}].machine"),
                    faster: "read a velocity the device measures itself (a channel with unit = \
                             \"mm/s\"), or an ADXL345 on SPI at 3200 Hz",
                });
            }
        }
    }
    out
}

impl Config {
    /// The threshold of `machine` in the rule's unit: its override or the rule's, a zone
    /// resolved from its asset entry; `None` when a zone does not resolve (its events never
    /// count).
    pub fn threshold_for(&self, machine: &str) -> Option<f64> {
        self.rule_threshold_for(&self.rule, machine)
    }

    /// What works only in part, for `check-config` to print, rule by rule: a zone threshold
    /// that resolves for some machines only, an envelope rule that some machines cannot feed,
    /// alert records above 16 KiB (`record_size.rs`).
    pub fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self.rules().flat_map(|r| self.rule_warnings(r)).collect();
        out.extend(self.record_size_warnings());
        out
    }

    fn rule_warnings(&self, r: &RuleConfig) -> Vec<String> {
        let mut out = Vec::new();
        if let Threshold::Zone(_) = r.threshold {
            let own = |m: &str| r.machines.get(m).is_some_and(|o| o.threshold.is_some());
            let (with, without): (Vec<_>, Vec<_>) =
                self.machines.iter().filter(|(m, _)| !own(m)).partition(|(_, a)| a.iso.is_some());
            let resolved: Vec<String> = with
                .iter()
                .filter_map(|(m, _)| Some(format!("{m} {} mm/s", self.rule_threshold_for(r, m)?)))
                .collect();
            let mut w = format!(
                "rule {}: threshold {} resolves only for machines with iso_group and foundation \
                 in the asset table ({}); the events of every other machine never count",
                r.name,
                r.threshold,
                list_or_none(&resolved)
            );
            if !without.is_empty() {
                let names: Vec<&str> = without.iter().map(|(m, _)| m.as_str()).collect();
                w.push_str(&format!(", among them {} (no ISO class)", names.join(", ")));
            }
            out.push(w);
        }
        if r.metric.is_envelope() {
            let able: Vec<String> = self
                .machines
                .iter()
                .filter(|(_, a)| a.envelope_missing().is_empty())
                .map(|(m, _)| m.clone())
                .collect();
            out.push(format!(
                "rule {} reads {}: only machines with rpm, bearing and envelope_band in the asset \
                 table compute it from their samples ({}); the events of other machines count \
                 only where they carry it in their features",
                r.name,
                r.metric,
                list_or_none(&able)
            ));
        }
        out
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

impl Ctx<'_> {
    /// The refusals of the module documentation, in that order.
    /// Every rule's, rule by rule; errors name the rule's keys (`rule[1] (inner-race).machines.x`).
    pub(super) fn check_feasible(&self, c: &Config) -> Result<()> {
        let samplers = samplers(c);
        for r in c.rules() {
            self.check_zone_overrides(c, r)?;
            if r.metric.quantity() == Quantity::Velocity {
                self.check_velocity_rates(c, r, &samplers)?;
            }
            if r.metric.is_envelope() {
                self.check_envelope_inputs(c, r, &samplers)?;
            }
        }
        self.check_envelope_bands(c, &samplers)
    }

    fn check_zone_overrides(&self, c: &Config, r: &RuleConfig) -> Result<()> {
        for (m, over) in &r.machines {
            let t = over.threshold.unwrap_or(r.threshold);
            if t.resolve(c.machines.get(m)).is_some() {
                continue;
            }
            let key = match over.threshold {
                Some(_) => c.rule_key(r, &format!("machines.{m}.threshold")),
                None => c.rule_key(r, &format!("machines.{m}")),
            };
            let how = match c.machines.get(m) {
                None => format!("add [machines.{m}] with iso_group and foundation"),
                Some(_) => format!("give machines.{m}.iso_group and machines.{m}.foundation"),
            };
            return Err(self.err(
                key,
                format!(
                    "machine {m}'s threshold {t} is an ISO 20816-3 zone boundary, which needs the \
                     machine's group and foundation: {how}"
                ),
            ));
        }
        Ok(())
    }

    fn check_velocity_rates(
        &self,
        c: &Config,
        r: &RuleConfig,
        samplers: &[Sampler<'_>],
    ) -> Result<()> {
        for s in samplers {
            let band = velocity_band(c.machines.get(s.machine));
            let nyquist = s.rate_hz / 2.0;
            if nyquist > band.high_hz {
                continue;
            }
            let relation = if nyquist < band.high_hz { "is below" } else { "is not above" };
            return Err(self.err(
                &s.rate_key,
                format!(
                    "sensor {} samples at {}: Nyquist {} {relation} the ISO band's {}, so rule {} \
                     ({}) could never count it; {}",
                    s.sensor,
                    show_hz(s.rate_hz),
                    show_hz(nyquist),
                    show_hz(band.high_hz),
                    r.name,
                    r.metric,
                    s.faster
                ),
            ));
        }
        Ok(())
    }

    fn check_envelope_inputs(
        &self,
        c: &Config,
        r: &RuleConfig,
        samplers: &[Sampler<'_>],
    ) -> Result<()> {
        let named =
            r.machines.keys().map(|m| (m.as_str(), c.rule_key(r, &format!("machines.{m}"))));
        let fed = samplers.iter().map(|s| (s.machine, s.machine_key.clone()));
        for (m, key) in fed.chain(named) {
            let missing = c.machines.get(m).map_or_else(
                || vec!["rpm", "bearing", "envelope_band"],
                MachineAsset::envelope_missing,
            );
            let Some(first) = missing.first() else { continue };
            let key = match c.machines.get(m) {
                None => key,
                Some(_) => format!("machines.{m}.{first}"),
            };
            return Err(self.err(
                key,
                format!(
                    "rule {} reads {}, which machine {m} can give only with rpm, bearing and \
                     envelope_band in [machines.{m}]; missing: {}",
                    r.name,
                    r.metric,
                    missing.join(", ")
                ),
            ));
        }
        Ok(())
    }

    fn check_envelope_bands(&self, c: &Config, samplers: &[Sampler<'_>]) -> Result<()> {
        for s in samplers {
            let Some(band) = c.machines.get(s.machine).and_then(|a| a.envelope_band) else {
                continue;
            };
            let nyquist = s.rate_hz / 2.0;
            if band.high_hz <= nyquist {
                continue;
            }
            return Err(self.err(
                format!("machines.{}.envelope_band", s.machine),
                format!(
                    "the band's top {} is above the Nyquist frequency {} of sensor {} (sampled \
                     at {}, {}): choose a band that ends at or below {}",
                    show_hz(band.high_hz),
                    show_hz(nyquist),
                    s.sensor,
                    show_hz(s.rate_hz),
                    s.rate_key,
                    show_hz(nyquist)
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
