"""The cluster over a policy's run, in the Titan paper's metrics (§VI; docs/resolutions.md Titan §4.3).

Every run writes ``<policy>/cluster.csv``: one :class:`ClusterSample` at each distinct arrival
time, the cluster as it stands once the loop has handled everything up to that instant (the
arrivals placed then included), as the paper samples "at each timestamp" a job arrives:

* ``used_machines`` (M1): machines with a GPU in use, background jobs included;
* ``fragmentation_rate`` (M3, the reading docs/resolutions.md names): the mean over used machines
  of their idle GPUs over their GPUs; ``partly_used_share`` the share of all machines partly used,
  ``non_idle_share`` the share in use at all (the paper's two other wordings);
* ``comm_overhead_bytes`` (M4): over the running jobs, the cross-machine bytes of one allreduce of
  the model's gradient on its placement (Titan's pattern of its collective; jobs whose collective
  has none, such as ``ina``, are not in it and are counted in ``jobs_not_in_overhead``);
* ``profit_rate`` (M5): ``K * P / (N * T)`` over the K running jobs, with P their mean price
  (GPUs x duration, GPU-seconds), T their mean duration and N the used machines; a job's duration
  is its trace duration where it has one, else its running time in this run.

Over the whole run (:class:`ClusterFigures`): the means of those samples, the total profit (the sum
of the profit rate over the samples, M5') and the machine hours (M2: machines in use integrated over
time, paper-scale hours). Pure: records in, records out.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

from experiment.reporting.tables import format_table
from placement.base import Placement


@dataclasses.dataclass(frozen=True)
class JobSpan:
    """One run of a job: where and from when to when (paper-scale seconds); it covers
    ``start_s <= t < end_s``."""

    job: str
    start_s: float
    end_s: float
    placement: Placement


@dataclasses.dataclass(frozen=True)
class JobTerms:
    """What the metrics need of a job: its GPUs, its duration for the price, and the cross-machine
    bytes of its one allreduce on a placement (None: its collective has no Titan pattern)."""

    workers: int
    duration_s: float
    overhead_bytes: Callable[[Placement], float | None]


@dataclasses.dataclass(frozen=True)
class ClusterSample:
    """The cluster at one arrival time (see the module docstring)."""

    time_s: float
    jobs_running: int
    used_machines: int
    busy_gpus: int
    fragmentation_rate: float | None
    partly_used_share: float
    non_idle_share: float
    comm_overhead_bytes: float
    jobs_not_in_overhead: int
    profit_rate: float | None


FIELDS = tuple(f.name for f in dataclasses.fields(ClusterSample))
"""``cluster.csv``'s columns."""


class _Occupancy:
    """The cluster as spans start and end: GPUs busy per machine and the running spans' sums,
    kept as they change (each change O(the span's ranks))."""

    def __init__(self, gpus: Mapping[str, int], background: Mapping[str, int], terms: Mapping[str, JobTerms]):
        self.gpus, self.terms = gpus, terms
        self.busy = {m: min(g, background.get(m, 0)) for m, g in gpus.items()}
        self.used = sum(1 for b in self.busy.values() if b > 0)
        self.partly = sum(1 for m, b in self.busy.items() if 0 < b < gpus[m])
        self.idle_share_used = sum((gpus[m] - b) / gpus[m] for m, b in self.busy.items() if b > 0)
        self.running, self.overhead, self.missing = 0, 0.0, 0
        self.gpu_seconds, self.seconds = 0.0, 0.0
        self._overhead: dict[int, float | None] = {}

    def _machine(self, m: str, delta: int) -> None:
        g, before = self.gpus[m], self.busy[m]
        after = before + delta
        self.used += (after > 0) - (before > 0)
        self.partly += (0 < after < g) - (0 < before < g)
        self.idle_share_used += ((g - after) / g if after > 0 else 0.0) - ((g - before) / g if before > 0 else 0.0)
        self.busy[m] = after

    def apply(self, span: JobSpan, sign: int) -> None:
        """``span`` starts (``sign`` 1) or ends (-1)."""
        for slot in span.placement.slots:
            self._machine(slot.machine, sign)
        terms = self.terms[span.job]
        if id(span) not in self._overhead:
            self._overhead[id(span)] = terms.overhead_bytes(span.placement)
        x = self._overhead[id(span)]
        self.running += sign
        if x is None:
            self.missing += sign
        else:
            self.overhead += sign * x
        self.gpu_seconds += sign * terms.workers * terms.duration_s
        self.seconds += sign * terms.duration_s

    def sample(self, t: float) -> ClusterSample:
        k, used = self.running, self.used
        profit = k * (self.gpu_seconds / k) / (used * (self.seconds / k)) if k and used and self.seconds > 0 else None
        return ClusterSample(
            time_s=t, jobs_running=k, used_machines=used, busy_gpus=sum(self.busy.values()),
            fragmentation_rate=self.idle_share_used / used if used else None,
            partly_used_share=self.partly / len(self.gpus), non_idle_share=used / len(self.gpus),
            comm_overhead_bytes=max(0.0, self.overhead), jobs_not_in_overhead=self.missing, profit_rate=profit)


def _changes(spans: Sequence[JobSpan]) -> list[tuple[float, int, int]]:
    """``(time, sign, span index)`` of every start and end, in time order, ends before starts at
    one instant (a span ending at t does not cover t)."""
    return sorted([(s.end_s, -1, i) for i, s in enumerate(spans)] + [(s.start_s, 1, i) for i, s in enumerate(spans)])


def samples(gpus: Mapping[str, int], background: Mapping[str, int], spans: Sequence[JobSpan],
            arrivals: Iterable[float], terms: Mapping[str, JobTerms]) -> tuple[ClusterSample, ...]:
    """A :class:`ClusterSample` at each distinct arrival time, in time order: the spans that cover
    it running. O((spans + arrivals) log) plus each span's overhead once.

    Args:
        gpus: every machine's GPUs.
        background: GPUs held on a machine by jobs outside the run.
        spans: every run of every job.
        arrivals: the jobs' arrival times.
        terms: each job's :class:`JobTerms`.
    """
    state, changes, i, out = _Occupancy(gpus, background, terms), _changes(spans), 0, []
    for t in sorted(set(arrivals)):
        while i < len(changes) and changes[i][0] <= t:
            _, sign, k = changes[i]
            state.apply(spans[k], sign)
            i += 1
        out.append(state.sample(t))
    return tuple(out)


def machine_hours(gpus: Mapping[str, int], background: Mapping[str, int], spans: Sequence[JobSpan],
                  terms: Mapping[str, JobTerms]) -> float:
    """Machines in use (background included) integrated over the time any job runs, in hours of
    paper-scale time (M2)."""
    state, total, last = _Occupancy(gpus, background, terms), 0.0, None
    for t, sign, k in _changes(spans):
        if last is not None and state.running:
            total += state.used * (t - last)
        state.apply(spans[k], sign)
        last = t
    return total / 3600.0


@dataclasses.dataclass(frozen=True)
class ClusterFigures:
    """A policy's cluster figures over its run: the samples' means (None: no sample had the figure),
    the total profit and the machine hours."""

    samples: int
    used_machines_mean: float | None
    fragmentation_rate_mean: float | None
    comm_overhead_gb_mean: float | None
    profit_rate_mean: float | None
    total_profit: float | None
    machine_hours: float

    @staticmethod
    def of(series: Sequence[ClusterSample], hours: float) -> ClusterFigures:
        """The figures of ``series`` and the run's ``hours``."""

        def mean(values):
            values = [v for v in values if v is not None]
            return sum(values) / len(values) if values else None

        profits = [s.profit_rate for s in series if s.profit_rate is not None]
        return ClusterFigures(
            len(series), mean(s.used_machines for s in series), mean(s.fragmentation_rate for s in series),
            mean(s.comm_overhead_bytes / 1e9 for s in series), mean(profits), sum(profits) if profits else None,
            hours)


def cluster_lines(rows: Sequence[tuple[str, ClusterFigures | None]]) -> list[str]:
    """The report's table of ``(policy, figures)`` rows; no lines when no policy has figures."""
    if not any(f is not None and f.samples for _, f in rows):
        return []

    def cell(fmt: str, v: float | None) -> str:
        return "-" if v is None else fmt.format(v)

    table = [[p, cell("{:.1f}", f.used_machines_mean), cell("{:.3f}", f.fragmentation_rate_mean),
              cell("{:.3f}", f.comm_overhead_gb_mean), cell("{:.3g}", f.profit_rate_mean),
              cell("{:.4g}", f.total_profit), cell("{:.4g}", f.machine_hours), str(f.samples)]
             for p, f in rows if f is not None]
    return ["The cluster at each arrival (Titan's metrics, means over the arrivals; cluster.csv per policy):",
            format_table(["policy", "used machines", "fragmentation rate", "comm overhead GB", "profit rate",
                          "total profit", "machine hours", "arrivals"], table)]


def write_csv(path: str, series: Sequence[ClusterSample]) -> None:
    """``cluster.csv``: one row per sample, :data:`FIELDS` as columns (empty: None)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(FIELDS)
        for s in series:
            w.writerow(["" if getattr(s, k) is None else getattr(s, k) for k in FIELDS])


def read_csv(path: str) -> tuple[ClusterSample, ...]:
    """The samples :func:`write_csv` wrote.

    Raises:
        KeyError, ValueError: not such a file.
    """
    ints = {"jobs_running", "used_machines", "busy_gpus", "jobs_not_in_overhead"}
    out = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            values = {k: None if row[k] == "" else int(row[k]) if k in ints else float(row[k]) for k in FIELDS}
            out.append(ClusterSample(**values))
    return tuple(out)
