"""The step-level engine's network (:class:`sim.flowsim.FlowEngine`): the routed links with their
capacities, the flows in them and when each will end. It recomputes the rates of the flows a change
reaches (:class:`sim.components.Components`) as its link sharing has them (:mod:`sim.sharing`), and
tells its token buckets (:mod:`sim.buckets`) and its ECN estimate (:mod:`sim.ecn_marks`) of every
flow's entry, rates and departure.

The model and its cost per event: ``docs/simulator-engines.md``.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Mapping

from common.errors import TopologyError
from common.units import mbps_to_bytes_per_s
from sim.buckets import NoBuckets, TokenBuckets
from sim.components import Components, directed_links
from sim.ecn_marks import EcnMarks, NoMarks
from sim.maxmin import EPS
from sim.sharing import LinkSharing, link_sharing
from topo.routing import EcmpRoutes, path_links


@dataclasses.dataclass(slots=True, eq=False)
class Flow:
    """A cross-machine transfer in the network; ``remaining`` bytes as of time ``t_ref``.

    ``key`` starts with its run's order ``(name, run number)``; ``job`` is the run's index in the engine.
    """

    key: tuple
    job: int
    src: int
    dst: int
    op: int
    step: int
    links: tuple[int, ...]
    size: float
    remaining: float
    t_ref: float = 0.0
    rate: float = 0.0
    version: int = 0
    mark_t: float = 0.0  # with SimOptions.ecn: the time up to which its bytes are counted
    weighed: int = 0  # with SimOptions.mltcp: the reallocations that set its weight (stale re-weighs skip)


class FlowNetwork:
    """The links, the flows in them and their rates.

    Args:
        g: topology graph; routes are :func:`topo.routing.ecmp_path`.
        rate_mbps: rate of each link in Mbit/s, keyed by either orientation (the ``(u, v)`` entry wins
            for direction u -> v).
        options: the engine's :class:`sim.flowsim.SimOptions` (sharing, ECN, token buckets, MTU).
        reweigh: sets a re-weigh of a flow at a time (MLTCP's sharing; the engine's timer).
    """

    def __init__(self, g, rate_mbps: Mapping, options, reweigh: Callable[[float, Flow], None]):
        self.g, self.rate_mbps = g, rate_mbps
        self.link_names = directed_links(g)
        self.link_id = {link: i for i, link in enumerate(self.link_names)}
        self.capacity: list[float] = [0.0] * len(self.link_names)  # bytes/s, set as paths first cross a link
        self._routes = EcmpRoutes(g)  # ecmp_path's routes, one search per destination rack
        self._paths: dict[tuple[str, str], tuple[int, ...]] = {}
        # How flows share a component's links (max-min, TCP's share, MLTCP), chosen once; the ECN
        # estimate follows the flows and the links' rates as an observer (NoMarks: off).
        self.sharing: LinkSharing = link_sharing(options.mltcp, options.shared_efficiency, self.capacity,
                                                 _conn, reweigh)
        self.marks = (EcnMarks(len(self.link_names), options.mtu, options.ecn_mark_share, self.sharing.capacity_of)
                      if options.ecn else NoMarks())
        self.buckets = (TokenBuckets(self.capacity, options.burst_bytes) if options.burst_bytes is not None
                        else NoBuckets())
        self.active: dict[tuple, Flow] = {}
        self.components = Components()
        self.completions: list[tuple[float, tuple, int]] = []  # (projected end, flow key, its version)

    def path(self, a: str, b: str) -> tuple[int, ...]:
        """The ids of the directed links of the ECMP path from machine ``a`` to ``b``, their
        capacities (bytes/s) noted.

        Raises:
            TopologyError: a link of the path without a positive finite rate (or a bucket depth).
        """
        links = self._paths.get((a, b))
        if links is None:
            hops = path_links(self._routes.path(a, b))
            for u, v in hops:
                link = self.link_id[(u, v)]
                if not self.capacity[link]:
                    rate = self.rate_mbps.get((u, v))
                    if rate is None:
                        rate = self.rate_mbps.get((v, u))
                    if rate is None or not (rate > 0 and math.isfinite(rate)):
                        raise TopologyError(f"link {u}-{v} on the path {a} -> {b} needs a positive finite rate "
                                            f"in rate_mbps, got {rate!r}")
                    self.capacity[link] = mbps_to_bytes_per_s(rate)
                    self.buckets.add_link(link, u, v, a, b)
            links = self._paths[(a, b)] = tuple(self.link_id[hop] for hop in hops)
        return links

    @property
    def changed(self) -> bool:
        """Whether rates are to be recomputed (:meth:`reallocate`)."""
        return bool(self.components.changed)

    def enter(self, flow: Flow, now: float) -> bool:
        """Put ``flow`` into the network after its burst; False if the burst carried it whole."""
        self.sharing.sent(flow, now)
        if self.buckets.burst(flow, now):
            self.sharing.delivered(flow, now)
            return False
        flow.t_ref = flow.mark_t = now
        self.active[flow.key] = flow
        self.components.join(flow.key, flow.links)
        return True

    def complete(self, flow: Flow, now: float) -> None:
        """``flow`` has delivered its last byte at ``now``."""
        self.marks.flow_leaves(flow, now)
        self.sharing.delivered(flow, now)
        del self.active[flow.key]
        self.components.leave(flow.key, flow.links)

    def drop_run(self, job: int, now: float) -> None:
        """Take every flow of the run of index ``job`` out at ``now`` (the run was removed)."""
        for key in [key for key, flow in self.active.items() if flow.job == job]:
            self.marks.flow_leaves(self.active[key], now)
            flow = self.active.pop(key)
            self.components.leave(key, flow.links)

    def reweighed(self, flow: Flow, weighed: int) -> None:
        """A re-weigh set when ``flow`` had been weighed ``weighed`` times is due: its component's rates
        are recomputed unless the flow left or was weighed again since."""
        if self.active.get(flow.key) is flow and flow.weighed == weighed:
            self.components.touch(flow.links)

    def next_end_s(self) -> float:
        """The projected end of the first flow to end (``math.inf``: none), stale entries dropped."""
        completions = self.completions
        while completions and not self._current(completions[0]):
            heapq.heappop(completions)
        return completions[0][0] if completions else math.inf

    def _current(self, entry: tuple[float, tuple, int]) -> bool:
        flow = self.active.get(entry[1])
        return flow is not None and flow.version == entry[2]

    def completed(self, now: float) -> list[Flow]:
        """Pop the flows done at ``now``: those whose remaining bytes are within ``EPS`` of their size."""
        horizon = now + EPS * now
        done, later = [], []
        while self.completions and self.completions[0][0] <= horizon:
            entry = heapq.heappop(self.completions)
            if not self._current(entry):
                continue
            flow = self.active[entry[1]]
            left = flow.remaining - flow.rate * (now - flow.t_ref)
            (done if entry[0] <= now or left <= EPS * flow.size else later).append(entry)
        for entry in later:
            heapq.heappush(self.completions, entry)
        return [self.active[key] for _, key, _ in sorted(done, key=lambda e: e[1])]

    def reallocate(self, now: float) -> None:
        """Recompute the rates of the flows connected (through shared links) to a change.

        Raises:
            TopologyError: a flow got no bandwidth.
        """
        active = self.active
        links, keys = self.components.component(lambda key: active[key].links)
        # The loads change now: bring the tokens up to now at the old slopes first.
        self.buckets.rebase(links, now)
        if not keys:
            self.marks.rates_changed(links, [])
            return
        flows = [active[k] for k in sorted(keys)]
        self.marks.rates_change(flows, now)
        rates = self.sharing.rates(links, flows, now)
        for f, rate in zip(flows, rates, strict=True):
            if rate == f.rate:
                continue  # same rate, same projected end: its heap entry stands
            if not rate > 0:
                raise TopologyError(f"job {f.key[0][0]!r}: the flow of rank {f.src} to rank {f.dst} "
                                    f"got no bandwidth on {[self.link_names[i] for i in f.links]}")
            f.remaining = max(0.0, f.remaining - f.rate * (now - f.t_ref))
            f.t_ref, f.rate = now, rate
            f.version += 1
            heapq.heappush(self.completions, (now + f.remaining / f.rate, f.key, f.version))
        self.buckets.load(flows)
        self.marks.rates_changed(links, flows)


def _conn(flow: Flow) -> tuple:
    """The directed connection ``flow`` is sent on: its run, sender and receiver."""
    return (flow.key[0], flow.src, flow.dst)
