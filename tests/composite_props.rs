//! Property tests of the composite rule core (docs/contracts.md section 4, "Composite rules")
//! against a brute-force reference: member incidents grow and merge as a member rule's do, in any
//! order within allowed lateness, and the composite incidents the records end with are those the
//! definition gives from the members' final incidents, evaluated instant by instant.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use linegate::event::{ClockEvidence, Event, Metric, Quality, Unit};
use linegate::rule::alert::AssetTags;
use linegate::rule::alert::{AlertKind, EvidenceItem};
use linegate::rule::composite::{
    Combine, CompositeBook, CompositeRecord, Ctx, MemberIncident, Spec,
};
use linegate::rule::incidents::{self, IncidentBook};
use proptest::prelude::*;

const MEMBERS: [&str; 3] = ["A", "B", "C"];

/// A member incident as the reference sees it: `[onset, end)` and the alert naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Span {
    alert_id: String,
    onset: i64,
    end: i64,
}

/// A cited member: rule, alert, onset, evidence event ids.
type CitedRef = (String, String, i64, Vec<String>);

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Final {
    onset: i64,
    end: Option<i64>,
    cited: Vec<CitedRef>,
}

/// The evidence item of a high event `event_id` at `ts_ms`.
fn item(event_id: String, ts_ms: i64) -> EvidenceItem {
    let e = Event {
        event_id,
        machine: "m".into(),
        sensor: "s0".into(),
        seq: 0,
        ts_ms,
        clock: ClockEvidence::UNKNOWN,
        metric: Metric::AccelRms,
        value: 0.9,
        unit: Unit::G,
        schema: 1,
        quality: Quality::Good,
        samples: None,
        features: None,
    };
    EvidenceItem::of(&e)
}

/// The evidence a member incident has: a function of its onset, as a real member's is of the
/// events before it (two events on every third onset, so that lengths differ).
fn evidence(rule: &str, onset: i64) -> Vec<Arc<EvidenceItem>> {
    let item = |id: String, ts: i64| Arc::new(item(id, ts));
    let mut ev = vec![item(format!("{rule}@{onset}"), onset)];
    if onset.rem_euclid(3) == 0 {
        ev.insert(0, item(format!("{rule}@{onset}-1"), onset - 1));
    }
    ev
}

/// A member rule's incidents on one machine, grown as a rule grows them: an applied event at `x`
/// makes the condition true on a span starting at `x`; incidents that span overlaps or touches
/// merge into one, named by the earliest of them (its onset at creation names a new one).
#[derive(Debug, Default)]
struct Member {
    incidents: BTreeMap<i64, Span>,
}

impl Member {
    /// Adds `[x, x + len)`; returns the incident that holds it now.
    fn hold(&mut self, rule: &str, x: i64, len: i64) -> Span {
        let (mut onset, mut end) = (x, x + len);
        let touched: Vec<i64> = self
            .incidents
            .values()
            .filter(|s| s.onset <= end && s.end >= onset)
            .map(|s| s.onset)
            .collect();
        let mut alert_id = None;
        for k in touched {
            let s = self.incidents.remove(&k).unwrap();
            onset = onset.min(s.onset);
            end = end.max(s.end);
            alert_id = alert_id.or(Some(s.alert_id));
        }
        let alert_id = alert_id.unwrap_or_else(|| format!("gw/{rule}/m/{onset}"));
        let span = Span { alert_id, onset, end };
        self.incidents.insert(onset, span.clone());
        span
    }
}

fn state(rule: &str, s: &Span) -> MemberIncident {
    MemberIncident {
        alert_id: s.alert_id.clone(),
        onset: s.onset,
        end: s.end,
        evidence: evidence(rule, s.onset),
    }
}

/// One case: the rule, each member's spans (x, len) in arrival order across members, the
/// allowed lateness and the watermark's bound.
#[derive(Debug, Clone)]
struct Case {
    combine: Combine,
    n_members: usize,
    window: i64,
    /// (member index, x, len), in arrival order.
    arrivals: Vec<(usize, i64, i64)>,
    allowed_lateness: i64,
    bound: i64,
    /// Give the member's every incident after each arrival, not only the one that changed.
    whole_book: bool,
    early: bool,
}

impl Case {
    fn spec(&self) -> Spec {
        let names: Vec<String> = MEMBERS[..self.n_members].iter().map(|s| s.to_string()).collect();
        match self.combine {
            Combine::AllOf => Spec::all_of(names, self.window).unwrap(),
            Combine::Sequence => {
                Spec::sequence(names[0].clone(), names[1].clone(), self.window).unwrap()
            }
        }
    }
}

fn case() -> impl Strategy<Value = Case> {
    (any::<bool>(), 2usize..=3, 2i64..30).prop_flat_map(|(seq, n, window)| {
        let n_members = if seq { 2 } else { n };
        let span = (0..n_members, 0i64..160, 1i64..12);
        (
            prop::collection::vec(span, 1..40).prop_shuffle(),
            0i64..60,
            0i64..40,
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(move |(arrivals, allowed_lateness, bound, whole_book, early)| Case {
                combine: if seq { Combine::Sequence } else { Combine::AllOf },
                n_members,
                window,
                arrivals,
                allowed_lateness,
                bound,
                whole_book,
                early,
            })
    })
}

/// Runs the case through the core. The watermark is `max x seen - bound`, held back so that
/// every span still to come lies within allowed lateness (as the gateway applies only those);
/// after the last arrival it moves far ahead and everything closes. Returns the records and the
/// members' final incidents.
fn run(c: &Case) -> (Vec<CompositeRecord>, Vec<Member>) {
    let spec = c.spec();
    let mut members: Vec<Member> = (0..c.n_members).map(|_| Member::default()).collect();
    let mut book = CompositeBook::default();
    let mut out = Vec::new();
    let (mut wm, mut max_x) = (i64::MIN, i64::MIN);
    for (k, &(m, x, len)) in c.arrivals.iter().enumerate() {
        let rule = MEMBERS[m];
        let span = members[m].hold(rule, x, len);
        let states: Vec<MemberIncident> = if c.whole_book {
            members[m].incidents.values().map(|s| state(rule, s)).collect()
        } else {
            vec![state(rule, &span)]
        };
        let id = format!("ev{k}");
        let ctx = Ctx {
            gateway: "gw",
            rule: "combo",
            machine: "m",
            early: c.early,
            wm,
            now: k as i64,
            caused_by: Some(&id),
        };
        book.apply(&spec, rule, states, &ctx, &mut out).unwrap();
        max_x = max_x.max(x);
        let next_min = c.arrivals[k + 1..].iter().map(|a| a.1).min();
        let mut next_wm = max_x - c.bound;
        if let Some(next) = next_min {
            next_wm = next_wm.min(next + c.allowed_lateness);
        }
        wm = wm.max(next_wm);
        let ctx = Ctx { wm, caused_by: None, ..ctx };
        book.advance(&spec, &ctx, c.allowed_lateness, &mut out);
        book.check().unwrap();
    }
    let ctx = Ctx {
        gateway: "gw",
        rule: "combo",
        machine: "m",
        early: c.early,
        wm: 10_000,
        now: 1_000_000,
        caused_by: None,
    };
    book.advance(&spec, &ctx, c.allowed_lateness, &mut out);
    (out, members)
}

/// The definition, instant by instant over whole milliseconds (every bound is one, so the
/// condition is constant from one to the next).
fn reference(c: &Case, members: &[Member]) -> Vec<Final> {
    let spans: Vec<Vec<(Span, Vec<String>)>> = (members.iter().zip(MEMBERS))
        .map(|(m, rule)| {
            let ids =
                |s: &Span| evidence(rule, s.onset).iter().map(|e| e.event_id.to_string()).collect();
            m.incidents.values().map(|s| (s.clone(), ids(s))).collect()
        })
        .collect();
    composite_reference(c.combine, c.window, &spans, -100..400)
}

/// The same over members' incidents with their evidence ids, instant by instant over `line`.
fn composite_reference(
    combine: Combine,
    w: i64,
    members: &[Vec<(Span, Vec<String>)>],
    line: std::ops::Range<i64>,
) -> Vec<Final> {
    let spans: Vec<Vec<&Span>> = members.iter().map(|m| m.iter().map(|x| &x.0).collect()).collect();
    let holds = |m: usize, k: i64| spans[m].iter().any(|s| s.onset <= k && k < s.end);
    // Held at some instant of (τ - W, τ]: of the cells [k, k + 1), those with τ - W <= k <= τ.
    let recent = |m: usize, tau: i64| (tau - w..=tau).any(|k| holds(m, k));
    let cond = |tau: i64| match combine {
        Combine::AllOf => (0..members.len()).all(|m| recent(m, tau)),
        Combine::Sequence => {
            let mut t = tau;
            while holds(1, t) {
                if recent(0, t) {
                    return true;
                }
                t -= 1;
            }
            false
        }
    };
    let cite = |q: i64| -> Vec<CitedRef> {
        let mut out = Vec::new();
        for (m, rule) in MEMBERS[..members.len()].iter().enumerate() {
            for (s, ids) in &members[m] {
                let cited = if combine == Combine::Sequence && m == 1 {
                    s.onset <= q && q < s.end
                } else {
                    (q - w..=q).any(|k| s.onset <= k && k < s.end)
                };
                if cited {
                    out.push((rule.to_string(), s.alert_id.clone(), s.onset, ids.clone()));
                }
            }
        }
        out
    };
    let mut out = Vec::new();
    let mut onset = None;
    for tau in line {
        match (onset, cond(tau)) {
            (None, true) => onset = Some(tau),
            (Some(q), false) => {
                out.push(Final { onset: q, end: Some(tau), cited: cite(q) });
                onset = None;
            }
            _ => {}
        }
    }
    assert!(onset.is_none(), "the condition holds past the end of the time line");
    out
}

/// The truth of each alert: its highest revision; superseded alerts are left out.
fn finals(records: &[CompositeRecord]) -> Vec<Final> {
    let mut last: BTreeMap<&str, &CompositeRecord> = BTreeMap::new();
    for r in records {
        let e = last.entry(&r.alert_id).or_insert(r);
        if r.revision > e.revision {
            *e = r;
        }
    }
    let mut out: Vec<Final> = last
        .values()
        .filter(|r| r.kind != AlertKind::Supersede)
        .map(|r| Final {
            onset: r.onset_ms,
            end: r.end_ms,
            cited: r
                .members
                .iter()
                .map(|m| {
                    let ids = m.evidence.iter().map(|e| e.event_id.to_string()).collect();
                    (m.rule.clone(), m.alert_id.clone(), m.onset_ms, ids)
                })
                .collect(),
        })
        .collect();
    out.sort();
    out
}

/// Revisions of every alert are 0, 1, 2, … with `open` first; an alert's onset never moves
/// later; nothing follows a `supersede`, and a superseded alert names one that was published.
fn check_records(records: &[CompositeRecord]) {
    let mut next: BTreeMap<&str, (u32, i64, bool)> = BTreeMap::new();
    for r in records {
        let (n, onset, gone) = next.entry(&r.alert_id).or_insert((0, r.onset_ms, false));
        assert_eq!(r.revision, *n, "revision order of {}", r.alert_id);
        assert_eq!(r.kind == AlertKind::Open, r.revision == 0, "open is revision 0: {r:?}");
        assert!(r.onset_ms <= *onset, "the onset of {} moved later: {r:?}", r.alert_id);
        assert!(!*gone, "a record after the supersede of {}", r.alert_id);
        *n += 1;
        *onset = r.onset_ms;
        *gone = r.kind == AlertKind::Supersede;
        if let Some(by) = &r.superseded_by {
            assert!(
                next.contains_key(by.as_str()),
                "{} superseded by unpublished {by}",
                r.alert_id
            );
        }
    }
}

fn check(c: &Case) -> Result<(), TestCaseError> {
    let (records, members) = run(c);
    check_records(&records);
    prop_assert_eq!(finals(&records), reference(c, &members));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn any_order_within_lateness_gives_the_reference_incidents(c in case()) {
        check(&c)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(50))]
    /// Guards the generator: most cases of each kind must make composite incidents, or the main
    /// property says little.
    #[test]
    fn generator_makes_composite_incidents(cases in prop::collection::vec(case(), 30)) {
        let with = cases.iter().filter(|c| !reference(c, &run(c).1).is_empty()).count();
        prop_assert!(with >= 12, "only {with} of 30 cases have composite incidents");
    }
}

/// An `all_of` of A and B within `window`, the arrivals in this order, the watermark bound 0.
fn all_of_case(window: i64, allowed_lateness: i64, arrivals: &[(usize, i64, i64)]) -> Vec<Case> {
    [false, true]
        .map(|whole_book| Case {
            combine: Combine::AllOf,
            n_members: 2,
            window,
            arrivals: arrivals.to_vec(),
            allowed_lateness,
            bound: 0,
            whole_book,
            early: false,
        })
        .to_vec()
}

/// The book forgets member incidents a window after the floor, not at it: A's `[0, 5)` ended
/// before the horizon (12) but still reaches the composite at 12, where a late B begins.
#[test]
fn a_member_incident_ended_before_the_horizon_still_reaches_the_composite() {
    for c in all_of_case(20, 5, &[(0, 0, 5), (1, 40, 1), (1, 12, 3)]) {
        check(&c).unwrap();
        assert_eq!(reference(&c, &run(&c).1).len(), 1);
    }
}

/// The floor stays at the onset of an incident still held across the horizon: `[0, 20)` is open
/// when the horizon reaches 20, and B from 20 extends it to `[0, 40)`, onset 0 still.
#[test]
fn an_incident_held_across_the_horizon_keeps_its_onset_when_it_grows() {
    let arrivals = [(0, 0, 10), (1, 0, 10), (0, 10, 10), (0, 20, 10), (1, 20, 10)];
    for c in all_of_case(10, 0, &arrivals) {
        check(&c).unwrap();
        let (records, _) = run(&c);
        assert_eq!(
            finals(&records).iter().map(|f| (f.onset, f.end)).collect::<Vec<_>>(),
            [(0, Some(40))]
        );
    }
}

/// Events of one machine, `(ts, value)` on a coarse grid (ties and exact-window distances are
/// likely), and an arrival order.
fn events_in_any_order() -> impl Strategy<Value = (Vec<(i64, f64)>, Vec<usize>)> {
    prop::collection::vec((0i64..30, 0usize..3), 1..40).prop_flat_map(|raw| {
        let evs: Vec<(i64, f64)> =
            raw.into_iter().map(|(t, v)| (t * 20, [0.3, 0.6, 0.9][v])).collect();
        let order: Vec<usize> = (0..evs.len()).collect();
        (Just(evs), Just(order).prop_shuffle())
    })
}

/// The member rules of the end-to-end test: A counts values from 0.5, B from 0.8; both 2 events
/// within 120 ms.
const THRESHOLDS: [f64; 2] = [0.5, 0.8];

/// Real measurement rules' incident books decide the members, event by event in `order`, and
/// the composite takes in every member incident after each event; then the watermark passes
/// everything. Returns the composite records and the members' books.
fn run_with_rules(
    spec: &Spec,
    evs: &[(i64, f64)],
    order: &[usize],
    early: bool,
) -> (Vec<CompositeRecord>, Vec<IncidentBook>) {
    let asset = Arc::new(AssetTags::default());
    let mut books = vec![IncidentBook::default(), IncidentBook::default()];
    let (mut book, mut out, mut member_out) = (CompositeBook::default(), Vec::new(), Vec::new());
    fn cctx(early: bool, wm: i64, now: i64, caused_by: Option<&str>) -> Ctx<'_> {
        Ctx { gateway: "gw", rule: "combo", machine: "m", early, wm, now, caused_by }
    }
    for (now, &i) in order.iter().enumerate() {
        let (ts, value) = evs[i];
        let id = format!("m.s0.{i}");
        for (k, threshold) in THRESHOLDS.iter().enumerate() {
            if value < *threshold {
                continue;
            }
            let ctx = incidents::Ctx {
                gateway: "gw",
                rule: MEMBERS[k],
                rule_version: "v",
                machine: "m",
                asset: &asset,
                window_ms: 120,
                count: 2,
                also_max: 100,
                early: false,
                wm: i64::MIN,
                now: now as i64,
                caused_by: Some(&id),
                late: false,
            };
            books[k].add(item(id.clone(), ts), &ctx, &mut member_out);
            let states = books[k].incidents().map(MemberIncident::of);
            book.apply(
                spec,
                MEMBERS[k],
                states,
                &cctx(early, i64::MIN, now as i64, Some(&id)),
                &mut out,
            )
            .unwrap();
        }
    }
    book.advance(spec, &cctx(early, 10_000, 1_000, None), 1_000_000, &mut out);
    (out, books)
}

/// The composite of the members' incidents as the section 4 reference computes them from the
/// events, named by the alert ids the books gave them.
fn reference_with_rules(spec: &Spec, evs: &[(i64, f64)], books: &[IncidentBook]) -> Vec<Final> {
    let mut members = Vec::new();
    for (k, threshold) in THRESHOLDS.iter().enumerate() {
        let high: Vec<(i64, String)> = (evs.iter().enumerate())
            .filter(|(_, e)| e.1 >= *threshold)
            .map(|(i, e)| (e.0, format!("m.s0.{i}")))
            .collect();
        let want = support::incidents::reference("m", &high, 120, 2);
        let got: Vec<(i64, i64)> = books[k].incidents().map(|i| (i.onset, i.end)).collect();
        let want_spans: Vec<(i64, i64)> =
            want.iter().map(|i| (i.onset_ms, i.end_ms.unwrap())).collect();
        assert_eq!(got, want_spans, "member {} against the section 4 reference", MEMBERS[k]);
        let spans = (books[k].incidents().zip(want))
            .map(|(inc, f)| {
                let span = Span { alert_id: inc.alert_id.clone(), onset: inc.onset, end: inc.end };
                (span, f.evidence)
            })
            .collect();
        members.push(spans);
    }
    composite_reference(spec.combine(), spec.window_ms(), &members, -200..1500)
}

/// `sequence = [A, B]` or `all_of = [A, B]` within `window`.
fn two_members(sequence: bool, window: i64) -> Spec {
    let (a, b) = (MEMBERS[0].to_string(), MEMBERS[1].to_string());
    if sequence {
        Spec::sequence(a, b, window).unwrap()
    } else {
        Spec::all_of(vec![a, b], window).unwrap()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// End to end over real measurement rules: any arrival order of the events gives the
    /// composite incidents the definition gives from the events' section 4 incidents.
    #[test]
    fn measurement_rules_then_composite_match_the_reference_in_any_order(
        (evs, order) in events_in_any_order(),
        sequence in any::<bool>(),
        window in 1i64..200,
        early in any::<bool>(),
    ) {
        let spec = two_members(sequence, window);
        let (records, books) = run_with_rules(&spec, &evs, &order, early);
        check_records(&records);
        prop_assert_eq!(finals(&records), reference_with_rules(&spec, &evs, &books));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20))]
    /// Guards the end-to-end generator: most cases must make composite incidents.
    #[test]
    fn rules_generator_makes_composite_incidents(
        cases in prop::collection::vec((events_in_any_order(), any::<bool>(), 1i64..200), 30),
    ) {
        let with = (cases.iter())
            .filter(|((evs, order), sequence, window)| {
                let spec = two_members(*sequence, *window);
                !reference_with_rules(&spec, evs, &run_with_rules(&spec, evs, order, false).1).is_empty()
            })
            .count();
        prop_assert!(with >= 12, "only {with} of 30 cases have composite incidents");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// States no rule produces (incidents that shrink, move, are empty, or reuse another's alert
    /// id; an unknown rule; a watermark that jumps) never make the core panic, and what it holds
    /// stays well formed and survives a snapshot.
    #[test]
    fn arbitrary_member_states_never_break_the_book(
        sequence in any::<bool>(),
        window in 1i64..50,
        steps in prop::collection::vec(
            (0usize..3, 0usize..4, -20i64..200, -5i64..40, prop::option::of(0i64..300)),
            1..60,
        ),
    ) {
        let spec = two_members(sequence, window);
        let (mut book, mut out) = (CompositeBook::default(), Vec::new());
        let mut wm = i64::MIN;
        for (m, id, onset, len, advance) in steps {
            let ctx = Ctx { gateway: "gw", rule: "combo", machine: "m", early: true, wm, now: 0, caused_by: None };
            let inc = MemberIncident {
                alert_id: format!("x{id}"),
                onset,
                end: onset + len,
                evidence: evidence(MEMBERS[m], onset),
            };
            let applied = book.apply(&spec, MEMBERS[m], [inc], &ctx, &mut out);
            prop_assert_eq!(applied.is_err(), m == 2, "{:?}", applied);
            if let Some(to) = advance {
                wm = wm.max(to);
                let ctx = Ctx { wm, ..ctx };
                book.advance(&spec, &ctx, 30, &mut out);
            }
            prop_assert!(book.check().is_ok(), "{:?}", book.check());
        }
        let json = serde_json::to_string(&book).unwrap();
        let back: CompositeBook = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(back, book);
    }
}
