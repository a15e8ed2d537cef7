#!/usr/bin/env python3
"""Placement decision time per job for every registered policy on a large simulated cluster.

The cluster is the Titan paper's simulated one: 512 machines x 8 GPUs (here a leaf-spine of 16
leaves x 32 machines, 8 spines), with a background load in which about 40% of the machines are
idle and the rest have 1-8 busy GPUs. Each policy places jobs one at a time (sizes drawn from a
Philly-like mix: mostly 1-8 GPUs, some 16-64), on a fresh copy of the loaded cluster, and the
wall time of each ``place`` call is recorded. Prints median and p99 per policy; Titan's target is
a median of at most 50 ms per job.

    .venv/bin/python bench/placement_latency.py [--jobs 200] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiment.reporting.report import format_table, percentile  # noqa: E402
from placement import POLICIES, Cluster, JobRequest, make_policy  # noqa: E402
from topo import leaf_spine  # noqa: E402

SIZES = (1, 2, 4, 8, 16, 32, 64)
WEIGHTS = (0.35, 0.2, 0.15, 0.15, 0.08, 0.05, 0.02)
MODELS = ("resnet50", "vgg16", "bert_base")
TITAN_TARGET_MS = 50.0


def loaded_cluster(rng: random.Random) -> Cluster:
    """512 x 8-GPU machines, ~40% idle, the rest with 1-8 busy GPUs."""
    g = leaf_spine(16, 8, 32, gpus_per_machine=8)
    cluster = Cluster.from_topology(g)
    busy = {m.name: (0 if rng.random() < 0.4 else rng.randint(1, 8)) for m in cluster.view().machines}
    cluster.set_background(busy)
    return cluster


def main(argv=None) -> int:
    """Time every policy and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    cluster = loaded_cluster(rng)
    jobs = [JobRequest(f"j{i}", rng.choice(MODELS), rng.choices(SIZES, WEIGHTS)[0], rng.choice(("ring", "hd")))
            for i in range(args.jobs)]
    print(f"512 machines x 8 GPUs, {cluster.view().total_free} GPUs free, {len(jobs)} jobs", flush=True)
    rows = []
    for name in sorted(POLICIES):
        policy = make_policy(name, seed=args.seed)
        times_ms, placed = [], 0
        for job in jobs:
            view = cluster.view()
            t0 = time.perf_counter()
            out = policy.place([job], view)
            times_ms.append((time.perf_counter() - t0) * 1e3)
            placed += bool(out)
        med, p99 = percentile(times_ms, 50), percentile(times_ms, 99)
        target = f"{med / TITAN_TARGET_MS:.2f} of target" if name == "titan" else ""
        rows.append([name, f"{med:.2f}", f"{p99:.2f}", f"{placed}/{len(jobs)}", target])
        print(f"  {name}: median {med:.2f} ms, p99 {p99:.2f} ms", flush=True)
    print()
    print(format_table(["policy", "median ms", "p99 ms", "placed", "titan median / 50 ms"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
