"""Cassini's per-link optimisation: the compatibility score of jobs sharing a link, and their rotations.

``docs/resolutions.md`` Cassini §3 (Table 4.1, Eqs. 4.1-4.5). The jobs' profiles are drawn on the
link's unified circle; :func:`link_score` finds the rotations that maximise the score (1: the summed
demand fits the capacity everywhere) and turns each into the job's per-link time shift. Resolutions
([R], spec §9 #2-#5): the rotation sign, the grid, quantised iteration times, the solver
(exhaustive up to ``max_exhaustive`` jobs, else coordinate descent) and centring among equal optima.

The score, the resolutions and the cost of each solver: ``docs/algorithms.md`` (Cassini's per-link
score).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping

import numpy as np

from placement.cassini.profile import Profile, perimeter_ms, quantise

DEFAULT_STEP_DEG = 5.0
"""The thesis's angle grid, "unless otherwise stated" (§3 [T-recon]): 72 angles."""
MAX_EXHAUSTIVE_JOBS = 4
"""Links with more jobs are solved by coordinate descent (§3.4 [REC])."""
_TIE = 1e-12


@dataclasses.dataclass(frozen=True)
class LinkFit:
    """The optimum of Table 4.1 on one link.

    Attributes:
        score: the compatibility score (1 = fully compatible; may be below 0).
        shifts_ms: each job's per-link time-shift (Eq. 4.5), ms.
        rotations: each job's rotation, in angle steps of the grid.
        perimeter_ms: the unified circle's perimeter.
        angles: the grid's size ``|A|``.
        demand_gbps: the summed demand at each angle after rotation.
        exhaustive: True when every rotation was tried (else coordinate descent).
    """

    score: float
    shifts_ms: dict[str, float]
    rotations: dict[str, int]
    perimeter_ms: int
    angles: int
    demand_gbps: tuple[float, ...]
    exhaustive: bool = True

    def to_dict(self) -> dict:
        """JSON form (the decision log)."""
        return {"score": self.score, "shifts_ms": dict(self.shifts_ms), "rotations": dict(self.rotations),
                "perimeter_ms": self.perimeter_ms, "angles": self.angles, "exhaustive": self.exhaustive}


def link_score(profiles: Mapping[str, Profile], capacity_gbps: float, step_deg: float = DEFAULT_STEP_DEG,
               quantum_ms: float = 1.0, max_exhaustive: int = MAX_EXHAUSTIVE_JOBS, centre: bool = False) -> LinkFit:
    """The compatibility score of the jobs of ``profiles`` on a link of ``capacity_gbps``, and their
    rotations and time-shifts (see ``docs/algorithms.md``).

    Args:
        profiles: job name -> its demand on this link.
        capacity_gbps: the link's capacity ``C``, in the profiles' unit.
        step_deg: the angle grid, degrees (5: 72 angles).
        quantum_ms: the grid iteration times are rounded to before the LCM.
        max_exhaustive: the most jobs solved by exhaustive search.
        centre: move each job to the middle of its optimal rotations (``docs/algorithms.md``).

    Raises:
        ValueError: no job, a non-positive capacity, or a grid that does not divide 360 degrees.
    """
    if not profiles:
        raise ValueError("link_score: no job on the link")
    if not capacity_gbps > 0:
        raise ValueError(f"link_score: capacity must be > 0, got {capacity_gbps!r}")
    angles = round(360.0 / step_deg)
    if angles < 1 or abs(angles * step_deg - 360.0) > 1e-9:
        raise ValueError(f"link_score: step_deg {step_deg!r} does not divide 360 degrees")
    jobs = sorted(profiles)
    quantised = {j: quantise(profiles[j], quantum_ms) for j in jobs}
    p = perimeter_ms([quantised[j].iter_ms for j in jobs], quantum_ms)
    bw = np.array([quantised[j].on_circle(p, angles) for j in jobs])
    # Eq. 4.4: rotations within one period of each job on the unified circle; the first job pinned.
    choices = [1] + [max(1, math.ceil(angles / (p // round(quantised[j].iter_ms)))) for j in jobs[1:]]
    if len(jobs) <= max_exhaustive:
        ks, excess = _exhaustive(bw, choices, capacity_gbps)
        exhaustive = True
    else:
        ks, excess = _coordinate_descent(bw, choices, capacity_gbps)
        exhaustive = False
    if centre:
        repeats = [p // round(quantised[j].iter_ms) for j in jobs]
        ks = _centred(bw, choices, [angles % r == 0 for r in repeats], capacity_gbps, ks, excess)
    demand = sum(np.roll(bw[i], k) for i, k in enumerate(ks))
    return LinkFit(score=1.0 - excess / (angles * capacity_gbps),
                   shifts_ms={j: (k / angles * p) % quantised[j].iter_ms for j, k in zip(jobs, ks, strict=True)},
                   rotations=dict(zip(jobs, ks, strict=True)), perimeter_ms=p, angles=angles,
                   demand_gbps=tuple(float(x) for x in demand), exhaustive=exhaustive)


def _rolled(row: np.ndarray, count: int) -> np.ndarray:
    """``row`` rotated by 0 .. count-1 steps: row k is the demand seen at α when delayed by k, ``row[α − k]``."""
    n = row.shape[0]
    idx = (np.arange(n)[None, :] - np.arange(count)[:, None]) % n
    return row[idx]


def _excess(total: np.ndarray, capacity: float) -> np.ndarray:
    """Σ_α max(0, total − C) over the last axis (Eq. 4.1)."""
    return np.maximum(total - capacity, 0.0).sum(axis=-1)


def _exhaustive(bw: np.ndarray, choices: list[int], capacity: float) -> tuple[list[int], float]:
    """Every rotation in lexicographic order (the last two jobs' choices vectorised); the first
    with the least excess, as the spec's reference keeps its first best (ties within 1e-12)."""
    k = len(choices)
    rolled = [_rolled(bw[i], choices[i]) for i in range(k)]
    outer = list(range(max(0, k - 2)))  # jobs enumerated in Python; the last two vectorised
    vec = list(range(len(outer), k))
    best_excess, best = math.inf, None
    for combo in itertools.product(*(range(choices[i]) for i in outer)):
        base = sum((rolled[i][c] for i, c in zip(outer, combo, strict=True)), np.zeros(bw.shape[1]))
        if len(vec) == 1:
            block = _excess(base + rolled[vec[0]], capacity)
        else:
            a, b = vec
            block = _excess(base + rolled[a][:, None, :] + rolled[b][None, :, :], capacity).ravel()
        i = int(np.argmin(block))
        if block[i] < best_excess - _TIE * bw.shape[1] * capacity:
            first = int(np.flatnonzero(block <= block[i] + _TIE * bw.shape[1] * capacity)[0])
            best_excess = float(block[first])
            inner_ks = [first] if len(vec) == 1 else list(np.unravel_index(first, (choices[vec[0]], choices[vec[1]])))
            best = list(combo) + [int(x) for x in inner_ks]
    order = outer + vec
    ks = [0] * k
    for i, v in zip(order, best, strict=True):
        ks[i] = v
    return ks, best_excess


def _centred(bw: np.ndarray, choices: list[int], cyclic: list[bool], capacity: float, ks: list[int],
             excess: float) -> list[int]:
    """Each job but the first, in turn, moved to the middle of the adjacent rotations (cyclic when
    they span its period exactly) whose excess stays within the optimum's (``docs/algorithms.md``)."""
    k, angles = len(choices), bw.shape[1]
    ks = list(ks)
    rolled = [_rolled(bw[i], choices[i]) for i in range(k)]
    tie = _TIE * angles * capacity
    for i in range(1, k):
        n = choices[i]
        rest = sum(rolled[j][ks[j]] for j in range(k) if j != i)
        ok = _excess(rest[None, :] + rolled[i], capacity) <= excess + tie
        if ok.all():  # every rotation is optimal: nothing to centre
            continue
        lo = hi = ks[i]
        while (lo > 0 or cyclic[i]) and ok[(lo - 1) % n]:
            lo -= 1
        while (hi < n - 1 or cyclic[i]) and ok[(hi + 1) % n]:
            hi += 1
        ks[i] = ((lo + hi) // 2) % n
    return ks


def _coordinate_descent(bw: np.ndarray, choices: list[int], capacity: float) -> tuple[list[int], float]:
    """One job at a time, its best rotation with the others held (the first such), until no move
    improves the excess (§3.4 [REC]); from no rotation."""
    k = len(choices)
    rolled = [_rolled(bw[i], choices[i]) for i in range(k)]
    ks = [0] * k
    total = sum(rolled[i][0] for i in range(k))
    current = float(_excess(total, capacity))
    improved = True
    while improved:
        improved = False
        for i in range(1, k):
            rest = total - rolled[i][ks[i]]
            block = _excess(rest[None, :] + rolled[i], capacity)
            j = int(np.argmin(block))
            if block[j] < current - _TIE * bw.shape[1] * capacity:
                ks[i], current, improved = j, float(block[j]), True
                total = rest + rolled[i][j]
    return ks, current
