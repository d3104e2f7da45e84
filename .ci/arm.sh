#!/usr/bin/env bash
# ARM builds without Docker: rustup's std for each target, Debian's cross gcc as linker, qemu-user
# to run the aarch64 tests. Called from .ci/run (section `== arm`); runnable on its own from the
# repository root once .ci/run's setup section has installed the packages.
#
# 1. refuses dependencies that need a target C library (libudev, aws-lc, openssl): a gateway image
#    should not need -dev packages to build us, and Cross.toml's images then need no pre-build;
# 2. builds the release binary for aarch64 and armv7, strips a copy of each and checks it is at
#    most 10 MB (10 000 000 bytes);
# 3. runs the aarch64 tests under qemu-user: the test targets that run in-process. Those that
#    execute an aarch64 program as a child (the linegate binary, or the test binary itself) cannot
#    run here: qemu-user runs the test binary, but the kernel cannot exec an aarch64 child without
#    a binfmt_misc registration, which a CI container does not have.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf)
MAX_STRIPPED_BYTES=10000000
# Test targets run under qemu (see 3. above). Add a new test target here when it runs in-process.
QEMU_TESTS=(--lib --test cwru --test cwru_frames --test rule_props --test snapshot)

# Linkers and C compilers for the cross targets only: native builds keep the host's defaults.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_LINKER=arm-linux-gnueabihf-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CC_armv7_unknown_linux_gnueabihf=arm-linux-gnueabihf-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64-static -L /usr/aarch64-linux-gnu"
# The stripping tool of each target's binutils (Debian's binutils-<triple>, pulled in by gcc-<triple>).
strip_tool() {
    case "$1" in
        aarch64-unknown-linux-gnu) echo aarch64-linux-gnu-strip ;;
        armv7-unknown-linux-gnueabihf) echo arm-linux-gnueabihf-strip ;;
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
    cargo build --release --locked --target "$target" --bin linegate
    built="$target_dir/$target/release/linegate"
    stripped="$target_dir/$target/release/linegate.stripped"
    "$(strip_tool "$target")" -o "$stripped" "$built"
    bytes=$(stat -c %s "$stripped")
    echo "$target: built in $(($(now) - start)) s; $(stat -c %s "$built") bytes, stripped $bytes bytes"
    file "$stripped" 2>/dev/null || true
    if [ "$bytes" -gt "$MAX_STRIPPED_BYTES" ]; then
        echo "FAIL: stripped $target binary is $bytes bytes, more than $MAX_STRIPPED_BYTES" >&2
        exit 1
    fi
done

echo "-- aarch64 tests under qemu-user: ${QEMU_TESTS[*]}"
start=$(now)
cargo test --locked --all-features --target aarch64-unknown-linux-gnu "${QEMU_TESTS[@]}"
echo "aarch64 tests under qemu: $(($(now) - start)) s (build included)"
