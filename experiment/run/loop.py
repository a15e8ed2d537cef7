"""The experiment loop: arrivals, completions and the scheduler's wake-ups drive a back end.

One loop for every back end (:mod:`backend.protocol`): the durations model, the flow-level
simulator and the emulated network. At every event the loop

1. asks the scheduler (``scheduling/``) which of the active (arrived, unfinished) jobs hold
   GPUs, from their attained service and arrival times;
2. stops the jobs it preempts (their GPUs are released);
3. hands the jobs it starts to the placer in priority order; a job the placer leaves
   waiting stays waiting and is reconsidered at the next event. Without a placer, GPUs are
   counted (as Tiresias' authors' simulator does with its ``count`` placement): the jobs
   that fit in the free GPUs start, in order;
4. starts the placed jobs on the back end, together, hands it the time shifts the placer
   gave (:class:`placement.base.TimeShift`, Cassini's) and keeps the decision (with its log)
   when it has either, and lets the back end run until the next event:
   an arrival, the scheduler's wake-up (:attr:`scheduling.base.Decision.wake_s`), a periodic
   pass (``period_s``), or the first completion, whichever comes first.

The run's state (service, running and finished jobs, the record, the clock) is one object,
``_LoopRun``, with a method per step; :func:`run_loop` builds it and runs it.

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
from placement.base import Cluster, Placement, PlacementPolicy, TimeShift
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
class PlacerDecision:
    """A decision of the placer that timed jobs or logged itself (Cassini's), as the loop applied it.

    Attributes:
        time_s: when it was taken (the shifts' common origin).
        started: the jobs it started.
        shifts: the time shifts it gave.
        applied: whether the back end applies time shifts (False: it cannot; they were not).
        log: the placer's log entry (None: it logs nothing).
    """

    time_s: float
    started: tuple[str, ...]
    shifts: tuple[TimeShift, ...]
    applied: bool
    log: object = None

    def to_dict(self) -> dict:
        """JSON form (one entry of ``decisions.json``)."""
        return {"time_s": self.time_s, "started": list(self.started), "shifts_applied": self.applied,
                **({"log": self.log} if self.log is not None else {"shifts": [s.to_dict() for s in self.shifts]})}


@dataclasses.dataclass(frozen=True)
class LoopResult:
    """What a run of the loop produced.

    Attributes:
        jct_s: completion time minus arrival time, per job.
        segments: ``(start_s, end_s, running jobs sorted by name)`` for every interval between events.
        preemptions: number of times a running job was preempted.
        starts: every start, in order, with its placement.
        runs: every run as the back end ended it (finished or preempted), in order.
        decisions: the placer's decisions that timed jobs or logged themselves, in order.
    """

    jct_s: dict[str, float]
    segments: tuple[tuple[float, float, tuple[str, ...]], ...]
    preemptions: int
    starts: tuple[Started, ...] = ()
    runs: tuple[RunEnd, ...] = ()
    decisions: tuple[PlacerDecision, ...] = ()

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
    total_gpus = _checked_total_gpus(jobs, total_gpus, period_s, cluster, policy)
    run = _LoopRun(jobs, scheduler, backend, total_gpus, period_s, cluster, policy, on_event)
    for _ in range(max_events):
        if run.all_done():
            return run.result()
        run.step()
    raise JobError(f"run_loop(): no completion after {max_events} scheduler calls")


def _checked_total_gpus(jobs: Sequence[ExperimentJob], total_gpus: int | None, period_s: float | None,
                        cluster: Cluster | None, policy: PlacementPolicy | None) -> int:
    """The GPUs the jobs may use (``total_gpus``, else the cluster's free ones), the arguments checked.

    Raises:
        JobError: as :func:`run_loop` says of its arguments.
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
    return total_gpus


class _LoopRun:
    """One run of the loop: its state, and one method per step of the module docstring.

    Jobs are kept by arrival (ties in input order) so the next arrival is found without scanning
    every job; the active ones (arrived, unfinished) are kept in input order, as the scheduler
    sees them.
    """

    def __init__(self, jobs: Sequence[ExperimentJob], scheduler: Scheduler, backend: Backend, total_gpus: int,
                 period_s: float | None, cluster: Cluster | None, policy: PlacementPolicy | None,
                 on_event: Callable[[LoopEvent], None] | None):
        self.jobs, self.scheduler, self.backend = jobs, scheduler, backend
        self.total_gpus, self.period_s, self.cluster, self.policy = total_gpus, period_s, cluster, policy
        self.say = on_event or (lambda _event: None)
        self.by_name = {j.name: j for j in jobs}
        self.service = dict.fromkeys(self.by_name, 0.0)  # attained GPU-seconds
        self.running: set[str] = set()
        self.running_gpus = 0  # the running jobs' workers
        self._running_names: tuple[str, ...] | None = ()  # running sorted, None once it changed
        self.done: dict[str, float] = {}  # finished job -> its JCT
        self.segments: list[tuple[float, float, tuple[str, ...]]] = []
        self.starts: list[Started] = []
        self.runs: list[RunEnd] = []
        self.decisions: list[PlacerDecision] = []
        self.preemptions = 0
        self.now_s = backend.now_s
        self.by_arrival = sorted(range(len(jobs)), key=lambda i: jobs[i].arrival_s)
        self.arrived = 0  # jobs of ``by_arrival`` admitted so far
        self.active_idx: list[int] = []  # indices of the active jobs, ascending

    def all_done(self) -> bool:
        """Whether every job has finished."""
        return len(self.done) == len(self.jobs)

    def result(self) -> LoopResult:
        """What the run produced so far."""
        return LoopResult(self.done, tuple(self.segments), self.preemptions, tuple(self.starts), tuple(self.runs),
                          tuple(self.decisions))

    def step(self) -> None:
        """One event: admit, schedule, preempt, place and start, then advance to the next event."""
        active = self.admit_arrivals()
        decision = self.scheduler.schedule(self.statuses(active), self.total_gpus, self.now_s)
        self.preempt(decision.preempt)
        self.place_and_start(decision.start)
        self.advance(self.next_event_s(decision.wake_s, active))

    def admit_arrivals(self) -> list[ExperimentJob]:
        """Admit the jobs arrived by now; the active jobs, in input order."""
        jobs, order = self.jobs, self.by_arrival
        while self.arrived < len(jobs) and jobs[order[self.arrived]].arrival_s <= self.now_s + _EPS:
            bisect.insort(self.active_idx, order[self.arrived])
            self.arrived += 1
        self.active_idx = [i for i in self.active_idx if jobs[i].name not in self.done]
        return [jobs[i] for i in self.active_idx]

    def statuses(self, active: Sequence[ExperimentJob]) -> list[JobStatus]:
        """The scheduler's view of the active jobs."""
        service = self.service
        return [JobStatus(j.name, j.workers, j.arrival_s, j.name in self.running, service[j.name],
                          None if j.duration_s is None else j.workers * j.duration_s - service[j.name])
                for j in active]

    def preempt(self, names: Sequence[str]) -> None:
        """Stop the running jobs of ``names`` now (the others are not running: nothing to do)."""
        for n in names:
            if n in self.running:
                self.preemptions += 1
                self.finish(self.backend.stop(n))
                self.say(LoopEvent("preempted", self.now_s, n))

    def place_and_start(self, names: Sequence[str]) -> None:
        """Place the waiting jobs of ``names`` (in that order) and start the placed ones together.

        Raises:
            JobError: the jobs then running over-commit the GPUs.
        """
        wanted = [self.by_name[n] for n in names if n not in self.running]
        decision = None
        if self.cluster is not None:
            decision = self.policy.decide([j.request() for j in wanted], self.cluster.view()) if wanted else None
            placed = decision.placements if decision is not None else ()
            for p in placed:
                self.cluster.apply(p)
            new = [(self.by_name[p.job], p) for p in placed]
        else:
            new = [(j, None) for j in self.counted(wanted)]
        if new:
            self.backend.start(new)
            for j, p in new:
                self.starts.append(Started(self.now_s, j.name, p))
                self.running.add(j.name)
                self.running_gpus += j.workers
                self._running_names = None
                self.say(LoopEvent("started", self.now_s, j.name, p))
        if decision is not None and (decision.shifts or decision.log is not None):
            shifts = tuple(s for s in decision.shifts if s.job in self.running)
            applied = self.backend.shift(shifts) if shifts else False
            self.decisions.append(PlacerDecision(self.now_s, tuple(j.name for j, _ in new), shifts, applied,
                                                 decision.log))
        if self.running_gpus > self.total_gpus:
            raise JobError(f"{self.scheduler.name}: decision at {self.now_s} s over-commits {self.total_gpus} "
                           f"GPUs: {sorted(self.running)}")

    def counted(self, wanted: Sequence[ExperimentJob]) -> list[ExperimentJob]:
        """Without a placer: the jobs of ``wanted`` that fit, in order, in the GPUs the running jobs
        leave free (a scheduler handing out more than fits, as ``batch`` does, starts what fits)."""
        free = self.total_gpus - self.running_gpus
        out = []
        for j in wanted:
            if j.workers <= free:
                out.append(j)
                free -= j.workers
        return out

    def next_event_s(self, wake_s: float | None, active: Sequence[ExperimentJob]) -> float:
        """The time of the next event: an arrival, the scheduler's wake-up or a periodic pass
        (``math.inf``: none; the first completion then ends the wait).

        Raises:
            NeverPlaced: nothing runs and no arrival or wake-up is due, so ``active`` would wait for ever.
        """
        now = self.now_s
        events = [self.jobs[self.by_arrival[self.arrived]].arrival_s] if self.arrived < len(self.jobs) else []
        if wake_s is not None and wake_s > now + _EPS:
            events.append(wake_s)
        if not events and not self.running:
            # A periodic pass cannot help: nothing runs, arrives or is due, so nothing changes.
            waiting = [j.name for j in active]
            raise NeverPlaced(f"{self.scheduler.name}: nothing runs at {now} s and no event is due; "
                              f"waiting jobs {waiting} would wait for ever", waiting)
        if self.period_s is not None:
            events.append((math.floor(now / self.period_s + _EPS) + 1) * self.period_s)
        return min(events, default=math.inf)

    def advance(self, until_s: float) -> None:
        """Let the back end run until ``until_s`` or the first completion; account for the interval.

        Raises:
            JobError: the back end moved its clock back, or finished a job that was not running.
        """
        backend, now = self.backend, self.now_s
        ended = backend.advance(until_s)
        nxt = backend.now_s
        if not nxt >= now:
            raise JobError(f"back end {backend.name!r} moved its clock back from {now} s to {nxt} s")
        if self._running_names is None:  # the same tuple for every interval the running jobs hold
            self._running_names = tuple(sorted(self.running))
        self.segments.append((now, nxt, self._running_names))
        for n in self.running:
            self.service[n] += self.by_name[n].workers * (nxt - now)
        self.now_s = nxt
        for end in ended:
            if end.job not in self.running:
                raise JobError(f"back end {backend.name!r} finished {end.job!r}, which was not running")
            self.finish(end)
            self.done[end.job] = nxt - self.by_name[end.job].arrival_s
            self.say(LoopEvent("finished", nxt, end.job))

    def finish(self, end: RunEnd) -> None:
        """Record the end of a run (finished or preempted) and release the job's GPUs."""
        self.runs.append(end)
        if end.job in self.running:
            self.running.discard(end.job)
            self.running_gpus -= self.by_name[end.job].workers
            self._running_names = None
        if self.cluster is not None:
            self.cluster.release(end.job)
