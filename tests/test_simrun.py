"""The simulated run's records (``experiment.simsummary``): their JSON forms keep the layouts of
``<policy>/jobs.json``, ``placements.json``, ``sim_jobs.csv`` and ``sim_policies.json`` key for key,
and the printed table and the files are produced from them."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest

from experiment.config import ExperimentConfig, JobConfig, TopologyConfig, validate
from experiment.simrun import run_policy_sim, run_simulated, table_lines
from experiment.simsummary import JOB_COLUMNS, SimJobRow, SimPolicyError, SimPolicySummary, policy_summary


def small_cfg() -> ExperimentConfig:
    """Two GPUs free on each of h1..h3 of a k=4 fat-tree; a fits one machine, b (arriving at 0.5 s)
    needs two. Payload only, no latency: b's communication is its contention-free bound."""
    cfg = ExperimentConfig(
        name="simrun", topology=TopologyConfig("fat_tree", {"k": 4, "gpus_per_machine": 2}),
        background={f"h{i}": 2 for i in range(4, 17)},
        jobs=(JobConfig("a", "resnet50", 2, "ring"), JobConfig("b", "small_cnn", 4, "ring", arrival_s=0.5)),
        policies=("consolidate",), iterations=3, warmup_iterations=1)
    return dataclasses.replace(cfg, simulator=dataclasses.replace(cfg.simulator, headers=False))


def rows() -> list[SimJobRow]:
    cfg = small_cfg()
    return run_policy_sim(cfg, validate(cfg, backend="sim"), "consolidate")


def row(job: str, jct_s: float, end_s: float, comm_mean_s: float | None, duration_s: float | None) -> SimJobRow:
    """A handwritten row of policy p: what the summary reads, the rest filler."""
    return SimJobRow(policy="p", job=job, model="resnet50", workers=2, collective="ring", arrival_s=end_s - jct_s,
                     start_s=end_s - jct_s, end_s=end_s, jct_s=jct_s, runs=1, comm_mean_s=comm_mean_s,
                     compute_mean_s=0.1, iteration_mean_s=None, iterations=3, ecn_marks=None, duration_s=duration_s,
                     machines=("h1",), placements=())


def test_job_rows_json_is_the_jobs_json_layout():
    """A row's to_dict is the entry jobs.json has always held, keys in the same order; its CSV row the
    same but placements."""
    a, b = rows()
    expected_a = {
        "policy": "consolidate", "job": "a", "model": "resnet50", "workers": 2, "collective": "ring",
        "arrival_s": 0.0, "start_s": 0.0, "end_s": pytest.approx(0.712), "jct_s": pytest.approx(0.712),  # 4 x 0.178
        "runs": 1, "comm_mean_s": 0.0, "compute_mean_s": pytest.approx(0.178),
        "iteration_mean_s": pytest.approx(0.178), "iterations": 3, "ecn_marks": None, "duration_s": None,
        "machines": "h1",
        "placements": [{"start_s": 0.0, "job": "a", "slots": [["h1", 0], ["h1", 1]], "ps_host": None,
                        "ina_switches": None}],
    }
    expected_b = {  # waits for a's wave to end; its ring's bound (sim.steps.job_bound_s) per iteration
        "policy": "consolidate", "job": "b", "model": "small_cnn", "workers": 4, "collective": "ring",
        "arrival_s": 0.5, "start_s": pytest.approx(0.712), "end_s": pytest.approx(0.7422464),
        "jct_s": pytest.approx(0.2422464), "runs": 1, "comm_mean_s": pytest.approx(0.0025568),
        "compute_mean_s": 0.005, "iteration_mean_s": pytest.approx(0.0075568), "iterations": 3, "ecn_marks": None,
        "duration_s": None, "machines": "h1 h2",
        "placements": [{"start_s": pytest.approx(0.712), "job": "b", "slots": [["h1", 0], ["h1", 1], ["h2", 0],
                                                                              ["h2", 1]],
                        "ps_host": None, "ina_switches": None}],
    }
    for r, expected in ((a, expected_a), (b, expected_b)):
        got = r.to_dict()
        assert got == expected
        assert list(got) == list(expected)
        assert list(got["placements"][0]) == list(expected["placements"][0])
        assert got["placements"] == [p.to_dict() for p in r.placements]
        assert r.csv_row() == {k: v for k, v in expected.items() if k != "placements"}
        assert tuple(r.csv_row()) == JOB_COLUMNS


def test_policy_summary_json_is_the_sim_policies_layout():
    """Means, nearest-rank p90s, makespan and JCT over trace duration of handwritten rows; the JSON entry
    keeps its keys in order, a policy that could not place every job is its error alone."""
    s = policy_summary("p", [row("x", 4.0, 4.0, 0.5, 2.0), row("y", 2.0, 5.0, None, None),
                             row("z", 6.0, 9.0, 0.25, 4.0)])
    expected = {"jobs": 3, "comm_mean_s": 0.375, "comm_p90_s": 0.5, "jct_mean_s": 4.0, "jct_p90_s": 6.0,
                "makespan_s": 9.0, "jct_over_duration_mean": 1.75,  # (4/2 + 6/4) / 2; y has no duration
                "distribution_efficiency": pytest.approx((0.3 / 4 + 0.3 / 2 + 0.3 / 6) / 3)}  # 3 x 0.1 s / JCT
    got = s.to_dict()
    assert got == expected
    assert list(got) == list(expected)
    assert s.policy == "p"
    assert policy_summary("q", [row("y", 2.0, 5.0, None, None)]).to_dict() == {
        "jobs": 1, "comm_mean_s": None, "comm_p90_s": None, "jct_mean_s": 2.0, "jct_p90_s": 2.0, "makespan_s": 5.0,
        "jct_over_duration_mean": None, "distribution_efficiency": pytest.approx(0.15)}
    assert SimPolicyError("ef", "placed none").to_dict() == {"error": "placed none"}


def test_table_lines_are_built_from_the_records():
    """The table shows each summary's figures ('-' for None), the JCT/duration column only when some policy
    has it, and a policy's error on its line."""
    p = SimPolicySummary("p", 3, 0.375, None, 4.0, 6.0, 9.0, 1.75)
    err = SimPolicyError("ef", "placed none")
    assert table_lines({"p": p, "ef": err}) == [
        "policy                        comm mean s  comm p90 s    JCT mean s     JCT p90 s    makespan s JCT/duration",
        "p                                   0.375           -         4.000         6.000         9.000        1.750",
        "ef                           could not place every job: placed none",
    ]
    assert table_lines({"p": dataclasses.replace(p, jct_over_duration_mean=None)}) == [
        "policy                        comm mean s  comm p90 s    JCT mean s     JCT p90 s    makespan s",
        "p                                   0.375           -         4.000         6.000         9.000",
    ]
    # With two policies, NetPack's metrics follow: JCT normalised to the first (no netpack here) and DE.
    two = table_lines({"p": dataclasses.replace(p, distribution_efficiency=0.5),
                       "q": dataclasses.replace(p, policy="q", jct_mean_s=6.0)})
    assert "normalised to p;" in two[-2] and two[-1].splitlines()[3].split() == ["q", "6.000", "1.50", "-"]


def test_run_files_and_table_are_written_from_the_records(tmp_path):
    """run_simulated writes each policy's rows, their starts, the CSV and the summaries through the records'
    to_dict, and prints table_lines of what it returns; elasticflow cannot place c (5 of 6 free GPUs, rounded
    up to 8) and is reported as an error."""
    cfg = small_cfg()
    cfg = dataclasses.replace(cfg, jobs=cfg.jobs + (JobConfig("c", "resnet50", 5, "ring"),))
    g = validate(cfg, backend="sim")
    lines: list[str] = []
    summaries = run_simulated(cfg, g, str(tmp_path), ["consolidate", "elasticflow"], lines.append)
    consolidate, ef = summaries["consolidate"], summaries["elasticflow"]
    assert isinstance(consolidate, SimPolicySummary) and consolidate.jobs == 3
    assert isinstance(ef, SimPolicyError) and ef.error.startswith("policy 'elasticflow' placed none")
    assert json.loads((tmp_path / "sim_policies.json").read_text()) == {
        "consolidate": consolidate.to_dict(), "elasticflow": {"error": ef.error}}
    expected_rows = run_policy_sim(cfg, g, "consolidate")  # same seed, same rows
    assert consolidate == policy_summary("consolidate", expected_rows)
    assert json.loads((tmp_path / "consolidate" / "jobs.json").read_text()) == [r.to_dict() for r in expected_rows]
    assert json.loads((tmp_path / "consolidate" / "placements.json").read_text()) == [
        p.to_dict() for r in expected_rows for p in r.placements]
    assert not list((tmp_path / "elasticflow").iterdir())
    with open(tmp_path / "sim_jobs.csv", newline="", encoding="utf-8") as f:
        written = list(csv.DictReader(f))
    assert written == [{k: "" if v is None else str(v) for k, v in r.csv_row().items()} for r in expected_rows]
    table = table_lines(summaries)
    assert lines[-len(table) - 1:-1] == table
