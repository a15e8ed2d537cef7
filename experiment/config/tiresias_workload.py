"""Tiresias's testbed workload (Tiresias §5.1, ``docs/resolutions.md`` Tiresias §7.2): 480 jobs on 60
GPUs, a trace file any experiment reads with ``trace.file``.

What the paper states, followed exactly: the jobs' GPU counts (240, 40, 80, 90, 25 and 5 jobs of 1,
2, 4, 8, 16 and 32 GPUs), Poisson arrivals 30 s apart on average, 48 jobs of each of the ten models
of its Table 6, training times of 2 minutes to 2 hours "following the distribution of the real
trace". What it leaves open is how the real trace's times were brought into that range; two
readings (``DURATIONS``), each a draw from the Philly trace this project ships
(``traces/philly/philly.csv``, every job of at least a minute, as the paper drops shorter ones):

* ``clipped``: the real times that already lie in 2 min-2 h (median about 25 min);
* ``log-scaled``: every real time mapped onto 2 min-2 h on a log scale, the real trace's range
  (a minute to seven weeks) shrunk as a whole (median about 6 min).

The paper's makespans (7.6-9.2 h) bound the work: the ``clipped`` jobs hold 60 GPUs for about 17 h,
which no schedule finishes in 9.2 h, the ``log-scaled`` ones for about 4 h. Seeded: the same
arguments give the same file, in Tiresias's layout (``job_id,num_gpu,submit_time,iterations,
model_name,duration,interval``; ``iterations`` is the duration in whole seconds, as the authors'
sample has no other)::

    .venv/bin/python -m experiment.config.tiresias_workload --out /tmp/tiresias-480.csv --seed 1
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import os
import random
import sys
from collections.abc import Sequence

from common.errors import ConfigError

GPU_MIX = ((1, 240), (2, 40), (4, 80), (8, 90), (16, 25), (32, 5))
"""(GPUs, jobs) of the testbed workload (Tiresias §5.1)."""
MODELS = ("vgg19", "vgg16", "vgg11", "alexnet", "resnet152", "resnet101", "resnet50", "inception4", "inception3",
          "googlenet")
"""The ten models of Tiresias's Table 6, 48 jobs each."""
MEAN_INTERVAL_S = 30.0
MIN_S, MAX_S = 120.0, 7200.0
"""The training times' range (2 minutes to 2 hours)."""
MIN_REAL_S = 60.0
"""The real trace's jobs shorter than this are left out (Tiresias App. A: jobs under a minute dropped)."""
DURATIONS = ("clipped", "log-scaled")
PHILLY = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "traces", "philly", "philly.csv")


@dataclasses.dataclass(frozen=True)
class WorkloadJob:
    """One row of the workload."""

    job_id: int
    num_gpu: int
    submit_time: float
    model_name: str
    duration: float
    interval: float


def real_durations(path: str = PHILLY) -> list[float]:
    """Every job duration of the Philly trace of at least :data:`MIN_REAL_S`, in file order.

    Raises:
        ConfigError: the file cannot be read or has no such job.
    """
    try:
        with open(path, newline="") as f:
            out = [d for d in (float(r["duration"]) for r in csv.DictReader(f)) if d >= MIN_REAL_S]
    except (OSError, KeyError, ValueError) as exc:
        raise ConfigError(f"tiresias workload: cannot read the Philly trace {path}: {exc}") from None
    if not out:
        raise ConfigError(f"tiresias workload: {path} has no job of at least {MIN_REAL_S:g} s")
    return out


def in_range(real: Sequence[float], durations: str) -> list[float]:
    """The real durations brought into 2 min-2 h by one reading of :data:`DURATIONS`."""
    if durations == "clipped":
        return [d for d in real if MIN_S <= d <= MAX_S]
    if durations == "log-scaled":
        lo, hi = math.log(min(real)), math.log(max(real))
        span = (hi - lo) or 1.0
        return [math.exp(math.log(MIN_S) + (math.log(d) - lo) / span * (math.log(MAX_S) - math.log(MIN_S)))
                for d in real]
    raise ConfigError(f"tiresias workload: durations must be one of {', '.join(DURATIONS)}, got {durations!r}")


def testbed_jobs(seed: int = 1, durations: str = "log-scaled",
                 real: Sequence[float] | None = None) -> list[WorkloadJob]:
    """The 480 jobs in arrival order: GPU counts and models shuffled, arrivals Poisson, each
    duration drawn from the real trace's by the reading ``durations`` (module docstring)."""
    pool = in_range(real_durations() if real is None else real, durations)
    rng = random.Random(seed)
    gpus = [g for g, n in GPU_MIX for _ in range(n)]
    models = [m for m in MODELS for _ in range(len(gpus) // len(MODELS))]
    rng.shuffle(gpus)
    rng.shuffle(models)
    out, t = [], 0.0
    for i, (g, m) in enumerate(zip(gpus, models, strict=True)):
        interval = 0.0 if i == 0 else rng.expovariate(1.0 / MEAN_INTERVAL_S)
        t += interval
        out.append(WorkloadJob(i, g, round(t, 3), m, round(rng.choice(pool), 3), round(interval, 3)))
    return out


def write_workload(path: str, rows: Sequence[WorkloadJob]) -> None:
    """Write ``rows`` in Tiresias's trace layout."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval"])
        for r in rows:
            w.writerow([r.job_id, r.num_gpu, r.submit_time, max(1, round(r.duration)), r.model_name, r.duration,
                        r.interval])


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m experiment.config.tiresias_workload --out FILE [--seed N] [--durations READING]``."""
    ap = argparse.ArgumentParser(prog="python -m experiment.config.tiresias_workload",
                                 description="Write Tiresias's 480-job testbed workload (Tiresias §5.1) as a trace.")
    ap.add_argument("--out", required=True, help="the CSV to write")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--durations", choices=DURATIONS, default="log-scaled",
                    help="how the real trace's times are brought into 2 min-2 h (default: log-scaled)")
    a = ap.parse_args(argv)
    try:
        rows = testbed_jobs(a.seed, a.durations)
        write_workload(a.out, rows)
    except (ConfigError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    work_h = sum(r.num_gpu * r.duration for r in rows) / 60 / 3600
    print(f"{a.out}: {len(rows)} jobs over {rows[-1].submit_time:.0f} s, {work_h:.1f} h of 60 GPUs' work")
    return 0


if __name__ == "__main__":
    sys.exit(main())
