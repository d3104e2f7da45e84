#!/usr/bin/env bash
# The input's history (issue 21): HOURS of events of 8 sensors (4 machines x 2, one event per
# sensor and second, `gen_trace`) through `linegate run --exit-at-end --forward local-ack`
# with `[store] history = "24h"`, side by side with the same run by OLD_BIN (a linegate built
# before the journal kept history: `git worktree add ../old 7a3bdfd` and a release build there)
# when it is set (several builds, separated by spaces, run one after the other, each named by
# its file name). Prints per run the store's size (whole, and outside raw/), then, on this
# build's store: `export` of the whole history (lines/s, median of RUNS) and `whatif` under
# another threshold (median of RUNS).
# usage: [OLD_BIN=../old/target/release/linegate] benches/history.sh [HOURS=24] [RUNS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
HOURS=${1:-24}
RUNS=${2:-5}
# shellcheck source=benches/support/trace_config.sh
. benches/support/trace_config.sh
events_bench_setup

"$GEN" 4 $((HOURS * 3600)) 2 > "$WORK/t.jsonl"
lines=$(wc -l < "$WORK/t.jsonl")
echo "trace: $lines lines, $(du -sb "$WORK/t.jsonl" | cut -f1) bytes"

one() { # one NAME BIN
    trace_config "$WORK/s-$1" "$WORK/t.jsonl" 0.0 'history = "24h"' > "$WORK/$1.toml"
    local t0 t1 all raw
    t0=$(date +%s.%N)
    "$2" run --exit-at-end --forward local-ack --config "$WORK/$1.toml" 2> "$WORK/$1.log"
    t1=$(date +%s.%N)
    all=$(du -sb "$WORK/s-$1" | cut -f1)
    raw=$(du -sb "$WORK/s-$1/raw" 2> /dev/null | cut -f1 || echo 0)
    echo "$1: store $all bytes, outside raw/ $((all - raw)) bytes; run $(python3 -c "print(f'{$t1 - $t0:.1f}')") s"
}
for old in ${OLD_BIN:-}; do
    one "before-$(basename "$old")" "$old"
    rm -rf "$WORK/s-before-$(basename "$old")"
done
one history "$BIN"

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
timed() { # timed COMMAND...: wall seconds
    local t0 t1
    t0=$(date +%s.%N)
    "$@" > /dev/null
    t1=$(date +%s.%N)
    python3 -c "print($t1 - $t0)"
}
exp=$(for _ in $(seq "$RUNS"); do timed "$BIN" export --config "$WORK/history.toml" --out "$WORK/export.jsonl"; done | median)
n=$(wc -l < "$WORK/export.jsonl")
echo "export: $n lines, median $(python3 -c "print(f'{$exp:.3f}')") s = $(python3 -c "print(f'{$n / $exp / 1e6:.2f}')")M lines/s"
sed 's/^threshold = 0.9$/threshold = 0.8/' "$WORK/history.toml" > "$WORK/whatif.toml"
wi=$(for _ in $(seq "$RUNS"); do timed "$BIN" whatif --config "$WORK/whatif.toml"; done | median)
echo "whatif (threshold 0.9 -> 0.8): median $(python3 -c "print(f'{$wi:.3f}')") s"
"$BIN" whatif --config "$WORK/whatif.toml" > "$WORK/whatif.txt"
head -4 "$WORK/whatif.txt"
