#!/usr/bin/env python3
"""Time for Cassini to score and rank 10 candidate placements of 10, 100 and 1,000 jobs.

The fabric is a leaf-spine of 32 leaves x 32 machines x 8 GPUs (1,024 machines), 8 spines,
2:1 oversubscribed. Each size's jobs (2-16 GPUs, ring or halving-doubling, resnet50 / vgg16 /
bert_base) are placed 10 times by the ``random`` policy with seeds 1-10: the candidates. For each
candidate every job's per-link profile is computed from its model (:mod:`placement.cassini.profiles`), then
:func:`placement.cassini.select.choose` builds the affinity graphs (link classes merged), scores
every shared link on the 5° grid and computes the winner's shifts. Prints, per size, the time to
build the profiles, the time to score and rank, and the time the solver takes on every shared
link class of every candidate whether or not its graph has a loop (what loop-free candidates of
that size would cost), with the shared links, the links scored, the candidates discarded for
loops and the winner's score.

    .venv/bin/python bench/cassini.py [--sizes 10,100,1000] [--candidates 10] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiment.reporting.tables import format_table  # noqa: E402
from jobs.models import get_model  # noqa: E402
from placement import Cluster, JobRequest, make_policy  # noqa: E402
from placement.cassini.affinity import affinity_edges  # noqa: E402
from placement.cassini.compat import link_score  # noqa: E402
from placement.cassini.profiles import job_profiles, paper_rates_mbps  # noqa: E402
from placement.cassini.select import choose, link_classes  # noqa: E402
from topo import leaf_spine  # noqa: E402
from topo.routing import EcmpRoutes  # noqa: E402

MODELS = ("resnet50", "vgg16", "bert_base")
SIZES = (2, 4, 8, 16)
COLLECTIVES = ("ring", "hd")


def jobs_of(n: int, rng: random.Random) -> list[JobRequest]:
    """``n`` jobs of random size, model and collective."""
    return [JobRequest(f"j{i}", rng.choice(MODELS), rng.choice(SIZES), rng.choice(COLLECTIVES)) for i in range(n)]


def candidate(g, jobs: list[JobRequest], seed: int) -> dict:
    """The random policy's placement of ``jobs`` with ``seed``: job -> machines by rank."""
    cluster = Cluster.from_topology(g)
    policy = make_policy("random", seed=seed)
    placed = {}
    for p in policy.place(jobs, cluster.view()):
        cluster.apply(p)
        placed[p.job] = tuple(s.machine for s in p.slots)
    return placed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,100,1000", help="job counts (default: %(default)s)")
    ap.add_argument("--candidates", type=int, default=10, help="candidates per decision (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    g = leaf_spine(32, 8, 32, oversubscription=2, gpus_per_machine=8)
    caps = {link: rate / 1000.0 for (u, v), rate in paper_rates_mbps(g).items() for link in ((u, v), (v, u))}
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        rng = random.Random(args.seed)
        jobs = jobs_of(n, rng)
        by_name = {j.name: j for j in jobs}
        t0 = time.perf_counter()
        profiles, routes = [], EcmpRoutes(g)
        for seed in range(1, args.candidates + 1):
            placed = candidate(g, jobs, seed)
            per_job = {}
            for name, machines in placed.items():
                m = get_model(by_name[name].model)
                per_job[name] = job_profiles(g, machines, by_name[name].collective, m.bucket_bytes, m.compute_time_s,
                                             routes=routes)
            profiles.append(per_job)
        t_profiles = time.perf_counter() - t0
        t1 = time.perf_counter()
        decision = choose(profiles, caps, quantum_ms=5)
        t_choose = time.perf_counter() - t1
        shared = [len({link for _, link in affinity_edges(c)}) for c in profiles]
        # The solver's cost on every shared link class, loops or not (what a loop-free candidate of
        # this size costs; the loop test itself is O(edges)).
        t2 = time.perf_counter()
        solved = 0
        for c in profiles:
            for link in link_classes(affinity_edges(c), caps, lambda j, ln, c=c: c[j][ln]):
                link_score({j: c[j][link] for j in c if link in c[j]}, caps[link], quantum_ms=5)
                solved += 1
        t_all = time.perf_counter() - t2
        scored = [len(c.links) for c in decision.candidates]
        best = decision.candidates[decision.chosen]
        rows.append([str(n), str(args.candidates), f"{t_profiles:.2f}", f"{t_choose:.2f}", f"{t_all:.2f}",
                     str(solved), f"{max(shared)}", f"{max(scored)}", str(len(decision.discarded)),
                     "-" if best.score is None else f"{best.score:.3f}", str(len(decision.shifts_ms))])
    print("Cassini on a 1,024-machine leaf-spine (2:1), candidates from the random policy; times in seconds:")
    print(format_table(["jobs", "candidates", "profiles s", "score+rank s", "every class s", "classes",
                        "shared links (max)", "links scored (max)", "discarded (loops)", "winner score",
                        "jobs shifted"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
