"""Counters over time: bytes per link from the controller, queues and marks from the ports.

:class:`Series` holds cumulative counters sampled over wall-clock time and answers "how much
did this counter grow between t0 and t1" by linear interpolation between samples.

* :class:`LinkSeries` reads the controller's port statistics (``port_stats.jsonl``, one JSON
  line per switch port and poll): a switch port's transmit counter is the bytes sent on the
  directed link switch -> neighbour, its receive counter the bytes on neighbour -> switch.
* :func:`read_queue_samples` reads the port sampler's ``queue_stats.jsonl`` (see
  :mod:`emulator.queues`): per directed switch -> neighbour link, queue backlog and drops,
  bytes sent, and the ECN marker's counters.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict


class Series:
    """Cumulative counters per key over wall-clock time (samples appended in time order)."""

    def __init__(self):
        self.samples: dict = defaultdict(lambda: ([], []))

    def add(self, key, t: float, value: float) -> None:
        """Append a sample of ``key``'s counter."""
        ts, vs = self.samples[key]
        ts.append(t)
        vs.append(value)

    def value_at(self, key, t: float) -> float | None:
        """Interpolated counter of ``key`` at time ``t`` (None outside the samples)."""
        ts, vs = self.samples.get(key, ([], []))
        if not ts or t < ts[0] or t > ts[-1]:
            return None
        i = bisect.bisect_left(ts, t)
        if ts[i] == t or i == 0:
            return float(vs[i])
        t0, t1, v0, v1 = ts[i - 1], ts[i], vs[i - 1], vs[i]
        return v0 + (v1 - v0) * (t - t0) / (t1 - t0)

    def between(self, key, t0: float, t1: float) -> float | None:
        """Growth of ``key``'s counter between ``t0`` and ``t1`` (None when not covered by samples)."""
        a, b = self.value_at(key, t0), self.value_at(key, t1)
        return None if a is None or b is None else b - a

    def keys(self) -> list:
        """Every key with samples, sorted."""
        return sorted(self.samples)

    def rates(self, key) -> list[tuple[float, float]]:
        """``(time s, growth per second)`` between consecutive samples of ``key``."""
        ts, vs = self.samples.get(key, ([], []))
        return [((ts[i] + ts[i - 1]) / 2, (vs[i] - vs[i - 1]) / (ts[i] - ts[i - 1]))
                for i in range(1, len(ts)) if ts[i] > ts[i - 1]]


def port_map(g) -> dict[tuple[int, int], tuple[str, str]]:
    """``(dpid, port) -> (switch, neighbour)`` for every switch port of the topology."""
    out = {}
    for u, v, d in g.edges(data=True):
        for a, b in ((u, v), (v, u)):
            if g.nodes[a]["role"] == "switch":
                out[(g.nodes[a]["dpid"], d["ports"][a])] = (a, b)
    return out


def _json_lines(path: str):
    with open(path) as f:
        for line in f:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a stopped writer


class LinkSeries(Series):
    """Cumulative bytes per directed link over wall-clock time, from the controller's samples.

    Each directed link has one counter: the sending switch's transmit counter, or, on a link from a
    machine, the receiving switch's receive counter. (A link between two switches is seen by both;
    their two counters differ by what is in flight, so mixing them would make the series step back.)
    """

    def __init__(self, g, stats_path: str):
        super().__init__()
        pm = port_map(g)
        for s in _json_lines(stats_path):
            key = pm.get((s["dpid"], s["port"]))
            if key is None:
                continue
            sw, nbr = key
            self.add((sw, nbr), s["t"], s["tx_bytes"])
            if g.nodes[nbr]["role"] != "switch":
                self.add((nbr, sw), s["t"], s["rx_bytes"])

    def bytes_between(self, link: tuple[str, str], t0: float, t1: float) -> float | None:
        """Bytes that crossed ``link`` between ``t0`` and ``t1`` (None when not covered by samples)."""
        return self.between(link, t0, t1)

    def links(self) -> list[tuple[str, str]]:
        """Every directed link with samples."""
        return self.keys()


def read_queue_samples(path: str) -> dict[tuple[str, str], list[dict]]:
    """The port sampler's rows per directed link ``(switch, neighbour)``, in time order."""
    out: dict = defaultdict(list)
    try:
        for row in _json_lines(path):
            out[tuple(row["link"])].append(row)
    except FileNotFoundError:
        return {}
    for rows in out.values():
        rows.sort(key=lambda r: r["t"])
    return dict(out)


def counter_series(samples: dict[tuple[str, str], list[dict]], field: str) -> Series:
    """A :class:`Series` of one cumulative field of the port samples (rows without it are skipped)."""
    s = Series()
    for link, rows in samples.items():
        for r in rows:
            if r.get(field) is not None:
                s.add(link, r["t"], r[field])
    return s
