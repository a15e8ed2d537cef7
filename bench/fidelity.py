#!/usr/bin/env python3
"""Fidelity benchmark: measured allreduce time against its bound, for several time dilations.

Ring and halving-doubling jobs of 4, 8 and 16 workers on a k=4 fat-tree replay a model's buckets;
it prints ``measured / bound`` per dilation (target: at most 1.05 at the default), then the
default experiment's wall time. Details: ``docs/benchmarks.md`` (``bench/fidelity.py``).

    sudo .venv/bin/python bench/fidelity.py [--dilations 1,2,4,8] [--runtime agent|torch] [--no-default]
        [--workers 4,8,16] [--collectives ring,hd] [--iterations 3] [--fabric fat_tree|leaf_spine]
"""

from __future__ import annotations

import argparse
import os
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
from experiment.config.schema import ExperimentConfig  # noqa: E402
from experiment.reporting.report import format_table  # noqa: E402
from jobs.models import get_model, scaled_buckets  # noqa: E402
from jobs.records import measured_window_s  # noqa: E402
from jobs.steps import job_bound_s, job_collisions  # noqa: E402
from topo import fat_tree, leaf_spine, machines  # noqa: E402

TARGET_RATIO = 1.05
COMPUTE_S = 0.05  # virtual seconds between iterations (dilated like the experiment's compute)
FABRICS = {"fat_tree": ("k=4 fat-tree", lambda: fat_tree(4, bw_mbps=10000.0)),
           "leaf_spine": ("leaf-spine of 2 racks x 2 machines, 1 spine", lambda: leaf_spine(2, 1, 2))}
"""--fabric: its description and builder (machine links at 10 Gbit/s, scaled by --scale)."""


def spread_machines(g, n: int) -> list[str]:
    """n machines spread evenly over the fabric (rank order = machine order)."""
    ms = machines(g)
    step = len(ms) // n
    return [ms[i * step] for i in range(n)]


def run_allreduce(net, out_dir: str, runtime: str, collective: str, ranks: list[str], buckets: tuple[int, ...],
                  iterations: int):
    """Run one job; return (mean comm s per iteration in virtual seconds, CPU summary, start-up s)."""
    job = f"{collective}{len(ranks)}"
    sampler = CpuSampler(0.25)
    sampler.start()
    try:
        run = run_job(net, out_dir, OneJob(job, tuple(ranks), collective, buckets, iterations=iterations,
                                             compute_s=COMPUTE_S, runtime=runtime))
    finally:
        sampler.stop()
    return run.comm_mean_s(), sampler.summary([measured_window_s(run.records)]), run.startup_s


def main(argv=None) -> int:
    """Entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=500.0, help="scale factor (10 Gbit/s / scale = link rate)")
    ap.add_argument("--dilations", default="1,2,4,8", help="dilation factors D to measure")
    ap.add_argument("--model", default="vgg16", help="model whose scaled DDP buckets are replayed")
    ap.add_argument("--runtime", choices=("agent", "torch"), default="agent")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--workers", default="4,8,16")
    ap.add_argument("--collectives", default="ring,hd")
    ap.add_argument("--fabric", choices=tuple(FABRICS), default="fat_tree",
                    help="the k=4 fat-tree, or the smallest leaf-spine four workers span (default: %(default)s)")
    ap.add_argument("--no-default", dest="default", action="store_false",
                    help="skip running and timing the default experiment")
    args = ap.parse_args(argv)
    try:
        require_root()
        require_tools()
        caps = detect()
    except TestbedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    ports, why = resolve_port_type("auto", 1500, caps.ovs_datapath, caps.afxdp_missing)
    what, build = FABRICS[args.fabric]
    g = build()
    largest = max(int(x) for x in args.workers.split(","))
    if largest > len(machines(g)):
        print(f"error: --workers {largest}: the {what} has {len(machines(g))} machines", file=sys.stderr)
        return 2
    buckets = tuple(scaled_buckets(get_model(args.model), args.scale))
    default_d = ExperimentConfig().dilation
    print(f"{what} at 10 Gbit/s / {args.scale:g}, {ports} switch ports ({why}); {args.model} buckets: "
          f"{len(buckets)} of {min(buckets)}-{max(buckets)} B ({sum(buckets) / 1e6:.2f} MB per iteration); "
          f"runtime {args.runtime}", flush=True)
    try:
        rows = measure(args, g, buckets, ports)
    except TestbedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print()
    print(format_table(["D", "collective", "workers", "ECMP collisions", "bound s", "measured s", "measured/bound",
                        f"<= {TARGET_RATIO}", "start-up s", "wall s", "cpu mean", "cpu p95", "switch thread p95"],
                       rows))
    print(f"(times are virtual: wall / D; the default experiment runs at D = {default_d:g}. A job whose own "
          f"transfers collide on a link in some step (ECMP) is not held to the bound, which assumes they share "
          f"it perfectly; the fidelity monitor does not check such jobs either)")
    if args.default:
        t0 = time.time()
        cp = subprocess.run([sys.executable, os.path.join(ROOT, "run_testbed.py"), "--results",
                             os.path.join(tempfile.gettempdir(), "fidelity-default")], cwd=ROOT)
        print(f"\ndefault experiment: exit {cp.returncode}, wall time {time.time() - t0:.0f} s")
    return 0



def _share(x: float | None) -> str:
    """A CPU share as a percentage; '-' where no sample fell in the job's window (a job shorter than
    the sampler's interval)."""
    return "-" if x is None else f"{x:.0%}"


def measure(args, g, buckets: tuple[int, ...], ports: str) -> list[list[str]]:
    """One table row per dilation, collective and worker count; one network per dilation."""
    rows = []
    for d in (float(x) for x in args.dilations.split(",")):
        t_d = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="fidelity-") as tmp:
            opts = NetOptions(scale=args.scale, dilation=d, switch_ports=switch_ports(ports))
            with EmulatedNetwork(g, tmp, opts) as net:
                virtual_rates = {link: r * d for link, r in net.rates.items()}
                for collective in args.collectives.split(","):
                    for n in (int(x) for x in args.workers.split(",")):
                        ranks = spread_machines(g, n)
                        bound = job_bound_s(g, virtual_rates, ranks, collective, buckets, mtu=1500)
                        t0 = time.monotonic()
                        mean, cpu, startup = run_allreduce(net, tmp, args.runtime, collective, ranks, buckets,
                                                           args.iterations)
                        ratio = mean / bound
                        sw = cpu.switch_thread_p95
                        collisions = job_collisions(g, virtual_rates, ranks, collective, buckets, mtu=1500)
                        target = ("yes" if ratio <= TARGET_RATIO else "NO") if not collisions else "n/a"
                        rows.append([f"{d:g}", collective, str(n), str(collisions), f"{bound:.3f}", f"{mean:.3f}",
                                     f"{ratio:.3f}", target, f"{startup:.1f}",
                                     f"{time.monotonic() - t0:.0f}", _share(cpu.mean), _share(cpu.p95),
                                     _share(sw)])
                        print(f"  D={d:g} {collective} x{n}: measured {mean:.3f} s, bound {bound:.3f} s, "
                              f"ratio {ratio:.3f}, start-up {startup:.1f} s", flush=True)
        print(f"  D={d:g}: {time.monotonic() - t_d:.0f} s of wall time (network build included)", flush=True)
    return rows


if __name__ == "__main__":
    sys.exit(main())
