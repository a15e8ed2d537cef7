"""The experiment: one event-driven loop over jobs, a scheduler and a placer, driving a back end.

The loop (:mod:`experiment.loop`) knows arrivals, completions and the scheduler's wake-ups; a
back end (:class:`backend.protocol.Backend`) runs what the loop starts and says when it
finishes. Back ends, registered in :data:`BACKENDS`:

* ``durations``: each job runs for a known time, GPUs counted or placed, no network
  (:mod:`experiment.durations`; the toy examples and test vectors of the scheduling specs);
* ``sim``: the flow-level simulator (:mod:`sim.backend`): every job's collectives on the routed
  fabric, max-min fair rates, no root needed;
* ``emu``: the emulated network (:mod:`emulator.backend`): real traffic in Mininet, root needed.

This package imports neither Mininet nor os-ken (checked by a test); the emulator back end is
imported only when it is asked for.
"""

from __future__ import annotations

import importlib

from common.errors import ConfigError

BACKENDS: dict[str, str] = {
    "durations": "experiment.durations:DurationBackend",
    "sim": "sim.backend:FlowSimBackend",
    "emu": "emulator.backend:EmulatorBackend",
}
"""Back end name -> ``module:class``, imported on demand so that choosing ``sim`` never loads Mininet."""


def backend_class(name: str):
    """The back end class registered as ``name``.

    Raises:
        ConfigError: unknown name (the message lists the registered ones).
    """
    target = BACKENDS.get(name)
    if target is None:
        raise ConfigError(f"unknown back end {name!r}; valid: {', '.join(BACKENDS)}")
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)
