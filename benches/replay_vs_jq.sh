#!/usr/bin/env bash
# Side-by-side figures for the README (issue: replay performance):
#  1. replay of a 1M-line JSONL trace vs `jq -c .at` merely parsing the same file (hyperfine);
#  2. peak RSS of replay on a 24-hour, 50-machine trace (/usr/bin/time -v).
# Needs: hyperfine, jq (Debian packages). Writes its traces under ${BENCH_DIR:-target/bench}.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BENCH_DIR:-target/bench}
mkdir -p "$dir"
cargo build --release --quiet --bin linegate --example gen_trace
bin=target/release/linegate
sed 's/^id = .*/id = "gw-bench"/' fixtures/traces/golden.toml > "$dir/bench.toml"

# 50 machines x 1 sensor x 20000 s = 1M events (plus ticks and 0.1 % duplicates).
[ -s "$dir/1m.jsonl" ] || target/release/examples/gen_trace 50 20000 1 > "$dir/1m.jsonl"
echo "== 1M lines: $(wc -l < "$dir/1m.jsonl") lines, $(du -h "$dir/1m.jsonl" | cut -f1)"
hyperfine --warmup 1 --runs 7 --export-json "$dir/jq.json" \
    "jq -c .at $dir/1m.jsonl > /dev/null" \
    "$bin replay $dir/1m.jsonl --config $dir/bench.toml --out $dir/alerts.jsonl"
python3 - "$dir/jq.json" "$(grep -c . "$dir/1m.jsonl")" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
lines = int(sys.argv[2])
jq, lg = (x["median"] for x in r)
print(f"medians: jq {jq:.3f} s, linegate {lg:.3f} s ({lines / lg / 1e6:.2f} M lines/s); "
      f"linegate is {jq / lg:.1f}x faster")
PY

# 24 hours, 50 machines, 1 sensor each: 4.32M events.
[ -s "$dir/24h.jsonl" ] || target/release/examples/gen_trace 50 86400 1 > "$dir/24h.jsonl"
echo "== 24 h x 50 machines: $(wc -l < "$dir/24h.jsonl") lines, $(du -h "$dir/24h.jsonl" | cut -f1)"
/usr/bin/time -v "$bin" replay "$dir/24h.jsonl" --config "$dir/bench.toml" \
    --out "$dir/alerts24.jsonl" --summary "$dir/summary24.json" 2>&1 \
    | grep -E "linegate:|Elapsed|Maximum resident"
