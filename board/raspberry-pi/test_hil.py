#!/usr/bin/env python3
"""Runs hil.sh end to end against a stand-in `linegate` and `i2cget` (no hardware needed).

The stand-in linegate prints the next canned probe output (JSON Lines, the documented shape) on
each call and records its arguments; the stand-in i2cget prints a DEVID. Each test is one
situation a technician can meet and checks hil.sh's last line: PASS, or FAIL with the reason.
Run by board/check.sh in CI: `python3 -m unittest board/raspberry-pi/test_hil.py`.
"""

import json
import os
import pathlib
import subprocess
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
HIL = HERE / "hil.sh"

FAKE_LINEGATE = """#!/usr/bin/env bash
# Stand-in for `linegate probe`: prints probe-N.json for the N-th call.
n=$(cat "$FAKE/calls" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" >"$FAKE/calls"
echo "$*" >>"$FAKE/args"
cat "$FAKE/probe-$n.json" 2>/dev/null
"""

FAKE_I2CGET = """#!/usr/bin/env bash
# Stand-in for i2cget: prints $FAKE/devid, or fails like a NACK when it is missing.
[ -f "$FAKE/devid" ] || { echo "Error: Read failed" >&2; exit 1; }
cat "$FAKE/devid"
"""


def source(**changes):
    """A healthy I2C source: 60 s at 800 Hz at rest, breakout flat (z up)."""
    obj = {
        "source": "i2c:/dev/i2c-1@0x53", "ok": True, "devid": 229, "rate_hz": 800.0,
        "seconds": 60.0, "samples": 48000, "overruns": 0,
        "mean_g": {"x": 0.012, "y": -0.020, "z": 1.004},
        "rms_g": {"x": 0.004, "y": 0.004, "z": 0.005},
        "peak_g": {"x": 0.015, "y": 0.014, "z": 0.018}, "error": None,
    }
    obj.update(changes)
    return obj


WIRING = source(seconds=1.0, samples=800)
TAP = source(seconds=10.0, samples=8000, peak_g={"x": 0.4, "y": 0.6, "z": 2.7})


class HilScript(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.fake = pathlib.Path(self.dir.name)
        self.bin = self.fake / "bin"
        self.bin.mkdir()
        for name, text in (("linegate", FAKE_LINEGATE), ("i2cget", FAKE_I2CGET)):
            path = self.bin / name
            path.write_text(text)
            path.chmod(0o755)
        self.config = self.fake / "linegate.toml"
        self.config.write_text("# read by the stand-in only\n")
        # Device nodes that open: /dev/null stands in for /dev/i2c-1 and /dev/spidev0.0.
        self.dev = self.fake / "dev"
        self.dev.mkdir()
        for node in ("i2c-1", "spidev0.0"):
            (self.dev / node).symlink_to("/dev/null")

    def tearDown(self):
        self.dir.cleanup()

    def run_hil(self, probes, *args, devid="0xe5", stdin="\n"):
        """hil.sh with these probe outputs (one list of sources, or raw text, per call)."""
        for stale in self.fake.glob("probe-*.json"):
            stale.unlink()
        for stale in ("calls", "args", "devid"):
            (self.fake / stale).unlink(missing_ok=True)
        for n, probe in enumerate(probes, start=1):
            text = probe if isinstance(probe, str) else "".join(json.dumps(s) + "\n" for s in probe)
            (self.fake / f"probe-{n}.json").write_text(text)
        if devid is not None:
            (self.fake / "devid").write_text(devid + "\n")
        env = dict(os.environ, FAKE=str(self.fake), HIL_DEV_DIR=str(self.dev),
                   PATH=f"{self.bin}:{os.environ['PATH']}")
        done = subprocess.run(
            ["bash", str(HIL), "--config", str(self.config), *args], input=stdin, env=env,
            capture_output=True, text=True, timeout=60, check=False)
        lines = done.stdout.strip().splitlines()
        return done.returncode, lines[-1] if lines else "", done.stdout + done.stderr

    def assert_fails(self, probes, reason, *args, **kw):
        rc, last, out = self.run_hil(probes, *args, **kw)
        self.assertEqual(rc, 1, out)
        self.assertTrue(last.startswith("FAIL"), out)
        self.assertIn(reason, last, out)

    def test_healthy_breakout_passes_and_probe_gets_the_documented_arguments(self):
        rc, last, out = self.run_hil([[WIRING], [source()], [TAP]])
        self.assertEqual((rc, last), (0, "PASS"), out)
        args = (self.fake / "args").read_text().splitlines()
        self.assertEqual(args, [f"probe --config {self.config} --seconds {s} --json" for s in (1, 60, 10)])

    def test_probe_that_prints_a_json_array_is_read_too(self):
        array = json.dumps([source()])
        rc, last, out = self.run_hil([[WIRING], array, [TAP]])
        self.assertEqual((rc, last), (0, "PASS"), out)

    def test_i2c_and_spi_nodes_and_devid_checked_before_the_probe(self):
        rc, last, out = self.run_hil([[WIRING], [source()], [TAP]], "--i2c", "1:0x53", "--spi", "0.0")
        self.assertEqual((rc, last), (0, "PASS"), out)
        self.assertIn("ok: i2cget reads DEVID 0xe5 at 0x53 on bus 1", out)
        self.assertIn(f"ok: {self.dev}/spidev0.0", out)

    def test_missing_i2c_node_names_the_overlay(self):
        self.assert_fails([], "i2c-3 does not exist: enable dtparam=i2c_arm=on", "--i2c", "3:0x53")

    def test_missing_spi_node_names_the_overlay(self):
        self.assert_fails([], "spidev0.1 does not exist: enable dtparam=spi=on", "--spi", "0.1")

    def test_nothing_answering_on_the_bus_names_the_wiring(self):
        self.assert_fails([], "nothing answers at 0x1D: check SDA (pin 3)", "--i2c", "1:0x1D", devid=None)

    def test_another_chip_at_the_address_fails(self):
        self.assert_fails([], "DEVID at 0x53 on bus 1 reads 0x68, expected 0xe5", "--i2c", "1:0x53",
                          devid="0x68")

    def test_probe_error_is_the_reason(self):
        broken = source(ok=False, devid=None, error="/dev/i2c-1: permission denied: add the user to group i2c")
        self.assert_fails([[broken]], "probe failed: /dev/i2c-1: permission denied")

    def test_wrong_devid_names_the_address_pin(self):
        self.assert_fails([[source(devid="0xE6")]], "DEVID reads 0xE6, expected 0xE5")

    def test_overruns_fail(self):
        self.assert_fails([[WIRING], [source(overruns=3)], [TAP]], "3 FIFO overruns in 60 s at 800 Hz")

    def test_rate_not_held_fails(self):
        self.assert_fails([[WIRING], [source(samples=40000)], [TAP]], "is 666.7 Hz, not 800 Hz within 5%")

    def test_breakout_on_its_side_names_the_axis(self):
        tilted = source(mean_g={"x": 0.99, "y": 0.01, "z": 0.05})
        self.assert_fails([[WIRING], [tilted], [TAP]], "the vertical axis z reads +0.050 g")
        rc, last, out = self.run_hil([[WIRING], [tilted], [TAP]], "--axis", "x")
        self.assertEqual((rc, last), (0, "PASS"), out)

    def test_wrong_scale_fails(self):
        self.assert_fails([[WIRING], [source(mean_g={"x": 0, "y": 0, "z": 0.25})], [TAP]],
                          "at rest the acceleration is 0.250 g, not 1 g")

    def test_no_tap_fails(self):
        self.assert_fails([[WIRING], [source()], [source(seconds=10.0, samples=8000)]], "no tap seen")

    def test_closed_stdin_at_the_tap_prompt_fails(self):
        self.assert_fails([[WIRING], [source()]], "no answer at the tap prompt", stdin="")

    def test_probe_printing_nothing_fails(self):
        self.assert_fails([], "printed nothing")

    def test_garbage_probe_output_fails(self):
        self.assert_fails(["probing i2c-1... ok\n"], "unusable probe output")

    def test_missing_field_fails_naming_it(self):
        partial = source()
        del partial["overruns"]
        self.assert_fails([[WIRING], [partial]], "field 'overruns' is None")


if __name__ == "__main__":
    unittest.main()
