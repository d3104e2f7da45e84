#!/usr/bin/env python3
"""Writes a trace (docs/contracts.md section 8) of simulated accelerometers for the daemon benchmark:
SENSORS sensors (two per machine) at RATE Hz, one `samples` line of one second per sensor and
second, for SECONDS seconds of event time, arriving 100 ms after the second ends; a tick every
10 s. The waveform is a 0.3 g vibration with a 1.2 g burst on sensor 0 for 5 s each minute (the
rule opens and closes incidents). Each sensor's second is formatted once and reused, so writing a
GiB takes seconds.

usage: daemon_trace.py SECONDS [SENSORS=8] [RATE=3200] > trace.jsonl
"""
import math
import sys

T0 = 1_700_000_000_000


def second_of(amplitude, rate, phase):
    return ",".join(
        f"{amplitude * math.sin(2 * math.pi * 157 * (i / rate) + phase):.4f}" for i in range(rate)
    )


def main():
    seconds = int(sys.argv[1])
    sensors = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    rate = int(sys.argv[3]) if len(sys.argv) > 3 else 3200
    quiet = [second_of(0.3, rate, k * 0.7) for k in range(sensors)]
    burst = second_of(1.2, rate, 0.0)
    out = sys.stdout
    for s in range(seconds):
        t0 = T0 + s * 1000
        at = t0 + 1100
        if s % 10 == 0:
            out.write(f'{{"at":{at - 50},"kind":"tick"}}\n')
        for k in range(sensors):
            data = burst if k == 0 and s % 60 < 5 else quiet[k]
            out.write(
                f'{{"at":{at},"kind":"samples","machine":"m{k // 2}","sensor":"s{k}",'
                f'"t0_ms":{t0},"rate_hz":{rate},"unit":"g","axis":"z","data":[{data}]}}\n'
            )


if __name__ == "__main__":
    main()
