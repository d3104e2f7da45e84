#!/usr/bin/env bash
# The whole daemon (`linegate run`) with 8 simulated sensors at 3200 Hz (issue 6):
#  1. real time: SECONDS s of trace played at speed 1.0 under /usr/bin/time -v, RSS sampled every
#     second from /proc (steady = median of the second half), CPU per sensor = (user + sys) /
#     wall / 8;
#  2. flat out: the same trace at speed 0 (samples per second through journal, decide, checkpoint);
#  3. restart-to-ready: a backlog of BACKLOG_S seconds of the same load ingested with no forwarder
#     (everything stays queued), then `daemon_ready.py` times spawn → READY=1 five times.
# usage: benches/daemon.sh [SECONDS=60] [BACKLOG_S=5400]   (5400 s of trace is about 1 GiB)
# STAGES=3 benches/daemon.sh ... runs only the stages named. With ASSETS=FILE (an asset table,
# e.g. benches/support/features_assets.toml) appended to each configuration, every frame feature
# is computed; STORE_CACHE sets `[store] cache` (trace_config.sh). With BIN set (a linegate, e.g.
# the gateway build of `cargo build --release --no-default-features`), builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_RT=${1:-60}
BACKLOG_S=${2:-5400}
STAGES=${STAGES:-123}
if [ -z "${BIN:-}" ]; then
    cargo build --release --locked -q
    BIN=${CARGO_TARGET_DIR:-target}/release/linegate
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=benches/support/trace_config.sh
. benches/support/trace_config.sh
config() {
    trace_config "$@"
    [ -z "${ASSETS:-}" ] || cat "$ASSETS"
}

python3 benches/daemon_trace.py "$SECONDS_RT" > "$WORK/rt.jsonl"
samples=$((SECONDS_RT * 8 * 3200))

if [[ $STAGES == *1* ]]; then
echo "== 1. real time: $SECONDS_RT s, 8 sensors x 3200 Hz, speed 1.0"
config "$WORK/rt-db" "$WORK/rt.jsonl" 1.0 > "$WORK/rt.toml"
/usr/bin/time -v "$BIN" run --exit-at-end --config "$WORK/rt.toml" 2> "$WORK/rt.time" &
tpid=$!
: > "$WORK/rss"
while kill -0 "$tpid" 2> /dev/null; do
    pid=$(pgrep -P "$tpid" || true)
    # VmRSS, RssAnon, RssFile in KiB on one line
    [ -n "$pid" ] && awk '/^(VmRSS|RssAnon|RssFile):/ {printf "%s ", $2} END {print ""}' \
        "/proc/$pid/status" >> "$WORK/rss" 2> /dev/null || true
    sleep 1
done
wait "$tpid"
grep -E "Elapsed|User time|System time|Maximum resident" "$WORK/rt.time"
python3 - "$WORK/rt.time" "$WORK/rss" <<'PY'
import re, statistics, sys
t = open(sys.argv[1]).read()
user = float(re.search(r"User time \(seconds\): ([\d.]+)", t)[1])
sys_ = float(re.search(r"System time \(seconds\): ([\d.]+)", t)[1])
m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", t)
wall = int(m[1] or 0) * 3600 + int(m[2]) * 60 + float(m[3])
rows = [[int(x) for x in line.split()] for line in open(sys.argv[2]) if len(line.split()) == 3]
rss = [r[0] for r in rows]
half = rows[len(rows) // 2:] or rows
print(f"CPU {100 * (user + sys_) / wall:.2f} % of one core in all, {100 * (user + sys_) / wall / 8:.2f} % per sensor")
steady = [statistics.median(r[i] for r in half) / 1024 for i in range(3)]
print(f"RSS steady (median of the second half) {steady[0]:.1f} MiB ({steady[1]:.1f} anonymous, "
      f"{steady[2]:.1f} file pages), max {max(rss) / 1024:.1f} MiB")
PY
fi

if [[ $STAGES == *2* ]]; then
echo "== 2. flat out: the same trace at speed 0"
config "$WORK/fast-db" "$WORK/rt.jsonl" 0.0 > "$WORK/fast.toml"
start=$(date +%s.%N)
"$BIN" run --exit-at-end --config "$WORK/fast.toml" 2> /dev/null
end=$(date +%s.%N)
python3 -c "w = $end - $start; print(f'{w:.2f} s wall, {$samples / w / 1e6:.2f} M samples/s, {$SECONDS_RT / w:.0f}x real time')"
fi

[[ $STAGES == *3* ]] || exit 0
echo "== 3. restart-to-ready with a backlog of $BACKLOG_S s of the same load"
python3 benches/daemon_trace.py "$BACKLOG_S" > "$WORK/backlog.jsonl"
config "$WORK/backlog-db" "$WORK/backlog.jsonl" 0.0 > "$WORK/backlog.toml"
start=$(date +%s.%N)
"$BIN" run --exit-at-end --config "$WORK/backlog.toml" 2> /dev/null
end=$(date +%s.%N)
echo "trace $(du -m "$WORK/backlog.jsonl" | cut -f1) MiB ingested in $(python3 -c "print(f'{$end - $start:.1f}')") s; store $(du -sm "$WORK/backlog-db" | cut -f1) MiB on disk"
"$BIN" inspect --config "$WORK/backlog.toml" > "$WORK/inspect.txt"
cat "$WORK/inspect.txt"
python3 benches/daemon_ready.py "$BIN" "$WORK/backlog.toml" 5
