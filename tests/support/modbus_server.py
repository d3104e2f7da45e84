#!/usr/bin/env python3
"""A Modbus server (pymodbus 3.16) for linegate's Modbus tests and benchmark.

It serves recorded vibration: the first `samples` record of fixtures/traces/cwru.jsonl (CWRU
Bearing Data Center recordings, see fixtures/cwru/README.md). Every read that starts at
address 100 advances to the next sample. Holding and input registers share one map:

  100      i16  round(x * 1000)           (scale 0.001 g)
  101-102  f32  x, high word first        (word order big)
  103-104  f32  x, low word first         (word order little)
  105-106  i32  round(x * 1e6), low word first
  107      u16  index of the sample served (mod 65536)

and a vibration velocity the device measures itself, in mm/s (an ISO 20816 velocity transmitter):

  110-111  f32  VELOCITIES[n % 5], high word first; every read that starts at 110 advances n

Any other address is answered with exception 2 (illegal data address).

  --tcp PORT             Modbus TCP on 127.0.0.1:PORT
  --rtu PATH [--baud B]  Modbus RTU on a serial device (one end of a socat pty pair)
  --unit N               the device's unit id (default 1)
  --garbage-every N      replace every Nth response with random bytes (resync tests)
  --silent               TCP only: accept connections and never answer (timeout tests)
"""

import argparse
import asyncio
import json
import math
import random
import struct
import sys
from pathlib import Path

from pymodbus import FramerType
from pymodbus.server import ModbusSerialServer, ModbusTcpServer
from pymodbus.simulator import SimData, SimDevice
from pymodbus.simulator.simutils import DataType

BASE = 100
COUNT = 8
VELOCITY = 110
# mm/s, exact in f32: zones A, B, C, D, D of an ISO 20816-3 group 2 machine on a rigid foundation.
VELOCITIES = [1.0, 2.0, 3.0, 4.5, 6.0]
ROOT = Path(__file__).resolve().parents[2]


def load_samples():
    with open(ROOT / "fixtures" / "traces" / "cwru.jsonl", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record.get("kind") == "samples":
                return record["data"]
    sys.exit("no samples record in fixtures/traces/cwru.jsonl")


def encode(x, n):
    """The 8 registers for sample value x at index n."""
    hi_lo = struct.unpack(">HH", struct.pack(">f", x))
    i16 = int(math.floor(x * 1000 + 0.5)) & 0xFFFF
    i32 = int(math.floor(x * 1e6 + 0.5)) & 0xFFFFFFFF
    return [i16, hi_lo[0], hi_lo[1], hi_lo[1], hi_lo[0], i32 & 0xFFFF, i32 >> 16, n & 0xFFFF]


def velocity(n):
    """The 2 registers of the velocity served at read n."""
    return list(struct.unpack(">HH", struct.pack(">f", VELOCITIES[n % len(VELOCITIES)])))


async def silent(port):
    async def swallow(reader, writer):
        while await reader.read(4096):
            pass
        writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tcp", type=int)
    p.add_argument("--rtu")
    p.add_argument("--baud", type=int, default=115200)
    p.add_argument("--unit", type=int, default=1)
    p.add_argument("--garbage-every", type=int, default=0)
    p.add_argument("--silent", action="store_true")
    args = p.parse_args()
    if args.silent:
        await silent(args.tcp)
        return

    samples = load_samples()
    served = {"n": 0, "responses": 0, "velocity": 0}

    async def play(function_code, start_address, address, count, registers, set_values):
        if function_code in (3, 4) and address == BASE and set_values is None:
            n = served["n"]
            registers[BASE - start_address : BASE - start_address + COUNT] = encode(
                samples[n % len(samples)], n
            )
            served["n"] = n + 1
        if function_code in (3, 4) and address == VELOCITY and set_values is None:
            v = served["velocity"]
            registers[VELOCITY - start_address : VELOCITY - start_address + 2] = velocity(v)
            served["velocity"] = v + 1
        return None

    rng = random.Random(5)

    def trace_packet(sending, data):
        if sending and args.garbage_every:
            served["responses"] += 1
            if served["responses"] % args.garbage_every == 0:
                return bytes(rng.randrange(256) for _ in range(len(data) + 3))
        return data

    device = SimDevice(
        id=args.unit,
        simdata=[
            SimData(BASE, values=encode(samples[0], 0), datatype=DataType.REGISTERS),
            SimData(VELOCITY, values=velocity(0), datatype=DataType.REGISTERS),
        ],
        action=play,
    )
    if args.tcp is not None:
        server = ModbusTcpServer(device, address=("127.0.0.1", args.tcp), trace_packet=trace_packet)
    else:
        server = ModbusSerialServer(
            device,
            framer=FramerType.RTU,
            port=args.rtu,
            baudrate=args.baud,
            parity="N",
            trace_packet=trace_packet,
        )
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
