"""The report's per-policy summary records (``experiment.reporting.summary``): their JSON forms keep the
layout of ``summary.json`` key for key, and the tables and CSV files are written from them."""

from __future__ import annotations

import csv
import dataclasses
import io
import json

import pytest

from experiment.config.schema import from_dict
from experiment.reporting.measurements import (
    ClusterState,
    EcnSetup,
    PolicyResult,
    PortSamplerStats,
    StartRecord,
    WaveLinks,
)
from experiment.reporting.report import summarise_policy, summary_tables, write_run_report
from experiment.reporting.summary import JobSummary, PolicyRun, PolicySummary
from jobs.records import IterationRecord
from measure.cpu import CpuSummary
from measure.fidelity import JobVerdict, LinkCheck, assess
from placement.base import GpuSlot, Placement
from sim.flowsim import JobEstimate
from topo import fat_tree

G = fat_tree(4)
CFG = from_dict({"jobs": [{"name": "a", "model": "resnet50", "workers": 2, "collective": "ring"}],
                 "background": {"h1": 1}, "dilation": 2, "iterations": 2})
CPU = CpuSummary(10, 0.5, 0.625, 0.75, None, False)
LINK = LinkCheck("e1->h1", "busy-rate", True, 0.9, 20.0, busy_s=2.0, achieved_mbps=20.0, ratio=1.0)
# wall-clock (comm, compute) seconds per (rank, iteration); dilation 2 halves them
WALL = {(0, 0): (0.2, 0.1), (0, 1): (0.5, 0.1), (1, 0): (0.25, 0.08), (1, 1): (0.3, 0.12)}


def records() -> list[IterationRecord]:
    """Two ranks of job a, two recorded iterations each."""
    return [IterationRecord(job="a", rank=rank, world=2, iteration=it, start_time_s=1000.0 + it, compute_s=compute,
                            comm_s=comm, bytes=4000, iteration_s=comm + compute, mode="replay", collective="ring",
                            bucket_bytes=(4000,), bucket_comm_s=(comm,))
            for (rank, it), (comm, compute) in WALL.items()]


def result() -> PolicyResult:
    """One job on h1 and h2 (both under e1), ECN measured, checked ok, simulated."""
    start = StartRecord(0, 0.0, Placement("a", (GpuSlot("h1", 0), GpuSlot("h2", 0))))
    wave = WaveLinks(0, ("a",), 10.0, 1.0, (0.0, 4.0), {("h1", "e1"): 5000, ("e1", "h2"): 5000},
                     {("h1", "e1"): 4000, ("e1", "h2"): 3000}, {("e1", "h2"): 6},
                     {"jobs": {"a": {"pkts": 9, "bytes": 9000, "marks": 5}}})
    verdict = JobVerdict("a", 0, "ok", bound_s=0.18, measured_s=0.1875, ratio=1.04)
    hosts = {h: {"congestion_control": "dctcp", "tcp_ecn": 1} for h in ("h1", "h2")}
    return PolicyResult(
        policy="p", scheduler="waves", placements=(start,), starts=(start,), cluster_states=(ClusterState(0, 3, 1),),
        waves=(wave,), jct_s={"a": 6.5}, preemptions=0, link_bytes={("h1", "e1"): 5000, ("e1", "h2"): 5000},
        link_rate_mbps={("h1", "e1"): 20.0, ("h2", "e1"): 20.0}, cpu=CPU, cpu_measured=CPU,
        ecn=EcnSetup("bpf", "marker loaded", hosts), fidelity=assess(CPU, [LINK], [verdict]),
        estimates={"a": JobEstimate("a", 0.25, 0.05, 0.3, 9.0, 2, 4.0, bucket_comm_s=(0.25,))},
        scale=500.0, dilation=2.0,
        port_sampler=PortSamplerStats(40, 0.25, 0.001), dir="", queue_stats="", wall_time_s=12.0)


def summary() -> PolicySummary:
    return summarise_policy(CFG, G, result(), records(), "emu")


def test_job_summary_json_is_the_summary_json_layout():
    """A job's to_dict is its entry in summary.json, keys in order: the figures every back end writes."""
    got = summary().job("a").to_dict()
    expected = {
        "model": "resnet50", "workers": 2, "collective": "ring", "wave": 0, "machines": ["h1", "h2"],
        "iterations_recorded": 2, "complete": True,
        "comm_mean_s": pytest.approx((0.125 + 0.25) / 2),  # slowest rank per iteration: 0.25/2 and 0.5/2
        "comm_p99_s": pytest.approx(0.125 + 0.125 * 0.99),
        "compute_mean_s": pytest.approx((0.05 + 0.06) / 2),
        "ecn_marks": 5,  # the marker's count for the job, not the port's
        "fidelity": "ok", "bound_s": 0.18, "bound_ratio": 1.04, "contended_with": [],
        "estimate_s": 0.25, "estimate_error": pytest.approx((0.25 - 0.1875) / 0.1875), "estimate_ecn_marks": 4.0,
        "jct_s": 6.5, "arrival_s": 0.0, "start_s": 0.0, "end_s": 6.5, "runs": 1,
        "iteration_mean_s": pytest.approx((0.125 + 0.05 + 0.25 + 0.06) / 2), "duration_s": None,
        "time_shift_s": None, "phase_error_max_s": None, "phase_errors_beyond": None, "drift_threshold_s": None,
        "realignments": None, "pace_stretch": None,
    }
    assert got == expected
    assert list(got) == list(expected)


def test_policy_summary_json_is_the_summary_json_layout():
    """A policy's to_dict is its entry in summary.json, keys in order: the figures every back end writes."""
    s = summary()
    got = s.to_dict()
    expected = {
        "policy": "p", "machines_used": 2, "idle_machines_used": 1, "cross_machine_bytes": 5000,
        "cluster_machines_in_use": 3, "fragmented_machines": 1,
        "comm_mean_s": pytest.approx(0.1875), "comm_p99_s": pytest.approx(0.125 + 0.125 * 0.99),
        "busiest_link": "h1->e1", "busiest_link_utilisation": pytest.approx(4000 * 8 / (4.0 * 20e6)),
        "waves": 1, "scheduler": "waves", "preemptions": 0, "preemption_overhead_s": 0.0, "jct_mean_s": 6.5,
        "wall_time_s": 12.0,
        "cpu_mean": 0.5, "cpu_p95": 0.625, "cpu_saturated": False, "cpu_switch_thread_p95": None,
        "ecn_method": "bpf", "host_tcp": {"dctcp, tcp_ecn=1": 2}, "ecn_marks": 6,
        "ecn_busiest_port": "e1->h2", "ecn_marks_busiest_port": 6,
        "ecn_most_marked_link": "e1->h2", "ecn_most_marked_link_marks": 6,
        "scale": 500.0, "dilation": 2.0, "trustworthy": True, "fidelity_reasons": [],
        "links_checked": 1, "links_failed": 0, "link_check_methods": {"virtual-queue": 0, "busy-rate": 1},
        "worst_link_check": {"link": "e1->h1", "check": "busy-rate", "ok": True, "limit_ratio": 0.9,
                             "rate_mbps": 20.0, "busy_s": 2.0, "achieved_mbps": 20.0, "ratio": 1.0},
        "jobs_checked": 1, "jobs_failed": 0, "worst_job_ratio": 1.04,
        "validation": {"n": 1, "pearson_r": None, "median_abs_rel_error": pytest.approx(1 / 3),
                       "p90_abs_rel_error": pytest.approx(1 / 3),
                       "worst": {"policy": "p", "job": "a", "measured_s": pytest.approx(0.1875), "estimated_s": 0.25,
                                 "rel_error": pytest.approx(1 / 3), "job_class": "uncontended"}},
        "distribution_efficiency": pytest.approx(2 * 0.055 / 6.5),  # 2 iterations of 0.055 s compute, JCT 6.5 s
        "backend": "emu", "comm_p90_s": pytest.approx(0.1875), "jct_p90_s": 6.5, "makespan_s": 6.5,
        "jct_over_duration_mean": None,
        "jobs": {"a": s.job("a").to_dict()},
        # its one bucket, 2 kB per step on the wire (under 10 packets): small; 4,000 B at scale 500
        "buckets": [{"policy": "p", "job": "a", "job_class": "uncontended", "bucket": 0, "bytes": 2_000_000,
                     "kind": "small", "measured_s": pytest.approx(0.1875), "estimated_s": 0.25,
                     "error_s": pytest.approx(0.0625)}],
        "cluster": None,  # set by the run from its loop (tests/test_cluster_metrics.py)
    }
    assert got == expected
    assert list(got) == list(expected)
    assert json.loads(json.dumps(got)) == got


def test_policy_summary_reads_back_what_it_wrote():
    """summary.json's entry of a policy reads back into an equal summary: the emulator's figures
    among them, and none where a back end emulated no network (each written None or empty)."""
    s = summary()
    assert s.measured is not None and s.measured.ecn_method == "bpf"
    assert PolicySummary.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    bare = dataclasses.replace(s, measured=None)
    written = bare.to_dict()
    assert list(written) == list(s.to_dict())
    assert (written["cross_machine_bytes"], written["host_tcp"], written["fidelity_reasons"]) == (None, {}, [])
    assert PolicySummary.from_dict(written) == bare and bare.figure("cpu_mean") is None


def test_job_summary_reads_back_what_it_wrote():
    """summary.json's entry of a job reads back into an equal summary: the emulator's figures of it
    (verdict, estimate) among them, and none where a back end emulated no network (each written None
    or empty)."""
    j = summary().job("a")
    assert j.measured is not None and j.figure("fidelity") == "ok" and j.figure("estimate_s") == 0.25
    assert JobSummary.from_dict("a", json.loads(json.dumps(j.to_dict()))) == j
    bare = dataclasses.replace(j, measured=None)
    written = bare.to_dict()
    assert list(written) == list(j.to_dict())
    assert (written["fidelity"], written["contended_with"], written["estimate_ecn_marks"]) == (None, [], None)
    assert JobSummary.from_dict("a", written) == bare and bare.figure("bound_ratio") is None


def test_unknown_job_names_the_policys_jobs():
    """Asking a summary for a job it does not hold fails naming the jobs it has."""
    with pytest.raises(KeyError, match="no job 'z' under p; jobs: a"):
        summary().job("z")


def test_tables_are_built_from_the_records():
    """The terminal tables show the record's figures: ECN marks, the verdict, the simulator's error."""
    text = summary_tables([summary()])
    header, _, row = text.splitlines()[1:4]
    policy_row = row.split()
    assert policy_row[:6] == ["p", "2", "1", "3", "1", "0.01"]  # 5000 bytes: 0.01 MB
    assert row[header.index("trust"):].split()[0] == "ok"
    job_row = next(line for line in text.splitlines() if line.startswith("a "))
    assert job_row.split() == ["a", "resnet50", "2", "ring", "2", "0", "0.188", "0.249", "0.180", "1.040", "ok",
                               "0.250", "+33.3%", "5", "6.500", "yes"]


def test_run_report_files_are_written_from_the_records(tmp_path):
    """summary.json holds the records' JSON; summary.csv and jobs.csv one row per policy and per job."""
    r = result()
    r.summary = summarise_policy(CFG, G, r, records(), "emu")
    out = io.StringIO()
    write_run_report(str(tmp_path), CFG, G, {"p": PolicyRun(r.summary, r)}, {"ecn_method": "bpf"}, out,
                     {"titan": "placed none"})
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["policies"] == [r.summary.to_dict()]
    assert written["unplaced"] == {"titan": "placed none"} and written["validation"]["n"] == 1
    with open(tmp_path / "summary.csv", newline="") as f:
        head, row = list(csv.reader(f))
    got = dict(zip(head, row, strict=True))
    assert got["policy"] == "p" and got["cross_machine_bytes"] == "5000" and got["ecn_marks_busiest_port"] == "6"
    assert got["worst_job_ratio"] == "1.04" and got["trustworthy"] == "True" and got["cpu_saturated"] == "False"
    assert got["ecn_most_marked_link"] == "e1->h2" and got["jct_mean_s"] == "6.5" and got["dilation"] == "2"
    with open(tmp_path / "jobs.csv", newline="") as f:
        head, row = list(csv.reader(f))
    got = dict(zip(head, row, strict=True))
    assert (got["policy"], got["job"], got["machines"], got["contended_with"]) == ("p", "a", "h1 h2", "")
    assert (got["fidelity"], got["bound_ratio"], got["estimate_s"], got["ecn_marks"]) == ("ok", "1.04", "0.25", "5")
    assert got["complete"] == "True" and got["iterations_recorded"] == "2" and got["jct_s"] == "6.5"
    assert "Policy titan could not place every job: placed none" in out.getvalue()
    report = (tmp_path / "report.txt").read_text()
    assert "p            r -, median |error| 33.3%" in report
    # job a was checked against its bound (ok): the simulator's error on uncontended jobs, on a line of its own
    assert "    uncontended    r -, median |error| 33.3%, p90 33.3% over 1 job" in report
    assert written["validation_by_class"]["uncontended"]["n"] == 1 and set(written["validation_by_class"]) == {
        "uncontended"}
