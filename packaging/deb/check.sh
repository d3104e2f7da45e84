#!/usr/bin/env bash
# Checks the Debian packages packaging/deb/build.sh made (run as root on a Debian machine):
# lintian finds no error in any; the amd64 one installs with dpkg -i (files, owners and modes,
# the user, `linegate check-config` of the shipped configuration, `systemd-analyze verify` of the
# installed unit), then is removed and purged, and nothing of it is left.
set -euo pipefail
cd "$(dirname "$0")/../.."
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
fail() { echo "FAIL: $*" >&2; exit 1; }

for deb in "$target_dir"/deb/linegate_*.deb; do
    echo "-- lintian $(basename "$deb")"
    lintian --fail-on error "$deb" || fail "lintian errors in $deb"
done

deb=$(ls "$target_dir"/deb/linegate_*_amd64.deb)
echo "-- dpkg -i $(basename "$deb")"
dpkg -i "$deb"
mode() { stat -c '%a %U:%G' "$1"; }
expect() { [ "$(mode "$1")" = "$2" ] || fail "$1 is $(mode "$1"), not $2"; echo "ok $1 $2"; }
expect /usr/bin/linegate "755 root:root"
expect /lib/systemd/system/linegate.service "644 root:root"
expect /usr/lib/sysusers.d/linegate.conf "644 root:root"
expect /usr/lib/tmpfiles.d/linegate.conf "644 root:root"
expect /lib/udev/rules.d/99-linegate.rules "644 root:root"
expect /etc/linegate/linegate.toml "640 root:linegate"
expect /etc/linegate/credentials "700 root:root"
getent passwd linegate >/dev/null || fail "no user linegate"
id -nG linegate | grep -qw i2c || fail "linegate is not in group i2c"
grep -q '/etc/linegate/linegate.toml' /var/lib/dpkg/info/linegate.conffiles || fail "the configuration is not a conffile"
linegate check-config /etc/linegate/linegate.toml
out=$(systemd-analyze verify /lib/systemd/system/linegate.service 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify: $out"
echo "ok systemd-analyze verify"
linegate --version

echo "-- dpkg -r, then dpkg -P"
dpkg -r linegate
[ ! -e /usr/bin/linegate ] || fail "/usr/bin/linegate left after remove"
[ -e /etc/linegate/linegate.toml ] || fail "remove took the configuration (only purge should)"
dpkg -P linegate
for p in /usr/bin/linegate /etc/linegate /var/lib/linegate /lib/systemd/system/linegate.service \
    /usr/lib/sysusers.d/linegate.conf /usr/lib/tmpfiles.d/linegate.conf /lib/udev/rules.d/99-linegate.rules; do
    [ ! -e "$p" ] || fail "$p left after purge"
done
dpkg -s linegate >/dev/null 2>&1 && fail "dpkg still knows linegate"
echo "packages: PASS"
