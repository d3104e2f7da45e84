#!/usr/bin/env python3
"""Times control-socket requests against a running daemon (issue 20): every EVERY_MS for SECONDS,
one request of COMMAND (`inspect` or `status`, with --json), from connect to the final
`{"exit":...}` frame, over the socket's protocol version 1 (docs/operations.md). Prints one JSON
line: count, p50, p99 and max in ms, and the failures.

usage: control_client.py SOCKET SECONDS EVERY_MS [COMMAND]
"""
import json
import socket
import sys
import time

path, seconds, every_ms = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
command = sys.argv[4] if len(sys.argv) > 4 else "inspect"
request = (json.dumps({"v": 1, "command": {command: {"json": True}}}) + "\n").encode()
took, failed = [], 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    t0 = time.monotonic()
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(request)
        buf = b""
        while b'{"exit"' not in buf:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
        s.close()
        last = buf.rstrip().rsplit(b"\n", 1)[-1]
        if json.loads(last).get("exit") == 0:
            took.append((time.monotonic() - t0) * 1000)
        else:
            failed += 1
    except OSError:
        failed += 1
    time.sleep(max(0.0, every_ms / 1000 - (time.monotonic() - t0)))
took.sort()
pick = lambda q: round(took[min(len(took) - 1, int(q * len(took)))], 2) if took else None
print(json.dumps({"command": command, "requests": len(took), "failed": failed,
                  "p50_ms": pick(0.5), "p99_ms": pick(0.99), "max_ms": round(took[-1], 2) if took else None}))
