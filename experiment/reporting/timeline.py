"""When each job communicates: the Up phase of every iteration, from either back end's iteration
records, as a table (``<policy>/timeline.csv``) and a plot (``timelines.png``): how a person sees
whether jobs sharing links interleave (Cassini, ``docs/resolutions.md`` Cassini §8.6).

A job's iteration ``i`` is, over its ranks' records of ``i``: its start (the first rank's), the
start of its Up phase (the first rank's end of compute: the first bucket's transfers begin) and
its end (the last rank's end of communication). Times are virtual seconds from the policy's first
recorded iteration (wall times over the dilation on the emulator). Warm-up iterations are not
recorded, so they are not drawn.

Its ECN marks are the sum over its ranks of the CE-marked packets each received during its own
iteration (:attr:`jobs.records.IterationRecord.ecn_marks`; §7.5 recommends counting CE packets
received and attributing them to the iteration in which they arrive; the simulator's estimate,
:attr:`sim.flowsim.SimIterationRecord.ecn_marks`, is counted the same way): how much its traffic
queued on shared links, iteration by iteration; none where no rank measured them (records without
the field, a run without ECN or a simulation without its ECN estimate).
"""

from __future__ import annotations

import csv
import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence

MAX_PLOTTED_JOBS = 12
"""A policy with more jobs gets its ``timeline.csv`` but no panel in ``timelines.png``."""
PLOTTED_ITERATIONS = 8
"""The plot's window: this many iterations of the policy's slowest job, from the first."""


@dataclasses.dataclass(frozen=True)
class UpPhase:
    """One iteration of one job: when it started, communicated and ended (virtual seconds), the
    ECN-marked packets its ranks received in it (None: not measured) and the part of its Up phase the
    jobs sharing its links spent in theirs (:mod:`experiment.reporting.interleaving`; None: it shares none)."""

    job: str
    iteration: int
    start_s: float
    up_start_s: float
    end_s: float
    ecn_marks: float | None = None
    up_overlap: float | None = None

    def to_row(self) -> list:
        """Its ``timeline.csv`` row (an empty ``ecn_marks`` or ``up_overlap`` cell: none)."""
        return [self.job, self.iteration, self.start_s, self.up_start_s, self.end_s,
                "" if self.ecn_marks is None else self.ecn_marks, "" if self.up_overlap is None else self.up_overlap]


COLUMNS = ("job", "iteration", "start_s", "up_start_s", "end_s", "ecn_marks", "up_overlap")


def up_phases(records: Iterable, dilation: float = 1.0) -> tuple[UpPhase, ...]:
    """Every job's iterations from rank records with ``job``, ``iteration``, ``compute_s`` and
    ``comm_s``, a start (``start_s`` from the simulator, ``start_time_s`` wall clock from the
    emulator, divided by ``dilation``) and optionally ``ecn_marks`` (summed over the ranks that
    have it), in start order, from the earliest start."""
    spans: dict[tuple[str, int], list[float]] = {}
    marks: dict[tuple[str, int], float] = {}
    for r in records:
        start = getattr(r, "start_s", None)
        scale = 1.0
        if start is None:
            start, scale = r.start_time_s, dilation
        up = start + r.compute_s
        end = up + r.comm_s
        key = (r.job, r.iteration)
        m = getattr(r, "ecn_marks", None)
        if m is not None:
            marks[key] = marks.get(key, 0) + m
        span = spans.get(key)
        spans[key] = [start / scale, up / scale, end / scale] if span is None else \
            [min(span[0], start / scale), min(span[1], up / scale), max(span[2], end / scale)]
    if not spans:
        return ()
    origin = min(s[0] for s in spans.values())
    out = [UpPhase(job, it, s - origin, u - origin, e - origin, marks.get((job, it)))
           for (job, it), (s, u, e) in spans.items()]
    return tuple(sorted(out, key=lambda p: (p.start_s, p.job)))


def write_timeline_csv(path: str, phases: Sequence[UpPhase]) -> None:
    """``timeline.csv``: one row per job and iteration."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for p in phases:
            w.writerow(p.to_row())


def _median(xs: Sequence[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2]


def _marks_cell(cell: str | None) -> float | None:
    """An ``ecn_marks`` cell: None when empty or absent (a file written before the column)."""
    if not cell:
        return None
    value = float(cell)
    return int(value) if value.is_integer() else value


def read_timeline_csv(path: str) -> tuple[UpPhase, ...]:
    """A ``timeline.csv`` read back (one without the ``ecn_marks`` or ``up_overlap`` column reads as none).

    Raises:
        OSError: it cannot be read; ValueError, KeyError: a row is malformed.
    """
    with open(path, newline="", encoding="utf-8") as f:
        return tuple(UpPhase(r["job"], int(r["iteration"]), float(r["start_s"]), float(r["up_start_s"]),
                             float(r["end_s"]), _marks_cell(r.get("ecn_marks")),
                             float(r["up_overlap"]) if r.get("up_overlap") else None) for r in csv.DictReader(f))


def mean_marks(phases: Sequence[UpPhase]) -> dict[str, float]:
    """Each job's ECN marks per iteration, the mean over its iterations that measured them (jobs
    with none are left out)."""
    per_job: dict[str, list[float]] = {}
    for p in phases:
        if p.ecn_marks is not None:
            per_job.setdefault(p.job, []).append(p.ecn_marks)
    return {job: sum(m) / len(m) for job, m in per_job.items()}


def format_marks(marks: float) -> str:
    """Marks per iteration as shown: a decimal below 10 (so that 0.4 is not 0), whole above."""
    return f"{marks:.1f}" if marks < 10 else f"{marks:.0f}"


def plot_timelines(run_dir: str, timelines: Mapping[str, Sequence[UpPhase]]) -> list[str]:
    """``timelines.png``: a panel per policy (of at most :data:`MAX_PLOTTED_JOBS` jobs), a row per
    job, a bar for each Up phase in the first :data:`PLOTTED_ITERATIONS` iterations of its slowest
    job; where ECN marks were measured, each bar is labelled with its iteration's marks and each job
    with its mean marks per iteration. Returns the PNG's path, or [] when no policy has a timeline
    to draw."""
    drawn = {p: ph for p, ph in timelines.items() if ph and len({x.job for x in ph}) <= MAX_PLOTTED_JOBS}
    if not drawn:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(drawn), 1, figsize=(10, 1.2 + 0.9 * sum(len({x.job for x in ph}) for ph in
                                                                         drawn.values()) ** 0.9), squeeze=False)
    for ax, (policy, phases) in zip(axes[:, 0], drawn.items(), strict=True):
        jobs = sorted({p.job for p in phases})
        window = PLOTTED_ITERATIONS * max(_median([p.end_s - p.start_s for p in phases if p.job == j]) for j in jobs)
        window = max(window, 1e-9)
        means = mean_marks(phases)
        for row, job in enumerate(jobs):
            drawn_phases = [p for p in phases if p.job == job and p.start_s < window]
            ax.broken_barh([(p.up_start_s, p.end_s - p.up_start_s) for p in drawn_phases], (row - 0.35, 0.7),
                           color=f"C{row % 10}")
            for p in drawn_phases:
                if p.ecn_marks is not None:
                    ax.text((p.up_start_s + p.end_s) / 2, row + 0.37, f"{p.ecn_marks:.0f}", ha="center",
                            va="bottom", fontsize=6.5, clip_on=True)
        ax.set_yticks(range(len(jobs)), [f"{j}\n{format_marks(means[j])} marks/it" if j in means else j
                                         for j in jobs], fontsize=8)
        ax.set_ylim(-0.6, len(jobs) - 0.1)
        ax.set_xlim(0, window)
        what = ", labelled with their ECN-marked packets" if means else ""
        ax.set_title(f"{policy}: Up phases (communication) per job{what}", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("time from the first recorded iteration (virtual s)")
    fig.tight_layout()
    path = os.path.join(run_dir, "timelines.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
