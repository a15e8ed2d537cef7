#!/usr/bin/env python3
"""Compare placement policies without the emulator: where each policy puts a job mix, how many
machines it uses, and each job's allreduce bandwidth bound on the routed fabric.

    .venv/bin/python examples/compare_placements.py

No root needed: topology, placement, traffic patterns and the bound are pure code. The
testbed (``run_testbed.py``) then measures the same placements on real traffic.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common.units import scale_bw_mbps  # noqa: E402
from jobs.models import get_model  # noqa: E402
from jobs.patterns import pattern  # noqa: E402
from jobs.steps import link_bound_s  # noqa: E402
from placement import POLICIES, Cluster, JobRequest, make_policy  # noqa: E402
from topo import fat_tree  # noqa: E402

SCALE = 500.0


def main() -> int:
    """Place a small job mix with every policy and print machines used and per-job bounds."""
    g = fat_tree(4, bw_mbps=10000.0)
    rates = {(u, v): scale_bw_mbps(d["bw_mbps"], SCALE) for u, v, d in g.edges(data=True)}
    jobs = [JobRequest("vgg", "vgg16", 8, "ring"), JobRequest("resnet", "resnet50", 4, "hd"),
            JobRequest("bert", "bert_base", 6, "ring")]
    for name in sorted(POLICIES):
        cluster = Cluster.from_topology(g)
        cluster.set_background({"h1": 3, "h2": 2, "h6": 3})
        placements = make_policy(name, seed=1).place(jobs, cluster.view())
        print(f"{name}:")
        for p in placements:
            job = next(j for j in jobs if j.name == p.job)
            size = int(get_model(job.model).param_bytes / SCALE) // 4 * 4
            ranks = [s.machine for s in p.slots]
            bound = link_bound_s(g, rates, ranks, pattern(job.collective, job.workers, size))
            print(f"  {p.job:7s} {job.workers} workers on {len(p.machines)} machines "
                  f"({','.join(p.machines)}): allreduce bound {bound:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
