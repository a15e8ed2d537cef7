"""Bandwidth bound of a step-synchronous collective on a routed fabric.

A step of a collective (:func:`jobs.patterns.pattern`) cannot end before its most loaded directed
link has carried its bytes (on the wire with ``mtu``) along the controller's routes
(:func:`topo.routing.ecmp_path`), so ``bound = sum over steps of max over links (bytes * 8 /
rate)``: the lower bound the emulation's measured times are compared with. :func:`job_bound_s` sums
it over a job's buckets; :func:`job_links` is the set of directed links a job loads.

The bound and what it ignores: ``docs/fidelity.md`` (Jobs against their contention-free bound).
Cost: O(steps * transfers * path length).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Sequence

from common.units import BITS_PER_BYTE, MEGA, wire_bytes
from jobs.patterns import Transfer, replay_pattern
from topo.routing import ecmp_path, path_links


def link_loads(g, machines_by_rank: Sequence[str], step, mtu: int | None = None,
               path: Callable[[str, str], Sequence[str]] | None = None) -> dict[tuple[str, str], int]:
    """Bytes each directed link carries in one step (same-machine transfers excluded): the
    payload, or with ``mtu`` the bytes on the wire (:func:`common.units.wire_bytes`). ``path``:
    the routing function's paths, e.g. a kept :class:`topo.routing.EcmpRoutes`'s (default:
    :func:`topo.routing.ecmp_path`)."""
    path = path or functools.partial(ecmp_path, g)
    loads: dict[tuple[str, str], int] = defaultdict(int)
    for src, dst, nbytes in step:
        a, b = machines_by_rank[src], machines_by_rank[dst]
        if a == b or nbytes == 0:
            continue
        cost = wire_bytes(nbytes, mtu) if mtu else nbytes
        for link in path_links(path(a, b)):
            loads[link] += cost
    return loads


def step_bound_s(g, rate_mbps: dict[tuple[str, str], float], machines_by_rank: Sequence[str], steps,
                 mtu: int | None = None) -> float:
    """The step-synchronous bandwidth bound in seconds.

    Args:
        g: topology graph.
        rate_mbps: rate of each link, keyed by either orientation ``(u, v)``.
        machines_by_rank: machine of each rank.
        steps: the collective's steps, as from ``jobs.patterns.pattern``.
        mtu: count bytes on the wire at this MTU (None: payload only).
    """
    total = 0.0
    for step in steps:
        worst = 0.0
        for (u, v), nbytes in link_loads(g, machines_by_rank, step, mtu).items():
            rate = rate_mbps.get((u, v)) or rate_mbps[(v, u)]
            worst = max(worst, nbytes * BITS_PER_BYTE / (rate * MEGA))
        total += worst
    return total


def link_bound_s(g, rate_mbps: dict[tuple[str, str], float], machines_by_rank: Sequence[str], steps,
                 mtu: int | None = None) -> float:
    """The link-load lower bound in seconds: the busiest directed link's total bytes over its rate.

    Unlike :func:`step_bound_s` it lets transfers of different steps overlap, as they do when
    pairs progress independently (halving-doubling), so it is a true lower bound; for a ring,
    whose steps are chained, the two agree when no two flows share a link.
    """
    totals: dict[tuple[str, str], int] = defaultdict(int)
    for step in steps:
        for link, nbytes in link_loads(g, machines_by_rank, step, mtu).items():
            totals[link] += nbytes
    worst = 0.0
    for (u, v), nbytes in totals.items():
        rate = rate_mbps.get((u, v)) or rate_mbps[(v, u)]
        worst = max(worst, nbytes * BITS_PER_BYTE / (rate * MEGA))
    return worst


def job_steps(collective: str, p: int, bucket_bytes: Sequence[int]) -> list[list[list[Transfer]]]:
    """The steps of one iteration of a job: one :func:`jobs.patterns.replay_pattern` per bucket.

    Args:
        collective: collective name (``ring``, ``hd`` or ``gloo``, the last as its replay model).
        p: number of ranks.
        bucket_bytes: size of each gradient bucket, bytes, in the order they are reduced.

    Returns:
        One list of steps per bucket.
    """
    return [replay_pattern(collective, p, size_bytes) for size_bytes in bucket_bytes]


def job_links(g, machines_by_rank: Sequence[str], collective: str,
              bucket_bytes: Sequence[int]) -> frozenset[tuple[str, str]]:
    """Every directed link ``(u, v)`` that some cross-machine transfer of the job crosses.

    Empty when no transfer leaves its machine (all ranks on one machine, or nothing to send).
    """
    links: set[tuple[str, str]] = set()
    for steps in job_steps(collective, len(machines_by_rank), bucket_bytes):
        for step in steps:
            links.update(link_loads(g, machines_by_rank, step))
    return frozenset(links)


def chained_schedule(g, rate_mbps: dict[tuple[str, str], float], machines_by_rank: Sequence[str], steps,
                     mtu: int | None = None, path: Callable[[str, str], Sequence[str]] | None = None
                     ) -> tuple[list[float], list[tuple[int, float, float, tuple[tuple[str, str], ...]]]]:
    """The schedule of :func:`chained_bound_s`: when each rank finishes its last step, and every
    transfer between machines as ``(step index, start, end, its directed links)``."""
    path = path or functools.partial(ecmp_path, g)
    done = [0.0] * len(machines_by_rank)
    transfers = []
    for t, step in enumerate(steps):
        loads = link_loads(g, machines_by_rank, step, mtu, path)
        finished = list(done)
        for src, dst, nbytes in step:
            a, b = machines_by_rank[src], machines_by_rank[dst]
            length = 0.0
            links: tuple[tuple[str, str], ...] = ()
            if a != b and nbytes:
                links = tuple(path_links(path(a, b)))
                for u, v in links:
                    rate = rate_mbps.get((u, v)) or rate_mbps[(v, u)]
                    length = max(length, loads[(u, v)] * BITS_PER_BYTE / (rate * MEGA))
                transfers.append((t, done[src], done[src] + length, links))
            end = done[src] + length
            finished[src] = max(finished[src], end)
            finished[dst] = max(finished[dst], end)
        done = finished
    return done, transfers


def chained_bound_s(g, rate_mbps: dict[tuple[str, str], float], machines_by_rank: Sequence[str], steps,
                    mtu: int | None = None, path: Callable[[str, str], Sequence[str]] | None = None) -> float:
    """The bandwidth bound of a collective whose ranks each wait for their own previous step.

    Every rank runs its steps in order, as the collectives do (a rank's step ``t + 1`` starts
    when its sends and receptions of step ``t`` are done), but ranks do not wait for each
    other beyond that. A transfer of step ``t`` starts when its sender finished step ``t - 1``
    and lasts the bytes of the step on its path's most loaded link over that link's rate
    (transfers of one step that share a link share its rate); a rank finishes step ``t`` when
    its own transfers of the step have ended. The bound is when the last rank finishes.

    For a ring, whose steps are chained around the ring, this equals :func:`step_bound_s`
    when no two transfers of a step share a link. For halving-doubling it charges ECMP
    collisions within a step (two pairs' flows on one link) to the colliding pairs only, and
    lets other pairs move on, which :func:`step_bound_s` (a barrier per step) does not and
    :func:`link_bound_s` (every step overlapping every other) ignores: measured here on a
    k=4 fat-tree, halving-doubling over 8 spread machines took 2.0 times its link-load bound.
    A rank that moves on may send while another rank's transfer of the step before is still on
    the same link; this bound serves the two one after the other, which a link shared fairly
    does not (:func:`job_collisions` counts such meetings). Cost: O(steps * transfers * path
    length). ``path``: as :func:`link_loads`.
    """
    done, _ = chained_schedule(g, rate_mbps, machines_by_rank, steps, mtu, path)
    return max(done, default=0.0)


MEETING_SHARE = 0.01
"""Least overlap, as a share of the shorter transfer, for two transfers of different steps to meet:
chunks a few bytes apart in size leave one rank a few microseconds ahead, which is no meeting."""


def _meetings(transfers) -> int:
    """In one collective's chained schedule (:func:`chained_schedule`'s transfers): the (step,
    directed link) pairs that carry two transfers of the step or more, plus the directed links on
    which transfers of different steps meet (one starts while the other is still on the link, for
    at least :data:`MEETING_SHARE` of the shorter one)."""
    per_step: dict[tuple[int, tuple[str, str]], int] = defaultdict(int)
    by_link: dict[tuple[str, str], list[tuple[float, float, int]]] = defaultdict(list)
    for t, start, end, links in transfers:
        for link in links:
            per_step[(t, link)] += 1
            if end > start:
                by_link[link].append((start, end, t))
    count = sum(1 for n in per_step.values() if n > 1)
    for spans in by_link.values():
        spans.sort()
        if any(t != u and min(end, later_end) - later >= MEETING_SHARE * min(end - start, later_end - later)
               for i, (start, end, t) in enumerate(spans) for later, later_end, u in spans[i + 1:] if later < end):
            count += 1
    return count


def job_collisions(g, rate_mbps: dict[tuple[str, str], float], machines_by_rank: Sequence[str], collective: str,
                   bucket_bytes: Sequence[int], mtu: int | None = None) -> int:
    """How many times two of the job's own transfers meet on a directed link in one iteration (0
    for a job whose every transfer has its links to itself): (step, link) pairs that carry two or
    more transfers of one step (ECMP collisions within the job), plus the links on which, in the
    schedule of :func:`chained_bound_s`, a rank's transfer starts while another rank's transfer of
    another step is still on it (a rank whose step was on its own machine sending its next step
    early, e.g. halving-doubling with three of four ranks on one machine). Either way the links
    are shared and :func:`job_bound_s` is not the job's time. Cost: that of :func:`job_bound_s`."""
    return sum(_meetings(chained_schedule(g, rate_mbps, machines_by_rank, steps, mtu)[1])
               for steps in job_steps(collective, len(machines_by_rank), bucket_bytes))


def largest_transfer_bytes(machines_by_rank: Sequence[str], collective: str, bucket_bytes: Sequence[int]) -> int:
    """The largest transfer between ranks on different machines in one iteration (0: none)."""
    return max((b for steps in job_steps(collective, len(machines_by_rank), bucket_bytes) for step in steps
                for s, d, b in step if machines_by_rank[s] != machines_by_rank[d]), default=0)


def job_bound_s(g, rate_mbps: dict[tuple[str, str], float], machines_by_rank: Sequence[str], collective: str,
                bucket_bytes: Sequence[int], mtu: int | None = None,
                path: Callable[[str, str], Sequence[str]] | None = None) -> float:
    """The contention-free bound of one iteration's communication, in seconds.

    The sum over buckets (an iteration allreduces them one after another) of
    :func:`chained_bound_s`: each rank runs its steps in order, colliding transfers of a
    step share their link. ``gloo`` is modelled as the mirrored ring
    (:func:`jobs.patterns.replay_pattern`).

    The time is in the time base of the inputs: emulated rates with emulated bytes give the
    emulated time; rates and bytes both divided by the scale factor (``common.units``) give
    the same, paper-scale, time.

    Args:
        g: topology graph.
        rate_mbps: rate of each link in Mbit/s, keyed by either orientation ``(u, v)``.
        machines_by_rank: machine of each rank.
        collective: collective name (``ring``, ``hd`` or ``gloo``).
        bucket_bytes: size of each gradient bucket, bytes.
        mtu: count bytes on the wire at this MTU (None: payload only).
        path: the routing function's paths (default: :func:`topo.routing.ecmp_path`; a kept
            :class:`topo.routing.EcmpRoutes`'s ``path`` routes many transfers with one BFS per
            destination).

    Raises:
        JobError: an unknown collective, or a bucket size the pattern rejects.
    """
    return float(sum(chained_bound_s(g, rate_mbps, machines_by_rank, steps, mtu, path)
                     for steps in job_steps(collective, len(machines_by_rank), bucket_bytes)))
