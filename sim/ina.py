"""In-network aggregation in the fluid simulator: an INA job's streams on its routes (pure).

An INA job (collective ``ina``) runs as the emulator runs it (:mod:`ina.plan`,
:mod:`workers.collectives.ina`): a machine's ranks sum locally first, then each of its machines but
the PS's own streams its gradient to the job's parameter server, one INA packet per its values
per packet (:func:`ina.protocol.frame_bytes` on the wire with ``mtu``, the payload without), and the ToRs
of the job's tree sum the streams they see (:func:`ina.plan.tree_shape`: a leaf is an INA ToR
with two machines or more that is not the PS's, the root is the PS's ToR where it has two
children or more). Each directed link then carries some number of *streams*, each at the job's
per-worker rate (``docs/resolutions.md`` NetPack §1.6):

* a machine's access link carries its own stream;
* above a leaf that aggregates, one stream for the leaf; above one that does not, one per machine;
* the PS's access link carries one stream where the root aggregates, else one per child
  reaching the root (machines and leaves' streams);
* results: ``unicast`` (the emulated PS: one result stream to each machine, on its own route
  back, whatever the switches summed) or ``multicast`` (ATP's switch multicast as NetPack models
  it, §2.2: the results retrace the gradients' streams, so every link carries in both
  directions what the gradients put on it).

An aggregator sums at most its Peak Aggregation Throughput (PAT, §1.6: switch memory as a
rate), shared by the jobs it aggregates, each using its per-worker rate of it. Where it runs
out, its jobs' further rate passes it unaggregated (statistical INA, §1.4): :func:`streams` of a
*spilled* set gives the streams of those increments, and :func:`sim.maxmin.fill_levels` couples
the two resources (NetPack's Algorithm 1 on routed links). Level 1 is the job alone with
aggregators that never run out.

Cost: O(machines x path length) per spilled set.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Mapping, Sequence

from common.errors import JobError
from ina.plan import TreeShape, tree_shape
from ina.protocol import VALUE_BYTES, VALUES_PER_PACKET, InaError, frame_bytes
from sim.maxmin import AggregatedDemand, fill_levels

RESULTS = ("unicast", "multicast")
"""How results come back to the workers (see the module docstring)."""

Link = Hashable
"""A directed link, in the caller's naming (``(u, v)``, or an engine's link id)."""


@dataclasses.dataclass(frozen=True)
class InaSpec:
    """Where an INA job's PS runs and where it may aggregate.

    Attributes:
        ps_host: the machine of its parameter server.
        switches: the switches that may aggregate it (a placement's ``ina_switches``; empty: none).
    """

    ps_host: str
    switches: tuple[str, ...] = ()


def stream_bytes(bucket_bytes: Sequence[int], wire: bool, values_per_packet: int = VALUES_PER_PACKET) -> int:
    """Bytes of one machine's stream per iteration: every bucket in INA packets of
    ``values_per_packet`` values, as frames on the wire (``wire``) or as their values."""
    if not wire:
        return sum(bucket_bytes)
    per_packet = values_per_packet * VALUE_BYTES
    return sum(math.ceil(b / per_packet) * frame_bytes(values_per_packet) for b in bucket_bytes)


@dataclasses.dataclass(frozen=True)
class InaRoutes:
    """An INA job's routes on the fabric: what :func:`streams` counts.

    Attributes:
        shape: the job's aggregation tree (:func:`ina.plan.tree_shape`).
        tor: machine -> its ToR.
        up: each machine but the PS's -> the links of its route to the PS (first its access link,
            last the PS's).
        leaf_up: each leaf -> the links from it to the PS's ToR (its first machine's route).
        down: each machine but the PS's -> the links of the PS's route to it.
        reverse: each link of ``up`` -> the link the other way (multicast results retrace them).
    """

    shape: TreeShape
    tor: Mapping[str, str]
    up: Mapping[str, tuple[Link, ...]]
    leaf_up: Mapping[str, tuple[Link, ...]]
    down: Mapping[str, tuple[Link, ...]]
    reverse: Mapping[Link, Link]

    @property
    def aggregators(self) -> tuple[str, ...]:
        """The ToRs that sum the job: its leaves, then the root where it aggregates."""
        return self.shape.leaves + ((self.shape.ps_tor,) if self.shape.root_aggregates else ())


def ina_routes(g, machines: Sequence[str], spec: InaSpec, path: Callable[[str, str], Sequence[Link]],
               job: str = "INA job", reverse: Callable[[Link], Link] = lambda link: link[::-1]) -> InaRoutes:
    """The routes of a job on ``machines`` (rank order) with ``spec``; ``path(a, b)`` is the
    directed links of the route from machine a to b, ``reverse(link)`` the link the other way
    (default: ``(u, v)`` -> ``(v, u)``).

    Raises:
        JobError: an unknown machine or switch.
    """
    try:
        shape = tree_shape(g, machines, spec.ps_host, spec.switches, job=f"job {job!r}")
    except InaError as e:
        raise JobError(str(e)) from None
    workers = [m for m in shape.machines if m != spec.ps_host]
    tor = {m: t for t, ms in shape.racks.items() for m in ms}
    up = {m: tuple(path(m, spec.ps_host)) for m in workers}
    leaf_up = {t: up[shape.racks[t][0]][1:-1] for t in shape.leaves}
    down = {m: tuple(path(spec.ps_host, m)) for m in workers}
    back = {link: reverse(link) for links in up.values() for link in links}
    return InaRoutes(shape, tor, up, leaf_up, down, back)


def streams(routes: InaRoutes, spilled: frozenset[str], results: str = "unicast") -> dict[Link, int]:
    """Streams on each directed link of the job's increments with the ToRs of ``spilled`` out of
    PAT (see the module docstring); ``frozenset()`` is full aggregation."""
    if results not in RESULTS:
        raise JobError(f"unknown INA results mode {results!r}; valid: {', '.join(RESULTS)}")
    shape = routes.shape
    summing = {t for t in shape.leaves if t not in spilled}
    up: dict[Link, int] = {}

    def add(links, k: int = 1) -> None:
        for link in links:
            up[link] = up.get(link, 0) + k

    at_root = 0
    ps_link = None
    for m, links in routes.up.items():
        ps_link = links[-1]
        if routes.tor[m] in summing:
            add(links[:1])
        else:
            add(links[:-1])
            at_root += 1
    for t in shape.leaves:
        if t in summing:
            add(routes.leaf_up[t])
            at_root += 1
    if ps_link is not None:
        add([ps_link], 1 if shape.root_aggregates and shape.ps_tor not in spilled else at_root)
    out = dict(up)
    if results == "unicast":
        for links in routes.down.values():
            for link in links:
                out[link] = out.get(link, 0) + 1
    else:
        for link, k in up.items():
            back = routes.reverse[link]
            out[back] = out.get(back, 0) + k
    return out


def rate_alone(routes: InaRoutes, capacity: Mapping[Link, float], pat: float = math.inf,
               results: str = "unicast") -> float:
    """An INA job's per-worker rate alone on the fabric, each of its aggregators summing at most ``pat``
    (the unit of ``capacity``: a slot takes one packet of a seq from every worker, so a job uses its
    per-worker rate of it): with full aggregation, its busiest link's capacity over its streams there;
    where that rate is above the PAT, the increments beyond it pass the aggregator unaggregated and
    load the links above it with more streams (:func:`sim.maxmin.fill_levels`, the water-filling the
    fluid engine runs). A PAT at or above the full-aggregation rate leaves it unchanged; a PAT of 0
    is no aggregation at all.

    Raises:
        JobError: a link of the job's routes without a capacity, or an unknown ``results`` mode.
    """
    full = streams(routes, frozenset(), results)
    if not full:
        return math.inf
    names = list(dict.fromkeys(link for links in (*routes.up.values(), *routes.leaf_up.values(),
                                                  *routes.down.values(), routes.reverse.values())
                               for link in links))  # every link a spill can load (:func:`streams`)
    missing = [link for link in names if link not in capacity]
    if missing:
        raise JobError(f"no capacity for link(s) {', '.join(map(str, missing))}")
    alone = min(capacity[link] / k for link, k in full.items())
    aggregators = routes.aggregators
    if not pat < alone or not aggregators:
        return alone
    ids = {link: i for i, link in enumerate(names)}

    def links(spilled: frozenset[int]) -> tuple[tuple[int, float], ...]:
        counts = streams(routes, frozenset(aggregators[a] for a in spilled), results)
        return tuple(sorted((ids[link], float(k)) for link, k in counts.items()))

    demand = AggregatedDemand(tuple((a, 1.0) for a in range(len(aggregators))), links)
    fill = fill_levels([demand], [capacity[link] for link in names], [max(0.0, pat)] * len(aggregators), alone)
    return fill.levels[0]

