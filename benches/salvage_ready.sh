#!/usr/bin/env bash
# Salvage to ready (issue 19): `linegate run` (no broker listens) started on a damaged store of about
# 1 GB, timed from spawn to READY=1 (benches/daemon_ready.py). The store is SECONDS of
# `store_day` data (8 sensors at 3200 Hz, nothing acknowledged, a budget never reached: 9000 s
# make about 1 GB); its checkpoint does not restore under a daemon's configuration (store_day
# writes no decider snapshot), so `run` recovers it: open, start-up check, salvage of the whole
# backlog into a fresh store, reopen. Each of RUNS starts on a fresh copy, with the copy's files
# dropped from the page cache first (posix_fadvise DONTNEED), as after a reboot.
# usage: benches/salvage_ready.sh [SECONDS=9000] [RUNS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_OF_DATA=${1:-9000}
RUNS=${2:-3}
cargo build --release --locked -q --bin linegate --example store_day
BIN=${CARGO_TARGET_DIR:-target}/release/linegate
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

"${CARGO_TARGET_DIR:-target}/release/examples/store_day" "$WORK/base" "$SECONDS_OF_DATA" 100000000000 > "$WORK/day.json"
echo "store: $(du -sb "$WORK/base" | cut -f1) bytes"
: > "$WORK/empty.jsonl"
# shellcheck source=benches/support/trace_config.sh
. benches/support/trace_config.sh
for run in $(seq "$RUNS"); do
    rm -rf "$WORK/s" "$WORK"/s.corrupt-*
    cp -a "$WORK/base" "$WORK/s"
    trace_config "$WORK/s" "$WORK/empty.jsonl" 0.0 > "$WORK/c.toml"
    python3 - "$WORK/s" <<'PY'
import os, sys
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        fd = os.open(os.path.join(root, f), os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
PY
    echo "run $run: $(python3 benches/daemon_ready.py "$BIN" "$WORK/c.toml" 1 | tail -1)"
done
