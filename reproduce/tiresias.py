"""Tiresias on the trace its authors ship, beside their simulator (``docs/resolutions.md`` Tiresias §2.4, Appendix A).

The authors' simulator (SymbioticLab/Tiresias, ``simulator/run_sim.py``) runs its 60-job sample
(``traces/tiresias/60_job.csv``) on 2 machines of 4 GPUs with ``count`` placement; its JCTs, job by
job, for Tiresias-L (``dlas-gpu``) and Tiresias-G (``dlas-gpu-gittins``) are in
``data/tiresias/authors_sim_60_job_jct.csv``. The testbed's scheduler runs the same jobs on the
loop's durations clock (each job runs for its duration, the network plays no part: the authors'
model), with their queue limits (3250 and 7200 GPU-s) and their event timing (``timing=r_compat``;
Gittins also with their quantum, ``gittins_delta=r_compat``), and with exact timing for
Tiresias-L. The paper's own trace results (its Figs. 9-12) come from a production trace that is
not public: its authors' simulator on the trace they ship is the reference that can be run.
"""

from __future__ import annotations

import csv
import os

from reproduce.base import Context, Figure, Outcome, Reproduction
from reproduce.plot import Panel, Series, draw
from reproduce.runs import ROOT

TRACE = "traces/tiresias/60_job.csv"
REFERENCE = "data/tiresias/authors_sim_60_job_jct.csv"
TOTAL_GPUS = 8
SOURCE = "the authors' simulator, run_sim.py"
LIMITS = "thresholds_gpu_s=3250:7200"
VARIANTS = (  # (label, our scheduler spec, the reference column, the authors' schedule)
    ("Tiresias-L", f"tiresias,{LIMITS},timing=r_compat", "dlas_gpu_jct_s", "dlas-gpu"),
    ("Tiresias-L, exact timing", f"tiresias,{LIMITS}", "dlas_gpu_jct_s", "dlas-gpu"),
    ("Tiresias-G", f"tiresias,{LIMITS},priority=gittins,gittins_delta=r_compat", "dlas_gpu_gittins_jct_s",
     "dlas-gpu-gittins"),
)


def read_rows(rel_path: str) -> list[dict]:
    """The rows of a CSV of the repository."""
    with open(os.path.join(ROOT, rel_path), newline="") as f:
        return list(csv.DictReader(f))


def run_variant(spec: str, trace_rows: list[dict]) -> dict[int, float]:
    """Every job's JCT under scheduler ``spec`` on the durations clock, by job id."""
    from experiment.run.durations import duration_job, run_durations
    from scheduling import make_scheduler

    jobs = [duration_job(f"j{r['job_id']}", int(r["num_gpu"]), float(r["duration"]), float(r["submit_time"]))
            for r in trace_rows]
    result = run_durations(jobs, make_scheduler(spec), total_gpus=TOTAL_GPUS)
    return {int(r["job_id"]): result.jct_s[f"j{r['job_id']}"] for r in trace_rows}


def figures(ours: dict[str, dict[int, float]], theirs: dict[str, dict[int, float]]) -> tuple[Figure, ...]:
    """Per variant: the mean JCT beside the authors' simulator's, and how many jobs have its JCT to
    the second."""
    out = []
    for label, _, column, schedule in VARIANTS:
        mine, ref = ours[label], theirs[column]
        same = sum(1 for j, t in ref.items() if j in mine and abs(mine[j] - t) < 0.5)
        out.append(Figure(f"mean JCT, {label}", sum(mine.values()) / len(mine),
                          (sum(ref.values()) / len(ref),) * 2, f"{SOURCE} --schedule={schedule}", "s"))
        out.append(Figure(f"jobs with the reference's JCT, {label}", same, (len(ref),) * 2,
                          f"{SOURCE} --schedule={schedule}", "jobs"))
    return tuple(out)


class Tiresias60Job(Reproduction):
    name = "tiresias-60job"
    paper = "Tiresias"
    source = "its authors' simulator on the 60-job trace"
    claim = ("Tiresias-L (2D-LAS) and Tiresias-G (2D-Gittins) as the authors' simulator schedules their 60-job "
             "trace on 8 GPUs, job by job")
    backends = ("durations",)
    setup = "the authors' simulator (SymbioticLab/Tiresias) on the 60-job trace it ships, 8 GPUs; each job's JCT"
    differs = ("the paper's own trace results come from a production trace that is not public, so ours is set "
               "against the authors' simulator, job by job")
    minutes = 0.05

    def check(self, backend: str) -> str:
        from scheduling import make_scheduler

        for _, spec, _, _ in VARIANTS:
            make_scheduler(spec)
        trace, ref = read_rows(TRACE), read_rows(REFERENCE)
        if [r["job_id"] for r in trace] != [r["job_id"] for r in ref]:
            from common.errors import ConfigError

            raise ConfigError(f"{REFERENCE}: its job ids are not those of {TRACE}")
        return f"{TRACE}: {len(trace)} jobs on {TOTAL_GPUS} GPUs, {len(VARIANTS)} scheduler variants, durations clock"

    def run(self, ctx: Context) -> Outcome:
        trace, ref_rows = read_rows(TRACE), read_rows(REFERENCE)
        theirs = {col: {int(r["job_id"]): float(r[col]) for r in ref_rows}
                  for col in ("dlas_gpu_jct_s", "dlas_gpu_gittins_jct_s")}
        ours = {}
        for label, spec, _, _ in VARIANTS:
            ctx.say(f"{label} ({spec}) on {TRACE} ...")
            ours[label] = run_variant(spec, trace)
        path = ctx.path("jct.csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["job_id", *(f"ours {label}" for label, *_ in VARIANTS), *theirs])
            for j in sorted(theirs["dlas_gpu_jct_s"]):
                w.writerow([j, *(ours[label][j] for label, *_ in VARIANTS), *(theirs[c][j] for c in theirs)])
        panels = tuple(
            Panel(label, "the authors' simulator: JCT (s)", "ours: JCT (s)",
                  (Series("jobs", tuple(theirs[col][j] for j in sorted(theirs[col])),
                          tuple(ours[label][j] for j in sorted(theirs[col])), points_only=True),),
                  guides=(("same JCT", 1.0, None),))
            for label, _, col, _ in VARIANTS)
        plot = draw(ctx.path("reproduction.png"), "Tiresias on its 60-job trace: ours beside the authors' simulator",
                    panels)
        notes = (f"durations clock: each job runs for its trace duration on {TOTAL_GPUS} GPUs, no network (the "
                 f"authors' simulator's model); per-job JCTs in {path}",)
        return Outcome(figures(ours, theirs), notes, (), plot)
