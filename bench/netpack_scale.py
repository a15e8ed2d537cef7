#!/usr/bin/env python3
"""NetPack's placement time at scale (spec §5.8 H8, Fig. 10): time per placed job on clusters of
100, 1,000 and 10,000 servers, and the total for a 4,000-job real trace.

Clusters of the paper's simulator's shape (§5.3), the first 4,000 jobs of Philly replayed in
virtual time, only ``place`` calls timed; target: 4,000 jobs on 10,000 servers in under 30 s on a
2-core machine. Details: ``docs/benchmarks.md`` (``bench/netpack_scale.py``).

    .venv/bin/python bench/netpack_scale.py [--servers 100 1000 10000] [--jobs 4000]
"""

from __future__ import annotations

import argparse
import heapq
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiment.config.traces import read_trace  # noqa: E402
from experiment.reporting.report import format_table  # noqa: E402
from placement import Cluster, JobRequest, MachineInfo  # noqa: E402
from placement.netpack.policy import NetPackPolicy  # noqa: E402

TRACE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "traces", "philly", "philly.csv")
SERVERS_PER_RACK, GPUS = 16, 4
PAPER_S_PER_JOB = {100: 3.25e-4, 10_000: 1.36e-2}
TARGET_TOTAL_S = 30.0


def run(servers: int, jobs, policy_kwargs: dict) -> tuple[int, float, int]:
    """Replay ``jobs`` on a cluster of ``servers``; (jobs placed, seconds in place(), calls)."""
    cluster = Cluster([MachineInfo(f"h{i}", GPUS, rack=f"r{i // SERVERS_PER_RACK}", pod="p") for i in range(servers)])
    policy = NetPackPolicy(**policy_kwargs)
    ends: list[tuple[float, str]] = []
    pending: list[JobRequest] = []
    duration = {}
    placed, spent, calls = 0, 0.0, 0
    cap = servers * GPUS
    for j in jobs:
        if j.gpus > cap:
            continue
        while ends and ends[0][0] <= j.arrival_s:
            cluster.release(heapq.heappop(ends)[1])
        pending.append(JobRequest(j.name, "vgg16", j.gpus, "ina", j.arrival_s))
        duration[j.name] = j.duration_s
        t0 = time.perf_counter()
        out = policy.place(pending, cluster.view())
        spent += time.perf_counter() - t0
        calls += 1
        started = {p.job for p in out}
        for p in out:
            cluster.apply(p)
            heapq.heappush(ends, (j.arrival_s + duration[p.job], p.job))
        placed += len(out)
        pending = [p for p in pending if p.name not in started]
    return placed, spent, calls


def main(argv=None) -> int:
    """Time NetPack on each cluster size and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, nargs="+", default=[100, 1000, 10_000])
    ap.add_argument("--jobs", type=int, default=4000)
    ap.add_argument("--trace", default=TRACE)
    args = ap.parse_args(argv)
    trace = read_trace(args.trace, max_jobs=args.jobs)
    print(f"{len(trace.jobs)} jobs of {os.path.basename(args.trace)}; {SERVERS_PER_RACK} servers x {GPUS} GPUs "
          f"per rack, PAT 1 Tb/s", flush=True)
    rows = []
    for n in args.servers:
        placed, spent, calls = run(n, trace.jobs, {})
        per_job = spent / max(placed, 1)
        paper = PAPER_S_PER_JOB.get(n)
        rows.append([f"{n:,}", str(placed), str(calls), f"{spent / max(calls, 1):.2e}", f"{per_job:.2e}",
                     f"{spent:.1f}",
                     f"{paper:.2e}" if paper else "-", f"{per_job / paper:.3g}x" if paper else "-",
                     f"{spent / TARGET_TOTAL_S:.2f}x of {TARGET_TOTAL_S:g} s" if n == 10_000 else "-"])
        print(f"  {n:,} servers: {placed} placed in {spent:.1f} s", flush=True)
    print(format_table(["servers", "placed", "place() calls", "s per call", "s per placed job", "total s",
                        "paper s/job", "vs paper", "total vs target"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
