"""What a gap between ours and a paper's number points to: one parameter swept at the figure's
setting, and the value of it at which ours reaches the paper's (docs/reproductions.md, "the gaps").

A :class:`Sensitivity` names the parameter, its sweep and what the paper says of it; running it
gives an :class:`Explanation`: ours at every swept value and, interpolated, where ours reaches
the paper's number (:func:`reaching`). "The paper does not state X; with X = ..., ours agrees" is
the finding it prints.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence

from reproduce.base import Context, number_text


@dataclasses.dataclass(frozen=True)
class Sensitivity:
    """One parameter a reproduction's gap points to.

    Attributes:
        quantity: the compared figure's quantity (:attr:`reproduce.base.Figure.quantity`) whose gap it explains.
        parameter: the parameter in words, with its unit (``"the machines' link rate (Gbit/s)"``).
        vary: its sweep, ``PATH=V1,V2,...``, the value ours ran with first.
        seeds: the sweep's seeds.
        paper_says: what the paper states about it, in words (``"not stated for its simulator"``).
        scale: a swept value as plotted and printed, in the parameter's unit.
        at: the compared figure's setting where the figure's config is not at it, as ``--set``'s
            ``KEY=VALUE`` changes applied before the sweep (``("ina.pat_gbps=0",)``).
    """

    quantity: str
    parameter: str
    vary: str
    seeds: tuple[int, ...]
    paper_says: str
    scale: Callable[[float], float] = float
    at: tuple[str, ...] = ()

    def sweep(self, ctx: Context, target: float,
              measure: Callable[[list[str], Context, str], float | None]) -> Explanation:
        """Ours at every value of :attr:`vary`, on the simulator whatever ran the figure:
        ``measure(settings, sim_ctx, label)`` runs the figure's experiments with ``settings`` (``--set``'s
        ``KEY=VALUE``) into ``label`` and returns ours; the :class:`Explanation` against ``target``."""
        from experiment.run.sweep_spec import parse_vary

        vary, sim = parse_vary(self.vary), dataclasses.replace(ctx, backend="sim")
        return Explanation(self, target, tuple(
            (self.scale(v), measure([f"{vary.name}={v}"], sim, os.path.join("sensitivity", vary.label(v))))
            for v in vary.values))

    def base(self, cfg):
        """``cfg`` at the compared figure's setting (:attr:`at` applied)."""
        from experiment.config.overrides import apply_settings

        return apply_settings(cfg, self.at)


@dataclasses.dataclass(frozen=True)
class Explanation:
    """A :class:`Sensitivity` run: ours at each swept value against the paper's number.

    Attributes:
        sensitivity: what was swept.
        target: the paper's number ours is compared with (the nearest end of its range).
        points: (the parameter in its unit, ours) per swept value, in the sweep's order.
        reaches: the parameter's value, in its unit, at which ours reaches ``target`` (interpolated
            between the two swept values around it); None when no swept value reaches it.
    """

    sensitivity: Sensitivity
    target: float
    points: tuple[tuple[float, float | None], ...]

    @property
    def reaches(self) -> float | None:
        return reaching(self.points, self.target)

    def text(self) -> str:
        """One line: the gap, the sweep and where ours reaches the paper's."""
        s = self.sensitivity
        swept = ", ".join(f"{number_text(x)}: {number_text(y)}" for x, y in self.points)
        at = (f"ours reaches the paper's {number_text(self.target)} at {number_text(self.reaches)}"
              if self.reaches is not None else f"ours does not reach the paper's {number_text(self.target)} "
                                                f"in this range")
        return f"{s.quantity}: with {s.parameter} swept ({swept}), {at}; the paper: {s.paper_says}"

    def to_dict(self) -> dict:
        """JSON form: an entry of ``reproduction.json``'s ``explanations``."""
        s = self.sensitivity
        return {"quantity": s.quantity, "parameter": s.parameter, "vary": s.vary, "seeds": list(s.seeds),
                "paper_says": s.paper_says, "target": self.target, "points": [list(p) for p in self.points],
                "reaches": self.reaches}


def reaching(points: Sequence[tuple[float, float | None]], target: float) -> float | None:
    """The parameter's value at which ours first reaches ``target``, walking ``points`` (parameter,
    ours) in order: a point on it, or the linear interpolation between the last point below and
    the first at or above it (from either side); None when none reaches it."""
    measured = [(x, y) for x, y in points if y is not None]
    for (x0, y0), (x1, y1) in zip([(None, None), *measured], measured, strict=False):
        if y1 == target:
            return x1
        if y0 is not None and (y0 - target) * (y1 - target) < 0:
            return x0 + (x1 - x0) * (target - y0) / (y1 - y0)
    return None
