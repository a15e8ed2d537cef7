"""Public GPU-cluster job traces: one CSV file read into jobs with an arrival, a GPU count and a run time.

Every supported layout is a :class:`TraceFormat` in :data:`TRACE_FORMATS`, detected from the header
(:func:`detect_format`); :func:`read_trace` selects the jobs of a window and names them, and
:func:`assign_models` gives a model to the jobs of a trace without one. The formats, the selection
steps, what the shipped traces skip and the errors: ``docs/traces.md`` (*Reading a trace file*).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
import random
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import NamedTuple, NoReturn

from common.errors import ConfigError, unknown_name
from common.files import UnreadableFile, read_regular_file
from experiment.config.rules import NAME_RE, NAME_RULE, show

MAX_TRACE_BYTES = 64 << 20
"""Largest trace file read (``philly.csv``, 82,247 jobs, is 3.4 MB)."""

NETPACK_MODEL_POOL = ("vgg11", "vgg16", "vgg19", "alexnet", "resnet50", "resnet101")
"""The models NetPack draws trace jobs' models from, uniformly (``docs/resolutions.md`` NetPack §5.4)."""

_TIMESTAMP_RE = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")
_EPOCH = datetime(1970, 1, 1)
_MAX_COLUMNS_SHOWN = 12


@dataclasses.dataclass(frozen=True)
class TraceJob:
    """One job of a trace.

    Attributes:
        name: ``<prefix><i:05d>``, ``i`` its index in arrival order from 0.
        arrival_s: submit time, seconds after the first selected job's.
        gpus: GPUs the job ran on (>= 1).
        duration_s: its run time in the trace, seconds (> 0; no queueing included).
        model: the trace's model name, or None when the trace has none.
        job_id: the trace's id of the job, as text (``philly``: the 1-based data row number).
        row: the job's line in the file (the header is line 1).
    """

    name: str
    arrival_s: float
    gpus: int
    duration_s: float
    model: str | None
    job_id: str
    row: int


@dataclasses.dataclass(frozen=True)
class Trace:
    """The jobs selected from one trace file (or directory of them).

    Attributes:
        path: the file or directory read.
        format: the :data:`TRACE_FORMATS` key it was read as.
        jobs: the selected jobs in arrival order.
        skipped: rows of the window left out, per reason (``zero_duration``, ``no_gpus``,
            ``too_big``, ``too_small``); reasons that did not occur are absent.
        rows: data rows in the file.
    """

    path: str
    format: str
    jobs: tuple[TraceJob, ...]
    skipped: dict[str, int]
    rows: int


class RawJob(NamedTuple):
    """What a format's row parser reads from one row (times and durations in seconds)."""

    job_id: str
    submit_s: float
    gpus: int
    duration_s: float
    model: str | None


class TraceRow:
    """One data row, read through typed accessors whose errors name the file, line, column and value.

    Attributes:
        line: the row's line in the file (header = 1).
        number: the row's 1-based index among the data rows.
    """

    __slots__ = ("_where", "_fields", "_columns", "line", "number")

    def __init__(self, where: str, columns: dict[str, int], fields: list[str], line: int, number: int):
        self._where, self._columns, self._fields = where, columns, fields
        self.line, self.number = line, number

    def has(self, column: str) -> bool:
        """Whether the file has ``column``."""
        return column in self._columns

    def text(self, column: str) -> str:
        """The field, stripped; it must not be empty."""
        value = self._fields[self._columns[column]].strip()
        if not value:
            self._fail(column, value, "is empty")
        return value

    def real(self, column: str) -> float:
        """The field as a finite number: ASCII decimal digits, a point, an exponent (no ``nan``, ``inf`` or ``_``)."""
        value = self._fields[self._columns[column]]
        try:
            if "_" in value or not value.isascii():  # float() takes '1_000' and Arabic-Indic digits too
                raise ValueError
            number = float(value)
        except ValueError:
            self._fail(column, value, "is not a number")
        if not math.isfinite(number):
            self._fail(column, value, "is not a finite number")
        return number

    def seconds(self, column: str) -> float:
        """The field as a finite number of seconds >= 0."""
        number = self.real(column)
        if number < 0:
            self._fail(column, self._fields[self._columns[column]], "is negative")
        return number

    def count(self, column: str) -> int:
        """The field as a whole number >= 0 (``4`` or ``4.0``)."""
        value = self._fields[self._columns[column]]
        if value.isascii() and value.isdigit() and len(value) < 19:
            return int(value)
        number = self.real(column)
        if number < 0:
            self._fail(column, value, "is negative")
        if not number.is_integer():
            self._fail(column, value, "is not a whole number")
        return int(number)

    def timestamp(self, column: str) -> float:
        """The field, ``YYYY-MM-DD HH:MM:SS`` read as UTC, as seconds since 1970-01-01."""
        value = self._fields[self._columns[column]]
        text = value.strip()
        try:
            if not _TIMESTAMP_RE.fullmatch(text):
                raise ValueError
            return (datetime.fromisoformat(text) - _EPOCH).total_seconds()
        except ValueError:
            self._fail(column, value, "is not a date and time 'YYYY-MM-DD HH:MM:SS'")

    def _fail(self, column: str, value: str, problem: str) -> NoReturn:
        raise ConfigError(f"{self._where}: line {self.line}, column {column!r}: {show(value)} {problem}")


@dataclasses.dataclass(frozen=True)
class TraceFormat:
    """One CSV layout of a trace.

    Attributes:
        name: its key in :data:`TRACE_FORMATS`.
        columns: the columns a header must have (others may be present).
        parse: reads one row into a :class:`RawJob` through :class:`TraceRow`'s accessors.
    """

    name: str
    columns: tuple[str, ...]
    parse: Callable[[TraceRow], RawJob]


def _parse_tiresias(row: TraceRow) -> RawJob:
    return RawJob(row.text("job_id"), row.seconds("submit_time"), row.count("num_gpu"), row.real("duration"),
                  row.text("model_name"))


def _parse_elasticflow(row: TraceRow) -> RawJob:
    model = row.text("model_name") if row.has("model_name") else None
    return RawJob(row.text("job_id"), row.seconds("submission_time"), row.count("num_gpu"), row.real("duration"),
                  model)


def _parse_philly_elasticflow(row: TraceRow) -> RawJob:
    # duration == real_duration in ElasticFlow's file; `duration` is what its simulator reads.
    return RawJob(row.text("job_id"), row.seconds("submit_time"), row.count("num_gpu"), row.real("duration"),
                  row.text("model_name"))


def _parse_philly(row: TraceRow) -> RawJob:
    return RawJob(str(row.number), row.timestamp("timestamp"), row.count("num_gpus"), row.real("duration"), None)


TRACE_FORMATS: dict[str, TraceFormat] = {
    "tiresias": TraceFormat("tiresias", ("job_id", "num_gpu", "submit_time", "model_name", "duration"),
                            _parse_tiresias),
    "elasticflow": TraceFormat("elasticflow", ("job_id", "submission_time", "duration", "num_gpu"),
                               _parse_elasticflow),
    # real_duration alone tells this layout from Tiresias': both have the other five columns.
    "philly-elasticflow": TraceFormat(
        "philly-elasticflow", ("job_id", "submit_time", "num_gpu", "model_name", "duration", "real_duration"),
        _parse_philly_elasticflow),
    "philly": TraceFormat("philly", ("timestamp", "duration", "num_gpus"), _parse_philly),
}


def _known_formats() -> str:
    return "; ".join(f"{f.name} ({', '.join(f.columns)})" for f in TRACE_FORMATS.values())


def _show_columns(columns: Sequence[str]) -> str:
    shown = ", ".join(show(c) for c in columns[:_MAX_COLUMNS_SHOWN])
    return shown + (f", ... ({len(columns)} columns)" if len(columns) > _MAX_COLUMNS_SHOWN else "")


def detect_format(columns: Iterable[str]) -> str:
    """The :data:`TRACE_FORMATS` key of a header: of the formats whose columns are all present,
    the one with the most columns.

    Raises:
        ConfigError: no format matches (the message names the columns found and the formats
            known), or two match equally well.
    """
    columns = list(columns)
    present = set(columns)
    matches = [f for f in TRACE_FORMATS.values() if present.issuperset(f.columns)]
    if not matches:
        raise ConfigError(f"unknown trace header (columns: {_show_columns(columns)}); "
                          f"known formats: {_known_formats()}")
    best = max(len(f.columns) for f in matches)
    winners = [f.name for f in matches if len(f.columns) == best]
    if len(winners) > 1:
        raise ConfigError(f"trace header matches formats {', '.join(winners)} equally; name one")
    return winners[0]


def _where(path: str) -> str:
    return f"trace {path if path.isprintable() else show(path)}"


def _decode(where: str, data: bytes) -> str:
    nul = data.find(b"\0")
    if nul >= 0:
        raise ConfigError(f"{where}: a binary file, not CSV text (NUL byte at offset {nul})")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    if not text.strip():
        raise ConfigError(f"{where}: empty file")
    return text


def _header(where: str, names: list[str], fmt: str) -> tuple[TraceFormat, dict[str, int]]:
    names = [n.strip() for n in names]
    columns: dict[str, int] = {}
    for i, n in enumerate(names):
        if n in columns:
            raise ConfigError(f"{where}: line 1: column {show(n)} appears twice")
        columns[n] = i
    if fmt == "auto":
        try:
            fmt = detect_format(names)
        except ConfigError as exc:
            raise ConfigError(f"{where}: line 1: {exc}") from None
    spec = TRACE_FORMATS[fmt]
    missing = [c for c in spec.columns if c not in columns]
    if missing:
        raise ConfigError(f"{where}: line 1: format {fmt} needs column(s) {', '.join(missing)} "
                          f"(columns: {_show_columns(names)})")
    return spec, columns


def _parse(where: str, text: str, fmt: str) -> tuple[TraceFormat, list[RawJob], list[int]]:
    """The format, every data row parsed and the rows' lines, in file order."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    last = 0  # the line the previous record ended on: a bad record starts after it
    try:
        header = next(reader, None)
        if header is None or not any(f.strip() for f in header):
            raise ConfigError(f"{where}: line 1: blank header line")
        last = reader.line_num
        spec, columns = _header(where, header, fmt)
        width, out, lines = len(columns), [], []
        row = TraceRow(where, columns, [], 0, 0)  # one accessor, moved from row to row
        for fields in reader:
            line = last + 1
            last = reader.line_num
            if not fields:  # a blank line
                continue
            if len(fields) != width:
                if len(fields) < width:
                    problem = f"column {show(list(columns)[len(fields)])}: missing"
                else:
                    problem = f"field {width + 1}: {show(fields[width])} is past the last column"
                raise ConfigError(f"{where}: line {line}, {problem} (the row has {len(fields)} fields, "
                                  f"the header {width})")
            row._fields, row.line, row.number = fields, line, len(out) + 1
            out.append(spec.parse(row))
            lines.append(line)
    except csv.Error as exc:
        raise ConfigError(f"{where}: line {last + 1}: not valid CSV ({exc}, at line {reader.line_num})") from None
    if not out:
        raise ConfigError(f"{where}: a header only, no data rows")
    return spec, out, lines


def _check_options(fmt, max_jobs, start_s, span_s, max_gpus, min_gpus, prefix) -> None:
    def bad(what: str, value, valid: str):
        raise ConfigError(f"read_trace {what}: {show(value)} is out of range ({valid})")

    def is_int(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    def is_real(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    if not isinstance(fmt, str):
        bad("fmt", fmt, f"a trace format: auto, {', '.join(TRACE_FORMATS)}")
    if fmt != "auto" and fmt not in TRACE_FORMATS:
        raise ConfigError(f"read_trace fmt: {unknown_name('trace format', fmt, [*TRACE_FORMATS, 'auto'])}")
    if max_jobs is not None and not (is_int(max_jobs) and max_jobs >= 1):
        bad("max_jobs", max_jobs, "an integer >= 1, or None")
    if not (is_real(start_s) and start_s >= 0):
        bad("start_s", start_s, "a finite number >= 0")
    if span_s is not None and not (is_real(span_s) and span_s > 0):
        bad("span_s", span_s, "a finite number > 0, or None")
    if max_gpus is not None and not (is_int(max_gpus) and max_gpus >= 1):
        bad("max_gpus", max_gpus, "an integer >= 1, or None")
    if not (is_int(min_gpus) and min_gpus >= 1):
        bad("min_gpus", min_gpus, "an integer >= 1")
    if not (isinstance(prefix, str) and NAME_RE.fullmatch(f"{prefix}00000")):
        bad("prefix", prefix, f"with 5 digits, a name: {NAME_RULE}")


def read_trace(path: str | os.PathLike, fmt: str = "auto", *, max_jobs: int | None = None, start_s: float = 0.0,
               span_s: float | None = None, max_gpus: int | None = None, min_gpus: int = 1,
               prefix: str = "t") -> Trace:
    """Read a job trace and select jobs from it (the steps: ``docs/traces.md``).

    Args:
        path: the CSV file, or a directory of CSV files of one format (a release of several
            clusters, such as ITP's ten), read in name order and merged in submission order (the
            submission times share one origin).
        fmt: a :data:`TRACE_FORMATS` key, or ``auto`` to detect it from the header.
        max_jobs: keep at most this many jobs (None: all).
        start_s: the window starts this many seconds after the file's first submission.
        span_s: the window's length in seconds (None: to the end of the file).
        max_gpus: skip jobs asking for more GPUs, as ``too_big`` (None: no limit).
        min_gpus: skip jobs asking for fewer GPUs, as ``too_small`` (NetPack's simulator studies
            distributed jobs: a single-server job never communicates, spec §5.3).
        prefix: job names are ``<prefix><i:05d>``.

    Returns:
        The selected jobs, the skip counts and the number of data rows.

    Raises:
        ConfigError: one line naming the file and, for a bad field, its line, column and value.
    """
    _check_options(fmt, max_jobs, start_s, span_s, max_gpus, min_gpus, prefix)
    path, spec, parsed, lines = _read_rows(path, fmt)
    kept, skipped = _select(parsed, start_s, span_s, max_gpus, min_gpus)
    kept = kept[:max_jobs]
    if kept and not NAME_RE.fullmatch(f"{prefix}{len(kept) - 1:05d}"):
        raise ConfigError(f"read_trace prefix: {show(prefix)} makes job names over 64 characters ({NAME_RULE})")
    t0 = parsed[kept[0]].submit_s if kept else 0.0
    jobs = []
    for n, i in enumerate(kept):
        job_id, submit_s, gpus, duration_s, model = parsed[i]
        jobs.append(TraceJob(f"{prefix}{n:05d}", submit_s - t0, gpus, duration_s, model, job_id, lines[i]))
    return Trace(path, spec.name, tuple(jobs), skipped, len(parsed))


def _read_rows(path, fmt: str) -> tuple[str, TraceFormat, list[RawJob], list[int]]:
    """The path as text, the format, every data row parsed and its line in its file: of one CSV
    file, or of every ``*.csv`` of a directory in name order (one format for all).

    Raises:
        ConfigError: a file cannot be read or parsed, a directory holds no CSV file, or its files
            are of different formats.
    """
    if isinstance(path, (str, os.PathLike)) and os.path.isdir(path):
        path = os.fspath(path)
        names = sorted(n for n in os.listdir(path) if n.endswith(".csv"))
        if not names:
            raise ConfigError(f"{_where(path)}: a directory without a .csv file")
        spec, parsed, lines = None, [], []
        for name in names:
            one, data = _read_file(os.path.join(path, name))
            where = _where(one)
            its, rows, its_lines = _parse(where, _decode(where, data), fmt)
            if spec is not None and its.name != spec.name:
                raise ConfigError(f"{where}: format {its.name}, where {names[0]} is {spec.name}: a directory's "
                                  f"files must be of one format")
            spec = its
            parsed += rows
            lines += its_lines
        return path, spec, parsed, lines
    path, data = _read_file(path)
    where = _where(path)
    spec, parsed, lines = _parse(where, _decode(where, data), fmt)
    return path, spec, parsed, lines


def _read_file(path) -> tuple[str, bytes]:
    """The trace file's path as text, and its bytes (at most :data:`MAX_TRACE_BYTES`).

    Raises:
        ConfigError: ``path`` is not a text path, or the file cannot be read.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(f"read_trace path: {show(path)} is not a path")
    path = os.fspath(path)
    if not isinstance(path, str):  # a bytes path
        raise ConfigError(f"read_trace path: {show(path)} is not a text path")
    try:
        return path, read_regular_file(path, MAX_TRACE_BYTES)
    except UnreadableFile as exc:
        raise ConfigError(f"{_where(path)}: cannot read it: {exc}") from None


def _select(parsed: Sequence[RawJob], start_s: float, span_s: float | None, max_gpus: int | None,
            min_gpus: int) -> tuple[list[int], dict[str, int]]:
    """Steps 2 to 4 of the selection (``docs/traces.md``): the indices of the rows of the window not
    skipped, in submit order (stable), and the window's skipped rows per reason."""
    submit = [raw.submit_s for raw in parsed]
    order = sorted(range(len(parsed)), key=submit.__getitem__)  # stable: ties keep file order
    t_first = submit[order[0]]
    end_s = math.inf if span_s is None else start_s + span_s
    skipped: dict[str, int] = {}
    kept: list[int] = []
    for i in order:
        if not start_s <= submit[i] - t_first < end_s:
            continue
        raw = parsed[i]
        reason = ("zero_duration" if raw.duration_s <= 0 else "no_gpus" if raw.gpus == 0
                  else "too_big" if max_gpus is not None and raw.gpus > max_gpus
                  else "too_small" if raw.gpus < min_gpus else None)
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
        else:
            kept.append(i)
    return kept, skipped


def assign_models(jobs: Iterable[TraceJob], pool: Sequence[str], seed: int) -> tuple[TraceJob, ...]:
    """``jobs`` with a model drawn uniformly from ``pool`` for each job whose model is None.

    Draws are made with ``random.Random(seed)``, one per such job in job order; jobs with a
    model keep it. Same jobs, pool and seed, same result.

    Raises:
        ConfigError: a job needs a model and ``pool`` is empty.
    """
    rng = random.Random(seed)
    pool = tuple(pool)
    out = []
    for job in jobs:
        if job.model is None:
            if not pool:
                raise ConfigError(f"assign_models: job {job.name!r} has no model and the model pool is empty")
            job = dataclasses.replace(job, model=rng.choice(pool))
        out.append(job)
    return tuple(out)
