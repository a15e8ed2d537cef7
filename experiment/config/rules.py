"""Field rules of the experiment configuration: each field's type and valid range, declared once.

A configuration dataclass declares every field with :func:`rule_field`, which puts a rule
(:class:`Integer`, :class:`Real`, :class:`Name`, :class:`Text`, :class:`Scalar`,
:class:`PolicySpec`, :class:`Section`, :class:`ListOf`, :class:`MapOf`) in the field's metadata.
:func:`check_fields` is the one loop that applies them; each rule checks one value and returns it
normalised. Every message has one shape::

    config.<path>: <value> <what is wrong> (<valid range or choices>)

with the value's repr cut to ``MAX_REPR`` characters (:func:`show`), whatever its size.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import reprlib
from collections.abc import Callable, Collection
from typing import Any, NoReturn

from common.errors import ConfigError

MAX_REPR = 60  # characters of a user value quoted in a message
MAX_TEXT = 1024  # characters of a path or a topology parameter string

# Names end up in file and directory names (results, worker outputs), so no '/', no leading '.'.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
NAME_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
KEY_RULE = "an identifier of at most 64 characters"
_SPEC_ITEM_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}=[A-Za-z0-9._-]{1,64}")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


class _ShortRepr(reprlib.Repr):
    """``reprlib`` with every limit near ``MAX_REPR``; integers of more than 128 bits are summarised
    (their decimal repr can take seconds, or raise past 4300 digits)."""

    def __init__(self):
        super().__init__()
        self.maxlevel, self.maxstring, self.maxlong, self.maxother = 2, MAX_REPR, MAX_REPR, MAX_REPR
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 4

    def repr_int(self, x, level):
        bits = x.bit_length()
        return f"<{bits}-bit integer>" if bits > 128 else super().repr_int(x, level)


_REPR = _ShortRepr()


def show(value: Any) -> str:
    """A user value for a message: its repr, at most ``MAX_REPR`` characters, whatever its size."""
    text = _REPR.repr(value)
    return text if len(text) <= MAX_REPR else text[:MAX_REPR - 3] + "..."


def _num(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def fail(where: str, value, problem: str, valid: str) -> NoReturn:
    """Raise the one message shape: ``<where>: <value> <what is wrong> (<valid range or choices>)``."""
    raise ConfigError(f"{where}: {show(value)} {problem} ({valid})")


# -- field rules: each checks one value's type and range and returns it normalised ----------


@dataclasses.dataclass(frozen=True)
class Integer:
    """An ``int`` (not a bool, not a float) in ``[lo, hi]``."""

    lo: int
    hi: int

    def describe(self) -> str:
        return f"an integer in [{self.lo}, {self.hi}]"

    def __call__(self, value, where: str):
        if not _is_int(value):
            fail(where, value, "is not an integer", self.describe())
        if not self.lo <= value <= self.hi:
            fail(where, value, "is out of range", self.describe())
        return value


@dataclasses.dataclass(frozen=True)
class Real:
    """A finite ``int`` or ``float`` (not a bool) in ``[lo, hi]``, or ``(lo, hi]`` with ``lo_open``;
    returned as a float."""

    lo: float
    hi: float
    lo_open: bool = False
    note: str = ""

    def describe(self) -> str:
        note = f"; {self.note}" if self.note else ""
        return f"a finite number in {'(' if self.lo_open else '['}{_num(self.lo)}, {_num(self.hi)}]{note}"

    def __call__(self, value, where: str):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            fail(where, value, "is not a number", self.describe())
        if isinstance(value, float) and not math.isfinite(value):
            fail(where, value, "is not finite", self.describe())
        if not ((self.lo < value) if self.lo_open else (self.lo <= value)) or not value <= self.hi:
            fail(where, value, "is out of range", self.describe())
        return float(value)


@dataclasses.dataclass(frozen=True)
class OrNone:
    """``None`` (not given), or a value ``rule`` accepts."""

    rule: object
    meaning: str = "not given"

    def describe(self) -> str:
        return f"{self.rule.describe()}, or null ({self.meaning})"

    def __call__(self, value, where: str):
        if value is None:
            return None
        try:
            return self.rule(value, where)
        except ConfigError as e:  # the same message, naming null among what is valid
            inner = f"({self.rule.describe()})"
            text = str(e)
            raise ConfigError(text[:-len(inner)] + f"({self.describe()})" if text.endswith(inner) else text) from None


@dataclasses.dataclass(frozen=True)
class Name:
    """A string matching ``pattern``, and one of ``choices`` when given (a collection, or a function
    returning one so that a registry is imported only when checked)."""

    choices: Collection[str] | Callable[[], Collection[str]] | None = None
    pattern: re.Pattern = NAME_RE
    pattern_text: str = NAME_RULE

    def valid(self) -> list[str]:
        choices = self.choices() if callable(self.choices) else self.choices
        return list(choices) if isinstance(choices, tuple) else sorted(choices)

    def describe(self) -> str:
        return f"valid: {', '.join(self.valid())}" if self.choices is not None else self.pattern_text

    def __call__(self, value, where: str):
        if not isinstance(value, str):
            fail(where, value, "is not a string", self.describe())
        if not self.pattern.fullmatch(value):
            fail(where, value, "is not a valid name", self.pattern_text)
        if self.choices is not None and value not in self.valid():
            hint = difflib.get_close_matches(value, self.valid(), n=1)
            fail(where, value, "is unknown", self.describe() + (f"; did you mean {hint[0]!r}?" if hint else ""))
        return value


@dataclasses.dataclass(frozen=True)
class Text:
    """A string of at most ``max_len`` characters without control characters (a path); non-empty
    unless ``empty`` (an optional path, empty for none)."""

    max_len: int = MAX_TEXT
    empty: bool = False

    def describe(self) -> str:
        return (f"{'a' if self.empty else 'a non-empty'} string of at most {self.max_len} characters, "
                "no control characters")

    def __call__(self, value, where: str):
        if not isinstance(value, str):
            fail(where, value, "is not a string", self.describe())
        problem = ("is empty" if not value and not self.empty
                   else f"has {len(value)} characters" if len(value) > self.max_len
                   else "has control characters" if _CONTROL_RE.search(value) else None)
        if problem:
            fail(where, value, problem, self.describe())
        return value


@dataclasses.dataclass(frozen=True)
class PathText(Text):
    """A path: a :class:`Text` that a config file gives relative to its own directory
    (:func:`experiment.config.schema.load` makes it absolute; one typed on the command line is
    relative to the current directory)."""

    def describe(self) -> str:
        return f"a path ({super().describe()}); relative: to the config file's directory"


@dataclasses.dataclass(frozen=True)
class Boolean:
    """``true`` or ``false`` (YAML booleans; not 0/1, not strings)."""

    def describe(self) -> str:
        return "true or false"

    def __call__(self, value, where: str):
        if not isinstance(value, bool):
            fail(where, value, "is not a boolean", self.describe())
        return value


@dataclasses.dataclass(frozen=True)
class Scalar:
    """A finite number of magnitude at most ``max_abs``, or a :class:`Text` (a builder parameter)."""

    max_abs: float = 1e12

    def describe(self) -> str:
        return f"a finite number of magnitude <= {self.max_abs:g}, or {Text().describe()}"

    def __call__(self, value, where: str):
        if isinstance(value, str):
            return Text()(value, where)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) <= self.max_abs
        if not ok:  # NaN fails the comparison too
            fail(where, value, "is not a finite number or a string", self.describe())
        return value


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """A spec string ``name`` or ``name,key=value,...`` of a placement policy (:mod:`placement`) or,
    with ``what``, of another registry's entry (:mod:`scheduling`)."""

    what: str = "policy"
    max_len: int = 256

    def describe(self) -> str:
        return (f"'name' or 'name,key=value,...' of at most {self.max_len} characters; name: {NAME_RULE}; "
                f"values: letters, digits, '.', '_' or '-'")

    def __call__(self, value, where: str):
        if not isinstance(value, str):
            fail(where, value, "is not a string", self.describe())
        name, *items = [part.strip() for part in value.split(",")]
        if (len(value) > self.max_len or not NAME_RE.fullmatch(name)
                or not all(_SPEC_ITEM_RE.fullmatch(item) for item in items)):
            fail(where, value, f"is not a valid {self.what} spec", self.describe())
        return value


@dataclasses.dataclass(frozen=True)
class Section:
    """A nested configuration dataclass, checked field by field."""

    cls: type

    def __call__(self, value, where: str):
        if not isinstance(value, self.cls):
            fail(where, value, "is not a mapping", f"keys: {', '.join(f.name for f in dataclasses.fields(self.cls))}")
        return check_fields(value, where)


@dataclasses.dataclass(frozen=True)
class ListOf:
    """A list (kept as a tuple) of ``lo`` to ``hi`` items, each checked by ``item``."""

    item: Callable
    lo: int
    hi: int
    what: str

    def describe(self) -> str:
        return f"a list of {self.lo} to {self.hi} {self.what}"

    def __call__(self, value, where: str):
        if not isinstance(value, (list, tuple)):
            fail(where, value, "is not a list", self.describe())
        if not self.lo <= len(value) <= self.hi:
            raise ConfigError(f"{where}: {len(value)} {self.what} given ({self.describe()})")
        return tuple(self.item(v, f"{where}[{i}]") for i, v in enumerate(value))


@dataclasses.dataclass(frozen=True)
class MapOf:
    """A mapping of at most ``hi`` entries, keys checked by ``key`` and values by ``value``."""

    key: Callable
    value: Callable
    hi: int
    what: str

    def describe(self) -> str:
        return f"a mapping of at most {self.hi} {self.what}"

    def __call__(self, value, where: str):
        if not isinstance(value, dict):
            fail(where, value, "is not a mapping", self.describe())
        if len(value) > self.hi:
            raise ConfigError(f"{where}: {len(value)} entries given ({self.describe()})")
        return {self.key(k, f"{where} key"): self.value(v, f"{where}.{k}") for k, v in value.items()}


def rule_field(rule, default=dataclasses.MISSING, factory=dataclasses.MISSING, flat: bool = False):
    """A dataclass field with its rule in the metadata; ``flat``: its entries sit directly in the
    parent's mapping in the file (the topology's builder parameters), so messages name them there."""
    return dataclasses.field(default=default, default_factory=factory, metadata={"rule": rule, "flat": flat})


def check_fields(obj, where: str = "config"):
    """Check every field of a configuration dataclass against the rule in its metadata.

    The one place where types and ranges are checked; :func:`experiment.config.schema.validate` calls it
    first, so a configuration changed with ``dataclasses.replace`` (command-line overrides) is
    held to the same rules as a loaded file.

    Returns:
        ``obj`` with values normalised (ints widened to floats where a float is expected,
        lists made tuples).

    Raises:
        ConfigError: ``config.<path>: <value> <what is wrong> (<valid range or choices>)``.
    """
    changes = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        checked = f.metadata["rule"](value, where if f.metadata["flat"] else f"{where}.{f.name}")
        if checked is not value:
            changes[f.name] = checked
    return dataclasses.replace(obj, **changes) if changes else obj
