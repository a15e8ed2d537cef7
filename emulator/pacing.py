"""One decision's paced line on the emulator (:mod:`jobs.pace`): the back end follows each shifted
job's starts as its rank 0 announces them (:func:`jobs.phase.starts_path`, appended as each
iteration starts), tells the decision's :class:`jobs.pace.Pace` every start (less the wait its
keeper asked), and rewrites every job's shift file when the line moved. A rank's keeper sees a
file with its own shift as a moved line, whose changes take effect a guard after they were
written (:class:`jobs.phase.ShiftFollower`): the line comes to a job late by half its threshold
before its next iteration, unless that starts within a poll and a guard.
"""

from __future__ import annotations

import dataclasses
import json
import time

from jobs.pace import Pace
from jobs.phase import PhaseKeeper, starts_path, write_shift

KEEP_PERIODS = 4
"""Periods of a line's past kept in a rewritten shift file."""


class PaceFeed:
    """A decision's pace, fed from its jobs' announced starts.

    Attributes:
        pace: the decision's pace; its line is its keepers' line.
        keepers: job -> the keeper written to its shift file.
        files: job -> its shift file (its starts beside it).
        guard_s: how long after a rewrite a change takes effect, wall seconds.
    """

    def __init__(self, pace: Pace, keepers: dict[str, PhaseKeeper], files: dict[str, str], guard_s: float):
        self.pace, self.keepers, self.files, self.guard_s = pace, keepers, files, guard_s
        self._read: dict[str, int] = {}  # bytes of each job's starts file consumed
        self._origin = next(iter(keepers.values())).origin_s

    def poll(self, now_s: float | None = None) -> bool:
        """Read the new starts of the jobs still on the line; rewrite the shift files if the line
        moved. Returns True when it did."""
        now_s = time.time() if now_s is None else now_s
        moved = False
        for job in [j for j in self.files if j in self.pace.members]:
            for phase, start in self._new_starts(job):
                if phase["first"]:
                    self.pace.started(job, start)
                    continue
                moved |= self.pace.observe(job, start - phase["wait_s"], now_s + self.guard_s)
                self.pace.started(job, start)
        if moved:
            self.write(now_s)
        return moved

    def write(self, now_s: float) -> None:
        """Every job's shift file with the line as it is (its older past dropped)."""
        longest = max(k.period_s for k in self.keepers.values()) * self.pace.line.stretch(now_s)
        line = self.pace.line.since(now_s - KEEP_PERIODS * longest)
        for job, keeper in self.keepers.items():
            if job in self.pace.members:
                write_shift(self.files[job], dataclasses.replace(keeper, line=line), now_s, self.guard_s)

    def _new_starts(self, job: str):
        """(phase entry, start) of every start ``job``'s rank 0 announced under this decision's
        shift since the last read, in order."""
        path = starts_path(self.files[job])
        try:
            with open(path, "rb") as f:
                f.seek(self._read.get(job, 0))
                data = f.read()
        except FileNotFoundError:
            return
        complete = data[:data.rfind(b"\n") + 1]
        self._read[job] = self._read.get(job, 0) + len(complete)
        for line in complete.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a torn line of a rank killed mid-write: its records report the iteration
            phase = rec.get("phase")
            if phase is not None and phase.get("origin_s") == self._origin:
                yield phase, float(rec["start_time_s"])
