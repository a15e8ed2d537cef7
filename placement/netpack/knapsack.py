"""NetPack's two knapsacks: which jobs of a batch to place (spec §3.2) and which servers a job's
workers take (§3.5, the two-dimensional DP over largest flow count and GPUs).

Both are pure and deterministic: items are considered in the order given, and among plans of
equal value the one found first is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

NEG = float("-inf")


def select_jobs(weights: Sequence[int], values: Sequence[float], capacity: int) -> list[int]:
    """The 0/1 knapsack of a batch (§3.2, Step ❶): the indices of the jobs that maximise the total
    value within ``capacity`` GPUs (the free GPUs), in index order. O(len(weights) × capacity).

    Among subsets of equal value, earlier jobs are preferred (a later job displaces an earlier
    choice only for strictly more value).
    """
    capacity = max(0, min(int(capacity), sum(w for w in weights if w > 0)))  # more room than weight changes nothing
    best = [0.0] * (capacity + 1)
    took: list[list[bool]] = []
    for w, v in zip(weights, values, strict=True):
        row = [False] * (capacity + 1)
        if 0 < w <= capacity:
            for c in range(capacity, w - 1, -1):
                if best[c - w] + v > best[c]:
                    best[c] = best[c - w] + v
                    row[c] = True
        took.append(row)
    chosen, c = [], capacity
    for i in range(len(took) - 1, -1, -1):
        if took[i][c]:
            chosen.append(i)
            c -= weights[i]
    return sorted(chosen)


@dataclasses.dataclass(frozen=True)
class ServerItem:
    """A server as an item of the worker DP: its free GPUs (weight), value and flows."""

    name: str
    free: int
    value: float
    flows: int


@dataclasses.dataclass(frozen=True)
class WorkerPlan:
    """A candidate worker plan: servers taken all-or-none giving ``gpus`` GPUs, whose largest
    flow count is ``flows``, of total value ``value``."""

    flows: int
    gpus: int
    value: float
    servers: tuple[str, ...]


def worker_plans(items: Sequence[ServerItem], need: int, per_server: int) -> list[WorkerPlan]:
    """The 2-D knapsack DP (§3.5, the spec's clarified pseudocode): for every largest flow count
    f and GPU total g in ``[need, need + per_server]``, the best-valued set of servers taken
    all-or-none. ``V`` starts at minus infinity except ``V[0][0] = 0`` (§6 #16: a zero start would
    count partial plans). Servers without free GPUs are skipped.

    Returns:
        Every reachable ``(f, g)`` plan with ``need <= g <= need + per_server``, by (f, g).
        O(len(items) × F × (need + per_server)), F the largest flow count.
    """
    top = need + per_server
    states: dict[tuple[int, int], tuple[float, tuple[str, ...]]] = {(0, 0): (0.0, ())}
    for s in items:
        if s.free <= 0:
            continue
        for (f, g), (v, servers) in list(states.items()):
            ng = g + s.free
            if ng > top:
                continue
            key = (max(f, s.flows), ng)
            c = v + s.value
            if c > states.get(key, (NEG, ()))[0]:
                states[key] = (c, servers + (s.name,))
    return [WorkerPlan(f, g, v, servers) for (f, g), (v, servers) in sorted(states.items()) if need <= g <= top]
