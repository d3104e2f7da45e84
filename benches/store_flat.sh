#!/usr/bin/env bash
# The store's size in normal operation (issue 19): every record acknowledged
# (`--forward local-ack`), 8 sensors at RATE Hz through the whole daemon, `[store] history`
# HISTORY. Runs traces of each of HOURS (fresh store each), then prints per run: the ledger
# records written and still kept, the bytes on disk outside the raw segments (sled's part: what
# shedding raw frames cannot remove), and the time `linegate inspect` takes to open the store
# (open + start-up check). The same longest run with a history longer than it is the control.
# usage: benches/store_flat.sh [HISTORY=1h] [RATE=200] [HOURS="2 6"]
set -euo pipefail
cd "$(dirname "$0")/.."
HISTORY=${1:-1h}
RATE=${2:-200}
HOURS=${3:-"2 6"}
cargo build --release --locked -q
BIN=${CARGO_TARGET_DIR:-target}/release/linegate
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=benches/support/trace_config.sh
. benches/support/trace_config.sh
config() { trace_config "$1" "$2" 0.0 "history = \"$3\""; }

one() { # one HOURS HISTORY
    local h=$1 hist=$2 name="$1h-$2"
    python3 benches/daemon_trace.py $((h * 3600)) 8 "$RATE" > "$WORK/t.jsonl"
    config "$WORK/$name" "$WORK/t.jsonl" "$hist" > "$WORK/$name.toml"
    local t0 t1 t2
    t0=$(date +%s.%N)
    "$BIN" run --exit-at-end --forward local-ack --config "$WORK/$name.toml" 2> "$WORK/$name.log"
    t1=$(date +%s.%N)
    "$BIN" inspect --json --config "$WORK/$name.toml" > "$WORK/$name.json"
    t2=$(date +%s.%N)
    local all raw kept
    all=$(du -sb "$WORK/$name" | cut -f1)
    raw=$(du -sb "$WORK/$name/raw" 2> /dev/null | cut -f1 || echo 0)
    kept=$("$BIN" dump ledger --config "$WORK/$name.toml" | wc -l)
    python3 - "$WORK/$name.json" "$h" "$hist" "$all" "$raw" "$kept" "$t0" "$t1" "$t2" <<'PY'
import json, sys
i = json.load(open(sys.argv[1]))
h, hist, all_b, raw, kept, t0, t1, t2 = sys.argv[2:]
print(f"{h} h, history {hist}: ledger {i['ledger_records']} written, {kept} kept; "
      f"outside raw/ {(int(all_b) - int(raw)) / 1e6:.1f} MB (all {int(all_b) / 1e6:.1f} MB); "
      f"run {float(t1) - float(t0):.0f} s; inspect (open + check) {float(t2) - float(t1):.2f} s")
PY
    rm -rf "${WORK:?}/$name" "$WORK/t.jsonl"
}

last=
for h in $HOURS; do one "$h" "$HISTORY"; last=$h; done
one "$last" 1000h
