"""``RecordedSchedule``: another run's schedule, replayed through the experiment loop.

To estimate a recorded run on another back end, the loop re-drives the record: this scheduler says
when each job starts and stops, and a placer re-applies each recorded placement
(:mod:`experiment.run.resimulate`). :meth:`RecordedSchedule.at_recorded_times` follows an online
scheduler's run, :meth:`RecordedSchedule.in_recorded_batches` a ``waves`` run batch by batch; where
the record and this back end disagree it resolves as ``docs/simulator-engines.md`` says ([R]).

Not in ``scheduling.SCHEDULERS``: it is built from a record, not from a spec string. Cost:
O(e log e) to build for e recorded events, then O(jobs + events due) per call.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping, Sequence

from common.errors import JobError
from scheduling.base import Decision, JobStatus, Scheduler, check_jobs

_EPS = 1e-9
"""Events this close after ``now_s`` are due now: the loop does not wake for them separately."""

_PREEMPT, _START = 0, 1
"""Event kinds, in the order events at one time are handled: a preemption before a start."""


class RecordedSchedule(Scheduler):
    """A recorded schedule, replayed (see ``docs/simulator-engines.md``); build it with a constructor.

    The placer re-applies the placement of the recorded start the scheduler asks for:
    :meth:`start_asked` says which.
    """

    name = "recorded"

    def __init__(self):
        super().__init__(seed=0)
        self._seen: set[str] = set()  # every job some call has listed (arrived)
        self._asked: dict[str, int] = {}  # job -> index of the recorded start last asked of it

    @classmethod
    def at_recorded_times(cls, starts: Sequence[tuple[float, str]],
                          preemptions: Sequence[tuple[float, str]] = ()) -> RecordedSchedule:
        """Every start and every preemption at its recorded time.

        Args:
            starts: ``(time_s, job)`` of every recorded start, in the record's order (ties in
                time are made in this order).
            preemptions: ``(time_s, job)`` of every recorded preemption, in the record's order.

        Raises:
            JobError: a time that is negative, infinite or NaN.
        """
        return _AtTimes(starts, preemptions)

    @classmethod
    def in_recorded_batches(cls, batches: Sequence[Sequence[str]]) -> RecordedSchedule:
        """The batches one after another, each once every job of the one before has finished.

        Args:
            batches: the jobs of each recorded batch, in the record's order; the recorded starts
                are these jobs in this order (:meth:`start_asked` counts them so). A batch
                starts once all its jobs have arrived; empty batches are skipped.
        """
        return _InBatches(batches)

    def start_asked(self, job: str) -> int:
        """Index, among the recorded starts, of the one this scheduler last asked of ``job``.

        Raises:
            JobError: no start of ``job`` was asked.
        """
        if job not in self._asked:
            raise JobError(f"{self.name}: no recorded start of {job!r} was asked; asked: {sorted(self._asked)}")
        return self._asked[job]

    def schedule(self, jobs: Sequence[JobStatus], total_gpus: int, now_s: float) -> Decision:
        """The recorded preemptions and starts due at ``now_s``; a wake-up at the next recorded event."""
        check_jobs(jobs, total_gpus)
        status = {j.name: j for j in jobs}
        self._seen.update(status)
        preempt, starts, wake_s = self._due(status, now_s)
        self._asked.update(starts)
        kept = tuple(j.name for j in jobs if j.running and j.name not in preempt)
        return Decision(order=tuple(status), run=kept + tuple(starts), preempt=tuple(preempt),
                        start=tuple(starts), wake_s=wake_s)

    def _finished(self, job: str, status: Mapping[str, JobStatus]) -> bool:
        """Whether ``job`` has finished here: listed by an earlier call, missing from this one."""
        return job in self._seen and job not in status

    @abc.abstractmethod
    def _due(self, status: Mapping[str, JobStatus], now_s: float
             ) -> tuple[list[str], dict[str, int], float | None]:
        """The running jobs to preempt now, the jobs to start now (each with the index of its
        recorded start, in the order to place them) and the time of the next recorded event."""


class _AtTimes(RecordedSchedule):
    """Every recorded start and preemption at its time (:meth:`RecordedSchedule.at_recorded_times`)."""

    def __init__(self, starts: Sequence[tuple[float, str]], preemptions: Sequence[tuple[float, str]]):
        super().__init__()
        for time_s, job in (*starts, *preemptions):
            if not (time_s >= 0 and math.isfinite(time_s)):
                raise JobError(f"{self.name}: event of job {job!r} at {time_s!r} s; times must be finite and >= 0")
        self._events = sorted([(t, _PREEMPT, i, job) for i, (t, job) in enumerate(preemptions)]
                              + [(t, _START, i, job) for i, (t, job) in enumerate(starts)])
        self._next = 0  # the first event not handled yet
        self._pending: dict[str, int] = {}  # job -> its recorded start due and not made yet, in due order

    def _due(self, status, now_s):
        preempt: list[str] = []
        events = self._events
        while self._next < len(events) and events[self._next][0] <= now_s + _EPS:
            _, kind, i, job = events[self._next]
            self._next += 1
            if kind == _START:
                self._pending[job] = i
                continue
            self._pending.pop(job, None)  # a start not made yet is cancelled with its run
            if job in status and status[job].running and job not in preempt:
                preempt.append(job)
        # A due start is made once its job runs (and is not being stopped); void once it has finished.
        self._pending = {job: i for job, i in self._pending.items()
                         if not self._finished(job, status)
                         and not (job in status and status[job].running and job not in preempt)}
        starts = {job: i for job, i in self._pending.items() if job in status}
        return preempt, starts, events[self._next][0] if self._next < len(events) else None


class _InBatches(RecordedSchedule):
    """The recorded batches one after another (:meth:`RecordedSchedule.in_recorded_batches`)."""

    def __init__(self, batches: Sequence[Sequence[str]]):
        super().__init__()
        self._batches: list[dict[str, int]] = []  # each batch: job -> index of its recorded start
        index = 0
        for batch in batches:
            jobs = {}
            for job in batch:
                jobs[job], index = index, index + 1
            if jobs:
                self._batches.append(jobs)
        self._current = -1  # the batch started last

    def _due(self, status, now_s):
        batches = self._batches
        while self._current + 1 < len(batches) and (
                self._current < 0 or all(self._finished(job, status) for job in batches[self._current])):
            self._current += 1
        if self._current < 0:
            return [], {}, None
        waiting = {job: i for job, i in batches[self._current].items() if not self._finished(job, status)}
        if not all(job in status for job in waiting):
            return [], {}, None  # the batch starts together, once all its jobs have arrived
        return [], {job: i for job, i in waiting.items() if not status[job].running}, None
