"""The step-level engine's token buckets (``SimOptions.burst_bytes``): one per directed link, letting
a flow's first bytes through at once while the bucket holds tokens, as the emulator's shapers do.

A link's tokens were ``tokens[i]`` at ``tokens_s[i]`` and have grown since at its capacity less
``load[i]``, the sum of its flows' rates (bytes/s), up to its depth; only a reallocation changes the
load, bringing the level up to then first. :class:`NoBuckets` stands for no buckets. The model:
``docs/simulator-engines.md`` (Token buckets).
"""

from __future__ import annotations

from collections.abc import Mapping

from common.errors import TopologyError
from sim.maxmin import EPS


class NoBuckets:
    """No token buckets: every flow enters the network whole."""

    def add_link(self, link: int, u: str, v: str, a: str, b: str) -> None:
        """Link ``link`` (u -> v, first met on the path ``a -> b``) gets its bucket, full."""

    def burst(self, flow, now: float) -> bool:
        """Send at once what the buckets of ``flow``'s path let through; True if that is all of it."""
        return False

    def rebase(self, links: list[int], now: float) -> None:
        """The loads of ``links`` are about to change at ``now``: bring their levels up to then."""

    def load(self, flows: list) -> None:
        """The rebased links' loads are the rates of ``flows``, every flow on them."""


class TokenBuckets(NoBuckets):
    """A bucket per directed link (the module docstring).

    Args:
        capacity: every directed link's capacity, bytes/s, by link id (the engine's list, read as it fills).
        burst_bytes: ``SimOptions.burst_bytes``: one depth for every link, or a depth by link in either
            orientation.
    """

    def __init__(self, capacity: list[float], burst_bytes: float | Mapping):
        n = len(capacity)
        self.capacity, self.burst_bytes = capacity, burst_bytes
        self.depth: list[float] = [0.0] * n
        self.tokens: list[float] = [0.0] * n
        self.tokens_s: list[float] = [0.0] * n
        self.loads: list[float] = [0.0] * n

    def add_link(self, link: int, u: str, v: str, a: str, b: str) -> None:
        self.depth[link] = self.tokens[link] = self._depth(u, v, a, b)

    def _depth(self, u: str, v: str, a: str, b: str) -> float:
        """Bucket depth of link u -> v (on the path ``a -> b``), bytes."""
        depths = self.burst_bytes
        if not isinstance(depths, Mapping):
            return float(depths)
        depth = depths.get((u, v))
        if depth is None:
            depth = depths.get((v, u))
        if depth is None:
            raise TopologyError(f"link {u}-{v} on the path {a} -> {b} has no bucket depth in burst_bytes")
        return float(depth)

    def level(self, link: int, now: float) -> float:
        """Tokens of ``link`` at ``now`` (bytes): its last level grown at capacity - load, capped."""
        level, depth = self.tokens[link], self.depth[link]
        if level >= depth:
            return depth
        spare = self.capacity[link] - self.loads[link]
        if spare <= EPS * self.capacity[link]:
            return level  # saturated, up to the rounding of the rates' sum
        return min(depth, level + spare * (now - self.tokens_s[link]))

    def burst(self, flow, now: float) -> bool:
        """Send at once what the buckets of ``flow``'s path let through, charging each of them;
        True if that is all of it (within ``EPS`` of its size)."""
        levels = [self.level(link, now) for link in flow.links]
        sent = min(min(levels), flow.remaining)
        if not sent > 0:
            return False
        for link, level in zip(flow.links, levels, strict=True):
            self.tokens[link], self.tokens_s[link] = level - sent, now
        flow.remaining -= sent
        return flow.remaining <= EPS * flow.size

    def rebase(self, links: list[int], now: float) -> None:
        # The component's flows are every flow on these links, so the new loads are their sums.
        for link in links:
            self.tokens[link], self.tokens_s[link] = self.level(link, now), now
            self.loads[link] = 0.0

    def load(self, flows: list) -> None:
        loads = self.loads
        for f in flows:
            for link in f.links:
                loads[link] += f.rate
