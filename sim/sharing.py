"""How the step-level engine's flows (:class:`sim.flowsim.FlowEngine`) share the links of a component they
load together: one strategy chosen when the engine is built (:func:`link_sharing`).

:class:`MaxMin` shares every directed link max-min fairly; :class:`TcpShare` ([R],
``SimOptions.shared_efficiency``) gives each link that two flows or more saturate that share of its
capacity and fills the component again; :class:`MltcpSharing` ([R], ``SimOptions.mltcp``) shares by
weighted max-min, each flow weighted by MLTCP's ``F(bytes_ratio) ** gamma`` of its connection
(:class:`sim.mltcp.MltcpFlows`), re-weighed every ``step`` of its iteration's bytes.

Each model's rules and cost: ``docs/simulator-engines.md`` (How flows share links).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from sim.maxmin import maxmin_indexed, maxmin_levels
from sim.mltcp import MltcpFlows, MltcpLedger


class LinkSharing:
    """Max-min sharing, and the interface of every strategy: a component's rates, the capacity the ECN
    estimate compares a link's load with, and what a strategy follows of a flow's entry and delivery.

    Args:
        capacity: every directed link's capacity, bytes/s, by link id: the engine's own list (it fills
            a link's entry when a path first crosses it), read where the rates are computed.
    """

    def __init__(self, capacity: list[float]):
        self.capacity = capacity

    def rates(self, links: list[int], flows: list, now: float) -> list[float]:
        """The rates (bytes/s) of a component's ``flows`` (sorted by key) over its ``links`` at ``now``."""
        return maxmin_indexed([f.links for f in flows], self.capacity)

    def capacity_of(self, link: int) -> float:
        """What ``link`` carries at most as its flows now share it, bytes/s."""
        return self.capacity[link]

    def sent(self, flow, now: float) -> None:
        """``flow`` enters the network at ``now`` (before its burst, if any)."""

    def delivered(self, flow, now: float) -> None:
        """Every byte of ``flow`` has reached its receiver at ``now``."""


class MaxMin(LinkSharing):
    """Plain max-min: every link at its full capacity."""


class TcpShare(LinkSharing):
    """Max-min, then every link saturated by two flows or more at ``efficiency`` of its capacity
    (``docs/simulator-engines.md``, How flows share links).

    Args:
        capacity: as :class:`LinkSharing`.
        efficiency: the share of its rate such a link carries, in (0, 1).
    """

    def __init__(self, capacity: list[float], efficiency: float):
        super().__init__(capacity)
        self.efficiency = efficiency
        # shared[i] is 1 while link i, saturated by two flows or more, carries only efficiency of its
        # capacity (set at each reallocation of its component).
        self.shared = bytearray(len(capacity))

    def rates(self, links: list[int], flows: list, now: float) -> list[float]:
        """The component's max-min rates with every link they saturate with two flows or more at
        ``efficiency`` of its capacity (``shared`` marks them), filled again."""
        rates = maxmin_indexed([f.links for f in flows], self.capacity)
        load, count = link_sums(flows, rates)
        capacity, shared = self.capacity, self.shared
        hit = [link for link, n in count.items() if oversubscribed(n, load[link], capacity[link])]
        for link in links:
            shared[link] = 0
        if not hit:
            return rates
        full = [capacity[link] for link in hit]
        for link in hit:
            shared[link] = 1
            capacity[link] *= self.efficiency
        try:
            return maxmin_indexed([f.links for f in flows], capacity)
        finally:
            for link, c in zip(hit, full, strict=True):
                capacity[link] = c

    def capacity_of(self, link: int) -> float:
        return self.capacity[link] * (self.efficiency if self.shared[link] else 1.0)


class MltcpSharing(LinkSharing):
    """Weighted max-min, each flow weighted by its connection's F (``docs/simulator-engines.md``).

    Args:
        capacity: as :class:`LinkSharing`.
        flows: MLTCP's parameters.
        conn: the directed connection a flow is sent on (its run, sender and receiver).
        reweigh: sets a re-weigh of a flow at a time (the engine's timer; the flow's ``weighed`` count
            tells a stale one).
    """

    def __init__(self, capacity: list[float], flows: MltcpFlows, conn: Callable[[object], tuple],
                 reweigh: Callable[[float, object], None]):
        super().__init__(capacity)
        self.ledger = MltcpLedger(flows)
        self.conn, self.reweigh = conn, reweigh

    def rates(self, links: list[int], flows: list, now: float) -> list[float]:
        """Weighted max-min rates, each flow weighted by its connection's F, and a re-weigh of every
        flow that shares its component at its connection's next ratio step."""
        ledger, conn = self.ledger, self.conn
        done = [f.size - max(0.0, f.remaining - f.rate * (now - f.t_ref)) for f in flows]
        weights = [ledger.weight(conn(f), d) for f, d in zip(flows, done, strict=True)]
        levels = maxmin_levels([[(link, w) for link in f.links] for f, w in zip(flows, weights, strict=True)],
                               self.capacity, math.inf)
        rates = [w * level for w, level in zip(weights, levels, strict=True)]
        for f, d, rate in zip(flows, done, rates, strict=True):
            f.weighed += 1
            if len(flows) > 1:  # a flow alone on its links keeps its rate whatever its weight
                ahead = ledger.bytes_to_next_step(conn(f), d)
                if rate > 0 and ahead < f.size - d:
                    self.reweigh(now + ahead / rate, f)
        return rates

    def sent(self, flow, now: float) -> None:
        self.ledger.send(self.conn(flow), now)

    def delivered(self, flow, now: float) -> None:
        self.ledger.deliver(self.conn(flow), flow.size, now)


def link_sharing(mltcp: MltcpFlows | None, shared_efficiency: float, capacity: list[float],
                 conn: Callable[[object], tuple], reweigh: Callable[[float, object], None]) -> LinkSharing:
    """The strategy of an engine's options: MLTCP's weights when ``mltcp`` is given (they are the model
    of sharing, whatever ``shared_efficiency``), else TCP's share below an efficiency of 1, else max-min."""
    if mltcp is not None:
        return MltcpSharing(capacity, mltcp, conn, reweigh)
    if shared_efficiency < 1:
        return TcpShare(capacity, shared_efficiency)
    return MaxMin(capacity)


def oversubscribed(flows: int, load: float, capacity: float) -> bool:
    """Whether a link carrying ``flows`` flows at ``load`` bytes/s in total is saturated by two or more."""
    return flows >= 2 and load >= capacity * (1 - 1e-9)


def link_sums(flows: list, rates: Sequence[float]) -> tuple[dict[int, float], dict[int, int]]:
    """The rates' sum and the number of flows on every link the ``flows`` cross."""
    load: dict[int, float] = {}
    count: dict[int, int] = {}
    for f, rate in zip(flows, rates, strict=True):
        for link in f.links:
            load[link] = load.get(link, 0.0) + rate
            count[link] = count.get(link, 0) + 1
    return load, count
