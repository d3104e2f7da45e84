//! The composite rules in the engine (docs/contracts.md section 4, composite rules): per machine,
//! one [`CompositeBook`] per composite rule, fed by the engine with the member rules' incidents
//! an event changed, advanced with the machine watermark, its records turned into alert records
//! that leave the engine with the measurement rules' (the same ledger, outbox, archive and MQTT
//! path). The books are in the machine's snapshot, so a restart neither repeats nor loses a
//! composite alert.

use std::sync::Arc;

use super::alert::{AlertRecord, AssetTags};
use super::composite::{CompositeBook, CompositeRecord, Ctx, MemberIncident, Spec};
use super::incidents::IncidentBook;
use super::{Params, RuleCount};

/// What one composite rule needs to know, from the configuration (`config/rule.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct CompositeParams {
    /// The rule's configured name, written into its alert records and part of their ids.
    pub name: String,
    /// Its fingerprint, its members' versions included (`crate::config::rule_version`).
    pub version: String,
    pub spec: Spec,
    /// Each member's index in [`Params::rules`], in the order of `spec.members()`.
    pub members: Vec<usize>,
    pub early: bool,
}

/// The machine a decision is about, and when.
pub(super) struct On<'a> {
    pub machine: &'a str,
    pub asset: &'a Arc<AssetTags>,
    pub wm: i64,
    pub now: i64,
    pub caused_by: Option<&'a str>,
}

fn ctx<'a>(p: &'a Params, c: &'a CompositeParams, on: &On<'a>) -> Ctx<'a> {
    Ctx {
        gateway: &p.gateway,
        rule: &c.name,
        machine: on.machine,
        early: c.early,
        wm: on.wm,
        now: on.now,
        caused_by: on.caused_by,
    }
}

fn emit(c: &CompositeParams, on: &On<'_>, recs: Vec<CompositeRecord>, out: &mut Vec<AlertRecord>) {
    out.extend(recs.iter().map(|r| r.to_alert_record(&c.version, Arc::clone(on.asset))));
}

/// An event at `t` was counted by the rules in `counted` on this machine (`member_books`, the
/// machine's incident books by rule index): each composite with one of them as a member takes
/// that member's incidents the event can have changed (those of `[t, t + W)` of the member's
/// window `W`, where its condition may have turned true).
pub(super) fn feed(
    p: &Params,
    books: &mut [CompositeBook],
    member_books: &[&IncidentBook],
    counted: &[RuleCount],
    t: i64,
    on: &On<'_>,
    out: &mut Vec<AlertRecord>,
) {
    for (c, book) in p.composites.iter().zip(books.iter_mut()) {
        let mut recs = Vec::new();
        for (name, &r) in c.spec.members().iter().zip(&c.members) {
            if !counted.iter().any(|rc| rc.rule == r) {
                continue;
            }
            let (Some(rule), Some(member)) = (p.rules.get(r), member_books.get(r)) else {
                continue;
            };
            let states = member.incidents_within(t, t.saturating_add(rule.window_ms));
            let cx = ctx(p, c, on);
            // Every name is a member of its own spec (`config/rule.rs` builds both).
            let _ = book.apply(&c.spec, name, states.map(MemberIncident::of), &cx, &mut recs);
        }
        emit(c, on, recs, out);
    }
}

/// The machine watermark moved (or ingest time did): what became due is published.
pub(super) fn advance(
    p: &Params,
    books: &mut [CompositeBook],
    on: &On<'_>,
    out: &mut Vec<AlertRecord>,
) {
    for (c, book) in p.composites.iter().zip(books.iter_mut()) {
        let mut recs = Vec::new();
        book.advance(&c.spec, &ctx(p, c, on), p.allowed_lateness_ms, &mut recs);
        emit(c, on, recs, out);
    }
}

/// For each composite of `p`, the book it goes on from among `old` (a snapshot's books, by the
/// names `names`): the one of its name, else a new one (which knows no member incident decided
/// before it existed).
pub(super) fn restore(
    p: &Params,
    names: &[String],
    old: Vec<CompositeBook>,
) -> Result<Vec<CompositeBook>, String> {
    let mut old: Vec<Option<CompositeBook>> = old.into_iter().map(Some).collect();
    p.composites
        .iter()
        .map(|c| {
            let book = names
                .iter()
                .position(|n| *n == c.name)
                .and_then(|j| old.get_mut(j)?.take())
                .unwrap_or_default();
            book.check().map_err(|e| format!("composite rule {}: {e}", c.name))?;
            Ok(book)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::{Engine, Params, RuleParams};
    use super::{CompositeParams, Spec};
    use crate::event::features::{Feature, Features, MeasureUnit};
    use crate::event::{ClockEvidence, Event, Metric, Quality, Unit};
    use crate::rule::alert::{AlertKind, AlertRecord};

    const T0: i64 = 1_700_000_000_000;

    /// vib (accel_rms >= 0.5 g) and env (env_bpfi >= 8), each 2 in 1 min, and both = all_of
    /// [vib, env] within 2 min.
    fn params() -> Params {
        let mut p = Params::defaults("gw");
        let vib = RuleParams {
            name: "vib".into(),
            version: "v1".into(),
            threshold: 0.5,
            window_ms: 60_000,
            count: 2,
            ..p.rule().clone()
        };
        let env = RuleParams {
            name: "env".into(),
            version: "e1".into(),
            metric: Feature::EnvBpfi,
            unit: MeasureUnit::One,
            threshold: 8.0,
            ..vib.clone()
        };
        p.rules = vec![vib, env];
        let spec = Spec::all_of(vec!["vib".into(), "env".into()], 120_000).unwrap();
        let both = CompositeParams {
            name: "both".into(),
            version: "b1".into(),
            spec,
            members: vec![0, 1],
            early: false,
        };
        p.composites = vec![both];
        p
    }

    /// Events of press-7 every 10 s from 0 to 300 s: vib high at 20 and 40 s, env at 150 and
    /// 170 s, and env's event of 130 s arriving late, after that of 180 s.
    fn events() -> Vec<(i64, Event)> {
        let ev = |s: i64, vib: f64, env: f64| Event {
            event_id: format!("press-7.s1.{s}"),
            machine: "press-7".into(),
            sensor: "s1".into(),
            seq: s as u64,
            ts_ms: T0 + s * 1000,
            clock: ClockEvidence::UNKNOWN,
            metric: Metric::AccelRms,
            value: vib,
            unit: Unit::G,
            schema: 1,
            quality: Quality::Good,
            samples: None,
            features: Some(Box::new(
                [(Feature::AccelRms, vib), (Feature::EnvBpfi, env)]
                    .into_iter()
                    .collect::<Features>(),
            )),
        };
        let mut out = Vec::new();
        for s in (0..=300).step_by(10).filter(|&s| s != 130) {
            let vib = if [20, 40].contains(&s) { 0.7 } else { 0.2 };
            let env = if [150, 170].contains(&s) { 9.0 } else { 1.1 };
            out.push((T0 + s * 1000 + 200, ev(s, vib, env)));
            if s == 180 {
                out.push((T0 + 185_200, ev(130, 0.2, 9.0)));
            }
        }
        out
    }

    fn decide(engine: &mut Engine, events: &[(i64, Event)]) -> Vec<AlertRecord> {
        let mut out = Vec::new();
        for (at, e) in events {
            engine.on_event(*at, e, &mut out);
        }
        out
    }

    #[test]
    fn member_incidents_reach_the_composite_and_a_late_event_amends_it() {
        let all = decide(&mut Engine::new(params()), &events());
        let both: Vec<(AlertKind, i64, Option<i64>, Option<&str>)> = all
            .iter()
            .filter(|a| a.rule == "both")
            .map(|a| (a.kind, a.onset_ms - T0, a.end_ms.map(|e| e - T0), a.caused_by.as_deref()))
            .collect();
        assert_eq!(
            both,
            [
                (AlertKind::Open, 170_000, None, Some("press-7.s1.180")),
                (AlertKind::Amend, 150_000, None, Some("press-7.s1.130")),
                (AlertKind::Close, 150_000, Some(200_000), Some("press-7.s1.210")),
            ]
        );
        let last = all.iter().rfind(|a| a.rule == "both").unwrap();
        let cited: Vec<(&str, i64, usize)> = last
            .members
            .iter()
            .map(|m| (m.rule.as_str(), m.onset_ms - T0, m.evidence.len()))
            .collect();
        assert_eq!(cited, [("vib", 40_000, 2), ("env", 150_000, 2)]);
        assert_eq!(last.evidence.len(), 4, "the members' evidence events, once each");
        assert_eq!(last.rule_version, "b1");
        // The open is published after the member alerts it cites opened.
        let open = all.iter().position(|a| a.rule == "both").unwrap();
        assert!(all[..open].iter().any(|a| a.rule == "env" && a.kind == AlertKind::Open));
        // A measurement rule's record cites no members.
        assert!(all.iter().filter(|a| a.rule != "both").all(|a| a.members.is_empty()));
    }

    #[test]
    fn a_restore_after_any_event_goes_on_as_if_never_stopped() {
        let evs = events();
        let whole = decide(&mut Engine::new(params()), &evs);
        for cut in 0..=evs.len() {
            let mut first = Engine::new(params());
            let mut got = decide(&mut first, &evs[..cut]);
            let mut resumed = Engine::restore(params(), &first.snapshot()).unwrap();
            got.extend(decide(&mut resumed, &evs[cut..]));
            assert_eq!(got, whole, "restored after event {cut}");
        }
    }
}
