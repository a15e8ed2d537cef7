"""A job's iteration phase against a common time origin: Cassini's time shift applied, its phase
error measured every iteration, and the re-alignment when it drifts (``docs/resolutions.md`` Cassini §5.4).

A time shift says: from the decision's time ``origin_s`` on, the job's iterations start at
``origin_s + shift_s`` modulo its period. :class:`PhaseKeeper` says before each iteration how long
to wait (§5.4's one-time delay, then a re-alignment when a window of iterations all erred by more
than ``max(2 ms, 2% of T)``, §5.3 [REC]), or follows a decision's paced line (:mod:`jobs.pace`). It
is pure, with no clock of its own; a worker's :class:`ShiftFollower` reads its job's shift file and
the wall clock.

The rules (the one-time wait, phase errors, drift, the paced line): ``docs/cassini.md`` (Using it).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time

from jobs.pace import PACE_TOLERANCE, Line, Member, Pace, wrapped

DRIFT_FLOOR_S = 0.002
"""The drift threshold's floor, seconds (§5.3 [REC]: 2 ms)."""
DRIFT_FRACTION = 0.02
"""The drift threshold's share of the iteration time (§5.3 [REC]: 2%)."""
DRIFT_WINDOW = 10
"""Iterations that must all err beyond the threshold before a re-alignment (§5.3 [REC])."""


def drift_threshold_s(period_s: float, floor_s: float = DRIFT_FLOOR_S, fraction: float = DRIFT_FRACTION) -> float:
    """The phase error beyond which an iteration counts as drifted: ``max(floor, fraction x period)``."""
    return max(floor_s, fraction * period_s)


@dataclasses.dataclass(frozen=True)
class DriftRule:
    """When a shifted job counts as drifted, and what is then done (the config's ``time_shifts``
    section; §5.3 [REC] by default, with the decision's jobs paced on one line).

    Attributes:
        floor_s, fraction: the threshold ``max(floor_s, fraction x period)``.
        window: iterations in a row beyond it before a re-alignment (unpaced), and the natural
            periods a job's pace is the median of (paced).
        realign: re-align a drifted job (False: only measure its phase errors, on the wall clock).
        pace: keep a decision's jobs on one line that follows its slowest and latest job
            (:mod:`jobs.pace`); an early job waits at once, a late one moves the line.
        tolerance: the relative change of the slowest pace that restretches the line.
    """

    floor_s: float = DRIFT_FLOOR_S
    fraction: float = DRIFT_FRACTION
    window: int = DRIFT_WINDOW
    realign: bool = True
    pace: bool = True
    tolerance: float = PACE_TOLERANCE

    @property
    def paced(self) -> bool:
        return self.pace and self.realign

    def keeper(self, origin_s: float, shift_s: float, period_s: float, scale: float = 1.0,
               line: Line | None = None) -> PhaseKeeper:
        """A keeper of this rule for a shift of ``period_s`` (virtual seconds), its times multiplied by
        ``scale`` (the dilation, on the emulator's wall clock) but ``origin_s``; on ``line`` (the
        decision's, see :meth:`pace`) when paced."""
        return PhaseKeeper(origin_s, shift_s * scale, period_s * scale,
                           drift_threshold_s(period_s, self.floor_s, self.fraction) * scale, self.window, self.realign,
                           line=line if self.paced else None, follow=self.paced)

    def keepers(self, origin_s: float, shifts, scale: float = 1.0, at_once: bool = True
                ) -> tuple[dict[str, PhaseKeeper], Pace | None]:
        """One decision's keepers, job name -> keeper, from its :class:`placement.api.TimeShift`
        records, and the :class:`jobs.pace.Pace` that moves their common line (None: unpaced).
        With ``at_once`` every keeper holds the pace and calls it before each wait (one process
        keeps every job, the simulator); otherwise the caller feeds it the jobs' starts."""
        if not self.paced:
            return {s.job: self.keeper(origin_s, s.shift_s, s.period_s, scale) for s in shifts}, None
        line = Line.starting(origin_s)
        keepers = {s.job: self.keeper(origin_s, s.shift_s, s.period_s, scale, line) for s in shifts}
        pace = Pace(line, {j: Member(k.shift_s, k.period_s, k.threshold_s) for j, k in keepers.items()},
                    self.window, self.tolerance)
        if at_once:
            for job, k in keepers.items():
                k.pace, k.job = pace, job
        return keepers, pace


def phase_error_s(start_s: float, aligned_s: float, period_s: float) -> float:
    """``start_s`` minus the aligned instant nearest it (aligned instants: ``aligned_s`` + k periods),
    in ``[−period/2, period/2)``."""
    return wrapped(start_s - aligned_s, period_s)


@dataclasses.dataclass
class PhaseKeeper:
    """One job's time shift, kept (see ``docs/cassini.md``).

    Attributes:
        origin_s: the shift's time origin (the decision's time).
        shift_s: the shift, in ``[0, period_s)``.
        period_s: the iteration time the shift is taken modulo (> 0).
        threshold_s: the drift threshold (None: :func:`drift_threshold_s` of the period).
        window: iterations that must all err beyond it before a re-alignment (>= 1; unpaced).
        realign: re-align a drifted job (False: measure only).
        line: the clock whose instants the job keeps (None: the wall clock from ``origin_s``).
        follow: the line follows late jobs: an early start beyond the threshold waits at once, a
            late one never (``docs/cassini.md``).
        pace: the :class:`jobs.pace.Pace` that moves the line, told of every start (None: moved
            elsewhere, or not at all); ``job`` is this job's name on it.
        errors_s: the phase error of every iteration started since the first wait, in order.
        waits_s: every wait asked for (the first one included), in order.
        realignments: re-alignments after drift (with ``follow``: waits of an early start).
    """

    origin_s: float
    shift_s: float
    period_s: float
    threshold_s: float | None = None
    window: int = DRIFT_WINDOW
    realign: bool = True
    line: Line | None = None
    follow: bool = False
    pace: Pace | None = None
    job: str = ""
    errors_s: list[float] = dataclasses.field(default_factory=list)
    waits_s: list[float] = dataclasses.field(default_factory=list)
    realignments: int = 0
    _late: int = 0  # consecutive iterations beyond the threshold

    def __post_init__(self):
        if not (self.period_s > 0 and math.isfinite(self.period_s)):
            raise ValueError(f"phase: period_s must be finite and > 0, got {self.period_s!r}")
        if self.window < 1:
            raise ValueError(f"phase: window must be >= 1, got {self.window}")
        if self.threshold_s is None:
            self.threshold_s = drift_threshold_s(self.period_s)
        if self.line is None:
            self.line = Line.starting(self.origin_s)
        elif not isinstance(self.line, Line):
            self.line = Line(self.line)

    def error_s(self, t: float) -> float:
        """``t`` minus the nearest instant at which an aligned iteration starts, in
        ``[-period/2, period/2)`` of the line's seconds, as wall seconds."""
        return phase_error_s(self.line.read(t), self.shift_s, self.period_s) * self.line.stretch(t)

    def wait_s(self, start_s: float) -> float:
        """How long the iteration that could start at ``start_s`` waits first (``docs/cassini.md``);
        records its phase error."""
        if self.pace is not None and self.waits_s:
            self.pace.observe(self.job, start_s, start_s)
        e = self.error_s(start_s)
        whole = self.period_s * self.line.stretch(start_s)  # a period, in wall seconds
        if not self.waits_s:
            wait = 0.0 if 0 < e <= 2 * self.threshold_s else (-e) % whole
        elif self.follow:
            wait = -e if e < -self.threshold_s else 0.0
            self.realignments += wait > 0
        else:
            self._late = self._late + 1 if abs(e) > self.threshold_s else 0
            wait = 0.0
            if self._late >= self.window and self.realign:
                wait, self._late = (-e) % whole, 0
                self.realignments += 1
        if wait >= whole - 1e-12 * whole:  # on the aligned instant to rounding
            wait = 0.0
        self.waits_s.append(wait)
        self.errors_s.append(self.error_s(start_s + wait))
        if self.pace is not None:
            self.pace.started(self.job, start_s + wait)
        return wait

    def started_at(self, t: float) -> None:
        """The iteration :meth:`wait_s` last timed really started at ``t`` (a sleep overshoots its
        wait): its recorded phase error is ``t``'s."""
        self.errors_s[-1] = self.error_s(t)

    def record(self) -> dict:
        """The last iteration's entry of its record (:class:`jobs.records.IterationRecord` ``phase``):
        the shift and its origin, the wait and phase error of that iteration, the threshold, the
        re-alignments so far, the line's last pace."""
        return {"shift_s": self.shift_s, "period_s": self.period_s, "origin_s": self.origin_s,
                "wait_s": self.waits_s[-1], "error_s": self.errors_s[-1], "threshold_s": self.threshold_s,
                "realignments": self.realignments, "first": len(self.waits_s) == 1,
                "stretch": self.line.pieces[-1][2]}

    def to_dict(self) -> dict:
        """The shift as a worker reads it from its shift file (:func:`write_shift`)."""
        return {"origin_s": self.origin_s, "shift_s": self.shift_s, "period_s": self.period_s,
                "threshold_s": self.threshold_s, "window": self.window, "realign": self.realign,
                "line": self.line.to_list(), "follow": self.follow}

    def same_shift(self, other: PhaseKeeper) -> bool:
        """``other`` keeps the same decision's shift (its line may have moved since)."""
        return (self.origin_s, self.shift_s, self.period_s) == (other.origin_s, other.shift_s, other.period_s)

    def summary(self) -> dict:
        """JSON form: the shift, the errors' worst and last, the threshold, the re-alignments, and
        the line's last stretch."""
        settled = self.errors_s[1:]
        return {"shift_s": self.shift_s, "period_s": self.period_s, "origin_s": self.origin_s,
                "threshold_s": self.threshold_s, "first_wait_s": self.waits_s[0] if self.waits_s else None,
                "iterations": len(self.errors_s), "realignments": self.realignments,
                "max_abs_error_s": max((abs(e) for e in settled), default=None),
                "beyond": sum(abs(e) > self.threshold_s for e in settled),
                "last_error_s": self.errors_s[-1] if self.errors_s else None,
                "stretch": self.line.pieces[-1][2]}


SHIFT_GUARD_S = 0.05
"""The least time between writing a shift and the iterations it times (:class:`ShiftFollower`), s."""


def write_shift(path: str, keeper: PhaseKeeper, written_s: float, guard_s: float = SHIFT_GUARD_S) -> None:
    """Write a job's shift for its workers to read (:class:`ShiftFollower`), atomically; it takes
    effect from the first iteration starting ``guard_s`` after ``written_s`` (wall clock)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({**keeper.to_dict(), "written_s": written_s, "guard_s": guard_s}, f)
    os.replace(tmp, path)


def starts_path(shift_path: str) -> str:
    """Where a job's announcing rank appends each iteration's start under its shift, beside the
    job's shift file (:class:`ShiftFollower`)."""
    return shift_path + ".starts"


class ShiftFollower:
    """A worker's side of its job's time shift: before each iteration, :meth:`wait_s` reads the
    job's shift file when it changed (a new shift replaces the last one) and asks its keeper how
    long to wait; None until a shift exists. Times are the worker's wall clock (``time.time()``),
    which every worker of an emulated network shares.

    A shift takes effect from the first iteration that starts ``guard_s`` after the file was
    written (its ``written_s``): the ranks of a job start an iteration within milliseconds of each
    other but may see a new file at different iterations, and a rank that applies it one
    iteration late would time the job by itself. A file with the same shift and a moved line
    (:mod:`jobs.pace`) only replaces the line: its changes take effect a guard after they were
    written, so every rank has read them first.

    The follower of one rank of a job (``announce``, rank 0) appends every start under a shift,
    as soon as it starts, to :func:`starts_path` (a JSON line as a record's: ``start_time_s`` and
    ``phase``), so the line can come to a late job before its next iteration."""

    def __init__(self, path: str | None, announce: bool = False):
        self.path, self.keeper, self._stamp = path, None, None
        self.announce = announce and path is not None
        self._pending: tuple[float, PhaseKeeper] | None = None  # a shift read, not yet in effect

    def wait_s(self, now_s: float) -> float:
        """The wait before an iteration that could start at ``now_s`` (0 without a shift)."""
        if self.path is None:
            return 0.0
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return 0.0
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            effective = float(data.pop("written_s", 0.0)) + float(data.pop("guard_s", 0.0))
            read, self._stamp = PhaseKeeper(**data), stamp
            held = self._pending[1] if self._pending is not None else self.keeper
            if held is not None and held.same_shift(read):
                held.line = read.line  # the decision's line moved: its changes are timed ahead
            else:
                self._pending = (effective, read)
        if self._pending is not None and now_s >= self._pending[0]:
            self.keeper, self._pending = self._pending[1], None
        return self.keeper.wait_s(now_s) if self.keeper is not None else 0.0

    def start_in_phase(self) -> float:
        """Sleep, on the wall clock, what the shift asks before the iteration that could start now;
        the instant it starts (after the sleep, whose overshoot its phase error counts)."""
        now = time.time()
        wait = self.wait_s(now)
        if wait > 0:
            time.sleep(wait)
            now = time.time()
        if self.keeper is not None and self.keeper.waits_s:
            self.keeper.started_at(now)
            if self.announce:
                line = json.dumps({"start_time_s": now, "phase": self.keeper.record()}) + "\n"
                with open(starts_path(self.path), "a", encoding="utf-8") as f:
                    f.write(line)
        return now

    def record(self) -> dict | None:
        """The last iteration's phase entry (None: never shifted)."""
        return self.keeper.record() if self.keeper is not None and self.keeper.waits_s else None


def phase_figures(records, dilation: float = 1.0) -> dict:
    """A shifted job's figures from its rank's iteration records (:class:`jobs.records.IterationRecord`,
    each with its ``phase`` entry), in virtual seconds (wall over ``dilation``): its last shift, the
    largest phase error of its iterations after the first wait and how many erred beyond their
    drift threshold, the threshold, its re-alignments, its line's last pace. Every figure None when
    no record has a phase (not shifted)."""
    phased = [r.phase for r in sorted(records, key=lambda r: r.iteration) if r.phase is not None]
    if not phased:
        return {"time_shift_s": None, "phase_error_max_s": None, "phase_errors_beyond": None,
                "drift_threshold_s": None, "realignments": None, "pace_stretch": None}
    last = phased[-1]
    settled = [p for p in phased if not p["first"]]
    return {"time_shift_s": last["shift_s"] / dilation,
            "phase_error_max_s": max(abs(p["error_s"]) for p in settled) / dilation if settled else None,
            "phase_errors_beyond": sum(abs(p["error_s"]) > p["threshold_s"] for p in settled) if settled else None,
            "drift_threshold_s": last["threshold_s"] / dilation, "realignments": last["realignments"],
            "pace_stretch": last.get("stretch", 1.0)}
