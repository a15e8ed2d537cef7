"""A job's communication profile: its per-iteration Up/Down demand on one link (spec §2).

A profile is the demand of one job, alone on a dedicated network, over one iteration of
``iter_ms``: Up phases of some Gbit/s over arcs of the iteration, nothing elsewhere. Angle 0 is
the iteration's start (the first forward-pass instant, §2.4 [REC]); a phase may wrap past the end
of the iteration. On the *unified circle* of several jobs, of perimeter the LCM of their iteration
times (§2.3), a job repeats ``perimeter / iter_ms`` times.

[R] §3.2 / §9 #4: iteration times are quantised to a grid (``quantum_ms``) before the LCM is
taken, or near-coprime periods make the unified circle enormous; the spec's test vectors use
whole milliseconds, which is the default grid here.

JSON form (:meth:`Profile.to_dict`), the spec's §2.4 record::

    {"iter_ms": 255, "phases": [{"start_ms": 141, "dur_ms": 114, "gbps": 45.0}]}
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from functools import reduce

import numpy as np


@dataclasses.dataclass(frozen=True)
class Phase:
    """An Up phase: ``gbps`` from ``start_ms`` for ``dur_ms`` of the iteration (may wrap past its end)."""

    start_ms: float
    dur_ms: float
    gbps: float

    def to_dict(self) -> dict:
        """JSON form."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Profile:
    """One job's demand on one link over one iteration of ``iter_ms`` (see the module docstring).

    Raises:
        ValueError: a non-positive iteration time, a phase starting outside the iteration, a
            negative duration or rate, or a phase longer than the iteration.
    """

    iter_ms: float
    phases: tuple[Phase, ...] = ()

    def __post_init__(self):
        if not (self.iter_ms > 0 and math.isfinite(self.iter_ms)):
            raise ValueError(f"profile: iter_ms must be finite and > 0, got {self.iter_ms!r}")
        for p in self.phases:
            if not 0 <= p.start_ms < self.iter_ms or not 0 <= p.dur_ms <= self.iter_ms or p.gbps < 0:
                raise ValueError(f"profile of {self.iter_ms:g} ms: phase {p} is not inside one iteration "
                                 f"(0 <= start < iter_ms, 0 <= dur <= iter_ms, gbps >= 0)")

    @classmethod
    def of(cls, iter_ms: float, phases: Iterable[tuple[float, float, float]]) -> Profile:
        """A profile from ``(start_ms, dur_ms, gbps)`` triples."""
        return cls(iter_ms, tuple(Phase(*p) for p in phases))

    def demand_gbps(self, t_ms: float) -> float:
        """The demand at time ``t_ms`` (any time: taken modulo the iteration)."""
        t = t_ms % self.iter_ms
        return sum(p.gbps for p in self.phases
                   if p.start_ms <= t < p.start_ms + p.dur_ms
                   or (p.start_ms + p.dur_ms > self.iter_ms and t < p.start_ms + p.dur_ms - self.iter_ms))

    def on_circle(self, perimeter_ms: float, angles: int) -> np.ndarray:
        """The demand in each of ``angles`` equal bins of a circle of ``perimeter_ms`` (the unified
        circle, §2.3: ``bw_circle(α) = demand((α / 2π) · p mod T)``), sampled at each bin's centre.

        [R] Bin centres: they reproduce every number of the spec's §3.3 table and §10 example
        (e.g. 0.844 for two T = 100 ms jobs with 60 ms Up phases on the 5° grid, the continuous
        optimum being 0.84); the spec's printed reference code samples bin left edges, which counts
        a phase ending inside a bin as covering it (0.822 there).
        """
        return np.array([self.demand_gbps((a + 0.5) * perimeter_ms / angles) for a in range(angles)])

    def to_dict(self) -> dict:
        """JSON form (the module docstring's)."""
        return {"iter_ms": self.iter_ms, "phases": [p.to_dict() for p in self.phases]}

    @classmethod
    def from_dict(cls, d: Mapping) -> Profile:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: a missing or malformed field.
        """
        try:
            return cls(float(d["iter_ms"]), tuple(Phase(float(p["start_ms"]), float(p["dur_ms"]), float(p["gbps"]))
                                                  for p in d.get("phases", ())))
        except (KeyError, TypeError) as e:
            raise ValueError(f"profile: malformed record ({type(e).__name__}: {e})") from None


def quantised_ms(iter_ms: float, quantum_ms: float = 1.0) -> int:
    """``iter_ms`` rounded to the grid of ``quantum_ms``, in whole ms (at least one quantum) [R] §3.2."""
    if not quantum_ms > 0:
        raise ValueError(f"quantum_ms must be > 0, got {quantum_ms!r}")
    steps = max(1, round(iter_ms / quantum_ms))
    value = steps * quantum_ms
    if abs(value - round(value)) > 1e-9:
        raise ValueError(f"quantum_ms {quantum_ms:g} does not give whole milliseconds")
    return round(value)


def perimeter_ms(iter_ms: Sequence[float], quantum_ms: float = 1.0) -> int:
    """The unified circle's perimeter: the LCM of the quantised iteration times (§2.3)."""
    return reduce(lambda a, b: a * b // math.gcd(a, b), (quantised_ms(t, quantum_ms) for t in iter_ms))


def quantise(profile: Profile, quantum_ms: float = 1.0) -> Profile:
    """``profile`` with its iteration time on the grid; its phases keep their times, clipped to it."""
    t = float(quantised_ms(profile.iter_ms, quantum_ms))
    if t == profile.iter_ms:
        return profile
    return Profile(t, tuple(Phase(min(p.start_ms, t - 1e-9), min(p.dur_ms, t), p.gbps) for p in profile.phases))
