# shellcheck shell=bash
# Sourced by the daemon benchmarks: `trace_config STORE TRACE SPEED [STORE_KEYS]` prints a
# configuration with one trace source, the store at STORE (sled's cache STORE_CACHE, 8 MiB
# unless set, plus STORE_KEYS lines)
# and metrics on an ephemeral port.
trace_config() {
    cat <<TOML
[gateway]
id = "gw-bench"
[rule]
threshold = 0.9
window = "2m"
count = 3
[store]
path = "$1"
cache = "${STORE_CACHE:-8MiB}"
${4:-}
[metrics]
listen = "127.0.0.1:0"
[[source]]
kind = "trace"
path = "$2"
speed = $3
TOML
}

# `events_bench_setup`: builds linegate and gen_trace (release), sets BIN and GEN to them and
# WORK to a temporary directory removed at exit.
# With BIN and GEN set already, builds nothing and uses those.
events_bench_setup() {
    if [ -z "${BIN:-}" ] || [ -z "${GEN:-}" ]; then
        cargo build --release --locked -q --bin linegate --example gen_trace
    fi
    # shellcheck disable=SC2034 # used by the scripts that source this
    BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/linegate}
    # shellcheck disable=SC2034
    GEN=${GEN:-${CARGO_TARGET_DIR:-target}/release/examples/gen_trace}
    WORK=$(mktemp -d)
    # shellcheck disable=SC2064 # WORK is expanded now, on purpose
    trap "rm -rf '$WORK'" EXIT
}
