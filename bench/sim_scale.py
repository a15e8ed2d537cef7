#!/usr/bin/env python3
"""Wall time of the flow-level simulator for 100, 1,000 and 10,000 jobs, step-level (sim.flowsim) or fluid (sim.fluid).

Jobs of 2-64 workers arrive as a Poisson process on Titan's simulated cluster (512 machines x 8
GPUs of a k = 16 fat-tree, ``docs/resolutions.md`` Titan A25) or on ``--machines N``; the simulator
gets the placements and arrival times and only the network is simulated. Prints events, simulated
span, wall time and growth exponents per size (and the contention the run met, or with ``--engine
both`` how far the fluid engine is from the step-level one). ``--philly`` adds the size of the
shipped Philly trace. Targets, workload and options: ``docs/benchmarks.md`` (``bench/sim_scale.py``).

    .venv/bin/python bench/sim_scale.py [--sizes 100 1000 10000] [--philly] [--budget 600] [--engine steps|fluid|both]
                                        [--machines 512] [--gap 2.0] [--overlap together|independent]
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiment.reporting.report import format_table  # noqa: E402
from jobs.models import get_model  # noqa: E402
from sim.flowsim import OVERLAPS, SimJob, SimOptions, simulate  # noqa: E402
from sim.fluid import FluidEngine  # noqa: E402
from topo import SIMULATOR_LIMITS, fat_tree, machines  # noqa: E402

SIZES = (2, 4, 8, 16, 32, 64)
WEIGHTS = (0.3, 0.25, 0.2, 0.12, 0.08, 0.05)
MODELS = ("resnet50", "vgg16", "bert_base")
COLLECTIVES = ("ring", "hd", "gloo")
GPUS_PER_MACHINE = 8
USED_MACHINES = 512
SMALLEST_K = 16  # Titan's fabric; a larger one when more machines are asked for
TARGETS_S = {"steps": ((10_000, 300.0),), "both": ((10_000, 300.0),), "fluid": ((10_000, 120.0), (50_000, 60.0))}
"""Per engine, (jobs, wall seconds) targets on a 2-core machine; the fluid engine's with contention
(``--machines 10000 --gap 0.002``)."""
PHILLY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "traces", "philly", "philly.csv")
SAMPLE_EVERY = 10  # completions between samples of the running jobs' levels


def workload(n: int, rng: random.Random, hosts: list[str], gap_s: float, iterations: int) -> list[SimJob]:
    """``n`` jobs with Poisson arrivals, placed on whole consecutive machines from random offsets."""
    jobs, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(1.0 / gap_s)
        workers = rng.choices(SIZES, WEIGHTS)[0]
        model = get_model(rng.choice(MODELS))
        n_machines = max(1, workers // GPUS_PER_MACHINE)
        first = rng.randrange(len(hosts) - n_machines + 1)
        ranks = tuple(hosts[first + r * n_machines // workers] for r in range(workers))
        jobs.append(SimJob(name=f"j{i:05d}", machines_by_rank=ranks, collective=rng.choice(COLLECTIVES),
                           bucket_bytes=tuple(model.bucket_bytes), compute_s=model.compute_time_s,
                           iterations=iterations, start_s=t))
    return jobs


def fabric_k(n_machines: int) -> int:
    """The smallest even k >= 16 whose fat-tree has ``n_machines`` machines (k**3 / 4)."""
    k = SMALLEST_K
    while k**3 // 4 < n_machines:
        k += 2
    return k


def simulate_fluid(g, rates, jobs, options):
    """Every job on the fluid engine to the end: (estimates by job, events, end time, mean running
    jobs, share of them slowed by sharing links), the last two sampled every tenth completion."""
    engine = FluidEngine(g, rates, options)
    for job in jobs:
        engine.add(job)
    estimates = {}
    running = slowed = samples = 0
    while done := engine.advance(math.inf):
        for run in done:
            estimates[run.job] = run.estimate
            if len(estimates) % SAMPLE_EVERY == 0:
                levels = engine.levels().values()
                running += len(levels)
                slowed += sum(1 for x in levels if x < 1.0)
                samples += 1
    return estimates, engine.events, engine.now_s, running / max(1, samples), slowed / max(1, running)


def philly_jobs() -> int:
    """The number of jobs of the shipped Philly trace (``traces/philly/philly.csv``)."""
    with open(PHILLY, newline="") as f:
        return sum(1 for _ in csv.DictReader(f))


def exponent(small: tuple[int, float], large: tuple[int, float]) -> float:
    """k of ``y ~ jobs**k`` between two ``(jobs, y)``."""
    return math.log(large[1] / small[1]) / math.log(large[0] / small[0])


def agreement(steps, fluid) -> str:
    """Median, p10 and p90 of fluid / steps communication time over the jobs that communicate."""
    ratios = sorted(fluid[e.job].comm_mean_s / e.comm_mean_s for e in steps.jobs if e.comm_mean_s)
    if not ratios:
        return "no job communicates"
    pick = lambda q: ratios[min(len(ratios) - 1, int(q * len(ratios)))]  # noqa: E731
    return f"fluid / steps communication time over {len(ratios)} jobs: median {pick(0.5):.3f}, p10 {pick(0.1):.3f}, " \
           f"p90 {pick(0.9):.3f}"


def main(argv=None) -> int:
    """Time the simulator at every size and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--philly", action="store_true",
                    help="add the size of the shipped Philly trace (traces/philly/philly.csv) to the sizes")
    ap.add_argument("--gap", type=float, default=2.0, help="mean inter-arrival time, seconds (simulated)")
    ap.add_argument("--machines", type=int, default=USED_MACHINES,
                    help="machines the jobs are placed on, of the smallest fat-tree (k >= 16) that has them")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--budget", type=float, default=600.0, help="skip the next size after a run this long (s)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--engine", choices=("steps", "fluid", "both"), default="steps")
    ap.add_argument("--overlap", choices=OVERLAPS, default="together",
                    help="how the fluid engine's jobs sharing links overlap their communication (simulator.overlap)")
    args = ap.parse_args(argv)
    sizes = sorted(set(args.sizes) | ({philly_jobs()} if args.philly else set()))
    fluid_options = SimOptions(mtu=1500, overlap=args.overlap)
    k = fabric_k(args.machines)
    g = fat_tree(k, bw_mbps=100_000, gpus_per_machine=GPUS_PER_MACHINE, limits=SIMULATOR_LIMITS)
    hosts = machines(g)[:args.machines]
    rates = {(u, v): float(d["bw_mbps"]) for u, v, d in g.edges(data=True)}
    engine_name = "fluid" if args.engine == "fluid" else "step-level"
    print(f"fat-tree k={k} ({len(machines(g)):,} machines), jobs on the first {len(hosts):,}; mean gap {args.gap:g} s",
          flush=True)
    # last: the last size's (jobs, wall s), measured or extrapolated; per_running: the last measured
    # size's (jobs, wall s per job running at once), for the exponent at constant concurrency
    rows, last, growth, per_running, measured = [], None, None, None, {}
    for n in sizes:
        if last is not None and last[1] > args.budget:
            est = last[1] * (n / last[0]) ** (growth or 1.0)
            rows.append([str(n), "-", "-", "-", f"~{est:.0f} (extrapolated)", "-", "-", "-", "-"])
            last = (n, est)
            continue
        jobs = workload(n, random.Random(args.seed), hosts, args.gap, args.iterations)
        t0 = time.perf_counter()
        running = slowed = None
        if args.engine == "fluid":
            _, events, end_s, running, slowed = simulate_fluid(g, rates, jobs, fluid_options)
        else:
            result = simulate(g, rates, jobs, SimOptions(mtu=1500))
            events, end_s = result.events, result.end_s
        wall = time.perf_counter() - t0
        if args.engine == "both":
            t1 = time.perf_counter()
            fluid = simulate_fluid(g, rates, jobs, fluid_options)[0]
            print(f"  {n} jobs: fluid engine {time.perf_counter() - t1:.2f} s; {agreement(result, fluid)}", flush=True)
        growth = exponent(last, (n, wall)) if last is not None else None
        concurrency = None
        if running:
            concurrency = exponent(per_running, (n, wall / running)) if per_running is not None else None
            per_running = (n, wall / running)
        rows.append([str(n), str(events), f"{end_s:.0f}", f"{wall / n * 1000:.1f}", f"{wall:.1f}",
                     f"{growth:.2f}" if growth is not None else "-",
                     f"{concurrency:.2f}" if concurrency is not None else "-",
                     f"{running:.0f}" if running is not None else "-", f"{slowed:.0%}" if slowed is not None else "-"])
        print(f"  {n} jobs: {wall:.1f} s ({engine_name} engine)", flush=True)
        last = measured[n] = (n, wall)
    print(format_table(["jobs", "events", "simulated s", "wall ms per job", "wall s", "growth exponent",
                        "exponent per job running", "running (mean)", "slowed by sharing"], rows))
    if last is None:
        return 0
    print()
    for jobs_t, target in TARGETS_S[args.engine]:
        if jobs_t == last[0]:
            continue  # the closing line's
        if jobs_t in measured:
            wall, how = measured[jobs_t][1], "measured"
        else:
            wall = last[1] * (jobs_t / last[0]) ** (growth if growth is not None else 1.0)
            how = f"extrapolated from {last[0]} jobs with exponent {growth if growth is not None else 1.0:.2f}"
        print(f"{jobs_t} jobs on {len(hosts):,} machines: {wall:.1f} s of wall time ({how}); "
              f"{'meets' if wall <= target else 'misses'} the {target:.0f} s target of the {engine_name} engine")
    n, wall = last
    verdict = "".join(f"; {'meets' if wall <= target else 'misses'} the {target:.0f} s target of the {engine_name} "
                      f"engine" for jobs_t, target in TARGETS_S[args.engine] if jobs_t == n)
    print(f"{n} jobs on {len(hosts):,} machines: {wall:.1f} s of wall time "
          f"({'measured' if n in measured else 'extrapolated'}){verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
