"""The common clock of one decision's time-shifted jobs, and the pace that keeps them on it
(``docs/resolutions.md`` Cassini §5.4 [REC], extended).

What interleaving needs is the jobs' *relative* phase, so the decision's jobs share a :class:`Line`
that may run slower or faster than the wall clock (its ``stretch``) and be set back; :class:`Pace`
moves it: at the pace of the decision's slowest job, and back by the lateness of a job later than
half its drift threshold (:data:`LEAD`). No job then waits more than another's lateness. Pure: the
simulator calls it with its virtual time, the emulator's back end with each job's recorded starts.

Why, and the rules in full: ``docs/cassini.md`` (Using it: the line).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import statistics
from collections import deque

PACE_TOLERANCE = 0.001
"""Relative change of the slowest job's pace that restretches the line."""
LEAD = 0.5
"""A job late by more than this part of its drift threshold sets the line back: on the emulator the
line comes to it an iteration or two later, and the lateness that accumulates meanwhile stays
within the threshold."""
PACE_SAMPLES = 3
"""Natural periods a job needs before its pace counts."""


def wrapped(x: float, period: float) -> float:
    """``x`` modulo ``period`` in ``[-period/2, period/2)`` (a phase error: the one wrapping of both
    the line's and :func:`jobs.phase.phase_error_s`)."""
    e = math.fmod(x, period)
    if e < 0:
        e += period
    return e - period if e >= period / 2 else e


class Line:
    """A clock as pieces: from ``from_s`` (wall or virtual seconds) on, it reads
    ``v_s + (t - from_s) / stretch`` (in the jobs' seconds), until the next piece. Before the first
    piece it reads as the first."""

    def __init__(self, pieces):
        pieces = [tuple(float(x) for x in p) for p in pieces]
        if not pieces or any(len(p) != 3 or p[2] <= 0 for p in pieces):
            raise ValueError(f"line: pieces must be (from_s, v_s, stretch > 0) triples, got {pieces!r}")
        if any(b[0] < a[0] for a, b in zip(pieces, pieces[1:], strict=False)):
            raise ValueError("line: pieces must be in time order")
        self.pieces = pieces
        self._from = [p[0] for p in pieces]

    @classmethod
    def starting(cls, origin_s: float) -> Line:
        """The wall clock from ``origin_s``: reads 0 there, at stretch 1."""
        return cls([(origin_s, 0.0, 1.0)])

    def _piece(self, t: float) -> tuple[float, float, float]:
        return self.pieces[max(0, bisect.bisect_right(self._from, t) - 1)]

    def read(self, t: float) -> float:
        """The clock's reading at ``t``."""
        f, v, s = self._piece(t)
        return v + (t - f) / s

    def stretch(self, t: float) -> float:
        """Wall seconds per clock second at ``t``."""
        return self._piece(t)[2]

    def change(self, at_s: float, back_s: float = 0.0, stretch: float | None = None) -> None:
        """From ``at_s`` on (not before the last piece), read ``back_s`` less than now and run at
        ``stretch`` (None: as now)."""
        at_s = max(at_s, self._from[-1])
        s = self.stretch(at_s) if stretch is None else stretch
        piece = (at_s, self.read(at_s) - back_s, s)
        if at_s == self._from[-1]:
            self.pieces[-1], self._from[-1] = piece, at_s
        else:
            self.pieces.append(piece)
            self._from.append(at_s)

    def since(self, t: float) -> Line:
        """The same clock from ``t`` on (the pieces before the one in effect at ``t`` dropped)."""
        return Line(self.pieces[max(0, bisect.bisect_right(self._from, t) - 1):])

    def to_list(self) -> list[list[float]]:
        return [list(p) for p in self.pieces]

    def __eq__(self, other) -> bool:
        return isinstance(other, Line) and self.pieces == other.pieces

    def __repr__(self) -> str:
        return f"Line({self.pieces!r})"


@dataclasses.dataclass
class Member:
    """One job on a :class:`Pace`'s line: its shift and period in the line's seconds, its drift
    threshold in wall seconds."""

    shift_s: float
    period_s: float
    threshold_s: float


class Pace:
    """Keeps one decision's jobs on one :class:`Line` (``docs/cassini.md``).

    Attributes:
        line: the jobs' common clock.
        members: job name -> :class:`Member`; a job that leaves (ended, or shifted by a later
            decision) is dropped.
        window, tolerance: the jobs' natural periods a pace is the median of, and the relative
            change that restretches the line.
        moves: (job, at_s, seconds the line was set back) of every offset change.
        restretches: every stretch change, (at_s, stretch).
    """

    def __init__(self, line: Line, members: dict[str, Member], window: int = 10,
                 tolerance: float = PACE_TOLERANCE):
        if window < 1 or not tolerance >= 0:
            raise ValueError(f"pace: window must be >= 1 and tolerance >= 0, got {window}, {tolerance}")
        self.line, self.members, self.window, self.tolerance = line, dict(members), window, tolerance
        self.moves: list[tuple[str, float, float]] = []
        self.restretches: list[tuple[float, float]] = []
        self._last: dict[str, float] = {}  # a job's last actual start
        self._ratios: dict[str, deque] = {}
        self._settled_s = line.pieces[-1][0]  # starts before this were timed against an older line

    def leave(self, job: str) -> None:
        self.members.pop(job, None)
        self._ratios.pop(job, None)
        self._last.pop(job, None)

    def error_s(self, job: str, t: float) -> float:
        """``job``'s phase error at ``t``: ``t`` minus its nearest instant on the line, wall seconds."""
        m = self.members[job]
        return wrapped(self.line.read(t) - m.shift_s, m.period_s) * self.line.stretch(t)

    def observe(self, job: str, start_s: float, at_s: float) -> bool:
        """``job`` could start an iteration at ``start_s`` (before any wait); changes to the line
        take effect from ``at_s`` (>= ``start_s``). Its first start after the decision only marks
        where it is. Returns True when the line changed."""
        m = self.members.get(job)
        if m is None:
            return False
        last = self._last.get(job)
        if last is None:
            return False
        ratios = self._ratios.setdefault(job, deque(maxlen=self.window))
        ratios.append((start_s - last) / m.period_s)
        changed = False
        paces = [statistics.median(r) for r in self._ratios.values() if len(r) >= PACE_SAMPLES]
        if paces:
            s, now = max(paces), self.line.stretch(at_s)
            if abs(s - now) > self.tolerance * now:
                self.line.change(at_s, stretch=s)
                self.restretches.append((at_s, s))
                changed = True
        e = self.error_s(job, start_s)
        if e > LEAD * m.threshold_s and start_s >= self._settled_s:
            back = e / self.line.stretch(start_s)
            self.line.change(at_s, back_s=back)
            self.moves.append((job, at_s, e))
            changed = True
        if changed:
            self._settled_s = at_s
        return changed

    def started(self, job: str, start_s: float) -> None:
        """``job`` started an iteration at ``start_s`` (after its wait)."""
        if job in self.members:
            self._last[job] = start_s


class Paces:
    """A run's paces by job: a job keeps one decision's line at a time, and leaves it when a later
    decision shifts it again or its run ends."""

    def __init__(self):
        self.of: dict[str, Pace] = {}

    def join(self, pace: Pace | None, jobs) -> None:
        """``jobs`` were shifted by one decision, whose jobs ``pace`` keeps (None: unpaced)."""
        for job in jobs:
            self.leave(job)
            if pace is not None:
                self.of[job] = pace

    def leave(self, job: str) -> None:
        pace = self.of.pop(job, None)
        if pace is not None:
            pace.leave(job)
