#!/usr/bin/env python3
"""Verdicts on `linegate probe --json` output, for the hardware-in-the-loop script hil.sh.

Standard library only (Raspberry Pi OS ships python3). Reads the probe's JSON Lines (one object
per configured source, the shape documented in board/raspberry-pi/README.md, "Probe output") and
prints one line per source: `PASS <source>: <what was seen>` or `FAIL <source>: <reason>`. Exit
status 0 when every source passes, 1 when one fails, 2 when the output itself is unusable.

    probe_check.py wiring FILE
    probe_check.py rest FILE --axis z [--seconds 60] [--rate-tolerance 0.05] [--g-tolerance 0.15]
    probe_check.py tap REST_FILE TAP_FILE [--min-peak-g 0.5] [--over-rest 3]
"""

import argparse
import json
import math
import sys

ADXL345_DEVID = 0xE5
AXES = ("x", "y", "z")
# At rest the deviation from the mean is sensor noise: a few mg at full resolution.
MAX_REST_RMS_G = 0.05


class Unusable(Exception):
    """The probe output cannot be judged: not JSON, or a field missing or of the wrong type."""


def load(path):
    """Every source object in a probe output file: JSON Lines, or one JSON array of objects."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise Unusable(f"cannot read probe output {path}: {e.strerror}") from e
    stripped = text.strip()
    try:
        if stripped.startswith("["):
            objects = json.loads(stripped)
        else:
            objects = [json.loads(line) for line in stripped.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise Unusable(f"{path}: not JSON Lines from `linegate probe --json`: {e}") from e
    if not objects or not all(isinstance(o, dict) for o in objects):
        raise Unusable(f"{path}: expected one JSON object per source, found {stripped[:80]!r}")
    return objects


def field(obj, key, kind):
    """obj[key] if it is of the given kind (a tuple of types), else Unusable naming source and key."""
    value = obj.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in kind:
        raise Unusable(f"source {obj.get('source', '?')}: field {key!r} is {value!r}")
    return value


def axes(obj, key):
    """The {"x","y","z"} object at obj[key], as floats."""
    value = field(obj, key, (dict,))
    return {a: float(field(value, a, (int, float))) for a in AXES}


def devid(obj):
    """The DEVID the probe read, as an int; the probe may write it as a number or "0xE5"."""
    value = obj.get("devid")
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError as e:
            raise Unusable(f"source {obj.get('source', '?')}: devid {value!r} is not a number") from e
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def wiring(obj, _args):
    """The source opened and the chip answered with the ADXL345's DEVID."""
    if not field(obj, "ok", (bool,)):
        return f"probe failed: {obj.get('error') or 'no error message'}"
    found = devid(obj)
    if found is None:
        return "the probe read no DEVID"
    if found != ADXL345_DEVID:
        return (f"DEVID reads 0x{found:02X}, expected 0xE5 (ADXL345): another chip or address "
                "answers; check SDO (0x53 when low, 0x1D when high) and the configured address")
    return None


def rest(obj, args):
    """Rate held without overruns, about 1 g on the vertical axis, little noise."""
    problem = wiring(obj, args)
    if problem:
        return problem
    rate = float(field(obj, "rate_hz", (int, float)))
    seconds = float(obj.get("seconds") or args.seconds)
    samples = field(obj, "samples", (int,))
    overruns = field(obj, "overruns", (int,))
    expected = rate * seconds
    if overruns:
        return f"{overruns} FIFO overruns in {seconds:g} s at {rate:g} Hz: the FIFO was not drained in time"
    if expected <= 0 or abs(samples - expected) > args.rate_tolerance * expected:
        return (f"{samples} samples in {seconds:g} s is {samples / seconds if seconds else 0:.1f} Hz, "
                f"not {rate:g} Hz within {args.rate_tolerance:.0%}")
    mean, rms = axes(obj, "mean_g"), axes(obj, "rms_g")
    magnitude = math.sqrt(sum(v * v for v in mean.values()))
    if abs(magnitude - 1.0) > args.g_tolerance:
        return (f"at rest the acceleration is {magnitude:.3f} g, not 1 g within {args.g_tolerance} g: "
                "check the range and resolution settings, or the sensor is moving")
    if abs(abs(mean[args.axis]) - 1.0) > args.g_tolerance:
        seen = ", ".join(f"{a}={mean[a]:+.3f}" for a in AXES)
        return (f"the vertical axis {args.axis} reads {mean[args.axis]:+.3f} g, not ±1 g ({seen}): "
                "lay the breakout flat, or pass the axis that points up")
    noisy = [a for a in AXES if rms[a] > MAX_REST_RMS_G]
    if noisy:
        return (f"noise at rest on {', '.join(noisy)}: rms {max(rms[a] for a in noisy):.3f} g > "
                f"{MAX_REST_RMS_G} g: the sensor is vibrating or the supply is noisy")
    return None


def describe_rest(obj):
    mean = axes(obj, "mean_g")
    return (f"{obj['samples']} samples at {obj['rate_hz']:g} Hz, 0 overruns, "
            f"mean x={mean['x']:+.3f} y={mean['y']:+.3f} z={mean['z']:+.3f} g")


def judge(objects, check, args, describe):
    """Print a line per source; return how many failed."""
    failed = 0
    for obj in objects:
        name = obj.get("source", "?")
        problem = check(obj, args)
        if problem:
            failed += 1
            print(f"FAIL {name}: {problem}")
        else:
            print(f"PASS {name}: {describe(obj)}")
    return failed


def tap(args):
    """Every source saw a peak well above its at-rest peak during the tap window."""
    rest_by_source = {o.get("source"): o for o in load(args.rest)}
    failed = 0
    for obj in load(args.tap):
        name = obj.get("source", "?")
        problem = wiring(obj, args)
        if not problem and name not in rest_by_source:
            problem = "no at-rest reading for this source to compare the tap with"
        if not problem:
            peak = max(axes(obj, "peak_g").values())
            quiet = max(axes(rest_by_source[name], "peak_g").values())
            needed = max(args.min_peak_g, args.over_rest * quiet)
            if peak < needed:
                problem = (f"no tap seen: the largest deviation was {peak:.3f} g, a tap needs "
                           f"{needed:.3f} g (at rest {quiet:.3f} g); tap the breakout firmly")
            else:
                print(f"PASS {name}: tap seen, peak {peak:.3f} g (at rest {quiet:.3f} g)")
                continue
        failed += 1
        print(f"FAIL {name}: {problem}")
    return failed


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="check", required=True)
    p = sub.add_parser("wiring")
    p.add_argument("file")
    p = sub.add_parser("rest")
    p.add_argument("file")
    p.add_argument("--axis", choices=AXES, default="z")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--rate-tolerance", type=float, default=0.05)
    p.add_argument("--g-tolerance", type=float, default=0.15)
    p = sub.add_parser("tap")
    p.add_argument("rest")
    p.add_argument("tap")
    p.add_argument("--min-peak-g", type=float, default=0.5)
    p.add_argument("--over-rest", type=float, default=3.0)
    args = parser.parse_args(argv)
    try:
        if args.check == "wiring":
            failed = judge(load(args.file), wiring, args, lambda o: f"DEVID 0x{devid(o):02X}")
        elif args.check == "rest":
            failed = judge(load(args.file), rest, args, describe_rest)
        else:
            failed = tap(args)
    except Unusable as e:
        print(f"FAIL unusable probe output: {e}")
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
