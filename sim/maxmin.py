"""Max-min fair rates of flows sharing links, by progressive filling (water-filling).

Every flow crosses a set of links; every link has a capacity. Progressive filling raises the
rate of every unfrozen flow at the same pace; when a link is full, the flows crossing it are
frozen at the rate they reached. The result is the max-min fair allocation: no flow's rate can
grow without shrinking the rate of a flow that has no more (Bertsekas and Gallager, *Data
Networks*, 2nd ed., 1992, §6.5.2).

Implementation: each link's *fair share* is its unused capacity over its number of unfrozen
flows. The link with the smallest share is the next to fill; its share is the level every
unfrozen flow has reached, so its unfrozen flows are frozen at that level, which lowers the
unused capacity and the flow count of the other links they cross (and can only raise their
share). A heap of shares, refreshed lazily when a stale entry comes to the top, finds the
next link.

Float tolerance: links whose shares are within a relative ``EPS`` (1e-9) of the lowest fill
together, at the lowest share, so that links that tie in exact arithmetic saturate in one
round whatever the rounding of the capacities left.

Determinism: flows and links are visited in sorted order (flow ids and links must be mutually
comparable, e.g. tuples of strings and ints), so the result does not depend on the order of
the input mappings.

Complexity: O(I + (L + R) log L) for I = sum of path lengths over flows, L links and R heap
refreshes (R <= I): every freeze updates the links of one flow once, and a link's entry is
re-pushed only when it reaches the top of the heap stale. :func:`maxmin_rates` adds the
sorting of flows and links, O(F log F + I log L).

Pure: standard library only. Rates come back in the unit of the capacities.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Mapping, Sequence
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


def maxmin_levels(demands: Sequence[Sequence[tuple[int, float]]], capacity: Sequence[float],
                  cap_level: float = 1.0) -> list[float]:
    """Weighted progressive filling: the max-min fair *level* of every job, capped at ``cap_level``.

    Job ``j`` at level ``x`` loads each of its links ``l`` with ``w * x`` for its pairs
    ``(l, w)`` of ``demands[j]`` (a job is the group of its flows, all progressing at the one
    level). Every unfrozen job's level rises at the same pace; when a link is full the jobs
    crossing it freeze at the level reached; jobs still unfrozen at ``cap_level`` stop there.
    This is the job-coupled water-filling of NetPack's Algorithm 1 (``shared/specs/netpack.md``
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
    levels = [cap_level] * len(demands)
    jobs_on: dict[int, list[tuple[int, float]]] = {}
    for j, pairs in enumerate(demands):
        for link, weight in pairs:
            jobs_on.setdefault(link, []).append((j, weight))
    left = {link: capacity[link] for link in jobs_on}
    weight_left = {link: sum(w for _, w in pairs) for link, pairs in jobs_on.items()}
    unfrozen = {link: len(pairs) for link, pairs in jobs_on.items()}
    heap = [(left[link] / weight_left[link], link) for link in jobs_on]
    heapq.heapify(heap)
    frozen = [False] * len(demands)
    # As in maxmin_indexed: a link's share (capacity left over unfrozen weight) only grows as jobs
    # freeze below it, so keys are lower bounds refreshed when popped.
    while heap:
        key, link = heapq.heappop(heap)
        if not unfrozen[link]:
            continue
        level = max(0.0, left[link]) / weight_left[link]
        if level > key * (1.0 + EPS):
            heapq.heappush(heap, (level, link))
            continue
        if level >= cap_level:
            break
        full = [link]
        limit = level * (1.0 + EPS)
        while heap and heap[0][0] <= limit:
            _, other = heapq.heappop(heap)
            if not unfrozen[other]:
                continue
            share = max(0.0, left[other]) / weight_left[other]
            if share <= limit:
                full.append(other)
            else:
                heapq.heappush(heap, (share, other))
        for bottleneck in full:
            for j, _ in jobs_on[bottleneck]:
                if frozen[j]:
                    continue
                frozen[j] = True
                levels[j] = level
                for hop, w in demands[j]:
                    left[hop] -= w * level
                    weight_left[hop] -= w
                    unfrozen[hop] -= 1
    return levels
