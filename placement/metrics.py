"""Pure measures of placements and of cluster occupancy.

Placement measures take one :class:`Placement` and, where needed, the cluster view as it
was *before* the placement was applied. Cluster measures take a view of the cluster at
any moment. None of them changes anything.
"""

from __future__ import annotations

from collections import Counter

from placement.base import ClusterView, Placement


def machines_used(placement: Placement) -> int:
    """Number of distinct machines the placement's workers run on."""
    return len(placement.machines)


def idle_machines_consumed(placement: Placement, view: ClusterView) -> int:
    """Machines used by ``placement`` that were fully idle in ``view`` (taken before applying it)."""
    return sum(1 for m in placement.machines if view.is_idle(m))


def cross_machine_pairs(placement: Placement) -> int:
    """Unordered pairs of workers on different machines.

    ``n * (n - 1) / 2`` minus the pairs that share a machine; 0 for a single-machine job.
    """
    n = len(placement.slots)
    same = sum(c * (c - 1) // 2 for c in Counter(s.machine for s in placement.slots).values())
    return n * (n - 1) // 2 - same


def used_machines(view: ClusterView) -> int:
    """Machines with at least one GPU in use. O(1): the cluster keeps the count."""
    return view.machines_in_use


def fragmentation(view: ClusterView) -> int:
    """Partially used machines: some GPU in use and some GPU free. O(1): the cluster keeps the count."""
    return view.partly_used_machines


def cross_machine_traffic_bytes(placement: Placement, steps) -> int:
    """Cross-machine traffic of one collective under a placement, in the Titan paper's accounting.

    Per step, each rank pair on different machines counts once, at the larger of its two
    directions: a symmetric exchange counts the bytes each side sends, a one-way transfer its
    bytes (docs/resolutions.md Titan §1.3, "accounting convention").

    Args:
        placement: rank ``r`` runs on ``placement.slots[r].machine``.
        steps: the collective's steps, as from ``jobs.patterns.pattern``.
    """
    machine = [s.machine for s in placement.slots]
    total = 0
    for step in steps:
        pair: dict[tuple[int, int], int] = {}
        for src, dst, nbytes in step:
            if machine[src] != machine[dst]:
                key = (min(src, dst), max(src, dst))
                pair[key] = max(pair.get(key, 0), nbytes)
        total += sum(pair.values())
    return total
