"""Bytes per link over time, from the controller's port-statistics samples.

The controller appends one JSON line per switch port and poll (``port_stats.jsonl``). A
switch port's transmit counter is the bytes sent on the directed link switch -> neighbour,
its receive counter the bytes on neighbour -> switch. This module turns the samples into a
cumulative series per directed link and answers "how many bytes crossed this link between
t0 and t1" by linear interpolation between samples.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict


def port_map(g) -> dict[tuple[int, int], tuple[str, str]]:
    """``(dpid, port) -> (switch, neighbour)`` for every switch port of the topology."""
    out = {}
    for u, v, d in g.edges(data=True):
        for a, b in ((u, v), (v, u)):
            if g.nodes[a]["role"] == "switch":
                out[(g.nodes[a]["dpid"], d["ports"][a])] = (a, b)
    return out


class LinkSeries:
    """Cumulative bytes per directed link over wall-clock time."""

    def __init__(self, g, stats_path: str):
        pm = port_map(g)
        self.series: dict[tuple[str, str], tuple[list[float], list[int]]] = defaultdict(lambda: ([], []))
        with open(stats_path) as f:
            for line in f:
                try:
                    s = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a stopped controller
                key = pm.get((s["dpid"], s["port"]))
                if key is None:
                    continue
                sw, nbr = key
                for link, value in (((sw, nbr), s["tx_bytes"]), ((nbr, sw), s["rx_bytes"])):
                    ts, vs = self.series[link]
                    ts.append(s["t"])
                    vs.append(value)

    def value_at(self, link: tuple[str, str], t: float) -> float | None:
        """Interpolated cumulative bytes on ``link`` at time ``t`` (None outside the samples)."""
        ts, vs = self.series.get(link, ([], []))
        if not ts or t < ts[0] or t > ts[-1]:
            return None
        i = bisect.bisect_left(ts, t)
        if ts[i] == t or i == 0:
            return float(vs[i])
        t0, t1, v0, v1 = ts[i - 1], ts[i], vs[i - 1], vs[i]
        return v0 + (v1 - v0) * (t - t0) / (t1 - t0)

    def bytes_between(self, link: tuple[str, str], t0: float, t1: float) -> float | None:
        """Bytes that crossed ``link`` between ``t0`` and ``t1`` (None when not covered by samples)."""
        a, b = self.value_at(link, t0), self.value_at(link, t1)
        return None if a is None or b is None else b - a

    def links(self) -> list[tuple[str, str]]:
        """Every directed link with samples."""
        return sorted(self.series)

    def rate_series(self, link: tuple[str, str]) -> list[tuple[float, float]]:
        """``(time s, bytes/s)`` between consecutive samples of ``link``."""
        ts, vs = self.series.get(link, ([], []))
        return [((ts[i] + ts[i - 1]) / 2, (vs[i] - vs[i - 1]) / (ts[i] - ts[i - 1]))
                for i in range(1, len(ts)) if ts[i] > ts[i - 1]]
