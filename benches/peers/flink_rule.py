#!/usr/bin/env python3
"""linegate's rule as an Apache Flink job (PyFlink 2.x, Flink SQL only: every operator runs in the
JVM, no Python UDF), for benches/peers.sh.

    flink_rule.py TRACE --config golden.toml --out incidents.csv --formulation over|hop [-p 1|2]

Reads a trace (JSON Lines, docs/contracts.md section 8), decides docs/contracts.md section 4 on
event time and writes one line per incident: `machine,onset_ms,last_ms,end_ms` (the first and the
last high event of the incident, and the first instant after the onset at which the condition is
false). The rule's metric, unit, threshold, window W, count N, watermark bound and allowed
lateness are read from the [rule] and [time] sections of the linegate configuration.

What is the same as linegate: event time, watermark = max ts_ms - bound, dedup on `event_id`
(first arrival wins), events of the rule's metric and of quality good/uncertain whose value in the
rule's unit is >= threshold, the half-open window (three events count when t3 - t1 < W), an
incident = a maximal interval on which "N high events in (tau - W, tau]" holds. What is not:
Flink's watermark is per source subtask, not per machine and sensor, and has no idle timeout;
late rows behind the watermark are dropped by the OVER window (it has no allowed lateness), and
the HOP formulation samples the condition once a second (exact only for whole-second ts_ms).

Formulations:
  over  OVER (PARTITION BY machine ORDER BY rt ROWS BETWEEN N-1 PRECEDING AND CURRENT ROW) over
        the high events: a high event h_i with h_i - h_{i-N+1} < W makes the condition true on
        [h_i, h_{i-N+1} + W). The union of those intervals is the set where it holds; a second
        OVER (1 PRECEDING) finds where a new interval starts (an onset), a third (UNBOUNDED
        PRECEDING) labels each row with its incident's onset, and a session window (gap W) per
        (machine, onset) closes the incident once the watermark has passed it.
  hop   HOP windows of W sliding by 1 s on the high events (window TVF), COUNT(*) >= N per
        machine and window, then a SESSION window TVF (gap 1.001 s) over the qualifying
        windows joins consecutive seconds into incidents.

Allowed lateness: Flink SQL's OVER and window TVFs drop rows behind the watermark. The legacy
GROUP BY HOP takes `table.exec.emit.allow-lateness`, but only with late firing, which makes its
output an update stream that no later window accepts (Flink 2.3: "Session window doesn't support
EMIT strategy currently"; window TVFs: "doesn't support early-fire and late-fire"), so incidents
could not be formed in the JVM from it.
"""
import argparse
import os
import re
import shutil
import sys
import tomllib


def duration_ms(text):
    """linegate's human durations: "500ms", "5s", "2m", "1h"."""
    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h)\s*", text)
    if not m:
        sys.exit(f"cannot read duration {text!r}")
    return int(m.group(1)) * {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}[m.group(2)]


def interval(ms):
    """A Flink SQL interval literal of `ms` milliseconds."""
    for unit, size in (("HOUR", 3_600_000), ("MINUTE", 60_000), ("SECOND", 1000)):
        if ms % size == 0:
            n = ms // size
            return f"INTERVAL '{n}' {unit}({max(2, len(str(n)))})"
    return f"INTERVAL '{ms / 1000:.3f}' SECOND({max(2, len(str(ms // 1000)))}, 3)"


def rule_from(config_path):
    cfg = tomllib.load(open(config_path, "rb"))
    rule, time = cfg["rule"], cfg.get("time", {})
    if rule.get("overrides") or rule.get("machine"):
        sys.exit("per-machine thresholds are not expressed in this job")
    return {
        "metric": rule["metric"],
        "unit": rule.get("unit", "g"),
        "threshold": float(rule["threshold"]),
        "window_ms": duration_ms(rule.get("window", "2m")),
        "count": int(rule.get("count", 3)),
        "qualities": rule.get("quality", ["good", "uncertain"]),
        "bound_ms": duration_ms(time.get("watermark_bound", "5s")),
        "lateness_ms": duration_ms(time.get("allowed_lateness", "10m")),
        "max_future_ms": duration_ms(time.get("max_future", "5s")),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--config", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--formulation", choices=["over", "hop"], default="over")
    ap.add_argument("-p", "--parallelism", type=int, default=1)
    ap.add_argument("--explain", action="store_true", help="print the plan and exit")
    ap.add_argument("--stats", help="stop and reap the JVM at the end, write its peak RSS here")
    args = ap.parse_args()
    r = rule_from(args.config)
    if r["bound_ms"] % 1000 or r["window_ms"] % 1000 or r["lateness_ms"] % 1000:
        sys.exit("this job writes the bound, window and lateness in whole seconds")

    from pyflink.table import EnvironmentSettings, TableEnvironment

    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = t_env.get_config()
    conf.set("parallelism.default", str(args.parallelism))
    conf.set("table.local-time-zone", "UTC")
    # Ids are remembered as long as linegate remembers them at most (its horizon is the allowed
    # lateness behind the watermark); Flink's TTL is in processing time, so in a replay nothing
    # expires and the dedup state holds every id of the trace.
    conf.set("table.exec.state.ttl", f"{(r['lateness_ms'] + r['bound_ms']) // 1000} s")

    W, N = r["window_ms"], r["count"]
    to_unit = {"g": {"g": "1.0", "m/s2": "(1.0 / 9.80665)"},
               "m/s2": {"g": "9.80665", "m/s2": "1.0"},
               "mm/s": {"mm/s": "1.0"}}[r["unit"]]
    scale = " ".join(f"WHEN '{u}' THEN {f}" for u, f in to_unit.items())
    qualities = ", ".join(f"'{q}'" for q in r["qualities"])

    # The trace. Ticks carry no event: their row time is their ingest time (it passes).
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE trace (
            `at` BIGINT,
            kind STRING,
            event ROW<event_id STRING, machine STRING, ts_ms BIGINT, metric STRING,
                      `value` DOUBLE, unit STRING, quality STRING>,
            rt AS TO_TIMESTAMP_LTZ(COALESCE(event.ts_ms, `at`), 3),
            pt AS PROCTIME(),
            WATERMARK FOR rt AS rt - {interval(r['bound_ms'])}
        ) WITH (
            'connector' = 'filesystem',
            'path' = '{os.path.abspath(args.trace)}',
            'format' = 'json',
            'json.ignore-parse-errors' = 'true'
        )""")
    # Accepted events: not more than max_future ahead of their ingest time, first arrival of
    # each event_id (proctime order = arrival order; keeps the rows insert-only).
    t_env.execute_sql(f"""
        CREATE TEMPORARY VIEW accepted AS
        SELECT event_id, machine, ts_ms, metric, `value`, unit, quality, rt FROM (
            SELECT event.event_id AS event_id, event.machine AS machine, event.ts_ms AS ts_ms,
                   event.metric AS metric, event.`value` AS `value`, event.unit AS unit,
                   event.quality AS quality, rt,
                   ROW_NUMBER() OVER (PARTITION BY event.event_id ORDER BY pt ASC) AS rn
            FROM trace
            WHERE kind = 'event' AND event.ts_ms <= `at` + {r['max_future_ms']})
        WHERE rn = 1""")
    # High events (section 4): the rule's metric, counted qualities, value >= threshold.
    t_env.execute_sql(f"""
        CREATE TEMPORARY VIEW high AS
        SELECT machine, ts_ms, rt FROM accepted
        WHERE metric = '{r['metric']}' AND quality IN ({qualities})
          AND `value` * CASE unit {scale} ELSE CAST(NULL AS DOUBLE) END >= {r['threshold']!r}""")

    if args.formulation == "over":
        t_env.execute_sql(f"""
            CREATE TEMPORARY VIEW triggers AS
            SELECT machine, ts_ms, first_ms + {W} AS until_ms, rt FROM (
                SELECT machine, ts_ms, rt,
                       COUNT(*) OVER w AS n, MIN(ts_ms) OVER w AS first_ms
                FROM high
                WINDOW w AS (PARTITION BY machine ORDER BY rt
                             ROWS BETWEEN {N - 1} PRECEDING AND CURRENT ROW))
            WHERE n = {N} AND ts_ms - first_ms < {W}""")
        # until_ms never decreases along a machine's triggers, so MIN over (previous, current)
        # is the previous trigger's until_ms.
        t_env.execute_sql("""
            CREATE TEMPORARY VIEW onsets AS
            SELECT machine, ts_ms, until_ms, rt,
                   CASE WHEN n = 1 OR ts_ms > prev_until THEN ts_ms END AS onset_ms FROM (
                SELECT machine, ts_ms, until_ms, rt,
                       COUNT(*) OVER w AS n, MIN(until_ms) OVER w AS prev_until
                FROM triggers
                WINDOW w AS (PARTITION BY machine ORDER BY rt
                             ROWS BETWEEN 1 PRECEDING AND CURRENT ROW))""")
        t_env.execute_sql("""
            CREATE TEMPORARY VIEW labelled AS
            SELECT machine, ts_ms, until_ms, rt, MAX(onset_ms) OVER w AS onset_ms
            FROM onsets
            WINDOW w AS (PARTITION BY machine ORDER BY rt
                         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)""")
        incidents = f"""
            SELECT machine, onset_ms, MAX(ts_ms) AS last_ms, MAX(until_ms) AS end_ms
            FROM labelled
            GROUP BY machine, onset_ms, SESSION(rt, {interval(W)})"""
    else:
        t_env.execute_sql(f"""
            CREATE TEMPORARY VIEW qualifying AS
            SELECT machine, MAX(ts_ms) AS last_ms, window_end AS we, window_time AS wt
            FROM TABLE(HOP(TABLE high, DESCRIPTOR(rt), INTERVAL '1' SECOND, {interval(W)}))
            GROUP BY machine, window_start, window_end, window_time
            HAVING COUNT(*) >= {N}""")
        # Window [s, s + W) qualifies <=> the condition holds on [s + W - 1 s, s + W); the
        # first qualifying window's latest event is the onset, the last one's end the end.
        incidents = """
            SELECT machine, MIN(last_ms) AS onset_ms, MAX(last_ms) AS last_ms,
                   1000 * EXTRACT(EPOCH FROM MAX(we)) AS end_ms
            FROM TABLE(SESSION(TABLE qualifying PARTITION BY machine, DESCRIPTOR(wt),
                               INTERVAL '1.001' SECOND))
            GROUP BY machine, window_start, window_end"""

    out_dir = args.out + ".d"
    shutil.rmtree(out_dir, ignore_errors=True)
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE incidents (
            machine STRING, onset_ms BIGINT, last_ms BIGINT, end_ms BIGINT
        ) WITH ('connector' = 'filesystem', 'path' = '{os.path.abspath(out_dir)}',
                'format' = 'csv')""")
    if args.explain:
        print(t_env.explain_sql(f"INSERT INTO incidents {incidents}"))
        return
    t_env.execute_sql(f"INSERT INTO incidents {incidents}").wait()
    # One file for the comparison: the part files of every subtask, concatenated.
    with open(args.out, "w") as out:
        for root, _, files in sorted(os.walk(out_dir)):
            for name in sorted(files):
                if not name.startswith("."):
                    out.write(open(os.path.join(root, name)).read())
    shutil.rmtree(out_dir, ignore_errors=True)
    if args.stats:
        stop_jvm(args.stats)


def stop_jvm(stats_path):
    """PyFlink runs the job in a JVM it starts as a child and leaves to exit after Python does,
    so a `/usr/bin/time` around Python would not see its CPU time. Stop it and reap it here:
    then the JVM's user and system time count in Python's children, which `time` reports. Peak
    RSS is per process in `time`; both peaks go to STATS (kB) for the bench to add up."""
    import resource
    import signal

    from pyflink.java_gateway import get_gateway

    pid = int(get_gateway().jvm.java.lang.ProcessHandle.current().pid())
    hwm = next(int(line.split()[1]) for line in open(f"/proc/{pid}/status")
               if line.startswith("VmHWM:"))
    py = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    os.kill(pid, signal.SIGTERM)
    os.waitpid(pid, 0)
    with open(stats_path, "w") as f:
        f.write(f'{{"jvm_peak_rss_kb": {hwm}, "python_peak_rss_kb": {py}}}\n')
    sys.stdout.flush()
    os._exit(0)  # the gateway is gone: skip PyFlink's exit hooks, which would call it


if __name__ == "__main__":
    main()
