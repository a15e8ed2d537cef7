"""Time elapsed and time left on a long run's progress lines: ``elapsed 3:12, about 9:40 left``.

The estimate is the mean wall time of the steps done so far times the steps left (policies of a
run, points of a sweep, jobs of a trace); none before the first step ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def clock_text(seconds: float) -> str:
    """``seconds`` as ``m:ss``, or ``h:mm:ss`` from an hour."""
    s = max(0, round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Eta:
    """The time a run of ``total`` steps has taken and, from the steps done, its estimate of the time left.

    Args:
        total: the steps of the run (>= 0).
        clock: seconds of a monotonic clock (``time.monotonic``).
    """

    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic):
        self.total, self.clock = max(0, total), clock
        self.start = clock()

    def text(self, done: int) -> str:
        """``elapsed m:ss`` and, once a step is done and some are left, ``about m:ss left``."""
        elapsed = self.clock() - self.start
        out = f"elapsed {clock_text(elapsed)}"
        if 0 < done < self.total:
            out += f", about {clock_text(elapsed / done * (self.total - done))} left"
        return out
