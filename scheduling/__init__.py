"""Schedulers: the registry, spec strings and the shared interface.

The scheduling stage decides the order of jobs and which running jobs to preempt; the
placement stage (``placement/``) then decides where the started jobs go, so any scheduler
combines with any placer. A scheduler is chosen by a spec string, the registry key
optionally followed by keyword arguments for its constructor::

    make_scheduler("tiresias")
    make_scheduler("tiresias,priority=gittins,thresholds_gpu_s=3600,promote_knob=8")
    make_scheduler("yarn_cs")

Values are parsed as ``bool`` (``true``/``false``), ``int``, ``float`` (``inf`` included), else
kept as ``str``. ``seed`` always comes from the experiment, never from the spec. Adding a
scheduler is one module plus one line in :data:`SCHEDULERS`; no import-time registration.
"""

from __future__ import annotations

import inspect

from common.errors import ConfigError, unknown_name
from scheduling.base import Decision, JobStatus, PriorityScheduler, Scheduler
from scheduling.fifo import FifoScheduler, YarnCsScheduler
from scheduling.tiresias import (
    GittinsScheduler,
    LasScheduler,
    SrsfScheduler,
    SrtfScheduler,
    TiresiasScheduler,
)

__all__ = [
    "SCHEDULERS",
    "Decision",
    "FifoScheduler",
    "GittinsScheduler",
    "JobStatus",
    "LasScheduler",
    "PriorityScheduler",
    "Scheduler",
    "SrsfScheduler",
    "SrtfScheduler",
    "TiresiasScheduler",
    "YarnCsScheduler",
    "make_scheduler",
]

SCHEDULERS: dict[str, type[Scheduler]] = {
    "fifo": FifoScheduler,
    "yarn_cs": YarnCsScheduler,
    "tiresias": TiresiasScheduler,
    "las": LasScheduler,
    "gittins": GittinsScheduler,
    "srsf": SrsfScheduler,
    "srtf": SrtfScheduler,
}


def _parse_value(text: str) -> bool | int | float | str:
    """Parse one spec value: bool, then int, then float, else the string itself."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    return text


def _coerce(name: str, key: str, value, default):
    """Check ``value`` against the type of the parameter's default (bool/int/float); str passes through."""
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(default, str):
        return str(value)
    else:
        return value
    if not ok:
        raise ConfigError(f"scheduler {name!r}: {key}={value!r} should be a {type(default).__name__}")
    return value


def make_scheduler(spec: str, seed: int = 0) -> Scheduler:
    """Build a scheduler from its spec string ``"name,key=value,..."``.

    Args:
        spec: ``name`` is a key of :data:`SCHEDULERS`; keys are its constructor's keyword
            parameters (those with spec-able defaults: bool, int, float, str).
        seed: the scheduler's seed (derive it from the experiment's seed).

    Raises:
        ConfigError: unknown scheduler or keyword (the message lists the valid ones), a
            repeated or malformed item, ``seed`` in the spec, or a value of the wrong type.
    """
    name, *items = [part.strip() for part in spec.split(",")]
    if name not in SCHEDULERS:
        raise ConfigError(unknown_name("scheduler", name, SCHEDULERS))
    cls = SCHEDULERS[name]
    params = {
        k: p for k, p in inspect.signature(cls.__init__).parameters.items()
        if k not in ("self", "seed") and isinstance(p.default, (bool, int, float, str))
    }
    kwargs: dict[str, object] = {}
    for item in items:
        key, sep, text = (s.strip() for s in item.partition("="))
        if not sep or not key:
            raise ConfigError(f"scheduler spec {spec!r}: expected key=value, got {item!r}")
        if key == "seed":
            raise ConfigError(f"scheduler {name!r}: seed is not a spec keyword; it comes from the experiment")
        if key in kwargs:
            raise ConfigError(f"scheduler spec {spec!r}: keyword {key!r} given twice")
        if key not in params:
            if not params:
                raise ConfigError(f"unknown {name} scheduler keyword {key!r}; {name} takes no keywords")
            raise ConfigError(unknown_name(f"{name} scheduler keyword", key, params))
        kwargs[key] = _coerce(name, key, _parse_value(text), params[key].default)
    return cls(seed=seed, **kwargs)
