#!/usr/bin/env python3
"""Helpers of benches/peers.sh (standard library only).

    report.py time TIME_V_FILE [STATS_JSON]       -> "user sys wall peak_rss_kb" of one run
    report.py check ALERTS.jsonl INCIDENTS.csv    -> compares a peer's incidents with linegate's
    report.py summary RUNS.tsv LINES_SMALL LINES_LARGE
"""
import json
import statistics
import sys


def parse_time(path, stats=None):
    """`/usr/bin/time -v` output -> user s, sys s, wall s, peak RSS kB. With a flink_rule.py
    --stats file, the peak RSS is the Python process's plus the JVM's (time's own figure is the
    larger of the two)."""
    f = {}
    for line in open(path):
        key, _, val = line.strip().rpartition(": ")
        f[key] = val
    wall = 0.0
    for part in f["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":"):
        wall = wall * 60 + float(part)
    rss = int(f["Maximum resident set size (kbytes)"])
    if stats:
        s = json.load(open(stats))
        rss = s["jvm_peak_rss_kb"] + s["python_peak_rss_kb"]
    print(f'{float(f["User time (seconds)"]):.2f} {float(f["System time (seconds)"]):.2f} '
          f"{wall:.2f} {rss}")


def check(alerts_path, incidents_path):
    """linegate's incidents are the last record of each alert_id that was not superseded
    (docs/contracts.md section 6): (machine, onset_ms, end_ms), end_ms null while open. A peer
    line is machine,onset_ms,last_ms,end_ms. An incident still open in linegate at the end of
    the trace matches a peer's on (machine, onset_ms): the peers close every incident at the end
    of their input (Flink's final watermark), linegate only once its watermark has passed."""
    last = {}
    for line in open(alerts_path):
        a = json.loads(line)
        if a["alert_id"] not in last or a["revision"] > last[a["alert_id"]]["revision"]:
            last[a["alert_id"]] = a
    lg = {}
    for a in last.values():
        if a["kind"] != "supersede":
            lg[(a["machine"], a["onset_ms"])] = a["end_ms"]
    peer = {}
    for line in open(incidents_path):
        if line.strip():
            m, onset, _last, end = line.strip().split(",")
            peer[(m, int(onset))] = int(end)
    same = [k for k in lg if k in peer and lg[k] == peer[k]]
    open_at_end = [k for k in lg if k in peer and lg[k] is None]
    other_end = [k for k in lg if k in peer and lg[k] is not None and lg[k] != peer[k]]
    only_lg = sorted(k for k in lg if k not in peer)
    only_peer = sorted(k for k in peer if k not in lg)
    ok = not (other_end or only_lg or only_peer)
    print(f"{'SAME' if ok else 'DIFFERENT'}: linegate {len(lg)} incidents, peer {len(peer)}; "
          f"same onset and end {len(same)}, same onset and open in linegate at the end of the "
          f"trace {len(open_at_end)}, other end {len(other_end)}, only linegate {len(only_lg)} "
          f"{only_lg[:3]}, only peer {len(only_peer)} {only_peer[:3]}")
    return 0 if ok else 1


def summary(runs_path, lines_small, lines_large):
    """Medians over the runs. Steady state: (lines_large - lines_small) / (cpu_large -
    cpu_small) of a small run and the large run after it (start-up cancels out), then the median
    over those pairs. linegate ran before every peer run, so it has the most runs."""
    lines_small, lines_large = int(lines_small), int(lines_large)
    runs = {}
    for line in open(runs_path):
        rep, trace, engine, form, par, user, sys_, wall, rss = line.split()
        key = (engine, form, par)
        runs.setdefault(key, {}).setdefault(trace, []).append(
            (float(user) + float(sys_), float(wall), int(rss)))

    def med(xs):
        return statistics.median(xs) if xs else float("nan")

    rows = []
    for key, by_trace in runs.items():
        # The i-th small run and the i-th large run were taken one after the other.
        s, l_ = by_trace.get("small", []), by_trace.get("large", [])
        steady = [(lines_large - lines_small) / (b[0] - a[0])
                  for a, b in zip(s, l_) if b[0] > a[0]]
        rows.append((key, [med([v[i] for v in s]) for i in range(3)],
                     [med([v[i] for v in l_]) for i in range(3)], med(steady), len(l_)))
    lg = next(r[3] for r in rows if r[0][0] == "linegate")
    print(f"small trace {lines_small} lines, large trace {lines_large} lines; medians")
    print("| engine | formulation | parallelism | CPU s small / large | wall s small / large "
          "| peak RSS MB small / large | whole-process lines/CPU-s (large) "
          "| steady-state lines/CPU-s | linegate / peer (steady) | runs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (engine, form, par), s, l_, steady, n in rows:
        ratio = "—" if engine == "linegate" else f"{lg / steady:.1f}×"
        print(f"| {engine} | {form} | {par} | {s[0]:.2f} / {l_[0]:.2f} | {s[1]:.2f} / {l_[1]:.2f} "
              f"| {s[2] / 1024:.0f} / {l_[2] / 1024:.0f} | {lines_large / l_[0]:,.0f} "
              f"| {steady:,.0f} | {ratio} | {n} |")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "time":
        parse_time(*sys.argv[2:])
    elif cmd == "check":
        sys.exit(check(*sys.argv[2:]))
    elif cmd == "summary":
        summary(*sys.argv[2:])
    else:
        sys.exit(__doc__)
