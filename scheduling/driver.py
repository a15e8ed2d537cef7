"""A small pure discrete-event driver: run a scheduler over jobs with known durations.

Enough to run the paper's toy examples and the spec's test vectors
(``shared/specs/tiresias.md`` §2.4, Appendix A). By default it works like [R]'s simulator
with the ``count`` placement: GPUs are counted, not placed. Given a ``cluster`` and a
placement ``policy`` it runs the two stages in the runner's order instead: preempted and
finished jobs release their GPUs, then the jobs the scheduler starts are handed to the
placer in priority order, and a job the placer leaves waiting stays waiting (the scheduler
reconsiders it at the next event). Preemption costs nothing. Time is virtual (seconds, or
any unit), never the wall clock; there is no randomness.

Events: arrivals, completions, the scheduler's own wake-ups (:attr:`Decision.wake_s`:
demotions, promotions) and, when ``period_s`` is set, a periodic pass every ``period_s``
(the toy example re-decides every time unit). At every event the scheduler is called with
the active jobs and its decision is applied: preempted jobs stop, started jobs run with all
their GPUs. Running jobs gain ``workers`` GPU-seconds of service per second and finish when
they have run ``duration_s``. Cost: O(events x scheduler call).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from common.errors import JobError
from placement.base import Cluster, JobRequest, Placement, PlacementPolicy
from scheduling.base import JobStatus, Scheduler

_EPS = 1e-9


@dataclasses.dataclass(frozen=True)
class SimJob:
    """A job of the driver: GPUs, running time needed, arrival time (seconds) and model (for placers)."""

    name: str
    workers: int
    duration_s: float
    arrival_s: float = 0.0
    model: str = "resnet50"

    def __post_init__(self):
        if self.workers < 1:
            raise JobError(f"job {self.name!r}: workers must be >= 1, got {self.workers}")
        if self.duration_s <= 0:
            raise JobError(f"job {self.name!r}: duration_s must be > 0, got {self.duration_s}")


@dataclasses.dataclass(frozen=True)
class SimResult:
    """What a run produced.

    Attributes:
        jct_s: completion time minus arrival time, per job.
        segments: ``(start_s, end_s, running jobs sorted by name)`` for every interval between events.
        preemptions: number of times a running job was preempted.
        placements: every placement applied, in order (empty without a placer).
    """

    jct_s: dict[str, float]
    segments: tuple[tuple[float, float, tuple[str, ...]], ...]
    preemptions: int
    placements: tuple[Placement, ...] = ()

    @property
    def avg_jct_s(self) -> float:
        """Mean JCT over all jobs."""
        return sum(self.jct_s.values()) / len(self.jct_s)

    def running_at(self, time_s: float) -> tuple[str, ...]:
        """Jobs running at ``time_s`` (the segment containing it; empty outside every segment)."""
        for start, end, names in self.segments:
            if start <= time_s < end:
                return names
        return ()


def simulate(jobs: Sequence[SimJob], scheduler: Scheduler, total_gpus: int | None = None,
             period_s: float | None = None, cluster: Cluster | None = None,
             policy: PlacementPolicy | None = None, max_events: int = 1_000_000) -> SimResult:
    """Run ``scheduler`` over ``jobs`` until every job finishes.

    Args:
        jobs: the jobs; names must be unique.
        scheduler: a fresh scheduler (schedulers may keep state).
        total_gpus: GPUs the jobs may use; defaults to the free GPUs of ``cluster``.
        period_s: if set, also call the scheduler every ``period_s`` from time 0.
        cluster: with ``policy``, place started jobs on this cluster (it is mutated: copy it first
            if you need it again).
        policy: the placement policy (only with ``cluster``).
        max_events: safety bound on the number of scheduler calls.

    Returns:
        The per-job JCTs, the running set over time and the preemption count.

    Raises:
        JobError: duplicate names, a job needing more than ``total_gpus`` (it could never
            run), a decision that over-commits the GPUs, waiting jobs with nothing running and
            no event due (they would wait for ever), or no progress within ``max_events``.
    """
    if (cluster is None) != (policy is None):
        raise JobError("simulate(): give both cluster and policy, or neither")
    if total_gpus is None:
        if cluster is None:
            raise JobError("simulate(): give total_gpus or a cluster")
        total_gpus = cluster.view().total_free
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise JobError("duplicate job names in simulate()")
    for j in jobs:
        if j.workers > total_gpus:
            raise JobError(f"job {j.name!r} needs {j.workers} GPUs; the cluster has {total_gpus}, "
                           "so it could never run")
    if period_s is not None and period_s <= 0:
        raise JobError(f"period_s must be > 0, got {period_s}")
    by_name = {j.name: j for j in jobs}
    service = dict.fromkeys(names, 0.0)
    running: set[str] = set()
    done: dict[str, float] = {}
    segments = []
    placements: list[Placement] = []
    preemptions = 0
    now = min((j.arrival_s for j in jobs), default=0.0)
    for _ in range(max_events):
        if len(done) == len(jobs):
            return SimResult(done, tuple(segments), preemptions, tuple(placements))
        active = [j for j in jobs if j.arrival_s <= now + _EPS and j.name not in done]
        statuses = [JobStatus(j.name, j.workers, j.arrival_s, j.name in running, service[j.name],
                              j.workers * j.duration_s - service[j.name]) for j in active]
        decision = scheduler.schedule(statuses, total_gpus, now)
        for n in decision.preempt:
            if n in running:
                preemptions += 1
                running.discard(n)
                if cluster is not None:
                    cluster.release(n)
        starts = [n for n in decision.start if n not in running]
        if cluster is not None:
            requests = [JobRequest(n, by_name[n].model, by_name[n].workers, arrival_s=by_name[n].arrival_s)
                        for n in starts]
            placed = policy.place(requests, cluster.view())
            for p in placed:
                cluster.apply(p)
            placements += placed
            starts = [p.job for p in placed]
        running |= set(starts)
        if sum(by_name[n].workers for n in running) > total_gpus:
            raise JobError(f"{scheduler.name}: decision at {now} s over-commits {total_gpus} GPUs: "
                           f"{sorted(running)}")
        candidates = [j.arrival_s for j in jobs if j.arrival_s > now + _EPS]
        candidates += [now + by_name[n].duration_s - service[n] / by_name[n].workers for n in running]
        if decision.wake_s is not None and decision.wake_s > now + _EPS:
            candidates.append(decision.wake_s)
        if not candidates:
            # A periodic pass cannot help: nothing runs, arrives or is due, so nothing changes.
            raise JobError(f"{scheduler.name}: nothing runs at {now} s and no event is due; "
                           f"waiting jobs {[j.name for j in active]} would wait for ever")
        if period_s is not None:
            candidates.append((math.floor(now / period_s + _EPS) + 1) * period_s)
        nxt = min(candidates)
        segments.append((now, nxt, tuple(sorted(running))))
        for n in running:
            service[n] += by_name[n].workers * (nxt - now)
        now = nxt
        for n in list(running):
            if service[n] >= by_name[n].workers * by_name[n].duration_s - _EPS:
                running.discard(n)
                done[n] = now - by_name[n].arrival_s
                if cluster is not None:
                    cluster.release(n)
    raise JobError(f"simulate(): no completion after {max_events} scheduler calls")
