"""``batch``: NetPack's periodic batches (``docs/resolutions.md`` NetPack §3.2, Step ❶).

Jobs are gathered and handed to the placer once per period (``period_s``, from time 0): at each
period's start every waiting job, in arrival order (ties: input order), goes to the placer, which
picks the subset to place (NetPack's 0/1 knapsack over the free GPUs; any other policy places what
it can in that order). Between period starts nothing starts, even when GPUs free up; a job arriving
during a period waits for the next one's start. Never preempts. O(n log n) per call.

A period's start is a call at its exact time (a clock that jumps to the wakes it is given, the
simulator's) or the first call in that period when the scheduler asked to be woken at its start
(a clock that runs on, the emulator's, comes back a little after the time it asked for); the
loop's first call, at its start, is period 0's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduling.base import Decision, JobStatus, Scheduler, check_jobs, positive_seconds, sort_stable


class BatchScheduler(Scheduler):
    """Every waiting job to the placer at each period's start, nothing in between (see the module docstring).

    Args:
        seed: unused (deterministic); kept for the common interface.
        period_s: the batch period, seconds (finite, > 0; 60 s, ``docs/resolutions.md`` NetPack §3.10).

    Raises:
        JobError: a period that is not positive and finite.
    """

    name = "batch"

    def __init__(self, seed: int = 0, period_s: float = 60.0):
        super().__init__(seed)
        self.period_s = positive_seconds(self.name, "period_s", period_s)
        self._served = -1  # the index of the last period whose start handed out a batch
        self._woken: int | None = 0  # the period whose start the last call asked to be woken at (0: the loop's start)

    def period_start(self, now_s: float) -> int | None:
        """The index ``k`` of the period starting at ``now_s`` (``k * period_s``, to a relative 1e-9), else None."""
        k = round(now_s / self.period_s)
        return k if abs(now_s - k * self.period_s) <= 1e-9 * max(1.0, abs(now_s)) else None

    def schedule(self, jobs: Sequence[JobStatus], total_gpus: int, now_s: float) -> Decision:
        """At a period's start, hand every waiting job to the placer; otherwise wake at the next start."""
        check_jobs(jobs, total_gpus)
        ordered = sort_stable(jobs, lambda j: j.arrival_s)
        waiting = [j for j in ordered if not j.running]
        k = self.period_start(now_s)
        current = math.floor(now_s / self.period_s + 1e-9)
        if k is None and current == self._woken:
            k = current  # the wake this scheduler asked for, on a clock that ran a little past it
        start: tuple[str, ...] = ()
        if k is not None and k > self._served and waiting:
            self._served, start = k, tuple(j.name for j in waiting)
        wake = current + 1 if waiting else None
        self._woken = wake
        return Decision(
            order=tuple(j.name for j in ordered),
            run=tuple(j.name for j in ordered if j.running or start),  # a batch hands out every waiting job
            start=start,
            wake_s=wake * self.period_s if wake is not None else None,
        )
