"""The step-level engine's ECN marking estimate (``SimOptions.ecn``; off by default): an observer the
engine (:class:`sim.flowsim.FlowEngine`) notifies as flows leave and links' rates change.

[R] The emulator's switches mark a packet when the queue of the port it leaves by is above K
(``ecn.threshold_bytes``, step marking). A fluid model has no queues, so the estimate takes a port's
queue to be above K exactly while its link is *oversubscribed*: saturated (its flows' rates sum to
its capacity as the link sharing leaves it, :meth:`sim.sharing.LinkSharing.capacity_of`) by two flows
or more, which TCP keeps probing for more than their share; a link saturated by one flow alone, or
not saturated, is taken to keep its queue below K. Every packet crossing an oversubscribed link is
then counted as marked, once however many such links it crosses (a CE packet is not marked again),
at one packet per ``mtu + 14`` bytes on the wire with ``mtu``, else per 1448 bytes of payload; a
burst let through by a token bucket crosses no queue and is not counted. That is an upper bound of
the packets a marker could mark: TCP halves its window at the first marks of a round trip and the
queue falls below K, so only a share of them is marked. The estimate is that count times
``SimOptions.ecn_mark_share`` (1: the upper bound; the config's default is the share measured on the
emulator, ``docs/validation.md``). It says which jobs meet congestion and ranks them by how much; it
does not follow the marks' timing. Cost: O(C) more per reallocation, as the token buckets.
"""

from __future__ import annotations

from collections.abc import Callable

from common.units import ETHERNET_HEADER_BYTES, TCP_IP_HEADER_BYTES
from sim.sharing import link_sums, oversubscribed

DEFAULT_MTU = 1500
"""MTU the ECN estimate counts packets at when ``SimOptions.mtu`` is None (flows are payload then)."""


class NoMarks:
    """No ECN estimate: the engine's estimates carry None."""

    def flow_leaves(self, flow, now: float) -> None:
        """``flow`` leaves the network at ``now`` (completed or removed)."""

    def rates_change(self, flows: list, now: float) -> None:
        """The rates of a component's ``flows`` are about to be recomputed at ``now``."""

    def rates_changed(self, links: list[int], flows: list) -> None:
        """The rates of the component's ``flows`` over its ``links`` are set (no flows: the links carry none)."""

    def iteration_starts(self, run: int, rank: int) -> None:
        """Rank ``rank`` of run ``run`` (its index in the engine) starts an iteration's compute."""

    def rank_marks(self, run: int, rank: int) -> float | None:
        """The marked packets rank ``rank`` of run ``run`` received since its iteration started."""
        return None

    def run_marks(self, run: int) -> float | None:
        """The marked packets of run ``run`` since it started."""
        return None


class EcnMarks(NoMarks):
    """The estimate of the module docstring.

    Args:
        n_links: directed links of the engine (ids 0 .. n_links - 1).
        mtu: the wire's MTU the flows' bytes are counted at, bytes; None: they are payload.
        mark_share: the share of the packets crossing an oversubscribed link counted as marked.
        capacity_of: what a link carries at most as its flows share it now, bytes/s (the engine's link sharing).
    """

    def __init__(self, n_links: int, mtu: int | None, mark_share: float, capacity_of: Callable[[int], float]):
        # congested[i] is 1 while link i is saturated by two flows or more (its queue taken to sit above
        # K, every packet crossing it marked); a flow's bytes since its mark_t are counted on the congested
        # links of its path whenever that may change.
        self.congested = bytearray(n_links)
        self.capacity_of = capacity_of
        packet_bytes = float(mtu + ETHERNET_HEADER_BYTES) if mtu else float(DEFAULT_MTU - TCP_IP_HEADER_BYTES)
        self.marks_per_byte = mark_share / packet_bytes
        self.run_bytes: dict[int, float] = {}  # run -> marked bytes since it started
        self.rank_bytes: dict[tuple[int, int], float] = {}  # (run, rank) -> marked bytes it received this iteration

    def flow_leaves(self, flow, now: float) -> None:
        self._count(flow, now)

    def rates_change(self, flows: list, now: float) -> None:
        for f in flows:
            self._count(f, now)

    def rates_changed(self, links: list[int], flows: list) -> None:
        """Which of the reallocated ``links`` are saturated by two flows or more now."""
        load, count = link_sums(flows, [f.rate for f in flows])
        for link in links:
            self.congested[link] = oversubscribed(count.get(link, 0), load.get(link, 0.0), self.capacity_of(link))

    def iteration_starts(self, run: int, rank: int) -> None:
        self.rank_bytes[(run, rank)] = 0.0

    def rank_marks(self, run: int, rank: int) -> float:
        return self.rank_bytes.get((run, rank), 0.0) * self.marks_per_byte

    def run_marks(self, run: int) -> float:
        return self.run_bytes.get(run, 0.0) * self.marks_per_byte

    def _count(self, flow, now: float) -> None:
        """Count ``flow``'s bytes since its ``mark_t`` on the congested links of its path."""
        sent = flow.rate * (now - flow.mark_t)
        flow.mark_t = now
        if sent > 0:
            congested = self.congested
            # A packet is marked once (a CE packet is not marked again), however many congested links
            # it crosses: the run counts its bytes once.
            if any(congested[link] for link in flow.links):
                self.run_bytes[flow.job] = self.run_bytes.get(flow.job, 0.0) + sent
                key = (flow.job, flow.dst)  # counted in the receiver's iteration, as the agent does
                self.rank_bytes[key] = self.rank_bytes.get(key, 0.0) + sent
