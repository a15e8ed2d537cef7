"""The scheduling interface: which jobs should hold GPUs now, and which running jobs to preempt.

Scheduling (order, preemption) is the stage before placement, separate from it so that any
scheduler combines with any placer (``docs/schedulers.md``).
A scheduler sees the active jobs as :class:`JobStatus` snapshots (attained service in
GPU-seconds, arrival time, running or waiting) and decides by GPU *count* only, as Tiresias
does (``docs/resolutions.md`` Tiresias §3.6, ⚠ A14)::

    decision = scheduler.schedule(jobs, total_gpus, now_s)
    runner: preempt decision.preempt, then hand decision.start (in that order) to the placer

A :class:`Decision` carries the full priority order, the admitted set, the running jobs to
preempt, the waiting jobs to start or resume, and the time of the scheduler's next internal
event (a demotion or promotion), so an event-driven loop never has to poll. A job that the
placer then cannot place simply stays waiting and is reconsidered at the next call.

Schedulers may keep state between calls (Tiresias' queues); they are driven by ``now_s``
only, never by a wall clock, and calls must come with non-decreasing ``now_s``.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Callable, Sequence

from common.errors import JobError


@dataclasses.dataclass(frozen=True)
class JobStatus:
    """What a scheduler knows about one active (arrived, unfinished) job.

    Attributes:
        name: unique job name.
        workers: GPUs the job needs, all at once (gang allocation); >= 1.
        arrival_s: submission time, seconds.
        running: True when the job holds GPUs now.
        service_gpu_s: attained 2D service ``workers x productive running time`` in GPU-seconds,
            never reset (Tiresias resets its own queueing clock on promotion, not this).
        remaining_gpu_s: true remaining service in GPU-seconds; only oracle schedulers (SRSF,
            SRTF) read it, and they raise when it is missing.
    """

    name: str
    workers: int
    arrival_s: float = 0.0
    running: bool = False
    service_gpu_s: float = 0.0
    remaining_gpu_s: float | None = None

    def __post_init__(self):
        if self.workers < 1:
            raise JobError(f"job {self.name!r}: workers must be >= 1, got {self.workers}")
        if self.service_gpu_s < 0:
            raise JobError(f"job {self.name!r}: service_gpu_s must be >= 0, got {self.service_gpu_s}")


@dataclasses.dataclass(frozen=True)
class Decision:
    """One scheduling decision.

    Attributes:
        order: every active job, highest priority first.
        run: the jobs admitted to hold GPUs, in priority order (running ones kept + ``start``).
        preempt: running jobs to stop (checkpoint and release their GPUs) now.
        start: waiting jobs to start or resume now, in priority order (pass them to the placer).
        wake_s: time of the scheduler's next internal event (demotion or promotion), if any; the
            caller should call :meth:`Scheduler.schedule` again then.
    """

    order: tuple[str, ...]
    run: tuple[str, ...]
    preempt: tuple[str, ...] = ()
    start: tuple[str, ...] = ()
    wake_s: float | None = None


def check_jobs(jobs: Sequence[JobStatus], total_gpus: int) -> None:
    """Reject duplicate names and a negative GPU total.

    Raises:
        JobError: a repeated job name or ``total_gpus < 0``.
    """
    if total_gpus < 0:
        raise JobError(f"total_gpus must be >= 0, got {total_gpus}")
    seen: set[str] = set()
    for j in jobs:
        if j.name in seen:
            raise JobError(f"duplicate job name {j.name!r}")
        seen.add(j.name)


def positive_seconds(scheduler: str, key: str, value: float) -> float:
    """``value`` as a float, checked to be a finite, positive time (a scheduler's period or lease).

    Raises:
        JobError: zero, a negative, an infinite or a NaN ``value``, named as ``scheduler: key``.
    """
    if not (value > 0 and math.isfinite(value)):
        raise JobError(f"{scheduler}: {key} must be finite and > 0, got {value!r}")
    return float(value)


def admit_by_count(ordered: Sequence[JobStatus], total_gpus: int) -> list[JobStatus]:
    """Greedy admission in priority order, skipping jobs that do not fit (no head-of-line blocking).

    Every GPU counts as available, including those now held by running jobs
    (``docs/resolutions.md`` Tiresias §3.6). O(n).
    """
    free, out = total_gpus, []
    for j in ordered:
        if j.workers <= free:
            out.append(j)
            free -= j.workers
    return out


def decide(ordered: Sequence[JobStatus], admitted: Sequence[JobStatus],
           wake_s: float | None = None) -> Decision:
    """Build a :class:`Decision`: preempt running jobs not admitted, start waiting ones admitted."""
    names = {j.name for j in admitted}
    return Decision(
        order=tuple(j.name for j in ordered),
        run=tuple(j.name for j in admitted),
        preempt=tuple(j.name for j in ordered if j.running and j.name not in names),
        start=tuple(j.name for j in admitted if not j.running),
        wake_s=wake_s,
    )


class Scheduler(abc.ABC):
    """A scheduler. Subclasses set ``name`` and implement :meth:`schedule`.

    Constructor keyword arguments come from the scheduler's spec string
    (``"name,key=value,..."``) plus ``seed``.
    """

    name: str = ""
    starts_in_batches: bool = False
    """True when the jobs it starts together run alone until the last of them ends (``waves``):
    another back end re-driving a run of it follows its batches, not their times
    (:func:`experiment.run.resimulate.simulate_schedule`)."""

    def __init__(self, seed: int = 0):
        self.seed = seed

    @abc.abstractmethod
    def schedule(self, jobs: Sequence[JobStatus], total_gpus: int, now_s: float) -> Decision:
        """Decide which jobs hold GPUs from ``now_s`` on.

        Args:
            jobs: the active jobs (arrived, not finished); a job missing from a later call is
                treated as finished and forgotten.
            total_gpus: GPUs the scheduled jobs may use in total (the cluster minus background work).
            now_s: current time in seconds; non-decreasing across calls.

        Returns:
            The decision. A job needing more than ``total_gpus`` is never admitted (it waits).
        """


class PriorityScheduler(Scheduler):
    """Preemptive greedy scheduling by a continuous priority key, re-evaluated at every call.

    Sort every active job by :meth:`key` (smaller first; ties: earlier arrival, then input
    order), admit greedily with skipping, preempt running jobs that are not admitted. This is
    the continuous 2DAS of ``docs/resolutions.md`` Tiresias §2 and the oracle baselines of §6.3-6.4.
    """

    @abc.abstractmethod
    def key(self, job: JobStatus) -> float:
        """Sort key of ``job``; smaller is served first."""

    def schedule(self, jobs: Sequence[JobStatus], total_gpus: int, now_s: float) -> Decision:
        """Sort by :meth:`key`, admit by count with skipping, preempt the rest."""
        check_jobs(jobs, total_gpus)
        ordered = sort_stable(jobs, self.key)
        return decide(ordered, admit_by_count(ordered, total_gpus))


def sort_stable(jobs: Sequence[JobStatus], key: Callable[[JobStatus], float]) -> list[JobStatus]:
    """Sort by ``key``, ties by arrival time, then by position in ``jobs``."""
    indexed = list(enumerate(jobs))
    indexed.sort(key=lambda ij: (key(ij[1]), ij[1].arrival_s, ij[0]))
    return [j for _, j in indexed]
