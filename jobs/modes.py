"""What the workers of a run do with a model (``mode:`` in a config), each an object chosen once.

A part of the testbed that treats the modes differently asks the run's :class:`WorkMode`
(``work_mode(cfg.mode)``) rather than comparing names: whether its ranks really train, which
gradient buckets they send, and which worker runtime it needs. Adding a mode is one entry in
:data:`WORK_MODES`. Pure: standard library and :mod:`jobs.models` only.
"""

from __future__ import annotations

import dataclasses

from common.errors import JobError, unknown_name
from jobs.models import TRAINABLE_MODELS, ModelProfile, scaled_buckets


@dataclasses.dataclass(frozen=True)
class WorkMode:
    """One mode a run's workers may run in.

    Attributes:
        name: its name in configs (the key of :data:`WORK_MODES`).
        help: one line for the configuration reference.
        trains: its ranks run real forward and backward passes of a model in ``TRAINABLE_MODELS``
            (True) or emulate the model's compute and replay its gradient buckets (False).
        runtime: the worker runtime it needs (``emulator.variants.WORKER_RUNTIMES``), or None: the
            config's ``runtime``.
    """

    name: str
    help: str
    trains: bool
    runtime: str | None = None

    def buckets(self, profile: ModelProfile, scale: float) -> tuple[int, ...]:
        """The gradient buckets its ranks allreduce per iteration: a replayed model's at the run's
        time-preserving ``scale``; a trained model's as DDP makes them (a real model cannot shrink)."""
        return profile.bucket_bytes if self.trains else scaled_buckets(profile, scale)

    def check_model(self, model: str, where: str) -> None:
        """Raises :class:`JobError` (naming ``where``) if ranks in this mode cannot run ``model``."""
        if self.trains and model not in TRAINABLE_MODELS:
            raise JobError(f"{where}: mode {self.name!r} trains only {', '.join(sorted(TRAINABLE_MODELS))}, "
                           f"not {model!r}; use mode 'replay' for profiled models")


REPLAY = WorkMode("replay", "emulated compute at the model's profiled time, its gradient buckets replayed at the "
                            "run's scale", trains=False)
TRAIN = WorkMode("train", "real DDP training of a model small enough for these machines (small_cnn), in torch",
                 trains=True, runtime="torch")

WORK_MODES: dict[str, WorkMode] = {m.name: m for m in (REPLAY, TRAIN)}
"""Every mode a config may name, by name."""


def work_mode(name: str) -> WorkMode:
    """The mode registered under ``name``; raises :class:`JobError` listing the valid names."""
    try:
        return WORK_MODES[name]
    except KeyError:
        raise JobError(unknown_name("mode", name, WORK_MODES)) from None
