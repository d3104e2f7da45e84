#!/usr/bin/env bash
# MQTT drain and alert latency against a local mosquitto (issue 4), side by side in one run with
# mosquitto_pub publishing the same number of messages at QoS 1: event-sized, and the backlog's
# own mix (every second message as large as a frame). The event rate is timed to the delivery of
# the last event to a subscriber (a backlog's events go before its raw samples), the sample rate
# over the whole drain. Prints one line per trial and the medians; a second backlog, one hour of
# the same events without raw samples, gives the event rate on its own. Each store copy is synced before it is drained (its dirty pages would otherwise be
# written back during the drain). Each drain and the alert latency during a drain also run, in the same trial,
# with the byte window (`[mqtt] inflight_bytes`) opened to 1 GiB, beside the default, and the
# alert latency once more during a drain at the daemon's default pace (2000 records/s).
# Every alert latency run also times a bare fsync of 1 KiB beside the store between its alerts
# (`disk_fsync_*`): the floor of an alert, whose evidence must be durable before it is published.
# Needs: mosquitto and mosquitto-clients (Debian), as .ci/run installs them.
# Usage: benches/mqtt_drain.sh [MINUTES] [SENSORS] [TRIALS] [CACHE_MIB]
#   MINUTES of backlog of SENSORS sensors (per sensor and second one event and one 3200-sample
#   frame); CACHE_MIB is the store's page cache (`[store] cache`) while draining.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10}
sensors=${2:-8}
trials=${3:-3}
cache=${4:-64}
dir=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
cargo build --release --quiet --example mqtt_drain --example alert_latency
bin=${CARGO_TARGET_DIR:-target}/release/examples

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'listener %s 127.0.0.1\nallow_anonymous true\nmax_packet_size 1048576\n' "$port" >"$dir/m.conf"
mosquitto -c "$dir/m.conf" 2>/dev/null &
pids+=($!)
for _ in $(seq 100); do mosquitto_pub -h 127.0.0.1 -p "$port" -t up -m x 2>/dev/null && break; sleep 0.05; done

"$bin/mqtt_drain" fill "$dir/backlog" "$minutes" "$sensors"
"$bin/mqtt_drain" fill-events "$dir/events" 60 "$sensors" # one hour of events
messages=$((2 * minutes * 60 * sensors))
"$bin/mqtt_drain" lines "$messages" "$dir/lines.txt"
"$bin/mqtt_drain" lines "$messages" "$dir/mixed.txt" frames # the backlog's messages and bytes

open=1048576 # KiB: no byte window in effect
for t in $(seq "$trials"); do
    rm -rf "$dir/s" && cp -r "$dir/backlog" "$dir/s" && sync
    drain=$(/usr/bin/time -f '%M' -o "$dir/rss" "$bin/mqtt_drain" drain "$dir/s" "$port" "$cache")
    rm -rf "$dir/s" && cp -r "$dir/backlog" "$dir/s" && sync
    drain_open=$("$bin/mqtt_drain" drain "$dir/s" "$port" "$cache" 64 "$open")
    rm -rf "$dir/s" && cp -r "$dir/events" "$dir/s" && sync
    events_only=$("$bin/mqtt_drain" drain "$dir/s" "$port" "$cache")
    rm -rf "$dir/s" && cp -r "$dir/events" "$dir/s" && sync
    events_only_open=$("$bin/mqtt_drain" drain "$dir/s" "$port" "$cache" 64 "$open")
    start=$(date +%s.%N)
    mosquitto_pub -h 127.0.0.1 -p "$port" -q 1 -t bench/x -l <"$dir/lines.txt"
    end=$(date +%s.%N)
    mosquitto_pub -h 127.0.0.1 -p "$port" -q 1 -t bench/x -l <"$dir/mixed.txt"
    end_mixed=$(date +%s.%N)
    rm -rf "$dir/l" && latency_idle=$("$bin/alert_latency" "$dir/l" "$port" 200)
    rm -rf "$dir/s" && cp -r "$dir/backlog" "$dir/s" && sync
    latency_backlog=$("$bin/alert_latency" "$dir/s" "$port" 100)
    rm -rf "$dir/s" && cp -r "$dir/backlog" "$dir/s" && sync
    latency_backlog_open=$("$bin/alert_latency" "$dir/s" "$port" 100 64 0 "$open")
    rm -rf "$dir/s" && cp -r "$dir/backlog" "$dir/s" && sync
    latency_backlog_paced=$("$bin/alert_latency" "$dir/s" "$port" 100 64 2000) # the daemon's pace
    echo "{\"trial\":$t,\"drain\":$drain,\"events_only\":$events_only,\"max_rss_kb\":$(cat "$dir/rss"),\
\"drain_open\":$drain_open,\"events_only_open\":$events_only_open,\
\"alert_during_drain_open\":$latency_backlog_open,\"alert_during_paced_drain\":$latency_backlog_paced,\
\"mosquitto_pub_msgs_per_s\":$(python3 -c "print($messages/($end-$start))"),\
\"mosquitto_pub_with_frames_msgs_per_s\":$(python3 -c "print($messages/($end_mixed-$end))"),\
\"alert_idle\":$latency_idle,\"alert_during_drain\":$latency_backlog}" | tee -a "$dir/trials"
done
python3 - "$dir/trials" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda f: statistics.median(f(r) for r in rows)
def window(drain, events_only, during):
    """Medians of one byte-window setting: its drains and its alert latency during a drain."""
    return {
        "events_per_s": med(lambda r: r[drain]["events_per_s"]),
        "sample_mb_per_s": med(lambda r: r[drain]["sample_mb_per_s"]),
        "events_only_events_per_s": med(lambda r: r[events_only]["events_per_s"]),
        "alert_p99_ms_during_drain": med(lambda r: r[during]["p99_ms"]),
        "alert_to_commit_p99_ms_during_drain": med(lambda r: r[during]["to_commit_p99_ms"]),
        "alert_forwarder_p99_ms_during_drain": med(lambda r: r[during]["forwarder_p99_ms"]),
        "disk_fsync_p99_ms_during_drain": med(lambda r: r[during]["disk_fsync_p99_ms"]),
    }
print(json.dumps({
    "trials": len(rows),
    **window("drain", "events_only", "alert_during_drain"),
    "records_per_s": med(lambda r: r["drain"]["records_per_s"]),
    "publishes": med(lambda r: r["drain"]["publishes"]),
    "drain_seconds": med(lambda r: r["drain"]["seconds"]),
    "events_delivered_seconds": med(lambda r: r["drain"]["events_seconds"]),
    "max_rss_mb": med(lambda r: r["max_rss_kb"]) / 1024,
    "mosquitto_pub_msgs_per_s": med(lambda r: r["mosquitto_pub_msgs_per_s"]),
    "mosquitto_pub_with_frames_msgs_per_s":
        med(lambda r: r["mosquitto_pub_with_frames_msgs_per_s"]),
    "alert_p99_ms_idle": med(lambda r: r["alert_idle"]["p99_ms"]),
    "alert_to_commit_p99_ms_idle": med(lambda r: r["alert_idle"]["to_commit_p99_ms"]),
    "alert_forwarder_p99_ms_idle": med(lambda r: r["alert_idle"]["forwarder_p99_ms"]),
    "disk_fsync_p50_ms_idle": med(lambda r: r["alert_idle"]["disk_fsync_p50_ms"]),
    "disk_fsync_p99_ms_idle": med(lambda r: r["alert_idle"]["disk_fsync_p99_ms"]),
    "alert_minus_disk_fsync_p99_ms_idle_per_trial_median":
        med(lambda r: r["alert_idle"]["p99_ms"] - r["alert_idle"]["disk_fsync_p99_ms"]),
    "alert_p99_ms_during_paced_drain": med(lambda r: r["alert_during_paced_drain"]["p99_ms"]),
    "alert_to_commit_p99_ms_during_paced_drain":
        med(lambda r: r["alert_during_paced_drain"]["to_commit_p99_ms"]),
    "disk_fsync_p99_ms_during_paced_drain":
        med(lambda r: r["alert_during_paced_drain"]["disk_fsync_p99_ms"]),
    "events_only_to_mosquitto_pub_per_trial_median":
        med(lambda r: r["events_only"]["events_per_s"] / r["mosquitto_pub_msgs_per_s"]),
    "with_frames_to_mosquitto_pub_per_trial_median":
        med(lambda r: r["drain"]["events_per_s"] / r["mosquitto_pub_with_frames_msgs_per_s"]),
    "with_frames_to_mosquitto_pub_event_size_per_trial_median":
        med(lambda r: r["drain"]["events_per_s"] / r["mosquitto_pub_msgs_per_s"]),
    "open_window": window("drain_open", "events_only_open", "alert_during_drain_open"),
}))
PY
