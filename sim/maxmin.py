"""Max-min fair rates of flows sharing links, by progressive filling (water-filling).

:func:`maxmin_rates` is the classic allocation (Bertsekas and Gallager, *Data Networks*, 2nd ed.,
1992, §6.5.2); :func:`fill_levels` the job-coupled, weighted version with in-network aggregators,
NetPack's Algorithm 1 (``docs/resolutions.md`` NetPack §2.3), and :func:`maxmin_levels` it without
aggregators. Deterministic (sorted order), tolerant of float ties (``EPS``); O(I + (L + R) log L)
for I = sum of path lengths, L links, R lazy heap refreshes.

The algorithm, its float tolerance and cost in full: ``docs/simulator-engines.md``. Pure: standard
library only. Rates come back in the unit of the capacities.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TypeVar

EPS = 1e-9
"""Relative tolerance under which two fair shares count as equal."""

FlowId = TypeVar("FlowId", bound=Hashable)
Link = TypeVar("Link", bound=Hashable)


def maxmin_rates(flow_links: Mapping[FlowId, Sequence[Link]],
                 capacity: Mapping[Link, float]) -> dict[FlowId, float]:
    """The max-min fair rate of every flow.

    Args:
        flow_links: the links each flow crosses (a link listed twice counts once). A flow
            with no link is limited by nothing and gets ``math.inf``.
        capacity: capacity of every link some flow crosses, >= 0, in any rate unit.

    Returns:
        Rate of every flow of ``flow_links``, in the unit of ``capacity``; the rates of the
        flows crossing a link sum to at most its capacity (up to the tolerance ``EPS``).

    Raises:
        ValueError: a link has no capacity, or a negative or non-finite one.
    """
    flows = sorted(flow_links)
    links = sorted({link for flow in flows for link in flow_links[flow]})
    index = {link: i for i, link in enumerate(links)}
    caps = []
    for link in links:
        if link not in capacity:
            raise ValueError(f"link {link!r} carries flows but has no capacity")
        cap = capacity[link]
        if not (cap >= 0.0 and math.isfinite(cap)):
            raise ValueError(f"link {link!r}: capacity must be finite and >= 0, got {cap!r}")
        caps.append(float(cap))
    paths = [sorted({index[link] for link in flow_links[flow]}) for flow in flows]
    rates = maxmin_indexed(paths, caps)
    return {flow: rate for flow, rate in zip(flows, rates, strict=True)}


def maxmin_indexed(paths: Sequence[Sequence[int]], capacity: Sequence[float]) -> list[float]:
    """:func:`maxmin_rates` over integer ids: the core, for callers that keep links numbered.

    Ties between equal shares are broken by link id, so for results independent of input order
    number the links in an order of their own (e.g. sorted names) and list the flows in one too.

    Args:
        paths: for each flow, the ids of the distinct links it crosses (indices into ``capacity``).
        capacity: capacity of each link, >= 0 and finite (not checked here: this is the inner
            loop of a simulation whose capacities were checked once).

    Returns:
        The rate of each flow, in the order of ``paths`` (``math.inf`` for an empty path).
    """
    rates = [math.inf] * len(paths)
    flows_on: dict[int, list[int]] = {}
    for f, path in enumerate(paths):
        for link in path:
            if link in flows_on:
                flows_on[link].append(f)
            else:
                flows_on[link] = [f]
    left: dict[int, float] = {}
    unfrozen: dict[int, int] = {}
    heap = []
    for link, flows in flows_on.items():
        cap = capacity[link]
        left[link], unfrozen[link] = cap, len(flows)
        heap.append((cap / len(flows), link))
    heapq.heapify(heap)
    frozen = [False] * len(paths)
    # Heap keys are lower bounds of the links' shares (a share only grows as flows freeze below
    # it), so an entry is refreshed when popped rather than on every change: a popped link whose
    # share still equals its key is the next bottleneck.
    while heap:
        key, link = heapq.heappop(heap)
        n = unfrozen[link]
        if not n:
            continue
        level = max(0.0, left[link]) / n
        if level > key:
            heapq.heappush(heap, (level, link))
            continue
        full = [link]
        limit = level * (1.0 + EPS)
        while heap and heap[0][0] <= limit:
            _, other = heapq.heappop(heap)
            n = unfrozen[other]
            if not n:
                continue
            share = max(0.0, left[other]) / n
            if share <= limit:
                full.append(other)
            else:
                heapq.heappush(heap, (share, other))
        for bottleneck in full:
            for f in flows_on[bottleneck]:
                if frozen[f]:
                    continue
                frozen[f] = True
                rates[f] = level
                for hop in paths[f]:
                    left[hop] -= level
                    unfrozen[hop] -= 1
    return rates


Pairs = Sequence[tuple[int, float]]
"""A job's ``(resource id, weight)`` pairs, each resource at most once, weights > 0."""


@dataclasses.dataclass(frozen=True)
class AggregatedDemand:
    """A job whose traffic is summed at aggregators with a limited throughput (in-network
    aggregation's PAT, ``docs/resolutions.md`` NetPack §1.6), for :func:`fill_levels`.

    Attributes:
        aggregators: ``(aggregator id, weight)``: the job's use of each aggregator per unit level
            while that aggregator still has throughput left (its per-worker rate: §1.6, a slot
            takes packet k from every worker, so the use does not depend on the fan-in).
        links: spilled aggregators -> the job's link weights per unit level *above* the levels at
            which they ran out (an aggregator that ran out passes its children's traffic on
            unaggregated, so its increments cost more above it). Called with ``frozenset()``
            first, then each time one of the job's aggregators runs out.
        cap: the job's highest level, if below the fill's ``cap_level`` (its rate alone, where
            levels are rates: NetPack's water-filling raises every job's per-worker rate by the
            same step, each up to what its links allow).
    """

    aggregators: Pairs
    links: Callable[[frozenset[int]], Pairs]
    cap: float | None = None


@dataclasses.dataclass(frozen=True)
class Fill:
    """The result of :func:`fill_levels`.

    Attributes:
        levels: each job's level.
        spilled: per job, aggregator id -> the level at which it ran out for the job (absent:
            never; the job's traffic was summed there up to its level).
    """

    levels: list[float]
    spilled: list[dict[int, float]]

    def aggregated_fraction(self, job: int, aggregator: int) -> float:
        """The part of the job's rate summed at ``aggregator`` (:func:`aggregated_fraction`)."""
        return aggregated_fraction(self.spilled[job].get(aggregator), self.levels[job])


def aggregated_fraction(spilled_at: float | None, level: float) -> float:
    """The part of a job's rate summed at an aggregator: the level at which the aggregator ran out
    for it over the job's level (1 where it never did; NetPack's aggregation ratio, §1.6)."""
    return 1.0 if spilled_at is None or level <= 0 else min(1.0, spilled_at / level)


def maxmin_levels(demands: Sequence[Pairs], capacity: Sequence[float], cap_level: float = 1.0) -> list[float]:
    """Weighted progressive filling: the max-min fair *level* of every job, capped at ``cap_level``.

    Job ``j`` at level ``x`` loads each of its links ``l`` with ``w * x`` for its pairs
    ``(l, w)`` of ``demands[j]`` (a job is the group of its flows, all progressing at the one
    level). Every unfrozen job's level rises at the same pace; when a link is full the jobs
    crossing it freeze at the level reached; jobs still unfrozen at ``cap_level`` stop there.
    This is the job-coupled water-filling of NetPack's Algorithm 1 (``docs/resolutions.md`` NetPack
    §2.3) without in-network aggregation, where a job's weight on a link is its flow count; here
    it is its rate on that link at full speed, so that a level of 1 is the job alone.

    Args:
        demands: for each job, ``(link id, weight)`` pairs, each link at most once, weights > 0.
        capacity: capacity of each link, >= 0 and finite, in the unit of the weights.
        cap_level: the highest level, > 0.

    Returns:
        The level of each job, in the order of ``demands`` (``cap_level`` for a job with no
        link); the weighted loads on a link sum to at most its capacity (up to ``EPS``).
    """
    return fill_levels(demands, capacity, (), cap_level).levels


def fill_levels(demands: Sequence[Pairs | AggregatedDemand], capacity: Sequence[float],
                aggregator_capacity: Sequence[float] = (), cap_level: float = 1.0) -> Fill:
    """:func:`maxmin_levels` with aggregators: NetPack's INA-aware water-filling (§2.3, Algorithm 1).

    Aggregators are resources like links, with one difference: one that is full freezes nobody.
    From the level at which it runs out, its jobs' further increments pass it unaggregated, so
    their weights change to ``links(spilled)`` (of :class:`AggregatedDemand`); a job's load on a
    resource is then its old weight up to that level plus its new weight above it. A job whose
    new weights cross a full link freezes at once. Plain jobs (pairs) are as in
    :func:`maxmin_levels`. The spec's resolutions apply: an aggregator is charged once per job
    (§6 #7), a saturation is within a relative ``EPS`` (§6 #9), a full link freezes only the jobs
    on it (§6 #10).

    Implementation: a heap of the resources' *shares* (the level at which each fills: capacity
    left over the unfrozen jobs' weight), refreshed lazily as in :func:`maxmin_indexed`; a share
    can also drop (a spill adds weight), so every increase of a resource's weight pushes its new
    share. Levels only rise, so a share below the level reached is taken at that level. Each job
    spills at most once per aggregator: O(I log R) for I = the jobs' pairs over every phase,
    however many links and aggregators there are (capacities are looked up, not copied).

    Args:
        demands: for each job, its pairs (link id, weight) or an :class:`AggregatedDemand`.
        capacity: each link's capacity, >= 0 and finite, in the unit of the weights.
        aggregator_capacity: each aggregator's throughput, >= 0 and finite (0: it sums nothing).
        cap_level: the highest level, > 0.
    """
    n_links = len(capacity)
    n_shared = n_links + len(aggregator_capacity)  # links and aggregators; each capped job's own resource follows
    caps: list[float] = []  # of those own resources

    def cap(r: int) -> float:  # looked up, not copied: a fill may touch few of many links
        if r < n_links:
            return capacity[r]
        return aggregator_capacity[r - n_links] if r < n_shared else caps[r - n_shared]

    weights: list[dict[int, float]] = []
    spilled: list[dict[int, float]] = [{} for _ in demands]
    private: dict[int, int] = {}  # job -> the resource holding it at its own cap (weight 1)
    for j, d in enumerate(demands):
        if isinstance(d, AggregatedDemand):
            if d.cap is not None and d.cap < cap_level:
                private[j] = n_shared + len(caps)
                caps.append(max(0.0, d.cap))
            weights.append(resource_weights(d, frozenset(), n_links, private.get(j)))
        else:
            weights.append(dict(d))
    users: dict[int, dict[int, None]] = {}  # resource -> the jobs that ever loaded it, in order
    left: dict[int, float] = {}  # capacity minus frozen loads minus unfrozen loads below their spills
    weight_left: dict[int, float] = {}  # unfrozen jobs' current weights
    count: dict[int, int] = {}  # unfrozen jobs with a weight on it
    for j, w in enumerate(weights):
        for r, x in w.items():
            users.setdefault(r, {})[j] = None
            weight_left[r] = weight_left.get(r, 0.0) + x
            count[r] = count.get(r, 0) + 1
    for r in users:
        left[r] = cap(r)
    heap = [(left[r] / weight_left[r], r) for r in sorted(users)]
    heapq.heapify(heap)
    levels = [cap_level] * len(demands)
    frozen = [False] * len(demands)
    level = 0.0
    while heap:
        key, r = heapq.heappop(heap)
        if not count[r]:
            continue
        share = max(level, max(0.0, left[r]) / weight_left[r]) if weight_left[r] > 0 else math.inf
        if share > key * (1.0 + EPS):
            heapq.heappush(heap, (share, r))
            continue
        if share >= cap_level:
            break
        level = share
        for j in list(users[r]):
            if frozen[j] or r not in weights[j]:
                continue
            if not n_links <= r < n_shared:  # a full link (or a job's cap) freezes its jobs
                frozen[j], levels[j] = True, level
                for hop, x in weights[j].items():
                    left[hop] -= x * level
                    weight_left[hop] -= x
                    count[hop] -= 1
            else:  # a spent aggregator: its jobs' increments pass it unaggregated
                spilled[j][r - n_links] = level
                new = resource_weights(demands[j], frozenset(spilled[j]), n_links, private.get(j))
                for hop in sorted(weights[j].keys() | new.keys()):
                    dw = new.get(hop, 0.0) - weights[j].get(hop, 0.0)
                    if not dw:
                        continue
                    if hop not in users:
                        users[hop], left[hop], weight_left[hop], count[hop] = {}, cap(hop), 0.0, 0
                    users[hop][j] = None
                    left[hop] += dw * level
                    weight_left[hop] += dw
                    count[hop] += (hop in new) - (hop in weights[j])
                    if dw > 0 and weight_left[hop] > 0:
                        heapq.heappush(heap, (max(level, max(0.0, left[hop]) / weight_left[hop]), hop))
                weights[j] = new
    return Fill(levels, spilled)


def resource_weights(d: AggregatedDemand, spilled: frozenset[int], n_links: int,
                     private: int | None = None) -> dict[int, float]:
    """A job's resource weights (links, then aggregators offset by ``n_links``, then its cap's
    resource ``private``) with ``spilled`` spent."""
    out = dict(d.links(spilled))
    for a, x in d.aggregators:
        if a not in spilled:
            out[n_links + a] = out.get(n_links + a, 0.0) + x
    if private is not None:
        out[private] = 1.0
    return out
