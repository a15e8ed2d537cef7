"""``--set KEY=VALUE``: one config field changed from the command line. Pure: a config and text in,
a config out.

A key is the field's dotted path in the config's dict form (:func:`experiment.config.schema.to_dict`),
as a file writes it: ``iterations``, ``topology.k``, ``ecn.method``, ``background.h1``; a list
item by its index, ``jobs.0.workers``. The value is read as the file reads a value (YAML:
``[consolidate, spread]`` is a list, ``1e3`` a float). The changed config is rebuilt and checked
by the same rules as a file (:func:`experiment.config.schema.from_dict`, :func:`~experiment.config.rules.check_fields`);
whether it suits the back end is the run's validation, as for a file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from common.errors import ConfigError
from experiment.config.file import parse_value
from experiment.config.rules import check_fields
from experiment.config.schema import ExperimentConfig, from_dict, to_dict


def parse_setting(text: str) -> tuple[tuple[str, ...], Any]:
    """``KEY=VALUE`` -> (path, value).

    Raises:
        ConfigError: no ``=``, an empty key or path step, or a value that is not YAML.
    """
    key, eq, raw = text.partition("=")
    path = tuple(key.strip().split("."))
    if not eq or not key.strip() or any(not step for step in path):
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE with KEY a dotted path, e.g. --set topology.k=6")
    try:
        value = parse_value(raw)
    except ConfigError as e:
        raise ConfigError(f"--set {key}: the value {raw!r} {e}") from None
    return path, value


def _index(node: Any, step: str, key: str, last: bool) -> Any:
    """The key or index ``step`` names in ``node``: a mapping's key (made where missing below the last
    step: an unknown key is the config rules' to refuse, with their hint) or a list's index."""
    if isinstance(node, dict):
        if not last:
            node.setdefault(step, {})
        return step
    if isinstance(node, list):
        if not step.isdigit() or int(step) >= len(node):
            raise ConfigError(f"--set {key}: {step!r} is not an index of a list of {len(node)} (0-{len(node) - 1})")
        return int(step)
    raise ConfigError(f"--set {key}: {step!r} is below a value, not a section")


def apply_settings(cfg: ExperimentConfig, settings: Sequence[str]) -> ExperimentConfig:
    """``cfg`` with every ``KEY=VALUE`` of ``settings`` applied in order, checked as a file is.

    Raises:
        ConfigError: a malformed setting, a path that names nothing, or a config the rules refuse
            (the message names the settings, then the rule's complaint).
    """
    if not settings:
        return cfg
    data = to_dict(cfg)
    for text in settings:
        path, value = parse_setting(text)
        node, key = data, ".".join(path)
        for step in path[:-1]:
            node = node[_index(node, step, key, last=False)]
        node[_index(node, path[-1], key, last=True)] = value
    try:
        return check_fields(from_dict(data, os.getcwd()))  # a path typed on the command line: from here
    except ConfigError as e:
        raise ConfigError(f"--set {' '.join(settings)}: {e}") from None
