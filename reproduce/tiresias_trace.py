"""Tiresias's simulation of a Microsoft trace (Tiresias paper Table 5, §5.3.2): every scheduler's JCT over
Tiresias-L's, on average, at the median and at the 95th percentile.

The paper's trace is a production trace that is not public, and it states neither the cluster nor how
many jobs it simulated (``docs/resolutions.md`` Tiresias §5). The public Philly trace is another Microsoft
cluster's; its first jobs run here at their submission times with their durations on the durations
clock (its simulator's model: no network, no placement, no cost to preempt), on the authors'
simulator's 160 machines of 8 GPUs, and the cluster's size, which sets the load, is swept.
"""

from __future__ import annotations

import csv
import os

from reproduce.base import Context, Figure, Outcome, Reproduction, number_text
from reproduce.plot import Panel, PaperMark, Series, draw
from reproduce.sensitivity import Explanation, Sensitivity

SOURCE = "Table 5, §5.3.2"
TRACE = "traces/philly/philly.csv"
JOBS = 10_000
GPUS = 1_280
"""The authors' simulator's ``n160g8`` cluster spec: 160 machines of 8 GPUs (the paper states none)."""
SWEPT_GPUS = (1_280, 1_024, 768, 704, 640, 512)
THRESHOLD = "thresholds_gpu_s=3600"
"""K = 2 queues split at one GPU-hour: the paper's simulations' baseline setting (§5.4)."""
BASE = "Tiresias-L"
SCHEDULERS = (  # (the paper's name, our scheduler spec; None: not built here)
    (BASE, f"tiresias,{THRESHOLD}"),
    ("YARN-CS", "yarn_cs"),
    ("Best-effort", "fifo"),
    ("SRTF", "srtf"),
    ("Gandiva", None),
    ("Tiresias-G", f"tiresias,{THRESHOLD},priority=gittins"),
)
PAPER = {  # each scheduler's JCT over Tiresias-L's: average, median, 95th percentile
    "YARN-CS": (2.41, 30.85, 1.25),
    "Best-effort": (1.50, 9.03, 1.08),
    "SRTF": (1.00, 1.00, 0.84),
    "Gandiva": (2.00, 2.59, 2.08),
    "Tiresias-G": (0.97, 1.00, 0.85),
}
STATISTICS = (("average", "mean"), ("median", "median"), ("95th-percentile", "p95"))
SWEPT = "average JCT, YARN-CS over Tiresias-L"


def trace_jobs(count: int = JOBS) -> list:
    """The first ``count`` jobs of the Philly trace as the durations clock runs them, in arrival order."""
    from experiment.config.traces import read_trace
    from experiment.run.durations import duration_job
    from reproduce.runs import ROOT

    return [duration_job(j.name, j.gpus, j.duration_s, j.arrival_s)
            for j in read_trace(os.path.join(ROOT, TRACE), max_jobs=count).jobs]


def jct_stats(jobs, spec: str, gpus: int) -> dict[str, float]:
    """One scheduler on ``jobs`` with ``gpus`` GPUs counted: the JCTs' mean, median and 95th percentile."""
    from experiment.reporting.report import percentile
    from experiment.run.durations import run_durations
    from scheduling import make_scheduler

    jct = list(run_durations(jobs, make_scheduler(spec), total_gpus=gpus).jct_s.values())
    return {"mean": sum(jct) / len(jct), "median": percentile(jct, 50), "p95": percentile(jct, 95)}


def factors(jobs, gpus: int) -> dict[str, dict[str, float] | None]:
    """Every scheduler's JCT statistics over Tiresias-L's at one cluster size (None: not built)."""
    runs = {label: jct_stats(jobs, spec, gpus) for label, spec in SCHEDULERS if spec is not None}
    base = runs[BASE]
    return {label: None if spec is None else {k: runs[label][k] / base[k] for k in base}
            for label, spec in SCHEDULERS if label != BASE}


class TiresiasTable5(Reproduction):
    name = "tiresias-table5"
    paper = "Tiresias"
    source = SOURCE
    claim = ("simulating a Microsoft trace, Tiresias-L improves the average JCT 2.41x over YARN-CS, 1.50x over "
             "Best-effort and 2x over Gandiva, the median 30.85x and 9.03x over YARN-CS and Best-effort, and is as "
             "good as SRTF and Tiresias-G")
    setup = ("its simulator on its production trace (not public), the cluster and the number of jobs not stated; "
             "Tiresias K = 2, one GPU-hour; each scheduler's average, median and 95th-percentile JCT over "
             "Tiresias-L's")
    differs = (f"the public Philly trace (another Microsoft cluster), its first {JOBS:,} jobs at their submission "
               f"times with their durations, on the durations clock (its simulator's model); {GPUS:,} GPUs, the "
               "authors' simulator's 160 machines of 8; Gandiva's time-sharing of node sets is not built here")
    backends = ("durations",)
    minutes = 5.0

    jobs: int = JOBS
    gpus: int = GPUS
    swept_gpus: tuple[int, ...] = SWEPT_GPUS

    def check(self, backend: str) -> str:
        return (f"{len(trace_jobs(self.jobs)):,} jobs of {TRACE} under {', '.join(s for _, s in SCHEDULERS if s)} on "
                f"{self.gpus:,} GPUs, then on {', '.join(f'{g:,}' for g in self.swept_gpus)}")

    def run(self, ctx: Context) -> Outcome:
        jobs = trace_jobs(self.jobs)
        by_gpus = {}
        for gpus in dict.fromkeys((self.gpus, *self.swept_gpus)):
            ctx.say(f"  {gpus:,} GPUs: {len(SCHEDULERS) - 1} schedulers on {len(jobs):,} jobs")
            by_gpus[gpus] = factors(jobs, gpus)
        compared = by_gpus[self.gpus]
        figures = tuple(Figure(f"{stat} JCT, {label} over {BASE}", None if compared[label] is None else
                               compared[label][key], (PAPER[label][i],) * 2, SOURCE, "x")
                        for label in PAPER for i, (stat, key) in enumerate(STATISTICS))
        with open(ctx.path("factors.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["gpus", "scheduler", *(key for _, key in STATISTICS)])
            for gpus, per in by_gpus.items():
                for label, r in per.items():
                    if r is not None:
                        w.writerow([gpus, label, *(f"{r[key]:.4g}" for _, key in STATISTICS)])
        points = tuple((float(g), by_gpus[g]["YARN-CS"]["mean"]) for g in self.swept_gpus)
        sensitivity = Sensitivity(SWEPT, "the cluster's GPUs (its load: the same jobs on fewer GPUs)",
                                  "gpus=" + ",".join(map(str, self.swept_gpus)), (1,),
                                  "neither its cluster's size nor its trace's jobs are stated")
        explanation = Explanation(sensitivity, PAPER["YARN-CS"][0], points)
        notes = (f"{len(jobs):,} jobs, {sum(j.workers * j.duration_s for j in jobs) / 3600:,.0f} GPU-hours of work "
                 f"submitted over {(jobs[-1].arrival_s - jobs[0].arrival_s) / 86400:.1f} days",
                 "Gandiva: not measured (its node sets time-shared in 60 s slices are not built here)",
                 "per cluster size, each scheduler's average / median / p95 over Tiresias-L's: " + "; ".join(
                     f"{g:,} GPUs: " + ", ".join(f"{label} " + "/".join(number_text(r[key]) for _, key in STATISTICS)
                                                 for label, r in per.items() if r is not None)
                     for g, per in by_gpus.items()),
                 f"every cluster size's factors: {ctx.path('factors.csv')}")
        labels = tuple(label for label in PAPER if compared[label] is not None)
        plot = draw(ctx.path("reproduction.png"), f"Tiresias {SOURCE}: each scheduler's JCT over Tiresias-L's", (
            Panel(f"average JCT over Tiresias-L's, {self.gpus:,} GPUs", "scheduler", "x",
                  (Series("ours", labels, tuple(compared[label]["mean"] for label in labels)),),
                  tuple(PaperMark(label, PAPER[label][0], PAPER[label][0]) for label in labels), bars=True),
            Panel("the gap, swept: YARN-CS's average over Tiresias-L's", "GPUs", "x",
                  (Series("ours", *zip(*points, strict=True)),), levels=(("paper", PAPER["YARN-CS"][0]),))))
        return Outcome(figures, notes, (), plot, (explanation,))
