"""The experiment loop: arrivals, completions and the scheduler's wake-ups drive a back end.

One loop for every back end (:mod:`backend.protocol`): the durations model, the flow-level
simulator and the emulated network. At every event the loop

1. asks the scheduler (``scheduling/``) which of the active (arrived, unfinished) jobs hold
   GPUs, from their attained service and arrival times;
2. stops the jobs it preempts (their GPUs are released);
3. hands the jobs it starts to the placer in priority order; a job the placer leaves
   waiting stays waiting and is reconsidered at the next event. Without a placer, GPUs are
   counted (as Tiresias' authors' simulator does with its ``count`` placement);
4. starts the placed jobs on the back end, together, and lets it run until the next event:
   an arrival, the scheduler's wake-up (:attr:`scheduling.base.Decision.wake_s`), a periodic
   pass (``period_s``), or the first completion, whichever comes first.

Static experiments, where every job arrives at 0 and the ``waves`` scheduler starts waiting
jobs only when none runs, are the case where the jobs a placer fits run together as a wave
and the others wait for the whole wave to end. Preemption costs no time here; the back end
says what a preempted job keeps (its completed iterations, or its service). There is no
randomness and no wall clock: time is the back end's. Cost: O(n log n) to order the arrivals,
then O(events x (active jobs + scheduler call + placer call)) plus the back end's own.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable, Sequence

from backend.protocol import Backend, ExperimentJob, RunEnd
from common.errors import JobError, PlacementError
from placement.base import Cluster, Placement, PlacementPolicy
from scheduling.base import JobStatus, Scheduler

_EPS = 1e-9


@dataclasses.dataclass(frozen=True)
class LoopEvent:
    """Something the loop did: ``kind`` is ``started``, ``preempted`` or ``finished``."""

    kind: str
    time_s: float
    job: str
    placement: Placement | None = None


class NeverPlaced(JobError, PlacementError):
    """Waiting jobs that nothing running, arriving or due would ever let start; ``jobs`` names them."""

    def __init__(self, message: str, jobs: Sequence[str]):
        super().__init__(message)
        self.jobs = tuple(jobs)


@dataclasses.dataclass(frozen=True)
class Started:
    """A start of a job: when, and where (None: GPUs counted, not placed)."""

    time_s: float
    job: str
    placement: Placement | None


@dataclasses.dataclass(frozen=True)
class LoopResult:
    """What a run of the loop produced.

    Attributes:
        jct_s: completion time minus arrival time, per job.
        segments: ``(start_s, end_s, running jobs sorted by name)`` for every interval between events.
        preemptions: number of times a running job was preempted.
        starts: every start, in order, with its placement.
        runs: every run as the back end ended it (finished or preempted), in order.
    """

    jct_s: dict[str, float]
    segments: tuple[tuple[float, float, tuple[str, ...]], ...]
    preemptions: int
    starts: tuple[Started, ...] = ()
    runs: tuple[RunEnd, ...] = ()

    @property
    def placements(self) -> tuple[Placement, ...]:
        """Every placement applied, in order (empty without a placer)."""
        return tuple(s.placement for s in self.starts if s.placement is not None)

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


def run_loop(jobs: Sequence[ExperimentJob], scheduler: Scheduler, backend: Backend,
             total_gpus: int | None = None, period_s: float | None = None, cluster: Cluster | None = None,
             policy: PlacementPolicy | None = None, max_events: int = 1_000_000,
             on_event: Callable[[LoopEvent], None] | None = None) -> LoopResult:
    """Run ``scheduler`` (and ``policy``) over ``jobs`` on ``backend`` until every job finishes.

    Args:
        jobs: the jobs; names must be unique.
        scheduler: a fresh scheduler (schedulers may keep state).
        backend: a fresh back end, its clock at or before the first arrival.
        total_gpus: GPUs the jobs may use; defaults to the free GPUs of ``cluster``.
        period_s: if set, also call the scheduler every ``period_s`` from time 0.
        cluster: with ``policy``, place started jobs on this cluster (it is mutated, and every
            GPU is released again by the end).
        policy: the placement policy (only with ``cluster``).
        max_events: safety bound on the number of scheduler calls.
        on_event: called with every start, preemption and completion.

    Returns:
        Per-job JCTs, the running set over time, preemptions, starts and runs.

    Raises:
        JobError: duplicate names, a job needing more than ``total_gpus`` (it could never
            run), a decision that over-commits the GPUs, waiting jobs with nothing running and
            no event due (they would wait for ever), or no progress within ``max_events``.
    """
    if (cluster is None) != (policy is None):
        raise JobError("run_loop(): give both cluster and policy, or neither")
    if total_gpus is None:
        if cluster is None:
            raise JobError("run_loop(): give total_gpus or a cluster")
        total_gpus = cluster.view().total_free
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise JobError("duplicate job names in run_loop()")
    for j in jobs:
        if j.workers > total_gpus:
            raise JobError(f"job {j.name!r} needs {j.workers} GPUs; the cluster has {total_gpus}, "
                           "so it could never run")
    if period_s is not None and period_s <= 0:
        raise JobError(f"period_s must be > 0, got {period_s}")
    say = on_event or (lambda _event: None)
    by_name = {j.name: j for j in jobs}
    service = dict.fromkeys(names, 0.0)
    running: set[str] = set()
    done: dict[str, float] = {}
    segments, starts, runs = [], [], []
    preemptions = 0
    now = backend.now_s
    # Jobs by arrival (ties in input order); the active ones are kept in input order, as the
    # scheduler sees them, and the next arrival is found without scanning every job.
    by_arrival = sorted(range(len(jobs)), key=lambda i: jobs[i].arrival_s)
    arrived = 0
    active_idx: list[int] = []

    def finish(end: RunEnd) -> None:
        runs.append(end)
        running.discard(end.job)
        if cluster is not None:
            cluster.release(end.job)

    for _ in range(max_events):
        if len(done) == len(jobs):
            return LoopResult(done, tuple(segments), preemptions, tuple(starts), tuple(runs))
        while arrived < len(jobs) and jobs[by_arrival[arrived]].arrival_s <= now + _EPS:
            bisect.insort(active_idx, by_arrival[arrived])
            arrived += 1
        active_idx = [i for i in active_idx if jobs[i].name not in done]
        active = [jobs[i] for i in active_idx]
        statuses = [JobStatus(j.name, j.workers, j.arrival_s, j.name in running, service[j.name],
                              None if j.duration_s is None else j.workers * j.duration_s - service[j.name])
                    for j in active]
        decision = scheduler.schedule(statuses, total_gpus, now)
        for n in decision.preempt:
            if n in running:
                preemptions += 1
                finish(backend.stop(n))
                say(LoopEvent("preempted", now, n))
        wanted = [by_name[n] for n in decision.start if n not in running]
        if cluster is not None:
            placed = policy.place([j.request() for j in wanted], cluster.view())
            for p in placed:
                cluster.apply(p)
            new = [(by_name[p.job], p) for p in placed]
        else:
            new = [(j, None) for j in wanted]
        if new:
            backend.start(new)
            for j, p in new:
                starts.append(Started(now, j.name, p))
                running.add(j.name)
                say(LoopEvent("started", now, j.name, p))
        if sum(by_name[n].workers for n in running) > total_gpus:
            raise JobError(f"{scheduler.name}: decision at {now} s over-commits {total_gpus} GPUs: "
                           f"{sorted(running)}")
        events = [jobs[by_arrival[arrived]].arrival_s] if arrived < len(jobs) else []
        if decision.wake_s is not None and decision.wake_s > now + _EPS:
            events.append(decision.wake_s)
        if not events and not running:
            # A periodic pass cannot help: nothing runs, arrives or is due, so nothing changes.
            waiting = [j.name for j in active]
            raise NeverPlaced(f"{scheduler.name}: nothing runs at {now} s and no event is due; "
                              f"waiting jobs {waiting} would wait for ever", waiting)
        if period_s is not None:
            events.append((math.floor(now / period_s + _EPS) + 1) * period_s)
        ended = backend.advance(min(events, default=math.inf))
        nxt = backend.now_s
        if not nxt >= now:
            raise JobError(f"back end {backend.name!r} moved its clock back from {now} s to {nxt} s")
        segments.append((now, nxt, tuple(sorted(running))))
        for n in running:
            service[n] += by_name[n].workers * (nxt - now)
        now = nxt
        for end in ended:
            if end.job not in running:
                raise JobError(f"back end {backend.name!r} finished {end.job!r}, which was not running")
            finish(end)
            done[end.job] = now - by_name[end.job].arrival_s
            say(LoopEvent("finished", now, end.job))
    raise JobError(f"run_loop(): no completion after {max_events} scheduler calls")
