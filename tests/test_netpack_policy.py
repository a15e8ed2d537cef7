"""NetPack's placement (spec §3): the worked examples exactly (server values, the 2-D knapsack's
test vector), the batch knapsack, trimming, PS scoring, the single-server rule, selective INA and
anti-starvation, and bad input."""

from __future__ import annotations

import pytest

from common.errors import PlacementError
from placement import Cluster, GpuSlot, JobRequest, MachineInfo, Placement
from placement.netpack.knapsack import ServerItem, select_jobs, worker_plans
from placement.netpack.network import Fabric, NetJob
from placement.netpack.policy import NetPackPolicy, choose_ps, server_value, trim
from placement.netpack.waterfill import waterfill


@pytest.mark.parametrize("bw, flows, want", [(100, 0, 100), (40, 1, 10), (0, 3, -25)])
def test_server_values_of_the_paper_examples(bw, flows, want):
    assert server_value(bw, 100, flows) == pytest.approx(want)


def test_the_code_value_scores_an_idle_server_zero():
    assert server_value(100, 100, 0, "code") == 0 and server_value(40, 100, 1, "code") == pytest.approx(-10)


def test_worker_dp_test_vector():
    """§3.5: W = 4, G = 4, C = 100; s1 (2 free, bw 100, 0 flows) = 100, s2 (1, 40, 1) = 10,
    s3 (3, 0, 2) = -33.3, s4 (2, 70, 1) = 55."""
    items = [ServerItem(n, free, server_value(bw, 100, fl), fl)
             for n, free, bw, fl in (("s1", 2, 100, 0), ("s2", 1, 40, 1), ("s3", 3, 0, 2), ("s4", 2, 70, 1))]
    plans = {(p.flows, p.gpus): p for p in worker_plans(items, 4, 4)}
    assert plans[1, 4].servers == ("s1", "s4") and plans[1, 4].value == pytest.approx(155)
    assert plans[1, 5].servers == ("s1", "s2", "s4") and plans[1, 5].value == pytest.approx(165)
    assert plans[2, 5].servers == ("s1", "s3") and plans[2, 5].value == pytest.approx(200 / 3)
    assert plans[2, 4].servers == ("s2", "s3") and plans[2, 4].value == pytest.approx(-70 / 3)
    assert all(4 <= g <= 8 for _, g in plans) and (0, 4) not in plans  # s1 alone has 2 GPUs


def test_the_batch_knapsack_maximises_value_within_the_free_gpus():
    assert select_jobs([4, 3, 3, 2], [1, 1, 1, 1], 8) == [1, 2, 3]
    assert select_jobs([4, 3, 3, 2], [5, 1, 1, 1], 8) == [0, 1]  # ties: earlier jobs kept
    assert select_jobs([9], [1], 8) == [] and select_jobs([1, 1], [1, 1], 0) == []


def test_trimming_takes_the_excess_from_the_largest_giver_that_can_absorb_it():
    assert trim([("a", 4), ("b", 2), ("c", 4)], 8) == [("a", 4), ("b", 2), ("c", 2)]  # ties: the last
    assert trim([("a", 4), ("b", 2), ("c", 4)], 8, ps="c") == [("a", 2), ("b", 2), ("c", 4)]  # not the PS's
    assert trim([("a", 1), ("b", 4)], 1) == [("a", 1)]  # b gives up all it had and leaves
    assert trim([("a", 3), ("b", 3)], 6) == [("a", 3), ("b", 3)]
    assert trim([("a", 2), ("b", 2), ("c", 2)], 3) == [("a", 2), ("b", 1)]  # none absorbs 3: largest in turn


def cluster(n: int = 8, gpus: int = 4, per_rack: int = 4) -> Cluster:
    return Cluster([MachineInfo(f"h{i}", gpus, rack=f"r{i // per_rack}", pod="p") for i in range(n)])


def test_a_job_that_fits_one_server_goes_to_the_best_fit_with_no_ps():
    c = cluster()
    c.set_background({"h0": 1, "h1": 3, "h2": 2})
    (p,) = NetPackPolicy().place([JobRequest("a", "vgg16", 2)], c.view())
    assert {s.machine for s in p.slots} == {"h2"} and p.ps_host is None and p.ina_switches == ()


def test_a_multi_server_job_gets_a_ps_and_ina_where_it_aggregates():
    c = cluster()
    (p,) = NetPackPolicy().place([JobRequest("a", "vgg16", 8)], c.view())
    machines = {s.machine for s in p.slots}
    assert len(p.slots) == 8 and len(machines) >= 2 and p.ps_host is not None
    racks = {f"r{int(m[1:]) // 4}" for m in machines} | {f"r{int(p.ps_host[1:]) // 4}"}
    assert set(p.ina_switches) <= racks and p.ina_switches, p


def test_the_ps_avoids_a_server_whose_link_is_full():
    """Two servers with residual bandwidth, one with none: the PS goes where the bandwidth is."""
    f = Fabric({"a": "r", "b": "r", "c": "r", "d": "r"}, dict.fromkeys("abcd", 100.0), {"r": 400.0}, {"r": 0.0})
    running = [NetJob("x", ("a", "b"), "c")]  # c's link carries both of x's flows and is full
    state = waterfill(f, running)
    assert state.residual[("access", "c")] == pytest.approx(0, abs=1e-9)
    plans = worker_plans([ServerItem("d", 4, 100.0, 0), ServerItem("a", 2, server_value(50, 100, 1), 1)], 6, 4)
    best = choose_ps(plans, f, state, ["a", "b", "c", "d"], 100.0)
    assert best.ps == "d" and best.plan.servers == ("d", "a")


def test_selective_ina_goes_to_the_job_that_gains_most_until_the_pat_runs_out():
    """Two 8-GPU jobs in one rack (8 servers of 4 GPUs), each on two servers with its PS on the
    first (its link carries a worker's flow and the PS's), PAT 80 Gb/s: with INA on for both they
    share it (40 each), then each PS link carries 3 flows: 46.7 each. The first by aggregation
    efficiency (equal here: batch order) gets INA (46.7 <= 80); 33.3 left is short of the
    second's 46.7, so it runs without. Where PAT covers both, both get it; with none, neither."""
    def ina_of(pat: float) -> dict[str, tuple]:
        out = NetPackPolicy(pat_gbps=pat).place([JobRequest("a", "vgg16", 8), JobRequest("b", "vgg16", 8)],
                                                cluster(8, 4, 8).view())
        assert [len(p.slots) for p in out] == [8, 8] and all(p.ps_host for p in out)
        return {p.job: p.ina_switches for p in out}

    assert ina_of(80.0) == {"a": ("r0",), "b": ()}
    assert ina_of(1000.0) == {"a": ("r0",), "b": ("r0",)}
    assert ina_of(0.0) == {"a": (), "b": ()}


def test_running_jobs_keep_their_ps_and_their_load_steers_the_next():
    c = cluster(8, 4, 4)
    policy = NetPackPolicy()
    (a,) = policy.place([JobRequest("a", "vgg16", 8)], c.view())
    c.apply(a)
    (b,) = policy.place([JobRequest("b", "vgg16", 8)], c.view())
    assert not {s.machine for s in a.slots} & {s.machine for s in b.slots}
    assert policy.decisions.get("a").ps == a.ps_host
    c.release("a")
    policy.place([], c.view())
    assert policy.decisions.get("a") is None  # forgotten once it left


def test_a_job_left_out_gains_value_until_it_is_placed():
    """8 free GPUs: the 8-GPU job loses the knapsack to two 4-GPU jobs (value 2 > 1) in the first
    period; its value rises each period it waits, and at 2 it wins (equal value: the earlier job)."""
    c = cluster(2, 4, 2)
    policy = NetPackPolicy()
    small = [JobRequest("s1", "resnet50", 4), JobRequest("s2", "resnet50", 4)]
    big = JobRequest("big", "vgg16", 8)
    assert sorted(p.job for p in policy.place([big, *small], c.view())) == ["s1", "s2"]
    assert policy.job_values["big"] == 2.0
    assert [p.job for p in policy.place([big, *small], c.view())] == ["big"]
    assert "big" not in policy.job_values and policy.job_values == {"s1": 2.0, "s2": 2.0}


def test_a_job_that_can_never_fit_waits_and_others_still_go():
    c = cluster(2, 4, 2)
    out = NetPackPolicy().place([JobRequest("huge", "vgg16", 9), JobRequest("a", "vgg16", 2)], c.view())
    assert [p.job for p in out] == ["a"]


@pytest.mark.parametrize("kwargs, match", [({"value": "best"}, "unknown value 'best'"),
                                           ({"pat_gbps": -1.0}, "pat_gbps >= 0"),
                                           ({"min_fan_in": 0}, "min_fan_in >= 1")])
def test_bad_parameters_are_refused(kwargs, match):
    with pytest.raises(PlacementError, match=match):
        NetPackPolicy(**kwargs)


def test_a_topology_without_tor_switches_is_refused_in_one_line():
    import networkx as nx

    g = nx.Graph()
    g.add_node("h1", role="machine", gpus=4, rack="nowhere", pod="p")
    g.add_node("h2", role="machine", gpus=4, rack="nowhere", pod="p")
    g.add_edge("h1", "h2", bw_mbps=1000.0)
    with pytest.raises(PlacementError, match="not attached to a ToR"):
        NetPackPolicy().place([JobRequest("a", "vgg16", 8)], Cluster.from_topology(g).view())


def test_placements_apply_and_slots_are_in_rank_order_of_servers():
    c = cluster(8, 4, 4)
    out = NetPackPolicy().place([JobRequest("a", "vgg16", 6), JobRequest("b", "vgg16", 3),
                                 JobRequest("c", "vgg16", 10)], c.view())
    for p in out:
        c.apply(p)
        machines = [s.machine for s in p.slots]
        assert machines == sorted(machines, key=machines.index)  # each server's GPUs together
    assert isinstance(out[0], Placement) and all(isinstance(s, GpuSlot) for p in out for s in p.slots)


def _brute_ps(plans, fabric, state, servers, capacity):
    """Every (plan, server) pair scored, the rule of choose_ps applied in order."""
    from placement.netpack.network import EPS
    from placement.netpack.policy import _rack_share

    flows, up = state.server_flows(), state.uplink_flows()
    best = None
    for plan in plans:
        racks = {fabric.rack_of[w] for w in plan.servers}
        for s in servers:
            eps = 0 if s in plan.servers else 1
            f_s, bw = flows.get(s, 0), state.residual[("access", s)]
            hot = min(capacity / (max(plan.flows, f_s + eps) + 1), _rack_share(fabric, plan.servers, s, up))
            score = plan.value + bw - (fabric.access_gbps[s] - bw) / (f_s + eps + 1) + hot
            local = fabric.rack_of[s] in racks
            if best is None or score > best[2] + EPS or (score > best[2] - EPS and local and not best[3]):
                best = (plan, s, score, local)
    return best


@pytest.mark.parametrize("seed", range(30))
def test_the_bounded_ps_search_and_the_cut_item_list_choose_as_the_full_ones(seed):
    """On random loaded clusters: the PS search that stops at its bound picks the pair scoring
    every pair picks, and the DP over the first servers of each interchangeable class gives the
    same plans as over every server."""
    import random

    from placement.netpack.policy import interchangeable_first

    rnd = random.Random(seed)
    racks = {f"r{i}": [f"s{i}_{k}" for k in range(rnd.randint(2, 6))] for i in range(rnd.randint(1, 4))}
    servers = [s for ss in racks.values() for s in ss]
    f = Fabric({s: r for r, ss in racks.items() for s in ss}, dict.fromkeys(servers, 100.0),
               {r: rnd.choice([100.0, 300.0]) for r in racks}, {r: rnd.choice([0.0, 50.0]) for r in racks})
    jobs = [NetJob(f"j{k}", tuple(rnd.sample(servers, 2)), rnd.choice(servers), frozenset(racks))
            for k in range(rnd.randint(0, 4))]
    state = waterfill(f, jobs)
    flows = state.server_flows()
    items = [ServerItem(s, rnd.choice([1, 2, 4]), server_value(state.residual[("access", s)], 100.0,
                                                               flows.get(s, 0)), flows.get(s, 0)) for s in servers]
    need = rnd.randint(3, 10)
    plans = worker_plans(items, need, 4)
    assert worker_plans(interchangeable_first(items, need + 4), need, 4) == plans
    got, want = choose_ps(plans, f, state, servers, 100.0), _brute_ps(plans, f, state, servers, 100.0)
    if want is None:
        assert got is None
    else:
        assert (got.plan, got.ps) == want[:2] and got.score == pytest.approx(want[2])


def test_with_ps_loopback_netpack_turns_ina_on_only_where_the_fabric_would_sum():
    """An 8-GPU job on h0 and h1 (4 GPUs each) with its PS on h0: in the paper's model its ToR sums
    two children and INA is on; with ps_loopback (this testbed: the PS's own server sends over
    loopback) it has one, so INA stays off. On three servers (3 free GPUs each) the ToR has two
    children besides the PS's server and INA is on either way."""
    for loopback, ina in ((False, ("r0",)), (True, ())):
        (p,) = NetPackPolicy(ps_loopback=loopback).place([JobRequest("a", "vgg16", 8)], cluster(8, 4, 8).view())
        assert ([s.machine for s in p.slots], p.ps_host, p.ina_switches) == (["h0"] * 4 + ["h1"] * 4, "h0", ina)
    c = cluster(8, 4, 8)
    c.set_background({f"h{i}": 1 for i in range(8)})
    (p,) = NetPackPolicy(ps_loopback=True).place([JobRequest("b", "vgg16", 8)], c.view())
    assert ([s.machine for s in p.slots], p.ps_host, p.ina_switches) == (
        ["h0"] * 3 + ["h1"] * 3 + ["h2"] * 2, "h0", ("r0",))
