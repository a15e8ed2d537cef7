"""A cluster trace through the experiment loop on the simulator back end: the config's ``trace:``
section (validation and its errors), trace jobs as the loop runs them, the fluid engine chosen by
``simulator.mode``, and the shipped trace experiment end to end (a slice of it) with its outputs."""

import csv
import dataclasses
import io
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT as REPO

from common.errors import ConfigError
from experiment import make_backend
from experiment.config import schema as config
from experiment.config.workload import experiment_jobs, trace_jobs
from experiment.run.driver import run_experiment
from experiment.run.simrun import simulate_policy
from jobs.models import get_model

TRACE_YAML = os.path.join(REPO, "experiments", "trace.yaml")
HEADER = "job_id,submission_time,duration,num_gpu\n"


def trace_cfg(tmp_path, rows: str, **trace):
    """The shipped trace experiment on a trace file of ``rows`` (ITP raw format), results in tmp_path."""
    path = tmp_path / "t.csv"
    path.write_text(HEADER + rows)
    cfg = config.load(TRACE_YAML)
    return dataclasses.replace(cfg, results_dir=str(tmp_path / "results"),
                               trace=dataclasses.replace(cfg.trace, file=str(path), **trace))


def test_trace_jobs_carry_durations_as_iterations_of_their_model(tmp_path):
    cfg = trace_cfg(tmp_path, "a,100,3600,16\nb,40,60,1\nc,400,1,2\n")
    g = config.validate(cfg, backend="sim")
    jobs = experiment_jobs(cfg, g)
    assert [j.name for j in jobs] == ["t00000", "t00001", "t00002"]  # arrival order
    assert [(j.workers, j.arrival_s, j.duration_s) for j in jobs] == [(1, 0.0, 60.0), (16, 60.0, 3600.0),
                                                                        (2, 360.0, 1.0)]
    for j in jobs:
        assert j.model in cfg.trace.models and j.collective == "ring"
        assert j.iterations == max(1, round(j.duration_s / get_model(j.model).compute_time_s))
    assert trace_jobs(cfg, 128) == trace_jobs(cfg, 128)  # same seed, same models


def test_arrival_scale_moves_submissions_and_nothing_else(tmp_path):
    """``arrival_scale: 0.25`` submits the same jobs four times closer together (submissions at 0,
    60 and 360 s become 0, 15 and 90 s), with the same sizes, durations and models; 0 submits them
    all at once, in trace order."""
    rows = "a,100,3600,16\nb,40,60,1\nc,400,1,2\n"
    plain, packed = trace_cfg(tmp_path, rows), trace_cfg(tmp_path, rows, arrival_scale=0.25)
    g = config.validate(packed, backend="sim")
    assert [j.arrival_s for j in experiment_jobs(packed, g)] == [0.0, 15.0, 90.0]
    at_once = trace_cfg(tmp_path, rows, arrival_scale=0)
    assert [(j.name, j.arrival_s) for j in experiment_jobs(at_once, g)] == [
        ("t00000", 0.0), ("t00001", 0.0), ("t00002", 0.0)]
    assert [dataclasses.replace(j, arrival_s=0.0) for j in experiment_jobs(packed, g)] == [
        dataclasses.replace(j, arrival_s=0.0) for j in experiment_jobs(plain, g)]


def test_compute_scale_runs_the_same_iterations_on_other_gpus(tmp_path):
    """``compute_scale: 0.5`` (GPUs twice as fast as the profiles'): every job keeps its iterations and
    arrival, computes each iteration in half its model's time, and its duration halves with it."""
    rows = "a,100,3600,16\nb,40,60,1\nc,400,1,2\n"
    plain, fast = trace_cfg(tmp_path, rows), trace_cfg(tmp_path, rows, compute_scale=0.5)
    g = config.validate(fast, backend="sim")
    for p, f in zip(experiment_jobs(plain, g), experiment_jobs(fast, g), strict=True):
        assert (f.name, f.arrival_s, f.iterations, f.model) == (p.name, p.arrival_s, p.iterations, p.model)
        assert p.compute_ms == 0.0 and f.compute_ms == pytest.approx(get_model(p.model).compute_time_s * 500)
        assert f.duration_s == p.duration_s / 2


def test_jobs_larger_than_the_cluster_are_left_out(tmp_path):
    cfg = trace_cfg(tmp_path, "a,0,100,200\nb,5,100,8\n")
    g = config.validate(cfg, backend="sim")
    assert [j.workers for j in experiment_jobs(cfg, g)] == [8]


@pytest.mark.parametrize("change, pattern", [
    ({"trace_rows": "a,0,100,500\n"}, r"^config.trace: no job of .* fits the cluster's 128 free GPUs"),
    ({"backend": "emu"}, r"^config.trace: traces run on the simulator back end"),
    ({"jobs": True}, r"^config.trace: a trace .* and a jobs list \(1 jobs\) are both given; give one"),
    ({"model_source": "trace", "trace_rows": None}, r"names models with no profile \(.*gpt2.*\).*model_source: pool"),
    ({"file": "/nonexistent/trace.csv"}, r"/nonexistent/trace.csv"),
])
def test_bad_trace_configs_get_one_clear_line(tmp_path, change, pattern):
    rows = change.pop("trace_rows", "a,0,100,4\n")
    backend = change.pop("backend", "sim")
    with_jobs = change.pop("jobs", False)
    cfg = trace_cfg(tmp_path, rows or "", **{k: v for k, v in change.items() if k != "file"})
    if rows is None:  # the shipped ITP window, whose model names have no profile here
        cfg = dataclasses.replace(cfg, trace=dataclasses.replace(
            cfg.trace, file=os.path.join(REPO, "traces", "elasticflow-itp", "195job.csv")))
    if "file" in change:
        cfg = dataclasses.replace(cfg, trace=dataclasses.replace(cfg.trace, file=change["file"]))
    if with_jobs:
        cfg = dataclasses.replace(cfg, jobs=(config.JobConfig("x", "resnet50", 2),))
    with pytest.raises(ConfigError, match=pattern) as e:
        config.validate(cfg, backend=backend)
    assert "\n" not in str(e.value)


def test_the_fluid_mode_runs_a_config_and_matches_the_step_engine_for_uncontended_jobs():
    """The default experiment under consolidation: every job on its own machines; both engines cost
    each job's communication at its contention-free bound, the fluid one without per-step events."""
    cfg = config.load(os.path.join(REPO, "experiments", "default.yaml"))
    cfg = dataclasses.replace(cfg, simulator=dataclasses.replace(cfg.simulator, headers=False))
    g = config.validate(cfg, backend="sim")
    steps = {r.job: r for r in simulate_policy(cfg, g, "consolidate").summary.jobs}
    fluid_cfg = dataclasses.replace(cfg, simulator=dataclasses.replace(cfg.simulator, mode="fluid"))
    fluid = {r.job: r for r in simulate_policy(fluid_cfg, g, "consolidate").summary.jobs}
    assert steps.keys() == fluid.keys()
    for job, row in fluid.items():
        assert row.iterations_recorded == cfg.iterations and row.machines == steps[job].machines
        if steps[job].comm_mean_s == 0:
            assert row.comm_mean_s == 0
        else:  # the step engine adds the barrier's and ranks' skew; alone the two agree closely
            assert row.comm_mean_s == pytest.approx(steps[job].comm_mean_s, rel=0.05), job


def test_a_trace_slice_runs_end_to_end_with_its_outputs(tmp_path):
    cfg = config.load(TRACE_YAML)
    cfg = dataclasses.replace(cfg, results_dir=str(tmp_path), policies=("consolidate", "spread"),
                              trace=dataclasses.replace(cfg.trace, file=os.path.join(REPO, cfg.trace.file),
                                                        max_jobs=40))
    lines = []
    run_dir = run_experiment(cfg, make_backend("sim"), say=lines.append, stream=io.StringIO())
    assert any("40 jobs finished" in line for line in lines)  # progress on the way
    with open(os.path.join(run_dir, "jobs.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 80 and {r["policy"] for r in rows} == {"consolidate", "spread"}
    for r in rows:  # a job cannot finish faster than its trace duration's compute
        compute = float(r["iterations_recorded"]) * float(r["compute_mean_s"])
        assert float(r["jct_s"]) >= compute * (1 - 1e-9)
        assert abs(compute - float(r["duration_s"])) <= float(r["compute_mean_s"]) / 2 + 1e-6
    summary = {s["policy"]: s for s in json.load(open(os.path.join(run_dir, "summary.json")))["policies"]}
    for s in summary.values():
        assert len(s["jobs"]) == 40 and s["jct_over_duration_mean"] >= 1 - 1e-3
    # spreading 8- and 16-GPU jobs over the oversubscribed racks costs them communication
    assert summary["spread"]["comm_mean_s"] > summary["consolidate"]["comm_mean_s"]
    caps = json.load(open(os.path.join(run_dir, "capabilities.json")))
    assert caps == {"backend": "sim", "engine": "fluid"}
    assert json.load(open(os.path.join(run_dir, "config.json")))["trace"]["max_jobs"] == 40
    report = open(os.path.join(run_dir, "report.txt")).read()
    assert "JCT/duration" in report and "Jobs under consolidate: 40 (every job in jobs.csv)" in report


def test_check_validates_a_trace_config_for_the_simulator():
    out = subprocess.run([sys.executable, "run_testbed.py", "check", "--backend", "sim", TRACE_YAML], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "195 jobs of trace traces/elasticflow-itp/195job.csv" in out.stdout and "fluid mode" in out.stdout
    out = subprocess.run([sys.executable, "run_testbed.py", "check", TRACE_YAML], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--backend sim" in out.stderr


def test_ecmp_routes_are_ecmp_paths():
    from topo import fat_tree, machines
    from topo.routing import EcmpRoutes, ecmp_path

    g = fat_tree(4)
    routes = EcmpRoutes(g)
    hosts = machines(g)
    assert all(routes.path(a, b) == ecmp_path(g, a, b) for a in hosts for b in hosts if a != b)
