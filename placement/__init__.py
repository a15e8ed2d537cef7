"""Placement policies: the registry, spec strings and the shared interface.

A policy is chosen by a spec string, the registry key optionally followed by keyword
arguments for its constructor::

    make_policy("consolidate")
    make_policy("random,strict_order=true", seed=3)

Values are parsed as ``bool`` (``true``/``false``, any case), ``int``, ``float``, else kept
as ``str``. The keywords a policy accepts are the parameters of its ``__init__`` other than
``seed``, which always comes from the experiment's seed (the ``seed`` argument of
:func:`make_policy`), never from the spec.

Adding a policy is one module with a :class:`PlacementPolicy` subclass plus one line in
:data:`POLICIES`; ``tests/test_placement_contract.py`` then checks it automatically. There is
no import-time auto-registration.
"""

from __future__ import annotations

import inspect

from common.errors import PlacementError, unknown_name
from placement.base import (
    BACKGROUND_JOB,
    Cluster,
    ClusterView,
    GpuSlot,
    JobRequest,
    MachineInfo,
    Placement,
    PlacementPolicy,
    Tentative,
    jobs_by_name,
)
from placement.consolidate import ConsolidatePolicy
from placement.elasticflow import ElasticFlowPolicy
from placement.hived import HivedPolicy
from placement.random_policy import RandomPolicy
from placement.spread import SpreadPolicy
from placement.tiresias_placement import TiresiasPolicy
from placement.titan import TitanPolicy

__all__ = [
    "BACKGROUND_JOB",
    "POLICIES",
    "Cluster",
    "ClusterView",
    "ConsolidatePolicy",
    "GpuSlot",
    "JobRequest",
    "MachineInfo",
    "Placement",
    "PlacementPolicy",
    "RandomPolicy",
    "SpreadPolicy",
    "Tentative",
    "jobs_by_name",
    "make_policy",
    "parse_spec",
]

POLICIES: dict[str, type[PlacementPolicy]] = {
    "random": RandomPolicy,
    "consolidate": ConsolidatePolicy,
    "spread": SpreadPolicy,
    "elasticflow": ElasticFlowPolicy,
    "hived": HivedPolicy,
    "tiresias": TiresiasPolicy,
    "titan": TitanPolicy,
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


def parse_spec(spec: str) -> tuple[str, dict[str, bool | int | float | str]]:
    """Split a spec string ``"name,key=value,..."`` into the name and parsed keyword values.

    Args:
        spec: the spec string; whitespace around names, keys and values is ignored.

    Returns:
        ``(name, kwargs)``.

    Raises:
        PlacementError: empty name, an item without ``=``, an empty key or a repeated key.
    """
    name, *items = [part.strip() for part in spec.split(",")]
    if not name:
        raise PlacementError(f"placement spec {spec!r}: empty policy name")
    kwargs: dict[str, bool | int | float | str] = {}
    for item in items:
        key, sep, value = (s.strip() for s in item.partition("="))
        if not sep or not key:
            raise PlacementError(f"placement spec {spec!r}: expected key=value, got {item!r}")
        if key in kwargs:
            raise PlacementError(f"placement spec {spec!r}: keyword {key!r} given twice")
        kwargs[key] = _parse_value(value)
    return name, kwargs


def _check_type(name: str, key: str, value, default):
    """Coerce ``value`` to the type of the parameter's default where that type is bool/int/float."""
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        return value
    if not ok:
        raise PlacementError(
            f"policy {name!r}: {key}={value!r} should be a {type(default).__name__}")
    return value


def make_policy(spec: str, seed: int = 0) -> PlacementPolicy:
    """Build a policy from its spec string.

    Args:
        spec: ``"name"`` or ``"name,key=value,..."`` with ``name`` a key of :data:`POLICIES`.
        seed: the policy's seed (derive it from the experiment's seed).

    Returns:
        The policy instance.

    Raises:
        PlacementError: unknown policy name, unknown keyword (the message lists the valid
            ones), a missing required keyword, a value of the wrong type for a bool/int/float
            parameter, or a malformed spec.
    """
    name, kwargs = parse_spec(spec)
    if name not in POLICIES:
        raise PlacementError(unknown_name("placement policy", name, POLICIES))
    cls = POLICIES[name]
    params = inspect.signature(cls.__init__).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    valid = {
        k: p for k, p in params.items()
        if k not in ("self", "seed")
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    for key in list(kwargs):
        if key == "seed":
            raise PlacementError(
                f"policy {name!r}: seed is not a spec keyword; it comes from the experiment seed")
        if key in valid:
            kwargs[key] = _check_type(name, key, kwargs[key], valid[key].default)
        elif not takes_any and valid:
            raise PlacementError(unknown_name(f"{name} policy keyword", key, valid))
        elif not takes_any:
            raise PlacementError(f"unknown {name} policy keyword {key!r}; {name} takes no keywords")
    missing = [k for k, p in valid.items() if p.default is inspect.Parameter.empty and k not in kwargs]
    if missing:
        raise PlacementError(f"policy {name!r}: spec {spec!r} lacks required keyword(s) {', '.join(missing)}")
    return cls(seed=seed, **kwargs)
