"""Iteration-level (fluid) simulation of training jobs on a routed fabric, for trace scale.

Each job advances at an iteration *rate*: its compute, then its contention-free communication
bound (:func:`jobs.steps.job_bound_s`) stretched by its level in a job-coupled max-min fill of the
links and INA aggregators it shares (:mod:`sim.maxmin`), recomputed at every start, completion and
removal for the jobs it couples. NetPack's job-progress model (``docs/resolutions.md`` NetPack §5.3,
[Ours]; Algorithm 1, §2.3).

The model, its resolutions ([R]: the ``overlap`` choice, INA and non-INA levels, what is not
modelled), cost per event and determinism: ``docs/simulator-engines.md``.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Mapping, Sequence

from common.errors import JobError, TopologyError
from common.units import BITS_PER_BYTE, MEGA
from sim.components import Components, directed_links
from sim.flowsim import JobEstimate, SimJob, SimOptions
from sim.fluid_costs import IterationCosts
from sim.maxmin import EPS, AggregatedDemand, aggregated_fraction, fill_levels
from sim.overlap import OVERLAP_MODELS, Together, level_cap

Link = tuple[str, str]


@dataclasses.dataclass(frozen=True)
class FluidRun:
    """What one run of a job did, as :meth:`FluidEngine.advance` (finished runs) and
    :meth:`FluidEngine.remove` (removed ones) report it.

    Attributes:
        job: job name.
        start_s: time the run started, seconds.
        end_s: time it finished or was removed, seconds.
        iterations_done: measured iterations completed (whole ones).
        finished: True if the run ended by itself, False if it was removed.
        measured: measured iterations run, fractional (a removed run's partial one counted).
        comm_s: communication time over those ``measured`` iterations, seconds.
        compute_s: compute time over them, seconds.
    """

    job: str
    start_s: float
    end_s: float
    iterations_done: int
    finished: bool
    measured: float
    comm_s: float
    compute_s: float

    @property
    def estimate(self) -> JobEstimate:
        """The run's mean times per measured iteration (as :class:`sim.flowsim.JobEstimate`)."""
        return estimate_of_runs(self.job, [self], self.end_s)


def estimate_of_runs(job: str, runs, finish_s: float) -> JobEstimate:
    """A job's mean communication, compute and iteration time over the measured iterations of
    ``runs`` (its runs, :class:`FluidRun`), as :class:`sim.flowsim.JobEstimate`."""
    measured = sum(r.measured for r in runs)
    done = sum(r.iterations_done for r in runs)
    if measured <= 0:
        return JobEstimate(job, None, None, None, finish_s, done)
    comm, compute = sum(r.comm_s for r in runs) / measured, sum(r.compute_s for r in runs) / measured
    return JobEstimate(job, comm, compute, comm + compute, finish_s, done)


@dataclasses.dataclass
class _Run:
    """A run in the engine: its fixed costs and its progress since ``at_s``."""

    key: tuple[str, int]
    spec: SimJob
    total: int  # warm-up + measured iterations
    bound_s: float  # communication of one iteration alone, bandwidth part
    latency_s: float  # communication of one iteration, latency part
    demand: tuple[tuple[int, float], ...] | AggregatedDemand  # (link id, bytes/s at full speed)
    done: float = 0.0  # iterations run (fractional), at at_s
    at_s: float = 0.0
    level: float = 1.0
    comm_s: float = 0.0  # over measured iterations up to at_s
    compute_s: float = 0.0
    started: bool = False
    spilled: dict[int, float] = dataclasses.field(default_factory=dict)  # aggregator id -> level it ran out at
    resources: tuple[int, ...] = ()  # links and aggregators (after the links) its demand may load
    version: int = 0  # bumped at every level change: older entries of the engine's finish heap are stale

    @property
    def comm_iter_s(self) -> float:
        return self.latency_s + (self.bound_s / self.level if self.bound_s else 0.0)

    @property
    def iteration_s(self) -> float:
        return self.spec.compute_s + self.comm_iter_s

    def move_to(self, now: float) -> None:
        """Progress linearly from ``at_s`` to ``now`` at the current level."""
        if not self.started or now <= self.at_s:
            self.at_s = max(self.at_s, now)
            return
        period = self.iteration_s
        before = self.done
        self.done = min(float(self.total), self.done + (now - self.at_s) / period) if period > 0 else float(self.total)
        warm = self.spec.warmup_iterations
        measured = max(0.0, self.done - max(before, warm))
        self.comm_s += measured * self.comm_iter_s
        self.compute_s += measured * self.spec.compute_s
        self.at_s = now

    def finish_time(self) -> float:
        return self.at_s + (self.total - self.done) * self.iteration_s

    def state(self, finished: bool) -> FluidRun:
        warm = self.spec.warmup_iterations
        measured = min(float(self.spec.iterations), max(0.0, self.done - warm))
        whole = self.spec.iterations if finished else int(math.floor(measured * (1 + EPS)))
        return FluidRun(self.spec.name, self.spec.start_s, self.at_s, min(whole, self.spec.iterations), finished,
                        measured, self.comm_s, self.compute_s)


class FluidEngine:
    """The fluid simulation's event loop, with :class:`sim.flowsim.FlowEngine`'s interface
    (``now_s``, ``add``, ``remove``, ``advance``, ``running``, ``progress``); the module
    docstring says what it models.

    Args:
        g: topology graph; routes are :func:`topo.routing.ecmp_path`.
        rate_mbps: rate of each link in Mbit/s, keyed by either orientation (the ``(u, v)`` entry
            wins for direction u -> v).
        options: ``mtu`` (bytes on the wire) and ``latency_s`` are modelled; ``burst_bytes``,
            ``ecn`` and ``mltcp`` are not (see ``docs/simulator-engines.md``).

    Attributes:
        events: event batches processed so far.
    """

    def __init__(self, g, rate_mbps: Mapping[Link, float], options: SimOptions = SimOptions()):
        self.g, self.options = g, options
        self.link_names: list[Link] = directed_links(g)
        self.capacity = [0.0] * len(self.link_names)
        for i, (u, v) in enumerate(self.link_names):
            rate = rate_mbps.get((u, v), rate_mbps.get((v, u)))
            self.capacity[i] = float(rate) * MEGA if rate is not None and rate > 0 else 0.0
        self.capacity = [c / BITS_PER_BYTE for c in self.capacity]  # bytes/s
        self.aggregator_names: list[str] = sorted(n for n, d in g.nodes(data=True) if d.get("role") == "switch")
        self._pat = [float(options.pat_bytes_s)] * len(self.aggregator_names)
        self.costs = IterationCosts(g, self.link_names, self.capacity, self.aggregator_names, options)
        self.overlap: Together = OVERLAP_MODELS[options.overlap]  # how coupled jobs overlap, chosen once
        self._runs: dict[str, int] = {}
        self._pending: list[tuple[float, tuple[str, int]]] = []  # (start_s, key) of runs not started
        self._live: dict[str, _Run] = {}  # name -> its run neither finished nor removed
        self._started: dict[str, _Run] = {}  # those of them started: what a call over running jobs walks
        self._ends: list[tuple[float, tuple[str, int], int]] = []  # (finish time, key, version) of started runs
        # The started runs whose demand may load each resource (links, then aggregators), and the
        # resources of runs started or ended since the last fill.
        self._users = Components()
        self._now_s = 0.0
        self.events = 0

    @property
    def now_s(self) -> float:
        """The clock, seconds."""
        return self._now_s

    def add(self, spec: SimJob) -> None:
        """Start a run of ``spec`` at ``spec.start_s`` (a name may be added again once its run ended).

        Raises:
            JobError: ``start_s`` before :attr:`now_s`, a run of that name still running, an unknown
                collective or a bucket size the pattern rejects.
            TopologyError: an unknown machine, or a link on a route without a positive rate.
        """
        if spec.name in self._live:
            raise JobError(f"job {spec.name!r} is already running; remove it before adding it again")
        if spec.start_s < self._now_s:
            raise JobError(f"job {spec.name!r}: start_s {spec.start_s!r} is before the simulation's clock, "
                           f"now_s = {self._now_s!r}")
        for m in sorted(set(spec.machines_by_rank)):
            if m not in self.g or self.g.nodes[m].get("role") != "machine":
                raise TopologyError(f"job {spec.name!r}: {m!r} is not a machine of the topology")
        bound, latency, demand = self.costs.of(spec)
        key = (spec.name, self._runs.get(spec.name, 0))
        self._runs[spec.name] = key[1] + 1
        run = _Run(key, spec, spec.warmup_iterations + spec.iterations, bound, latency, demand, at_s=spec.start_s,
                   resources=self._resources(demand))
        self._live[spec.name] = run
        heapq.heappush(self._pending, (spec.start_s, key))

    def remove(self, name: str) -> FluidRun:
        """Preempt the running run of ``name`` at :attr:`now_s`; its partial iteration is lost.

        Raises:
            JobError: no run of ``name`` is running.
        """
        run = self._live.pop(name, None)
        if run is None:
            raise JobError(f"no running job {name!r}; running: {', '.join(self.running()) or 'none'}")
        run.move_to(self._now_s)
        if run.started:
            del self._started[name]
            self._users.leave(run.spec.name, run.resources)
        else:
            run.at_s = self._now_s
        return run.state(finished=False)

    def advance(self, until_s: float) -> list[FluidRun]:
        """Process events up to ``until_s`` (may be ``math.inf``), stopping right after the first
        event batch in which runs finished.

        Returns:
            The runs that finished in that batch, sorted by name (:attr:`now_s` is its time), or []
            (:attr:`now_s` is then ``until_s``, or the last event's time if it is infinite).

        Raises:
            JobError: ``until_s`` before :attr:`now_s` (or NaN).
        """
        if not until_s >= self._now_s:
            raise JobError(f"cannot advance to {until_s!r} s: the simulation's clock is at now_s = {self._now_s!r}")
        if self._users.changed:  # runs removed: the others' levels change from now on
            self._reallocate(self._now_s, [])
        while True:
            while self._pending and not self._is_live(self._pending[0][1]):
                heapq.heappop(self._pending)
            next_start = self._pending[0][0] if self._pending else math.inf
            next_end = self._next_end()
            now = min(next_start, next_end)
            if now == math.inf or now > until_s:
                break
            self.events += 1
            limit = now + EPS * max(1.0, abs(now))
            finished = []
            while self._next_end() <= limit:
                run = self._live.pop(heapq.heappop(self._ends)[1][0])
                run.move_to(now)
                run.done = float(run.total)
                del self._started[run.spec.name]
                self._users.leave(run.spec.name, run.resources)
                finished.append(run)
            started = []
            while self._pending and self._pending[0][0] <= now:
                _, key = heapq.heappop(self._pending)
                if self._is_live(key):
                    run = self._live[key[0]]
                    run.started, run.at_s = True, now
                    self._started[key[0]] = run
                    started.append(run)
            self._reallocate(now, started)
            self._now_s = now
            if finished:
                return [run.state(finished=True) for run in sorted(finished, key=lambda r: r.key)]
        if until_s != math.inf:
            self._now_s = until_s
        return []

    def running(self) -> list[str]:
        """Names of the runs neither finished nor removed, sorted."""
        return sorted(self._live)

    def progress(self, name: str) -> int:
        """Measured iterations the running run of ``name`` has completed, at :attr:`now_s`.

        Raises:
            JobError: no run of ``name`` is running.
        """
        run = self._live.get(name)
        if run is None:
            raise JobError(f"no running job {name!r}; running: {', '.join(self.running()) or 'none'}")
        run.move_to(self._now_s)
        return run.state(finished=False).iterations_done

    def aggregation(self, name: str) -> dict[str, float]:
        """The running INA job's aggregation ratio at each ToR summing it: the part of its rate
        summed there (NetPack §1.6: 1 while the ToR's PAT lasts, PAT share / rate beyond).

        Raises:
            JobError: no run of ``name`` is running.
        """
        run = self._live.get(name)
        if run is None:
            raise JobError(f"no running job {name!r}; running: {', '.join(self.running()) or 'none'}")
        if not isinstance(run.demand, AggregatedDemand):
            return {}
        return {self.aggregator_names[a]: aggregated_fraction(run.spilled.get(a), run.level)
                for a, _ in run.demand.aggregators}

    def levels(self) -> dict[str, float]:
        """Every started run's current level (1 = as fast as alone), by name."""
        started = self._started
        return {name: started[name].level for name in sorted(started)}

    # -- internals ---------------------------------------------------------------------------
    def _is_live(self, key: tuple[str, int]) -> bool:
        run = self._live.get(key[0])
        return run is not None and run.key == key

    def _next_end(self) -> float:
        """The earliest finish time of a started run (``math.inf``: none), stale heap entries dropped."""
        ends = self._ends
        while ends:
            end_s, key, version = ends[0]
            run = self._live.get(key[0])
            if run is not None and run.key == key and run.version == version:
                return end_s
            heapq.heappop(ends)
        return math.inf

    def _resources(self, demand) -> tuple[int, ...]:
        """The links (ids) and aggregators (ids after the links) a run's demand may ever load, sorted.
        An INA job's spilled ToRs pass each machine's stream up its own route where a summing ToR
        passes its first machine's (:func:`sim.ina.streams`), so its links under any spilled set are
        among those of none and of every aggregator spilled."""
        if not isinstance(demand, AggregatedDemand):
            return tuple(i for i, _ in demand)
        every = frozenset(a for a, _ in demand.aggregators)
        links = {i for i, _ in demand.links(frozenset())} | {i for i, _ in demand.links(every)}
        return tuple(sorted(links)) + tuple(sorted(len(self.capacity) + a for a in every))

    def _reallocate(self, now: float, started: Sequence[_Run]) -> None:
        """Fill again the levels of the runs coupled to the runs just ``started`` and to the resources
        of those that ended since the last fill; the others keep theirs. A run whose level changes is
        brought to ``now`` first, and its finish time queued again."""
        for run in started:
            if run.demand:
                self._users.join(run.spec.name, run.resources)
            else:  # loads nothing: at full speed from now on
                run.version += 1
                heapq.heappush(self._ends, (run.finish_time(), run.key, run.version))
        if not self._users.changed:
            return
        _, names = self._users.component(lambda name: self._live[name].resources)
        loaded = [self._live[name] for name in sorted(names)]
        fill = fill_levels([run.demand for run in loaded], self.capacity, self._pat)
        n_links, pat = len(self.capacity), self._pat
        levels = self.overlap.levels(loaded, fill, n_links,
                                     lambda r: self.capacity[r] if r < n_links else pat[r - n_links])
        for run, level, spilled in zip(loaded, levels, fill.spilled, strict=True):
            if isinstance(run.demand, AggregatedDemand):  # a rate in the INA unit: relative to its own cap
                alone = level_cap(run.demand)
                level, spilled = level / alone, {a: at / alone for a, at in spilled.items()}
            level = max(level, 1e-12)
            run.spilled = spilled
            if level == run.level and run.version:  # unchanged (and queued): its finish time holds
                continue
            run.move_to(now)
            run.level = level
            run.version += 1
            heapq.heappush(self._ends, (run.finish_time(), run.key, run.version))
