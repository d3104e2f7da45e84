#!/usr/bin/env bash
# ARM builds without Docker: rustup's std for each target, Debian's cross gcc as linker, qemu-user
# to run the aarch64 tests. Called from .ci/run (section `== arm`); runnable on its own from the
# repository root once .ci/run's setup section has installed the packages.
#
# 1. refuses dependencies that need a target C library (libudev, aws-lc, openssl): a gateway image
#    should not need -dev packages to build us, and Cross.toml's images then need no pre-build;
# 2. builds the release binary for aarch64 and armv7, strips a copy of each and checks it is at
#    most 10 MB (10 000 000 bytes);
# 3. replays every golden trace with both release binaries under qemu-user and compares alerts
#    and summary byte for byte with fixtures/expected/ (as tests/golden.rs does natively; alert
#    records whose spectral feature values differ in their last bit, as on armv7, as JSON with
#    numbers equal within 1e-12), and the CWRU trace with the native binary's output: the
#    decisions are the same on 64- and 32-bit ARM;
# 4. runs the aarch64 tests under qemu-user: the test targets that run in-process. Those that
#    execute an aarch64 program as a child (the linegate binary, or the test binary itself) cannot
#    run here: qemu-user runs the test binary, but the kernel cannot exec an aarch64 child without
#    a binfmt_misc registration, which a CI container does not have (3. covers the binary).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf)
MAX_STRIPPED_BYTES=10000000
# Test targets run under qemu (see 3. above). Add a new test target here when it runs in-process.
QEMU_TESTS=(--lib --test cwru --test cwru_frames --test features_reference --test rule_props --test snapshot)

# Linkers and C compilers for the cross targets only: native builds keep the host's defaults.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_LINKER=arm-linux-gnueabihf-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CC_armv7_unknown_linux_gnueabihf=arm-linux-gnueabihf-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64-static -L /usr/aarch64-linux-gnu"
# Each target's GNU triple (Debian's binutils-<triple>, libc in /usr/<triple>) and qemu-user.
gnu_triple() {
    case "$1" in
        aarch64-unknown-linux-gnu) echo aarch64-linux-gnu ;;
        armv7-unknown-linux-gnueabihf) echo arm-linux-gnueabihf ;;
    esac
}
qemu_for() {
    case "$1" in
        aarch64-unknown-linux-gnu) echo qemu-aarch64-static ;;
        armv7-unknown-linux-gnueabihf) echo qemu-arm-static ;;
    esac
}

target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
now() { date +%s; }

echo "-- dependencies needing a target C library"
for target in "${TARGETS[@]}"; do
    if cargo tree --locked --all-features --target "$target" -e normal,build --prefix none \
        | grep -E '^(libudev-sys|aws-lc-sys|aws-lc-rs|openssl-sys) ' | sort -u | grep .; then
        echo "FAIL: $target pulls in a crate that needs a C library for the target (above)" >&2
        exit 1
    fi
    echo "$target: none"
done

for target in "${TARGETS[@]}"; do
    echo "-- release build: $target"
    start=$(now)
    cargo build --release --locked --no-default-features --target "$target" --bin linegate
    built="$target_dir/$target/release/linegate"
    stripped="$target_dir/$target/release/linegate.stripped"
    "$(gnu_triple "$target")-strip" -o "$stripped" "$built"
    bytes=$(stat -c %s "$stripped")
    echo "$target: built in $(($(now) - start)) s; $(stat -c %s "$built") bytes, stripped $bytes bytes"
    file "$stripped" 2>/dev/null || true
    if [ "$bytes" -gt "$MAX_STRIPPED_BYTES" ]; then
        echo "FAIL: stripped $target binary is $bytes bytes, more than $MAX_STRIPPED_BYTES" >&2
        exit 1
    fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# replay_on TARGET TRACE CONFIG: the target's stripped binary under qemu-user replays TRACE into
# $tmp/alerts.jsonl and $tmp/summary.json; its progress line goes to $tmp/replay.err.
replay_on() {
    "$(qemu_for "$1")" -L "/usr/$(gnu_triple "$1")" "$target_dir/$1/release/linegate.stripped" \
        replay "$2" --config "$3" --out "$tmp/alerts.jsonl" --summary "$tmp/summary.json" 2>"$tmp/replay.err" \
        || { cat "$tmp/replay.err" >&2; echo "FAIL: $1: replay of $2 failed" >&2; exit 1; }
}
# same FILE WANT WHAT: byte-identical, or a FAIL naming WHAT.
same() {
    cmp "$1" "$2" || { echo "FAIL: $3 differs from $2" >&2; exit 1; }
}
# same_records FILE WANT WHAT: byte-identical; or the same JSON lines, every string, key, count
# and id exact and every fractional number equal within 1e-12 relative (a spectral feature may
# differ in its last bit on 32-bit ARM: armv7 gave env_bpfi 13.210218416658343 where x86_64 and
# aarch64 give 13.21021841665834); else a FAIL naming WHAT.
same_records() {
    cmp -s "$1" "$2" && return 0
    python3 - "$1" "$2" <<'PY' || { echo "FAIL: $3 differs from $2" >&2; exit 1; }
import json, sys
def close(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= 1e-12 * max(abs(a), abs(b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(close, a, b))
    return type(a) is type(b) and a == b
got, want = (open(p).read().splitlines() for p in sys.argv[1:3])
ok = len(got) == len(want) and all(close(json.loads(g), json.loads(w)) for g, w in zip(got, want))
print(f"{sys.argv[2]}: {'equal within 1e-12 in its numbers' if ok else 'differs'}", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}

# The CWRU trace (raw samples: feature extraction in floating point) against the native binary.
cargo build --locked --all-features --bin linegate
"$target_dir/debug/linegate" replay fixtures/traces/cwru.jsonl --config fixtures/traces/cwru.toml \
    --out "$tmp/native.alerts.jsonl" --summary "$tmp/native.summary.json" 2>/dev/null
for target in "${TARGETS[@]}"; do
    echo "-- golden traces and the CWRU trace replayed by the $target binary under qemu-user"
    start=$(now)
    count=0
    for want in fixtures/expected/*.alerts.jsonl; do
        name=$(basename "$want" .alerts.jsonl)
        config=fixtures/traces/$name.toml
        [ -f "$config" ] || config=fixtures/traces/golden.toml
        replay_on "$target" "fixtures/traces/$name.jsonl" "$config"
        same_records "$tmp/alerts.jsonl" "$want" "$target: $name alerts"
        same "$tmp/summary.json" "fixtures/expected/$name.summary.json" "$target: $name summary"
        count=$((count + 1))
    done
    replay_on "$target" fixtures/traces/cwru.jsonl fixtures/traces/cwru.toml
    same "$tmp/alerts.jsonl" "$tmp/native.alerts.jsonl" "$target: CWRU alerts (native x86_64 run)"
    same "$tmp/summary.json" "$tmp/native.summary.json" "$target: CWRU summary (native x86_64 run)"
    echo "$target: $count golden traces and CWRU identical ($(($(now) - start)) s)"
done

echo "-- aarch64 tests under qemu-user: ${QEMU_TESTS[*]}"
start=$(now)
cargo test --locked --all-features --target aarch64-unknown-linux-gnu "${QEMU_TESTS[@]}"
echo "aarch64 tests under qemu: $(($(now) - start)) s (build included)"
