"""A brute-force reference of the fluid model of :mod:`sim.fluid`, written apart from its engine.

The model (``docs/simulator-engines.md``, The fluid engine; overlap ``together``): a job's iteration is its
compute and then its communication, ``bound / level`` plus its latency; the running jobs' levels are the
weighted max-min fair fill of their traffic, INA jobs in per-worker rates of the fabric's fastest link with
their ToRs' throughput (PAT) spilling into unaggregated streams; levels change only at a start, a finish or a
removal, so progress is linear in between. This reference computes the same thing the slow, obvious way:

* costs from the modules the model names, not the engine's memoised shapes: a collective's bound is
  :func:`jobs.steps.job_bound_s`, its bytes per link :func:`jobs.steps.link_loads` over every step of
  :func:`jobs.steps.job_steps`, an INA job's streams :func:`sim.ina.streams` on
  :func:`topo.routing.ecmp_path`'s routes;
* at every event, every running job filled again from level 0 (:func:`water_fill`: rounds that each
  recompute every resource's load from every job's weights; no heap, no coupling groups, no incremental
  bookkeeping), and every running job's progress brought up to the event (no heap of finish times).

The engine's results must equal these up to floating-point rounding: both are exact (no time step).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Mapping, Sequence

from jobs.collective import INA
from jobs.steps import job_bound_s, job_steps, link_loads
from sim.flowsim import SimJob, SimOptions
from sim.ina import ina_routes, stream_bytes, streams
from topo.routing import ecmp_path, path_links

EPS = 1e-9
"""Relative slack under which runs end in one batch (the engine's rule: simultaneous in exact arithmetic)."""

FLOOR_LEVEL = 1e-12
"""Lowest level a job runs at (the engine's: a job a fill starves still progresses, very slowly)."""


@dataclasses.dataclass(frozen=True)
class Demand:
    """One job in :func:`water_fill`.

    Attributes:
        weights: the job's load per unit level on each resource, given the aggregators it has spent.
        cap: its highest level.
    """

    weights: Callable[[frozenset], Mapping[Hashable, float]]
    cap: float = 1.0


def water_fill(demands: Sequence[Demand], capacity: Mapping[Hashable, float],
               aggregators: frozenset = frozenset()) -> list[float]:
    """Every job's level by progressive filling, one round per resource that fills.

    All unfrozen jobs rise together. Each round finds the lowest level at which a resource fills (its
    capacity minus every job's load up to its level, over the unfrozen jobs' current weights) or an
    unfrozen job reaches its cap. A full link freezes its unfrozen jobs there; a full aggregator (one of
    ``aggregators``) freezes nobody, but each of its unfrozen jobs spends it, so that job's further
    increments load ``weights(spent)`` instead (its load below keeps its old weights). A job with no
    resource stops at its cap.
    """
    n = len(demands)
    phases = [[(0.0, dict(d.weights(frozenset())))] for d in demands]  # (from level, weights) per job
    spent: list[frozenset] = [frozenset() for _ in demands]
    frozen: list[float | None] = [None] * n
    level = 0.0
    while any(x is None for x in frozen):
        used: dict[Hashable, float] = {}
        rising: dict[Hashable, float] = {}
        for j in range(n):
            top = level if frozen[j] is None else frozen[j]
            for i, (lo, weights) in enumerate(phases[j]):
                hi = phases[j][i + 1][0] if i + 1 < len(phases[j]) else math.inf
                span = max(0.0, min(top, hi) - lo)
                for r, w in weights.items():
                    used[r] = used.get(r, 0.0) + w * span
            if frozen[j] is None:
                for r, w in phases[j][-1][1].items():
                    rising[r] = rising.get(r, 0.0) + w
        fills = {r: level + max(0.0, capacity[r] - used[r]) / w for r, w in rising.items() if w > 0}
        level = min([demands[j].cap for j in range(n) if frozen[j] is None] + list(fills.values()))
        full = {r for r, at in fills.items() if at <= level}
        for j in range(n):
            if frozen[j] is None and (demands[j].cap <= level or any(r in full and r not in aggregators
                                                                     for r in phases[j][-1][1])):
                frozen[j] = level
        for j in range(n):
            if frozen[j] is None and (new := {r for r in phases[j][-1][1] if r in full} - spent[j]):
                spent[j] = spent[j] | new
                phases[j].append((level, dict(demands[j].weights(spent[j]))))
    return [float(x) for x in frozen]


@dataclasses.dataclass(frozen=True)
class ReferenceRun:
    """What one run did, in the fields of :class:`sim.fluid.FluidRun` (the same meanings)."""

    job: str
    start_s: float
    end_s: float
    iterations_done: int
    finished: bool
    measured: float
    comm_s: float
    compute_s: float


@dataclasses.dataclass
class _Job:
    spec: SimJob
    run: int
    bound_s: float
    latency_s: float
    demand: Demand | None  # None: it loads no link
    unit: float  # the level this job's fill level is 1 at (its cap for an INA job, 1 otherwise)
    done: float = 0.0  # iterations run, fractional
    at_s: float = 0.0
    level: float = 1.0
    started: bool = False
    comm_s: float = 0.0
    compute_s: float = 0.0

    @property
    def total(self) -> int:
        return self.spec.warmup_iterations + self.spec.iterations

    def comm_iter_s(self) -> float:
        return self.latency_s + (self.bound_s / self.level if self.bound_s else 0.0)

    def period_s(self) -> float:
        return self.spec.compute_s + self.comm_iter_s()

    def finish_s(self) -> float:
        return self.at_s + (self.total - self.done) * self.period_s()

    def progress_to(self, now: float) -> None:
        if self.started and now > self.at_s:
            period = self.period_s()
            before = self.done
            self.done = min(float(self.total), before + (now - self.at_s) / period) if period > 0 else self.total
            measured = max(0.0, self.done - max(before, self.spec.warmup_iterations))
            self.comm_s += measured * self.comm_iter_s()
            self.compute_s += measured * self.spec.compute_s
        self.at_s = max(self.at_s, now)

    def report(self, finished: bool) -> ReferenceRun:
        measured = min(float(self.spec.iterations), max(0.0, self.done - self.spec.warmup_iterations))
        whole = self.spec.iterations if finished else min(self.spec.iterations, math.floor(measured * (1 + EPS)))
        return ReferenceRun(self.spec.name, self.spec.start_s, self.at_s, whole, finished, measured, self.comm_s,
                            self.compute_s)


class ReferenceFluid:
    """The fluid model, brute force, with the engine's interface (``add``, ``remove``, ``advance``,
    ``running``, ``levels``, ``now_s``, ``events``: an event is an instant at which runs start or end)."""

    def __init__(self, g, rate_mbps: Mapping[tuple[str, str], float], options: SimOptions = SimOptions()):
        if options.overlap != "together":
            raise ValueError(f"the reference models overlap 'together' only, not {options.overlap!r}")
        self.g, self.options = g, options
        self.rate_mbps = {(u, v): rate_mbps.get((u, v), rate_mbps.get((v, u))) for a, b in g.edges()
                          for u, v in ((a, b), (b, a))}
        self.capacity: dict[Hashable, float] = {("link", link): rate * 1e6 / 8 for link, rate in self.rate_mbps.items()}
        self.unit = max(self.capacity.values())  # bytes/s: an INA job's level 1 in the fill is this per-worker rate
        for name, role in g.nodes(data="role"):
            if role == "switch":
                self.capacity[("agg", name)] = float(options.pat_bytes_s)
        self.aggregators = frozenset(r for r in self.capacity if r[0] == "agg")
        self.now_s = 0.0
        self.events = 0
        self._jobs: dict[str, _Job] = {}
        self._runs: dict[str, int] = {}
        self._refill = False

    def add(self, spec: SimJob) -> None:
        if spec.start_s < self.now_s or spec.name in self._jobs:
            raise ValueError(f"job {spec.name!r} cannot start at {spec.start_s} s")
        run = self._runs.get(spec.name, 0)
        self._runs[spec.name] = run + 1
        self._jobs[spec.name] = _Job(spec, run, *self._cost(spec), at_s=spec.start_s)

    def remove(self, name: str) -> ReferenceRun:
        job = self._jobs.pop(name)
        job.progress_to(self.now_s)
        if not job.started:  # removed before it began: it ran from nowhere to now
            job.at_s = self.now_s
        self._refill = self._refill or job.started
        return job.report(finished=False)

    def running(self) -> list[str]:
        return sorted(self._jobs)

    def levels(self) -> dict[str, float]:
        return {name: job.level for name, job in sorted(self._jobs.items()) if job.started}

    def advance(self, until_s: float) -> list[ReferenceRun]:
        if self._refill:
            self._fill()
        while True:
            starts = [j.spec.start_s for j in self._jobs.values() if not j.started]
            ends = [j.finish_s() for j in self._jobs.values() if j.started]
            now = min(starts + ends, default=math.inf)
            if now == math.inf or now > until_s:
                break
            self.events += 1
            for job in self._jobs.values():
                job.progress_to(now)
            limit = now + EPS * max(1.0, abs(now))
            finished = sorted((j for j in self._jobs.values() if j.started and j.finish_s() <= limit),
                              key=lambda j: (j.spec.name, j.run))
            for job in finished:
                job.done = float(job.total)
                del self._jobs[job.spec.name]
            for job in self._jobs.values():
                if not job.started and job.spec.start_s <= now:
                    job.started, job.at_s = True, now
            self._fill()
            self.now_s = now
            if finished:
                return [job.report(finished=True) for job in finished]
        if until_s != math.inf:
            self.now_s = until_s
        return []

    def _fill(self) -> None:
        """Every started job's level from a fill of them all."""
        self._refill = False
        loaded = [j for _, j in sorted(self._jobs.items()) if j.started and j.demand is not None]
        levels = water_fill([j.demand for j in loaded], self.capacity, self.aggregators)
        for job, level in zip(loaded, levels, strict=True):
            job.level = max(level / job.unit, FLOOR_LEVEL)

    def _path(self, a: str, b: str) -> list[tuple[str, str]]:
        return path_links(ecmp_path(self.g, a, b))

    def _cost(self, spec: SimJob) -> tuple[float, float, Demand | None, float]:
        """(bound, latency per iteration, demand, the fill level that is level 1) of one iteration."""
        machines = spec.machines_by_rank
        if spec.collective == INA:
            return self._ina_cost(spec)
        mtu = self.options.mtu
        bound = job_bound_s(self.g, self.rate_mbps, machines, spec.collective, spec.bucket_bytes, mtu)
        per_link: dict[Hashable, float] = {}
        crossing = 0
        for steps in job_steps(spec.collective, len(machines), spec.bucket_bytes):
            for step in steps:
                loads = link_loads(self.g, machines, step, mtu)
                crossing += bool(loads)
                for link, nbytes in loads.items():
                    per_link[("link", link)] = per_link.get(("link", link), 0.0) + nbytes
        latency = crossing * self.options.latency_s
        if not bound:
            return bound, latency, None, 1.0
        rates = {r: nbytes / bound for r, nbytes in per_link.items()}  # bytes/s at full speed
        return bound, latency, Demand(lambda _spent: rates), 1.0

    def _ina_cost(self, spec: SimJob) -> tuple[float, float, Demand | None, float]:
        """An INA job: each of its streams runs at its per-worker rate; alone with every ToR summing, that
        rate is its busiest link's capacity over the streams on it, and the bound its stream at that rate."""
        results = self.options.ina_results
        routes = ina_routes(self.g, spec.machines_by_rank, spec.ina, self._path, job=spec.name)
        full = streams(routes, frozenset(), results)
        if not full:
            return 0.0, 0.0, None, 1.0
        alone = min(self.capacity[("link", link)] / k for link, k in full.items())  # bytes/s per stream
        bound = stream_bytes(spec.bucket_bytes, wire=self.options.mtu is not None,
                             values_per_packet=self.options.ina_values_per_packet) / alone
        unit = self.unit

        def weights(spent: frozenset) -> dict[Hashable, float]:
            out: dict[Hashable, float] = {("link", link): k * unit for link, k in
                                          streams(routes, frozenset(name for _, name in spent), results).items()}
            out.update({("agg", tor): unit for tor in routes.aggregators if ("agg", tor) not in spent})
            return out

        return bound, len(spec.bucket_bytes) * self.options.latency_s, Demand(weights, alone / unit), alone / unit
