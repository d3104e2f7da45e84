#!/usr/bin/env python3
"""linegate's rule as a Bytewax dataflow (Rust/timely core, operator logic in Python), for
benches/peers.sh.

    bytewax_rule.py TRACE --config golden.toml --out incidents.csv [-w WORKERS]

Reads a trace (JSON Lines, docs/contracts.md section 8) and writes one line per incident,
`machine,onset_ms,last_ms,end_ms`, like flink_rule.py. The dataflow: the file's lines, parsed in
batches (json.loads); keyed by machine; one stateful step per machine that drops duplicate
`event_id`s, keeps the machine's watermark (max ts_ms - bound), releases its high events in
ts_ms order once the watermark has reached them, and decides on them what flink_rule.py's OVER
formulation decides: a high event h_i with h_i - h_{i-N+1} < W makes the condition true on
[h_i, h_{i-N+1} + W); touching intervals are one incident, written once the watermark has passed
its end (or at the end of the input).

Bytewax's own windowing (SlidingWindower) was not used: a 2-minute window sliding by 1 s puts
every high event into 120 windows, each a Python call. Like the Flink job, events that arrive
behind the watermark are dropped and counted (no allowed lateness is applied); ids are
remembered per machine while ts_ms >= watermark - allowed lateness (linegate's horizon).
"""
import argparse
import heapq
import json
import os
import sys
from collections import deque

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flink_rule import rule_from  # noqa: E402  (the same reading of the configuration)

import bytewax.operators as op  # noqa: E402
from bytewax.connectors.files import FileSink, FileSource  # noqa: E402
from bytewax.dataflow import Dataflow  # noqa: E402
from bytewax.operators import StatefulBatchLogic  # noqa: E402

UNIT = {"g": {"g": 1.0, "m/s2": 1 / 9.80665}, "m/s2": {"g": 9.80665, "m/s2": 1.0},
        "mm/s": {"mm/s": 1.0}}


def parser(r):
    metric, thr, qualities = r["metric"], r["threshold"], set(r["qualities"])
    scale, future = UNIT[r["unit"]], r["max_future_ms"]

    def parse(lines):
        """Trace lines -> (machine, (event_id, ts_ms, high)) for every accepted-looking event."""
        out = []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("kind") != "event":
                continue
            e = rec["event"]
            ts = e["ts_ms"]
            if ts > rec["at"] + future:  # clock_future
                continue
            high = (e["metric"] == metric and e["quality"] in qualities
                    and e["value"] * scale.get(e["unit"], float("nan")) >= thr)
            out.append((e["machine"], (e["event_id"], ts, high)))
        return out

    return parse


class Rule(StatefulBatchLogic):
    """One machine's state: ids, watermark, high events waiting for it, the open incident."""

    def __init__(self, r):
        self.W, self.N = r["window_ms"], r["count"]
        self.bound, self.lateness = r["bound_ms"], r["lateness_ms"]
        self.seen = {}  # event_id -> ts_ms, while ts_ms >= wm - lateness
        self.max_ts = None
        self.waiting = []  # heap of high ts_ms not yet reached by the watermark
        self.recent = deque(maxlen=self.N - 1)  # the last N-1 released high ts_ms
        self.incident = None  # [onset, last, until]
        self.late = 0
        self.sweep = 0

    def release(self, wm, out):
        W, N, recent = self.W, self.N, self.recent
        while self.waiting and self.waiting[0] <= wm:
            t = heapq.heappop(self.waiting)
            if len(recent) == N - 1 and t - recent[0] < W:
                until = recent[0] + W
                inc = self.incident
                if inc is not None and t <= inc[2]:
                    inc[1], inc[2] = t, until
                else:
                    if inc is not None:
                        out.append(inc)
                    self.incident = [t, t, until]
            recent.append(t)
        inc = self.incident
        if inc is not None and wm > inc[2]:
            out.append(inc)
            self.incident = None

    def on_batch(self, values):
        seen, out = self.seen, []
        for eid, ts, high in values:
            if eid in seen:
                continue  # duplicate: moves nothing
            seen[eid] = ts
            if self.max_ts is None or ts > self.max_ts:
                self.max_ts = ts
            if ts < self.max_ts - self.bound:
                self.late += 1  # behind the watermark: dropped, as by Flink's OVER window
                continue
            if high:
                heapq.heappush(self.waiting, ts)
        wm = self.max_ts - self.bound
        self.release(wm, out)
        self.sweep += len(values)
        if self.sweep > 4096:  # forget ids behind the horizon
            self.sweep = 0
            horizon = wm - self.lateness
            self.seen = {k: v for k, v in seen.items() if v >= horizon}
        return out, False

    def on_eof(self):
        out = []
        self.release(float("inf"), out)
        if self.incident is not None:
            out.append(self.incident)
        return out, True

    def snapshot(self):
        return None


def build(trace, out_path, r):
    flow = Dataflow("linegate_rule")
    lines = op.input("trace", flow, FileSource(trace, batch_size=2000))
    events = op.flat_map_batch("parse", lines, parser(r))
    incidents = op.stateful_batch("rule", events, lambda _resume: Rule(r))
    # FileSink routes (key, line) pairs to its one partition.
    text = op.map("format", incidents,
                  lambda kv: ("all", f"{kv[0]},{kv[1][0]},{kv[1][1]},{kv[1][2]}"))
    op.output("out", text, FileSink(out_path))
    return flow


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--config", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("-w", "--workers", type=int, default=1,
                    help="worker threads in this process (they share Python's GIL)")
    args = ap.parse_args()
    if os.path.exists(args.out):
        os.unlink(args.out)
    flow = build(args.trace, args.out, rule_from(args.config))
    if args.workers == 1:
        from bytewax.testing import run_main
        run_main(flow)
    else:
        from bytewax._bytewax import cluster_main
        cluster_main(flow, [], 0, worker_count_per_proc=args.workers)


if __name__ == "__main__":
    main()
