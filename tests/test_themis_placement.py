"""Themis-like placement (``placement.themis``): locality first, racks then machines, and the
equal-objective candidates Cassini ranks (spec §5.1: "they differ only in which physical servers the
workers land on")."""

from __future__ import annotations

import random

from placement_cases import cluster

from placement import JobRequest, make_policy
from placement.themis import fewest_groups, objective


def test_a_job_takes_the_fewest_racks_then_the_fewest_machines_best_fit_last():
    """6 workers: rack r1 (8 free) holds them, r0 (6 free) holds them better (best fit); within r0
    the two 3-free machines are the fewest. 10 workers: two racks, r1 taken whole."""
    c = cluster([3, 3, 4, 4], racks=["r0", "r0", "r1", "r1"])
    (p,) = make_policy("themis").place([JobRequest("a", "resnet50", 6)], c.view())
    assert p.machines == ("M1", "M2")
    (q,) = make_policy("themis").place([JobRequest("b", "resnet50", 10)], c.view())
    assert q.machines == ("M1", "M3", "M4")  # r1 whole, the other two on r0's best fit; ranks in machine order


def test_fewest_groups_takes_the_largest_whole_then_the_best_fit():
    assert fewest_groups([("a", 2), ("b", 4), ("c", 3), ("d", 1)], 6, None) == [("b", 4), ("a", 2)]
    assert fewest_groups([("a", 2)], 3, None) == []
    rng = random.Random(1)
    for _ in range(50):  # random choices keep the count of groups
        taken = fewest_groups([("a", 2), ("b", 4), ("c", 4), ("d", 1)], 6, rng)
        assert len(taken) == 2 and sum(n for _, n in taken) == 6


def test_candidates_are_distinct_valid_and_of_the_first_ones_objective():
    """Eight racks of two empty 4-GPU machines, two jobs of 4 and 8 workers: the 0th candidate is
    place()'s, every candidate places both with one rack and one/two machines each, none repeats, and
    no two placements of one candidate share a GPU."""
    racks = [f"r{i // 2}" for i in range(16)]
    c = cluster([4] * 16, racks=racks)
    jobs = [JobRequest("a", "resnet50", 4), JobRequest("b", "vgg16", 8)]
    policy = make_policy("themis", seed=3)
    cands = policy.candidates(jobs, c.view(), 10)
    assert cands[0] == policy.place(jobs, c.view())
    assert len(cands) == 10 and len({tuple(x) for x in cands}) == 10
    for cand in cands:
        assert objective(cand, c.view()) == {"a": (1, 1), "b": (1, 2)}
        slots = [s for p in cand for s in p.slots]
        assert len(slots) == len(set(slots)) == 12
    assert len({p.machines for cand in cands for p in cand if p.job == "b"}) > 1  # they differ in servers


def test_a_cluster_with_one_way_to_place_gives_one_candidate():
    c = cluster([4, 4], racks=["r0", "r0"])
    assert len(make_policy("themis").candidates([JobRequest("a", "resnet50", 8)], c.view(), 10)) == 1
