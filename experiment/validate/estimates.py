"""Validating any simulator against a run: per-job estimates from a CSV file against the measurements.

A user simulates the experiment a run measured (``experiment.json``, :mod:`experiment.reporting.export`),
writes one estimate per job to a CSV file, and :func:`compare_estimates` pairs each estimate with
the run's measurement of the same job as a :class:`experiment.reporting.validation.Comparison`, then
summarises them per policy and overall (:func:`experiment.reporting.validation.validation_stats`).
A pure core (:func:`parse_estimates`, :func:`run_measurements`, :func:`compare`, :func:`report_lines`)
and a thin I/O shell. The CSV format, what is compared and the reasons a row is not:
``docs/simulator.md`` (*Validating your own simulator*).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
from collections.abc import Sequence

from common.errors import TestbedError
from common.files import UnreadableFile, read_regular_file
from common.jsonfile import write_json_atomic
from common.specs import safe_name
from experiment.reporting.export import read_run_json
from experiment.reporting.validation import Comparison, ValidationStats, job_class, stats_by_class, validation_stats

MAX_FILE_BYTES = 16 << 20
EXAMPLES_PER_REASON = 3

METRICS = {"comm": "comm_s", "iteration": "iteration_s"}
"""Compared metric -> its CSV column, in report order."""
METRIC_LABELS = {"comm": "communication time per iteration", "iteration": "iteration time, compute + communication",
                 "jct": "job completion time, arrival to end"}
JCT_METRIC = "jct"
JOB_COLUMN, POLICY_COLUMN, JCT_COLUMN = "job", "policy", "jct_s"
KNOWN_COLUMNS = (JOB_COLUMN, POLICY_COLUMN, *METRICS.values(), JCT_COLUMN)

REASONS = {
    "malformed": "more cells than the header has columns",
    "missing_value": "an empty or absent cell where a value is needed",
    "unknown_policy": "no such policy measured in the run",
    "unknown_job": "no such job in the run under that policy",
    "duplicate": "(policy, job) given again; the first row is kept",
    "local_job": "job ran on one machine: no network traffic to estimate",
    "not_measured": "the run has no measurement of the job",
    "non_numeric": "value is not a number",
    "invalid_time": "negative, NaN or infinite time",
    "zero_estimate": "estimate of 0 s (no network traffic): not compared",
    "jct_not_measured": "jct_s given; the run did not record job completion times (not compared)",
}
"""Why a row, or one value of it, was not compared, in report order."""


class EstimatesError(TestbedError):
    """An estimates file that cannot be used at all (the message is one line naming the file)."""


# --- the file -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EstimateRow:
    """One data row as read, cells stripped; None where the file has no such column or the row
    stops short of it, ``""`` for an empty cell.

    Attributes:
        line: line of the file where the row starts (the header is line 1).
        job, policy, jct: the cells of those columns.
        values: metric -> its cell, for each metric column of the file.
        extra_cells: cells beyond the header's columns (a malformed row when > 0).
    """

    line: int
    job: str | None
    policy: str | None
    jct: str | None
    values: tuple[tuple[str, str | None], ...]
    extra_cells: int = 0


@dataclasses.dataclass(frozen=True)
class EstimatesFile:
    """A parsed estimates file.

    Attributes:
        path: where it was read from.
        metrics: the metrics it has a column for (keys of :data:`METRICS`, in that order).
        has_policy: whether it has a ``policy`` column.
        has_jct: whether it has a ``jct_s`` column.
        ignored_columns: header names it has beyond :data:`KNOWN_COLUMNS`.
        rows: every data row, in file order.
    """

    path: str
    metrics: tuple[str, ...]
    has_policy: bool
    ignored_columns: tuple[str, ...]
    rows: tuple[EstimateRow, ...]
    has_jct: bool = False


def parse_estimates(text: str, path: str = "<estimates>") -> EstimatesFile:
    """Parse the CSV ``text`` (its format: ``docs/simulator.md``); ``path`` names it in messages.

    Raises:
        EstimatesError: no header, a header without ``job`` or a time column, a column named
            twice, or text the CSV reader cannot split (e.g. a cell beyond :func:`csv.field_size_limit`).
    """
    if "\0" in text:
        raise EstimatesError(f"estimates file {path}: contains NUL bytes; expected CSV text")
    reader = csv.reader(io.StringIO(text, newline=""))
    previous_line = 0
    try:
        header = next(reader, None)
        while header is not None and not any(c.strip() for c in header):  # blank lines before the header
            previous_line = reader.line_num
            header = next(reader, None)
        if header is None:
            raise EstimatesError(f"estimates file {path}: empty; expected a header line such as "
                                 f"'policy,job,comm_s,iteration_s'")
        names = [c.strip().lower() for c in header]
        _check_header(names, path)
        index = {n: i for i, n in enumerate(names)}
        metrics = tuple(m for m, col in METRICS.items() if col in index)
        rows = []
        previous_line = reader.line_num
        for cells in reader:
            line = previous_line + 1
            previous_line = reader.line_num
            if not any(c.strip() for c in cells):
                continue  # a blank line is no row
            cell = _cells(cells, index)
            rows.append(EstimateRow(line=line, job=cell(JOB_COLUMN), policy=cell(POLICY_COLUMN), jct=cell(JCT_COLUMN),
                                    values=tuple((m, cell(METRICS[m])) for m in metrics),
                                    extra_cells=max(0, len(cells) - len(names))))
    except csv.Error as exc:
        raise EstimatesError(f"estimates file {path}: line {previous_line + 1}: not CSV: {exc}") from None
    ignored = tuple(n for n in names if n and n not in KNOWN_COLUMNS)
    return EstimatesFile(path, metrics, POLICY_COLUMN in index, ignored, tuple(rows), JCT_COLUMN in index)


def _check_header(names: list[str], path: str) -> None:
    """Raise :class:`EstimatesError` unless the header names ``job``, a time column, and no column twice."""
    valid = f"columns: {JOB_COLUMN} (required), {' and/or '.join(METRICS.values())} (at least one), " \
            f"{POLICY_COLUMN}, {JCT_COLUMN} (optional)"
    shown = ",".join(names)[:200]
    twice = sorted({n for n in names if n and names.count(n) > 1})
    if twice:
        raise EstimatesError(f"estimates file {path}: header names {', '.join(twice)} twice; {valid}")
    missing = [JOB_COLUMN] if JOB_COLUMN not in names else []
    if not any(col in names for col in METRICS.values()):
        missing.append(" or ".join(METRICS.values()))
    if missing:
        hint = "; the file must be comma-separated" if len(names) == 1 and any(c in names[0] for c in ";\t") else ""
        raise EstimatesError(f"estimates file {path}: header {shown!r} lacks {' and '.join(missing)}; {valid}{hint}")


def _cells(cells: list[str], index: dict[str, int]):
    def cell(name: str) -> str | None:
        i = index.get(name)
        if i is None or i >= len(cells):
            return None
        return cells[i].strip()
    return cell


def read_estimates(path: str) -> EstimatesFile:
    """Read and parse an estimates CSV file (its format: ``docs/simulator.md``).

    Only a regular file of at most :data:`MAX_FILE_BYTES` is opened (a FIFO would block, a
    device never end); it must be UTF-8 text (a byte-order mark is allowed) without NUL bytes.

    Raises:
        EstimatesError: the file cannot be used at all; one line naming the path and why.
    """
    path = os.fspath(path)
    try:
        data = read_regular_file(path, MAX_FILE_BYTES)
    except UnreadableFile as exc:
        raise EstimatesError(f"cannot read estimates file {path}: {exc}") from None
    if b"\0" in data:
        raise EstimatesError(f"cannot read estimates file {path}: binary (NUL byte at offset {data.index(0)}); "
                             f"expected CSV text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EstimatesError(f"cannot read estimates file {path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at "
                             f"offset {exc.start})") from None
    return parse_estimates(text, path)


# --- the run --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MeasuredJob:
    """What the run measured of one job under one policy (paper-scale seconds; None: not measured).

    Attributes:
        policy, job: the policy spec and the job name.
        machines: the machines its ranks ran on.
        comm_mean_s: mean communication time per iteration (``summary.json``'s ``comm_mean_s``).
        compute_mean_s: mean compute time per iteration.
        jct_s: job completion time (None: the run did not record it).
        job_class: its validation class by its fidelity verdict (:func:`experiment.reporting.validation.job_class`;
            None: no verdict, as on the simulator).
    """

    policy: str
    job: str
    machines: tuple[str, ...]
    comm_mean_s: float | None
    compute_mean_s: float | None
    jct_s: float | None = None
    job_class: str | None = None

    @property
    def local(self) -> bool:
        """All ranks on one machine: no traffic left it."""
        return len(set(self.machines)) <= 1

    def measured(self, metric: str) -> float | None:
        """The measured counterpart of ``metric`` (a key of :data:`METRICS`)."""
        if metric == "comm":
            return self.comm_mean_s
        if self.comm_mean_s is None or self.compute_mean_s is None:
            return None
        return self.comm_mean_s + self.compute_mean_s

    @property
    def comparable(self) -> bool:
        """Whether an estimate of the job can be compared at all (not local, measured)."""
        return not self.local and _positive(self.comm_mean_s)


@dataclasses.dataclass(frozen=True)
class RunMeasurements:
    """The measured jobs of a run, per policy.

    Attributes:
        name: the experiment's name.
        policies: policy specs that placed every job, in the run's order.
        jobs: every measured job.
        unplaced: policies that could not place every job (nothing measured to compare).
    """

    name: str
    policies: tuple[str, ...]
    jobs: tuple[MeasuredJob, ...]
    unplaced: tuple[str, ...] = ()


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _time_or_none(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def run_measurements(summary: dict) -> RunMeasurements:
    """The measured jobs of a run's ``summary.json`` (parsed).

    Raises:
        EstimatesError: the summary has no usable ``policies`` list.
    """
    policies = summary.get("policies") if isinstance(summary, dict) else None
    if not isinstance(policies, list):
        raise EstimatesError("summary.json has no 'policies' list; is this a run directory?")
    specs, jobs = [], []
    for s in policies:
        if not isinstance(s, dict) or not isinstance(s.get("policy"), str) or not isinstance(s.get("jobs"), dict):
            raise EstimatesError("summary.json: a policy summary lacks 'policy' or 'jobs'")
        specs.append(s["policy"])
        for job, j in s["jobs"].items():
            j = j if isinstance(j, dict) else {}
            machines = j.get("machines") if isinstance(j.get("machines"), list) else []
            fidelity = j.get("fidelity") if isinstance(j.get("fidelity"), str) else None
            jobs.append(MeasuredJob(s["policy"], job, tuple(machines), _time_or_none(j.get("comm_mean_s")),
                                    _time_or_none(j.get("compute_mean_s")), _time_or_none(j.get("jct_s")),
                                    job_class(fidelity)))
    unplaced = summary.get("unplaced") if isinstance(summary.get("unplaced"), dict) else {}
    return RunMeasurements(str(summary.get("name", "")), tuple(specs), tuple(jobs), tuple(unplaced))


# --- the comparison -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RowIssue:
    """Rows (or values) not compared for one reason.

    Attributes:
        reason: a key of :data:`REASONS`.
        count: how many.
        examples: up to :data:`EXAMPLES_PER_REASON` of them, e.g. ``"line 4: job 'vgg9'"``.
    """

    reason: str
    count: int
    examples: tuple[str, ...]

    @property
    def description(self) -> str:
        """What the reason means."""
        return REASONS[self.reason]

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        return {"reason": self.reason, "description": self.description, "count": self.count,
                "examples": list(self.examples)}


@dataclasses.dataclass(frozen=True)
class MetricResult:
    """The comparisons of one metric and their statistics.

    Attributes:
        metric: a key of :data:`METRICS`.
        comparisons: every compared job, in file order.
        per_policy: ``(policy, stats)`` for every policy of the run, in the run's order.
        overall: the statistics of all comparisons together.
    """

    metric: str
    comparisons: tuple[Comparison, ...]
    per_policy: tuple[tuple[str, ValidationStats], ...]
    overall: ValidationStats

    @property
    def column(self) -> str:
        """The CSV column of the metric."""
        return JCT_COLUMN if self.metric == JCT_METRIC else METRICS[self.metric]

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        return {"metric": self.metric, "column": self.column, "measured": METRIC_LABELS[self.metric],
                "comparisons": [c.to_dict() for c in self.comparisons],
                "per_policy": {p: s.to_dict() for p, s in self.per_policy}, "overall": self.overall.to_dict(),
                "by_class": {c: s.to_dict() for c, s in stats_by_class(self.comparisons).items()}}


@dataclasses.dataclass(frozen=True)
class EstimatesReport:
    """Estimates of a file against a run's measurements.

    Attributes:
        run_name: the experiment's name.
        estimates_path: the estimates file.
        rows: data rows in the file.
        metrics: one result per metric the file has a column for.
        issues: rows or values not compared, per reason that occurred, in :data:`REASONS` order.
        missing: ``(policy, job)`` of comparable jobs of the run that have no row.
        missing_not_comparable: ``(policy, job)`` of jobs without a row that could not have been
            compared anyway (local or not measured).
        ignored_columns: header names the file has beyond the known columns.
    """

    run_name: str
    estimates_path: str
    rows: int
    metrics: tuple[MetricResult, ...]
    issues: tuple[RowIssue, ...]
    missing: tuple[tuple[str, str], ...]
    missing_not_comparable: tuple[tuple[str, str], ...]
    ignored_columns: tuple[str, ...] = ()

    def metric(self, name: str) -> MetricResult | None:
        """The result of metric ``name``, None when the file has no column for it."""
        return next((m for m in self.metrics if m.metric == name), None)

    def issue(self, reason: str) -> RowIssue | None:
        """The issue of ``reason``, None when no row had it."""
        return next((i for i in self.issues if i.reason == reason), None)

    def to_dict(self) -> dict:
        """JSON-serialisable form (``validation-<name>.json``)."""
        return {"run": self.run_name, "estimates": self.estimates_path, "rows": self.rows,
                "units": "paper-scale seconds: per iteration (comm_s, iteration_s), per job (jct_s)",
                "metrics": {m.metric: m.to_dict() for m in self.metrics},
                "not_compared": [i.to_dict() for i in self.issues],
                "missing": [list(p) for p in self.missing],
                "missing_not_comparable": [list(p) for p in self.missing_not_comparable],
                "ignored_columns": list(self.ignored_columns)}


class _Issues:
    """Counts and a few examples per reason, as rows are checked."""

    def __init__(self):
        self.count: dict[str, int] = {}
        self.examples: dict[str, list[str]] = {}

    def add(self, reason: str, line: int, detail: str) -> None:
        assert reason in REASONS, reason
        self.count[reason] = self.count.get(reason, 0) + 1
        ex = self.examples.setdefault(reason, [])
        if len(ex) < EXAMPLES_PER_REASON:
            ex.append(f"line {line}: {detail}")

    def records(self) -> tuple[RowIssue, ...]:
        return tuple(RowIssue(r, self.count[r], tuple(self.examples[r])) for r in REASONS if r in self.count)


def _show(cell: str, limit: int = 40) -> str:
    return repr(cell if len(cell) <= limit else cell[:limit] + "...")


def _resolve_policy(cell: str | None, run: RunMeasurements, by_dir: dict[str, str]) -> tuple[str | None, str]:
    """The policy a row means, or None and the reason."""
    if not cell:
        if len(run.policies) == 1:
            return run.policies[0], ""
        return None, "missing_value"
    if cell in run.policies:
        return cell, ""
    if cell in by_dir:
        return by_dir[cell], ""
    return None, "unknown_policy"


def parse_time(cell: str) -> tuple[float | None, str]:
    """A time cell as seconds, or None and the reason (a key of :data:`REASONS`) it cannot be used."""
    if cell == "":
        return None, "missing_value"
    try:
        value = float(cell)
    except ValueError:
        return None, "non_numeric"
    if not math.isfinite(value) or value < 0:
        return None, "invalid_time"
    if value == 0:
        return None, "zero_estimate"
    return value, ""


def compare(estimates: EstimatesFile, run: RunMeasurements) -> EstimatesReport:
    """Pair every usable estimate with the run's measurement of the same job (pure).

    Raises:
        EstimatesError: the run measured several policies and the file has no ``policy`` column.
    """
    if not estimates.has_policy and len(run.policies) > 1:
        raise EstimatesError(f"estimates file {estimates.path}: the run measured {len(run.policies)} policies "
                             f"({', '.join(run.policies)}); add a '{POLICY_COLUMN}' column")
    jobs = {(j.policy, j.job): j for j in run.jobs}
    by_dir = {safe_name(p): p for p in run.policies}
    issues = _Issues()
    seen: set[tuple[str, str]] = set()
    found: dict[str, list[Comparison]] = {m: [] for m in estimates.metrics}
    if estimates.has_jct:
        found[JCT_METRIC] = []
    for row in estimates.rows:
        matched = _row_job(row, run, jobs, by_dir, seen, issues)
        if matched is None:
            continue
        policy, measured = matched
        seen.add((policy, row.job))
        if row.jct:
            _compare_jct(row, policy, measured, found[JCT_METRIC], issues)
        _compare_times(row, policy, measured, found, issues)
    results = tuple(MetricResult(m, tuple(cs), tuple((p, validation_stats([c for c in cs if c.policy == p]))
                                                     for p in run.policies), validation_stats(cs))
                    for m, cs in found.items())
    absent = [j for j in run.jobs if (j.policy, j.job) not in seen]
    return EstimatesReport(
        run_name=run.name, estimates_path=estimates.path, rows=len(estimates.rows), metrics=results,
        issues=issues.records(), missing=tuple((j.policy, j.job) for j in absent if j.comparable),
        missing_not_comparable=tuple((j.policy, j.job) for j in absent if not j.comparable),
        ignored_columns=estimates.ignored_columns)


def _row_job(row: EstimateRow, run: RunMeasurements, jobs: dict[tuple[str, str], MeasuredJob],
             by_dir: dict[str, str], seen: set[tuple[str, str]], issues: _Issues) -> tuple[str, MeasuredJob] | None:
    """The policy and measured job a row estimates, or None with the row counted under why not (a
    malformed row, no job or policy, an unknown one, a ``(policy, job)`` already in ``seen``)."""
    if row.extra_cells:
        issues.add("malformed", row.line, f"{row.extra_cells} cell(s) beyond the header")
        return None
    if not row.job:
        issues.add("missing_value", row.line, JOB_COLUMN)
        return None
    policy, why = _resolve_policy(row.policy, run, by_dir)
    if policy is None:
        issues.add(why, row.line, POLICY_COLUMN if why == "missing_value" else f"policy {_show(row.policy)}")
        return None
    measured = jobs.get((policy, row.job))
    if measured is None:
        issues.add("unknown_job", row.line, f"job {_show(row.job)} under {policy}")
        return None
    if (policy, row.job) in seen:
        issues.add("duplicate", row.line, f"{row.job} under {policy}")
        return None
    return policy, measured


def _compare_times(row: EstimateRow, policy: str, measured: MeasuredJob, found: dict[str, list[Comparison]],
                   issues: _Issues) -> None:
    """Compare a row's communication and iteration times with the measured ones, into ``found`` by
    metric (neither for a local job nor for one the run did not measure)."""
    if measured.local:
        issues.add("local_job", row.line, f"{row.job} under {policy} on {','.join(sorted(set(measured.machines)))}")
        return
    if not measured.comparable:
        issues.add("not_measured", row.line, f"{row.job} under {policy}")
        return
    for metric, cell in row.values:
        column = METRICS[metric]
        if cell is None:  # the row stops before this column
            issues.add("missing_value", row.line, column)
            continue
        estimate, why = parse_time(cell)
        if estimate is None:
            issues.add(why, row.line, column if why == "missing_value" else f"{column} {_show(cell)}")
            continue
        value = measured.measured(metric)
        if not _positive(value):
            issues.add("not_measured", row.line, f"{column} of {row.job} under {policy}")
            continue
        found[metric].append(Comparison(policy, row.job, value, estimate, measured.job_class))


def _compare_jct(row: EstimateRow, policy: str, measured: MeasuredJob, out: list[Comparison], issues: _Issues) -> None:
    """Compare a row's ``jct_s`` with the measured JCT (local jobs too: they have one)."""
    if not _positive(measured.jct_s):
        issues.add("jct_not_measured", row.line, f"{row.job} under {policy}")
        return
    estimate, why = parse_time(row.jct)
    if estimate is None:
        issues.add(why, row.line, f"{JCT_COLUMN} {_show(row.jct)}")
        return
    out.append(Comparison(policy, row.job, measured.jct_s, estimate))


def compare_estimates(run_dir: str, estimates: EstimatesFile) -> EstimatesReport:
    """:func:`compare` ``estimates`` with the measurements of the run in ``run_dir`` (its ``summary.json``).

    Raises:
        experiment.reporting.export.ResultsError: ``summary.json`` is missing or unreadable.
        EstimatesError: see :func:`compare`.
    """
    summary = read_run_json(os.path.join(run_dir, "summary.json"), "run summary")
    return compare(estimates, run_measurements(summary))


# --- output ---------------------------------------------------------------------------------


def _pairs_text(pairs: Sequence[tuple[str, str]], limit: int = 6) -> str:
    shown = ", ".join(f"{j} under {p}" for p, j in pairs[:limit])
    return shown + (f", ... ({len(pairs) - limit} more)" if len(pairs) > limit else "")


def report_lines(report: EstimatesReport) -> list[str]:
    """The terminal report: per metric one line per policy and one for all, the worst job, then the
    rows not compared (per reason) and the jobs without an estimate."""
    lines = [f"Estimates in {report.estimates_path} against run {report.run_name!r} (per job, paper-scale "
             f"seconds per iteration, JCT per job; {report.rows} row{'s' if report.rows != 1 else ''}):"]
    for m in report.metrics:
        label = f"{m.column:<12}"
        for policy, stats in m.per_policy:
            lines.append(f"  {label} {policy:<14} {stats.line()}")
        lines.append(f"  {label} {'all':<14} {m.overall.line()}")
        for cls, stats in stats_by_class(m.comparisons).items():
            lines.append(f"  {label}   {cls:<13} {stats.line()}")
        w = m.overall.worst
        if w is not None:
            lines.append(f"  {label} worst: {w.job} under {w.policy}: measured {w.measured_s:.4g} s, estimated "
                         f"{w.estimated_s:.4g} s ({w.rel_error:+.1%})")
    if report.issues:
        lines.append("Not compared:")
        for i in report.issues:
            lines.append(f"  {i.count:>5}  {i.reason}: {i.description} ({'; '.join(i.examples)}"
                         f"{'; ...' if i.count > len(i.examples) else ''})")
    if report.missing:
        lines.append(f"Jobs without an estimate: {len(report.missing)} ({_pairs_text(report.missing)})")
    if report.missing_not_comparable:
        lines.append(f"Jobs without an estimate that could not be compared anyway (one machine or not measured): "
                     f"{len(report.missing_not_comparable)}")
    if report.ignored_columns:
        lines.append(f"Columns ignored: {', '.join(report.ignored_columns)}")
    return lines


def report_name(estimates_path: str) -> str:
    """The ``<name>`` of ``validation-<name>.*``: the estimates file's name without its extension."""
    stem = os.path.splitext(os.path.basename(estimates_path))[0]
    return safe_name(stem) or "estimates"


def write_estimates_report(report: EstimatesReport, out_dir: str, name: str | None = None) -> list[str]:
    """Write ``validation-<name>.json`` and, when some job was compared, ``validation-<name>.png``
    into ``out_dir`` (the run directory); ``name`` defaults to :func:`report_name`. Returns the paths."""
    name = safe_name(name) if name else report_name(report.estimates_path)
    json_path = os.path.join(out_dir, f"validation-{name}.json")
    write_json_atomic(json_path, report.to_dict(), allow_nan=False, indent=1, sort_keys=True)
    return [json_path, *write_estimates_plot(report, os.path.join(out_dir, f"validation-{name}.png"))]


def write_estimates_plot(report: EstimatesReport, path: str) -> list[str]:
    """A scatter of estimated against measured time of every compared job, one panel per metric and one
    colour per policy, with the line of perfect agreement. Returns ``[path]``, or ``[]`` when no job
    was compared."""
    metrics = [m for m in report.metrics if m.comparisons]
    if not metrics:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(metrics), figsize=(6.5 * len(metrics), 6), squeeze=False)
    for ax, m in zip(axes[0], metrics, strict=True):
        for i, (policy, _) in enumerate(m.per_policy):
            cs = [c for c in m.comparisons if c.policy == policy]
            if cs:
                ax.scatter([c.measured_s for c in cs], [c.estimated_s for c in cs], s=28, color=f"C{i % 10}",
                           label=policy)
        hi = max(max(c.measured_s, c.estimated_s) for c in m.comparisons) * 1.1
        ax.plot([0, hi], [0, hi], color="0.5", lw=0.8)
        ax.set_xlim(0, hi)
        ax.set_ylim(0, hi)
        ax.set_xlabel(f"measured {METRIC_LABELS[m.metric]} (s, paper scale)")
        ax.set_ylabel(f"estimate, {m.column} (s)")
        ax.set_title(f"{os.path.basename(report.estimates_path)} vs testbed: {m.overall.line()}", fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
