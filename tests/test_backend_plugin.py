"""A new back end is one class and one registry line: the durations clock (:mod:`experiment.run.durations`)
as a back end of the driver, registered for the test, runs a config through
:func:`experiment.run.driver.run_experiment` into the same files as the emulator and the simulator."""

from __future__ import annotations

import csv
import dataclasses
import json
import time
from pathlib import Path

import pytest

import experiment
from experiment.config.schema import BackendChecks, ExperimentConfig, JobConfig, TopologyConfig
from experiment.run.driver import run_experiment
from experiment.run.durations import DurationBackend
from experiment.run.plugin import ExperimentBackend, PolicySession, no_resources
from experiment.run.policy import run_policy_loop, summarise_loop
from jobs.models import get_model
from topo.schema import SIMULATOR_LIMITS


def job_duration_s(job) -> float:
    """What the durations back end runs a config's job for: its iterations' compute, no network."""
    return job.iterations * get_model(job.model).compute_time_s


class DurationsClock(DurationBackend):
    """The durations clock, each job running for :func:`job_duration_s`."""

    def start(self, runs) -> None:
        super().start([(dataclasses.replace(job, duration_s=job_duration_s(job)), p) for job, p in runs])


class DurationsExperiment(ExperimentBackend):
    """Every job runs for its iterations' compute time, whatever its placement."""

    name = "durations"
    what = "durations model"
    help = "every job runs for its iterations' compute time, whatever its placement (no network, no root)"
    report_name = "durations model"
    checks = BackendChecks(shaped=False, describe=lambda cfg, g: "on the durations model", limits=SIMULATOR_LIMITS)

    def prepare(self, cfg, g, say) -> dict:
        return {}

    def describe(self, cfg, caps, specs) -> str:
        return f"{len(cfg.jobs)} jobs, {len(specs)} policies on the durations model"

    def open(self, cfg, g, run_dir, caps, say, estimate):
        return no_resources(DurationsSession(cfg, g))


class DurationsSession(PolicySession):
    def __init__(self, cfg, g):
        self.cfg, self.g = cfg, g

    def run_policy(self, spec: str, pdir: str):
        t0 = time.monotonic()
        run = run_policy_loop(self.cfg, self.g, spec, DurationsClock())
        return run.policy_run(summarise_loop(self.cfg, spec, run, DurationsExperiment.name, time.monotonic() - t0))


@pytest.fixture
def durations(monkeypatch):
    """The durations back end registered (for this test only) as ``durations``."""
    monkeypatch.setitem(experiment.BACKENDS, "durations", f"{__name__}:DurationsExperiment")
    return experiment.make_backend("durations")


def small_cfg(results_dir: str) -> ExperimentConfig:
    """Four GPUs free (h1, h2 of a k=4 fat-tree); a takes all four at 0, b and c (two each, arriving
    at 0.5 s) start when a ends, under FIFO."""
    return ExperimentConfig(
        name="plugin", topology=TopologyConfig("fat_tree", {"k": 4, "gpus_per_machine": 2}),
        background={f"h{i}": 2 for i in range(3, 17)},
        jobs=(JobConfig("a", "resnet50", 4, "ring"), JobConfig("b", "vgg16", 2, "ring", arrival_s=0.5),
              JobConfig("c", "resnet50", 2, "ring", arrival_s=0.5)),
        policies=("consolidate", "spread"), scheduler="fifo", iterations=3, warmup_iterations=1,
        results_dir=results_dir)


def test_a_registered_back_end_is_found_by_name_and_listed(durations):
    assert isinstance(durations, DurationsExperiment)
    assert experiment.backend_classes()["durations"] is DurationsExperiment
    from experiment.config.catalogue import render

    assert "\n  durations  every job runs for its iterations' compute time" in render("back")


def test_a_third_back_end_runs_through_the_driver(durations, tmp_path):
    """The driver writes the run's files for it as for any back end, and each job's JCT is the
    durations arithmetic: a runs alone for its compute, b and c start when it ends."""
    cfg = small_cfg(str(tmp_path))
    lines: list[str] = []
    run_dir = Path(run_experiment(cfg, durations, say=lines.append, stream=open(tmp_path / "out.txt", "w")))
    assert json.loads((run_dir / "status.json").read_text())["status"] == "complete"
    assert json.loads((run_dir / "capabilities.json").read_text()) == {"backend": "durations"}
    assert any("3 jobs, 2 policies on the durations model" in line for line in lines)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["backend"] == "durations" and [p["policy"] for p in summary["policies"]] == ["consolidate", "spread"]
    assert "Per policy (durations model, estimated):" in (run_dir / "report.txt").read_text()

    d = {j.name: 3 * get_model(j.model).compute_time_s for j in cfg.jobs}
    expected = {"a": d["a"], "b": d["a"] + d["b"] - 0.5, "c": d["a"] + d["c"] - 0.5}
    rows = list(csv.DictReader(open(run_dir / "jobs.csv", encoding="utf-8")))
    assert sorted((r["policy"], r["job"]) for r in rows) == [(p, j) for p in ("consolidate", "spread") for j in "abc"]
    for r in rows:
        assert float(r["jct_s"]) == pytest.approx(expected[r["job"]], abs=1e-9), r
        assert r["comm_mean_s"] == "" and r["complete"] == "True" and r["iterations_recorded"] == "3"
    for p in summary["policies"]:
        assert p["backend"] == "durations" and p["preemptions"] == 0
        assert p["jct_mean_s"] == pytest.approx(sum(expected.values()) / 3)
        assert p["makespan_s"] == pytest.approx(max(d["a"] + d["b"], d["a"] + d["c"]))


def test_check_names_a_registered_back_end_and_its_limits(durations, tmp_path):
    """``validate`` finds the back end's checks by name through the registry."""
    from experiment.config.schema import validate

    g = validate(small_cfg(str(tmp_path)), backend="durations")
    assert durations.size_limits is SIMULATOR_LIMITS and g.number_of_nodes() > 0
