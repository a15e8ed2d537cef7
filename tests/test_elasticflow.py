"""ElasticFlow-F placement (best fit, power-of-two sizing, waiting) against titan.md §3.1 and §5."""

from __future__ import annotations

from fractions import Fraction

import pytest
from conftest import M_BYTES, cross_traffic
from placement_cases import cluster

from jobs.patterns import pattern
from placement import Cluster, JobRequest, MachineInfo, make_policy
from placement.elasticflow import ElasticFlowPolicy, pow2_ceil
from placement.metrics import used_machines

"""Allreduce payload M of the test vectors (bytes)."""



def job(workers: int, name: str = "j") -> JobRequest:
    """A job with a fixed model (ElasticFlow does not read it)."""
    return JobRequest(name, "resnet50", workers)


def test_motivating_example():
    """Fig. 1: free (4, 3, 2, 1): all 4 workers on the idle M1, no cross traffic, 4 machines in use."""
    c = cluster([4, 3, 2, 1])
    (p,) = make_policy("elasticflow").place([job(4)], c.view())
    assert [s.machine for s in p.slots] == ["M1"] * 4
    assert cross_traffic(p, pattern("hd", 4, M_BYTES)) == 0
    c.apply(p)
    assert used_machines(c.view()) == 4


@pytest.mark.parametrize("workers,idle_machines,x", [
    (4, 1, Fraction(0)), (6, 2, Fraction(4)), (8, 2, Fraction(1)), (10, None, None), (12, None, None),
])
def test_testbed_like_vectors(workers, idle_machines, x):
    """titan.md §5.4: K = 4, busy (3,3,3,2,2,1,0,0): idle machines only, X (gloo HD), WAIT for 10 and 12."""
    view = cluster([1, 1, 1, 2, 2, 3, 4, 4]).view()
    placed = make_policy("elasticflow").place([job(workers)], view)
    if idle_machines is None:
        assert placed == []
        return
    (p,) = placed
    assert len(p.machines) == idle_machines and all(view.is_idle(m) for m in p.machines)
    assert cross_traffic(p, pattern("hd", workers, M_BYTES)) == x


def test_introduction_example_waits():
    """titan.md §5.2: 16 workers, one idle 8-GPU machine plus two half-free ones: the job waits."""
    c = Cluster([MachineInfo(n, 8, rack="r0", pod="p0") for n in "ABC"])
    c.set_background({"B": 4, "C": 4})
    assert make_policy("elasticflow").place([job(16)], c.view()) == []


def test_best_fit_prefers_the_tightest_machine():
    """A job goes to the machine whose free GPUs are closest to its size, idle or not."""
    (p,) = make_policy("elasticflow").place([job(2)], cluster([4, 3, 2, 1]).view())
    assert p.machines == ("M3",)


def test_power_of_two_sizing_and_reservation():
    """5 workers need 8 GPUs: a 6-free machine is skipped; the 3 rounding GPUs stay reserved in the call."""
    c = cluster([6, 8], gpus=8)
    (p,) = make_policy("elasticflow").place([job(5)], c.view())
    assert p.machines == ("M2",) and len(p.slots) == 5
    (p,) = make_policy("elasticflow,pow2_round=false").place([job(5)], c.view())
    assert p.machines == ("M1",)
    placed = make_policy("elasticflow").place([job(5, "a"), job(2, "b")], cluster([8, 4], gpus=8).view())
    assert [(p.job, p.machines) for p in placed] == [("a", ("M1",)), ("b", ("M2",))]
    assert [pow2_ceil(p) for p in (1, 2, 3, 5, 8, 9)] == [1, 2, 4, 8, 8, 16]


def test_never_splits_over_fragments():
    """With enough free GPUs only in fragments, a job that needs one machine waits."""
    assert make_policy("elasticflow").place([job(4)], cluster([3, 3, 2]).view()) == []


def test_multi_machine_job_prefers_one_rack():
    """16 workers on 8-GPU machines: two idle machines of the rack with enough, ranks machine by machine."""
    c = cluster([8, 8, 8, 8, 4], gpus=8, racks=["r0", "r1", "r1", "r1", "r0"])
    (p,) = make_policy("elasticflow").place([job(16)], c.view())
    assert [s.machine for s in p.slots] == ["M2"] * 8 + ["M3"] * 8


def test_multi_machine_job_prefers_the_tightest_rack():
    """Among racks that can hold the job, the one with the least idle capacity wins."""
    c = cluster([8, 8, 8, 8, 8], gpus=8, racks=["r0", "r0", "r0", "r1", "r1"])
    (p,) = make_policy("elasticflow").place([job(16)], c.view())
    assert p.machines == ("M4", "M5")


def test_multi_machine_job_spans_racks_when_needed():
    """If no rack has enough idle machines, racks with the most idle capacity are used first."""
    c = cluster([8, 8, 0, 8, 4], gpus=8, racks=["r0", "r0", "r1", "r1", "r2"])
    assert make_policy("elasticflow").place([job(24)], c.view()) == [], "rounded to 32 > 24 idle GPUs"
    (p,) = make_policy("elasticflow,pow2_round=false").place([job(24)], c.view())
    assert p.machines == ("M1", "M2", "M4")


def test_waiting_job_does_not_block_unless_strict_order():
    """A job that cannot be placed waits; a later one is placed unless strict_order is set."""
    view = cluster([2, 1]).view()
    assert [p.job for p in ElasticFlowPolicy().place([job(4, "big"), job(2, "s")], view)] == ["s"]
    assert ElasticFlowPolicy(strict_order=True).place([job(4, "big"), job(2, "s")], view) == []
