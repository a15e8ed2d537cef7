"""What one iteration of a job costs the fluid engine (:class:`sim.fluid.FluidEngine`): its
contention-free communication bound, its latency and its demand on each link (and, for an INA job,
on each aggregator) at full speed, computed over memoised routes, collective patterns and bucket
shapes.

The bound is :func:`jobs.steps.job_bound_s`'s; INA jobs' costs are :mod:`sim.ina`'s. The model and
its cost per event: ``docs/simulator-engines.md``.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Mapping, Sequence

from common.errors import JobError, TopologyError
from common.units import wire_bytes
from jobs.collective import collective_of
from jobs.patterns import replay_pattern
from sim.flowsim import SimJob
from sim.ina import ina_routes, stream_bytes, streams
from sim.maxmin import AggregatedDemand
from topo.routing import EcmpRoutes, path_links

MEMO_BUCKET_SHAPES = 4096
"""Bucket costs kept per shape (:meth:`IterationCosts._bucket_cost`), least recently used dropped first."""

MEMO_PATTERNS = 256
"""Collective patterns kept (a 64-rank ring's is 8,064 transfers), least recently used dropped first."""


class IterationCosts:
    """The costs of one iteration of the jobs of one fabric, each distinct placement's kept.

    Args:
        g: topology graph; routes are :func:`topo.routing.ecmp_path` (:class:`topo.routing.EcmpRoutes`).
        link_names: the directed links, a link's id its index (:func:`sim.components.directed_links`).
        capacity: every link's capacity, bytes/s, by id (0: no rate).
        aggregator_names: the switches that may aggregate INA jobs, an aggregator's id its index.
        options: the engine's :class:`sim.flowsim.SimOptions` (``mtu``, ``latency_s``, INA's).

    Attributes:
        unit_rate: INA jobs' level unit, bytes/s: the fabric's fastest link.
    """

    def __init__(self, g, link_names: Sequence[tuple[str, str]], capacity: Sequence[float],
                 aggregator_names: Sequence[str], options):
        self.g, self.link_names, self.capacity, self.aggregator_names, self.options = (
            g, link_names, capacity, aggregator_names, options)
        self.link_id = {link: i for i, link in enumerate(link_names)}
        self.aggregator_id = {name: i for i, name in enumerate(aggregator_names)}
        self.unit_rate = max((c for c in capacity if c > 0), default=1.0)
        self._routes = EcmpRoutes(g)
        self._paths: dict[tuple[str, str], tuple[int, ...]] = {}
        self._costs: dict[tuple, tuple[float, float, tuple[tuple[int, float], ...] | AggregatedDemand]] = {}
        self._patterns: collections.OrderedDict = collections.OrderedDict()  # (collective, p, size) -> steps
        self._pairs: dict[tuple[str, int, int], tuple[tuple[int, int], ...]] = {}  # the same -> rank pairs
        self._shapes: collections.OrderedDict = collections.OrderedDict()  # bucket shape -> its cost

    def of(self, spec: SimJob) -> tuple[float, float, tuple[tuple[int, float], ...] | AggregatedDemand]:
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
            machine_no: dict[str, int] = {}
            ranks = tuple(machine_no.setdefault(m, len(machine_no)) for m in machines)
            numbered: dict = {}  # this placement's routes, numbered once for the sizes that share rank pairs
            per_size = {size: self._bucket_cost(spec, size, ranks, numbered) for size in sorted(set(spec.bucket_bytes))}
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
        fabric's fastest link (:attr:`unit_rate`), the same unit for every INA job, so that INA
        jobs share links and PAT as NetPack's Algorithm 1 has them (equal per-worker rates, each
        up to its own, §2.3); its demand weighs each stream and each aggregator's use with that
        unit and caps it at its rate alone. Latency: one per bucket (its last packet round-trips)."""
        if spec.ina is None:
            raise JobError(f"job {spec.name!r}: an INA job needs its PS host and INA switches (SimJob.ina)")
        for s in spec.ina.switches:
            if s not in self.aggregator_id:
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
        aggregator, unit = self.aggregator_names, self.unit_rate

        @functools.lru_cache(maxsize=None)
        def links(spilled: frozenset[int]) -> tuple[tuple[int, float], ...]:
            counts = streams(routes, frozenset(aggregator[a] for a in spilled), results)
            return tuple((i, k * unit) for i, k in sorted(counts.items()))

        aggregators = tuple((self.aggregator_id[t], unit) for t in routes.aggregators)
        demand = AggregatedDemand(aggregators, links, cap=per_stream / unit)
        return bound, len(spec.bucket_bytes) * self.options.latency_s, demand

    def _bucket_cost(self, spec: SimJob, size: int, ranks: tuple[int, ...],
                     numbered: dict) -> tuple[float, int, dict[int, float]]:
        """One allreduce of ``size`` bytes: its chained bound (:func:`jobs.steps.chained_bound_s`), the
        steps with a cross-machine transfer, and the bytes on each link.

        These depend on the placement through its *shape* only: which ranks share a machine
        (``ranks``, machines numbered by first appearance), which links (up to their ids) each rank
        pair's route crosses, and those links' rates. Links are numbered by first appearance over
        the pairs' routes (``numbered`` keeps them by rank pairs for the placement's other sizes),
        and the cost of a shape, in those numbers, is kept for the next placement of that shape."""
        machines = spec.machines_by_rank
        pairs = self._rank_pairs(spec.collective, len(machines), size)
        placed = numbered.get(pairs)
        if placed is None:
            link_no: dict[int, int] = {}
            routes = {}
            for src, dst in pairs:
                if ranks[src] != ranks[dst]:
                    routes[src, dst] = tuple(link_no.setdefault(i, len(link_no))
                                             for i in self._route(spec.name, machines[src], machines[dst]))
            links = list(link_no)
            placed = numbered[pairs] = (links, routes, tuple(routes.values()), tuple(self.capacity[i] for i in links))
        links, routes, routed, capacity = placed
        shape = (spec.collective, size, ranks, routed, capacity)
        cost = self._shapes.get(shape)
        if cost is None:
            cost = self._shapes[shape] = self._shape_cost(spec.collective, size, ranks, routes, capacity)
            if len(self._shapes) > MEMO_BUCKET_SHAPES:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(shape)
        bound, crossing, loads = cost
        return bound, crossing, {links[n]: nbytes for n, nbytes in loads.items()}

    def _shape_cost(self, collective: str, size: int, ranks: tuple[int, ...], routes: Mapping[tuple[int, int], tuple],
                    capacity: Sequence[float]) -> tuple[float, int, dict[int, float]]:
        """:meth:`_bucket_cost` of a shape: ``ranks`` the machine number of each rank, ``routes`` the
        link numbers of each cross-machine rank pair's route, ``capacity`` each link number's rate.

        Per step: every transfer's bytes on its links, then each transfer's length (its busiest
        link's bytes over rate) ends it after its sender's last step; a transfer in memory takes
        none, and ends its receiver's step no earlier than its sender's."""
        mtu = self.options.mtu
        on_wire: dict[int, float] = {}  # a transfer's bytes -> on the wire
        done = [0.0] * len(ranks)
        total: dict[int, float] = {}
        crossing = 0
        for step in self._pattern(collective, len(ranks), size):
            step_loads: dict[int, float] = {}
            sent = []  # (src, dst, route) of the step's transfers, route () in memory
            for src, dst, nbytes in step:
                if ranks[src] == ranks[dst] or nbytes == 0:
                    sent.append((src, dst, ()))
                    continue
                path = routes[src, dst]
                sent.append((src, dst, path))
                cost = on_wire.get(nbytes)
                if cost is None:
                    cost = on_wire[nbytes] = wire_bytes(nbytes, mtu) if mtu else nbytes
                for i in path:
                    step_loads[i] = step_loads.get(i, 0.0) + cost
            if step_loads:
                crossing += 1
            finished = list(done)
            for src, dst, path in sent:
                end = done[src]
                if path:
                    length = step_loads[path[0]] / capacity[path[0]]
                    for i in path[1:]:
                        x = step_loads[i] / capacity[i]
                        if x > length:
                            length = x
                    end += length
                    if end > finished[src]:
                        finished[src] = end
                if end > finished[dst]:
                    finished[dst] = end
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
