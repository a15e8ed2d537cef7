"""Reading an experiment file safely: bounded, strict YAML, before any configuration is built.

:func:`read_yaml` bounds the file itself (a regular file of at most ``MAX_FILE_BYTES``, strict
UTF-8, no NUL byte), then its shape from parser events (nesting depth ``MAX_DEPTH``,
``MAX_VALUES`` values after alias expansion, values of at most ``MAX_SCALAR`` characters)
before anything recursive walks it, and loads it with YAML's safe loader made strict about
duplicate keys. Every failure is one :class:`~common.errors.ConfigError` line naming the path
and, where it has one, the line. What the values mean is :mod:`experiment.config.schema`'s.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from common.errors import ConfigError
from common.files import UnreadableFile, read_regular_file
from experiment.config.rules import MAX_TEXT, show

MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 10  # collections inside collections; a config needs 3 (top level, jobs, one job)
MAX_VALUES = 100_000  # scalars and collections after alias expansion; a 1000-job config has ~10 000
MAX_SCALAR = 4 * MAX_TEXT  # characters of any value in the file (Python refuses to read an int of > 4300 digits)


_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_BaseLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (YAML would
    silently keep the last; keys brought in by a merge, ``<<: *defaults``, may be overridden), and
    that ``1e12`` is a float as in YAML 1.2 and JSON (YAML 1.1 wants ``1.0e+12``; ``1e12`` would
    be a string)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    key = self.construct_object(key_node, deep=deep)
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping", node.start_mark, f"found duplicate key {show(key)}",
                            key_node.start_mark)
                    seen.add(key)
        return super().construct_mapping(node, deep=deep)


_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"[-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+$"),
                                    list("-+0123456789"))


def _read_text(path: str) -> str:
    """The file as text: a regular file (a FIFO would block), at most ``MAX_FILE_BYTES``, UTF-8, no NUL bytes."""
    try:
        data = read_regular_file(path, MAX_FILE_BYTES)
    except UnreadableFile as e:
        hint = "; a config is a short YAML file" if str(e).startswith("larger than") else ""
        raise ConfigError(f"config {path}: cannot read it: {e}{hint}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"config {path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
                          f"save it as UTF-8") from None
    if "\0" in text:
        raise ConfigError(f"config {path}: a binary file (NUL byte at offset {text.index(chr(0))}), not YAML text")
    return text


def _check_shape(text: str, path: str) -> None:
    """Bound nesting depth and the number of values after alias expansion, from parser events.

    The parser is iterative, so this runs before anything recursive sees the document:
    composing a 20 000-deep one overflows the stack, and an alias bomb ("billion laughs")
    shares its nodes while loading but expands to billions of values wherever it is walked.
    """
    depth = values = 0
    sizes: dict[str, int] = {}  # anchor -> values in its node, aliases expanded
    open_nodes: list[tuple[str | None, int]] = []
    for event in yaml.parse(text, Loader=_BaseLoader):
        if isinstance(event, yaml.AliasEvent):
            values += sizes.get(event.anchor, 1)  # an alias inside its own anchor's node: a cycle, not expanded
        elif isinstance(event, yaml.ScalarEvent):
            values += 1
            if len(event.value) > MAX_SCALAR:
                raise ConfigError(f"config {path}: a value of {len(event.value)} characters at line "
                                  f"{event.start_mark.line + 1}; no value is longer than {MAX_TEXT}")
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            values += 1
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(f"config {path}: nested deeper than {MAX_DEPTH} levels at line "
                                  f"{event.start_mark.line + 1} (a config needs 3)")
            open_nodes.append((event.anchor, values))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            anchor, first = open_nodes.pop()
            if anchor:
                sizes[anchor] = values - first + 1
        if values > MAX_VALUES:
            raise ConfigError(f"config {path}: more than {MAX_VALUES} values with aliases expanded (at line "
                              f"{event.start_mark.line + 1}); a config has a few hundred")


def parse_value(text: str):
    """``text`` read as a config file reads a value (this module's YAML rules: ``1e3`` is a float,
    duplicate keys are refused, ...).

    Raises:
        ConfigError: not YAML, or a value YAML cannot construct (the message says why, without the
            text: the caller names it).
    """
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except (yaml.YAMLError, ValueError) as e:
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"is not a YAML value: {problem[:120]}") from None


def read_yaml(path: str) -> Any:
    """The parsed content of the YAML file at ``path``, read within the limits above.

    Raises:
        ConfigError: the file cannot be read, is too large, not UTF-8, not YAML, too deeply
            nested, expands to too many values, repeats a key, or holds a value YAML cannot construct.
    """
    text = _read_text(path)
    try:
        _check_shape(text, path)
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"config {path} is not valid YAML{where}: {problem[:160]}") from None
    except ValueError as e:  # a constructor's own, e.g. for a date like 2024-13-01
        raise ConfigError(f"config {path}: a value cannot be read: {str(e)[:160]}") from None
