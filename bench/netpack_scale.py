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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiment.config.traces import read_trace  # noqa: E402
from experiment.reporting.report import format_table  # noqa: E402
from reproduce.netpack_system import (  # noqa: E402
    GPUS_PER_SERVER,
    PAPER_S_PER_JOB,
    SERVERS_PER_RACK,
    placement_time,
)

TRACE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "traces", "philly", "philly.csv")
TARGET_TOTAL_S = 30.0


def main(argv=None) -> int:
    """Time NetPack on each cluster size and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, nargs="+", default=[100, 1000, 10_000])
    ap.add_argument("--jobs", type=int, default=4000)
    ap.add_argument("--trace", default=TRACE)
    args = ap.parse_args(argv)
    trace = read_trace(args.trace, max_jobs=args.jobs)
    print(f"{len(trace.jobs)} jobs of {os.path.basename(args.trace)}; {SERVERS_PER_RACK} servers x "
          f"{GPUS_PER_SERVER} GPUs "
          f"per rack, PAT 1 Tb/s", flush=True)
    rows = []
    for n in args.servers:
        t = placement_time(n, trace.jobs)
        placed, spent, calls = t.placed, t.seconds, t.calls
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
