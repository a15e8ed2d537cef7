"""Validation of a simulator's estimates against the emulator's measurements, per job.

A :class:`Comparison` pairs one job's measured communication time per iteration (paper-scale
seconds, :func:`measure.iterations.job_iteration_times`) with an estimate of it: the built-in
flow-level simulator's (:mod:`sim.flowsim`, run by the runner on the same placements), or any
other. :func:`validation_stats` summarises a set of them as the literature does (NetPack and
SimAI report a correlation, e.g. 98%): Pearson's r between measured and estimated times, and
the median and 90th percentile of the absolute relative error ``|estimated - measured| /
measured``.

A job whose estimate is 0 (no transfer leaves its machines: nothing for a network model to
estimate) or that has no measurement is not compared. Pure: no I/O.

Where the emulator judged the job (its fidelity verdict), the comparison carries the job's class
(:func:`job_class`): ``uncontended`` (checked against its contention-free bound), ``contended``
(it shared a link with another job, or two of its own transfers shared one) or ``latency-bound``
(no transfer fills a few packets); :func:`stats_by_class` summarises each, so a user sees where a
simulator can be used.

ECN marks are validated apart (:class:`MarksComparison`, :func:`marks_stats`), because a count of
0 is a measurement too: whether the estimate finds the jobs that were marked (and no other), how
well it ranks and correlates with the measured counts, and its relative error on the jobs that
were marked.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from measure.fidelity import CHECKED_STATUSES

VALIDATION_CLASSES = ("uncontended", "contended", "latency-bound")
"""The classes of jobs the validation reports apart (:func:`job_class`)."""


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One job's measured and estimated communication time per iteration, seconds.

    Attributes:
        policy: the placement policy the job ran under.
        job: job name.
        measured_s: measured mean communication time per iteration.
        estimated_s: the estimate of the same quantity.
    """

    policy: str
    job: str
    measured_s: float
    estimated_s: float
    job_class: str | None = None
    """One of :data:`VALIDATION_CLASSES` (None: no verdict, as on the simulator)."""

    @property
    def rel_error(self) -> float:
        """``(estimated - measured) / measured``: negative when the estimate is too low."""
        return (self.estimated_s - self.measured_s) / self.measured_s

    def to_dict(self) -> dict:
        """JSON-serialisable form, with the relative error."""
        return {**dataclasses.asdict(self), "rel_error": self.rel_error}


@dataclasses.dataclass(frozen=True)
class ValidationStats:
    """Agreement of estimates with measurements over a set of jobs.

    Attributes:
        n: jobs compared.
        pearson_r: Pearson's correlation of measured and estimated times (None for fewer than
            two jobs or when either side does not vary).
        median_abs_rel_error: median of ``|rel_error|`` (None when ``n`` is 0).
        p90_abs_rel_error: 90th percentile of ``|rel_error|``, linear interpolation (None when
            ``n`` is 0).
        worst: the comparison with the largest ``|rel_error|`` (None when ``n`` is 0).
    """

    n: int
    pearson_r: float | None
    median_abs_rel_error: float | None
    p90_abs_rel_error: float | None
    worst: Comparison | None

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        return {"n": self.n, "pearson_r": self.pearson_r, "median_abs_rel_error": self.median_abs_rel_error,
                "p90_abs_rel_error": self.p90_abs_rel_error,
                "worst": self.worst.to_dict() if self.worst is not None else None}

    def line(self) -> str:
        """One line for the terminal: ``r 0.991, median |error| 3.1%, p90 8.0% over 24 jobs``."""
        if not self.n:
            return "no job to compare"
        r = f"r {self.pearson_r:.3f}" if self.pearson_r is not None else "r -"
        return (f"{r}, median |error| {self.median_abs_rel_error:.1%}, p90 {self.p90_abs_rel_error:.1%} "
                f"over {self.n} job{'s' if self.n != 1 else ''}")


def pearson_r(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's correlation coefficient (None for fewer than two points or a constant side)."""
    if len(xs) != len(ys):
        raise ValueError(f"pearson_r: {len(xs)} x values but {len(ys)} y values")
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / math.sqrt(sxx * syy)


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    pos = (len(sorted_values) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def comparable(measured_s: float | None, estimated_s: float | None) -> bool:
    """Whether a job can be compared: both times known, the measurement positive and the estimate
    positive (0 means no network traffic to estimate)."""
    return (measured_s is not None and estimated_s is not None and math.isfinite(measured_s)
            and math.isfinite(estimated_s) and measured_s > 0 and estimated_s > 0)


def job_class(status: str | None) -> str | None:
    """The validation class of a job with fidelity verdict ``status``
    (:data:`measure.fidelity.JOB_STATUSES`): ``uncontended`` for a job checked against its bound,
    ``contended`` for one that shared links (``contended``, ``collides``), ``latency-bound``; None
    for the rest (``local``, ``incomplete``, no verdict)."""
    if status in CHECKED_STATUSES:
        return "uncontended"
    if status in ("contended", "collides"):
        return "contended"
    return "latency-bound" if status == "latency-bound" else None


def stats_by_class(comparisons: Sequence[Comparison]) -> dict[str, ValidationStats]:
    """:func:`validation_stats` of each :data:`VALIDATION_CLASSES` class that has comparisons, in
    that order."""
    return _by_class(comparisons, validation_stats)


def _by_class(comparisons, summarise):
    """``summarise`` of each :data:`VALIDATION_CLASSES` class's comparisons that has some, in that order."""
    out = {}
    for cls in VALIDATION_CLASSES:
        group = [c for c in comparisons if c.job_class == cls]
        if group:
            out[cls] = summarise(group)
    return out


def validation_stats(comparisons: Sequence[Comparison]) -> ValidationStats:
    """:class:`ValidationStats` of a set of comparisons (all of them: filter with :func:`comparable`)."""
    if not comparisons:
        return ValidationStats(0, None, None, None, None)
    errors = sorted(abs(c.rel_error) for c in comparisons)
    worst = max(comparisons, key=lambda c: (abs(c.rel_error), c.policy, c.job))
    return ValidationStats(
        n=len(comparisons),
        pearson_r=pearson_r([c.measured_s for c in comparisons], [c.estimated_s for c in comparisons]),
        median_abs_rel_error=_percentile(errors, 50),
        p90_abs_rel_error=_percentile(errors, 90),
        worst=worst)


MARKED = 0.5
"""An estimate of at least this many marks counts as marking the job (a measured count of 1 or more)."""


@dataclasses.dataclass(frozen=True)
class MarksComparison:
    """One job's measured ECN-marked packets and an estimate of them, over the same run of it.

    Attributes:
        policy, job: which.
        measured: marks the emulator's marker counted for the job.
        estimated: the estimate (packets; need not be whole).
        job_class: one of :data:`VALIDATION_CLASSES` (None: no verdict).
    """

    policy: str
    job: str
    measured: int
    estimated: float
    job_class: str | None = None

    @property
    def rel_error(self) -> float | None:
        """``(estimated - measured) / measured``; None for a job that was not marked."""
        return (self.estimated - self.measured) / self.measured if self.measured > 0 else None

    def to_dict(self) -> dict:
        """JSON-serialisable form, with the relative error."""
        return {**dataclasses.asdict(self), "rel_error": self.rel_error}


@dataclasses.dataclass(frozen=True)
class MarksStats:
    """Agreement of ECN mark estimates with the measured marks over a set of jobs.

    Attributes:
        n: jobs compared.
        marked: of them, jobs the marker marked.
        detected: of the marked jobs, those the estimate marks too (at least :data:`MARKED`).
        false_marked: jobs the estimate marks that the marker did not.
        pearson_r: correlation of measured and estimated counts (None: fewer than two jobs or a
            constant side).
        rank_r: Spearman's rank correlation (ties share their mean rank; None as ``pearson_r``).
        median_abs_rel_error, p90_abs_rel_error: of ``|rel_error|`` over the marked jobs (None:
            none was marked).
        measured_total, estimated_total: the counts summed.
    """

    n: int
    marked: int
    detected: int
    false_marked: int
    pearson_r: float | None
    rank_r: float | None
    median_abs_rel_error: float | None
    p90_abs_rel_error: float | None
    measured_total: int
    estimated_total: float

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        return dataclasses.asdict(self)

    def line(self) -> str:
        """One line for the terminal."""
        if not self.n:
            return "no job to compare"

        def fmt(r):
            return "-" if r is None else f"{r:.3f}"

        err = ("" if self.median_abs_rel_error is None else
               f"; on the marked median |error| {self.median_abs_rel_error:.1%}, p90 {self.p90_abs_rel_error:.1%}")
        return (f"{self.n} job{'s' if self.n != 1 else ''}, {self.marked} marked: {self.detected} found, "
                f"{self.false_marked} of the {self.n - self.marked} others estimated marked; r {fmt(self.pearson_r)}, "
                f"rank r {fmt(self.rank_r)}{err}; marks {self.measured_total:,} measured, "
                f"{self.estimated_total:,.0f} estimated")


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def marks_stats(comparisons: Sequence[MarksComparison]) -> MarksStats:
    """:class:`MarksStats` of a set of mark comparisons."""
    measured = [c.measured for c in comparisons]
    estimated = [c.estimated for c in comparisons]
    errors = sorted(abs(c.rel_error) for c in comparisons if c.rel_error is not None)
    return MarksStats(
        n=len(comparisons),
        marked=sum(1 for c in comparisons if c.measured > 0),
        detected=sum(1 for c in comparisons if c.measured > 0 and c.estimated >= MARKED),
        false_marked=sum(1 for c in comparisons if c.measured == 0 and c.estimated >= MARKED),
        pearson_r=pearson_r(measured, estimated) if comparisons else None,
        rank_r=pearson_r(_ranks(measured), _ranks(estimated)) if comparisons else None,
        median_abs_rel_error=_percentile(errors, 50) if errors else None,
        p90_abs_rel_error=_percentile(errors, 90) if errors else None,
        measured_total=sum(measured), estimated_total=sum(estimated))


def marks_by_class(comparisons: Sequence[MarksComparison]) -> dict[str, MarksStats]:
    """:func:`marks_stats` of each :data:`VALIDATION_CLASSES` class that has comparisons, in that order."""
    return _by_class(comparisons, marks_stats)


def marks_validation_lines(comparisons: Sequence[MarksComparison], indent: str = "  ") -> list[str]:
    """The terminal lines of a marks validation: a heading, all jobs, then each class of job."""
    if not comparisons:
        return []
    return [f"{indent}ECN marks per job, measured against the simulator's estimate (simulator.ecn):",
            f"{indent}  {'all':<14} {marks_stats(comparisons).line()}",
            *(f"{indent}  {cls:<14} {st.line()}" for cls, st in marks_by_class(comparisons).items())]


def marks_to_dict(comparisons: Sequence[MarksComparison]) -> dict | None:
    """JSON form of a marks validation: all jobs, each class, and every comparison (None: none)."""
    if not comparisons:
        return None
    return {"all": marks_stats(comparisons).to_dict(),
            "by_class": {c: st.to_dict() for c, st in marks_by_class(comparisons).items()},
            "jobs": [c.to_dict() for c in comparisons]}
