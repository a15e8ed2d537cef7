"""What a parameter sweep runs (:mod:`experiment.run.sweep`): the field it varies, its values and seeds,
and each (value, seed) as a validated config. Pure: command-line text and a config in, records out.

* :func:`parse_vary` and :func:`parse_seeds`: command-line text -> a :class:`Vary` and seeds;
* :func:`check_path`: whether a dotted path names a scalar field of a config;
* :func:`sweep_points`: (config, :class:`Vary`, seeds) -> a :class:`SweepPoint` per value and
  seed, each config rebuilt from the base's dict form with the value and seed set and validated
  as any config is, so a bad value fails before anything runs.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import os
import re
from collections.abc import Sequence
from typing import Any

from common.errors import ConfigError
from common.specs import safe_name
from experiment.config.file import parse_value
from experiment.config.rules import ListOf, MapOf, Section, check_fields, show
from experiment.config.schema import ExperimentConfig, TopologyConfig, from_dict, to_dict, validate

SweepValue = int | float | bool | str
"""A value a sweep gives its parameter: a YAML scalar."""

MAX_VALUES = 100
MAX_SEEDS = 1000
MAX_SEED = 2**32 - 1  # config.seed's range

_SEEDS_RE = re.compile(r"(\d+)(?:-(\d+))?")


@dataclasses.dataclass(frozen=True)
class Vary:
    """The config field a sweep varies, and its values.

    Attributes:
        path: the field's path in the config's dict form (:func:`experiment.config.schema.to_dict`,
            whose ``topology`` holds ``kind`` and the builder's parameters side by side), e.g.
            ``("topology", "oversubscription")``.
        values: the values in the order given, each a YAML scalar.
    """

    path: tuple[str, ...]
    values: tuple[SweepValue, ...]

    @property
    def name(self) -> str:
        """The dotted path, ``topology.oversubscription``."""
        return ".".join(self.path)

    @property
    def param(self) -> str:
        """The field's own name, ``oversubscription``: what progress lines and directories are named by."""
        return self.path[-1]

    def label(self, value: SweepValue) -> str:
        """``oversubscription=4``: a value as progress lines and its directory name it."""
        return f"{self.param}={value_text(value)}"


@dataclasses.dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep: the base config with one value of the parameter and one seed.

    Attributes:
        value_index: the value's position in :attr:`Vary.values`.
        value: the parameter's value.
        seed: the config's seed.
        cfg: the point's whole config, validated for the sweep's back end.
        path: its directory, relative to the sweep's (``oversubscription=4/seed-3``).
        graph: the topology graph its validation built (what the run places on; not compared).
    """

    value_index: int
    value: SweepValue
    seed: int
    cfg: ExperimentConfig
    path: str
    graph: Any = dataclasses.field(compare=False, repr=False)


def value_text(value: SweepValue) -> str:
    """A value as YAML writes it (``true``, ``4``, ``2.5``, ``fifo``)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def parse_vary(text: str) -> Vary:
    """Parse ``PATH=V1,V2,...`` (or ``PATH=[V1, V2, ...]``, a YAML list, for values holding commas).

    ``PATH`` is a dotted path into the config's dict form (``topology.oversubscription``,
    ``simulator.latency_us``, ``background.h1``, ``scheduler``); each value is read as in a
    config file (an int, float, bool or string). Whether a value suits the field is
    :func:`sweep_points`'s question, asked of the whole config.

    Raises:
        ConfigError: no ``=``, an empty or repeated value, a value that is not a scalar, more
            than :data:`MAX_VALUES` values, or a path that is not a scalar field of a config (the
            message names the valid fields at that level).
    """
    name, sep, rest = text.partition("=")
    name, rest = name.strip(), rest.strip()
    if not sep or not name:
        raise ConfigError(f"--vary: {show(text)} is not PATH=V1,V2,... (e.g. topology.oversubscription=1,2,4)")
    path = tuple(part.strip() for part in name.split("."))
    if not all(path):
        raise ConfigError(f"--vary: {show(name)} has an empty part (a dotted path, e.g. topology.oversubscription)")
    check_path(path)
    if not rest:
        raise ConfigError(f"--vary {name}: no values given (PATH=V1,V2,...)")
    if rest.startswith("["):
        values = _yaml(rest, name)
        if not isinstance(values, list):
            raise ConfigError(f"--vary {name}: {show(rest)} is not a YAML list of values")
        items = [(repr(v), v) for v in values]
    else:
        items = [(part.strip(), _yaml(part.strip(), name) if part.strip() else None) for part in rest.split(",")]
    for i, (item, value) in enumerate(items, 1):
        if value is None:
            raise ConfigError(f"--vary {name}: value {i} is empty (PATH=V1,V2,...; no empty or null values)")
        if not isinstance(value, (int, float, bool, str)):
            raise ConfigError(f"--vary {name}: {show(item)} is a {type(value).__name__}, not a value a sweep sets "
                              "(an int, float, bool or string)")
    vary = Vary(path, tuple(v for _, v in items))
    _check_values(vary)
    return vary


def _yaml(text: str, name: str):
    """``text`` read as a config file reads a value."""
    try:
        return parse_value(text)
    except ConfigError as e:
        raise ConfigError(f"--vary {name}: {show(text)} {e}") from None


def _check_values(vary: Vary) -> None:
    """At least one value and at most :data:`MAX_VALUES`, no two alike: equal (``1`` and ``1.0``, the
    same run twice) or with one directory name (``a/b`` and ``a_b``)."""
    if not vary.values:
        raise ConfigError(f"--vary {vary.name}: no values given (PATH=V1,V2,...)")
    if len(vary.values) > MAX_VALUES:
        raise ConfigError(f"--vary {vary.name}: {len(vary.values)} values given (at most {MAX_VALUES})")
    for i, v in enumerate(vary.values):
        for other in vary.values[:i]:
            if same_value(v, other) or safe_name(vary.label(v)) == safe_name(vary.label(other)) or (
                    is_number(v) and is_number(other) and v == other):
                raise ConfigError(f"--vary {vary.name}: {show(v)} is given twice (as {show(other)}; each value once)")


def same_value(a: SweepValue, b: SweepValue) -> bool:
    """Equal and of one type (``True == 1`` in Python, but not as sweep values)."""
    return type(a) is type(b) and a == b


def is_number(v: SweepValue) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _builder_params() -> dict[str, tuple[str, ...]]:
    """Each registered topology builder's parameters, by kind."""
    from topo import TOPOLOGIES

    return {kind: tuple(inspect.signature(f).parameters) for kind, f in TOPOLOGIES.items()}


def check_path(path: Sequence[str]) -> None:
    """Check that ``path`` names a scalar field of a config's dict form.

    Sections are walked by their dataclass fields; ``topology`` holds ``kind`` and any registered
    builder's parameters (whether the config's builder takes it is :func:`sweep_points`'s to
    check); ``background`` holds a machine's busy GPUs under its name. Lists (``jobs``,
    ``policies``, ...) are not swept, nor is ``seed`` (``--seeds`` sets it).

    Raises:
        ConfigError: naming the path, what is wrong, and the valid fields at that level.
    """
    cls, where = ExperimentConfig, "config"
    for i, key in enumerate(path):
        last = i == len(path) - 1
        rest = ".".join(path[i + 1:])
        if cls is TopologyConfig:
            params = _builder_params()
            if key != "kind" and not any(key in p for p in params.values()):
                by_kind = "; ".join(f"{kind}: {', '.join(p)}" for kind, p in params.items())
                _bad_key(path, key, where, ["kind", *{k for p in params.values() for k in p}],
                         f"kind and its builder's parameters; {by_kind}")
            if not last:
                _not_below(path, i)
            return
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if key not in fields:
            _bad_key(path, key, where, list(fields), ", ".join(fields))
        if cls is ExperimentConfig and key == "seed":
            raise ConfigError(f"--vary {'.'.join(path)}: the seed is what --seeds sets (e.g. --seeds 1-10)")
        rule, where = fields[key].metadata["rule"], f"{where}.{key}"
        if isinstance(rule, Section):
            if last:
                keys = ("kind, builder parameters" if rule.cls is TopologyConfig
                        else ", ".join(f.name for f in dataclasses.fields(rule.cls)))
                raise ConfigError(f"--vary {'.'.join(path)}: {where} is a section; vary one of its fields ({keys})")
            cls = rule.cls
        elif isinstance(rule, MapOf):
            if last:
                raise ConfigError(f"--vary {'.'.join(path)}: {where} is a mapping ({rule.describe()}); vary one of "
                                  f"its entries, e.g. {'.'.join(path)}.h1")
            if len(path) > i + 2:
                _not_below(path, i + 1)
            return
        elif isinstance(rule, ListOf):
            raise ConfigError(f"--vary {'.'.join(path)}: {where} is a list ({rule.describe()}); a sweep varies "
                              "one scalar field")
        elif not last:
            raise ConfigError(f"--vary {'.'.join(path)}: {where} is a value, with nothing below it ({rest!r} "
                              f"is not a field)")


def _bad_key(path: Sequence[str], key: str, where: str, names: list[str], fields: str):
    hint = difflib.get_close_matches(key, names, n=1)
    extra = f"; did you mean {hint[0]!r}?" if hint else ""
    raise ConfigError(f"--vary {'.'.join(path)}: {key!r} is not a field of {where} (fields: {fields}{extra})")


def _not_below(path: Sequence[str], i: int):
    raise ConfigError(f"--vary {'.'.join(path)}: {'.'.join(path[:i + 1])} is a value, with nothing below it")


def parse_seeds(text: str) -> tuple[int, ...]:
    """Parse seeds: ``1-10`` (inclusive), ``1,2,5`` or both (``1-3,7``), each in [0, 2^32 - 1].

    Raises:
        ConfigError: an item that is not a seed or an ascending range, a seed given twice, or more
            than :data:`MAX_SEEDS` seeds.
    """
    seeds: list[int] = []
    for item in (part.strip() for part in text.split(",")):
        m = _SEEDS_RE.fullmatch(item)
        if not m:
            raise ConfigError(f"--seeds: {show(item)} is not a seed or a range of seeds (e.g. 1-10, 1,2,5 or 1-3,7)")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi > MAX_SEED or hi < lo:
            problem = "is out of range" if hi > MAX_SEED else "is a descending range"
            raise ConfigError(f"--seeds: {show(item)} {problem} (seeds are integers in [0, {MAX_SEED}], ranges "
                              "ascending)")
        if len(seeds) + hi - lo + 1 > MAX_SEEDS:
            raise ConfigError(f"--seeds: {show(text)} is more than {MAX_SEEDS} seeds")
        seeds.extend(range(lo, hi + 1))
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise ConfigError(f"--seeds: seed {twice[0]} is given twice in {show(text)} (each seed once)")
    return tuple(seeds)


# -- the sweep's points --------------------------------------------------------------------------


def with_value(cfg: ExperimentConfig, path: Sequence[str], value: SweepValue) -> ExperimentConfig:
    """``cfg`` with the field at ``path`` (in its dict form, :class:`Vary`) set to ``value``, rebuilt
    through :func:`~experiment.config.schema.from_dict` and its field rules (not validated against a
    back end).

    Raises:
        ConfigError: the value breaks a field's rule.
    """
    data = to_dict(cfg)
    section = data
    for key in path[:-1]:
        section = section[key]
    section[path[-1]] = value
    return check_fields(from_dict(data))


def sweep_points(cfg: ExperimentConfig, vary: Vary, seeds: Sequence[int],
                 backend: str = "sim") -> tuple[SweepPoint, ...]:
    """Every (value, seed) of the sweep as a config, in value-major order.

    Each is rebuilt from the base's dict form (:func:`experiment.config.schema.to_dict`) with the
    parameter set to the value and ``seed`` to the seed, through :func:`~experiment.config.schema.from_dict`
    and :func:`~experiment.config.schema.validate` for the back end (``sim`` or ``emu``): held to every rule a
    config file is.

    Raises:
        ConfigError: an invalid path, no seeds or a repeated one, or a point whose config is
            invalid (the message names the value and the seed, then the config's complaint).
    """
    check_path(vary.path)
    _check_values(vary)
    if not seeds:
        raise ConfigError("--seeds: no seeds given")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds: a seed is given twice ({', '.join(map(str, seeds))}; each seed once)")
    points = []
    for i, value in enumerate(vary.values):
        for seed in seeds:
            try:
                point = with_value(dataclasses.replace(cfg, seed=seed), vary.path, value)
                g = validate(point, backend=backend)
            except ConfigError as e:
                raise ConfigError(f"sweep point {vary.name}={value_text(value)} (seed {seed}): {e}") from None
            points.append(SweepPoint(i, value, seed, point, os.path.join(safe_name(vary.label(value)),
                                                                          f"seed-{seed}"), g))
    return tuple(points)
