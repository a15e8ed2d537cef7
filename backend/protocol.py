"""The back-end protocol of the experiment loop, and the records that cross it.

A back end owns a clock and runs jobs. The loop (:func:`experiment.run.loop.run_loop`) calls::

    backend.start([(job, placement), ...])   # these jobs start now, together
    ends = backend.advance(until_s)          # run until a job finishes or until_s
    end = backend.stop(name)                 # preempt a running job now
    applied = backend.shift(shifts)          # align jobs' iterations on now + their shifts

:meth:`Backend.advance` returns as soon as one or more jobs finish (every job finishing at
that instant), or at ``until_s`` with nothing finished; ``now_s`` tells where the clock is.
Time is the back end's virtual (paper-scale) seconds: the simulators' own clock, or the
emulator's wall clock divided by its dilation.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Sequence

from common.errors import JobError
from placement.base import JobRequest, Placement, TimeShift


@dataclasses.dataclass(frozen=True)
class ExperimentJob:
    """A job of an experiment: what it is, when it arrives and how much work it is.

    Attributes:
        name: unique job name.
        workers: GPUs, all held at once (gang).
        arrival_s: submission time, seconds.
        model: model profile name (``jobs.models``); placers and the network back ends read it.
        collective: allreduce algorithm name.
        iterations: work as measured training iterations (the network back ends run these).
        duration_s: work as running time on its GPUs, seconds (the ``durations`` back end, and
            oracle schedulers' remaining service); None when only the network decides it.
        machines: the machine of each rank when the config pins the job (``jobs[].machines``); empty: not
            pinned.
        compute_ms: its compute time per iteration in place of its model's, ms (``jobs[].compute_ms``);
            0: the model's.
    """

    name: str
    workers: int
    arrival_s: float = 0.0
    model: str = "resnet50"
    collective: str = "ring"
    iterations: int | None = None
    duration_s: float | None = None
    machines: tuple[str, ...] = ()
    compute_ms: float = 0.0

    def __post_init__(self):
        if self.workers < 1:
            raise JobError(f"job {self.name!r}: workers must be >= 1, got {self.workers}")
        if not (self.arrival_s >= 0 and math.isfinite(self.arrival_s)):
            raise JobError(f"job {self.name!r}: arrival_s must be finite and >= 0, got {self.arrival_s!r}")
        if self.duration_s is not None and not (self.duration_s > 0 and math.isfinite(self.duration_s)):
            raise JobError(f"job {self.name!r}: duration_s must be finite and > 0, got {self.duration_s!r}")
        if self.iterations is not None and self.iterations < 1:
            raise JobError(f"job {self.name!r}: iterations must be >= 1, got {self.iterations}")
        if self.iterations is None and self.duration_s is None:
            raise JobError(f"job {self.name!r}: give its work as iterations or duration_s")

    def request(self) -> JobRequest:
        """The job as a placer sees it."""
        return JobRequest(self.name, self.model, self.workers, self.collective, arrival_s=self.arrival_s,
                          machines=self.machines, compute_ms=self.compute_ms)


@dataclasses.dataclass(frozen=True)
class RunEnd:
    """One run of a job (from a start to its finish or preemption), as the back end saw it.

    Attributes:
        job: job name.
        start_s: when the run started, seconds.
        end_s: when it finished or was stopped, seconds.
        finished: True when the job completed its work; False when it was preempted.
        iterations_done: measured iterations completed in this run (None: the back end counts
            no iterations).
    """

    job: str
    start_s: float
    end_s: float
    finished: bool
    iterations_done: int | None = None


class Backend(abc.ABC):
    """Runs jobs on its own clock for the experiment loop. Subclasses set ``name``."""

    name: str = ""

    @property
    @abc.abstractmethod
    def now_s(self) -> float:
        """The back end's clock, seconds."""

    @abc.abstractmethod
    def start(self, runs: Sequence[tuple[ExperimentJob, Placement | None]]) -> None:
        """Start these jobs now, together, each on its placement (None: GPUs counted, not placed).

        A job preempted before resumes with the work it has left.
        """

    @abc.abstractmethod
    def stop(self, job: str) -> RunEnd:
        """Preempt running job ``job`` now; its progress up to now is kept for its next start."""

    @abc.abstractmethod
    def advance(self, until_s: float) -> list[RunEnd]:
        """Run until one or more jobs finish, or until ``until_s`` (may be ``math.inf``).

        Returns:
            The runs that finished at the new ``now_s``, sorted by job name; empty when the
            clock reached ``until_s`` first, or when nothing runs (the clock then moves to a
            finite ``until_s``).
        """

    def shift(self, shifts: Sequence[TimeShift]) -> bool:
        """Align these running jobs' iterations from now on: each job's next iteration, and every
        later one it drifts from, starts at ``now_s + shift_s`` modulo its ``period_s`` (Cassini's
        time shifts, ``docs/resolutions.md`` Cassini §5.4).

        Returns:
            True when this back end applies them; False (the default) when it cannot, which the
            run records.
        """
        return False

    def close(self) -> None:  # noqa: B027 (optional hook: most back ends hold nothing)
        """Release what the back end holds (processes, files); the default holds nothing."""
