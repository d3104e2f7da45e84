//! The composite conditions as interval arithmetic (docs/contracts.md section 4, composite
//! rules). Every set here is a sorted list of disjoint, non-touching half-open spans `[from, to)`
//! of event time; every bound is a whole millisecond.
//!
//! - A member that holds on its incidents `[a, e)` has held within `(τ - W, τ]` exactly for
//!   `τ` in `[a, e + W)`: its **recent** set `R`.
//! - `all_of`: the intersection of the members' recent sets.
//! - `sequence = [A, B]`: within each incident `[b, e)` of `B`, from the first instant of
//!   `R_A` on: `[q, e)` with `q = min([b, e) ∩ R_A)`.
//!
//! Everything before `floor` is decided and forgotten (`CompositeBook::advance`): spans are cut
//! to start at `floor` at the earliest.

/// A half-open span `[from, to)` of event time, ms.
pub(super) type Span = (i64, i64);

/// The union of `spans`, sorted, overlapping and touching spans joined, empty ones left out.
pub(super) fn union(mut spans: Vec<Span>) -> Vec<Span> {
    spans.retain(|s| s.0 < s.1);
    spans.sort_unstable();
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for (a, b) in spans {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// The intersection of two unions.
pub(super) fn intersect(x: &[Span], y: &[Span]) -> Vec<Span> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < x.len() && j < y.len() {
        let (a, b) = (x[i].0.max(y[j].0), x[i].1.min(y[j].1));
        if a < b {
            out.push((a, b));
        }
        if x[i].1 <= y[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// The recent set of a member with these incidents, from `floor` on: where it has held within
/// the last `w`.
pub(super) fn recent(incidents: impl Iterator<Item = Span>, w: i64, floor: i64) -> Vec<Span> {
    union(incidents.map(|(a, e)| (a.max(floor), e.saturating_add(w))).collect())
}

/// `all_of`: where every member's recent set holds.
pub(super) fn all_of(recents: &[Vec<Span>]) -> Vec<Span> {
    let Some((first, rest)) = recents.split_first() else { return Vec::new() };
    rest.iter().fold(first.clone(), |acc, r| intersect(&acc, r))
}

/// `sequence = [A, B]`: for each incident `[b, e)` of `B` (cut at `floor`), `[q, e)` from the
/// first instant `q` of it at which `A` has held within the window, if there is one.
pub(super) fn sequence(b: impl Iterator<Item = Span>, recent_a: &[Span], floor: i64) -> Vec<Span> {
    let mut out = Vec::new();
    for (from, to) in b {
        let from = from.max(floor);
        // The first recent span of A that ends after `from`.
        let i = recent_a.partition_point(|r| r.1 <= from);
        if let Some(r) = recent_a.get(i) {
            let q = from.max(r.0);
            if q < to {
                out.push((q, to));
            }
        }
    }
    out
}

/// Whether an incident `[a, e)` of a member is in the window `(q - w, q]` of an onset `q`: it
/// held at some instant of that window.
pub(super) fn in_window((a, e): Span, q: i64, w: i64) -> bool {
    a <= q && e > q.saturating_sub(w)
}
