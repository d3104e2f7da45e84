#!/usr/bin/env bash
# Checks systemd/linegate.service and systemd/linegate.sysusers with systemd's own tools.
# Called from .ci/run (section `== systemd`); runnable on its own from the repository root.
#
#   systemd/check.sh [LINEGATE_BINARY]
#
# 1. `systemd-analyze verify` on the unit. verify refuses a unit whose ExecStart binary does not
#    exist, and /usr/local/bin/linegate is not installed on a build machine, so the unit is
#    verified as a copy in a temporary directory whose ExecStart points at the freshly built
#    binary (LINEGATE_BINARY; default: target/debug/linegate from `cargo build --all-features`,
#    which the test step has already built). Only that one path is rewritten; every other line
#    is checked as shipped.
# 2. `systemd-analyze security --offline=true`: the "Overall exposure level" must be <= 2.5.
# 3. `systemd-sysusers --root=TMP` creates the user and groups in an empty root: the file parses
#    and yields the user linegate in i2c, spi and dialout.
set -euo pipefail
cd "$(dirname "$0")/.."

UNIT=systemd/linegate.service
SYSUSERS=systemd/linegate.sysusers
INSTALLED_BINARY=/usr/local/bin/linegate
MAX_EXPOSURE=2.5

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

if [ $# -ge 1 ]; then
    binary=$1
else
    cargo build --locked --all-features --bin linegate
    target_dir=$(cargo metadata --format-version 1 --no-deps \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
    binary=$target_dir/debug/linegate
fi
[ -x "$binary" ] || fail "linegate binary $binary does not exist or is not executable"
binary=$(realpath "$binary")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

grep -q "^ExecStart=$INSTALLED_BINARY " "$UNIT" || fail "$UNIT: ExecStart does not start $INSTALLED_BINARY"
sed "s#^ExecStart=$INSTALLED_BINARY #ExecStart=$binary #" "$UNIT" >"$tmp/linegate.service"

echo "-- systemd-analyze verify $UNIT (ExecStart -> $binary)"
# verify prints its complaints and may still exit 0 for some of them: any output is a failure.
if ! systemd-analyze verify "$tmp/linegate.service" >"$tmp/verify.log" 2>&1 || [ -s "$tmp/verify.log" ]; then
    cat "$tmp/verify.log" >&2
    fail "systemd-analyze verify $UNIT"
fi
echo "ok"

echo "-- systemd-analyze security --offline=true $UNIT"
systemd-analyze security --offline=true "$tmp/linegate.service" >"$tmp/security.log" 2>&1 || true
grep -E '^✗' "$tmp/security.log" | cut -c1-100 || true
line=$(grep 'Overall exposure level for linegate.service:' "$tmp/security.log") \
    || { cat "$tmp/security.log" >&2; fail "no \"Overall exposure level\" line in systemd-analyze security's output"; }
exposure=$(sed -E 's/.*linegate\.service: ([0-9]+(\.[0-9]+)?) .*/\1/' <<<"$line")
echo "$line"
awk -v e="$exposure" -v max="$MAX_EXPOSURE" 'BEGIN { exit !(e ~ /^[0-9]+(\.[0-9]+)?$/ && e + 0 <= max + 0) }' \
    || fail "exposure \"$exposure\" of $UNIT is not a number <= $MAX_EXPOSURE"

echo "-- systemd-sysusers --root=TMP $SYSUSERS"
mkdir -p "$tmp/root/etc"
systemd-sysusers --root="$tmp/root" "$(realpath "$SYSUSERS")" >"$tmp/sysusers.log" 2>&1 || { cat "$tmp/sysusers.log" >&2; fail "systemd-sysusers rejected $SYSUSERS"; }
for group in i2c spi dialout; do
    grep -Eq "^$group:x:[0-9]+:(.*,)?linegate(,|$)" "$tmp/root/etc/group" \
        || fail "$SYSUSERS does not put linegate in group $group"
done
grep -q '^linegate:x:[0-9]*:[0-9]*:.*:/usr/sbin/nologin$' "$tmp/root/etc/passwd" \
    || fail "$SYSUSERS does not create the system user linegate with no login shell"
echo "ok"

echo "systemd checks: PASS"
