#!/usr/bin/env python3
"""Packet rate of the INA aggregators: bmv2 running ``ina/p4/aggregator.p4``, and the software engine.

The workload: one job aggregated at a leaf (fan-in ``--fan-in`` workers), ``--seqs`` sequence
numbers, every worker's packet of a seq sent one after another, seqs in order (so a slot is
freed by its aggregate before the next seq can want it: no collisions). The software engine
(:class:`ina.engine.Aggregator`) runs the packets in this process; then bmv2 and the software
engine's own process (:mod:`ina.softswitch`, what a fabric without bmv2 uses) get them as
Ethernet frames on a veth from a Python raw socket (:class:`ina.rig.SwitchRig`), ``--window`` at a time
(each window closed by sentinel frames, so nothing waits beyond it and nothing is lost). Both must
emit the same aggregates byte for byte, checked here. The figures on veths include the sender's cost
on the same 2 cores, as a worker's would be.

Prints packets/s of each, and its ratio to the in-process engine measured in the same run. The
veth rows need root; bmv2's a toolchain (P4_PREFIX, /opt/p4 or the PATH).

    sudo .venv/bin/python bench/ina.py [--seqs 4000] [--fan-in 4] [--window 64 256]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiment.report import format_table  # noqa: E402
from ina.engine import Aggregator, Dest, JobEntry, Role  # noqa: E402
from ina.p4 import build  # noqa: E402
from ina.protocol import VALUES_PER_PACKET, data_packet  # noqa: E402
from ina.rig import SwitchRig  # noqa: E402

JOB = 7
SLOTS = 4096


def workload(seqs: int, fan_in: int, seed: int = 1) -> list[bytes]:
    """Every worker's packet of every seq, seq by seq."""
    rnd = random.Random(seed)
    return [data_packet(JOB, seq, 1 << w, [rnd.randrange(-1 << 20, 1 << 20) for _ in range(VALUES_PER_PACKET)])
            for seq in range(seqs) for w in range(fan_in)]


def run_engine(packets: list[bytes], fan_in: int) -> tuple[list[bytes], float]:
    """The engine's aggregates and its wall seconds."""
    agg = Aggregator(SLOTS)
    agg.install(JOB, fan_in, Role.LEAF, out_bit=0)
    t0 = time.perf_counter()
    outs = [o for p in packets for o in agg.process(p)]
    return [o.data for o in outs if o.dest is not Dest.DROP], time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seqs", type=int, default=4000)
    ap.add_argument("--fan-in", type=int, default=4)
    ap.add_argument("--window", type=int, nargs="+", default=[64, 256])
    args = ap.parse_args()
    packets = workload(args.seqs, args.fan_in)
    want, engine_s = run_engine(packets, args.fan_in)
    assert len(want) == args.seqs, f"engine emitted {len(want)} aggregates for {args.seqs} seqs"
    engine_rate = len(packets) / engine_s
    rows = [["software engine (ina.engine, in process)", "-", f"{len(packets)}", f"{engine_s:.2f}",
             f"{engine_rate:,.0f}", "1.00", "yes"]]
    if os.geteuid() != 0:
        print("the aggregators on veths not measured: needs root")
    tc, why = build.find_toolchain()
    why = why if tc is None else build.runs(tc)
    if why:
        print(f"bmv2 not measured: {why}")
    for engine in ("software", "bmv2"):
        if os.geteuid() != 0 or (engine == "bmv2" and why):
            continue
        program = build.compile_program(tc) if engine == "bmv2" else None
        with tempfile.TemporaryDirectory() as tmp, SwitchRig(1, tmp, engine, tc, program) as rig:
            for window in args.window:
                rig.configure(0, SLOTS, {JOB: JobEntry(args.fan_in, Role.LEAF, 0)})
                out, seconds = rig.blast(0, packets, window)
                same = [data for dest, data in out if dest == "to_ps"] == want and len(out) == len(want)
                rate = len(packets) / seconds
                name = f"bmv2 simple_switch ({tc.origin})" if engine == "bmv2" else "software aggregator process"
                rows.append([f"{name}, on veths", str(window), f"{len(packets)}", f"{seconds:.2f}",
                             f"{rate:,.0f}", f"{rate / engine_rate:.2f}", "yes" if same else "NO"])
    print(f"INA aggregator packet rate: one job, fan-in {args.fan_in}, {args.seqs} seqs, "
          f"{VALUES_PER_PACKET} int32 lanes per packet")
    print(format_table(["aggregator", "window", "packets", "wall s", "packets/s", "vs engine", "same aggregates"],
                       rows))
    return 0 if all(r[-1] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
