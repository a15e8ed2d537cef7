#!/usr/bin/env python3
"""Fidelity benchmark: measured allreduce time against its bandwidth bound on the emulated fabric.

For ring and halving-doubling allreduce with 4, 8 and 16 workers (one per machine, spread
over the pods of a k=4 fat-tree at the default experiment's rate), it runs real gloo workers
and prints ``measured / bound``, where the bound is the link-load lower bound on the routed
fabric (``sim.steps.link_bound_s``; for workers on distinct machines it equals the textbook
2(N-1)/N * S / B); the target at the default rate is at most 1.15. The step-synchronous
estimate (``sim.steps.step_bound_s``, which charges ECMP collisions within a step) is printed
beside it. The CPU
utilisation during each measurement is printed beside it. Then it runs the default experiment
and prints its wall time (``--no-default`` skips that).

    sudo .venv/bin/python bench/fidelity.py [--scale 500] [--mbytes 2] [--no-default]
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
from jobs.launcher import WorkerSpec, launch, wait_all  # noqa: E402
from jobs.patterns import pattern  # noqa: E402
from jobs.records import read_records  # noqa: E402
from sim.steps import link_bound_s, step_bound_s  # noqa: E402
from testbed.capabilities import require_root, require_tools  # noqa: E402
from testbed.controller_proc import PROJECT_ROOT, free_tcp_port  # noqa: E402
from testbed.cpu import CpuSampler  # noqa: E402
from testbed.net import EmulatedNetwork, NetOptions  # noqa: E402
from testbed.report import format_table, job_iteration_times  # noqa: E402
from topo import fat_tree, machines  # noqa: E402

TARGET_RATIO = 1.15


def spread_machines(g, n: int) -> list[str]:
    """n machines spread evenly over the fabric (rank order = machine order)."""
    ms = machines(g)
    step = len(ms) // n
    return [ms[i * step] for i in range(n)]


def run_allreduce(net, out_dir: str, collective: str, ranks: list[str], size_bytes: int, iterations: int):
    """Run one allreduce job; return (mean comm s per iteration, CPU summary)."""
    port = free_tcp_port()
    job = f"{collective}{len(ranks)}"
    specs = [WorkerSpec(job=job, rank=r, world=len(ranks), machine=m, master_addr=net.g.nodes[ranks[0]]["ip"],
                        master_port=port, ifname=net.host_intf[m], mode="replay", model="small_cnn",
                        bucket_bytes=(size_bytes,), compute_s=0.05, iterations=iterations, warmup_iterations=1,
                        collective=collective, records_path=os.path.join(out_dir, f"{job}-rank{r}.jsonl"),
                        timeout_s=300) for r, m in enumerate(ranks)]
    workers = launch(specs, lambda m, a, e, log: net.popen(m, a, env=e, log_path=log, cwd=PROJECT_ROOT), out_dir)
    sampler = CpuSampler(0.25)
    sampler.start()
    try:
        wait_all(workers, timeout_s=600)
    finally:
        sampler.stop()
        for w in workers:
            net.forget(w.process)
    records = [r for s in specs for r in read_records(s.records_path)]
    its = job_iteration_times(records)[job]
    window = (min(r.start_time_s for r in records), max(r.start_time_s + r.iteration_s for r in records))
    return sum(v["comm_s"] for v in its.values()) / len(its), sampler.summary([window])


def main(argv=None) -> int:
    """Entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=500.0, help="scale factor (10 Gbit/s / scale = link rate)")
    ap.add_argument("--mtu", type=int, default=1500)
    ap.add_argument("--mbytes", type=float, default=2.0, help="emulated allreduce size in MB")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--workers", default="4,8,16")
    ap.add_argument("--no-default", dest="default", action="store_false",
                    help="skip running and timing the default experiment")
    args = ap.parse_args(argv)
    try:
        require_root()
        require_tools()
    except TestbedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    g = fat_tree(4, bw_mbps=10000.0)
    size = int(args.mbytes * 1e6) // 4 * 4
    rows = []
    with tempfile.TemporaryDirectory(prefix="fidelity-") as tmp:
        with EmulatedNetwork(g, tmp, NetOptions(scale=args.scale, mtu=args.mtu)) as net:
            rate = next(iter(net.rates.values()))
            print(f"k=4 fat-tree, {rate:g} Mbit/s links, MTU {args.mtu}, allreduce of {size / 1e6:g} MB",
                  flush=True)
            for collective in ("ring", "hd"):
                for n in (int(x) for x in args.workers.split(",")):
                    ranks = spread_machines(g, n)
                    steps = pattern(collective, n, size)
                    bound = link_bound_s(g, net.rates, ranks, steps)
                    stepwise = step_bound_s(g, net.rates, ranks, steps)
                    mean, cpu = run_allreduce(net, tmp, collective, ranks, size, args.iterations)
                    ratio = mean / bound
                    sw = cpu.get("switch_thread_p95")
                    rows.append([collective, str(n), f"{bound:.3f}", f"{stepwise:.3f}", f"{mean:.3f}", f"{ratio:.3f}",
                                 "yes" if ratio <= TARGET_RATIO else "NO", f"{mean / stepwise:.3f}",
                                 f"{cpu['mean']:.0%}", f"{cpu['p95']:.0%}", "-" if sw is None else f"{sw:.0%}"])
                    print(f"  {collective} x{n}: measured {mean:.3f} s, bound {bound:.3f} s, ratio {ratio:.3f}",
                          flush=True)
    print()
    print(format_table(["collective", "workers", "bound s", "step-sync s", "measured s", "measured/bound",
                        f"<= {TARGET_RATIO}", "measured/step-sync", "cpu mean", "cpu p95", "switch thread p95"],
                       rows))
    if args.default:
        t0 = time.time()
        cp = subprocess.run([sys.executable, os.path.join(ROOT, "run_testbed.py"), "--results",
                             os.path.join(tempfile.gettempdir(), "fidelity-default")], cwd=ROOT)
        print(f"\ndefault experiment: exit {cp.returncode}, wall time {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
