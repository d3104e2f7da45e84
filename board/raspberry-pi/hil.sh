#!/usr/bin/env bash
# Hardware-in-the-loop check of an ADXL345 breakout on a Raspberry Pi, run by a technician on the
# Pi with the breakout attached and lying flat (README.md beside this file, "Hardware-in-the-loop").
#
#   board/raspberry-pi/hil.sh [--config /etc/linegate/linegate.toml] [--i2c 1:0x53] [--spi 0.0]
#                             [--axis z] [--seconds 60] [--tap-seconds 10] [--linegate PATH]
#
# 1. wiring: the device node of --i2c / --spi exists and can be opened; over I2C, i2cget reads
#    DEVID 0xE5 (when i2c-tools is installed); `linegate probe` opens every configured source and
#    reads DEVID 0xE5;
# 2. at rest for --seconds (60): the configured rate held within 5 %, no FIFO overrun, about 1 g
#    on the vertical axis (--axis), little noise;
# 3. tap: asks for a tap and sees a peak well above the at-rest peak.
# Prints PASS, or FAIL with the reason, as its last line; exits 0 on PASS, 1 on FAIL.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
config=/etc/linegate/linegate.toml
linegate=linegate
axis=z
seconds=60
tap_seconds=10
i2c=""
spi=""
# Where the device nodes are: /dev, except in test_hil.py, which points it at stand-ins.
dev=${HIL_DEV_DIR:-/dev}

usage() {
    sed -n '5,7p' "$0" | sed 's/^# *//'
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
        --config) config=${2:?}; shift 2 ;;
        --linegate) linegate=${2:?}; shift 2 ;;
        --axis) axis=${2:?}; shift 2 ;;
        --seconds) seconds=${2:?}; shift 2 ;;
        --tap-seconds) tap_seconds=${2:?}; shift 2 ;;
        --i2c) i2c=${2:?}; shift 2 ;;
        --spi) spi=${2:?}; shift 2 ;;
        -h | --help) usage ;;
        *) echo "unknown argument: $1" >&2; usage ;;
    esac
done

fail() {
    echo "FAIL: $*"
    exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# check_node PATH WHAT: the device node exists and this user may open it.
check_node() {
    local node=$1 what=$2
    [ -e "$node" ] || fail "$node does not exist: enable $what in config.txt (board/raspberry-pi/README.md) and reboot"
    [ -c "$node" ] || fail "$node is not a character device"
    if [ ! -r "$node" ] || [ ! -w "$node" ]; then
        fail "$node is not readable and writable by $(id -un): add the user to group $(stat -c %G "$node") or install 99-linegate.rules"
    fi
    echo "ok: $node"
}

# probe SECONDS OUT: linegate probe --json into OUT; a probe that cannot run at all is a FAIL.
probe() {
    local secs=$1 out=$2
    "$linegate" probe --config "$config" --seconds "$secs" --json >"$out" 2>"$out.err"
    local rc=$?
    # A failing source is reported inside the JSON with ok=false; only no output at all is fatal.
    if [ ! -s "$out" ]; then
        fail "\`$linegate probe --config $config --seconds $secs --json\` printed nothing (exit $rc): $(head -c 400 "$out.err")"
    fi
}

# verdict CHECK ARGS...: probe_check.py's lines, indented; its first FAIL line is the reason.
verdict() {
    local lines line rc
    lines=$(python3 "$here/probe_check.py" "$@")
    rc=$?
    while IFS= read -r line; do echo "   $line"; done <<<"$lines"
    [ $rc -eq 0 ] || fail "$(grep '^FAIL' <<<"$lines" | head -n 1 | sed 's/^FAIL //')"
}

command -v python3 >/dev/null || fail "python3 is needed (apt-get install python3)"
command -v "$linegate" >/dev/null || fail "$linegate not found: install it (README.md, Installing on a gateway) or pass --linegate PATH"
[ -r "$config" ] || fail "cannot read the configuration $config"

echo "== 1/3 wiring"
if [ -n "$i2c" ]; then
    bus=${i2c%%:*}
    address=${i2c#*:}
    check_node "$dev/i2c-$bus" "dtparam=i2c_arm=on"
    if command -v i2cget >/dev/null; then
        id=$(i2cget -y "$bus" "$address" 0x00 2>&1) \
            || fail "i2cget -y $bus $address 0x00: $id: nothing answers at $address: check SDA (pin 3), SCL (pin 5), 3V3, GND, CS tied high; SDO low is 0x53, high is 0x1D"
        [ "${id,,}" = "0xe5" ] || fail "DEVID at $address on bus $bus reads $id, expected 0xe5: another chip answers there"
        echo "ok: i2cget reads DEVID $id at $address on bus $bus"
    else
        echo "skipped: i2cget (apt-get install i2c-tools to read DEVID without linegate)"
    fi
fi
if [ -n "$spi" ]; then
    check_node "$dev/spidev$spi" "dtparam=spi=on"
fi
probe 1 "$work/wiring.json"
verdict wiring "$work/wiring.json"

echo "== 2/3 at rest for $seconds s: keep the breakout flat and still"
probe "$seconds" "$work/rest.json"
verdict rest "$work/rest.json" --axis "$axis" --seconds "$seconds"

echo "== 3/3 tap"
read -r -p "Press Enter, then tap the breakout firmly a few times within $tap_seconds s. " _ \
    || fail "no answer at the tap prompt (standard input closed)"
probe "$tap_seconds" "$work/tap.json"
verdict tap "$work/rest.json" "$work/tap.json"

echo "PASS"
