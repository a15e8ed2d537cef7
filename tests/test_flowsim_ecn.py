"""The simulator's ECN marking estimate (``SimOptions.ecn``): a port's queue is taken to be above K
exactly while its link is saturated by two flows or more, and every packet crossing such a link counts
as marked once."""

from __future__ import annotations

import dataclasses

import pytest

from common.errors import JobError
from common.units import wire_bytes
from jobs.patterns import barrier_bytes, replay_pattern
from sim.flowsim import SimJob, SimOptions, simulate
from topo import fat_tree

MTU = 1500
BUCKETS = (40_000, 12_000)


def host_bottleneck(g, mbps=100.0):
    """Machine links at ``mbps``, the fabric four times faster: machine links are the bottleneck."""
    return {(u, v): mbps if "machine" in (g.nodes[u]["role"], g.nodes[v]["role"]) else 4 * mbps
            for u, v in g.edges()}


def ring2(name, machines, iterations=3, warmup=1):
    return SimJob(name, machines, "ring", BUCKETS, compute_s=0.01, iterations=iterations, warmup_iterations=warmup)


def remote_packets(job: SimJob) -> float:
    """Every byte the job sends between its two machines, in full frames of MTU + 14 bytes."""
    sizes = [barrier_bytes(2)] * 2 + list(BUCKETS) * (job.iterations + job.warmup_iterations)
    total = sum(wire_bytes(n, MTU) for size in sizes for step in replay_pattern("ring", 2, size) for _, _, n in step)
    return total / (MTU + 14)


def test_off_by_default():
    g = fat_tree(4)
    est = simulate(g, host_bottleneck(g), [ring2("a", ("h1", "h3"))], SimOptions(mtu=MTU)).job("a")
    assert est.ecn_marks is None


def test_a_job_alone_is_never_marked():
    """One flow per link: saturated links carry one flow, which is not oversubscription."""
    g = fat_tree(4)
    est = simulate(g, host_bottleneck(g), [ring2("a", ("h1", "h3"))], SimOptions(mtu=MTU, ecn=True)).job("a")
    assert est.ecn_marks == 0


def test_two_jobs_into_one_machine_mark_every_packet():
    """a (h1, h3) and b (h2, h3), identical and in step: every transfer of both crosses h3's link in one
    direction or the other together with the other job's, so all their packets count as marked, once."""
    g = fat_tree(4)
    jobs = [ring2("a", ("h1", "h3")), ring2("b", ("h2", "h3"))]
    result = simulate(g, host_bottleneck(g), jobs, SimOptions(mtu=MTU, ecn=True))
    for job in jobs:
        assert result.job(job.name).ecn_marks == pytest.approx(remote_packets(job), rel=1e-9)


def test_the_mark_share_scales_the_marked_packets_and_must_be_a_share():
    """With ecn_mark_share s the estimate is s times every exposed packet, per job and per iteration;
    a share outside (0, 1] is refused."""
    g = fat_tree(4)
    jobs = [ring2("a", ("h1", "h3")), ring2("b", ("h2", "h3"))]
    full = simulate(g, host_bottleneck(g), jobs, SimOptions(mtu=MTU, ecn=True))
    share = simulate(g, host_bottleneck(g), jobs, SimOptions(mtu=MTU, ecn=True, ecn_mark_share=0.05))
    for job in jobs:
        assert share.job(job.name).ecn_marks == pytest.approx(0.05 * remote_packets(job), rel=1e-9)
    assert [r.ecn_marks for r in share.records] == pytest.approx([0.05 * r.ecn_marks for r in full.records], rel=1e-9)
    assert any(r.ecn_marks for r in full.records)
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(JobError, match="ecn_mark_share"):
            SimOptions(ecn=True, ecn_mark_share=bad)


def test_payload_mode_counts_packets_of_1448_bytes():
    """Without headers (``mtu`` None) the flows carry payload: packets are 1448 payload bytes."""
    g = fat_tree(4)
    jobs = [ring2("a", ("h1", "h3")), ring2("b", ("h2", "h3"))]
    est = simulate(g, host_bottleneck(g), jobs, SimOptions(ecn=True)).job("a")
    payload = sum(n for size in [barrier_bytes(2)] * 2 + list(BUCKETS) * 4
                  for step in replay_pattern("ring", 2, size) for _, _, n in step)
    assert est.ecn_marks == pytest.approx(payload / 1448, rel=1e-9)


def test_marks_stop_when_the_other_job_ends():
    """b runs one iteration, a three: a is marked only while b runs (as much as b), and not once it
    runs alone, so less than half of its packets."""
    g = fat_tree(4)
    a, b = ring2("a", ("h1", "h3")), ring2("b", ("h2", "h3"), iterations=1)
    result = simulate(g, host_bottleneck(g), [a, b], SimOptions(mtu=MTU, ecn=True))
    marks_a, marks_b = result.job("a").ecn_marks, result.job("b").ecn_marks
    # b's last barrier runs while a computes: alone on h3's link, it is not marked.
    last_barrier = sum(wire_bytes(n, MTU) for step in replay_pattern("ring", 2, barrier_bytes(2)) for _, _, n in step)
    assert marks_b == pytest.approx(remote_packets(b) - last_barrier / (MTU + 14), rel=1e-9)
    assert marks_a == pytest.approx(marks_b, rel=1e-12), "marks come only from the time they share h3's link"
    assert marks_a < remote_packets(a) / 2


def test_estimate_leaves_times_unchanged():
    """Counting marks changes no rate and no time."""
    g = fat_tree(4)
    jobs = [ring2("a", ("h1", "h3")), ring2("b", ("h2", "h3"), iterations=1)]
    plain = simulate(g, host_bottleneck(g), jobs, SimOptions(mtu=MTU))
    marked = simulate(g, host_bottleneck(g), jobs, SimOptions(mtu=MTU, ecn=True))
    assert all(r.ecn_marks is None for r in plain.records) and all(r.ecn_marks is not None for r in marked.records)
    assert plain.records == tuple(dataclasses.replace(r, ecn_marks=None) for r in marked.records)
    assert plain.events == marked.events


def test_marks_per_iteration_are_those_each_rank_received_in_it():
    """Both jobs in step, every packet marked: each measured iteration's marks, summed over a job's ranks,
    are the packets of its buckets' allreduce (each rank counts those it receives); the warm-up and the
    barriers make up the rest of the job's whole-run estimate."""
    g = fat_tree(4)
    jobs = [ring2("a", ("h1", "h3")), ring2("b", ("h2", "h3"))]
    result = simulate(g, host_bottleneck(g), jobs, SimOptions(mtu=MTU, ecn=True))
    per_iteration = sum(wire_bytes(n, MTU) for size in BUCKETS for step in replay_pattern("ring", 2, size)
                        for _, _, n in step) / (MTU + 14)
    for job in jobs:
        recs = [r for r in result.records if r.job == job.name]
        sums = [sum(r.ecn_marks for r in recs if r.iteration == i) for i in range(job.iterations)]
        assert sums == pytest.approx([per_iteration] * job.iterations, rel=1e-9)
        assert [r.ecn_marks for r in recs] == pytest.approx([per_iteration / 2] * len(recs), rel=1e-9)
        assert sum(sums) < result.job(job.name).ecn_marks
