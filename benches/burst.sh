#!/usr/bin/env bash
# A reconnect burst of upstream events through the durable path (issue 24, part 0): HOURS of
# events of 24 machines x 2 sensors (one event per sensor and second, `gen_trace`), the first
# LINES lines, through `linegate run --exit-at-end --forward local-ack`, side by side with
# `replay` of the same file and, when OLD_BIN is set, with `run` of another build; RUNS rounds,
# the builds alternating. Prints per run wall and CPU seconds, peak RSS and the store's size (at
# the end and at its peak, sampled every 0.1 s), then the medians and events/s.
# With FSYNC_DELAY_US set, every fsync and fdatasync of `run` returns that many microseconds
# late (strace's fault injection), as on a storage whose cache flush is slow (an SD card's).
# usage: [OLD_BIN=path/to/linegate] [FSYNC_DELAY_US=N] benches/burst.sh [HOURS=6] [RUNS=3] [LINES=all]
set -euo pipefail
cd "$(dirname "$0")/.."
HOURS=${1:-6}
RUNS=${2:-3}
LINES=${3:-}
# shellcheck source=benches/support/trace_config.sh
. benches/support/trace_config.sh
events_bench_setup

"$GEN" 24 $((HOURS * 3600)) 2 > "$WORK/t.jsonl"
if [ -n "$LINES" ]; then
    head -n "$LINES" "$WORK/t.jsonl" > "$WORK/head.jsonl"
    mv "$WORK/head.jsonl" "$WORK/t.jsonl"
fi
lines=$(wc -l < "$WORK/t.jsonl")
echo "trace: $lines lines, $(du -sb "$WORK/t.jsonl" | cut -f1) bytes"
trace_config "$WORK/store" "$WORK/t.jsonl" 0.0 > "$WORK/run.toml"

one() { # one NAME COMMAND...: prints "NAME wall user sys rss_kb store_bytes peak_store_bytes"
    local name=$1
    shift
    rm -rf "$WORK/store"
    /usr/bin/time -f "%e %U %S %M" -o "$WORK/time" "$@" > /dev/null 2> "$WORK/$name.log" &
    local pid=$! store=0 peak=0 now
    # The store's size at its peak: sampled every 0.1 s while the command runs.
    while kill -0 "$pid" 2> /dev/null; do
        now=$(du -sb "$WORK/store" 2> /dev/null | cut -f1 || true)
        [ -z "$now" ] || [ "$now" -le "$peak" ] || peak=$now
        sleep 0.1
    done
    wait "$pid"
    [ ! -d "$WORK/store" ] || store=$(du -sb "$WORK/store" | cut -f1)
    [ "$store" -le "$peak" ] || peak=$store
    echo "$name $(cat "$WORK/time") $store $peak" | tee -a "$WORK/all"
}
slow=()
if [ -n "${FSYNC_DELAY_US:-}" ]; then
    slow=(strace -f --seccomp-bpf -qq -o /dev/null -e "trace=fsync,fdatasync"
        -e "inject=fsync:delay_exit=$FSYNC_DELAY_US" -e "inject=fdatasync:delay_exit=$FSYNC_DELAY_US")
fi
for _ in $(seq "$RUNS"); do
    one replay "$BIN" replay "$WORK/t.jsonl" --config "$WORK/run.toml" --out "$WORK/alerts.jsonl"
    [ -z "${OLD_BIN:-}" ] || one run-old "${slow[@]}" "$OLD_BIN" run --exit-at-end --forward local-ack --config "$WORK/run.toml"
    one run "${slow[@]}" "$BIN" run --exit-at-end --forward local-ack --config "$WORK/run.toml"
done
python3 - "$WORK/all" "$lines" "$(du -sb "$WORK/t.jsonl" | cut -f1)" <<'PY'
import statistics, sys
lines = int(sys.argv[2])
input_bytes = int(sys.argv[3])
rows = {}
for r in open(sys.argv[1]):
    name, *v = r.split()
    rows.setdefault(name, []).append([float(x) for x in v])
for name, runs in rows.items():
    wall, user, sys_, rss, store, peak = (statistics.median(c) for c in zip(*runs))
    print(f"{name}: median wall {wall:.2f} s ({lines / wall / 1e3:.1f}k lines/s), "
          f"CPU {user + sys_:.2f} s ({(user + sys_) / lines * 1e6:.1f} us/line), "
          f"peak RSS {rss / 1024:.1f} MiB, store {store / 1e6:.1f} MB at the end, "
          f"{peak / 1e6:.1f} MB at its peak ({peak / input_bytes:.2f}x the input)")
PY
