"""The experiment: one driver, one event-driven loop, one set of result records and one report.

The driver (:mod:`experiment.run.driver`) runs an experiment config on a back end into a results
directory; for every policy, the loop (:mod:`experiment.run.loop`) knows arrivals, completions and
the scheduler's wake-ups, and the back end's clock (:class:`backend.protocol.Backend`) runs what
the loop starts and says when it finishes. Back ends a user picks (``--backend``), registered in
:data:`BACKENDS`:

* ``emu``: the emulated network (:class:`emulator.runner.EmulatorExperiment`): real traffic in
  Mininet, root needed;
* ``sim``: the flow-level simulator (:class:`experiment.run.simrun.SimulatorExperiment`): every
  job's collectives on the routed fabric, max-min fair rates, no root needed.

The durations model (:mod:`experiment.run.durations`: each job runs for a known time, no network) is
a clock for the loop alone: the toy examples and test vectors of the scheduling specs.

Its subpackages, each importing only those before it (checked by a test): ``config`` (the config
and what it reads), ``reporting`` (a run's records, report and files), ``run`` (the driver, the
loop, the simulator back end, sweeps) and ``validate`` (simulators against a run).

This package imports neither Mininet nor os-ken nor the emulator (checked by a test); the
emulator back end is imported only when it is asked for.
"""

from __future__ import annotations

from common import registry
from common.errors import ConfigError

BACKENDS: dict[str, str] = {
    "emu": "emulator.runner:EmulatorExperiment",
    "sim": "experiment.run.simrun:SimulatorExperiment",
}
"""Back end name -> ``module:class`` of its :class:`experiment.run.plugin.ExperimentBackend` (which holds
everything else about it: its help line, report name, config checks), imported on demand so that
choosing ``sim`` never loads the emulator."""


def make_backend(name: str, **options):
    """A new instance of the back end registered as ``name`` (:func:`backend_class`), made with
    ``options`` (``cli=True`` for one whose ``opens_cli`` is set)."""
    return backend_class(name)(**options)


def backend_class(name: str):
    """The back end class registered as ``name``.

    Raises:
        ConfigError: unknown name (the message lists the registered ones).
    """
    return registry.load(BACKENDS, name, "back end", ConfigError)


def saved_backend_class(name: str):
    """The class of the back end a saved run names, or None for a name not registered here (a run of
    another installation's back end): the report then names it as it is and calls nothing measured."""
    return backend_class(name) if name in BACKENDS else None


def backend_classes() -> dict:
    """Every registered back end's class, by name, in registry order (for ``--help`` and ``list``)."""
    return {name: backend_class(name) for name in BACKENDS}
