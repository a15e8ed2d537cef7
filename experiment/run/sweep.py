"""A parameter sweep: one config field over values and seeds, policies compared, on either back end.

The NetPack paper's figures vary one parameter (Fig. 12 the cross-rack oversubscription 1:1 to
20:1, Fig. 11 the switch memory, Fig. 9 the cluster size), run each experiment 10 times and plot
every policy's mean JCT normalised to NetPack's, bars the mean and error bars the standard
deviation over the runs (``docs/resolutions.md`` NetPack §5.6-5.7). ``run_testbed.py sweep``
does that on the flow-level simulator (or, with ``--backend emu``, on the emulated network, one
point after another)::

    run_testbed.py sweep -c experiments/x.yaml --vary topology.oversubscription=1,2,4,8,20 --seeds 1-10

The stages, pure but for the last:

* :mod:`experiment.run.sweep_spec`: what runs (the varied field, its values and seeds, and each
  point's validated config, :func:`~experiment.run.sweep_spec.sweep_points`);
* :func:`sweep_rows` and :func:`sweep_stats`: the runs' summaries -> a :class:`SweepRow` per
  value, seed and policy (JCT normalised to the reference policy's at the same value and seed)
  and a :class:`SweepStat` per value and policy (mean and standard deviation over seeds);
* :func:`run_sweep`: runs every point through the driver (:func:`experiment.run.driver.execute`) on an
  executor (:mod:`experiment.run.executors`: here or a local process pool, or a Dask cluster; the
  simulator is deterministic, so the rows are the same on each), then writes the results.

It writes ``<results>/<timestamp>-<name>-sweep/``:

* ``config.json`` (the base config), ``status.json``;
* ``<param>=<value>/seed-<n>/``: that point's simulated run as ``run_testbed.py --backend sim``
  writes it (``summary.json``, ``summary.csv``, ``jobs.csv``, ``experiment.json``, per-policy
  ``placements.json``, ...) and ``run.log`` (the run's own progress lines and report);
* ``sweep.csv`` (the rows, :data:`ROW_COLUMNS`), ``sweep.json`` (:meth:`SweepResult.to_dict`:
  the sweep's parameter, values, seeds and reference and the per-value statistics) and
  ``sweep.png`` (normalised mean JCT and DE against the value, one line per policy);

and prints a table of normalised JCT, ``mean±std`` over seeds, a row per value and a column per
policy. Times are virtual (paper-scale) seconds.

[Ours] where the paper is silent: the standard deviation is the sample one (n - 1; none with one
seed), and the reference policy defaults to the one the project's reports normalise to
(:func:`experiment.reporting.efficiency.reference_policy`: the first ``netpack``, else the first policy).
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Sequence

from common.errors import ConfigError
from common.progress import Eta
from experiment import make_backend
from experiment.config.rules import show
from experiment.config.schema import ExperimentConfig, policy_specs, to_dict
from experiment.reporting import results
from experiment.reporting.efficiency import reference_policy
from experiment.reporting.summary import PolicySummary
from experiment.run.executors import Executor, executor
from experiment.run.sweep_spec import (
    SweepPoint,
    SweepValue,
    Vary,
    is_number,
    same_value,
    sweep_points,
    value_text,
)

MAX_WORKERS = 256
ROW_COLUMNS = ("value", "seed", "policy", "jct_mean_s", "jct_norm", "distribution_efficiency", "comm_mean_s",
               "makespan_s", "error")
"""The columns of ``sweep.csv``: the keys of :meth:`SweepRow.to_dict`."""


# -- records -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PointResult:
    """What one point's simulated run reports (:func:`run_point`).

    Attributes:
        value_index, seed: the point's (:class:`SweepPoint`).
        outcomes: each policy's summary, or why it could not place every job, in the config's policy order.
        wall_s: the wall time the run took, seconds.
    """

    value_index: int
    seed: int
    outcomes: dict[str, PolicySummary | str]
    wall_s: float


@dataclasses.dataclass(frozen=True)
class SweepRow:
    """One policy at one value and seed: a row of ``sweep.csv``.

    Attributes:
        value: the parameter's value.
        seed: the seed.
        policy: the policy spec.
        jct_mean_s: mean job completion time (arrival to end), virtual seconds.
        jct_norm: ``jct_mean_s`` over the reference policy's at the same value and seed (None:
            this policy or the reference could not place every job).
        distribution_efficiency: NetPack's DE (:mod:`experiment.reporting.efficiency`).
        comm_mean_s: mean over jobs of their mean communication time per iteration.
        makespan_s: the end of the last job.
        error: why the policy could not place every job (None: it could; the figures are then None).
    """

    value: SweepValue
    seed: int
    policy: str
    jct_mean_s: float | None
    jct_norm: float | None
    distribution_efficiency: float | None
    comm_mean_s: float | None
    makespan_s: float | None
    error: str | None = None

    def to_dict(self) -> dict:
        """JSON form, and a row of ``sweep.csv`` (:data:`ROW_COLUMNS`)."""
        return {"value": self.value, "seed": self.seed, "policy": self.policy, "jct_mean_s": self.jct_mean_s,
                "jct_norm": self.jct_norm, "distribution_efficiency": self.distribution_efficiency,
                "comm_mean_s": self.comm_mean_s, "makespan_s": self.makespan_s, "error": self.error}


@dataclasses.dataclass(frozen=True)
class SweepStat:
    """One policy at one value, over the seeds run: what the figure's bar and error bar show.

    Attributes:
        value: the parameter's value.
        policy: the policy spec.
        seeds: seeds with a normalised JCT (both this policy and the reference placed every job).
        failed: seeds at which this policy could not place every job.
        jct_norm_mean, jct_norm_std: mean and sample standard deviation of :attr:`SweepRow.jct_norm`
            (None: no seed; the std also with one).
        de_mean, de_std: the same of the distribution efficiency, over the seeds that have one.
    """

    value: SweepValue
    policy: str
    seeds: int
    failed: int
    jct_norm_mean: float | None
    jct_norm_std: float | None
    de_mean: float | None
    de_std: float | None

    def to_dict(self) -> dict:
        """JSON form: an entry of ``sweep.json``'s ``stats``."""
        return {"value": self.value, "policy": self.policy, "seeds": self.seeds, "failed": self.failed,
                "jct_norm_mean": self.jct_norm_mean, "jct_norm_std": self.jct_norm_std,
                "de_mean": self.de_mean, "de_std": self.de_std}


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """A sweep's results: what ``sweep.csv``, ``sweep.json``, ``sweep.png`` and the table hold.

    Attributes:
        run_dir: the sweep's directory.
        vary: the parameter and its values.
        seeds: the seeds, in order.
        policies: the policy specs, in the config's order.
        reference: the policy JCTs are normalised to.
        runs: points in the sweep (values x seeds).
        runs_done: points that ran (fewer when the sweep was interrupted or failed).
        rows: a row per value, seed and policy of the points that ran, in value, seed, policy order.
        stats: a statistic per value and policy, in value, policy order.
    """

    run_dir: str
    vary: Vary
    seeds: tuple[int, ...]
    policies: tuple[str, ...]
    reference: str
    runs: int
    runs_done: int
    rows: tuple[SweepRow, ...]
    stats: tuple[SweepStat, ...]

    def to_dict(self) -> dict:
        """JSON form: ``sweep.json`` (the rows are ``sweep.csv``'s)."""
        return {"parameter": self.vary.name, "values": list(self.vary.values), "seeds": list(self.seeds),
                "policies": list(self.policies), "reference": self.reference, "runs": self.runs,
                "runs_done": self.runs_done, "std": "sample (n - 1)",
                "stats": [s.to_dict() for s in self.stats]}


# -- results: pure --------------------------------------------------------------------------------


def sweep_rows(vary: Vary, seeds: Sequence[int], policies: Sequence[str], reference: str,
               done: Iterable[PointResult]) -> tuple[SweepRow, ...]:
    """A row per value, seed and policy of the points ``done``, in value, seed, policy order; each
    JCT normalised to the reference's at the same value and seed."""
    order = {s: i for i, s in enumerate(seeds)}
    rows = []
    for res in sorted(done, key=lambda r: (r.value_index, order[r.seed])):
        value = vary.values[res.value_index]
        ref = res.outcomes.get(reference)
        ref_jct = ref.jct_mean_s if isinstance(ref, PolicySummary) else None
        for policy in policies:
            s = res.outcomes[policy]
            if not isinstance(s, PolicySummary):
                rows.append(SweepRow(value, res.seed, policy, None, None, None, None, None, s))
                continue
            norm = s.jct_mean_s / ref_jct if ref_jct else None
            rows.append(SweepRow(value, res.seed, policy, s.jct_mean_s, norm, s.distribution_efficiency,
                                 s.comm_mean_s, s.makespan_s))
    return tuple(rows)


def sweep_stats(vary: Vary, policies: Sequence[str], rows: Sequence[SweepRow]) -> tuple[SweepStat, ...]:
    """Mean and sample standard deviation over seeds of normalised JCT and of DE, per value and policy."""
    def mean_std(xs: list[float]) -> tuple[float | None, float | None]:
        return (statistics.fmean(xs) if xs else None), (statistics.stdev(xs) if len(xs) > 1 else None)

    stats = []
    for value in vary.values:
        for policy in policies:
            mine = [r for r in rows if r.policy == policy and same_value(r.value, value)]
            jct = [r.jct_norm for r in mine if r.jct_norm is not None]
            de = [r.distribution_efficiency for r in mine if r.distribution_efficiency is not None]
            stats.append(SweepStat(value, policy, len(jct), sum(1 for r in mine if r.error), *mean_std(jct),
                                   *mean_std(de)))
    return tuple(stats)


def table_lines(result: SweepResult) -> list[str]:
    """The printed table: a row per value, a column per policy, cells normalised JCT ``mean±std``
    over seeds (``(k/n)`` when only k of the n seeds count, ``-`` when none does)."""
    from experiment.reporting.report import format_table

    by_key = {(value_text(s.value), s.policy): s for s in result.stats}
    n = len(result.seeds)

    def cell(s: SweepStat) -> str:
        if s.jct_norm_mean is None:
            return "-" if not s.failed else f"- ({s.failed} failed)"
        text = f"{s.jct_norm_mean:.3f}" + (f"±{s.jct_norm_std:.3f}" if s.jct_norm_std is not None else "")
        return text + (f" ({s.seeds}/{n})" if s.seeds < n else "")

    table = [[value_text(v), *(cell(by_key[value_text(v), p]) for p in result.policies)]
             for v in result.vary.values]
    return [f"Mean JCT normalised to {result.reference} per seed, mean±std over {n} seed(s) "
            f"({result.runs_done} of {result.runs} runs):",
            format_table([result.vary.param, *result.policies], table)]


def plot_sweep(result: SweepResult, path: str) -> str | None:
    """Normalised mean JCT and DE against the value, a line per policy with std error bars; the
    path, or None with nothing to plot. Numeric values are placed by value, others evenly."""
    if not any(s.jct_norm_mean is not None or s.de_mean is not None for s in result.stats):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = result.vary.values
    numeric = all(map(is_number, values))
    xs = list(values) if numeric else list(range(len(values)))
    by_key = {(value_text(s.value), s.policy): s for s in result.stats}
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for policy in result.policies:
        stats = [by_key[value_text(v), policy] for v in values]
        for ax, mean, std in ((axes[0], "jct_norm_mean", "jct_norm_std"), (axes[1], "de_mean", "de_std")):
            ys = [math.nan if getattr(s, mean) is None else getattr(s, mean) for s in stats]
            errs = [getattr(s, std) or 0.0 for s in stats]
            ax.errorbar(xs, ys, yerr=errs, marker="o", markersize=4, capsize=3, label=policy)
    axes[0].axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    axes[0].set_ylabel(f"mean JCT / {result.reference}'s", fontsize=9)
    axes[1].set_ylabel("distribution efficiency", fontsize=9)
    for ax in axes:
        ax.set_xlabel(result.vary.name, fontsize=9)
        if not numeric:
            ax.set_xticks(xs, [value_text(v) for v in values], fontsize=8)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"simulator sweep of {result.vary.name}: mean ± std over {len(result.seeds)} seed(s)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- running ---------------------------------------------------------------------------------------


def run_point(point: SweepPoint, run_dir: str, backend: str = "sim") -> PointResult:
    """Run every policy of ``point`` on the back end named ``backend`` into ``run_dir/point.path``
    through the one driver (:func:`experiment.run.driver.execute`); its progress lines and report go only
    to ``run.log`` there (the driver keeps it). Runs in a pool worker with ``workers > 1``."""
    from experiment import make_backend
    from experiment.run.driver import execute

    pdir = os.path.join(run_dir, point.path)
    os.makedirs(pdir, exist_ok=True)
    t0 = time.monotonic()
    with open(os.devnull, "w") as quiet:
        out = execute(point.cfg, make_backend(backend), lambda line: None, pdir, policy_specs(point.cfg), quiet,
                      g=point.graph)
    outcomes = {spec: out.runs[spec].summary if spec in out.runs else out.unplaced[spec]
                for spec in policy_specs(point.cfg)}
    return PointResult(point.value_index, point.seed, outcomes, time.monotonic() - t0)


def _where(on: str, workers: int, points: int, address: str | None) -> str:
    """Where the runs go, for the first progress line."""
    if address:
        return f"on the Dask scheduler {address}"
    at_once = f"{min(workers, points)} at a time"
    return f"{at_once} (local Dask cluster)" if on == "dask" else at_once


def _seeds_text(seeds: Sequence[int]) -> str:
    """``1-10`` for consecutive seeds, else the list."""
    if len(seeds) > 2 and list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


def run_sweep(cfg: ExperimentConfig, vary: Vary, seeds: Sequence[int], run_dir: str | None = None,
              policies: Sequence[str] | None = None, reference: str | None = None, workers: int = 1,
              say: Callable[[str], None] = print, on: str = "local", address: str | None = None,
              backend: str = "sim", say_table: Callable[[str], None] | None = None) -> SweepResult:
    """Run every value x seed of the sweep on a back end and write its results (module docstring).

    Every point is validated before anything runs or any directory is made (:func:`sweep_points`).
    Progress lines ``[k/N] oversubscription=4 seed 3: 12.3 s`` come as points end; then the table.
    ``status.json`` goes running -> complete, incomplete (some policy could not place every job at
    some point), interrupted (Ctrl-C: the pool's workers are stopped) or failed; in the last two the
    points done so far are written.

    Args:
        cfg: the base config.
        vary: the parameter and its values.
        seeds: the seeds each value runs with.
        run_dir: the sweep's directory (default: a new ``<timestamp>-<name>-sweep`` in
            ``cfg.results_dir``).
        policies: policy specs instead of the config's (validated as the config's are).
        reference: the policy JCTs are normalised to (default: the first ``netpack``, else the first).
        workers: points run at once (a local process pool, or a local Dask cluster's processes).
        say: where progress lines go.
        on: the executor (:data:`experiment.run.executors.EXECUTORS`: ``local`` or ``dask``).
        address: with ``dask``, a scheduler to run on instead of a local cluster.
        backend: the back end every point runs on (``experiment.BACKENDS``); one that runs one
            experiment at a time on this machine (the emulator) takes one worker, here.
        say_table: where the table and the list of files go (default: ``say``).

    Returns:
        The rows and statistics.

    Raises:
        ConfigError: an invalid point, reference, worker count or executor, Dask missing or its
            scheduler unreachable; nothing has run.
        PolicyIncomplete: some policy could not place every job at some point (all is written).
    """
    if policies:
        cfg = dataclasses.replace(cfg, policies=tuple(policies))
    run_on, what = _checked_executor(backend, workers, on, address)
    points = sweep_points(cfg, vary, seeds, backend)
    specs = tuple(policy_specs(points[0].cfg))
    reference = _checked_reference(specs, reference)
    run_dir = os.path.abspath(run_dir or results.make_run_dir(f"{cfg.name}-sweep", cfg.results_dir))
    os.makedirs(run_dir, exist_ok=True)
    results.write_status(run_dir, "running")
    progress = _Progress(run_dir, vary, tuple(seeds), specs, reference, len(points), say)
    say(progress.opening(what, _where(on, workers, len(points), address)))
    result = _run_points(progress, cfg, points, backend, run_on, workers, address)
    _say_table(result, say_table or say)
    failed = [f"{r.policy} at {vary.label(r.value)} seed {r.seed}" for r in result.rows if r.error]
    results.finish(run_dir, failed, len(result.rows), "policy runs")
    return result


def _checked_executor(backend: str, workers: int, on: str, address: str | None) -> tuple[Executor, str]:
    """The executor called ``on`` and what the back end called ``backend`` is (its ``what``), checked
    against ``workers`` and ``address`` (:func:`run_sweep`'s).

    Raises:
        ConfigError: a worker count out of range, an unknown executor, or a back end that runs one
            experiment at a time on this machine given more than one worker or another executor.
    """
    if not 1 <= workers <= MAX_WORKERS:
        raise ConfigError(f"--workers: {workers} is out of range (an integer in [1, {MAX_WORKERS}])")
    run_on = executor(on)
    runner = make_backend(backend)
    if not runner.concurrent_runs and (workers > 1 or on != "local" or address):
        raise ConfigError(f"the {runner.what} runs one experiment at a time on this machine: sweep it with "
                          f"--workers 1 and the local executor")
    return run_on, runner.what


def _checked_reference(specs: Sequence[str], reference: str | None) -> str:
    """The policy JCTs are normalised to: ``reference``, or by default
    :func:`experiment.reporting.efficiency.reference_policy` of ``specs``.

    Raises:
        ConfigError: ``reference`` is not one of ``specs``.
    """
    if reference is None:
        return reference_policy(specs)
    if reference not in specs:
        raise ConfigError(f"--reference: {show(reference)} is not a policy of the sweep (policies: {', '.join(specs)})")
    return reference


@dataclasses.dataclass
class _Progress:
    """A running sweep's points as they end: its progress lines, and its result so far (attributes
    as :class:`SweepResult`'s; ``say``: where progress lines go)."""

    run_dir: str
    vary: Vary
    seeds: tuple[int, ...]
    policies: tuple[str, ...]
    reference: str
    runs: int
    say: Callable[[str], None]
    done: list[PointResult] = dataclasses.field(default_factory=list)

    def __post_init__(self):
        self.eta = Eta(self.runs)  # the points start as the sweep does

    def opening(self, what: str, where: str) -> str:
        """The sweep's first line: what varies over which seeds, the policies, on ``what`` and ``where``."""
        runs = f"{self.runs} run{'s' if self.runs > 1 else ''}"
        return (f"sweep {self.run_dir}: {self.vary.name} = {', '.join(map(value_text, self.vary.values))} x seeds "
                f"{_seeds_text(self.seeds)} ({runs}) of {len(self.policies)} policies on the {what}, {where}; "
                f"JCT normalised to {self.reference}; each run in {self.vary.param}=<value>/seed-<n>/")

    def add(self, res: PointResult) -> None:
        """Note a point that ended, with a progress line."""
        self.done.append(res)
        point = self.vary.label(self.vary.values[res.value_index])
        failed = [p for p, s in res.outcomes.items() if not isinstance(s, PolicySummary)]
        note = f"; could not place every job: {', '.join(failed)}" if failed else ""
        self.say(f"[{len(self.done)}/{self.runs}] {point} seed {res.seed}: {res.wall_s:.1f} s{note} "
                 f"({self.eta.text(len(self.done))})")

    def write_result(self) -> SweepResult:
        """Write the result of the points done so far (:func:`_write`), and return it."""
        rows = sweep_rows(self.vary, self.seeds, self.policies, self.reference, self.done)
        result = SweepResult(self.run_dir, self.vary, self.seeds, self.policies, self.reference, self.runs,
                             len(self.done), rows, sweep_stats(self.vary, self.policies, rows))
        _write(result)
        return result


def _run_points(progress: _Progress, cfg: ExperimentConfig, points: Sequence[SweepPoint], backend: str,
                run_on: Executor, workers: int, address: str | None) -> SweepResult:
    """Run every point on ``backend`` with ``run_on``, and write the results of those done: when all
    are, or when the sweep is interrupted or fails (then with its status, before re-raising)."""
    run_dir, done = progress.run_dir, progress.done
    try:
        results.write_json(os.path.join(run_dir, "config.json"), to_dict(cfg))
        run_on(run_point, [(p, run_dir, backend) for p in points], progress.add, workers, address)
    except KeyboardInterrupt:
        progress.write_result()
        results.write_status(run_dir, "interrupted", f"{len(done)} of {len(points)} runs done")
        progress.say(f"interrupted after {len(done)} of {len(points)} runs; theirs are in {run_dir}/sweep.csv, "
                     f"sweep.json")
        raise
    except BaseException as e:
        progress.write_result()
        results.write_status(run_dir, "failed", f"{type(e).__name__}: {e}")
        raise
    return progress.write_result()


def _say_table(result: SweepResult, say: Callable[[str], None]) -> None:
    """The sweep's table of normalised JCT (:func:`table_lines`), then the files written."""
    for line in table_lines(result):
        say(line)
    say(f"written: {result.run_dir}/sweep.csv, sweep.json" + (", sweep.png" if os.path.exists(
        os.path.join(result.run_dir, "sweep.png")) else ""))


def _write(result: SweepResult) -> None:
    """``sweep.csv``, ``sweep.json`` and ``sweep.png`` of ``result`` (the plot only with something on it)."""
    with open(os.path.join(result.run_dir, "sweep.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=ROW_COLUMNS)
        w.writeheader()
        w.writerows({**r.to_dict(), "value": value_text(r.value)} for r in result.rows)
    results.write_json(os.path.join(result.run_dir, "sweep.json"), result.to_dict())
    plot_sweep(result, os.path.join(result.run_dir, "sweep.png"))
