#!/usr/bin/env python3
"""Restart-to-ready of `linegate run`: starts it RUNS times on an existing store with
NOTIFY_SOCKET pointing at a datagram socket bound here, and measures the time from spawning the
process to READY=1 (systemd's own definition of started); each run is then stopped with SIGTERM.
Prints every time and the median, in milliseconds.

usage: daemon_ready.py BIN CONFIG [RUNS=5]
"""
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def once(binary, config):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "notify.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(60)
        env = dict(os.environ, NOTIFY_SOCKET=path, LINEGATE_LOG="warn")
        start = time.monotonic()
        proc = subprocess.Popen([binary, "run", "--config", config], env=env)
        try:
            while True:
                msg = sock.recv(4096).decode()
                if "READY=1" in msg.splitlines():
                    ready_ms = (time.monotonic() - start) * 1000
                    break
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
        if code != 0:
            sys.exit(f"linegate run exited with {code}")
        return ready_ms


def main():
    binary, config = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    times = [once(binary, config) for _ in range(runs)]
    print("restart-to-ready ms: " + " ".join(f"{t:.0f}" for t in times))
    print(f"restart-to-ready median: {statistics.median(times):.0f} ms")


if __name__ == "__main__":
    main()
