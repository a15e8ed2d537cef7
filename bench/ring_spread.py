#!/usr/bin/env python3
"""What keeps a ring from its bound: the fabric's size, the machines it spans, or its hosts' queues.

One 8-rank ring alone in the first rack of leaf-spines of growing size, its ranks over 2, 3 or 4
machines; per fabric, port kind and host queue depth, its time against its bound, TCP
retransmissions, CPU and the userspace datapath's PMD loop. Details: ``docs/benchmarks.md``
(``bench/ring_spread.py``).

    sudo .venv/bin/python bench/ring_spread.py [--racks 2,24] [--ports afxdp,system]
        [--host-queues 100,1000] [--spreads 2,3,4] [--scale 500] [--dilation 3]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from common.errors import TestbedError  # noqa: E402
from emulator.capabilities import detect, require_root, require_tools  # noqa: E402
from emulator.cpu import CpuSampler  # noqa: E402
from emulator.net import EmulatedNetwork, NetOptions  # noqa: E402
from emulator.one_job import OneJob, run_job  # noqa: E402
from emulator.ports import resolve_port_type  # noqa: E402
from emulator.variants import switch_ports  # noqa: E402
from experiment.reporting.report import format_table  # noqa: E402
from jobs.models import get_model, scaled_buckets  # noqa: E402
from jobs.records import measured_window_s  # noqa: E402
from jobs.steps import job_bound_s  # noqa: E402
from measure.footprint import footprint, mem_available_bytes  # noqa: E402
from topo import leaf_spine  # noqa: E402

HOSTS_PER_RACK = 4
SPINES = 2
RING_RANKS = 8

_ITERATIONS = re.compile(r"^\s*Iterations:\s+(\d+)\s+\(\s*([\d.]+)\s+us/it\)", re.M)
_SLEEPS = re.compile(r"^\s*- sleep iterations:\s+(\d+)", re.M)
_SLEEP_US = re.compile(r"^\s*Sleep time \(us\):\s+(\d+)", re.M)


def pmd_loop(text: str) -> dict | None:
    """The PMD threads' loop from ``dpif-netdev/pmd-perf-show``, summed over every PMD thread:
    ``iterations``, ``us_per_iteration`` (mean length of one pass over the ports, sleep included),
    ``sleep_share`` (the iterations that ended in a sleep) and ``sleep_us`` (mean sleep per
    iteration); None where it shows no PMD thread."""
    its = [(int(n), float(us)) for n, us in _ITERATIONS.findall(text)]
    n = sum(c for c, _ in its)
    if not n:
        return None
    return {"iterations": n, "us_per_iteration": sum(c * us for c, us in its) / n,
            "sleep_share": sum(int(x) for x in _SLEEPS.findall(text)) / n,
            "sleep_us": sum(int(x) for x in _SLEEP_US.findall(text)) / n}


def pmd_perf(clear: bool = False) -> str:
    """``pmd-perf-show``'s text (``clear``: reset the counters instead)."""
    cmd = "pmd-stats-clear" if clear else "pmd-perf-show"
    return subprocess.run(["ovs-appctl", f"dpif-netdev/{cmd}"], capture_output=True, text=True).stdout


def ring_ranks(spread: int) -> tuple[str, ...]:
    """The ring's machines in rank order: its 8 ranks dealt in blocks over the first rack's first
    ``spread`` machines (2: 4 + 4; 3: 3 + 3 + 2; 4: 2 + 2 + 2 + 2)."""
    sizes = [RING_RANKS // spread + (1 if i < RING_RANKS % spread else 0) for i in range(spread)]
    return tuple(f"h{i + 1}" for i, n in enumerate(sizes) for _ in range(n))


def retransmits(run_dir: str) -> int:
    """TCP segments retransmitted by the job's connections: the kernel's counters each agent writes
    at the end, one entry per connection (``agent-<machine>.tcp.json``, :meth:`workers.agent.Agent.write_tcp`)."""
    total = 0
    for path in glob.glob(os.path.join(run_dir, "**", "*.tcp.json"), recursive=True):
        with open(path) as f:
            total += sum(conn["retransmits"] for conn in json.load(f))
    return total


def measure(racks: int, ports: str, host_queue: int, spreads: list[int], scale: float, dilation: float,
            buckets: tuple[int, ...], iterations: int, idle_s: float) -> list[list[str]]:
    """Table rows: the ring alone, over each number of machines, on one fabric of ``racks`` racks
    with ``ports`` switch ports and machines' queues of ``host_queue`` packets."""
    g = leaf_spine(racks, SPINES, HOSTS_PER_RACK, host_bw_mbps=10000.0)
    fp = footprint(g, ports, mem_available_bytes())
    head = [str(racks), str(fp.switch_ports), ports, str(host_queue)]
    if not fp.fits:
        return [head + ["", f"not built: {fp.text()}"] + [""] * 9]
    rows = []
    with tempfile.TemporaryDirectory(prefix="ring-spread-") as tmp:
        opts = NetOptions(scale=scale, dilation=dilation, switch_ports=switch_ports(ports),
                          host_queue_packets=host_queue)
        with EmulatedNetwork(g, tmp, opts) as net:
            virtual = {link: r * dilation for link, r in net.rates.items()}
            pmd_perf(clear=True)
            time.sleep(idle_s)
            idle = pmd_loop(pmd_perf())
            for spread in spreads:
                ranks = ring_ranks(spread)
                bound = job_bound_s(g, virtual, list(ranks), "ring", buckets, mtu=1500)
                run_dir = os.path.join(tmp, f"ring8-{spread}")
                os.makedirs(run_dir)
                pmd_perf(clear=True)
                sampler = CpuSampler(0.25)
                sampler.start()
                try:
                    run = run_job(net, run_dir, OneJob(f"ring8-{spread}", ranks, "ring", buckets,
                                                       iterations=iterations))
                finally:
                    sampler.stop()
                busy = pmd_loop(pmd_perf())
                cpu = sampler.summary([measured_window_s(run.records)])
                mean = run.comm_mean_s()
                sw = cpu.switch_thread_p95
                rows.append(head + ["+".join(str(ranks.count(m)) for m in dict.fromkeys(ranks)),
                                    f"{bound:.3f}", f"{mean:.3f}", f"{mean / bound:.3f}", str(retransmits(run_dir)),
                                    "-" if cpu.mean is None else f"{cpu.mean:.0%}", "-" if sw is None else f"{sw:.0%}",
                                    "-" if idle is None else f"{idle['us_per_iteration']:.0f}",
                                    "-" if busy is None else f"{busy['us_per_iteration']:.0f}",
                                    "-" if busy is None else f"{busy['sleep_share']:.0%}",
                                    "-" if busy is None else f"{busy['sleep_us']:.0f}"])
                print(f"  {racks} racks, {ports} ports, host queues of {host_queue}, ranks {rows[-1][4]}: "
                      f"measured/bound {rows[-1][7]}, {rows[-1][8]} retransmissions", flush=True)
    return rows


def main(argv=None) -> int:
    """Entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--racks", default="2,24", help=f"rack counts ({HOSTS_PER_RACK} machines each, {SPINES} spines)")
    ap.add_argument("--spreads", default="2,3,4", help="machines of the first rack the ring's 8 ranks span")
    ap.add_argument("--ports", default="afxdp", help="switch port kinds (afxdp, system)")
    ap.add_argument("--host-queues", default="100,1000",
                    help="depths of the machines' own queues, packets (host_queue_packets; the default: 1000)")
    ap.add_argument("--scale", type=float, default=500.0,
                    help="scale factor: links at 10 Gbit/s / scale, gradients as much smaller (the default "
                         "experiment's: 500)")
    ap.add_argument("--dilation", type=float, default=3.0, help="time dilation D (the default experiment's: 3)")
    ap.add_argument("--model", default="vgg16", help="model whose scaled DDP buckets are replayed")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--idle-s", type=float, default=5.0, help="seconds the idle loop is measured over")
    args = ap.parse_args(argv)
    try:
        require_root()
        require_tools()
        caps = detect()
        kinds = [k.strip() for k in args.ports.split(",") if k.strip()]
        for kind in kinds:
            if kind != "system":
                resolve_port_type(kind, 1500, caps.ovs_datapath, caps.afxdp_missing)
        racks = [int(x) for x in args.racks.split(",")]
        queues = [int(x) for x in args.host_queues.split(",")]
        spreads = [int(x) for x in args.spreads.split(",")]
        if any(not 2 <= x <= HOSTS_PER_RACK for x in spreads):
            raise ValueError(f"--spreads: from 2 to {HOSTS_PER_RACK} machines (one rack)")
        if any(q < 1 for q in queues):
            raise ValueError("--host-queues: at least 1 packet")
    except (TestbedError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    buckets = tuple(scaled_buckets(get_model(args.model), args.scale))
    print(f"an 8-rank ring ({args.model}'s buckets) alone in the first rack of leaf-spines of {HOSTS_PER_RACK} "
          f"machines per rack and {SPINES} spines; scale {args.scale:g}, D = {args.dilation:g}", flush=True)
    rows = []
    try:
        for kind in kinds:
            for n in racks:
                for queue in queues:
                    t0 = time.monotonic()
                    rows += measure(n, kind, queue, spreads, args.scale, args.dilation, buckets, args.iterations,
                                    args.idle_s)
                    print(f"  {n} racks, {kind} ports, host queues of {queue}: {time.monotonic() - t0:.0f} s",
                          flush=True)
    except TestbedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print()
    print(format_table(["racks", "switch ports", "ports", "host queue", "ranks per machine", "bound s", "measured s",
                        "measured/bound", "TCP retransmissions", "cpu mean", "switch thread p95",
                        "PMD loop idle us", "PMD loop with the job us", "iterations ending in a sleep",
                        "sleep us per iteration"], rows))
    print("(times are virtual: wall / D. The PMD loop is the userspace datapath's pass over every AF_XDP port, "
          "sleep included; plain ports are the main thread's, with no such counter)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
