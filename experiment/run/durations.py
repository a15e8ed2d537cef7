"""The ``durations`` back end: every job runs for a known time, whatever its placement.

This is the model of the scheduling papers' simulators (Tiresias' authors' simulator with its
``count`` placement, ``docs/resolutions.md`` Tiresias §2.4 and Appendix A): a running job gains
``workers`` GPU-seconds of service per second and finishes when it has run ``duration_s``;
the network plays no part. Preemption costs nothing and keeps the service attained. With it
the loop runs the papers' toy examples and the specs' test vectors exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from backend.protocol import Backend, ExperimentJob, RunEnd
from common.errors import JobError
from experiment.run.loop import LoopResult, PreemptionCost, run_loop
from placement.base import Cluster, Placement, PlacementPolicy
from scheduling.base import Scheduler

_EPS = 1e-9


class DurationBackend(Backend):
    """Jobs run for their ``duration_s``; service is kept across preemptions."""

    name = "durations"

    def __init__(self, start_s: float = 0.0):
        self._now = start_s
        self._service: dict[str, float] = {}  # GPU-seconds attained, per job ever started
        self._running: dict[str, tuple[ExperimentJob, float]] = {}  # name -> (job, run start)

    @property
    def now_s(self) -> float:
        return self._now

    def start(self, runs: Sequence[tuple[ExperimentJob, Placement | None]]) -> None:
        for job, _ in runs:
            if job.duration_s is None:
                raise JobError(f"job {job.name!r}: the durations back end needs its duration_s")
            if job.name in self._running:
                raise JobError(f"job {job.name!r} is already running")
            self._service.setdefault(job.name, 0.0)
            self._running[job.name] = (job, self._now)

    def stop(self, job: str) -> RunEnd:
        if job not in self._running:
            raise JobError(f"job {job!r} is not running")
        _, started = self._running.pop(job)
        return RunEnd(job, started, self._now, finished=False)

    def advance(self, until_s: float) -> list[RunEnd]:
        ends = [self._now + j.duration_s - self._service[n] / j.workers for n, (j, _) in self._running.items()]
        nxt = min([*ends, until_s])
        if nxt == math.inf:
            return []
        for n, (j, _) in self._running.items():
            self._service[n] += j.workers * (nxt - self._now)
        self._now = nxt
        out = []
        for n, (j, started) in sorted(self._running.items()):
            if self._service[n] >= j.workers * j.duration_s - _EPS:
                out.append(RunEnd(n, started, nxt, finished=True))
        for end in out:
            del self._running[end.job]
        return out


def duration_job(name: str, workers: int, duration_s: float, arrival_s: float = 0.0,
                 model: str = "resnet50") -> ExperimentJob:
    """A job of the durations model: ``workers`` GPUs for ``duration_s`` seconds from ``arrival_s``."""
    return ExperimentJob(name, workers, arrival_s, model=model, duration_s=duration_s)


def run_durations(jobs: Sequence[ExperimentJob], scheduler: Scheduler, total_gpus: int | None = None,
                  period_s: float | None = None, cluster: Cluster | None = None,
                  policy: PlacementPolicy | None = None, max_events: int = 1_000_000,
                  preemption: PreemptionCost | None = None) -> LoopResult:
    """The loop on a fresh :class:`DurationBackend` whose clock starts at the first arrival
    (arguments as :func:`experiment.run.loop.run_loop`)."""
    first = min((j.arrival_s for j in jobs), default=0.0)
    return run_loop(jobs, scheduler, DurationBackend(first), total_gpus=total_gpus, period_s=period_s,
                    cluster=cluster, policy=policy, max_events=max_events, preemption=preemption)
