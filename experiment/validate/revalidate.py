"""A recorded run re-simulated with other simulator options, to validate them against its measurements.

An emulated run estimates every job with the simulator options of its config (``simulator:``).
``run_testbed.py validate RUN_DIR --simulator latency_us=60,token_buckets=true`` asks what other
options would have estimated: the run's own schedule (its batches or its start times, its
placements, its jobs' recorded buckets) is re-driven through the simulator
(:func:`experiment.run.resimulate.simulate_schedule`, the function the run itself used) with the
options changed, and the estimates are compared with the measurements as any user's are
(:mod:`experiment.validate.estimates`): per policy, overall, per class of job. Nothing is re-measured: no
root, seconds of CPU. With no option changed it gives the run's own estimates back.

What cannot be re-driven from the files is refused with one message: a run with preemptions (the
ends of preempted runs are not written), with time-shift decisions (Cassini's), or whose
simulator needs the measured start offsets (MLTCP congestion controls).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
from collections.abc import Callable

from common.errors import ConfigError
from common.specs import parse_value, safe_name
from congestion import congestion_control
from experiment.config.rules import check_fields
from experiment.config.schema import from_dict, to_dict
from experiment.reporting.export import read_run
from experiment.reporting.validation import (
    Comparison,
    MarksComparison,
    MarksStats,
    ValidationStats,
    job_class,
    marks_by_class,
    marks_stats,
    stats_by_class,
    validation_stats,
)
from experiment.run.loop import LoopResult, Started
from experiment.run.resimulate import simulate_schedule
from experiment.validate.estimates import (
    EstimatesError,
    EstimatesFile,
    EstimatesReport,
    compare,
    parse_estimates,
    run_measurements,
)
from placement.base import Placement
from scheduling import make_scheduler
from sim.engines import engines_where, sim_engine


def parse_simulator_options(text: str) -> dict:
    """``key=value,key=value`` of the config's ``simulator`` section (values as YAML scalars:
    numbers, true/false, names); the config validates them.

    Raises:
        ConfigError: an item without ``=`` or a key given twice.
    """
    out: dict = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ConfigError(f"--simulator: {item!r} is not key=value (e.g. latency_us=60,token_buckets=true)")
        if key in out:
            raise ConfigError(f"--simulator: {key} given twice")
        out[key] = parse_value(value)
    if not out:
        raise ConfigError("--simulator: no option given (e.g. latency_us=60,token_buckets=true)")
    return out


@dataclasses.dataclass(frozen=True)
class RecordedRun:
    """What re-simulating a run needs of its files, read once (:func:`read_recorded_run`).

    Attributes:
        run_dir: the run's directory.
        cfg: its config.
        g: its topology.
        summary: its ``summary.json``.
        schedules: per policy, in the run's order: its starts (a :class:`LoopResult`), its batches
            (None: not a batch scheduler) and its jobs' recorded buckets.
    """

    run_dir: str
    cfg: object
    g: object
    summary: dict
    schedules: tuple[tuple[str, LoopResult, list[list[str]] | None, dict], ...]

    def simulate(self, options: dict) -> dict[str, dict]:
        """Every policy's jobs re-simulated with the config's ``simulator`` section updated by
        ``options``: per policy, each job's :class:`sim.flowsim.JobEstimate`.

        Raises:
            ConfigError: an option is unknown or out of range (the config's message).
        """
        data = to_dict(self.cfg)
        data["simulator"] = {**data.get("simulator", {}), **options}
        cfg = check_fields(from_dict(data))
        return {policy: simulate_schedule(cfg, self.g, loop, buckets, batches)
                for policy, loop, batches, buckets in self.schedules}

    def estimates(self, options: dict, simulated: dict | None = None) -> tuple[str, EstimatesFile]:
        """:meth:`simulate` (or its ``simulated`` result) as an estimates CSV (``policy, job, comm_s,
        iteration_s``) and the file it reads as."""
        simulated = self.simulate(options) if simulated is None else simulated
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["policy", "job", "comm_s", "iteration_s"])
        for policy, estimates in simulated.items():
            for job in sorted(estimates):
                e = estimates[job]
                if e.comm_mean_s is not None:
                    w.writerow([policy, job, repr(e.comm_mean_s), repr(e.iteration_mean_s)])
        text = out.getvalue()
        return text, parse_estimates(text, f"simulator {options_name(options)}")

    def compare(self, options: dict) -> EstimatesReport:
        """:meth:`estimates` with ``options`` compared with the run's measurements."""
        return compare(self.estimates(options)[1], run_measurements(self.summary))

    def mark_comparisons(self, simulated: dict) -> list[MarksComparison]:
        """The measured ECN marks of every job with a class of job against ``simulated``'s estimates
        (:meth:`simulate` with ``ecn`` on; empty when the run measured no marks or the estimates
        have none)."""
        out = []
        for s in self.summary.get("policies") or []:
            estimates = simulated.get(s["policy"], {})
            for job, j in sorted(s["jobs"].items()):
                e, cls = estimates.get(job), job_class(j.get("fidelity"))
                if j.get("ecn_marks") is not None and e is not None and e.ecn_marks is not None and cls is not None:
                    out.append(MarksComparison(s["policy"], job, int(j["ecn_marks"]), e.ecn_marks, cls))
        return out


def read_recorded_run(run_dir: str) -> RecordedRun:
    """The run in ``run_dir``, ready to re-simulate.

    Raises:
        EstimatesError: the run cannot be re-driven from its files (see the module docstring).
        experiment.reporting.export.ResultsError: a results file is missing or malformed.
    """
    cfg, g, summary, files = read_run(run_dir)
    if congestion_control(cfg.congestion_control).is_mltcp:
        raise EstimatesError(f"{run_dir}: its hosts ran an MLTCP congestion control, whose re-simulation needs "
                             "the measured start offsets of its jobs; compare its own estimates (jobs.csv)")
    in_batches = make_scheduler(cfg.scheduler, seed=cfg.seed).starts_in_batches
    schedules = []
    for s in summary.get("policies") or []:
        policy = s["policy"]
        if s.get("preemptions"):
            raise EstimatesError(f"{run_dir}: policy {policy} preempted jobs {s['preemptions']} time(s); the ends of "
                                 "preempted runs are not in its files, so its schedule cannot be re-driven")
        if os.path.exists(os.path.join(run_dir, safe_name(policy), "decisions.json")):
            raise EstimatesError(f"{run_dir}: policy {policy} time-shifted jobs (decisions.json); its shifts are "
                                 "not re-driven from the files")
        pf = files[policy]
        starts = tuple(Started(float(p["start_s"]), p["job"], Placement.from_dict(p)) for p in pf.placements)
        batches = None
        if in_batches:
            waves: dict[int, list[str]] = {}
            for p in pf.placements:
                waves.setdefault(int(p.get("wave", 0)), []).append(p["job"])
            batches = [waves[k] for k in sorted(waves)]
        schedules.append((policy, LoopResult(jct_s={}, segments=(), preemptions=0, starts=starts), batches,
                          dict(pf.recorded_buckets)))
    return RecordedRun(run_dir, cfg, g, summary, tuple(schedules))


def options_name(options: dict) -> str:
    """``latency_us=60,token_buckets=true``: the options as given, for names and messages."""
    return ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in options.items())


class NothingToFit(EstimatesError):
    """A run without the jobs a calibration fits on."""


CALIBRATED_CLASS = "uncontended"
"""The jobs a latency is fitted on: those alone on their links, whose estimate is bytes over rates
plus latency, nothing of how links are shared."""

MAX_LATENCY_US = 5000.0
"""The largest per-message latency :func:`calibrate_latency` considers, paper-scale microseconds."""


@dataclasses.dataclass(frozen=True)
class Fit:
    """What fitting one simulator option to one class of a run's jobs did.

    Attributes:
        jobs: jobs fitted on.
        before: their validation with the run's configured options.
        after: with the fitted value.
        by_class_before, by_class_after: every class's validation with the configured options and
            with the fitted value (:func:`experiment.reporting.validation.stats_by_class`), so a user sees what
            it does to the jobs it was not fitted on.
        evaluations: re-simulations made.
    """

    jobs: int
    before: ValidationStats
    after: ValidationStats
    by_class_before: dict
    by_class_after: dict
    evaluations: int

    def fit_dict(self, fitted_on: str) -> dict:
        """The JSON form of what every fit has (``calibration.json``)."""
        return {"jobs": self.jobs, "fitted_on": fitted_on, "before": self.before.to_dict(),
                "after": self.after.to_dict(),
                "by_class_before": {c: s.to_dict() for c, s in self.by_class_before.items()},
                "by_class_after": {c: s.to_dict() for c, s in self.by_class_after.items()},
                "evaluations": self.evaluations}


@dataclasses.dataclass(frozen=True)
class LatencyCalibration(Fit):
    """A per-message latency fitted to a run's uncontended jobs (:func:`calibrate_latency`).

    Attributes:
        latency_us: the fitted ``simulator.latency_us``, paper-scale microseconds (0.1 µs resolution).
        dilation: the run's time dilation (:attr:`wall_us` is the latency in wall time).
    """

    latency_us: float
    dilation: float

    @property
    def wall_us(self) -> float:
        """The latency in wall microseconds (times the dilation): what the machine spent per message."""
        return round(self.latency_us * self.dilation, 1)

    def to_dict(self) -> dict:
        """JSON form (``calibration.json``)."""
        return {"simulator": {"latency_us": self.latency_us}, "wall_us": self.wall_us, "dilation": self.dilation,
                **self.fit_dict(CALIBRATED_CLASS)}


def golden_min(cost: Callable[[float], float], lo: float, hi: float, tolerance: float) -> float:
    """The ``x`` in [lo, hi] of least ``cost``, by golden-section search to ``tolerance`` (exact for a
    unimodal cost): the better end of the last bracket."""
    ratio = (math.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    while hi - lo > tolerance:
        if cost(a) <= cost(b):
            hi, b = b, a
            a = hi - ratio * (hi - lo)
        else:
            lo, a = a, b
            b = lo + ratio * (hi - lo)
    return min((lo, hi), key=cost)


class _Evaluations:
    """A run's re-simulations under ``base`` options plus one varied option, each made once."""

    def __init__(self, run: RecordedRun, base: dict, key: str, digits: int):
        self.run, self.base, self.key, self.digits = run, base, key, digits
        self.memo: dict[float, EstimatesReport] = {}

    def __call__(self, value: float) -> EstimatesReport:
        value = round(value, self.digits)
        if value not in self.memo:
            self.memo[value] = self.run.compare({**self.base, self.key: value})
        return self.memo[value]


def _of_class(report: EstimatesReport, job_class: str) -> list[Comparison]:
    """The communication-time comparisons of one class of job."""
    comm = report.metric("comm")
    return [c for c in (comm.comparisons if comm else ()) if c.job_class == job_class]


def _needs_step_level(run: RecordedRun, fitted: str) -> None:
    """Raise :class:`EstimatesError` unless the run's simulator engine is a step-level one (what
    ``fitted``, the figure a calibration fits, is a model of)."""
    mode = run.cfg.simulator.mode
    if not sim_engine(mode).step_level:
        raise EstimatesError(f"{run.run_dir}: its simulator ran in {mode!r} mode; {fitted} fitted on the "
                             f"step-level engine (simulator.mode: {engines_where(lambda e: e.step_level)})")


def calibrate_latency(run: RecordedRun, tolerance_us: float = 1.0) -> LatencyCalibration:
    """The ``simulator.latency_us`` that makes the step-level simulator's estimates of the run's
    uncontended jobs closest to their measurements: the least sum of squared relative errors of their
    communication times, by golden-section search over [0, :data:`MAX_LATENCY_US`] (each estimate
    grows with the latency, so the sum is unimodal) to ``tolerance_us``. The run's other simulator
    options are kept.

    Raises:
        NothingToFit: the run has no uncontended job measured.
        EstimatesError: its simulator is not the step-level one (the fluid engine's latency is per step
            too, but its validation is not what a latency is fitted on).
    """
    _needs_step_level(run, "a latency is")
    report = _Evaluations(run, {}, "latency_us", 1)

    def fitted(r: EstimatesReport) -> list[Comparison]:
        return _of_class(r, CALIBRATED_CLASS)

    def cost(latency_us: float) -> float:
        return sum(c.rel_error ** 2 for c in fitted(report(latency_us)))

    configured = run.compare({})
    if not fitted(configured):
        raise NothingToFit(f"{run.run_dir}: no uncontended job was measured (every job shared links, ran on one "
                             "machine or was latency-bound); calibrate on a run with jobs alone on their links, "
                             "such as the default experiment's")
    best = min((golden_min(cost, 0.0, MAX_LATENCY_US, tolerance_us), 0.0), key=cost)
    after = report(best)
    comm_before, comm_after = configured.metric("comm"), after.metric("comm")
    return LatencyCalibration(
        latency_us=round(best, 1), dilation=run.cfg.dilation, jobs=len(fitted(after)),
        before=validation_stats(fitted(configured)), after=validation_stats(fitted(after)),
        by_class_before=stats_by_class(comm_before.comparisons), by_class_after=stats_by_class(comm_after.comparisons),
        evaluations=len(report.memo))


SHARED_CLASS = "contended"
"""The jobs TCP's share of a shared link is fitted on: those that shared links, where it applies."""

EFFICIENCY_RANGE = (0.3, 1.0)
"""The ``simulator.tcp_efficiency`` values :func:`calibrate_tcp_efficiency` considers."""


@dataclasses.dataclass(frozen=True)
class EfficiencyCalibration(Fit):
    """TCP's share of a shared link fitted to a run's contended jobs (:func:`calibrate_tcp_efficiency`).

    Attributes:
        efficiency: the fitted ``simulator.tcp_efficiency`` (3 decimals; 1 is max-min).
        base: the options both validations were made with besides it (a latency fitted first).
    """

    efficiency: float
    base: dict

    def to_dict(self) -> dict:
        """JSON form (``calibration.json``'s ``sharing``)."""
        return {"simulator": {"sharing": "tcp", "tcp_efficiency": self.efficiency}, "with": self.base,
                **self.fit_dict(SHARED_CLASS)}


def calibrate_tcp_efficiency(run: RecordedRun, base: dict | None = None,
                             tolerance: float = 0.005) -> EfficiencyCalibration | None:
    """The ``simulator.tcp_efficiency`` (under ``sharing: tcp``) that makes the step-level simulator's
    estimates of the run's contended jobs closest to their measurements: the least sum of squared
    relative errors of their communication times, by golden-section search over
    :data:`EFFICIENCY_RANGE` (a lower share lengthens every estimate it touches) to ``tolerance``,
    with ``base`` (e.g. a fitted latency) applied to both sides. None when no contended job was
    measured, or when none of them saturates a link with another flow in the simulator (the share
    changes no estimate).

    Raises:
        EstimatesError: the run's simulator is not the step-level one (the share is its model).
    """
    _needs_step_level(run, "TCP's share is")
    base = dict(base or {})
    configured = run.compare(base)
    if not _of_class(configured, SHARED_CLASS):
        return None
    report = _Evaluations(run, {**base, "sharing": "tcp"}, "tcp_efficiency", 3)
    if [c.estimated_s for c in _of_class(report(EFFICIENCY_RANGE[0]), SHARED_CLASS)] == [
            c.estimated_s for c in _of_class(report(EFFICIENCY_RANGE[1]), SHARED_CLASS)]:
        return None

    def cost(efficiency: float) -> float:
        return sum(c.rel_error ** 2 for c in _of_class(report(efficiency), SHARED_CLASS))

    best = round(golden_min(cost, *EFFICIENCY_RANGE, tolerance), 3)
    after = report(best)
    return EfficiencyCalibration(
        efficiency=best, base=base, jobs=len(_of_class(after, SHARED_CLASS)),
        before=validation_stats(_of_class(configured, SHARED_CLASS)),
        after=validation_stats(_of_class(after, SHARED_CLASS)),
        by_class_before=stats_by_class(configured.metric("comm").comparisons),
        by_class_after=stats_by_class(after.metric("comm").comparisons), evaluations=len(report.memo))


MARKS_CLASS = "contended"
"""The jobs an ECN mark share is fitted on: those that shared links with other jobs, where the
estimate's oversubscribed links are."""


@dataclasses.dataclass(frozen=True)
class MarkShareCalibration:
    """The ``simulator.ecn_mark_share`` fitted to a run's marked contended jobs (:func:`calibrate_mark_share`).

    Attributes:
        share: the fitted share, to 4 decimals.
        jobs: contended jobs fitted on (measured marked, estimated exposed).
        before, after: the marks' validation of every compared job with the configured share and the fitted one.
        by_class_before, by_class_after: per class of job.
    """

    share: float
    jobs: int
    before: MarksStats
    after: MarksStats
    by_class_before: dict
    by_class_after: dict

    def to_dict(self) -> dict:
        """JSON form (``calibration.json``'s ``ecn``)."""
        return {"simulator": {"ecn_mark_share": self.share}, "jobs": self.jobs, "fitted_on": MARKS_CLASS,
                "before": self.before.to_dict(), "after": self.after.to_dict(),
                "by_class_before": {c: s.to_dict() for c, s in self.by_class_before.items()},
                "by_class_after": {c: s.to_dict() for c, s in self.by_class_after.items()}}


def calibrate_mark_share(run: RecordedRun) -> MarkShareCalibration | None:
    """The ``simulator.ecn_mark_share`` that best scales the step-level simulator's ECN estimate to
    the run's contended jobs that were marked: the estimate is linear in the share, so the least sum
    of squared log errors is the geometric mean of measured marks over the packets the estimate
    exposes (the estimate at share 1). None when the run measured no marks on such a job (ECN off,
    or no contention).
    """
    exposed = run.mark_comparisons(run.simulate({"ecn": True, "ecn_mark_share": 1.0}))
    fit = [c for c in exposed if c.job_class == MARKS_CLASS and c.measured > 0 and c.estimated > 0]
    if not fit:
        return None
    share = min(1.0, math.exp(sum(math.log(c.measured / c.estimated) for c in fit) / len(fit)))
    share = max(round(share, 4), 1e-4)

    def scaled(k: float) -> list[MarksComparison]:
        return [dataclasses.replace(c, estimated=c.estimated * k) for c in exposed]

    before, after = scaled(run.cfg.simulator.ecn_mark_share), scaled(share)
    return MarkShareCalibration(share, len(fit), marks_stats(before), marks_stats(after), marks_by_class(before),
                                marks_by_class(after))
