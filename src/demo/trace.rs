//! The demo's trace, made from the CWRU trace (`fixtures/traces/cwru.jsonl`) and the inner-race
//! golden (`fixtures/traces/inner_race.jsonl`): their opening recordings — ten seconds of
//! `motor-a` (normal, outer-race fault, normal), seven of `motor-b` (inner-race faults) and five
//! of `motor-c` (normal and the 0.007 in inner-race fault of record 105), merged in `at` order —
//! played in `rounds` shifted `period_ms` apart in ingest and event time,
//! with a tick every `tick_ms` between them and for `tail_ms` after the last round, so that every
//! round is decided, its incidents opened and closed, before the next one starts. Each round
//! makes one incident per machine (cwru.toml's rule: 3 high seconds in 2 minutes, `period_ms`
//! more than 2 minutes apart). The sample values are the recording's text, unchanged; only `at`
//! and `t0_ms` move.

/// How the rounds are laid out (milliseconds of trace time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub rounds: u32,
    pub period_ms: i64,
    pub tick_ms: i64,
    pub tail_ms: i64,
}

/// The lines of the demo trace and where its rounds begin (ingest time).
#[derive(Debug, Clone, PartialEq)]
pub struct DemoTrace {
    pub lines: Vec<String>,
    pub first_at: i64,
    pub round_starts: Vec<i64>,
    pub last_at: i64,
    pub samples_records: usize,
}

/// Recordings up to this far after the first line open the CWRU trace (the next samples come
/// 200 s later).
const OPENING_MS: i64 = 60_000;

/// Builds the demo trace from the texts of its source traces (each named for errors).
pub fn build(sources: &[(&str, &str)], plan: Plan) -> Result<DemoTrace, String> {
    let mut opening = Vec::new();
    for (name, text) in sources {
        opening.extend(opening_of(name, text)?);
    }
    // In `at` order; a stable sort keeps each source's order and the sources' order at equal `at`.
    opening.sort_by_key(|&(at, _)| at);
    let (Some(&(first_at, _)), Some(&(data_end, _))) = (opening.first(), opening.last()) else {
        return Err("the source traces have no samples records".into());
    };
    let mut out = DemoTrace {
        lines: Vec::new(),
        first_at,
        round_starts: Vec::new(),
        last_at: first_at,
        samples_records: 0,
    };
    for r in 0..i64::from(plan.rounds) {
        let shift = r * plan.period_ms;
        out.round_starts.push(first_at + shift);
        for &(_, line) in &opening {
            let line = shifted(line, "\"at\":", shift)
                .and_then(|l| shifted(&l, "\"t0_ms\":", shift))
                .ok_or("a samples record without `at` or `t0_ms`")?;
            out.lines.push(line);
            out.samples_records += 1;
        }
        let until = if r + 1 < i64::from(plan.rounds) { plan.period_ms } else { plan.tail_ms };
        let mut t = data_end + plan.tick_ms;
        while t < first_at + until {
            out.lines.push(format!("{{\"at\":{},\"kind\":\"tick\"}}", t + shift));
            out.last_at = t + shift;
            t += plan.tick_ms;
        }
    }
    Ok(out)
}

/// The samples records of `text` up to `OPENING_MS` after its first, with their `at`.
fn opening_of<'a>(name: &str, text: &'a str) -> Result<Vec<(i64, &'a str)>, String> {
    let mut opening: Vec<(i64, &str)> = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = number_after(line, "\"at\":")
            .ok_or_else(|| format!("{name} line {}: no `at`", i + 1))?;
        if !line.contains("\"kind\":\"samples\"") {
            continue;
        }
        if opening.first().is_some_and(|&(first, _)| at > first + OPENING_MS) {
            break;
        }
        opening.push((at, line));
    }
    Ok(opening)
}

/// The integer right after `key` in `line`.
fn number_after(line: &str, key: &str) -> Option<i64> {
    let rest = &line[line.find(key)? + key.len()..];
    let rest = rest.trim_start();
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '-')).unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// `line` with the integer after `key` moved by `by`.
fn shifted(line: &str, key: &str, by: i64) -> Option<String> {
    let start = line.find(key)? + key.len();
    let value = number_after(line, key)?;
    let digits = line[start..].find(|c: char| c.is_ascii_digit() || c == '-')? + start;
    let end = line[digits..].find(|c: char| !(c.is_ascii_digit() || c == '-'))? + digits;
    Some(format!("{}{}{}", &line[..digits], value + by, &line[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CWRU: &str = concat!(
        "{\"at\":1000,\"kind\":\"samples\",\"machine\":\"a\",\"t0_ms\":700,\"data\":[0.5]}\n",
        "{\"at\":1250,\"kind\":\"samples\",\"machine\":\"b\",\"t0_ms\":950,\"data\":[-1]}\n",
        "{\"at\":20000,\"kind\":\"tick\"}\n",
        "{\"at\":300000,\"kind\":\"samples\",\"machine\":\"a\",\"t0_ms\":299000,\"data\":[1]}\n",
    );

    #[test]
    fn rounds_shift_at_and_t0_and_ticks_fill_the_time_between() {
        let plan = Plan { rounds: 2, period_ms: 10_000, tick_ms: 4_000, tail_ms: 6_000 };
        let t = build(&[("cwru", CWRU)], plan).unwrap();
        assert_eq!(
            t.lines,
            [
                "{\"at\":1000,\"kind\":\"samples\",\"machine\":\"a\",\"t0_ms\":700,\"data\":[0.5]}",
                "{\"at\":1250,\"kind\":\"samples\",\"machine\":\"b\",\"t0_ms\":950,\"data\":[-1]}",
                "{\"at\":5250,\"kind\":\"tick\"}",
                "{\"at\":9250,\"kind\":\"tick\"}",
                "{\"at\":11000,\"kind\":\"samples\",\"machine\":\"a\",\"t0_ms\":10700,\"data\":[0.5]}",
                "{\"at\":11250,\"kind\":\"samples\",\"machine\":\"b\",\"t0_ms\":10950,\"data\":[-1]}",
                "{\"at\":15250,\"kind\":\"tick\"}",
            ]
        );
        assert_eq!((t.first_at, t.last_at, t.samples_records), (1000, 15250, 4));
        assert_eq!(t.round_starts, [1000, 11000]);
    }

    #[test]
    fn sources_merge_in_at_order() {
        let piece =
            "{\"at\":1100,\"kind\":\"samples\",\"machine\":\"c\",\"t0_ms\":800,\"data\":[2]}\n";
        let plan = Plan { rounds: 1, period_ms: 10_000, tick_ms: 4_000, tail_ms: 1_000 };
        let t = build(&[("cwru", CWRU), ("piece", piece)], plan).unwrap();
        let machines: Vec<&str> =
            t.lines.iter().map(|l| &l[l.find("machine").unwrap() + 10..][..1]).collect();
        assert_eq!(machines, ["a", "c", "b"]);
        assert_eq!(t.samples_records, 3);
    }

    #[test]
    fn a_trace_without_samples_is_an_error() {
        let ticks = "{\"at\":1,\"kind\":\"tick\"}\n";
        let plan = Plan { rounds: 1, period_ms: 1, tick_ms: 1, tail_ms: 1 };
        assert!(build(&[("ticks", ticks)], plan).is_err());
        assert!(build(&[("x", "{\"kind\":\"tick\"}\n")], plan).unwrap_err().contains("x line 1"));
    }
}
