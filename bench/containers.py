#!/usr/bin/env python3
"""Workers in containers against workers as processes: the same replay ring on one emulated
network, first with each machine's agent a process in its namespace, then in a container of the
worker image (:mod:`emulator.containers`, ``--cpus`` each).

The fabric is a leaf-spine of ``--racks`` racks of one machine and one spine, 10 Gbit/s / scale
links at dilation D; the job is a ring over every machine replaying a model's scaled DDP buckets
(``--model``, vgg16's by default; agent runtime). Each way runs ``--repeat`` times, alternating, so
that load on the machine falls on both alike.

Prints, per run, the job's start-up and its communication time per iteration (virtual seconds)
over its contention-free bound; then the ratios of the containers' to the processes' measured in
the same run (communication time, mean and range over the repeats; bytes on every link).

    sudo .venv/bin/python bench/containers.py [--racks 2] [--cpus 1] [--dilation 1] [--iterations 5] [--repeat 3]
        [--model vgg16]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiment.reporting.report import format_table  # noqa: E402

KINDS = ("process", "container")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--racks", type=int, default=2, help="racks, one machine each: the ring's ranks")
    ap.add_argument("--cpus", type=float, default=1.0, help="CPU limit of each container")
    ap.add_argument("--scale", type=float, default=500.0)
    ap.add_argument("--dilation", type=float, default=1.0)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each way, alternating")
    ap.add_argument("--model", default="vgg16", help="model whose scaled DDP buckets are replayed")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/containers.py: must run as root (Mininet): sudo .venv/bin/python bench/containers.py",
              file=sys.stderr)
        return 2

    from common.errors import TestbedError
    from emulator.containers import ContainerRunner, ContainerSettings, docker_missing
    from emulator.net import EmulatedNetwork, NetOptions, link_rates_mbps
    from emulator.one_job import OneJob, run_job
    from emulator.worker_image import ensure_image
    from jobs.models import get_model, scaled_buckets
    from jobs.steps import job_bound_s
    from topo import leaf_spine, machines

    why = docker_missing()
    if why:
        print(f"bench/containers.py: {why}", file=sys.stderr)
        return 2
    g = leaf_spine(args.racks, 1, 1)
    ring = tuple(machines(g))
    buckets = tuple(scaled_buckets(get_model(args.model), args.scale))
    options = NetOptions(scale=args.scale, dilation=args.dilation)
    bound_s = job_bound_s(g, link_rates_mbps(g, args.scale), ring, "ring", buckets, options.mtu)
    comm: dict[str, list[float]] = {k: [] for k in KINDS}
    moved: dict[str, list[dict]] = {k: [] for k in KINDS}
    rows = []
    try:
        image = ensure_image()
        with tempfile.TemporaryDirectory(prefix="bench-containers-") as tmp, \
                EmulatedNetwork(g, os.path.join(tmp, "net"), options) as net:
            for i in range(args.repeat):
                for kind in KINDS:
                    out = os.path.join(tmp, f"{kind}-{i}")
                    os.makedirs(out)
                    spawn = ContainerRunner(net, ContainerSettings(image.tag, args.cpus), [out]) \
                        if kind == "container" else None
                    print(f"run {i + 1}/{args.repeat}, {kind} workers: the {len(ring)}-machine ring ...", flush=True)
                    before = net.counters.switch_counters()
                    run = run_job(net, out, OneJob(f"{kind}{i}", ring, "ring", buckets, iterations=args.iterations,
                                                   warmup_iterations=1, compute_s=0.05, timeout_s=600),
                                  spawn=spawn)
                    time.sleep(0.3)
                    moved[kind].append(net.counters.link_bytes(before, net.counters.switch_counters()))
                    comm[kind].append(run.comm_mean_s())
                    rows.append([str(i + 1), kind, f"{run.startup_s:.2f}", f"{comm[kind][-1]:.4f}",
                                 f"{comm[kind][-1] / bound_s:.3f}"])
    except TestbedError as e:
        print(f"bench/containers.py: {e}", file=sys.stderr)
        return 2
    print(format_table(["run", "workers", "start-up s", "comm/iteration s", "over bound"], rows))
    ratios = [c / p for c, p in zip(comm["container"], comm["process"], strict=True)]
    per_link = [c[k] / b for p, c in zip(moved["process"], moved["container"], strict=True)
                for k, b in p.items() if b > 10_000]
    print(f"bound {bound_s:.4f} s per iteration ({image.tag}, {args.cpus:g} CPU per container, D = {args.dilation:g})")
    print(f"containers / processes: communication time {statistics.mean(ratios):.3f} "
          f"({min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} pairs); bytes per link "
          f"{min(per_link):.4f}-{max(per_link):.4f} ({len(per_link)} link-runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
