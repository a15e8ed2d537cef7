"""The back-end plug-in as the driver sees it (:func:`experiment.run.driver.run_experiment`): a back end
is an :class:`ExperimentBackend` named by one line of ``experiment.BACKENDS``, which opens a
:class:`PolicySession` per run; a measured back end is handed the simulator's estimate of a recorded run
(:class:`ScheduleEstimator`). The interface alone, so that a back end's module and the driver import it
without importing each other."""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

from experiment.reporting.summary import PolicyRun
from topo.schema import SizeLimits

if TYPE_CHECKING:
    from experiment.config.schema import BackendChecks

Say = Callable[[str], None]


class ScheduleEstimator(Protocol):
    """The simulator's estimate of every job of a measured run, under the run's own schedule, by job
    name (:func:`experiment.run.resimulate.estimate_recorded_run`): what the driver hands a back end whose
    figures are measured, to set beside its measurements.

    Args:
        cfg, g: the config the run ran (as the back end ran it) and its topology.
        loop: the loop's record of the run: its starts, preempted runs and placer decisions.
        batches: the jobs of each batch the loop started, in order.
        timeline: every job's iterations and their Up phases (:class:`experiment.reporting.timeline.UpPhase`).
        bucket_bytes: per job, its measured gradient buckets.
    """

    def __call__(self, cfg, g, loop, batches: Sequence[Sequence[str]], timeline: Sequence,
                 bucket_bytes: Mapping[str, Sequence[int]]) -> Mapping:
        ...


class PolicySession(abc.ABC):
    """A back end ready to run policies one after another (its network up, its engine chosen)."""

    @abc.abstractmethod
    def run_policy(self, spec: str, pdir: str) -> PolicyRun:
        """Run every job of the experiment under placement policy ``spec``; its files go to ``pdir``.

        Raises:
            PlacementError: the policy could not place every job.
        """


class ExperimentBackend(abc.ABC):
    """A back end as the driver sees it: everything about it, in one class named by one line of
    ``experiment.BACKENDS``. Its module must import without the back end's heavy dependencies
    (``--help`` and ``run_testbed.py list`` read the class): those go inside its methods.

    Subclasses set:
        name: the registry key (``--backend``, ``capabilities.json``'s ``backend``).
        what: how messages name it (``the {what} runs ...``).
        help: its line in ``--help`` and ``run_testbed.py list``.
        report_name: how the report's tables name it (with ``measured`` or ``estimated``).
        measured: whether its figures are measured (then the report sets the simulator's
            estimates beside them) or computed.
        concurrent_runs: whether several runs may go at once, in a pool of processes.
        opens_cli: whether ``run --cli`` can open an interactive shell on its network once a
            policy has placed its first jobs (then its constructor takes ``cli=True``).
        checks: what it checks of a config beyond the common checks, with its size limits and
            what ``run_testbed.py check`` says of a config it takes.
    """

    name: ClassVar[str]
    what: ClassVar[str]
    help: ClassVar[str]
    report_name: ClassVar[str]
    measured: ClassVar[bool] = False
    concurrent_runs: ClassVar[bool] = True
    opens_cli: ClassVar[bool] = False
    checks: ClassVar[BackendChecks]

    @classmethod
    def report_heading(cls) -> str:
        """How the report's tables name this back end: ``emulated, measured``."""
        return f"{cls.report_name}, {'measured' if cls.measured else 'estimated'}"

    @property
    def size_limits(self) -> SizeLimits:
        """The largest topology this back end takes (its :attr:`checks`')."""
        return self.checks.limits

    def check(self, cfg):
        """Validate ``cfg`` for this back end without touching the machine; returns the topology.

        Raises:
            ConfigError: naming the offending value and the valid choices.
        """
        from experiment.config.schema import validate_for

        return validate_for(cfg, self.checks)

    @abc.abstractmethod
    def prepare(self, cfg, g, say: Say) -> dict:
        """Check this machine for the run and choose what it runs with; returns the capabilities
        the run records (``capabilities.json``)."""

    @abc.abstractmethod
    def describe(self, cfg, caps: dict, specs: Sequence[str]) -> str:
        """The run's first progress line after its directory: what runs, on what."""

    @abc.abstractmethod
    def open(self, cfg, g, run_dir: str, caps: dict, say: Say,
             estimate: ScheduleEstimator | None) -> contextlib.AbstractContextManager[PolicySession]:
        """A session for the run's policies; leaving it releases everything the back end holds.
        ``estimate``: the simulator's estimate of a recorded run, for a back end whose figures are
        :attr:`measured` (None for the others)."""


@contextlib.contextmanager
def no_resources(session: PolicySession) -> Iterator[PolicySession]:
    """A session of a back end that holds nothing between policies."""
    yield session
