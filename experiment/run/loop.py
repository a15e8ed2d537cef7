"""The experiment loop: arrivals, completions and the scheduler's wake-ups drive a back end.

One loop for every back end (:mod:`backend.protocol`): the durations model, the flow-level
simulator and the emulated network. At every event the loop

1. asks the scheduler (``scheduling/``) which of the active (arrived, unfinished) jobs hold
   GPUs, from their attained service and arrival times;
2. stops the jobs it preempts (their GPUs are released, once their checkpoint is written where
   the run gives preemption a cost);
3. hands the jobs it starts to the placer in priority order; a job the placer leaves
   waiting stays waiting and is reconsidered at the next event. Without a placer, GPUs are
   counted (as Tiresias' authors' simulator does with its ``count`` placement): the jobs
   that fit in the free GPUs start, in order;
4. starts the placed jobs on the back end, together (a job preempted before first restores its
   checkpoint, where preemption has a cost: it holds its GPUs and starts on the back end when
   its restore ends), hands it the time shifts the placer
   gave (:class:`placement.base.TimeShift`, Cassini's) and keeps the decision (with its log)
   when it has either, and lets the back end run until the next event:
   an arrival, the scheduler's wake-up (:attr:`scheduling.base.Decision.wake_s`), a periodic
   pass (``period_s``), or the first completion, whichever comes first.

The run's state (service, running and finished jobs, the record, the clock) is one object,
``_LoopRun``, with a method per step; :func:`run_loop` builds it and runs it.

Static experiments, where every job arrives at 0 and the ``waves`` scheduler starts waiting
jobs only when none runs, are the case where the jobs a placer fits run together as a wave
and the others wait for the whole wave to end. The back end says what a preempted job keeps (its
completed iterations, or its service). A preemption costs no time unless the run gives it a cost
(:class:`PreemptionCost`, Tiresias's checkpoint and restore): a preempted job then holds its GPUs
while its checkpoint is written, neither running nor waiting, and a resumed one holds them while
it restores, running for the scheduler but not on the back end; neither attains service (the
productive running time a scheduler's priorities count). There is no
randomness and no wall clock: time is the back end's. Cost: O(n log n) to order the arrivals,
then O(events x (active jobs + scheduler call + placer call)) plus the back end's own.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Protocol

from backend.protocol import Backend, ExperimentJob, RunEnd
from common.errors import JobError, PlacementError
from placement.base import Cluster, Placement, PlacementPolicy, TimeShift
from scheduling.base import JobStatus, Scheduler

_EPS = 1e-9


class PreemptionCost(Protocol):
    """What preempting a job costs (:mod:`experiment.run.preemption`), in the back end's seconds."""

    def pause_s(self, job: ExperimentJob) -> float:
        """How long a preempted job holds its GPUs after it stops (its checkpoint being written)."""

    def resume_s(self, job: ExperimentJob) -> float:
        """How long a resumed job holds its GPUs before it runs again (its checkpoint being read)."""


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
        overhead_s: per job preempted, the time its GPUs were held for its checkpoints and
            restores (none without a preemption cost).
    """

    jct_s: dict[str, float]
    segments: tuple[tuple[float, float, tuple[str, ...]], ...]
    preemptions: int
    starts: tuple[Started, ...] = ()
    runs: tuple[RunEnd, ...] = ()
    decisions: tuple[PlacerDecision, ...] = ()
    overhead_s: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def preemption_overhead_s(self) -> float:
        """GPU-holding time of every checkpoint and restore, summed over jobs (seconds, not GPU-seconds)."""
        return sum(self.overhead_s.values())

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
             on_event: Callable[[LoopEvent], None] | None = None,
             preemption: PreemptionCost | None = None) -> LoopResult:
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
        preemption: what a preemption costs (None: nothing; see the module docstring).

    Returns:
        Per-job JCTs, the running set over time, preemptions, starts and runs.

    Raises:
        JobError: duplicate names, a job needing more than ``total_gpus`` (it could never
            run), a decision that over-commits the GPUs, waiting jobs with nothing running and
            no event due (they would wait for ever), or no progress within ``max_events``.
    """
    total_gpus = _checked_total_gpus(jobs, total_gpus, period_s, cluster, policy)
    run = _LoopRun(jobs, scheduler, backend, total_gpus, period_s, cluster, policy, on_event, preemption)
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
    sees them. With a preemption cost, a job is at any time in at most one of ``running`` (on
    the back end), ``restoring`` (its GPUs held until it starts on the back end) and ``pausing``
    (its GPUs held until its checkpoint is written); the GPUs held are ``running_gpus`` (the
    first two) plus ``pausing_gpus``.
    """

    def __init__(self, jobs: Sequence[ExperimentJob], scheduler: Scheduler, backend: Backend, total_gpus: int,
                 period_s: float | None, cluster: Cluster | None, policy: PlacementPolicy | None,
                 on_event: Callable[[LoopEvent], None] | None, preemption: PreemptionCost | None = None):
        self.jobs, self.scheduler, self.backend = jobs, scheduler, backend
        self.total_gpus, self.period_s, self.cluster, self.policy = total_gpus, period_s, cluster, policy
        self.cost = preemption
        self.say = on_event or (lambda _event: None)
        self.by_name = {j.name: j for j in jobs}
        self.service = dict.fromkeys(self.by_name, 0.0)  # attained GPU-seconds
        self.running: set[str] = set()
        self.running_gpus = 0  # the running and restoring jobs' workers
        self.restoring: dict[str, tuple[float, float, Placement | None]] = {}  # job -> (since, until, placement)
        self.pausing: dict[str, float] = {}  # job -> when its checkpoint is written
        self.pausing_gpus = 0
        self.checkpointed: set[str] = set()  # jobs with a checkpoint to restore
        self.overhead_s: dict[str, float] = {}
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
                          tuple(self.decisions), dict(self.overhead_s))

    def step(self) -> None:
        """One event: end the checkpoints and restores due, admit, schedule, preempt, place and
        start, then advance to the next event."""
        self.settle()
        active = self.admit_arrivals()
        schedulable = [j for j in active if j.name not in self.pausing]
        decision = self.scheduler.schedule(self.statuses(schedulable), self.total_gpus - self.pausing_gpus,
                                           self.now_s)
        self.preempt(decision.preempt)
        self.place_and_start(decision.start)
        self.advance(self.next_event_s(decision.wake_s, active))

    def settle(self) -> None:
        """Release the GPUs of the jobs whose checkpoint is written by now; start on the back end,
        together, the jobs whose restore has ended."""
        for n in [n for n, until in self.pausing.items() if until <= self.now_s + _EPS]:
            del self.pausing[n]
            self.pausing_gpus -= self.by_name[n].workers
            if self.cluster is not None:
                self.cluster.release(n)
        ready = sorted(n for n, (_, until, _) in self.restoring.items() if until <= self.now_s + _EPS)
        for n in ready:
            since, until, _ = self.restoring[n]
            self.charge(n, until - since)
        if ready:
            self.start_on_backend([(self.by_name[n], self.restoring.pop(n)[2]) for n in ready])

    def admit_arrivals(self) -> list[ExperimentJob]:
        """Admit the jobs arrived by now; the active jobs, in input order."""
        jobs, order = self.jobs, self.by_arrival
        while self.arrived < len(jobs) and jobs[order[self.arrived]].arrival_s <= self.now_s + _EPS:
            bisect.insort(self.active_idx, order[self.arrived])
            self.arrived += 1
        self.active_idx = [i for i in self.active_idx if jobs[i].name not in self.done]
        return [jobs[i] for i in self.active_idx]

    def statuses(self, active: Sequence[ExperimentJob]) -> list[JobStatus]:
        """The scheduler's view of the active jobs (a restoring job holds its GPUs: running)."""
        service = self.service
        return [JobStatus(j.name, j.workers, j.arrival_s, j.name in self.running or j.name in self.restoring,
                          service[j.name],
                          None if j.duration_s is None else j.workers * j.duration_s - service[j.name])
                for j in active]

    def preempt(self, names: Sequence[str]) -> None:
        """Stop the running (or restoring) jobs of ``names`` now (the others hold nothing: nothing to
        do). A running job's GPUs stay held for its checkpoint where preemption has a cost; a
        restoring job's are released at once (its checkpoint is still the one it was reading)."""
        for n in names:
            if n in self.restoring:
                since, _, _ = self.restoring.pop(n)
                self.preemptions += 1
                self.charge(n, self.now_s - since)
                self.running_gpus -= self.by_name[n].workers
                if self.cluster is not None:
                    self.cluster.release(n)
                self.say(LoopEvent("preempted", self.now_s, n))
            elif n in self.running:
                self.preemptions += 1
                pause = self.cost.pause_s(self.by_name[n]) if self.cost is not None else 0.0
                self.finish(self.backend.stop(n), release=not pause > 0)
                if self.cost is not None:
                    self.checkpointed.add(n)
                if pause > 0:
                    self.pausing[n] = self.now_s + pause
                    self.pausing_gpus += self.by_name[n].workers
                    self.charge(n, pause)
                self.say(LoopEvent("preempted", self.now_s, n))

    def charge(self, job: str, seconds: float) -> None:
        """Count ``seconds`` of a checkpoint or restore against ``job``."""
        self.overhead_s[job] = self.overhead_s.get(job, 0.0) + seconds

    def place_and_start(self, names: Sequence[str]) -> None:
        """Place the waiting jobs of ``names`` (in that order) and start the placed ones together
        (a job with a checkpoint restores it first, holding its GPUs).

        Raises:
            JobError: the jobs then holding GPUs over-commit them.
        """
        wanted = [self.by_name[n] for n in names
                  if n not in self.running and n not in self.restoring and n not in self.pausing]
        decision = None
        if self.cluster is not None:
            decision = self.policy.decide([j.request() for j in wanted], self.cluster.view()) if wanted else None
            placed = decision.placements if decision is not None else ()
            for p in placed:
                self.cluster.apply(p)
            new = [(self.by_name[p.job], p) for p in placed]
        else:
            new = [(j, None) for j in self.counted(wanted)]
        now = []
        for j, p in new:
            resume = self.cost.resume_s(j) if self.cost is not None and j.name in self.checkpointed else 0.0
            self.running_gpus += j.workers
            if resume > 0:
                self.restoring[j.name] = (self.now_s, self.now_s + resume, p)
            else:
                now.append((j, p))
        if now:
            self.start_on_backend(now)
        if decision is not None and (decision.shifts or decision.log is not None):
            shifts = tuple(s for s in decision.shifts if s.job in self.running)
            applied = self.backend.shift(shifts) if shifts else False
            self.decisions.append(PlacerDecision(self.now_s, tuple(j.name for j, _ in new), shifts, applied,
                                                 decision.log))
        if self.running_gpus + self.pausing_gpus > self.total_gpus:
            raise JobError(f"{self.scheduler.name}: decision at {self.now_s} s over-commits {self.total_gpus} "
                           f"GPUs: {sorted(self.running | set(self.restoring) | set(self.pausing))}")

    def start_on_backend(self, runs: Sequence[tuple[ExperimentJob, Placement | None]]) -> None:
        """Start these jobs on the back end now, together (their GPUs already counted as held)."""
        self.backend.start(runs)
        for j, p in runs:
            self.starts.append(Started(self.now_s, j.name, p))
            self.running.add(j.name)
            self._running_names = None
            self.say(LoopEvent("started", self.now_s, j.name, p))

    def counted(self, wanted: Sequence[ExperimentJob]) -> list[ExperimentJob]:
        """Without a placer: the jobs of ``wanted`` that fit, in order, in the GPUs the running,
        restoring and pausing jobs leave free (a scheduler handing out more than fits, as ``batch``
        does, starts what fits)."""
        free = self.total_gpus - self.running_gpus - self.pausing_gpus
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
        events += [until for _, until, _ in self.restoring.values()] + list(self.pausing.values())
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

    def finish(self, end: RunEnd, release: bool = True) -> None:
        """Record the end of a run (finished or preempted); release the job's GPUs on the cluster
        (``release``; else they stay placed until its checkpoint is written)."""
        self.runs.append(end)
        if end.job in self.running:
            self.running.discard(end.job)
            self.running_gpus -= self.by_name[end.job].workers
            self._running_names = None
        if release and self.cluster is not None:
            self.cluster.release(end.job)
