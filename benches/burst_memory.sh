#!/usr/bin/env bash
# Memory of a burst against its length (issue 42, part 1): a realistic six-hour trace of MACHINES
# machines (`gen_trace mixed`: disorder within and beyond the watermark bound, duplicates, id
# conflicts, too-late and future events, poison lines, raw-sample blocks among the events), and
# its first N lines for each N of LENGTHS, each through `linegate run --exit-at-end --forward
# local-ack` with sled's cache CACHE (the default `[store] cache` unless set) and STORE_KEYS added to
# `[store]` (e.g. `history = "10m"`), `replay` of the same lines
# beside it in the same round. Prints per length: the input, `run`'s wall time, lines/s, peak RSS
# (`/usr/bin/time -v`), the store at its peak (sampled every 0.2 s) against the input, `run`'s
# RSS by quarter of its run (the median of the samples in each: a level that rises with the
# length, against a peak that is one moment's sum of buffers), and `replay`'s wall time and peak
# RSS; then the largest peak RSS over the smallest (the goal: flat within 10 %). Long: run it
# niced on a shared machine.
# With BIN and GEN set (a linegate and a gen_trace), builds nothing; with TRACE set (a trace
# `gen_trace mixed` wrote), generates nothing.
# usage: [CACHE=16MiB] [STORE_KEYS=…] [SEED=1] [BIN=… GEN=…] [TRACE=…] benches/burst_memory.sh [MACHINES=96] [LENGTHS="200000 1000000 4000000"]
set -euo pipefail
cd "$(dirname "$0")/.."
MACHINES=${1:-96}
LENGTHS=${2:-"200000 1000000 4000000"}
# shellcheck source=benches/support/trace_config.sh
. benches/support/trace_config.sh
events_bench_setup
CACHE=${CACHE:-16MiB}

FULL=${TRACE:-$WORK/full.jsonl}
if [ -z "${TRACE:-}" ]; then
    "$GEN" mixed "$MACHINES" 21600 "${SEED:-1}" > "$FULL" 2> "$WORK/gen.txt"
    echo "generated: $(cat "$WORK/gen.txt")"
fi
echo "trace: $(wc -l < "$FULL") lines, $(du -sb "$FULL" | cut -f1) bytes"
STORE_CACHE=$CACHE trace_config "$WORK/store" "$WORK/t.jsonl" 0.0 "${STORE_KEYS:-}" > "$WORK/run.toml"

timed() { # timed NAME COMMAND...: prints "wall rss_kb peak_store_bytes"; RSS samples in NAME.rss
    local name=$1 peak=0 now child
    shift
    rm -rf "$WORK/store"
    : > "$WORK/$name.rss"
    /usr/bin/time -v -o "$WORK/$name.time" "$@" > /dev/null 2> "$WORK/$name.log" &
    local pid=$!
    while kill -0 "$pid" 2> /dev/null; do
        now=$(du -sb "$WORK/store" 2> /dev/null | cut -f1 || true)
        [ -z "$now" ] || [ "$now" -le "$peak" ] || peak=$now
        child=$(cat "/proc/$pid/task/$pid/children" 2> /dev/null || true)
        [ -z "$child" ] || awk '/^VmRSS/ {print $2}' "/proc/${child%% *}/status" \
            >> "$WORK/$name.rss" 2> /dev/null || true
        sleep 0.2
    done
    wait "$pid" || { echo "$name failed:" >&2; tail -5 "$WORK/$name.log" >&2; exit 1; }
    now=$(du -sb "$WORK/store" 2> /dev/null | cut -f1 || echo 0)
    [ "$now" -le "$peak" ] || peak=$now
    python3 - "$WORK/$name.time" "$peak" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", t).group(1)
secs = sum(float(p) * 60 ** i for i, p in enumerate(reversed(wall.split(":"))))
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
print(f"{secs:.2f} {rss} {sys.argv[2]}")
PY
}

: > "$WORK/rows"
for n in $LENGTHS; do
    head -n "$n" "$FULL" > "$WORK/t.jsonl"
    lines=$(wc -l < "$WORK/t.jsonl")
    bytes=$(du -sb "$WORK/t.jsonl" | cut -f1)
    read -r rwall rrss _ < <(timed replay "$BIN" replay "$WORK/t.jsonl" --config "$WORK/run.toml" \
        --out "$WORK/alerts.jsonl" --summary "$WORK/summary.json")
    read -r wall rss peak < <(timed run "$BIN" run --exit-at-end --forward local-ack --config "$WORK/run.toml")
    echo "$lines $bytes $wall $rss $peak $rwall $rrss" >> "$WORK/rows"
    python3 - "$WORK/summary.json" "$lines" "$bytes" "$wall" "$rss" "$peak" "$rwall" "$rrss" "$WORK/run.rss" <<'PY'
import json, statistics, sys
s = json.load(open(sys.argv[1]))
lines, size, wall, rss, peak, rwall, rrss = (float(x) for x in sys.argv[2:9])
kb = [int(x) for x in open(sys.argv[9]).read().split()]
quarters = [kb[i * len(kb) // 4:(i + 1) * len(kb) // 4] for i in range(4)]
level = " ".join(f"{statistics.median(q) / 1024:.1f}" if q else "-" for q in quarters)
mix = {k: s.get(k) for k in ("accepted", "duplicates", "late_applied", "too_late")}
print(f"{lines:.0f} lines ({size / 1e6:.0f} MB): run {wall:.2f} s, {lines / wall / 1e3:.1f}k lines/s, "
      f"peak RSS {rss / 1024:.1f} MiB (by quarter {level}), store at its peak {peak / 1e6:.0f} MB = {peak / size:.2f}x the input; "
      f"replay {rwall:.2f} s, {rrss / 1024:.1f} MiB; {mix}, quarantined {s.get('quarantined')}")
PY
    rm -rf "$WORK/store" "$WORK/t.jsonl"
done
python3 - "$WORK/rows" <<'PY'
import sys
rss = [int(r.split()[3]) for r in open(sys.argv[1])]
print(f"peak RSS from {rss[0] / 1024:.1f} to {rss[-1] / 1024:.1f} MiB, largest / smallest {max(rss) / min(rss):.2f}")
PY
