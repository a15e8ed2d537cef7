"""Schedulers: the registry, spec strings and the shared interface.

The scheduling stage decides the order of jobs and which running jobs to preempt; the
placement stage (``placement/``) then decides where the started jobs go, so any scheduler
combines with any placer. A scheduler is chosen by a spec string, the registry key
optionally followed by keyword arguments for its constructor::

    make_scheduler("tiresias")
    make_scheduler("tiresias,priority=gittins,thresholds_gpu_s=3600,promote_knob=8")
    make_scheduler("yarn_cs")
    make_scheduler("waves")          # static experiments: one wave at a time
    make_scheduler("themis,lease_s=600")  # leases auctioned for finish-time fairness
    make_scheduler("batch,period_s=60")   # NetPack's periodic batches

Values are parsed as ``bool`` (``true``/``false``), ``int``, ``float`` (``inf`` included), else
kept as ``str``. ``seed`` always comes from the experiment, never from the spec. Adding a
scheduler is one module plus one line in :data:`SCHEDULERS`; no import-time registration.
"""

from __future__ import annotations

from common import specs
from common.errors import ConfigError
from scheduling.base import Decision, JobStatus, PriorityScheduler, Scheduler
from scheduling.batch import BatchScheduler
from scheduling.fifo import FifoScheduler, YarnCsScheduler
from scheduling.themis import ThemisScheduler
from scheduling.tiresias import (
    GittinsScheduler,
    LasScheduler,
    SmallestFirstScheduler,
    SrsfScheduler,
    SrtfScheduler,
    TiresiasScheduler,
)
from scheduling.waves import WaveScheduler

__all__ = [
    "SCHEDULERS",
    "BatchScheduler",
    "Decision",
    "FifoScheduler",
    "GittinsScheduler",
    "JobStatus",
    "LasScheduler",
    "PriorityScheduler",
    "Scheduler",
    "SmallestFirstScheduler",
    "SrsfScheduler",
    "SrtfScheduler",
    "ThemisScheduler",
    "TiresiasScheduler",
    "WaveScheduler",
    "YarnCsScheduler",
    "make_scheduler",
]

SCHEDULERS: dict[str, type[Scheduler]] = {
    "waves": WaveScheduler,
    "fifo": FifoScheduler,
    "yarn_cs": YarnCsScheduler,
    "tiresias": TiresiasScheduler,
    "las": LasScheduler,
    "gittins": GittinsScheduler,
    "srsf": SrsfScheduler,
    "srtf": SrtfScheduler,
    "sf": SmallestFirstScheduler,
    "themis": ThemisScheduler,
    "batch": BatchScheduler,
}


def make_scheduler(spec: str, seed: int = 0) -> Scheduler:
    """Build a scheduler from its spec string ``"name,key=value,..."`` (see ``common.specs``).

    Args:
        spec: ``name`` is a key of :data:`SCHEDULERS`; keys are its constructor's keyword parameters.
        seed: the scheduler's seed (derive it from the experiment's seed).

    Raises:
        ConfigError: unknown scheduler or keyword (the message lists the valid ones), a
            repeated or malformed item, ``seed`` in the spec, or a value of the wrong type.
    """
    return specs.build_from_spec(SCHEDULERS, spec, seed, "scheduler", "scheduler", ConfigError)
