#!/usr/bin/env bash
# Alert latency of two revisions side by side (issue 4): `examples/alert_latency.rs` built from
# BASE (a git revision, in a temporary worktree) and from the working tree, run interleaved
# against one local mosquitto, TRIALS times each of: idle (200 alerts), during an unpaced drain
# of a MINUTES backlog of 8 sensors (100 alerts) and during a drain at the daemon's pace
# (2000 records/s, 100 alerts). Every run also times a bare fsync beside its store
# (`disk_fsync_*`), so runs on a slow-disk minute show as such. Prints one JSON line per run, then
# per scenario the medians of p50, p99 and the disk's p99 for each side and the median of the
# per-trial ratios head/base. Each trial also drains the backlog and an hour of events only
# (`mqtt_drain drain`) with each side's forwarder: sample MB/s and events/s, head/base.
# Needs: mosquitto and mosquitto-clients (Debian), as .ci/run installs them.
# Usage: benches/alert_ab.sh BASE [TRIALS] [MINUTES]
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: benches/alert_ab.sh BASE [TRIALS] [MINUTES]}
trials=${2:-5}
minutes=${3:-10}
dir=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    git worktree remove --force "$dir/base" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
git worktree add --detach --quiet "$dir/base" "$base"
target=${CARGO_TARGET_DIR:-$PWD/target}
(cd "$dir/base" && CARGO_TARGET_DIR="$target/ab-base" cargo build --release --quiet --example alert_latency --example mqtt_drain)
cargo build --release --quiet --example mqtt_drain --example alert_latency
declare -A bin=([base]="$target/ab-base/release/examples/alert_latency" [head]="$target/release/examples/alert_latency")

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'listener %s 127.0.0.1\nallow_anonymous true\nmax_packet_size 1048576\n' "$port" >"$dir/m.conf"
mosquitto -c "$dir/m.conf" 2>/dev/null &
pids+=($!)
for _ in $(seq 100); do mosquitto_pub -h 127.0.0.1 -p "$port" -t up -m x 2>/dev/null && break; sleep 0.05; done
# Each side fills its own backlog (the same generated data), so a change of the store's format
# is compared as each side writes it.
for side in base head; do
    fill=${bin[$side]%alert_latency}mqtt_drain
    "$fill" fill "$dir/backlog-$side" "$minutes" 8
    "$fill" fill-events "$dir/events-$side" 60 8
done

for t in $(seq "$trials"); do
    for scenario in idle drain paced throughput; do
        # Alternate which side goes first, so neither always follows the other.
        sides="base head"
        if [ $((t % 2)) -eq 0 ]; then sides="head base"; fi
        for side in $sides; do
            rm -rf "$dir/s"
            case $scenario in
            idle) out=$("${bin[$side]}" "$dir/s" "$port" 200) ;;
            drain) cp -r "$dir/backlog-$side" "$dir/s" && sync && out=$("${bin[$side]}" "$dir/s" "$port" 100) ;;
            paced) cp -r "$dir/backlog-$side" "$dir/s" && sync && out=$("${bin[$side]}" "$dir/s" "$port" 100 64 2000) ;;
            throughput)
                drain=${bin[$side]%alert_latency}mqtt_drain
                cp -r "$dir/backlog-$side" "$dir/s" && sync && frames=$("$drain" drain "$dir/s" "$port" 64)
                rm -rf "$dir/s" && cp -r "$dir/events-$side" "$dir/s" && sync
                out="{\"frames\":$frames,\"events_only\":$("$drain" drain "$dir/s" "$port" 64)}" ;;
            esac
            echo "{\"trial\":$t,\"scenario\":\"$scenario\",\"side\":\"$side\",\"run\":$out}" | tee -a "$dir/runs"
        done
    done
done
python3 - "$dir/runs" "$base" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
out = {"base": sys.argv[2], "trials": max(r["trial"] for r in runs)}
def ratio(sc, f):
    by = {(r["trial"], r["side"]): f(r["run"]) for r in runs if r["scenario"] == sc}
    trials = sorted({t for t, _ in by})
    return {"base": statistics.median(by[(t, "base")] for t in trials),
            "head": statistics.median(by[(t, "head")] for t in trials),
            "head_to_base_per_trial_median":
                statistics.median(by[(t, "head")] / by[(t, "base")] for t in trials)}
out["sample_mb_per_s"] = ratio("throughput", lambda r: r["frames"]["sample_mb_per_s"])
out["events_per_s_with_frames"] = ratio("throughput", lambda r: r["frames"]["events_per_s"])
out["events_only_events_per_s"] = ratio("throughput", lambda r: r["events_only"]["events_per_s"])
for sc in ("idle", "drain", "paced"):
    by = {(r["trial"], r["side"]): r["run"] for r in runs if r["scenario"] == sc}
    trials = sorted({t for t, _ in by})
    med = lambda side, k: statistics.median(by[(t, side)][k] for t in trials)
    out[sc] = {
        **{f"{side}_{k}": med(side, k) for side in ("base", "head")
           for k in ("p50_ms", "p99_ms", "disk_fsync_p99_ms")},
        "p99_head_to_base_per_trial_median":
            statistics.median(by[(t, "head")]["p99_ms"] / by[(t, "base")]["p99_ms"] for t in trials),
        "p50_head_to_base_per_trial_median":
            statistics.median(by[(t, "head")]["p50_ms"] / by[(t, "base")]["p50_ms"] for t in trials),
    }
print(json.dumps(out))
PY
