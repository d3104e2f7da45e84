#!/usr/bin/env bash
# Peers side by side (issue 24, part 4): linegate's rule (docs/contracts.md section 4, with
# fixtures/traces/golden.toml's [rule] and [time]) decided by `linegate replay`, by Apache Flink
# (PyFlink 2.x, SQL only: benches/peers/flink_rule.py, formulations `over` and `hop`,
# parallelism 1 and 2) and by Bytewax (benches/peers/bytewax_rule.py, 1 and 2 workers), on the
# same two generated traces.
#
#   benches/peers.sh [LINES_SMALL] [LINES_LARGE]     (default 1000000 4000000; REPS=3)
#
# For every run, /usr/bin/time -v gives user+sys CPU seconds, wall seconds and peak RSS (for
# Flink: its JVM's CPU counts too, the job reaps it; peak RSS is Python's plus the JVM's).
# Steady state, lines per CPU-second = (lines_large - lines_small) / (cpu_large - cpu_small):
# what one more line costs, without start-up (JVM, planning, Python imports). Each peer run is
# paired with a linegate run just before it. Each peer's incidents are checked against
# linegate's alert records. Writes under ${BENCH_DIR:-target/peers}.
set -euo pipefail
cd "$(dirname "$0")/.."
lines_small=${1:-1000000}
lines_large=${2:-4000000}
reps=${REPS:-3}
machines=50
dir=${BENCH_DIR:-target/peers}
venv=target/peers-venv
mkdir -p "$dir"

# 1. The peers, in a virtual environment of their own (a second run installs nothing).
if ! "$venv/bin/python" -c 'import pyflink, bytewax' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'apache-flink==2.*' bytewax
fi
py=$venv/bin/python

# 2. linegate and the trace generator (release).
cargo build --release --quiet --bin linegate --example gen_trace
bin=target/release/linegate
sed 's/^id = .*/id = "gw-bench"/' fixtures/traces/golden.toml > "$dir/bench.toml"
config=$dir/bench.toml

# 3. Two traces of the same load, different lengths (one event per machine and second, plus
#    ticks and 0.1 % duplicates: about 1.0012 lines per machine-second).
declare -A trace lines
for size in small large; do
    want=$([ "$size" = small ] && echo "$lines_small" || echo "$lines_large")
    secs=$((want / machines))
    trace[$size]=$dir/trace-${machines}x${secs}.jsonl
    [ -s "${trace[$size]}" ] || target/release/examples/gen_trace "$machines" "$secs" 1 > "${trace[$size]}"
    lines[$size]=$(wc -l < "${trace[$size]}")
    echo "== $size trace: ${trace[$size]}, ${lines[$size]} lines, $(du -h "${trace[$size]}" | cut -f1)"
done

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "command: benches/peers.sh $lines_small $lines_large (REPS=$reps)"
    echo "pyflink: $("$py" -c 'import importlib.metadata as m; print(m.version("apache-flink"))')"
    echo "flink: $(ls "$("$py" -c 'import pyflink, os; print(os.path.dirname(pyflink.__file__))')"/lib/flink-dist-*.jar | sed 's/.*flink-dist-//; s/\.jar$//')"
    echo "bytewax: $("$py" -c 'import importlib.metadata as m; print(m.version("bytewax"))')"
    echo "java: $(java -version 2>&1 | head -1)"
    echo "python: $("$py" --version)"
} | tee "$dir/versions.txt"

# measure ENGINE FORM PAR REP SIZE CMD...: one run under nice and /usr/bin/time -v, one row of
# $dir/runs.tsv: rep, trace, engine, formulation, parallelism, user s, sys s, wall s, peak RSS kB.
runs=$dir/runs.tsv
: > "$runs"
measure() {
    local engine=$1 form=$2 par=$3 rep=$4 size=$5 stats=
    shift 5
    rm -f "$dir/stats.json"
    [ "$engine" = flink ] && stats=$dir/stats.json
    nice -n 5 /usr/bin/time -v -o "$dir/time.txt" "$@" > "$dir/run.log" 2>&1 \
        || { echo "FAILED: $engine $form p=$par ($*):"; tail -20 "$dir/run.log"; return 1; }
    echo "$rep $size $engine $form $par $("$py" benches/peers/report.py time "$dir/time.txt" $stats)" \
        | tee -a "$runs"
}

# peer_cmd ENGINE FORM PAR SIZE OUT: the command line of one peer run.
peer_cmd() {
    case $1 in
        flink) echo "$py benches/peers/flink_rule.py ${trace[$4]} --config $config --out $5 --formulation $2 -p $3 --stats $dir/stats.json" ;;
        bytewax) echo "$py benches/peers/bytewax_rule.py ${trace[$4]} --config $config --out $5 -w $3" ;;
    esac
}

peers=("flink over 1" "flink over 2" "flink hop 1" "flink hop 2" "bytewax stateful 1" "bytewax stateful 2")

# 4. The runs, paired: linegate, then a peer, on the same trace; every pair on both traces.
for rep in $(seq 1 "$reps"); do
    for peer in "${peers[@]}"; do
        read -r engine form par <<< "$peer"
        for size in small large; do
            measure linegate replay 1 "$rep" "$size" \
                "$bin" replay "${trace[$size]}" --config "$config" --out "$dir/alerts-$size.jsonl"
            # shellcheck disable=SC2046
            measure "$engine" "$form" "$par" "$rep" "$size" \
                $(peer_cmd "$engine" "$form" "$par" "$size" "$dir/incidents-$engine-$form-$par-$size.csv")
        done
    done
done

# 5. The same incidents? Each peer's last output per trace against linegate's alert records.
echo "== incidents against linegate replay's alert records"
status=0
for peer in "${peers[@]}"; do
    read -r engine form par <<< "$peer"
    for size in small large; do
        printf '%s %s p=%s, %s trace: ' "$engine" "$form" "$par" "$size"
        "$py" benches/peers/report.py check "$dir/alerts-$size.jsonl" \
            "$dir/incidents-$engine-$form-$par-$size.csv" || status=1
    done
done

# 6. The table. Parallelism means Flink's parallelism, Bytewax's worker threads.
echo "== summary"
"$py" benches/peers/report.py summary "$runs" "${lines[small]}" "${lines[large]}" | tee "$dir/summary.md"
exit $status
