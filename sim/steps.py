"""Bandwidth bound of a step-synchronous collective on a routed fabric.

Each step of a collective (``jobs.patterns.pattern``) is a set of concurrent transfers. A
transfer between ranks on the same machine costs nothing on the network; every other one
follows the shared routing function (:func:`topo.routing.ecmp_path`, the path the
controller installs). A step cannot end before its most loaded directed link has carried its
bytes, so

    bound = sum over steps of  max over links  (bytes on the link * 8 / link rate)

This ignores latency, headers and TCP dynamics: it is the lower bound the emulation's
measured times are compared with. Cost: O(steps * transfers * path length).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from common.units import BITS_PER_BYTE, MEGA
from topo.routing import ecmp_path, path_links


def link_loads(g, machines_by_rank: Sequence[str], step) -> dict[tuple[str, str], int]:
    """Bytes each directed link carries in one step (same-machine transfers excluded)."""
    loads: dict[tuple[str, str], int] = defaultdict(int)
    for src, dst, nbytes in step:
        a, b = machines_by_rank[src], machines_by_rank[dst]
        if a == b or nbytes == 0:
            continue
        for link in path_links(ecmp_path(g, a, b)):
            loads[link] += nbytes
    return loads


def step_bound_s(g, rate_mbps: dict[tuple[str, str], float], machines_by_rank: Sequence[str], steps) -> float:
    """The step-synchronous bandwidth bound in seconds.

    Args:
        g: topology graph.
        rate_mbps: rate of each link, keyed by either orientation ``(u, v)``.
        machines_by_rank: machine of each rank.
        steps: the collective's steps, as from ``jobs.patterns.pattern``.
    """
    total = 0.0
    for step in steps:
        worst = 0.0
        for (u, v), nbytes in link_loads(g, machines_by_rank, step).items():
            rate = rate_mbps.get((u, v)) or rate_mbps[(v, u)]
            worst = max(worst, nbytes * BITS_PER_BYTE / (rate * MEGA))
        total += worst
    return total


def link_bound_s(g, rate_mbps: dict[tuple[str, str], float], machines_by_rank: Sequence[str], steps) -> float:
    """The link-load lower bound in seconds: the busiest directed link's total bytes over its rate.

    Unlike :func:`step_bound_s` it lets transfers of different steps overlap, as they do when
    pairs progress independently (halving-doubling), so it is a true lower bound; for a ring,
    whose steps are chained, the two agree when no two flows share a link.
    """
    totals: dict[tuple[str, str], int] = defaultdict(int)
    for step in steps:
        for link, nbytes in link_loads(g, machines_by_rank, step).items():
            totals[link] += nbytes
    worst = 0.0
    for (u, v), nbytes in totals.items():
        rate = rate_mbps.get((u, v)) or rate_mbps[(v, u)]
        worst = max(worst, nbytes * BITS_PER_BYTE / (rate * MEGA))
    return worst
