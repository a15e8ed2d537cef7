"""Emulation test: the experiment loop on the emulator with an arrival and preemption.

Two 4-worker jobs on the only 4 free GPUs of a one-leaf cluster, Tiresias with a 2 GPU-second
first queue: ``a`` starts at once and is demoted after half a (virtual) second of running; ``b``
arrives at 1 s and preempts it; ``b`` is demoted in turn and ``a``, the earlier arrival, resumes
with the iterations it has left. The run must end with every job's iterations measured exactly
once by every rank (a preempted run's partial iteration dropped), its processes gone, and the
loop's starts recorded.
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import SCALE, leftovers

pytestmark = pytest.mark.emulation

ITERATIONS = 8


def test_arrival_and_preemption_on_the_emulator(emulation_ok, tmp_path):
    from emulator.runner import Progress, run_experiment
    from experiment.config import schema as config

    cfg = config.from_dict({
        "name": "loop", "scale": SCALE, "dilation": 2,
        "topology": {"kind": "leaf_spine", "n_leaf": 1, "n_spine": 1, "hosts_per_leaf": 4, "gpus_per_machine": 2},
        "background": {"h3": 2, "h4": 2},
        "jobs": [{"name": "a", "model": "resnet50", "workers": 4},
                 {"name": "b", "model": "resnet50", "workers": 4, "arrival_s": 1.0}],
        "scheduler": "tiresias,thresholds_gpu_s=2", "policies": ["consolidate"],
        "iterations": ITERATIONS, "warmup_iterations": 1, "ecn": {"marking": "optional"},
        "results_dir": str(tmp_path), "plots": False})
    with open(os.devnull, "w") as quiet:
        run_dir = run_experiment(cfg, Progress(quiet))
    pdir = os.path.join(run_dir, "consolidate")
    with open(os.path.join(pdir, "measurements.json")) as f:
        m = json.load(f)
    assert m["scheduler"] == "tiresias,thresholds_gpu_s=2"
    assert m["preemptions"] >= 1, m["starts"]
    starts = [(s["job"], s["start_s"]) for s in m["starts"]]
    assert starts[0][0] == "a" and starts[1][0] == "b", starts
    assert starts[1][1] >= 1.0, "b cannot start before it arrives"
    assert [s[0] for s in starts].count("a") >= 2, "a resumes after its preemption"
    assert len(m["placements"]) == 2, "one placement per job: where it finished"
    with open(os.path.join(pdir, "summary.json")) as f:
        jobs = json.load(f)["jobs"]
    for job in ("a", "b"):
        assert jobs[job]["iterations_recorded"] == ITERATIONS and jobs[job]["complete"], jobs[job]
        # The simulator replays the run's schedule (every start and preemption at its time).
        assert jobs[job]["estimate_s"] is not None and abs(jobs[job]["estimate_error"]) < 0.5, jobs[job]
    # Both end up in Tiresias' second queue, served by arrival: a finishes first, then b (arrived at 1 s).
    assert 1.0 + jobs["b"]["jct_s"] > jobs["a"]["jct_s"] > 0, (jobs["a"]["jct_s"], jobs["b"]["jct_s"])
    # a ran in two directories or more (a new one per start), every rank in each.
    dirs = sorted(d for d in os.listdir(os.path.join(pdir, "jobs")) if d == "a" or d.startswith("a.run"))
    assert len(dirs) >= 2, dirs
    for d in dirs:
        assert len([n for n in os.listdir(os.path.join(pdir, "jobs", d)) if n.endswith(".jsonl")]) == 4, d
    assert not leftovers(), leftovers()


def test_a_sweep_runs_on_the_emulator_through_the_driver(emulation_ok, tmp_path):
    """``sweep --backend emu``: every point is an emulated run through the one driver (its own network,
    its files as any run's), one after another; the sweep's rows are those runs' measured JCTs."""
    from experiment.config import schema as config
    from experiment.run.sweep import run_sweep
    from experiment.run.sweep_spec import parse_vary

    cfg = config.from_dict({
        "name": "emusweep", "scale": SCALE, "dilation": 2,
        "topology": {"kind": "leaf_spine", "n_leaf": 1, "n_spine": 1, "hosts_per_leaf": 2, "gpus_per_machine": 1},
        "jobs": [{"name": "a", "model": "resnet50", "workers": 2}], "policies": ["consolidate"],
        "iterations": 2, "warmup_iterations": 1, "ecn": {"marking": "off"}, "results_dir": str(tmp_path),
        "plots": False})
    lines: list[str] = []
    result = run_sweep(cfg, parse_vary("iterations=2,3"), (1,), say=lines.append, backend="emu")
    assert "policies on the emulated network" in lines[0]
    assert [(r.value, r.policy, r.jct_norm) for r in result.rows] == [(2, "consolidate", 1.0), (3, "consolidate", 1.0)]
    for row, value in zip(result.rows, (2, 3), strict=True):
        point = os.path.join(result.run_dir, f"iterations={value}", "seed-1")
        with open(os.path.join(point, "summary.json")) as f:
            summary = json.load(f)
        assert summary["backend"] == "emu" and summary["capabilities"]["backend"] == "emu"
        (policy,) = summary["policies"]
        assert policy["jobs"]["a"]["iterations_recorded"] == value and policy["jobs"]["a"]["complete"]
        assert row.jct_mean_s == policy["jct_mean_s"]
        # The one job, alone on the fabric and across its two machines, is checked against its bound;
        # the run is trusted exactly when the monitor found no reason to doubt it.
        assert policy["jobs_checked"] == 1 and policy["jobs"]["a"]["bound_s"] > 0, policy
        assert policy["trustworthy"] is (policy["fidelity_reasons"] == []), policy
        assert os.path.exists(os.path.join(point, "experiment.json"))
    assert not leftovers(), leftovers()
