"""Unit tests (no root) of time dilation: what a dilation factor D changes and what it must not.

D divides link rates, multiplies emulated compute and timeouts, and every reported time is the
measured wall time divided by D, so a run's report is the same whatever D is.
"""

from __future__ import annotations

import dataclasses

import pytest

from common.units import virtual_s, wall_s
from emulator.net import link_rates_mbps
from emulator.policy_run import job_evidence
from emulator.runner import net_options
from emulator.variants import ecn_marker
from experiment.config.schema import from_dict
from experiment.reporting.measurements import (
    ClusterState,
    EcnSetup,
    PolicyResult,
    PortSamplerStats,
    StartRecord,
    WaveLinks,
)
from experiment.reporting.report import summarise_policy
from jobs.models import get_model
from jobs.records import IterationRecord
from measure.cpu import CpuSummary
from measure.fidelity import assess, job_verdicts
from placement.base import GpuSlot, JobRequest, Placement
from topo import fat_tree
from workers.launcher import Addresses, RankSettings, plan_workers

G = fat_tree(4)
CPU = CpuSummary(10, 0.5, 0.6, 0.7, None, False)
JOBS = [{"name": "a", "model": "resnet50", "workers": 2, "collective": "ring"},
        {"name": "b", "model": "small_cnn", "workers": 2, "collective": "hd"}]
PLACEMENTS = (StartRecord(0, 0.0, Placement("a", (GpuSlot("h1", 0), GpuSlot("h5", 0)))),
              StartRecord(0, 0.0, Placement("b", (GpuSlot("h9", 0), GpuSlot("h13", 0)))))
BUCKETS = {"a": (40_000, 8_000), "b": (4_256,)}
# virtual (paper-scale) seconds per rank and iteration: (comm of each bucket, compute)
VIRTUAL = {("a", 0): ((0.30, 0.05), 0.178), ("a", 1): ((0.31, 0.06), 0.170),
           ("b", 0): ((0.02,), 0.005), ("b", 1): ((0.025,), 0.004)}
ITERATIONS = 3


def records(dilation: float) -> list[IterationRecord]:
    """What the ranks would record under dilation D: every wall-clock time D times the virtual one."""
    out = []
    for (job, rank), (comm, compute) in VIRTUAL.items():
        for it in range(ITERATIONS):
            wall = [wall_s(c * (1 + 0.1 * it), dilation) for c in comm]
            comp = wall_s(compute, dilation)
            out.append(IterationRecord(
                job=job, rank=rank, world=2, iteration=it, start_time_s=1000.0 + wall_s(it, dilation),
                compute_s=comp, comm_s=sum(wall), bytes=sum(BUCKETS[job]), iteration_s=comp + sum(wall),
                mode="replay", collective="ring" if job == "a" else "hd", bucket_bytes=BUCKETS[job],
                bucket_comm_s=tuple(wall)))
    return out


def result(cfg, recs) -> PolicyResult:
    """A policy's result as the runner builds it, with the per-job verdicts."""
    verdicts = job_verdicts(G, link_rates_mbps(G, cfg.scale), job_evidence(cfg, PLACEMENTS, recs), cfg.mtu)
    return PolicyResult(
        policy="p", scheduler="waves", placements=PLACEMENTS, starts=PLACEMENTS,
        cluster_states=(ClusterState(0, 4, 4),),
        waves=(WaveLinks(0, ("a",), 10.0, None, (0.0, 5.0), {("h1", "e1"): 1000}, {("h1", "e1"): 800}, None),),
        jct_s={}, preemptions=0, link_bytes={}, link_rate_mbps={("h1", "e1"): 20.0}, cpu=CPU,
        cpu_measured=CPU, ecn=EcnSetup("none", ""),
        fidelity=assess(CPU, [], verdicts), estimates={}, scale=cfg.scale,
        dilation=cfg.dilation, port_sampler=PortSamplerStats(0, 0.25, 0.0), dir="", queue_stats="", wall_time_s=1.0)


@pytest.mark.parametrize("dilation", [2.0, 4.0, 7.5])
def test_every_reported_time_is_invariant_under_dilation(dilation):
    """The same virtual run recorded under D = 1 and under D gives the same summary: every time
    (comm mean and p99, compute, per job and per policy), every bound and every ratio."""
    base = from_dict({"jobs": JOBS, "dilation": 1, "iterations": ITERATIONS})
    dilated = dataclasses.replace(base, dilation=dilation)
    s1 = summarise_policy(base, G, result(base, records(1.0)), records(1.0), "emu")
    sd = summarise_policy(dilated, G, result(dilated, records(dilation)), records(dilation), "emu")
    assert s1.comm_mean_s == pytest.approx(sd.comm_mean_s) == pytest.approx(
        (0.37 + 0.025) * (1 + 1.1 + 1.2) / 6)  # both jobs' slowest ranks, three iterations each
    assert s1.comm_p99_s == pytest.approx(sd.comm_p99_s)
    for job in ("a", "b"):
        j1, jd = s1.job(job), sd.job(job)
        for field in ("comm_mean_s", "comm_p99_s", "compute_mean_s", "bound_s", "bound_ratio"):
            assert j1.figure(field) == pytest.approx(jd.figure(field)), (job, field)
        assert j1.emulated.fidelity == jd.emulated.fidelity
    assert s1.job("a").comm_mean_s == pytest.approx(0.31 * 1.1 + 0.06 * 1.1)  # slowest rank, mean of 1, 1.1, 1.2
    assert sd.dilation == dilation and s1.dilation == 1


def test_dilation_divides_rates_and_multiplies_compute_and_marking_delay():
    """At D = 4: links at paper rate / (scale * 4), compute 4 times the profile's, and a marking
    threshold given as a delay keeps the same bytes of queue as at D = 1."""
    cfg = from_dict({"jobs": JOBS, "dilation": 4, "ecn": {"threshold_us": 2000}})
    undilated = dataclasses.replace(cfg, dilation=1.0)
    opts, opts1 = net_options(cfg, ecn_marker("bpf")), net_options(undilated, ecn_marker("bpf"))
    assert opts.dilation == 4
    rates = link_rates_mbps(G, cfg.scale, cfg.dilation)
    assert all(r == pytest.approx(10000 / 500 / 4) for r in rates.values())
    assert opts.marking(5.0).threshold_bytes == pytest.approx(opts1.marking(20.0).threshold_bytes)
    job = JobRequest("a", "resnet50", 2, "ring")
    placement = Placement("a", (GpuSlot("h1", 0), GpuSlot("h5", 0)))
    specs = plan_workers(job, placement, get_model("resnet50"), RankSettings(500, 3, 1, "replay", "/tmp", dilation=4),
                         Addresses({"h1": "10.0.0.1", "h5": "10.0.0.5"}), 29500)
    assert all(s.compute_s == pytest.approx(4 * get_model("resnet50").compute_time_s) for s in specs)


def test_wall_and_virtual_seconds_are_inverse():
    """wall_s multiplies by D, virtual_s divides: a round trip is the identity."""
    assert wall_s(0.25, 4) == 1.0 and virtual_s(1.0, 4) == 0.25
    assert virtual_s(wall_s(0.123, 7.5), 7.5) == pytest.approx(0.123)
