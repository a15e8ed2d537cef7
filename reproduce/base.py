"""What a reproduction is: the records it returns and the one interface every reproduction has.

A reproduction runs the testbed on the setting of one of a seed paper's headline results and sets
each number it measured beside the paper's (:class:`Figure`): the paper's value or range, with the
figure or table it is read from, and the ratio of ours to it. :class:`Outcome` is what a run of it
produced; :mod:`reproduce.run` writes and prints it.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import os
from collections.abc import Callable
from typing import ClassVar

Say = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class Figure:
    """One number of ours beside the paper's.

    Attributes:
        quantity: what is compared, in words (``"mean JCT reduction over the six baselines, 20:1"``).
        ours: what the testbed measured (None: it could not be measured, see the outcome's notes).
        paper: the paper's value as ``(low, high)``; a single value has ``low == high``.
        source: where the paper gives it (``"Fig. 12, §6.3"``).
        unit: the unit both are in (``"%"``, ``"x"``, ``"machines"``, ``""``).
    """

    quantity: str
    ours: float | None
    paper: tuple[float, float]
    source: str
    unit: str = ""

    def __post_init__(self):
        low, high = self.paper
        if not low <= high:
            raise ValueError(f"{self.quantity}: the paper's range {self.paper} is not (low, high)")

    @property
    def nearest_end(self) -> float:
        """The end of the paper's range nearest ours: its high end when ours is above it, else its low end."""
        low, high = self.paper
        return high if self.ours is not None and self.ours > high else low

    @property
    def ratio(self) -> float | None:
        """Ours over the paper's, against the nearest end of its range (1 inside it); None when
        ours is missing or the nearest end is 0 (see :attr:`agrees`)."""
        if self.ours is None:
            return None
        low, high = self.paper
        if low <= self.ours <= high:
            return 1.0
        return None if self.nearest_end == 0 else self.ours / self.nearest_end

    @property
    def agrees(self) -> bool | None:
        """Whether ours equals the paper's value or lies in its range, to 1e-9 relative (None: not measured)."""
        if self.ours is None:
            return None
        low, high = self.paper
        return low - 1e-9 * max(1.0, abs(low)) <= self.ours <= high + 1e-9 * max(1.0, abs(high))

    def paper_text(self) -> str:
        """The paper's value or range as printed."""
        low, high = self.paper
        return number_text(low) if low == high else f"{number_text(low)}-{number_text(high)}"

    def to_dict(self) -> dict:
        """JSON form: an entry of ``reproduction.json``'s ``figures`` and a row of ``reproduction.csv``."""
        return {"quantity": self.quantity, "ours": self.ours, "paper_low": self.paper[0], "paper_high": self.paper[1],
                "source": self.source, "unit": self.unit, "ratio": self.ratio, "agrees": self.agrees}


def number_text(x: float | None) -> str:
    """A number as printed: whole numbers without decimals, others to 3 significant digits (``-``
    when missing)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.3g}"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a reproduction's run produced.

    Attributes:
        figures: ours beside the paper's, in the order printed.
        notes: what the reader needs to read them (the setting, where it differs from the paper's).
        runs: the run or sweep directories behind the figures (under the reproduction's directory).
        plot: the plot's path (None: nothing to draw).
        explanations: for a figure far from the paper's, the one parameter its gap points to, swept
            (:class:`reproduce.sensitivity.Explanation`).
    """

    figures: tuple[Figure, ...]
    notes: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()
    plot: str | None = None
    explanations: tuple = ()


@dataclasses.dataclass(frozen=True)
class Context:
    """Where and how a reproduction runs.

    Attributes:
        out_dir: the reproduction's directory (exists); its runs go in subdirectories.
        say: progress lines.
        backend: the back end its experiments run on (one of the reproduction's :attr:`Reproduction.backends`).
        workers: sweep points run at once (sweeps only).
    """

    out_dir: str
    say: Say
    backend: str = "sim"
    workers: int = 1

    def path(self, name: str) -> str:
        """A path in the reproduction's directory."""
        return os.path.join(self.out_dir, name)


OWN_CLOCKS = {"durations": "the durations clock: jobs as their scheduled GPU time, no network",
              "placement": "a policy's placement code alone, timed on this machine"}
"""What a reproduction may run on besides the experiment back ends (``experiment.BACKENDS``): by name,
what it is."""


class Reproduction(abc.ABC):
    """One headline result of a seed paper, run on the testbed and set beside the paper's numbers.

    Class attributes:
        name: its registry key (``reproduce.REPRODUCTIONS``), as typed after ``reproduce``.
        paper: the paper, short (``"NetPack (NSDI'24)"``).
        source: the figure or table and section reproduced.
        claim: the result in one sentence, as the paper states it.
        setup: the paper's setup and metric for it, in a sentence.
        differs: where ours differs from that setup ("": nowhere).
        backends: the back ends it runs on (of ``experiment.BACKENDS`` or :data:`OWN_CLOCKS`); the first is
            the default.
        minutes: its run time on a 2-core machine on its default back end (the first), minutes (for
            ``--list``); None: not measured there yet.
    """

    name: ClassVar[str]
    paper: ClassVar[str]
    source: ClassVar[str]
    claim: ClassVar[str]
    setup: ClassVar[str]
    differs: ClassVar[str] = ""
    backends: ClassVar[tuple[str, ...]] = ("sim",)
    minutes: ClassVar[float | None]

    @abc.abstractmethod
    def check(self, backend: str) -> str:
        """Validate everything the run would run on ``backend`` (configs, sweep points), running
        nothing; one line saying what will run.

        Raises:
            ConfigError: a config or point is invalid.
        """

    @abc.abstractmethod
    def run(self, ctx: Context) -> Outcome:
        """Run it and compare (a run's failure raises the testbed's error)."""
