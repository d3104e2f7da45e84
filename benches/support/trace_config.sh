# Sourced by the daemon benchmarks: `trace_config STORE TRACE SPEED [STORE_KEYS]` prints a
# configuration with one trace source, the store at STORE (8 MiB cache, plus STORE_KEYS lines)
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
cache = "8MiB"
${4:-}
[metrics]
listen = "127.0.0.1:0"
[[source]]
kind = "trace"
path = "$2"
speed = $3
TOML
}
