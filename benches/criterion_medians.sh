#!/usr/bin/env bash
# Prints the median of each criterion benchmark from its last run (target/criterion), with the
# throughput it implies. Run after `cargo bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import json, pathlib
for est in sorted(pathlib.Path("target/criterion").glob("*/*/new/estimates.json")):
    bench = json.loads((est.parent / "benchmark.json").read_text())
    median_ns = json.loads(est.read_text())["median"]["point_estimate"]
    elements = (bench.get("throughput") or {}).get("Elements")
    rate = f", {elements / median_ns * 1e3:.2f} M elements/s" if elements else ""
    print(f"{bench['group_id']}/{bench['function_id']}: median {median_ns / 1e6:.1f} ms{rate}")
PY
