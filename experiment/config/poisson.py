"""Poisson job traces of chosen models at a chosen load (Cassini's trace (i), ``docs/resolutions.md`` Cassini
§7.4, §8.4): a trace file any experiment reads with ``trace.file``.

Jobs arrive as a Poisson process. Each draws its model uniformly from ``models`` (the thesis's 13
with equal probability; here those with a profile), its workers uniformly in ``gpus`` (Themis's
1-12 at arrival) and its length uniformly in ``iterations`` (200-1,000); its duration is that many
iterations at the model's compute time, so the loop runs those iterations back
(:func:`experiment.config.workload.trace_jobs`). The arrival rate makes the offered load (the thesis's "average
fraction of GPUs busy with active jobs", 80-100%) ``load``: ``λ = load × G / E[workers ×
duration]`` over the drawn jobs, on a cluster of ``G`` GPUs. Seeded: the same arguments give the
same file.

The file is in Tiresias' layout (``job_id,num_gpu,submit_time,iterations,model_name,duration,
interval``, :mod:`experiment.config.traces`), times in whole milliseconds' precision::

    .venv/bin/python -m experiment.config.poisson --out experiments/traces/cassini-poisson-24gpu.csv \\
        --jobs 40 --gpus-total 24 --load 0.9 --seed 1
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import random
import sys
from collections.abc import Sequence

from common.errors import ConfigError
from jobs.models import MODELS, get_model

CASSINI_MODELS = ("vgg11", "vgg16", "vgg19", "resnet50", "bert_base")
"""The thesis's data-parallel models (Table 4.2) that have a profile here."""


@dataclasses.dataclass(frozen=True)
class PoissonJob:
    """One row of the trace."""

    job_id: int
    num_gpu: int
    submit_time: float
    iterations: int
    model_name: str
    duration: float
    interval: float


def poisson_jobs(jobs: int, gpus_total: int, load: float, models: Sequence[str] = CASSINI_MODELS,
                 gpus: tuple[int, int] = (1, 12), iterations: tuple[int, int] = (200, 1000),
                 seed: int = 1) -> list[PoissonJob]:
    """The trace's jobs, in arrival order (see the module docstring).

    Raises:
        ConfigError: no job, a load outside (0, 2], an empty or unknown model, a range upside down,
            or jobs wider than the cluster.
    """
    if jobs < 1 or gpus_total < 1 or not 0 < load <= 2:
        raise ConfigError(f"poisson trace: jobs and gpus_total must be >= 1 and load in (0, 2], got {jobs}, "
                          f"{gpus_total}, {load}")
    unknown = [m for m in models if m not in MODELS]
    if not models or unknown:
        raise ConfigError(f"poisson trace: unknown models {unknown or 'none given'}; profiles: {', '.join(MODELS)}")
    if not 1 <= gpus[0] <= gpus[1] <= gpus_total or not 1 <= iterations[0] <= iterations[1]:
        raise ConfigError(f"poisson trace: need 1 <= gpus {gpus} <= {gpus_total} GPUs and 1 <= iterations {iterations}")
    rng = random.Random(f"poisson-trace:{seed}")
    drawn = []
    for _ in range(jobs):
        model = rng.choice(list(models))
        drawn.append((model, rng.randint(*gpus), rng.randint(*iterations)))
    work = [w * n * get_model(m).compute_time_s for m, w, n in drawn]
    rate = load * gpus_total / (sum(work) / jobs)
    out, t = [], 0.0
    for i, (model, w, n) in enumerate(drawn):
        gap = rng.expovariate(rate) if i else 0.0
        t += gap
        out.append(PoissonJob(i, w, round(t, 3), n, model, round(n * get_model(model).compute_time_s, 3),
                              round(gap, 3)))
    return out


def write_trace(path: str, rows: Sequence[PoissonJob]) -> None:
    """Write ``rows`` in Tiresias' layout."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([fld.name for fld in dataclasses.fields(PoissonJob)])
        for r in rows:
            w.writerow(dataclasses.astuple(r))


def main(argv: Sequence[str] | None = None) -> int:
    """The command line of the module docstring."""
    ap = argparse.ArgumentParser(prog=".venv/bin/python -m experiment.config.poisson",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the CSV to write")
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--gpus-total", type=int, required=True, help="the cluster's GPUs (sets the arrival rate)")
    ap.add_argument("--load", type=float, default=0.9, help="offered load, fraction of the GPUs busy")
    ap.add_argument("--models", default=",".join(CASSINI_MODELS))
    ap.add_argument("--gpus", default="1,12", help="workers per job: min,max")
    ap.add_argument("--iterations", default="200,1000", help="iterations per job: min,max")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    try:
        lo_hi = [tuple(int(x) for x in s.split(",")) for s in (a.gpus, a.iterations)]
        if any(len(r) != 2 for r in lo_hi):
            raise ValueError("give min,max")
        rows = poisson_jobs(a.jobs, a.gpus_total, a.load, a.models.split(","), lo_hi[0], lo_hi[1], a.seed)
        write_trace(a.out, rows)
    except (ConfigError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    span = rows[-1].submit_time
    print(f"{a.out}: {len(rows)} jobs over {span:.0f} s, load {a.load:g} of {a.gpus_total} GPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
