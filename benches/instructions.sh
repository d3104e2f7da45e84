#!/usr/bin/env bash
# Instruction counts (callgrind; issue 24, part 5): a figure that does not depend on how busy the
# machine is. Each is the difference of two runs of different lengths divided by the difference
# of their work, so start-up and shut-down cancel out:
#  1. the rule core per event (`examples/rule_load`, deciding minus generating only), for the
#     benchmark load (50 machines x 2 sensors) and the hot machine (1 machine x 8 sensors);
#  2. `replay` per event line (generated traces of 50 machines x 1 sensor), parse and decide;
#  3. the daemon per raw sample, ingest to journal, decide and checkpoint (`linegate run
#     --exit-at-end`, no forwarder: everything stays queued), 8 sensors at 3200 Hz
#     (`benches/daemon_trace.py`);
#  4. the feature path per sample of a one-second frame at 3200 Hz and 12 kHz
#     (`examples/features_load`): the frame cutter's RMS/peak pass without spectral features,
#     velocity and the moments, and every feature with each envelope method.
# Needs valgrind (a benchmark tool: scripts/setup does not install it). Writes nothing outside a
# temporary directory.
# usage: benches/instructions.sh [features]   (features: part 4 alone)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/support/trace_config.sh
. benches/support/trace_config.sh
only=${1:-all}
if [ "$only" = features ]; then
    WORK=$(mktemp -d)
    # shellcheck disable=SC2064 # WORK is expanded now, on purpose
    trap "rm -rf '$WORK'" EXIT
else
    events_bench_setup
    cargo build --release --locked -q --example rule_load
fi
LOAD=${CARGO_TARGET_DIR:-target}/release/examples/rule_load
cargo build --release --locked -q --example features_load
FEAT=${CARGO_TARGET_DIR:-target}/release/examples/features_load

# instructions COMMAND...: the instructions callgrind counts in every thread of COMMAND, less
# those of sled's `Lazy::deref`: the spin-wait of its global concurrency control, which valgrind
# inflates (it runs one thread at a time, so a thread that spins spins until its time slice
# ends: 3 % of a 5-second daemon run, 65 % of a 15-second one on 2026-12-06).
instructions() {
    valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out" "$@" > /dev/null 2>&1
    callgrind_annotate --inclusive=no "$WORK/callgrind.out" | python3 -c '
import re, sys
total = spin = 0
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)", line)
    if m and "PROGRAM TOTALS" in m.group(2):
        total = int(m.group(1).replace(",", ""))
    elif m and "sled::lazy::Lazy" in m.group(2):
        spin += int(m.group(1).replace(",", ""))
print(total - spin)'
}
# per A B C D: (B - A) / (D - C).
per() { python3 -c "import sys; a, b, c, d = map(int, sys.argv[1:]); print(f'{(b - a) / (d - c):.0f}')" "$@"; }

# features: part 4, instructions per sample from runs of 20 and 60 frames.
features() {
    for rate in 3200 12000; do
        for mode in cutter velocity fixed whitened kurtogram; do
            i1=$(instructions "$FEAT" "$rate" 20 "$mode")
            i2=$(instructions "$FEAT" "$rate" 60 "$mode")
            echo "features $rate Hz $mode: $(per "$i1" "$i2" $((20 * rate)) $((60 * rate))) instructions/sample"
        done
    done
}
if [ "$only" = features ]; then
    features
    exit 0
fi

for mode in normal hot; do
    hot=(); [ "$mode" = normal ] || hot=(hot)
    s1=200; s2=400; [ "$mode" = normal ] || { s1=2000; s2=4000; }
    e1=$("$LOAD" "$s1" "${hot[@]}" | cut -d' ' -f1)
    e2=$("$LOAD" "$s2" "${hot[@]}" | cut -d' ' -f1)
    d1=$(instructions "$LOAD" "$s1" "${hot[@]}")
    g1=$(instructions "$LOAD" "$s1" "${hot[@]}" generate-only)
    d2=$(instructions "$LOAD" "$s2" "${hot[@]}")
    g2=$(instructions "$LOAD" "$s2" "${hot[@]}" generate-only)
    echo "rule core ($mode): $(per $((d1 - g1)) $((d2 - g2)) "$e1" "$e2") instructions/event ($e1 and $e2 events)"
done

sed 's/^id = .*/id = "gw-bench"/' fixtures/traces/golden.toml > "$WORK/bench.toml"
"$GEN" 50 200 1 > "$WORK/r1.jsonl"
"$GEN" 50 600 1 > "$WORK/r2.jsonl"
l1=$(wc -l < "$WORK/r1.jsonl")
l2=$(wc -l < "$WORK/r2.jsonl")
i1=$(instructions "$BIN" replay "$WORK/r1.jsonl" --config "$WORK/bench.toml" --out "$WORK/a.jsonl")
i2=$(instructions "$BIN" replay "$WORK/r2.jsonl" --config "$WORK/bench.toml" --out "$WORK/a.jsonl")
echo "replay: $(per "$i1" "$i2" "$l1" "$l2") instructions/line ($l1 and $l2 lines)"

python3 benches/daemon_trace.py 5 > "$WORK/d1.jsonl"
python3 benches/daemon_trace.py 15 > "$WORK/d2.jsonl"
trace_config "$WORK/s1" "$WORK/d1.jsonl" 0.0 > "$WORK/d1.toml"
trace_config "$WORK/s2" "$WORK/d2.jsonl" 0.0 > "$WORK/d2.toml"
i1=$(instructions "$BIN" run --exit-at-end --config "$WORK/d1.toml")
i2=$(instructions "$BIN" run --exit-at-end --config "$WORK/d2.toml")
echo "daemon: $(per "$i1" "$i2" $((5 * 8 * 3200)) $((15 * 8 * 3200))) instructions/raw sample (8 sensors x 3200 Hz, 5 s and 15 s)"

features
