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

import collections
import dataclasses
import functools
import heapq
import math
from collections.abc import Mapping, Sequence

import numpy as np

from common.errors import JobError, TopologyError
from common.units import BITS_PER_BYTE, MEGA, wire_bytes
from jobs.collective import collective_of
from jobs.patterns import replay_pattern
from sim.flowsim import JobEstimate, SimJob, SimOptions
from sim.ina import ina_routes, stream_bytes, streams
from sim.maxmin import EPS, AggregatedDemand, aggregated_fraction, fill_levels, resource_weights
from topo.routing import EcmpRoutes, path_links

Link = tuple[str, str]

MEMO_BUCKET_SHAPES = 4096
"""Bucket costs kept per shape (:meth:`FluidEngine._bucket_cost`), least recently used dropped first."""

OVERLAP_ROUNDS = 200
"""Rounds of the independent-overlap fixed point at most (:meth:`FluidEngine._independent`)."""
OVERLAP_TOLERANCE = 1e-7
"""It stops once no level moves by more than this part of the highest cap."""

MEMO_PATTERNS = 256
"""Collective patterns kept (a 64-rank ring's is 8,064 transfers), least recently used dropped first."""


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


def _cap(run: _Run) -> float:
    """``run``'s highest level in the fill's unit: an INA job's rate alone, 1 for the others."""
    return (run.demand.cap or 1.0) if isinstance(run.demand, AggregatedDemand) else 1.0


def _phases(d, spilled: Mapping[int, float], n_links: int) -> list[tuple[float, dict[int, float]]]:
    """A demand's weights by level: ``(from level, weights)``, an INA demand's each spill adding its
    aggregator to the spent ones (:func:`sim.maxmin.resource_weights`); a plain demand's one phase."""
    if not isinstance(d, AggregatedDemand):
        return [(0.0, dict(d))]
    spent: set[int] = set()
    out = [(0.0, resource_weights(d, frozenset(), n_links))]
    for at, a in sorted((at, a) for a, at in spilled.items()):
        spent.add(a)
        out.append((at, resource_weights(d, frozenset(spent), n_links)))
    return out


def _marginal(phases: list[tuple[float, dict[int, float]]], level: float) -> dict[int, float]:
    """The weights of a demand of ``phases`` just above ``level`` (its spills up to there spent)."""
    return [w for at, w in phases if at <= level][-1]


class _Coupling:
    """The loads of coupled runs on their resources as flat arrays, for the independent overlap's
    fixed point (:meth:`FluidEngine._independent`).

    Every (run, resource) pair a run loads is numbered (``pair_run``, ``pair_res``, the resource
    as a column of ``room``, its capacity); every phase of a run's demand (:func:`_phases`) is a
    segment of its level, ``[seg_lo, seg_hi)``, whose weights ``entry_w`` load pairs
    ``entry_pair``; ``margin_*`` are the weights of each run's resources just above its floor
    (:func:`_marginal`), the ones its level's step is taken on.
    """

    def __init__(self, phases: Sequence[list[tuple[float, dict[int, float]]]], margins: Sequence[Mapping[int, float]],
                 capacity):
        resources = sorted({r for p in phases for _, w in p for r in w} | {r for m in margins for r in m})
        column = {r: i for i, r in enumerate(resources)}
        self.room = np.array([capacity(r) for r in resources], dtype=float)
        pairs: dict[tuple[int, int], int] = {}
        seg_run, seg_lo, seg_hi, entry_seg, entry_pair, entry_w = [], [], [], [], [], []
        for j, p in enumerate(phases):
            for i, (at, weights) in enumerate(p):
                seg = len(seg_run)
                seg_run.append(j)
                seg_lo.append(at)
                seg_hi.append(p[i + 1][0] if i + 1 < len(p) else math.inf)
                for r, w in weights.items():
                    entry_seg.append(seg)
                    entry_pair.append(pairs.setdefault((j, column[r]), len(pairs)))
                    entry_w.append(w)
        margin_run, margin_pair, margin_w = [], [], []
        for j, m in enumerate(margins):
            for r, w in m.items():
                if w > 0:
                    margin_run.append(j)
                    margin_pair.append(pairs.setdefault((j, column[r]), len(pairs)))
                    margin_w.append(w)
        keys = np.array(list(pairs), dtype=np.int64).reshape(-1, 2)
        self.pair_run, self.pair_res = keys[:, 0], keys[:, 1]
        self.seg_run, self.seg_lo = np.array(seg_run, dtype=np.int64), np.array(seg_lo, dtype=float)
        self.seg_hi = np.array(seg_hi, dtype=float)
        self.entry_seg, self.entry_pair = np.array(entry_seg, dtype=np.int64), np.array(entry_pair, dtype=np.int64)
        self.entry_w = np.array(entry_w, dtype=float)
        self.margin_run, self.margin_pair = np.array(margin_run, dtype=np.int64), np.array(margin_pair, dtype=np.int64)
        self.margin_w = np.array(margin_w, dtype=float)

    def loads(self, levels: np.ndarray) -> np.ndarray:
        """Every pair's load at the runs' ``levels``: each phase's weights times the part of its
        segment below the level."""
        span = np.maximum(0.0, np.minimum(levels[self.seg_run], self.seg_hi) - self.seg_lo)
        return np.bincount(self.entry_pair, weights=self.entry_w * span[self.entry_seg], minlength=len(self.pair_run))


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
        self.link_names: list[Link] = sorted({(u, v) for a, b in g.edges() for u, v in ((a, b), (b, a))})
        self.link_id = {link: i for i, link in enumerate(self.link_names)}
        self.capacity = [0.0] * len(self.link_names)
        for (u, v), i in self.link_id.items():
            rate = rate_mbps.get((u, v), rate_mbps.get((v, u)))
            self.capacity[i] = float(rate) * MEGA if rate is not None and rate > 0 else 0.0
        self.capacity = [c / BITS_PER_BYTE for c in self.capacity]  # bytes/s
        self._paths: dict[tuple[str, str], tuple[int, ...]] = {}
        self._routes = EcmpRoutes(g)
        self._costs: dict[tuple, tuple[float, float, tuple[tuple[int, float], ...] | AggregatedDemand]] = {}
        self.aggregator_names: list[str] = sorted(n for n, d in g.nodes(data=True) if d.get("role") == "switch")
        self._aggregator_id = {name: i for i, name in enumerate(self.aggregator_names)}
        self._pat = [float(options.pat_bytes_s)] * len(self.aggregator_names)
        self._unit_rate = max((c for c in self.capacity if c > 0), default=1.0)  # INA jobs' level unit, bytes/s
        self._runs: dict[str, int] = {}
        self._pending: list[tuple[float, tuple[str, int]]] = []  # (start_s, key) of runs not started
        self._live: dict[str, _Run] = {}  # name -> its run neither finished nor removed
        self._ends: list[tuple[float, tuple[str, int], int]] = []  # (finish time, key, version) of started runs
        self._users: dict[int, dict[str, None]] = {}  # resource -> the started runs whose demand may load it
        self._freed: list[int] = []  # resources of runs removed since the last fill
        self._patterns: collections.OrderedDict = collections.OrderedDict()  # (collective, p, size) -> steps
        self._pairs: dict[tuple[str, int, int], tuple[tuple[int, int], ...]] = {}  # the same -> rank pairs
        self._shapes: collections.OrderedDict = collections.OrderedDict()  # bucket shape -> its cost
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
        bound, latency, demand = self._cost(spec)
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
            self._leave(run)
            self._freed.extend(run.resources)
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
        if self._freed:
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
                self._leave(run)
                self._freed.extend(run.resources)
                finished.append(run)
            started = []
            while self._pending and self._pending[0][0] <= now:
                _, key = heapq.heappop(self._pending)
                if self._is_live(key):
                    run = self._live[key[0]]
                    run.started, run.at_s = True, now
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
        return {name: run.level for name, run in sorted(self._live.items()) if run.started}

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

    def _leave(self, run: _Run) -> None:
        """Take the ended run out of the resources' users."""
        for r in run.resources:
            users = self._users[r]
            users.pop(run.spec.name, None)
            if not users:
                del self._users[r]

    def _coupled(self, seeds: Sequence[int]) -> list[_Run]:
        """The started runs that share resources with ``seeds``, directly or through other runs, by name."""
        seen = set(seeds)
        stack = list(seen)
        names: set[str] = set()
        live, users = self._live, self._users
        while stack:
            for name in users.get(stack.pop(), ()):
                if name not in names:
                    names.add(name)
                    for r in live[name].resources:
                        if r not in seen:
                            seen.add(r)
                            stack.append(r)
        return [live[name] for name in sorted(names)]

    def _independent(self, runs: Sequence[_Run], fill) -> list[float]:
        """The levels of coupled ``runs`` whose communication overlaps independently
        (``SimOptions.overlap``, ``docs/simulator-engines.md``): from the fill's, each run's level rises
        until its own load and the others' loads *times the share of time they communicate* fill
        one of its resources, or to its cap; the shares follow the levels, so this is iterated to a
        fixed point (damped by half, at most :data:`OVERLAP_ROUNDS` rounds). A level never falls
        below the fill's (jobs that always communicate together) and an INA job's aggregators keep
        the spills the fill found. Each round is a few array operations over the (run, resource)
        pairs of the component (:class:`_Coupling`)."""
        n_links = len(self.capacity)
        floors = np.array(fill.levels, dtype=float)
        caps = np.array([_cap(run) for run in runs])
        phases = [_phases(run.demand, fill.spilled[j], n_links) for j, run in enumerate(runs)]
        c = _Coupling(phases, [_marginal(p, floor) for p, floor in zip(phases, floors, strict=True)],
                      lambda r: self.capacity[r] if r < n_links else self._pat[r - n_links])
        latency = np.array([run.latency_s for run in runs])
        bound = np.array([run.bound_s for run in runs])
        compute = np.array([run.spec.compute_s for run in runs])
        x = floors.copy()
        for _ in range(OVERLAP_ROUNDS):
            loads = c.loads(x)
            comm = latency + np.where(bound > 0, bound / np.maximum(x / caps, 1e-12), 0.0)
            period = compute + comm
            # the share of each run's iteration spent communicating at its level
            shares = np.where(period > 0, comm / np.where(period > 0, period, 1.0), 1.0)
            average = np.bincount(c.pair_res, weights=shares[c.pair_run] * loads, minlength=len(c.room))
            own = loads[c.margin_pair]
            others = average[c.pair_res[c.margin_pair]] - shares[c.margin_run] * own
            step = np.full(len(runs), np.inf)
            np.minimum.at(step, c.margin_run, (c.room[c.pair_res[c.margin_pair]] - own - others) / c.margin_w)
            nxt = np.minimum(caps, np.maximum(floors, x + step))
            moved = float(np.max(np.abs(x - nxt)))
            x = (x + nxt) / 2
            if moved <= OVERLAP_TOLERANCE * float(caps.max()):
                break
        return x.tolist()

    def _cost(self, spec: SimJob) -> tuple[float, float, tuple[tuple[int, float], ...]]:
        """(bandwidth bound, latency, per-link demand at full speed) of one iteration of ``spec``.

        The bound is :func:`jobs.steps.job_bound_s`'s (the chained bound, bucket after bucket),
        computed here over memoised routes and once per distinct bucket size and shape
        (:meth:`_bucket_cost`)."""
        memo = (spec.machines_by_rank, spec.collective, spec.bucket_bytes, spec.ina)
        if memo in self._costs:
            return self._costs[memo]
        machines = spec.machines_by_rank
        p = len(machines)
        if collective_of(spec.collective).aggregates_in_fabric:
            cost = self._ina_cost(spec)
        elif len(set(machines)) == 1:  # every transfer in memory
            for size in set(spec.bucket_bytes):
                self._pattern(spec.collective, p, size)  # rejects what the pattern rejects
            cost = (0.0, 0.0, ())
        else:
            per_size = {size: self._bucket_cost(spec, size) for size in sorted(set(spec.bucket_bytes))}
            loads: dict[int, float] = {}
            bound = crossing = 0.0
            for size in spec.bucket_bytes:
                b_bound, b_crossing, b_loads = per_size[size]
                bound += b_bound
                crossing += b_crossing
                for i, nbytes in b_loads.items():
                    loads[i] = loads.get(i, 0.0) + nbytes
            demand = tuple((i, nbytes / bound) for i, nbytes in sorted(loads.items())) if bound else ()
            cost = (bound, crossing * self.options.latency_s, demand)
        self._costs[memo] = cost
        return cost

    def _ina_cost(self, spec: SimJob) -> tuple[float, float, tuple[tuple[int, float], ...] | AggregatedDemand]:
        """An INA job's (bound, latency, demand) (:mod:`sim.ina`): its per-worker rate alone with
        full aggregation is its busiest link's capacity over its streams there, and the bound is
        its stream's bytes at that rate. Its level in the fill is its per-worker rate over the
        fabric's fastest link (:attr:`_unit_rate`), the same unit for every INA job, so that INA
        jobs share links and PAT as NetPack's Algorithm 1 has them (equal per-worker rates, each
        up to its own, §2.3); its demand weighs each stream and each aggregator's use with that
        unit and caps it at its rate alone. Latency: one per bucket (its last packet round-trips)."""
        if spec.ina is None:
            raise JobError(f"job {spec.name!r}: an INA job needs its PS host and INA switches (SimJob.ina)")
        for s in spec.ina.switches:
            if s not in self._aggregator_id:
                raise JobError(f"job {spec.name!r}: INA switch {s!r} is not a switch of the topology")
        names = self.link_names
        routes = ina_routes(self.g, spec.machines_by_rank, spec.ina, lambda a, b: self._route(spec.name, a, b),
                            job=spec.name, reverse=lambda i: self.link_id[names[i][::-1]])
        results = self.options.ina_results
        full = streams(routes, frozenset(), results)
        if not full:
            return 0.0, 0.0, ()
        per_stream = min(self.capacity[i] / k for i, k in full.items())  # bytes/s, alone
        bound = stream_bytes(spec.bucket_bytes, wire=self.options.mtu is not None,
                             values_per_packet=self.options.ina_values_per_packet) / per_stream
        aggregator, unit = self.aggregator_names, self._unit_rate

        @functools.lru_cache(maxsize=None)
        def links(spilled: frozenset[int]) -> tuple[tuple[int, float], ...]:
            counts = streams(routes, frozenset(aggregator[a] for a in spilled), results)
            return tuple((i, k * unit) for i, k in sorted(counts.items()))

        aggregators = tuple((self._aggregator_id[t], unit) for t in routes.aggregators)
        demand = AggregatedDemand(aggregators, links, cap=per_stream / unit)
        return bound, len(spec.bucket_bytes) * self.options.latency_s, demand

    def _bucket_cost(self, spec: SimJob, size: int) -> tuple[float, int, dict[int, float]]:
        """One allreduce of ``size`` bytes: its chained bound (:func:`jobs.steps.chained_bound_s`), the
        steps with a cross-machine transfer, and the bytes on each link.

        These depend on the placement through its *shape* only: which ranks share a machine, which
        links (up to their ids) each rank pair's route crosses, and those links' rates. Machines
        and links are numbered by first appearance (ranks in order, then the pairs' routes), and
        the cost of a shape, in those numbers, is kept for the next placement of that shape."""
        machines = spec.machines_by_rank
        machine_no: dict[str, int] = {}
        ranks = tuple(machine_no.setdefault(m, len(machine_no)) for m in machines)
        link_no: dict[int, int] = {}
        routes = {}
        for src, dst in self._rank_pairs(spec.collective, len(machines), size):
            if ranks[src] != ranks[dst]:
                routes[src, dst] = tuple(link_no.setdefault(i, len(link_no))
                                         for i in self._route(spec.name, machines[src], machines[dst]))
        links = list(link_no)
        shape = (spec.collective, size, ranks, tuple(routes.values()), tuple(self.capacity[i] for i in links))
        cost = self._shapes.get(shape)
        if cost is None:
            cost = self._shapes[shape] = self._shape_cost(spec.collective, size, ranks, routes, shape[-1])
            if len(self._shapes) > MEMO_BUCKET_SHAPES:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(shape)
        bound, crossing, loads = cost
        return bound, crossing, {links[n]: nbytes for n, nbytes in loads.items()}

    def _shape_cost(self, collective: str, size: int, ranks: tuple[int, ...], routes: Mapping[tuple[int, int], tuple],
                    capacity: Sequence[float]) -> tuple[float, int, dict[int, float]]:
        """:meth:`_bucket_cost` of a shape: ``ranks`` the machine number of each rank, ``routes`` the
        link numbers of each cross-machine rank pair's route, ``capacity`` each link number's rate."""
        mtu = self.options.mtu
        done = [0.0] * len(ranks)
        total: dict[int, float] = {}
        crossing = 0
        for step in self._pattern(collective, len(ranks), size):
            step_loads: dict[int, float] = {}
            paths = []
            for src, dst, nbytes in step:
                if ranks[src] == ranks[dst] or nbytes == 0:
                    paths.append(())
                    continue
                path = routes[src, dst]
                paths.append(path)
                cost = wire_bytes(nbytes, mtu) if mtu else nbytes
                for i in path:
                    step_loads[i] = step_loads.get(i, 0.0) + cost
            if step_loads:
                crossing += 1
            finished = list(done)
            for (src, dst, _), path in zip(step, paths, strict=True):
                length = max((step_loads[i] / capacity[i] for i in path), default=0.0)
                end = done[src] + length
                finished[src] = max(finished[src], end)
                finished[dst] = max(finished[dst], end)
            done = finished
            for i, nbytes in step_loads.items():
                total[i] = total.get(i, 0.0) + nbytes
        return max(done, default=0.0), crossing, total

    def _pattern(self, collective: str, p: int, size: int) -> list:
        """:func:`jobs.patterns.replay_pattern`, the most recently used kept."""
        key = (collective, p, size)
        steps = self._patterns.get(key)
        if steps is None:
            steps = self._patterns[key] = replay_pattern(collective, p, size)
            if len(self._patterns) > MEMO_PATTERNS:
                self._patterns.popitem(last=False)
        else:
            self._patterns.move_to_end(key)
        return steps

    def _rank_pairs(self, collective: str, p: int, size: int) -> tuple[tuple[int, int], ...]:
        """The ``(src, dst)`` rank pairs that some transfer of the pattern joins, sorted (kept)."""
        key = (collective, p, size)
        pairs = self._pairs.get(key)
        if pairs is None:
            pairs = self._pairs[key] = tuple(sorted({(src, dst) for step in self._pattern(collective, p, size)
                                                     for src, dst, nbytes in step if nbytes}))
        return pairs

    def _route(self, job: str, a: str, b: str) -> tuple[int, ...]:
        """The link ids of the ECMP route from machine ``a`` to ``b`` (memoised)."""
        path = self._paths.get((a, b))
        if path is None:
            path = tuple(self.link_id[link] for link in path_links(self._routes.path(a, b)))
            for i in path:
                if self.capacity[i] <= 0:
                    u, v = self.link_names[i]
                    raise TopologyError(f"job {job!r}: link {u}->{v} has no positive rate")
            self._paths[(a, b)] = path
        return path

    def _reallocate(self, now: float, started: Sequence[_Run]) -> None:
        """Fill again the levels of the runs coupled to the runs just ``started`` and to the resources
        of those that ended (:attr:`_freed`); the others keep theirs. A run whose level changes is
        brought to ``now`` first, and its finish time queued again."""
        seeds = self._freed
        self._freed = []
        for run in started:
            if run.demand:
                for r in run.resources:
                    self._users.setdefault(r, {})[run.spec.name] = None
                seeds.extend(run.resources)
            else:  # loads nothing: at full speed from now on
                run.version += 1
                heapq.heappush(self._ends, (run.finish_time(), run.key, run.version))
        if not seeds:
            return
        loaded = self._coupled(seeds)
        fill = fill_levels([run.demand for run in loaded], self.capacity, self._pat)
        levels = fill.levels
        if self.options.overlap == "independent" and len(loaded) > 1:
            levels = self._independent(loaded, fill)
        for run, level, spilled in zip(loaded, levels, fill.spilled, strict=True):
            if isinstance(run.demand, AggregatedDemand):  # a rate in the INA unit: relative to its own cap
                alone = _cap(run)
                level, spilled = level / alone, {a: at / alone for a, at in spilled.items()}
            level = max(level, 1e-12)
            run.spilled = spilled
            if level == run.level and run.version:  # unchanged (and queued): its finish time holds
                continue
            run.move_to(now)
            run.level = level
            run.version += 1
            heapq.heappush(self._ends, (run.finish_time(), run.key, run.version))
