#!/usr/bin/env bash
# Debian packages of linegate with cargo-deb, from release binaries built as for a gateway
# (`--no-default-features`): `cargo deb --no-build` per target, into target/deb/. The ARM
# binaries are those .ci/arm.sh builds; the amd64 one is built here if it is missing.
# Installs cargo-deb (crates.io) when it is not there.
#
#   packaging/deb/build.sh [TARGET...]   (default: x86_64-unknown-linux-gnu
#                                         aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf)
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf)
command -v cargo-deb >/dev/null || cargo install cargo-deb --locked --version 3.8.0 --quiet
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
mkdir -p "$target_dir/deb"
# The packaged unit starts the packaged binary.
sed 's#^ExecStart=/usr/local/bin/linegate #ExecStart=/usr/bin/linegate #' systemd/linegate.service >"$target_dir/deb/linegate.service"
grep -q '^ExecStart=/usr/bin/linegate ' "$target_dir/deb/linegate.service"
for target in "${targets[@]}"; do
    if [ ! -x "$target_dir/$target/release/linegate" ]; then
        cargo build --release --locked --no-default-features --target "$target" --bin linegate
    fi
    cargo deb --no-build --target "$target" --output "$target_dir/deb/"
done
ls -l "$target_dir"/deb/*.deb
