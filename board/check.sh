#!/usr/bin/env bash
# Checks the board bring-up scripts without hardware. Called from .ci/run (section `== board`);
# runnable on its own from the repository root.
#
# 1. syntax: `bash -n` on every shell script under board/, `python3 -m py_compile` on the Python;
# 2. shellcheck on the shell scripts (when installed: .ci/run installs it);
# 3. board/raspberry-pi/test_hil.py: hil.sh end to end against a stand-in linegate and i2cget.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t shell_scripts < <(find board -name '*.sh' | sort)
mapfile -t python_files < <(find board -name '*.py' | sort)

echo "-- bash -n: ${shell_scripts[*]}"
for f in "${shell_scripts[@]}"; do bash -n "$f"; done
echo "-- py_compile: ${python_files[*]}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "${python_files[@]}"; do PYTHONPYCACHEPREFIX=$tmp python3 -m py_compile "$f"; done
if command -v shellcheck >/dev/null; then
    echo "-- shellcheck"
    shellcheck "${shell_scripts[@]}" systemd/check.sh .ci/arm.sh .ci/run packaging/deb/*.sh packaging/deb/maintainer-scripts/*
elif [ "${CI:-}" = true ]; then
    echo "FAIL: shellcheck is not installed (.ci/run's setup section installs it)" >&2
    exit 1
else
    echo "-- shellcheck: not installed, skipped (apt-get install shellcheck)"
fi
echo "-- hil.sh against stand-ins"
PYTHONDONTWRITEBYTECODE=1 python3 -m unittest board/raspberry-pi/test_hil.py
