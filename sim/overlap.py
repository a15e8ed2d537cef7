"""How the fluid engine's coupled jobs overlap their communication (``SimOptions.overlap``): the levels
it gives them from the job-coupled max-min fill (:func:`sim.maxmin.fill_levels`), one strategy chosen
when the engine is built (:data:`OVERLAP_MODELS`).

:class:`Together` keeps the fill's levels (NetPack's model: jobs sharing a link always communicate
together); :class:`Independent` ([R]) raises each job's level as far as the others' traffic *times the
share of time they communicate* leaves room, to a fixed point. The model: ``docs/simulator-engines.md``
(Modelling decisions, Overlap).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from sim.maxmin import AggregatedDemand, resource_weights

OVERLAP_ROUNDS = 200
"""Rounds of the independent-overlap fixed point at most (:meth:`Independent.levels`)."""
OVERLAP_TOLERANCE = 1e-7
"""It stops once no level moves by more than this part of the highest cap."""


def level_cap(demand) -> float:
    """A demand's highest level in the fill's unit: an INA job's rate alone, 1 for the others."""
    return (demand.cap or 1.0) if isinstance(demand, AggregatedDemand) else 1.0


def phases(d, spilled: Mapping[int, float], n_links: int) -> list[tuple[float, dict[int, float]]]:
    """A demand's weights by level: ``(from level, weights)``, an INA demand's each spill adding its
    aggregator to the spent ones (:func:`sim.maxmin.resource_weights`); a plain demand's one phase."""
    if not isinstance(d, AggregatedDemand):
        return [(0.0, dict(d))]
    spent: set[int] = set()
    out = [(0.0, resource_weights(d, frozenset(), n_links))]
    for at, a in sorted((at, a) for a, at in spilled.items()):
        spent.add(a)
        out.append((at, resource_weights(d, frozenset(spent), n_links)))
    return out


def marginal(phases: list[tuple[float, dict[int, float]]], level: float) -> dict[int, float]:
    """The weights of a demand of ``phases`` just above ``level`` (its spills up to there spent)."""
    return [w for at, w in phases if at <= level][-1]


class Coupling:
    """The loads of coupled runs on their resources as flat arrays, for the independent overlap's
    fixed point (:meth:`Independent.levels`).

    Every (run, resource) pair a run loads is numbered (``pair_run``, ``pair_res``, the resource
    as a column of ``room``, its capacity); every phase of a run's demand (:func:`phases`) is a
    segment of its level, ``[seg_lo, seg_hi)``, whose weights ``entry_w`` load pairs
    ``entry_pair``; ``margin_*`` are the weights of each run's resources just above its floor
    (:func:`marginal`), the ones its level's step is taken on.
    """

    def __init__(self, phases: Sequence[list[tuple[float, dict[int, float]]]], margins: Sequence[Mapping[int, float]],
                 capacity):
        resources = sorted({r for p in phases for _, w in p for r in w} | {r for m in margins for r in m})
        column = {r: i for i, r in enumerate(resources)}
        self.room = np.array([capacity(r) for r in resources], dtype=float)
        pairs: dict[tuple[int, int], int] = {}
        seg_run, seg_lo, seg_hi, entry_seg, entry_pair, entry_w = [], [], [], [], [], []
        for j, p in enumerate(phases):
            for i, (at, weights) in enumerate(p):
                seg = len(seg_run)
                seg_run.append(j)
                seg_lo.append(at)
                seg_hi.append(p[i + 1][0] if i + 1 < len(p) else math.inf)
                for r, w in weights.items():
                    entry_seg.append(seg)
                    entry_pair.append(pairs.setdefault((j, column[r]), len(pairs)))
                    entry_w.append(w)
        margin_run, margin_pair, margin_w = [], [], []
        for j, m in enumerate(margins):
            for r, w in m.items():
                if w > 0:
                    margin_run.append(j)
                    margin_pair.append(pairs.setdefault((j, column[r]), len(pairs)))
                    margin_w.append(w)
        keys = np.array(list(pairs), dtype=np.int64).reshape(-1, 2)
        self.pair_run, self.pair_res = keys[:, 0], keys[:, 1]
        self.seg_run, self.seg_lo = np.array(seg_run, dtype=np.int64), np.array(seg_lo, dtype=float)
        self.seg_hi = np.array(seg_hi, dtype=float)
        self.entry_seg, self.entry_pair = np.array(entry_seg, dtype=np.int64), np.array(entry_pair, dtype=np.int64)
        self.entry_w = np.array(entry_w, dtype=float)
        self.margin_run, self.margin_pair = np.array(margin_run, dtype=np.int64), np.array(margin_pair, dtype=np.int64)
        self.margin_w = np.array(margin_w, dtype=float)

    def loads(self, levels: np.ndarray) -> np.ndarray:
        """Every pair's load at the runs' ``levels``: each phase's weights times the part of its
        segment below the level."""
        span = np.maximum(0.0, np.minimum(levels[self.seg_run], self.seg_hi) - self.seg_lo)
        return np.bincount(self.entry_pair, weights=self.entry_w * span[self.entry_seg], minlength=len(self.pair_run))


class Together:
    """Jobs sharing a link always communicate together: the fill's levels."""

    def levels(self, runs: Sequence, fill, n_links: int, capacity: Callable[[int], float]) -> list[float]:
        """The levels of coupled ``runs`` (the fluid engine's, each with its ``demand``, ``bound_s``,
        ``latency_s`` and ``spec``) given their ``fill`` (:func:`sim.maxmin.fill_levels`), over
        ``n_links`` links then the aggregators, of ``capacity`` each."""
        return fill.levels


class Independent(Together):
    """Each job meets the others' traffic for the share of time they communicate (the module docstring)."""

    def levels(self, runs: Sequence, fill, n_links: int, capacity: Callable[[int], float]) -> list[float]:
        """From the fill's, each run's level rises until its own load and the others' loads *times
        the share of time they communicate* fill one of its resources, or to its cap; the shares
        follow the levels, so this is iterated to a fixed point (damped by half, at most
        :data:`OVERLAP_ROUNDS` rounds). A level never falls below the fill's (jobs that always
        communicate together) and an INA job's aggregators keep the spills the fill found. Each
        round is a few array operations over the (run, resource) pairs of the component
        (:class:`Coupling`)."""
        if len(runs) <= 1:
            return fill.levels
        floors = np.array(fill.levels, dtype=float)
        caps = np.array([level_cap(run.demand) for run in runs])
        run_phases = [phases(run.demand, fill.spilled[j], n_links) for j, run in enumerate(runs)]
        c = Coupling(run_phases, [marginal(p, floor) for p, floor in zip(run_phases, floors, strict=True)], capacity)
        latency = np.array([run.latency_s for run in runs])
        bound = np.array([run.bound_s for run in runs])
        compute = np.array([run.spec.compute_s for run in runs])
        x = floors.copy()
        for _ in range(OVERLAP_ROUNDS):
            loads = c.loads(x)
            comm = latency + np.where(bound > 0, bound / np.maximum(x / caps, 1e-12), 0.0)
            period = compute + comm
            # the share of each run's iteration spent communicating at its level
            shares = np.where(period > 0, comm / np.where(period > 0, period, 1.0), 1.0)
            average = np.bincount(c.pair_res, weights=shares[c.pair_run] * loads, minlength=len(c.room))
            own = loads[c.margin_pair]
            others = average[c.pair_res[c.margin_pair]] - shares[c.margin_run] * own
            step = np.full(len(runs), np.inf)
            np.minimum.at(step, c.margin_run, (c.room[c.pair_res[c.margin_pair]] - own - others) / c.margin_w)
            nxt = np.minimum(caps, np.maximum(floors, x + step))
            moved = float(np.max(np.abs(x - nxt)))
            x = (x + nxt) / 2
            if moved <= OVERLAP_TOLERANCE * float(caps.max()):
                break
        return x.tolist()


OVERLAP_MODELS: dict[str, Together] = {"together": Together(), "independent": Independent()}
"""``SimOptions.overlap`` -> its strategy (the names are :data:`sim.flowsim.OVERLAPS`)."""
