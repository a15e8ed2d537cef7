"""HiveD-F placement (fragments first, rack cells) against Titan's worked examples (titan.md §5)."""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction

import pytest
from conftest import M_BYTES, cross_traffic
from placement_cases import cluster

from common.errors import PlacementError
from jobs.patterns import pattern
from placement import Cluster, JobRequest, MachineInfo, make_policy
from placement.hived import HivedPolicy
from placement.metrics import used_machines

"""Allreduce payload M of the test vectors (bytes; divisible by every chunking used)."""



def paper_hd_steps(p: int, size_bytes: int) -> list[list[tuple[int, int, int]]]:
    """HD in the paper's labelling (titan.md §1.3.1): RS step t pairs r with r XOR 2^(k-t), M/2^t each way."""
    k = p.bit_length() - 1
    rs = [[(r, r ^ (1 << (k - t)), size_bytes >> t) for r in range(p)] for t in range(1, k + 1)]
    return rs + rs[::-1]


def test_motivating_example():
    """Fig. 1: free (4, 3, 2, 1), one 4-worker job: W1-W3 on M2, W4 on M4; the cluster runs 3 machines."""
    c = cluster([4, 3, 2, 1])
    (p,) = make_policy("hived").place([JobRequest("j", "resnet50", 4)], c.view())
    assert [s.machine for s in p.slots] == ["M2", "M2", "M2", "M4"]
    c.apply(p)
    assert used_machines(c.view()) == 3
    assert c.view().n_free("M2") == 0 and c.view().n_free("M4") == 0


@pytest.mark.parametrize("labelling", ["gloo", "paper"])
def test_motivating_example_traffic(labelling):
    """HiveD's split costs 3M/2 cross-machine traffic (M/2, M/4, M/4, M/2 per step) in either HD labelling."""
    (p,) = make_policy("hived").place([JobRequest("j", "resnet50", 4)], cluster([4, 3, 2, 1]).view())
    steps = pattern("hd", 4, M_BYTES) if labelling == "gloo" else paper_hd_steps(4, M_BYTES)
    assert cross_traffic(p, steps) == Fraction(3, 2)
    per_step = [cross_traffic(p, [s]) for s in steps]
    assert per_step == [Fraction(1, 2), Fraction(1, 4), Fraction(1, 4), Fraction(1, 2)]


@pytest.mark.parametrize("workers,machines,idle_used,x", [
    (4, 2, 0, Fraction(3, 2)),
    (6, 3, 0, Fraction(11, 2)),
    (8, 4, 0, Fraction(11, 2)),
    (10, 6, 0, Fraction(19, 2)),
    (12, 7, 1, Fraction(27, 2)),
])
def test_testbed_like_vectors(workers, machines, idle_used, x):
    """titan.md §5.4: K = 4, busy (3,3,3,2,2,1,0,0), gloo HD with fold-in: machines, idle used and X."""
    view = cluster([1, 1, 1, 2, 2, 3, 4, 4]).view()
    (p,) = make_policy("hived").place([JobRequest("j", "resnet50", workers)], view)
    assert len(p.machines) == machines
    assert sum(1 for m in p.machines if view.is_idle(m)) == idle_used
    assert cross_traffic(p, pattern("hd", workers, M_BYTES)) == x


def test_introduction_example():
    """titan.md §5.2: A idle, B and C half full (K = 8), 16 workers: B 0-3, C 4-7, A 8-15, X = 2M (gloo)."""
    c = Cluster([MachineInfo(n, 8, rack="r0", pod="p0") for n in "ABC"])
    c.set_background({"B": 4, "C": 4})
    (p,) = make_policy("hived").place([JobRequest("j", "resnet50", 16)], c.view())
    assert [s.machine for s in p.slots] == ["B"] * 4 + ["C"] * 4 + ["A"] * 8
    assert cross_traffic(p, pattern("hd", 16, M_BYTES)) == 2


def test_rack_cell_confines_the_job():
    """With rack_first the job stays in the fitting rack with the fewest free GPUs, not in other fragments."""
    c = cluster([1, 1, 4, 3], racks=["r0", "r0", "r1", "r1"])
    (p,) = make_policy("hived").place([JobRequest("j", "resnet50", 4)], c.view())
    assert set(p.machines) == {"M4", "M3"} and [s.machine for s in p.slots] == ["M4"] * 3 + ["M3"]
    (q,) = make_policy("hived,rack_first=false").place([JobRequest("j", "resnet50", 4)], c.view())
    assert [s.machine for s in q.slots] == ["M4", "M4", "M4", "M1"]


def test_rack_overflow_uses_the_whole_cluster():
    """A job no single rack can hold is placed over the whole cluster, fragments first."""
    c = cluster([2, 1, 3, 4], racks=["r0", "r0", "r1", "r1"])
    (p,) = make_policy("hived").place([JobRequest("j", "resnet50", 8)], c.view())
    assert Counter(s.machine for s in p.slots) == {"M3": 3, "M1": 2, "M2": 1, "M4": 2}


@pytest.mark.parametrize("seed", range(20))
def test_fills_every_selected_fragment_but_the_last(seed):
    """HiveD-F fills each fragment it takes completely, except possibly the last one chosen (titan.md §7)."""
    rng = random.Random(seed)
    c = cluster([rng.randint(0, 8) for _ in range(rng.randint(2, 8))], gpus=8)
    view = c.view()
    workers = rng.randint(1, max(1, view.total_free))
    placements = HivedPolicy(rack_first=False).place([JobRequest("j", "resnet50", workers)], view)
    if view.total_free < workers:
        assert placements == []
        return
    (p,) = placements
    taken = Counter(s.machine for s in p.slots)
    frags = [m for m in p.machines if not view.is_idle(m)]
    assert all(taken[m] == view.n_free(m) for m in frags[:-1])
    assert all(view.is_idle(m) for m in p.machines[len(frags):]), "fragments come before idle machines"


def test_waits_when_too_big_and_rejects_zero_workers():
    """A job larger than the free GPUs waits (later jobs still placed); a 0-worker job is an error."""
    c = cluster([1, 2])
    placed = make_policy("hived").place([JobRequest("big", "resnet50", 4), JobRequest("s", "resnet50", 2)],
                                        c.view())
    assert [p.job for p in placed] == ["s"]
    assert make_policy("hived,strict_order=true").place(
        [JobRequest("big", "resnet50", 4), JobRequest("s", "resnet50", 2)], c.view()) == []
    with pytest.raises(PlacementError, match="workers must be >= 1"):
        JobRequest("z", "resnet50", 0)
