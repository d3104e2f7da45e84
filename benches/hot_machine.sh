#!/usr/bin/env bash
# The hot machine: one machine, 8 sensors at 1 event/s, every event high, for 24 h of event time
# (`gen_trace 1 86400 8 hot`, 691 200 events) and a tick an hour after the last, through
# `linegate replay` under each CONFIG (default: config/demo.toml, the one-rule figure, and
# benches/support/hot_rules.toml, three rules and a composite over two of them). Prints per
# configuration replay's peak RSS (`/usr/bin/time -v`), the largest alert record in bytes, and
# the alert records by rule. tests/hot_machine_rules.rs asserts the state bounds in debug.
# usage: benches/hot_machine.sh [CONFIG...]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/support/trace_config.sh
. benches/support/trace_config.sh
events_bench_setup
if [ $# -eq 0 ]; then
    set -- config/demo.toml benches/support/hot_rules.toml
fi

"$GEN" 1 86400 8 hot > "$WORK/t.jsonl"
last=$(tail -n 1 "$WORK/t.jsonl" | sed -E 's/^\{"at":([0-9]+).*/\1/')
echo "{\"at\":$((last + 3600000)),\"kind\":\"tick\"}" >> "$WORK/t.jsonl"
echo "trace: $(wc -l < "$WORK/t.jsonl") lines"

for config in "$@"; do
    /usr/bin/time -v "$BIN" replay "$WORK/t.jsonl" --config "$config" \
        --out "$WORK/alerts.jsonl" 2> "$WORK/time.txt" > /dev/null
    rss_kb=$(sed -nE 's/^\s*Maximum resident set size \(kbytes\): ([0-9]+)/\1/p' "$WORK/time.txt")
    largest=$(LC_ALL=C awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' \
        "$WORK/alerts.jsonl")
    # The record's own rule is its first "rule" (a composite's members name theirs later).
    rules=$(awk 'match($0, /"rule":"[^"]*"/) { print substr($0, RSTART + 8, RLENGTH - 9) }' \
        "$WORK/alerts.jsonl" | sort | uniq -c | awk '{ printf "%s%s %s", sep, $2, $1; sep = ", " }')
    echo "$config: peak RSS $(awk -v k="$rss_kb" 'BEGIN { printf "%.1f", k / 1000 }') MB," \
        "largest alert record $largest bytes; records by rule: $rules"
done
