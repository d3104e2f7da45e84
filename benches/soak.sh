#!/usr/bin/env bash
# The soak with every fault at once (issue 42, part 5; tests/soak.rs says what it does and
# checks) for HOURS hours of faults: the daemon with a live Modbus TCP source and a trace source,
# mosquitto and an independent subscriber, SIGKILLs, power cuts (the store on the FUSE power-cut
# harness: needs root and /dev/fuse), broker restarts, a stalled broker, a silent sensor and
# control-socket clients hammering at random moments; then every accepted event and
# alert record accounted for, `reconcile` and `replay` of the export. CI runs the same test for
# 3 minutes. Prints the totals (faults by kind, events, alerts, gaps) at the end; its output is
# kept in target/soak-SEED.log.
# usage: [SEED=42] benches/soak.sh HOURS
set -euo pipefail
cd "$(dirname "$0")/.."
HOURS=${1:?usage: benches/soak.sh HOURS}
SEED=${SEED:-42}
PATH="$PWD/target/venv/bin:$PATH"
export PATH
seconds=$(python3 -c "print(int(float('$HOURS') * 3600))")
mkdir -p target
LINEGATE_SOAK_SECONDS=$seconds LINEGATE_SOAK_SEED=$SEED \
    cargo test --all-features --locked --test soak -- --nocapture 2>&1 | tee "target/soak-$SEED.log"
grep '^soak:' "target/soak-$SEED.log"
