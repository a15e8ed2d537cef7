"""One run of an experiment on any back end: the one path from a config to a results directory.

:func:`run_experiment` is the driver every back end runs through::

    backend = experiment.make_backend("emu")        # or "sim": the registry, by name
    g = backend.check(cfg)                          # the config, for this back end
    caps = backend.prepare(cfg, g, say)             # this machine, for this config
    with backend.open(cfg, g, run_dir, caps, say, estimate) as session:
        for spec in policies:
            run = session.run_policy(spec, pdir)    # a PolicyRun: the same records from every back end

(``estimate``: the simulator's estimate of a recorded run, :class:`experiment.run.plugin.ScheduleEstimator`, handed to a
back end whose figures are measured, so that it needs no simulator of its own), and around it the
driver alone keeps the run's status (``status.json``), its progress lines, its interrupts (Ctrl-C,
SIGTERM: ``interrupted``) and its files: ``config.json``, ``capabilities.json`` (with ``backend``),
``topology.json``, then the report (:func:`experiment.reporting.report.write_run_report`: ``summary.json``,
``summary.csv``, ``jobs.csv``, ``report.txt``, plots) and ``experiment.json``
(:mod:`experiment.reporting.export`), written after every policy that finished, also when a later one failed.
A policy that cannot place every job is a result: the others run, and the run ends ``incomplete``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence

from common.errors import PlacementError, TestbedError
from common.progress import Eta
from common.specs import safe_name
from experiment.reporting import results
from experiment.reporting.interleaving import annotate
from experiment.reporting.runlog import RunLog
from experiment.reporting.summary import PolicyRun
from experiment.reporting.timeline import write_timeline_csv
from experiment.run.plugin import ExperimentBackend, Say, ScheduleEstimator


@dataclasses.dataclass(frozen=True)
class RunOutcome:
    """What a run produced: its directory, every policy that finished, and those that could not
    place every job (with why), in the order they ran."""

    run_dir: str
    runs: dict[str, PolicyRun]
    unplaced: dict[str, str]

    def incomplete(self) -> results.PolicyIncomplete:
        """The error of a run in which some policy could not place every job."""
        return results.incomplete(self.run_dir, list(self.unplaced), len(self.runs) + len(self.unplaced))


def run_experiment(cfg, backend: ExperimentBackend, say: Say | None = None, run_dir: str | None = None,
                   policies: Sequence[str] | None = None, stream=None) -> str:
    """Run every policy of ``cfg`` (or ``policies``) on ``backend`` (:func:`execute`); return the run
    directory.

    Raises:
        ConfigError: the config is invalid for the back end (nothing was written).
        PolicyIncomplete: some policy could not place every job (the others' results are written).
        TestbedError: the back end failed (the results of the policies that finished are written).
    """
    out = execute(cfg, backend, say, run_dir, policies, stream)
    if out.unplaced:
        raise out.incomplete()
    return out.run_dir


def execute(cfg, backend: ExperimentBackend, say: Say | None = None, run_dir: str | None = None,
            policies: Sequence[str] | None = None, stream=None, g=None) -> RunOutcome:
    """The run of :func:`run_experiment`, ending ``complete`` or ``incomplete`` without raising for
    policies that could not place every job. ``g``: the topology of a config already checked for
    this back end (skips :meth:`ExperimentBackend.check`). Every line said and printed is also
    kept in the run directory's ``run.log`` (:class:`experiment.reporting.runlog.RunLog`)."""
    stream = stream or sys.stdout
    log = RunLog(say or (lambda msg: print(msg, file=stream, flush=True)), stream)
    with contextlib.closing(log):
        return _execute(cfg, backend, log, run_dir, policies, g)


def _execute(cfg, backend: ExperimentBackend, log: RunLog, run_dir: str | None, policies: Sequence[str] | None,
             g) -> RunOutcome:
    from experiment.config.schema import absolute_paths, policy_specs, to_dict
    from topo.io import write_topology_json

    say, stream = log.say, log
    g = g if g is not None else backend.check(cfg)
    caps = {"backend": backend.name, **backend.prepare(cfg, g, say)}
    run_dir = run_dir or results.make_run_dir(cfg.name, cfg.results_dir)
    os.makedirs(run_dir, exist_ok=True)
    log.open(run_dir)
    results.write_status(run_dir, "running")
    specs = list(policies or policy_specs(cfg))
    try:
        results.write_json(os.path.join(run_dir, "config.json"), to_dict(absolute_paths(cfg, os.getcwd())))
        results.write_json(os.path.join(run_dir, "capabilities.json"), caps)
        write_topology_json(g, os.path.join(run_dir, "topology.json"), backend.size_limits)
        say(f"run {run_dir}: {backend.describe(cfg, caps, specs)}")
        runs, unplaced = _run_policies(cfg, g, backend, run_dir, caps, specs, say, stream)
    except KeyboardInterrupt:
        results.write_status(run_dir, "interrupted")
        raise
    except BaseException as e:
        results.write_status(run_dir, "failed", f"{type(e).__name__}: {e}")
        raise
    out = RunOutcome(run_dir, runs, unplaced)
    if unplaced:
        results.write_status(run_dir, "incomplete", str(out.incomplete()))
    else:
        results.write_status(run_dir, "complete")
    return out


def _run_policies(cfg, g, backend: ExperimentBackend, run_dir: str, caps: dict, specs: list[str], say: Say,
                  stream) -> tuple[dict[str, PolicyRun], dict[str, str]]:
    """Every policy in one session; the report (also after a failure) of those that finished.
    Returns those, and the policies that could not place every job, with why."""
    runs: dict[str, PolicyRun] = {}
    unplaced: dict[str, str] = {}
    try:
        with backend.open(cfg, g, run_dir, caps, say, _estimator(backend)) as session:
            eta = Eta(len(specs))
            for i, spec in enumerate(specs, 1):
                say(f"[{i}/{len(specs)}] policy {spec}" + (f" ({eta.text(i - 1)})" if i > 1 else ""))
                pdir = os.path.join(run_dir, safe_name(spec))
                os.makedirs(pdir, exist_ok=True)
                try:
                    runs[spec] = run = session.run_policy(spec, pdir)
                except PlacementError as e:
                    # A policy that cannot place the job mix is a result, not a reason to drop the others.
                    unplaced[spec] = str(e)
                    say(f"    policy {spec} stopped: {e}")
                    continue
                shared: dict[str, list[str]] = {}
                if run.timeline:
                    timeline, shared = annotate(g, run.placements, run.timeline)
                    runs[spec] = run = dataclasses.replace(run, timeline=timeline)
                _write_policy_files(pdir, run, shared)
    finally:
        if runs or unplaced:
            _report(run_dir, cfg, g, runs, caps, unplaced, say, stream)
    return runs, unplaced


def _estimator(backend: ExperimentBackend) -> ScheduleEstimator | None:
    """The simulator's estimate of a recorded run, for a back end whose figures are measured."""
    if not backend.measured:
        return None
    from experiment.run.resimulate import estimate_recorded_run

    return estimate_recorded_run


def _write_policy_files(pdir: str, run: PolicyRun, shared: Mapping[str, Sequence[str]]) -> None:
    """``<policy>/placements.json``, ``starts.json``, ``summary.json``, ``timeline.csv`` and
    ``profiles.json`` (when iterations were recorded; :mod:`experiment.reporting.profiles`, ``shared`` saying who
    shared links with whom), ``cluster.csv`` (:mod:`experiment.reporting.cluster_metrics`) and, for a placer
    that times jobs or logs its decisions, ``decisions.json``, from every back end alike."""
    from experiment.reporting import cluster_metrics
    from experiment.reporting.profiles import run_profiles

    results.write_json(os.path.join(pdir, "placements.json"), list(run.placements))
    if run.decisions:
        results.write_json(os.path.join(pdir, "decisions.json"), list(run.decisions))
    if run.timeline:
        write_timeline_csv(os.path.join(pdir, "timeline.csv"), run.timeline)
        results.write_json(os.path.join(pdir, "profiles.json"), run_profiles(pdir, shared, run.timeline))
    if run.cluster:
        cluster_metrics.write_csv(os.path.join(pdir, "cluster.csv"), run.cluster)
    results.write_json(os.path.join(pdir, "starts.json"), list(run.starts))
    results.write_json(os.path.join(pdir, "summary.json"), run.summary.to_dict())


def _report(run_dir: str, cfg, g, runs: dict[str, PolicyRun], caps: dict, unplaced: dict[str, str], say: Say,
            stream) -> None:
    """The report and ``experiment.json``. A failure of the export is said, not raised: it must not
    hide the run's results or its own error."""
    from experiment.reporting.export import write_export
    from experiment.reporting.report import write_run_report

    write_run_report(run_dir, cfg, g, runs, caps, stream, unplaced)
    try:
        write_export(run_dir)
    except (TestbedError, OSError, ValueError) as e:
        say(f"warning: experiment.json not written: {e}")
