"""The simulator back end through the one driver: its per-job figures, its policy summaries, and the
files it writes (the same names and columns as the emulator's)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json

import pytest

from experiment import make_backend
from experiment.config.schema import ExperimentConfig, JobConfig, TopologyConfig, validate
from experiment.reporting.report import JOB_CSV_COLUMNS, SUMMARY_CSV_COLUMNS, summary_tables
from experiment.reporting.results import PolicyIncomplete
from experiment.reporting.summary import JobSummary, PolicySummary, completion_figures
from experiment.run.driver import execute, run_experiment
from experiment.run.simrun import SimulatorExperiment, SimulatorSession
from jobs.models import get_model, scaled_buckets
from jobs.steps import job_bound_s
from topo import fat_tree


def small_cfg() -> ExperimentConfig:
    """Two GPUs free on each of h1..h3 of a k=4 fat-tree; a fits one machine, b (arriving at 0.5 s)
    needs two. Payload only, no latency: b's communication is its contention-free bound."""
    cfg = ExperimentConfig(
        name="simrun", topology=TopologyConfig("fat_tree", {"k": 4, "gpus_per_machine": 2}),
        background={f"h{i}": 2 for i in range(4, 17)},
        jobs=(JobConfig("a", "resnet50", 2, "ring"), JobConfig("b", "small_cnn", 4, "ring", arrival_s=0.5)),
        policies=("consolidate",), iterations=3, warmup_iterations=1)
    return dataclasses.replace(cfg, simulator=dataclasses.replace(cfg.simulator, headers=False))


def policy_run(tmp_path, spec: str = "consolidate"):
    cfg = small_cfg()
    session = SimulatorSession(cfg, validate(cfg, backend="sim"), lambda _line: None)
    return session.run_policy(spec, str(tmp_path))


def test_the_registry_names_the_user_facing_back_ends():
    """``--backend`` picks an experiment back end from the registry by name: emu or sim, nothing else."""
    from common.errors import ConfigError
    from experiment import BACKENDS, backend_class

    assert set(BACKENDS) == {"emu", "sim"}
    assert backend_class("sim") is SimulatorExperiment and isinstance(make_backend("sim"), SimulatorExperiment)
    with pytest.raises(ConfigError, match="valid: emu, sim"):
        backend_class("durations")


def test_each_back_end_holds_topologies_up_to_its_own_size_limits():
    """The simulator's back end takes the simulator's size limits (paper-scale fabrics); the emulator's
    keeps the emulator's: each class's config checks (``checks``), which validate() applies."""
    from experiment import backend_class
    from topo.schema import EMULATOR_LIMITS, SIMULATOR_LIMITS

    assert backend_class("emu").checks.limits is EMULATOR_LIMITS
    assert backend_class("sim").checks.limits is SIMULATOR_LIMITS
    assert make_backend("sim").size_limits is SIMULATOR_LIMITS


def test_the_simulator_checks_a_paper_scale_fabric_the_emulator_refuses():
    """A config of NetPack's 10,000 servers (625 racks of 16) checks on the simulator's back end; the
    emulator's refuses it, naming both back ends' limits."""
    from common.errors import ConfigError

    cfg = dataclasses.replace(small_cfg(), background={}, topology=TopologyConfig(
        "leaf_spine", {"n_leaf": 625, "n_spine": 4, "hosts_per_leaf": 16, "gpus_per_machine": 2}))
    g = make_backend("sim").check(cfg)
    assert sum(1 for _, role in g.nodes(data="role") if role == "machine") == 10_000
    with pytest.raises(ConfigError, match=r"^config.topology: leaf_spine n_leaf=625, n_spine=4, hosts_per_leaf=16 is "
                                          r"too large: 10,000 machines; the emulator holds at most 4,096 "
                                          r"machines, 1,024 switches and 16,384 links \(the simulator holds up to "):
        validate(cfg, backend="emu")


def test_job_figures_are_the_simulators(tmp_path):
    """Each job's simulated times, start, end, JCT and batch, as exact values of the small config."""
    run = policy_run(tmp_path)
    a, b = run.summary.jobs
    assert (a.job, a.wave, a.machines, a.runs, a.arrival_s, a.start_s) == ("a", 0, ("h1",), 1, 0.0, 0.0)
    assert a.jct_s == pytest.approx(0.712) and a.end_s == pytest.approx(0.712)  # 4 x 0.178
    assert (a.comm_mean_s, a.compute_mean_s, a.iterations_recorded, a.complete) == (0.0, pytest.approx(0.178), 3,
                                                                                     True)
    # b waits for a's wave to end; its ring's bound (jobs.steps.job_bound_s) per iteration
    assert (b.job, b.wave, b.machines, b.arrival_s) == ("b", 1, ("h1", "h2"), 0.5)
    assert b.start_s == pytest.approx(0.712) and b.end_s == pytest.approx(0.7422464)
    assert b.jct_s == pytest.approx(0.2422464) and b.comm_mean_s == pytest.approx(0.0025568)
    assert b.iteration_mean_s == pytest.approx(0.0075568)
    # derived apart from the simulator: small_cnn's two buckets, 4,216 and 40 bytes at scale 500, cut
    # into chunks of whole floats (1,052 or 1,056 bytes; 8 or 12), cross h1's and h2's 20 Mbit/s
    # links in each of the ring's 6 steps: at least the smaller chunks, at most the larger ones...
    assert 6 * (1052 + 8) * 8 / 20e6 <= b.comm_mean_s <= 6 * (1056 + 12) * 8 / 20e6
    # ...and exactly the chained bound of jobs.steps, a separate implementation
    g = fat_tree(4, gpus_per_machine=2)
    bound = job_bound_s(g, {e: 10000 / 500 for e in g.edges()}, ["h1", "h1", "h2", "h2"], "ring",
                        scaled_buckets(get_model("small_cnn"), 500))
    assert scaled_buckets(get_model("small_cnn"), 500) == (4216, 40)
    assert b.comm_mean_s == pytest.approx(bound, rel=1e-12)
    # what the simulator does not measure is None, never zero
    assert (b.comm_p99_s, b.ecn_marks, b.measured) == (None, None, None)
    assert (b.figure("bound_s"), b.figure("fidelity"), b.figure("estimate_s")) == (None, None, None)
    assert run.measurements is None
    assert [p["wave"] for p in run.placements] == [0, 1]
    assert run.placements[1] == {"wave": 1, "start_s": pytest.approx(0.712), "job": "b",
                                 "slots": [["h1", 0], ["h1", 1], ["h2", 0], ["h2", 1]], "ps_host": None,
                                 "ina_switches": None}


def test_policy_summary_of_the_simulator(tmp_path):
    """The policy's figures: iteration-weighted communication mean, JCT mean and p90, makespan, batches;
    the emulated network's figures None."""
    s = policy_run(tmp_path).summary
    assert s.backend == "sim" and s.waves == 2 and s.machines_used == 2 and s.preemptions == 0
    assert s.comm_mean_s == pytest.approx(0.0025568 / 2)  # 3 iterations of a at 0, 3 of b
    assert s.jct_mean_s == pytest.approx((0.712 + 0.2422464) / 2) and s.makespan_s == pytest.approx(0.7422464)
    assert s.jct_p90_s == pytest.approx(0.712)
    assert s.measured is None and s.ecn_marks is None
    for name in ("cross_machine_bytes", "busiest_link_utilisation", "cpu_mean", "ecn_marks", "trustworthy",
                 "jobs_checked", "ecn_method"):
        assert s.figure(name) is None, name
    assert PolicySummary.from_dict(s.to_dict()) == s


def job(name: str, jct_s: float, end_s: float, comm_mean_s: float | None, duration_s: float | None) -> JobSummary:
    """A handwritten job summary: what the completion figures read, the rest filler."""
    return JobSummary(job=name, model="resnet50", workers=2, collective="ring", wave=0, machines=("h1",),
                      iterations_recorded=3, complete=True, comm_mean_s=comm_mean_s, comm_p99_s=None,
                      compute_mean_s=0.1, ecn_marks=None, jct_s=jct_s, end_s=end_s, duration_s=duration_s)


def test_completion_figures_of_handwritten_jobs():
    """Nearest-rank p90s, makespan and JCT over trace duration (jobs without a duration left out)."""
    jobs = [job("x", 4.0, 4.0, 0.5, 2.0), job("y", 2.0, 5.0, None, None), job("z", 6.0, 9.0, 0.25, 4.0)]
    assert completion_figures(jobs) == {"comm_p90_s": 0.5, "jct_p90_s": 6.0, "makespan_s": 9.0,
                                        "jct_over_duration_mean": 1.75}  # (4/2 + 6/4) / 2
    assert completion_figures([job("y", 2.0, 5.0, None, None)]) == {
        "comm_p90_s": None, "jct_p90_s": 2.0, "makespan_s": 5.0, "jct_over_duration_mean": None}


def test_the_table_leaves_out_and_names_what_was_not_measured(tmp_path):
    """The simulator's table has its figures and names the emulated network's columns it has none of."""
    text = summary_tables([policy_run(tmp_path).summary], "sim")
    lines = text.splitlines()
    assert lines[0] == "Per policy (flow-level simulator, estimated):"
    assert lines[1].split()[:4] == ["policy", "machines", "idle", "used"]
    assert "JCT mean s" in lines[1] and "cpu mean" not in lines[1] and "trust" not in lines[1]
    assert "not measured here:" in lines[4] and "cpu mean" in lines[4] and "trust" in lines[4]
    assert "Jobs under consolidate" in text and "fidelity" not in text.split("Jobs under consolidate")[1]


def test_a_run_writes_the_files_every_back_end_writes(tmp_path):
    """The driver on the simulator: status, config, capabilities, the report's files with the shared
    columns, experiment.json; elasticflow cannot place c (5 of 6 free GPUs, rounded up to 8): the run
    ends incomplete with the other policy's results written."""
    cfg = small_cfg()
    cfg = dataclasses.replace(cfg, jobs=cfg.jobs + (JobConfig("c", "resnet50", 5, "ring"),),
                              results_dir=str(tmp_path))
    out = io.StringIO()
    with pytest.raises(PolicyIncomplete, match="1 of 2 policies"):
        run_experiment(cfg, SimulatorExperiment(), policies=["consolidate", "elasticflow"], stream=out)
    (run_dir,) = tmp_path.iterdir()
    names = {p.name for p in run_dir.iterdir()}
    assert {"status.json", "config.json", "capabilities.json", "topology.json", "summary.json", "summary.csv",
            "jobs.csv", "link_bytes.csv", "link_checks.csv", "report.txt", "experiment.json",
            "policies.png"} <= names
    assert json.loads((run_dir / "status.json").read_text())["status"] == "incomplete"
    assert json.loads((run_dir / "capabilities.json").read_text()) == {"backend": "sim", "engine": "steps"}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["backend"] == "sim" and list(summary["unplaced"]) == ["elasticflow"]
    assert [p["policy"] for p in summary["policies"]] == ["consolidate"]
    with open(run_dir / "jobs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == JOB_CSV_COLUMNS and [r["job"] for r in rows] == ["a", "b", "c"]
    assert rows[0]["fidelity"] == "" and rows[0]["comm_mean_s"] == "0.0"
    with open(run_dir / "summary.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert tuple(row) == SUMMARY_CSV_COLUMNS and row["backend"] == "sim" and row["cpu_mean"] == ""
    export = json.loads((run_dir / "experiment.json").read_text())
    assert [j["name"] for j in export["policies"][0]["jobs"]] == ["a", "c", "b"]  # placement order
    assert "could not place every job" in out.getvalue() and "results:" in out.getvalue()


def test_execute_returns_every_policys_run(tmp_path):
    """``execute`` (what sweeps call) returns the runs and the policies that could not place, without raising."""
    cfg = dataclasses.replace(small_cfg(), results_dir=str(tmp_path))
    res = execute(cfg, SimulatorExperiment(), lambda _line: None, stream=io.StringIO())
    assert list(res.runs) == ["consolidate"] and res.unplaced == {}
    assert res.runs["consolidate"].summary.jobs[0].job == "a"
