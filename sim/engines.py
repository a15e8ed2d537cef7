"""The simulator's engines, one object each: what a run's ``simulator.mode`` names, the back end it
builds and what the engine models. Callers ask an engine's flags, never its name.

Importing this module loads no engine: an entry's back end class is imported when it is asked for
(:meth:`SimEngine.backend_class`), so the config can read the registry cheaply.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from common.errors import ConfigError, unknown_name


@dataclasses.dataclass(frozen=True)
class SimEngine:
    """One simulator engine.

    Attributes:
        name: the name a config's ``simulator.mode`` gives it.
        step_level: it follows every transfer of every step, as the emulated runtime runs it: per-rank
            iteration records, token buckets and the ECN estimate; the per-message latency and TCP's
            share of a shared link are fitted on it.
        models_ina: it models in-network aggregation (jobs of collective ``ina``).
        models_congestion_control: it shares links as a modelled congestion control (MLTCP) has them;
            else its links are shared max-min whatever the hosts' congestion control.
        aligns_phases: it applies a placement's time shifts to its jobs' iterations.
        load_backend: returns the :class:`backend.protocol.Backend` class that runs it (imported then).
    """

    name: str
    step_level: bool
    models_ina: bool
    models_congestion_control: bool
    aligns_phases: bool
    load_backend: Callable[[], type]

    def backend_class(self) -> type:
        """The back end class that runs this engine (:mod:`sim.backend`)."""
        return self.load_backend()


def _steps_backend() -> type:
    from sim.backend import FlowSimBackend

    return FlowSimBackend


def _fluid_backend() -> type:
    from sim.backend import FluidSimBackend

    return FluidSimBackend


SIM_ENGINES: dict[str, SimEngine] = {
    "steps": SimEngine("steps", step_level=True, models_ina=False, models_congestion_control=True,
                       aligns_phases=True, load_backend=_steps_backend),
    "fluid": SimEngine("fluid", step_level=False, models_ina=True, models_congestion_control=False,
                       aligns_phases=False, load_backend=_fluid_backend),
}
"""``simulator.mode`` -> its engine: ``steps`` follows every transfer (:mod:`sim.flowsim`, the model the
testbed validates); ``fluid`` advances each job by its iteration rate (:mod:`sim.fluid`, trace scale)."""


def sim_engine(name: str) -> SimEngine:
    """The engine called ``name``.

    Raises:
        ConfigError: no such engine (naming the valid ones).
    """
    engine = SIM_ENGINES.get(name)
    if engine is None:
        raise ConfigError(unknown_name("simulator engine", name, SIM_ENGINES))
    return engine


def engines_where(has: Callable[[SimEngine], bool]) -> str:
    """The names of the engines that ``has`` holds for, as a message names them (``steps``, ``a or b``)."""
    return " or ".join(name for name, engine in SIM_ENGINES.items() if has(engine))
