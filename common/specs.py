"""Spec strings for registries: ``"name"`` or ``"name,key=value,..."`` -> an instance.

Used by every extension point (placement policies, schedulers) so that spec strings parse,
type-check and fail the same way. Values parse as bool (``true``/``false``, any case), then
int, then float, else string; a value for a parameter whose default is a bool, int, float or
str must have that type. ``seed`` never comes from a spec: it is derived from the
experiment's seed and passed separately.
"""

from __future__ import annotations

import inspect
import re

from common.errors import TestbedError, unknown_name

SpecValue = bool | int | float | str


def parse_value(text: str) -> SpecValue:
    """Parse one spec value: bool, then int, then float, else the string itself."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    return text


def parse_spec(spec: str, noun: str = "policy",
               error: type[TestbedError] = TestbedError) -> tuple[str, dict[str, SpecValue]]:
    """Split ``"name,key=value,..."`` into the name and parsed keyword values.

    Raises:
        error: empty name, an item without ``=``, an empty key or a repeated key.
    """
    name, *items = [part.strip() for part in spec.split(",")]
    if not name:
        raise error(f"spec {spec!r}: empty {noun} name")
    kwargs: dict[str, SpecValue] = {}
    for item in items:
        key, sep, value = (s.strip() for s in item.partition("="))
        if not sep or not key:
            raise error(f"spec {spec!r}: expected key=value, got {item!r}")
        if key in kwargs:
            raise error(f"spec {spec!r}: keyword {key!r} given twice")
        kwargs[key] = parse_value(value)
    return name, kwargs


def _check_type(what: str, key: str, value, default, error):
    """Coerce ``value`` to the type of the parameter's default where that is bool/int/float/str."""
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
        raise error(f"{what}: {key}={value!r} should be a {type(default).__name__}")
    return value


def spec_keywords(cls, context=()) -> dict[str, inspect.Parameter]:
    """The parameters of ``cls``'s constructor a spec string may set: its named parameters but ``self``,
    ``seed`` (the experiment's) and those the run gives as ``context``."""
    params = inspect.signature(cls.__init__).parameters
    return {k: p for k, p in params.items() if k not in ("self", "seed", *context)
            and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}


def build_from_spec(registry: dict, spec: str, seed: int, kind: str, noun: str,
                    error: type[TestbedError], context: dict | None = None):
    """Instantiate ``registry[name](seed=seed, **kwargs)`` from a spec string.

    Args:
        registry: name -> class.
        spec: the spec string.
        seed: passed as ``seed=``.
        context: keyword arguments the run gives every class that takes them (never spec keywords).
        kind: what the registry holds, for messages (``"placement policy"``, ``"scheduler"``).
        noun: short name in keyword messages (``"policy"``, ``"scheduler"``).
        error: the error class to raise.

    Raises:
        error: unknown name or keyword (listing the valid ones), ``seed`` in the spec, a
            missing required keyword, a wrongly typed value or a malformed spec.
    """
    name, kwargs = parse_spec(spec, noun, error)
    if name not in registry:
        raise error(unknown_name(kind, name, registry))
    cls = registry[name]
    params = inspect.signature(cls.__init__).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    context = context or {}
    valid = spec_keywords(cls, context)
    what = f"{noun} {name!r}"
    for key in list(kwargs):
        if key == "seed" or key in context:
            raise error(f"{what}: {key} is not a spec keyword; it comes from the experiment")
        if key in valid:
            kwargs[key] = _check_type(what, key, kwargs[key], valid[key].default, error)
        elif not takes_any and valid:
            raise error(unknown_name(f"{name} {noun} keyword", key, valid))
        elif not takes_any:
            raise error(f"unknown {name} {noun} keyword {key!r}; {name} takes no keywords")
    missing = [k for k, p in valid.items() if p.default is inspect.Parameter.empty and k not in kwargs]
    if missing:
        raise error(f"{what}: spec {spec!r} lacks required keyword(s) {', '.join(missing)}")
    given = {k: v for k, v in context.items() if k in params or takes_any}
    return cls(seed=seed, **given, **kwargs)


def safe_name(spec: str) -> str:
    """A directory name for a spec string (each run of other characters than letters, digits and
    ``_.=-`` becomes ``_``)."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", spec)
