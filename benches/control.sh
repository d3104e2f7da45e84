#!/usr/bin/env bash
# The control socket under load (issue 20):
#  1. `inspect --json` and `status --json` through the socket (benches/control_client.py, every
#     100 ms, timed from connect to the answer's last frame) while `linegate run` ingests 8
#     simulated sensors at 3200 Hz in real time (benches/daemon_trace.py, SECONDS s);
#  2. alert latency (examples/alert_latency.rs, 200 alerts on an idle pipeline against a local
#     mosquitto) without and with a client asking `status --json` every 100 ms on the same store
#     (POLL_STATUS_MS=100), interleaved TRIALS times: medians of each side's p50 and p99, and the
#     median of the per-trial ratios with/without.
# Needs mosquitto (Debian), as .ci/run installs it.
# usage: benches/control.sh [SECONDS=60] [TRIALS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_RT=${1:-60}
TRIALS=${2:-5}
cargo build --release --locked -q --bin linegate --example alert_latency
target=${CARGO_TARGET_DIR:-target}
BIN=$target/release/linegate
WORK=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=benches/support/trace_config.sh
. benches/support/trace_config.sh

echo "== 1. control requests while ingesting 8 sensors x 3200 Hz in real time ($SECONDS_RT s)"
python3 benches/daemon_trace.py "$SECONDS_RT" > "$WORK/rt.jsonl"
trace_config "$WORK/db" "$WORK/rt.jsonl" 1.0 > "$WORK/rt.toml"
"$BIN" run --exit-at-end --no-forward --config "$WORK/rt.toml" 2> "$WORK/run.log" &
pids+=($!)
for _ in $(seq 200); do [ -S "$WORK/db/control.sock" ] && break; sleep 0.05; done
half=$(python3 -c "print(max(5, ($SECONDS_RT - 10) / 2))")
python3 benches/control_client.py "$WORK/db/control.sock" "$half" 100 inspect
python3 benches/control_client.py "$WORK/db/control.sock" "$half" 100 status
wait "${pids[0]}"

echo "== 2. alert latency without and with a status client every 100 ms ($TRIALS trials)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'listener %s 127.0.0.1\nallow_anonymous true\n' "$port" > "$WORK/m.conf"
mosquitto -c "$WORK/m.conf" 2>/dev/null &
pids+=($!)
for _ in $(seq 100); do mosquitto_pub -h 127.0.0.1 -p "$port" -t up -m x 2>/dev/null && break; sleep 0.05; done
: > "$WORK/ab.jsonl"
for t in $(seq "$TRIALS"); do
    sides="without with"
    if [ $((t % 2)) -eq 0 ]; then sides="with without"; fi
    for side in $sides; do
        rm -rf "$WORK/s"
        if [ "$side" = with ]; then
            out=$(POLL_STATUS_MS=100 "$target/release/examples/alert_latency" "$WORK/s" "$port" 200)
        else
            out=$("$target/release/examples/alert_latency" "$WORK/s" "$port" 200)
        fi
        echo "{\"trial\":$t,\"side\":\"$side\",\"run\":$out}" | tee -a "$WORK/ab.jsonl"
    done
done
python3 - "$WORK/ab.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
by = lambda side, k: [r["run"][k] for r in runs if r["side"] == side]
for side in ("without", "with"):
    print(f"{side:8} status client: alert p50 {statistics.median(by(side, 'p50_ms')):.2f} ms, "
          f"p99 {statistics.median(by(side, 'p99_ms')):.2f} ms (medians of {len(by(side, 'p99_ms'))} runs)")
ratios = []
for t in sorted({r["trial"] for r in runs}):
    w = [r["run"]["p99_ms"] for r in runs if r["trial"] == t and r["side"] == "with"]
    wo = [r["run"]["p99_ms"] for r in runs if r["trial"] == t and r["side"] == "without"]
    ratios.append(w[0] / wo[0])
print(f"p99 with/without, median of per-trial ratios: {statistics.median(ratios):.2f}")
st = [r["run"]["status_p99_ms"] for r in runs if r["side"] == "with"]
print(f"status --json answered: p99 {statistics.median(st):.2f} ms (median over runs)")
PY
