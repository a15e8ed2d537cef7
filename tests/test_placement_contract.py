"""Contract tests: every registered placement policy against the shared invariants.

Parametrised from ``placement.POLICIES``, so a newly registered policy is covered without
editing this file. Clusters are small, random (seeded) and partly loaded with background
work; job mixes are random (seeded) and include jobs that cannot fit.

Clusters carry a three-tier topology graph (machines under their rack's switch, racks under
their pod's, pods under one core; 10 Gbit/s links) for the network-aware policies that route
jobs on ``view.graph`` (Cassini).
"""

from __future__ import annotations

import random

import networkx as nx
import pytest

from placement import POLICIES, Cluster, JobRequest, MachineInfo, make_policy

CLUSTER_SEEDS = range(6)
MIX_SEEDS = range(4)


def random_cluster(seed: int) -> Cluster:
    """A cluster of 1-2 pods x 1-3 racks x 1-3 machines with 1-8 GPUs and random background load."""
    rng = random.Random(seed)
    machines = []
    for p in range(rng.randint(1, 2)):
        for r in range(rng.randint(1, 3)):
            for m in range(rng.randint(1, 3)):
                name = f"h{p}{r}{m}"
                machines.append(MachineInfo(name, rng.choice([1, 2, 4, 8]), rack=f"r{p}{r}", pod=f"p{p}"))
    cluster = with_topology(machines)
    cluster.set_background({m.name: rng.randint(0, m.gpus) for m in machines if rng.random() < 0.6})
    return cluster


def with_topology(machines: list[MachineInfo]) -> Cluster:
    """A cluster of ``machines`` with a three-tier graph: machines under their rack's switch, racks under
    their pod's, pods under one core; 10 Gbit/s links."""
    g = nx.Graph()
    for m in machines:
        g.add_node(m.name, role="machine", gpus=m.gpus, rack=m.rack, pod=m.pod)
        g.add_node(m.rack, role="switch")
        g.add_node(m.pod, role="switch")
        g.add_edge(m.name, m.rack, bw_mbps=10000)
        g.add_edge(m.rack, m.pod, bw_mbps=10000)
        g.add_edge(m.pod, "core", bw_mbps=10000)
    return Cluster(machines, graph=g)


def random_jobs(seed: int, total_free: int) -> list[JobRequest]:
    """2-6 jobs of 1-8 workers, plus one job larger than every free GPU (it must wait)."""
    rng = random.Random(1000 + seed)
    jobs = [JobRequest(f"j{i}", "resnet50", rng.randint(1, 8)) for i in range(rng.randint(2, 6))]
    jobs.insert(rng.randint(0, len(jobs)), JobRequest("too_big", "vgg16", total_free + 1))
    return jobs


def cases():
    """Every (policy, cluster seed, job-mix seed) combination."""
    return [(p, c, j) for p in POLICIES for c in CLUSTER_SEEDS for j in MIX_SEEDS]


@pytest.mark.parametrize("policy_name", list(POLICIES))
def test_registry_key_matches_policy_name(policy_name):
    """Each registry key equals its class's ``name`` and builds via make_policy."""
    assert POLICIES[policy_name].name == policy_name
    assert isinstance(make_policy(policy_name, seed=1), POLICIES[policy_name])


@pytest.mark.parametrize("policy_name,cluster_seed,mix_seed", cases())
def test_placement_invariants(policy_name, cluster_seed, mix_seed):
    """Placements use only free GPUs, never share one, have the right size and apply cleanly."""
    cluster = random_cluster(cluster_seed)
    view = cluster.view()
    pending = random_jobs(mix_seed, view.total_free)
    by_name = {j.name: j for j in pending}
    before = cluster.snapshot()

    placements = make_policy(policy_name, seed=7).place(pending, view)

    assert cluster.snapshot() == before, "place() must not mutate the cluster"
    names = [p.job for p in placements]
    assert len(names) == len(set(names)), "a job is placed at most once"
    assert set(names) <= set(by_name), "only pending jobs are placed"
    assert "too_big" not in names, "a job larger than the free GPUs waits"
    machines = {m.name: m for m in view.machines}
    used = set()
    for p in placements:
        assert len(p.slots) == by_name[p.job].workers
        for s in p.slots:
            assert s.machine in machines and 0 <= s.gpu < machines[s.machine].gpus, f"no such GPU {s}"
            assert view.owner(s) is None, f"{p.job} uses busy GPU {s}"
            assert s not in used, f"GPU {s} double-booked"
            used.add(s)
        assert p.ps_host is None or p.ps_host in machines
    for p in placements:
        cluster.apply(p)


@pytest.mark.parametrize("policy_name,cluster_seed,mix_seed", cases())
def test_same_seed_same_output(policy_name, cluster_seed, mix_seed):
    """Two instances with the same seed return identical placements for the same input."""
    cluster = random_cluster(cluster_seed)
    pending = random_jobs(mix_seed, cluster.view().total_free)
    first = make_policy(policy_name, seed=11).place(pending, cluster.view())
    second = make_policy(policy_name, seed=11).place(pending, cluster.view())
    assert first == second


@pytest.mark.parametrize("policy_name", list(POLICIES))
def test_places_something_when_a_job_fits(policy_name):
    """On an idle cluster, a lone job that fits is placed (a policy is not 'always wait')."""
    cluster = with_topology([MachineInfo(f"h{i}", 4, rack=f"r{i // 2}", pod="p0") for i in range(4)])
    placements = make_policy(policy_name).place([JobRequest("a", "resnet50", 2)], cluster.view())
    assert [p.job for p in placements] == ["a"]


@pytest.mark.parametrize("policy_name", list(POLICIES))
def test_empty_and_full_cluster(policy_name):
    """No pending jobs gives no placements; a fully busy cluster places nothing and does not raise."""
    cluster = random_cluster(0)
    policy = make_policy(policy_name)
    assert policy.place([], cluster.view()) == []
    cluster.set_background({m.name: m.gpus for m in cluster.view().machines})
    assert policy.place([JobRequest("a", "resnet50", 1)], cluster.view()) == []


@pytest.mark.parametrize("policy_name,cluster_seed,mix_seed", [(p, c, 0) for p in POLICIES for c in range(3)])
def test_candidates_are_distinct_valid_decisions_led_by_place(policy_name, cluster_seed, mix_seed):
    """``candidates(k)``: 1..k distinct decisions, the first place()'s, each placing pending jobs once on
    free GPUs without sharing one; ``decide()``'s placements are place()'s."""
    cluster = random_cluster(cluster_seed)
    view = cluster.view()
    pending = random_jobs(mix_seed, view.total_free)
    cands = make_policy(policy_name, seed=5).candidates(pending, view, 4)
    assert 1 <= len(cands) <= 4
    assert cands[0] == make_policy(policy_name, seed=5).place(pending, view)
    assert make_policy(policy_name, seed=5).decide(pending, view).placements == tuple(cands[0])
    assert len({tuple(c) for c in cands}) == len(cands), "candidates repeat"
    for cand in cands:
        slots = [s for p in cand for s in p.slots]
        assert len(slots) == len(set(slots)) and all(view.owner(s) is None for s in slots)
        assert len({p.job for p in cand}) == len(cand)
