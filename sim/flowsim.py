"""Event-driven flow-level simulation of concurrent training jobs on a routed fabric (the step-level engine).

It models what the light replay runtime (:mod:`workers.agent`) does, step by step and transfer by
transfer, so that its per-job communication times compare with the emulator's measurements: every
cross-machine transfer is a flow on its ECMP path, flows share links as :mod:`sim.sharing` has them,
and a job's estimate is the mean over measured iterations of the slowest rank's communication time.
:class:`FlowEngine` is the incremental event loop an experiment loop drives; :func:`simulate` runs
a fixed set of jobs to the end.

What it models, its modelling decisions ([R]: where the runtime leaves a choice), the token-bucket
model, determinism, incremental use and cost per event: ``docs/simulator-engines.md``.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import numbers
from collections import defaultdict
from collections.abc import Mapping, Sequence

from common.errors import JobError, TopologyError
from common.units import TCP_IP_HEADER_BYTES, wire_bytes
from ina.protocol import VALUES_PER_PACKET
from jobs.collective import collective_of
from jobs.patterns import barrier_bytes, replay_pattern
from jobs.phase import PhaseKeeper
from jobs.records import bucket_times_s
from sim.flows import Flow, FlowNetwork
from sim.ina import RESULTS, InaSpec
from sim.mltcp import MltcpFlows

Link = tuple[str, str]


@dataclasses.dataclass(frozen=True)
class SimJob:
    """One job to simulate, as the replay runtime runs it.

    Attributes:
        name: job name, unique among the simulated jobs.
        machines_by_rank: machine of each rank (ranks on one machine exchange in memory).
        collective: collective name (``ring``, ``hd``, or ``gloo`` as its replay model).
        bucket_bytes: size of each gradient bucket in bytes (multiples of 4), allreduced in order
            every iteration.
        compute_s: compute time of every iteration, seconds (>= 0).
        iterations: measured iterations (>= 0).
        warmup_iterations: iterations run before the measured ones (>= 0), not recorded.
        start_s: time the job's ranks start, seconds (>= 0).
        ina: for collective ``ina``, its PS and the switches that may aggregate it (the fluid
            engine models it, :mod:`sim.ina`; this one does not).
    """

    name: str
    machines_by_rank: tuple[str, ...]
    collective: str
    bucket_bytes: tuple[int, ...]
    compute_s: float
    iterations: int
    warmup_iterations: int = 0
    start_s: float = 0.0
    ina: InaSpec | None = None

    def __post_init__(self):
        object.__setattr__(self, "machines_by_rank", tuple(self.machines_by_rank))
        object.__setattr__(self, "bucket_bytes", tuple(self.bucket_bytes))
        if not self.machines_by_rank:
            raise JobError(f"job {self.name!r}: needs at least one rank")
        if not (self.compute_s >= 0 and math.isfinite(self.compute_s)):
            raise JobError(f"job {self.name!r}: compute_s must be finite and >= 0, got {self.compute_s!r}")
        if not (self.start_s >= 0 and math.isfinite(self.start_s)):
            raise JobError(f"job {self.name!r}: start_s must be finite and >= 0, got {self.start_s!r}")
        if self.iterations < 0 or self.warmup_iterations < 0:
            raise JobError(f"job {self.name!r}: iterations and warmup_iterations must be >= 0, got "
                           f"{self.iterations} and {self.warmup_iterations}")


OVERLAPS = ("together", "independent")
"""How the fluid engine's jobs that share links overlap their communication (:attr:`SimOptions.overlap`)."""

SHARINGS = ("tcp", "maxmin")
"""How the step-level engine's flows share a link they saturate together: ``tcp``, at
``shared_efficiency`` of its rate, or ``maxmin``, at all of it (the config's ``simulator.sharing``)."""


@dataclasses.dataclass(frozen=True)
class SimOptions:
    """How transfers are costed.

    Attributes:
        mtu: count each cross-machine transfer's bytes on the wire at this MTU, bytes
            (:func:`common.units.wire_bytes`); None: its payload.
        latency_s: fixed latency of every cross-machine transfer, seconds, spent before it
            enters the network.
        burst_bytes: depth of every directed link's token bucket, bytes counted as the
            flows' are (payload, or wire bytes with ``mtu``, as the shaper counts them): a
            number for every link, or a mapping keyed by link in either orientation ``(u, v)``
            (the ``(u, v)`` entry wins for direction u -> v, as in ``rate_mbps``) that must
            cover every link a flow crosses; 0 is no bucket. None: no token buckets
            (``docs/simulator-engines.md`` says how they are modelled). For an emulated run,
            ``measure.shaping.burst_bytes(rate, mtu)`` of each link's shaped rate and the
            run's MTU, in emulated bytes like the buckets; a depth in bytes does not change
            with the dilation.
        ecn: estimate every job's ECN-marked packets (:mod:`sim.ecn_marks`); off, estimates carry
            None.
        ecn_mark_share: the share of the packets crossing an oversubscribed link that the
            estimate counts as marked, in (0, 1]; 1 counts every one (an upper bound).
        pat_bytes_s: every switch's Peak Aggregation Throughput for INA jobs, bytes/s (fluid
            engine only, :mod:`sim.ina`; ``math.inf``: aggregators never run out).
        ina_results: how INA results reach the workers (:data:`sim.ina.RESULTS`).
        ina_values_per_packet: int32 values per INA packet (its frames' header share on the wire).
        mltcp: share links as MLTCP does (:class:`sim.sharing.MltcpSharing`); None: max-min.
        shared_efficiency: the share of its rate a link saturated by two flows or more carries,
            in (0, 1] (:class:`sim.sharing.TcpShare`); 1: max-min.
            Not with ``mltcp``, whose weights are the model of sharing; the fluid engine ignores it.
        overlap: how the fluid engine (:mod:`sim.fluid`) has jobs that share links overlap their
            communication (:data:`OVERLAPS`): ``together`` (always, NetPack's model) or
            ``independent`` (each job meets the others' traffic for the share of time they
            communicate); this engine follows every transfer and ignores it.
    """

    mtu: int | None = None
    latency_s: float = 0.0
    burst_bytes: float | Mapping[Link, float] | None = None
    ecn: bool = False
    ecn_mark_share: float = 1.0
    pat_bytes_s: float = math.inf
    ina_results: str = "unicast"
    ina_values_per_packet: int = VALUES_PER_PACKET
    mltcp: MltcpFlows | None = None
    overlap: str = "together"
    shared_efficiency: float = 1.0

    def __post_init__(self):
        if self.overlap not in OVERLAPS:
            raise JobError(f"unknown overlap {self.overlap!r}; valid: {', '.join(OVERLAPS)}")
        if self.mtu is not None and self.mtu <= TCP_IP_HEADER_BYTES:
            raise JobError(f"mtu must leave room for TCP/IP headers (> {TCP_IP_HEADER_BYTES} bytes), "
                           f"got {self.mtu}")
        if not 0 < self.ecn_mark_share <= 1:
            raise JobError(f"ecn_mark_share must be in (0, 1], got {self.ecn_mark_share!r}")
        if not 0 < self.shared_efficiency <= 1:
            raise JobError(f"shared_efficiency must be in (0, 1], got {self.shared_efficiency!r}")
        if not (self.latency_s >= 0 and math.isfinite(self.latency_s)):
            raise JobError(f"latency_s must be finite and >= 0, got {self.latency_s!r}")
        if not self.pat_bytes_s >= 0:
            raise JobError(f"pat_bytes_s must be >= 0, got {self.pat_bytes_s!r}")
        if self.ina_results not in RESULTS:
            raise JobError(f"unknown ina_results {self.ina_results!r}; valid: {', '.join(RESULTS)}")
        depths = self.burst_bytes
        if isinstance(depths, Mapping):
            for link, depth in depths.items():
                if not _is_depth(depth):
                    raise JobError(f"burst_bytes of link {link!r} must be a finite number >= 0, got {depth!r}")
        elif depths is not None and not _is_depth(depths):
            raise JobError("burst_bytes must be None, a finite number of bytes >= 0 or a mapping link -> bytes, "
                           f"got {depths!r}")


def _is_depth(value) -> bool:
    """Whether ``value`` is a bucket depth: a real number, finite and >= 0 (not a bool)."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and value >= 0 and math.isfinite(value))


@dataclasses.dataclass(frozen=True)
class SimIterationRecord:
    """One measured iteration of one rank, as the agent records it (:class:`jobs.records.IterationRecord`).

    It has the fields :func:`measure.iterations.job_iteration_times` reads (``job``, ``iteration``,
    ``comm_s``, ``compute_s``), so a list of these aggregates as the emulator's records do.

    Attributes:
        job: job name.
        rank: rank.
        iteration: 0-based index among measured iterations.
        start_s: simulated time the iteration (its compute) began, seconds.
        compute_s: compute time, seconds.
        comm_s: sum of ``bucket_comm_s``, seconds.
        bucket_comm_s: time of each bucket's allreduce, seconds, from this rank's start of it
            to its end.
        ecn_marks: with ``SimOptions.ecn``, the estimated ECN-marked packets this rank received
            during the iteration (as the agent counts CE packets received), else None.
    """

    job: str
    rank: int
    iteration: int
    start_s: float
    compute_s: float
    comm_s: float
    bucket_comm_s: tuple[float, ...]
    ecn_marks: float | None = None

    @property
    def iteration_s(self) -> float:
        """Length of the whole iteration, seconds."""
        return self.compute_s + self.comm_s

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        d = dataclasses.asdict(self)
        d["bucket_comm_s"] = list(self.bucket_comm_s)
        return d


@dataclasses.dataclass(frozen=True)
class JobEstimate:
    """A job's simulated times, aggregated as the report aggregates measured records.

    Attributes:
        job: job name.
        comm_mean_s: mean over measured iterations of the slowest rank's communication time,
            seconds (the report's ``comm_mean_s``); None without measured iterations.
        compute_mean_s: the same for compute time (the report's ``compute_mean_s``).
        iteration_mean_s: ``compute_mean_s + comm_mean_s``, seconds.
        finish_s: time the job's last rank finished its final barrier, seconds.
        iterations: measured iterations.
        ecn_marks: estimated ECN-marked packets of the job's whole run, warm-up and barriers
            included (as the emulator counts them from the start gate); None unless
            ``SimOptions.ecn``.
        bucket_comm_s: each bucket's allreduce time, aggregated as the communication time is
            (:func:`jobs.records.bucket_times_s`), so the error can be placed bucket by bucket;
            None from an engine that does not follow buckets (:mod:`sim.fluid`).
    """

    job: str
    comm_mean_s: float | None
    compute_mean_s: float | None
    iteration_mean_s: float | None
    finish_s: float
    iterations: int
    ecn_marks: float | None = None
    bucket_comm_s: tuple[float, ...] | None = None

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class RunState:
    """What one run of a job did, as :meth:`FlowEngine.advance` (finished runs) and
    :meth:`FlowEngine.remove` (preempted ones) report it.

    Attributes:
        job: job name.
        start_s: time the run's ranks started (its spec's ``start_s``), seconds.
        end_s: time the run's last rank finished its final barrier, or the time it was removed,
            seconds (before ``start_s`` if it was removed before it started).
        iterations_done: measured iterations that every rank of the run completed.
        finished: True if the run ended by itself, False if it was removed.
        records: every measured iteration of every rank of the run, in the order they ended;
            for a removed run, ranks ahead of the others may have recorded an iteration beyond
            ``iterations_done``.
        ecn_marks: estimated ECN-marked packets of the run (None unless ``SimOptions.ecn``).
        phase: the run's time shift as kept (:meth:`jobs.phase.PhaseKeeper.summary`), None when
            it was never shifted (:meth:`FlowEngine.align`).
    """

    job: str
    start_s: float
    end_s: float
    iterations_done: int
    finished: bool
    records: tuple[SimIterationRecord, ...]
    ecn_marks: float | None = None
    phase: dict | None = None

    @property
    def estimate(self) -> JobEstimate:
        """The run's times, aggregated as :class:`JobEstimate` (``finish_s`` is ``end_s``) over its
        first ``iterations_done`` iterations: a removed run's partial iteration is lost."""
        done = self.iterations_done
        return estimate_of(self.job, [rec for rec in self.records if rec.iteration < done], self.end_s,
                           self.ecn_marks)

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        return {"job": self.job, "start_s": self.start_s, "end_s": self.end_s,
                "iterations_done": self.iterations_done, "finished": self.finished,
                "records": [rec.to_dict() for rec in self.records], "ecn_marks": self.ecn_marks, "phase": self.phase}


@dataclasses.dataclass(frozen=True)
class SimResult:
    """What :func:`simulate` returns.

    Attributes:
        records: every measured iteration of every rank, sorted by ``(job, iteration, rank)``.
        jobs: one estimate per job, in the order of the jobs given.
        end_s: time the last job finished, seconds.
        events: event batches processed (simultaneous events count once).
    """

    records: tuple[SimIterationRecord, ...]
    jobs: tuple[JobEstimate, ...]
    end_s: float
    events: int

    def job(self, name: str) -> JobEstimate:
        """The estimate of job ``name``.

        Raises:
            JobError: no such job.
        """
        for est in self.jobs:
            if est.job == name:
                return est
        raise JobError(f"no simulated job {name!r}; simulated: {', '.join(e.job for e in self.jobs)}")

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        return {"records": [r.to_dict() for r in self.records], "jobs": [j.to_dict() for j in self.jobs],
                "end_s": self.end_s, "events": self.events}


def simulate(g, rate_mbps: Mapping[Link, float], jobs: Sequence[SimJob],
             options: SimOptions = SimOptions()) -> SimResult:
    """Simulate ``jobs`` running concurrently on topology ``g``.

    Args:
        g: topology graph (:mod:`topo.schema`); routes are :func:`topo.routing.ecmp_path`.
        rate_mbps: rate of each link in Mbit/s, keyed by either orientation ``(u, v)`` (the
            ``(u, v)`` entry wins for direction u -> v); in the time base of the byte counts.
        jobs: the jobs, with unique names.
        options: byte costing, latency and token buckets.

    Returns:
        Per-rank records of the measured iterations and one estimate per job. Times are in the
        time base of the inputs, as for :func:`jobs.steps.job_bound_s`: emulated bytes with the
        emulated network's rates (``emulator.net.link_rates_mbps`` at the run's dilation D) give
        wall-clock seconds, D times the report's virtual seconds; the same rates at D = 1, or
        bytes and rates both at paper scale, give virtual (paper-scale) seconds. ``compute_s``,
        ``start_s`` and ``latency_s`` must be in that time base too.

    Raises:
        JobError: duplicate job names, an unknown collective or a bucket size the pattern rejects.
        TopologyError: an unknown machine, or a link on a path without a positive rate (or,
            with a mapping of ``burst_bytes``, without a bucket depth).
    """
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise JobError(f"job names must be unique; repeated: {', '.join(dup)}")
    for spec in jobs:  # every machine first, then the jobs: errors come in the same order as ever
        _check_machines(g, spec)
    engine = FlowEngine(g, rate_mbps, options)
    for spec in jobs:
        engine.add(spec)
    while engine.advance(math.inf):
        pass
    return engine.result()


def _check_job(g, spec: SimJob) -> None:
    """Raise unless the step-level engine can run ``spec``: every rank on a machine of ``g``
    (:class:`TopologyError`), no in-network aggregation (:class:`JobError`)."""
    _check_machines(g, spec)
    if collective_of(spec.collective).aggregates_in_fabric:
        raise JobError(f"job {spec.name!r}: the step-level simulator does not model in-network aggregation; "
                       "the fluid engine does (simulator mode: fluid)")


def _check_machines(g, spec: SimJob) -> None:
    """Raise :class:`TopologyError` unless every rank of ``spec`` is on a machine of ``g``."""
    for m in sorted(set(spec.machines_by_rank)):
        if m not in g or g.nodes[m].get("role") != "machine":
            raise TopologyError(f"job {spec.name!r}: {m!r} is not a machine of topology "
                                f"{g.graph.get('name', '?')!r}")


# -- the engine -------------------------------------------------------------------------------

_START, _COMPUTE_END, _FLOW_START, _ALIGNED, _REWEIGH = 0, 1, 2, 3, 4
"""Timer kinds, in the order simultaneous timers are handled (after flow completions)."""


@dataclasses.dataclass(frozen=True)
class _Op:
    """One thing a rank does: compute (``size`` None) or an allreduce of ``size`` bytes.

    ``iteration`` is the 0-based iteration, warm-up included (-1 for a barrier); ``bucket`` is
    the bucket index (-1 for compute and barriers); ``ends_iteration`` marks an iteration's last op.
    """

    size: int | None
    iteration: int
    bucket: int
    ends_iteration: bool


@dataclasses.dataclass(slots=True, eq=False)
class _RankState:
    """Where one rank is: op index, step index, what it waits for, and the measured iterations it
    has completed."""

    op: int = 0
    step: int = 0
    blocked: bool = False
    computing: bool = False
    pending: int = 0
    arrived: dict = dataclasses.field(default_factory=lambda: defaultdict(int))
    op_start_s: float = 0.0
    iteration_start_s: float = 0.0
    bucket_s: list = dataclasses.field(default_factory=list)
    measured: int = 0
    finish_s: float | None = None
    aligned: int = -1  # the last iteration whose start it timed against the job's shift


class _Job:
    """A job run's static plan (ops, per-step sends and receptions, paths) and its ranks' states.

    ``index`` is the run's position among the runs added to the engine, ``order`` its sort key,
    ``(name, run number)``: keys of flows, timers and ready ranks start with ``order``, so ties
    break the same way whatever the order jobs are added in. ``live`` is False once the run
    finished or was removed; ``end_s`` is then its finish or removal time.
    """

    def __init__(self, index: int, order: tuple[str, int], spec: SimJob, path_of, mtu: int | None):
        self.index, self.order, self.spec = index, order, spec
        self.live, self.finished, self.end_s, self.ranks_done = True, False, None, 0
        self.keeper: PhaseKeeper | None = None  # its time shift (FlowEngine.align)
        self.gate: tuple[int, float] | None = None  # (iteration, when it starts) under the shift
        p = len(spec.machines_by_rank)
        barrier = barrier_bytes(p)
        ops: list[_Op] = []
        for it in range(spec.warmup_iterations + spec.iterations):
            if it == spec.warmup_iterations:  # as _Rank.run: the barrier before the first measured iteration
                ops.append(_Op(barrier, -1, -1, False))
            ops.append(_Op(None, it, -1, not spec.bucket_bytes))
            for b, size in enumerate(spec.bucket_bytes):
                ops.append(_Op(size, it, b, b == len(spec.bucket_bytes) - 1))
        ops.append(_Op(barrier, -1, -1, False))
        self.ops = tuple(ops)
        # steps[size][t][rank] = (sends as ((dst, bytes), ...), number of receptions)
        self.steps: dict[int, list[list[tuple[tuple[tuple[int, int], ...], int]]]] = {}
        for size in sorted({*spec.bucket_bytes, barrier}):
            # What workers.agent.rank_steps gives every rank, from one pass over each step.
            self.steps[size] = []
            for transfers in replay_pattern(spec.collective, p, size):
                sends: list[list[tuple[int, int]]] = [[] for _ in range(p)]
                n_recv = [0] * p
                for src, dst, nbytes in transfers:
                    sends[src].append((dst, nbytes))
                    n_recv[dst] += 1
                self.steps[size].append([(tuple(sends[r]), n_recv[r]) for r in range(p)])
        self.paths: dict[tuple[int, int], tuple[int, ...]] = {}
        for size in self.steps:
            for step in self.steps[size]:
                for src, (sends, _) in enumerate(step):
                    for dst, _ in sends:
                        a, b = spec.machines_by_rank[src], spec.machines_by_rank[dst]
                        if a != b and (src, dst) not in self.paths:
                            self.paths[(src, dst)] = path_of(a, b)
        # plan[size][t][rank] = (destinations handed over in memory, network sends as
        # (send index, dst, bytes on the wire, link ids), number of receptions): the steps with
        # every per-send decision taken once, since a rank enters each step once per bucket.
        machines = spec.machines_by_rank
        self.plan: dict[int, list[list[tuple[tuple[int, ...], tuple[tuple, ...], int]]]] = {}
        for size, steps in self.steps.items():
            self.plan[size] = [
                [(tuple(dst for dst, nbytes in sends if nbytes == 0 or machines[dst] == machines[r]),
                  tuple((i, dst, float(wire_bytes(nbytes, mtu) if mtu else nbytes), self.paths[(r, dst)])
                        for i, (dst, nbytes) in enumerate(sends) if nbytes != 0 and machines[dst] != machines[r]),
                  n_recv)
                 for r, (sends, n_recv) in enumerate(step)]
                for step in steps]
        self.ranks = [_RankState(op_start_s=spec.start_s) for _ in range(p)]
        self.records: list[SimIterationRecord] = []

    def gate_s(self, r: int, iteration: int, now: float) -> float:
        """When rank ``r`` starts iteration ``iteration`` under the run's shift: the first rank there
        asks the keeper, the others start with it."""
        self.ranks[r].aligned = iteration
        if self.gate is None or self.gate[0] != iteration:
            self.gate = (iteration, now + self.keeper.wait_s(now))
        return self.gate[1]

    def deliver(self, dst: int, op: int, step: int, ready: list) -> None:
        """A transfer to rank ``dst`` of step ``(op, step)`` has arrived (``ready``: the engine's ready ranks)."""
        rd = self.ranks[dst]
        if rd.blocked and rd.op == op and rd.step == step:
            self.one_less(dst, ready)
        else:
            rd.arrived[(op, step)] += 1

    def one_less(self, r: int, ready: list) -> None:
        """Rank ``r`` waits for one transfer less; queued on ``ready`` when it waits for none."""
        rs = self.ranks[r]
        rs.pending -= 1
        if rs.pending == 0:
            rs.blocked = False
            heapq.heappush(ready, (self.order, r, self.index))

    def state(self, ecn_marks: float | None) -> RunState:
        """What the run (finished or removed) did."""
        return RunState(job=self.spec.name, start_s=self.spec.start_s, end_s=self.end_s,
                        iterations_done=min(rs.measured for rs in self.ranks), finished=self.finished,
                        records=tuple(self.records), ecn_marks=ecn_marks,
                        phase=self.keeper.summary() if self.keeper is not None else None)


class FlowEngine:
    """The flow-level simulation's event loop, driven incrementally.

    Jobs are added (:meth:`add`) and removed (:meth:`remove`, preemption) over time, and the
    simulation runs forward with :meth:`advance`, which stops early when runs finish so that an
    event-driven experiment loop can act on it; :func:`simulate` adds all its jobs and advances
    to the end. Each addition of a job is a run of it; a name may be added again once its run
    finished or was removed. ``docs/simulator-engines.md`` says what is modelled and how.

    Args:
        g: topology graph (:mod:`topo.schema`); routes are :func:`topo.routing.ecmp_path`.
        rate_mbps: rate of each link in Mbit/s, keyed by either orientation ``(u, v)`` (the
            ``(u, v)`` entry wins for direction u -> v), as for :func:`simulate`.
        options: byte costing, latency and token buckets.

    Attributes:
        events: event batches processed so far (simultaneous events count once).
        ecn: whether it estimates ECN marks (``SimOptions.ecn``).
    """

    def __init__(self, g, rate_mbps: Mapping[Link, float], options: SimOptions = SimOptions()):
        self.g, self.options = g, options
        self.network = FlowNetwork(g, rate_mbps, options, self._reweigh)
        self.marks = self.network.marks  # the ECN estimate, also told of the ranks' iterations
        self.ecn = options.ecn
        self.jobs: list[_Job] = []  # every run added, in that order (a run's index)
        self._running: dict[str, _Job] = {}  # name -> its run neither finished nor removed
        self._runs: dict[str, int] = {}  # name -> runs of it added so far
        self._removed: set[tuple[str, int]] = set()  # orders of removed runs: their heap entries are stale
        self._finished: list[_Job] = []  # runs whose last rank finished in the current batch
        self._now_s = 0.0
        self.timers: list[tuple[float, tuple, object]] = []
        self.ready: list[tuple[tuple, int, int]] = []
        self.events = 0

    # -- the interface -----------------------------------------------------------------------
    @property
    def now_s(self) -> float:
        """The simulation's clock, seconds: 0 at first, then where :meth:`advance` left it."""
        return self._now_s

    def add(self, spec: SimJob) -> None:
        """Start a run of ``spec``: its ranks start at ``spec.start_s``.

        A name may be added again once its previous run finished or was removed (a preempted job
        restarted elsewhere with its remaining iterations, say); each addition is a new run.

        Raises:
            JobError: ``spec.start_s`` before :attr:`now_s`, a run of that name still running, an
                unknown collective or a bucket size the pattern rejects.
            TopologyError: an unknown machine, or a link on a path without a positive rate (or,
                with a mapping of ``burst_bytes``, without a bucket depth).
        """
        if spec.name in self._running:
            raise JobError(f"job {spec.name!r} is already running (since {self._running[spec.name].spec.start_s} s); "
                           "remove it before adding it again")
        if spec.start_s < self._now_s:
            raise JobError(f"job {spec.name!r}: start_s {spec.start_s!r} is before the simulation's clock, "
                           f"now_s = {self._now_s!r}")
        _check_job(self.g, spec)
        order = (spec.name, self._runs.get(spec.name, 0))
        job = _Job(len(self.jobs), order, spec, self.network.path, self.options.mtu)
        self._runs[spec.name] = order[1] + 1
        self.jobs.append(job)
        self._running[spec.name] = job
        for r in range(len(job.ranks)):
            self._timer(spec.start_s, (_START, order, r), (job, r))

    def remove(self, name: str) -> RunState:
        """Preempt the running run of job ``name`` at :attr:`now_s`.

        Its flows leave the network at once (the others' rates are recomputed at :attr:`now_s`
        when the simulation next advances), its pending timers and delayed flow starts are
        skipped, and its partial iteration is lost.

        Returns:
            What the run did: ``finished`` False, ``end_s`` the removal time.

        Raises:
            JobError: no run of ``name`` is running.
        """
        job = self._live(name)
        del self._running[name]
        job.live, job.end_s = False, self._now_s
        self._removed.add(job.order)
        self.network.drop_run(job.index, self._now_s)
        return job.state(self.marks.run_marks(job.index))

    def align(self, name: str, keeper: PhaseKeeper) -> None:
        """Give the running run of job ``name`` a time shift, kept by ``keeper`` (its origin the
        shift's time, normally :attr:`now_s`): its next iteration, and any later one that drifted,
        starts at the keeper's aligned instants (:class:`jobs.phase.PhaseKeeper`). Every rank of an
        iteration starts it when the first rank there may (the shift is the job's); its phase errors
        and waits are in its :class:`RunState`'s ``phase``. A new shift replaces the last.

        Raises:
            JobError: no run of ``name`` is running.
        """
        self._live(name).keeper = keeper

    def advance(self, until_s: float) -> list[RunState]:
        """Process every event up to ``until_s`` (seconds, may be ``math.inf``), in time and key
        order, stopping right after the first event batch in which runs finished.

        Returns:
            The runs that finished in that batch, sorted by name (:attr:`now_s` is then the
            batch's time), or [] if none finished up to ``until_s`` (:attr:`now_s` is then
            ``until_s``, or the last event's time if ``until_s`` is infinite: nothing is left to
            process).

        Raises:
            JobError: ``until_s`` before :attr:`now_s` (or NaN).
            TopologyError: a flow got no bandwidth.
        """
        if not until_s >= self._now_s:
            raise JobError(f"cannot advance to {until_s!r} s: the simulation's clock is at now_s = {self._now_s!r}")
        network = self.network
        if network.changed:  # flows of removed runs left: the others' rates change from now on
            network.reallocate(self._now_s)
        timers, removed = self.timers, self._removed
        while True:
            while removed and timers and timers[0][1][1] in removed:
                heapq.heappop(timers)
            now = min(network.next_end_s(), timers[0][0] if timers else math.inf)
            if now == math.inf or now > until_s:
                break
            self.events += 1
            for flow in network.completed(now):
                network.complete(flow, now)
                self._arrive(flow)
            while timers and timers[0][0] <= now:
                _, key, payload = heapq.heappop(timers)
                if removed and key[1] in removed:
                    continue  # every timer key has its run's order second
                if key[0] == _FLOW_START:
                    if not network.enter(payload, now):
                        self._arrive(payload)
                elif key[0] == _REWEIGH:
                    network.reweighed(*payload)
                else:
                    job, r = payload
                    self._run(job, r, now)
            self._drain_ready(now)
            if network.changed:
                network.reallocate(now)
            self._now_s = now
            if self._finished:
                return self._close_finished()
        if until_s != math.inf:
            self._now_s = until_s
        return []

    def running(self) -> list[str]:
        """Names of the runs neither finished nor removed, sorted."""
        return sorted(self._running)

    def progress(self, name: str) -> int:
        """Measured iterations every rank of job ``name``'s running run has completed.

        Raises:
            JobError: no run of ``name`` is running.
        """
        return min(rs.measured for rs in self._live(name).ranks)

    def result(self) -> SimResult:
        """Every run's records and estimate, as :func:`simulate` returns them: records sorted by
        ``(job, iteration, rank)`` (runs of one name in the order added), one estimate per run in
        the order added (a removed run's as :attr:`RunState.estimate`, ending at its removal).

        Raises:
            JobError: a run still running (ranks waiting for one another when nothing is left to
                process).
        """
        if self._running:
            if self.network.completions or self.timers:
                raise JobError(f"jobs still running at {self._now_s} s: {', '.join(self.running())}; advance "
                               "until they finish or remove them")
            stuck = [(job.spec.name, r, rs.op, rs.step) for job in self.jobs if job.live
                     for r, rs in enumerate(job.ranks) if rs.finish_s is None]
            raise JobError(f"simulation ended with ranks still waiting (job, rank, op, step): {stuck[:4]}")
        records = sorted((rec for job in self.jobs for rec in job.records),
                         key=lambda x: (x.job, x.iteration, x.rank))
        estimates = tuple(job.state(self.marks.run_marks(job.index)).estimate for job in self.jobs)
        return SimResult(records=tuple(records), jobs=estimates,
                         end_s=max((e.finish_s for e in estimates), default=0.0), events=self.events)

    def _live(self, name: str) -> _Job:
        """The running run of ``name``; JobError if there is none."""
        job = self._running.get(name)
        if job is None:
            raise JobError(f"no running job {name!r}; running: {', '.join(self.running()) or 'none'}")
        return job

    def _close_finished(self) -> list[RunState]:
        """Retire the runs that finished in the batch just processed; their states, by name."""
        states = []
        for job in sorted(self._finished, key=lambda j: j.order):
            job.live, job.finished, job.end_s = False, True, max(rs.finish_s for rs in job.ranks)
            del self._running[job.spec.name]
            states.append(job.state(self.marks.run_marks(job.index)))
        self._finished.clear()
        return states

    def _timer(self, time_s: float, key: tuple, payload) -> None:
        heapq.heappush(self.timers, (time_s, key, payload))

    # -- ranks -------------------------------------------------------------------------------
    def _run(self, job: _Job, r: int, now: float) -> None:
        """Move rank ``r`` on from where it is until it waits for a timer or a transfer, or ends."""
        rs, ops, spec = job.ranks[r], job.ops, job.spec
        n_ops = len(ops)
        while rs.op < n_ops:
            op = ops[rs.op]
            if op.size is None:
                if not rs.computing:
                    if job.keeper is not None and rs.aligned != op.iteration:
                        start_s = job.gate_s(r, op.iteration, now)
                        if start_s > now:
                            self._timer(start_s, (_ALIGNED, job.order, r), (job, r))
                            return
                    rs.iteration_start_s, rs.bucket_s = now, []
                    self.marks.iteration_starts(job.index, r)
                    if spec.compute_s > 0:
                        rs.computing = True
                        self._timer(now + spec.compute_s, (_COMPUTE_END, job.order, r), (job, r))
                        return
                rs.computing = False
            else:
                n_steps = len(job.plan[op.size])
                while rs.step < n_steps:
                    if self._enter_step(job, r, now):
                        return
                    rs.step += 1
                if op.bucket >= 0:
                    rs.bucket_s.append(now - rs.op_start_s)
            if op.ends_iteration and op.iteration >= spec.warmup_iterations:
                job.records.append(SimIterationRecord(
                    job=spec.name, rank=r, iteration=op.iteration - spec.warmup_iterations,
                    start_s=rs.iteration_start_s, compute_s=spec.compute_s, comm_s=sum(rs.bucket_s),
                    bucket_comm_s=tuple(rs.bucket_s), ecn_marks=self.marks.rank_marks(job.index, r)))
                rs.measured += 1
            rs.op, rs.step, rs.op_start_s = rs.op + 1, 0, now
        rs.finish_s = now
        job.ranks_done += 1
        if job.ranks_done == len(job.ranks):
            self._finished.append(job)

    def _enter_step(self, job: _Job, r: int, now: float) -> bool:
        """Start rank ``r``'s sends of its current step; True if it must wait for transfers."""
        rs = job.ranks[r]
        op, step = rs.op, rs.step
        local, remote, n_recv = job.plan[job.ops[op].size][step][r]
        pending = n_recv - rs.arrived.pop((op, step), 0) if rs.arrived else n_recv
        # Hand-overs only count receptions and queue ready ranks (operations that commute) and
        # touch none of the flows, links or timers a network send changes, so handling them
        # first leaves every result as in send order.
        ranks = job.ranks
        for dst in local:  # _Job.deliver, inlined: this is the simulation's innermost loop
            rd = ranks[dst]
            if rd.blocked and rd.op == op and rd.step == step:
                rd.pending -= 1
                if rd.pending == 0:
                    rd.blocked = False
                    heapq.heappush(self.ready, (job.order, dst, job.index))
            else:
                rd.arrived[(op, step)] += 1
        for i, dst, size, links in remote:
            key = (job.order, op, step, r, i)
            flow = Flow(key, job.index, r, dst, op, step, links, size, size)
            if self.options.latency_s > 0:
                pending += 1
                self._timer(now + self.options.latency_s, (_FLOW_START, *key), flow)
            elif self.network.enter(flow, now):
                pending += 1
            else:  # carried whole by its burst
                job.deliver(dst, op, step, self.ready)
        rs.pending, rs.blocked = pending, pending > 0
        return rs.blocked

    def _arrive(self, flow: Flow) -> None:
        """``flow`` has reached its receiver: its sender and receiver wait for it no more."""
        job = self.jobs[flow.job]
        job.one_less(flow.src, self.ready)
        job.deliver(flow.dst, flow.op, flow.step, self.ready)

    def _drain_ready(self, now: float) -> None:
        """Move on every rank whose step just ended, in (job name, rank) order."""
        while self.ready:
            _, r, j = heapq.heappop(self.ready)
            job = self.jobs[j]
            job.ranks[r].step += 1
            self._run(job, r, now)

    def _reweigh(self, time_s: float, flow: Flow) -> None:
        """Have ``flow``'s component reallocated at ``time_s`` unless its weight is set again before."""
        self._timer(time_s, (_REWEIGH, *flow.key), (flow, flow.weighed))


def estimate_of(job: str, records: Sequence[SimIterationRecord], finish_s: float,
                ecn_marks: float | None = None) -> JobEstimate:
    """Aggregate job ``job``'s records as :func:`measure.iterations.job_iteration_times` and the summary
    do: per iteration the slowest rank's time, then the mean over iterations."""
    comm: dict[int, float] = {}
    compute: dict[int, float] = {}
    for rec in records:
        comm[rec.iteration] = max(comm.get(rec.iteration, 0.0), rec.comm_s)
        compute[rec.iteration] = max(compute.get(rec.iteration, 0.0), rec.compute_s)
    if not comm:
        return JobEstimate(job, None, None, None, finish_s, 0, ecn_marks)
    comm_mean = sum(comm[i] for i in sorted(comm)) / len(comm)
    compute_mean = sum(compute[i] for i in sorted(compute)) / len(compute)
    return JobEstimate(job, comm_mean, compute_mean, compute_mean + comm_mean, finish_s, len(comm), ecn_marks,
                       bucket_times_s(records).get(job))
