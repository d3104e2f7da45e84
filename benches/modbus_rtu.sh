#!/usr/bin/env bash
# Modbus RTU reads/s over a socat pty pair at 115200 baud against the wire limit for the same
# block (src/source/modbus/wire.rs), with pymodbus (tests/support/modbus_server.py) as the device.
# Needs: socat (Debian) and pymodbus 3.16.1 (pip), as .ci/run installs them.
# Usage: benches/modbus_rtu.sh [SECONDS_PER_TRIAL] [TRIALS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-3}
trials=${2:-5}
dir=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
cargo build --release --quiet --example modbus_poll

socat pty,raw,echo=0,link="$dir/server-end" pty,raw,echo=0,link="$dir/client-end" 2>/dev/null &
pids+=($!)
for _ in $(seq 100); do [ -e "$dir/client-end" ] && [ -e "$dir/server-end" ] && break; sleep 0.05; done
python3 tests/support/modbus_server.py --rtu "$dir/server-end" --baud 115200 2>/dev/null &
pids+=($!)

cat > "$dir/bench.toml" <<TOML
[gateway]
id = "gw-bench"

[[source]]
kind = "modbus-rtu"
path = "$dir/client-end"
baud = 115200
parity = "none"
machine = "bench"
timeout = "500ms"

[[source.block]]
address = 100
count = 8

[[source.block.channel]]
sensor = "bench-z"
type = "f32"
offset = 1
unit = "g"
TOML

# Wait until the server answers (a probe of one read), then measure.
for _ in $(seq 100); do
    ${CARGO_TARGET_DIR:-target}/release/examples/modbus_poll "$dir/bench.toml" 0.2 1 >/dev/null 2>&1 && break
    sleep 0.1
done
# CPU time of linegate's side (user + system) against wall time tells who the bottleneck is.
/usr/bin/time -f "client CPU: %U s user + %S s system in %e s wall" \
    ${CARGO_TARGET_DIR:-target}/release/examples/modbus_poll "$dir/bench.toml" "$seconds" "$trials"
