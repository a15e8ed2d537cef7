"""Registries whose entries name their object as ``"module:attr"``, imported only when asked for.

A registry of this kind (``experiment.BACKENDS``, ``emulator.journal.UNDO``) keeps its modules
unloaded until one entry is used, so choosing one never imports the others.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping


def load(registry: Mapping[str, str], name: str, what: str, error_cls: type[Exception]):
    """The object ``registry[name]`` names as ``"module:attr"``, its module imported now.

    Raises:
        error_cls: unknown name, as ``unknown <what> <name>; valid: ...`` (registry order).
    """
    target = registry.get(name)
    if target is None:
        raise error_cls(f"unknown {what} {name!r}; valid: {', '.join(registry)}")
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
