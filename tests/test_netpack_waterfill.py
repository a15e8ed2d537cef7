"""NetPack's steady-state estimation (spec §2.3) and flow model (§1.6): the spec's worked vectors
exactly, the Fig. 5 flow counts, and properties of the water-filling on random clusters."""

from __future__ import annotations

import random

import pytest

from common.errors import PlacementError
from placement.netpack.network import Fabric, NetJob, access, job_flows, uplink
from placement.netpack.waterfill import waterfill
from topo import build_topology


def fabric(racks: dict[str, list[str]], pat: dict[str, float], link: float = 100.0, up: float = 100.0) -> Fabric:
    rack_of = {s: r for r, servers in racks.items() for s in servers}
    return Fabric(rack_of, {s: link for s in rack_of}, {r: up for r in racks}, pat)


def test_vector_1_one_job_one_rack_pat_40():
    """Round 1: δ = min(100, 40) uses up the PAT; round 2: the PS link carries 2 flows, δ = 30.
    Rate 70, aggregated 40 (0.57), the PS link loaded 40 + 2·30 = 100."""
    f = fabric({"r": ["s1", "s2", "s3"]}, {"r": 40.0})
    st = waterfill(f, [NetJob("j", ("s1", "s2"), "s3", frozenset({"r"}))])
    assert st.rate["j"] == pytest.approx(70.0)
    assert st.aggregated["j"]["r"] == pytest.approx(40.0)
    assert st.aggregation_ratio("j", "r") == pytest.approx(40 / 70)
    assert st.residual[access("s3")] == pytest.approx(0.0, abs=1e-9)
    assert st.rounds == 2 and not st.bound_hit


def test_vector_2_two_identical_jobs_share_the_pat():
    """δ = 40/2 = 20, then 80/2 = 40: each job at 60 with 20 aggregated (Fig. 14b's y = 0.5x)."""
    f = fabric({"r": ["s1", "s2", "s3", "s4", "s5", "s6"]}, {"r": 40.0})
    st = waterfill(f, [NetJob("a", ("s1", "s2"), "s3", frozenset({"r"})),
                       NetJob("b", ("s4", "s5"), "s6", frozenset({"r"}))])
    for j in ("a", "b"):
        assert st.rate[j] == pytest.approx(60.0) and st.aggregated[j]["r"] == pytest.approx(20.0)


@pytest.mark.parametrize("pat1, rate", [(30.0, 65.0), (0.0, 50.0)])
def test_vector_3_two_racks(pat1, rate):
    """Workers a1 (rack 0), b1 and b2 (rack 1), PS on a3 (rack 0), PAT_0 = 50, PAT_1 = 30: δ = 30,
    20, 15, rate 65, both uplinks full, 5 left on a3's link; with PAT_1 = 0, rate 50."""
    f = fabric({"r0": ["a1", "a2", "a3"], "r1": ["b1", "b2", "b3"]}, {"r0": 50.0, "r1": pat1})
    st = waterfill(f, [NetJob("j", ("a1", "b1", "b2"), "a3", frozenset({"r0", "r1"}))])
    assert st.rate["j"] == pytest.approx(rate)
    if pat1:
        assert st.residual[uplink("r0")] == pytest.approx(0, abs=1e-9)
        assert st.residual[uplink("r1")] == pytest.approx(0, abs=1e-9)
        assert st.residual[access("a3")] == pytest.approx(5.0)
        assert st.rounds == 3


# Fig. 5: the PS rack holds 2 workers and the PS, three leaf racks 2 workers each;
# A_1 < A_p < A_3 < A_4. FC: flows arriving at the PS's ToR from the network; FS: on the PS's link.
FIG5_RACKS = {"p": ["p1", "p2", "ps"], "l1": ["x1", "x2"], "l3": ["y1", "y2"], "l4": ["z1", "z2"]}
FIG5_JOB = NetJob("j", ("p1", "p2", "x1", "x2", "y1", "y2", "z1", "z2"), "ps", frozenset(FIG5_RACKS))


@pytest.mark.parametrize("exhausted, fc, fs", [
    ((), 3, 1),                      # C < A_1
    (("l1",), 4, 1),                 # A_1 < C < A_p
    (("l1", "p"), 4, 6),             # A_p < C < A_3: 2 local + 4
    (("l1", "p", "l3"), 5, 7),       # A_3 < C < A_4
    (("l1", "p", "l3", "l4"), 6, 8),  # C > A_4
])
def test_fig5_flow_counts(exhausted, fc, fs):
    f = fabric(FIG5_RACKS, {r: 1.0 for r in FIG5_RACKS})
    flows = job_flows(f, FIG5_JOB, {r: 0.0 if r in exhausted else 1.0 for r in FIG5_RACKS})
    assert flows.flows[uplink("p")] == fc and flows.flows[access("ps")] == fs
    assert flows.aggregating == set(FIG5_RACKS) - set(exhausted)
    assert flows.fan_in["p"] == 2 + fc and flows.fan_in["l1"] == 2


def test_fig5_swept_by_the_water_filling_ends_with_every_pat_used_in_order():
    """The same job on the water-filling, PATs 10 < 20 < 30 < 40 (l1, p, l3, l4), links large:
    the PATs run out in that order, each at the rate it equals."""
    f = fabric(FIG5_RACKS, {"l1": 10.0, "p": 20.0, "l3": 30.0, "l4": 40.0}, link=1000.0, up=1000.0)
    st = waterfill(f, [FIG5_JOB])
    for r, pat in (("l1", 10.0), ("p", 20.0), ("l3", 30.0), ("l4", 40.0)):
        assert st.aggregated["j"][r] == pytest.approx(pat)
    assert st.flows["j"].flows[access("ps")] == 8


def test_a_tor_with_one_child_does_not_aggregate_and_spends_no_pat():
    f = fabric({"r0": ["a1", "a2"], "r1": ["b1"]}, {"r0": 10.0, "r1": 10.0})
    st = waterfill(f, [NetJob("j", ("a1", "b1"), "a2", frozenset({"r0", "r1"}))])
    assert "r1" not in st.aggregated["j"]  # b1 alone under r1
    assert st.aggregated["j"]["r0"] == pytest.approx(10.0)  # a1 and b1's flow meet at r0


def _random_case(rnd: random.Random):
    racks = {f"r{i}": [f"s{i}_{k}" for k in range(rnd.randint(2, 4))] for i in range(rnd.randint(1, 4))}
    servers = [s for ss in racks.values() for s in ss]
    pat = {r: rnd.choice([0.0, 5.0, 30.0, 1e9]) for r in racks}
    f = Fabric({s: r for r, ss in racks.items() for s in ss}, {s: rnd.choice([40.0, 100.0]) for s in servers},
               {r: rnd.choice([50.0, 200.0]) for r in racks}, pat)
    jobs = []
    for j in range(rnd.randint(1, 5)):
        ws = tuple(rnd.sample(servers, rnd.randint(2, min(4, len(servers)))))
        jobs.append(NetJob(f"j{j}", ws, rnd.choice(servers), frozenset(r for r in racks if rnd.random() < 0.7)))
    return f, jobs


@pytest.mark.parametrize("seed", range(40))
def test_properties_on_random_clusters(seed):
    """No link over capacity; every job touches a saturated link; no PAT overspent; the aggregated
    part of a job never exceeds its rate."""
    f, jobs = _random_case(random.Random(seed))
    st = waterfill(f, jobs)
    assert not st.bound_hit
    cap = f.links()
    for link, left in st.residual.items():
        assert -1e-9 <= left <= cap[link] + 1e-9
    for j in jobs:
        assert any(st.residual[link] <= 1e-6 for link, k in st.flows[j.name].flows.items() if k), j
        assert sum(st.aggregated[j.name].values()) <= len(f.racks) * st.rate[j.name] + 1e-9
        for a in st.aggregated[j.name].values():
            assert a <= st.rate[j.name] + 1e-9
    for r in f.racks:
        assert st.pat_left[r] >= -1e-9


def test_with_no_pat_it_is_classic_max_min_and_with_infinite_pat_one_flow_per_job():
    f = fabric({"r": ["s1", "s2", "s3"]}, {"r": 0.0})
    st = waterfill(f, [NetJob("j", ("s1", "s2"), "s3", frozenset({"r"}))])
    assert st.rate["j"] == pytest.approx(50.0)  # the PS link carries both workers' flows
    f = fabric({"r": ["s1", "s2", "s3"]}, {"r": 1e12})
    st = waterfill(f, [NetJob("j", ("s1", "s2"), "s3", frozenset({"r"}))])
    assert st.rate["j"] == pytest.approx(100.0) and st.flows["j"].flows[access("s3")] == 1


def test_the_round_bound_is_reported_not_looped():
    f, jobs = _random_case(random.Random(3))
    st = waterfill(f, jobs, max_rounds=1)
    assert st.bound_hit and st.rounds == 1


def test_bad_fabrics_are_refused_in_one_line():
    with pytest.raises(PlacementError, match="no capacity given for r9"):
        Fabric({"s1": "r9"}, {"s1": 1.0}, {}, {})
    with pytest.raises(PlacementError, match="no servers"):
        Fabric({}, {}, {}, {})
    with pytest.raises(PlacementError, match="negative"):
        Fabric({"s1": "r"}, {"s1": -1.0}, {"r": 1.0}, {"r": 0.0})


def test_a_fabric_from_the_topology_sums_each_tor_s_uplinks():
    from topo.leaf_spine import leaf_spine

    g = leaf_spine(n_leaf=2, n_spine=2, hosts_per_leaf=4, host_bw_mbps=10000, oversubscription=2)
    f = Fabric.from_graph(g, 5.0)
    assert f.access_gbps["h1"] == 10.0 and f.rack_of["h5"] == "l2"
    assert f.uplink_gbps["l1"] == pytest.approx(4 * 10.0 / 2)
    assert f.pat_gbps == {"l1": 5.0, "l2": 5.0}


def test_with_ps_loopback_a_worker_on_the_ps_server_uses_no_network():
    """Workers s1 and s2, PS on s1, PAT 40. The paper's model: s1's link carries s1's flow and the
    PS's, s2's flow and s1's meet at the ToR (fan-in 2: it aggregates). With ps_loopback, as in this
    testbed's fabric: s1 reaches its PS over loopback, the ToR has one child and sums nothing, and
    each link carries one flow."""
    f = fabric({"r": ["s1", "s2", "s3"]}, {"r": 40.0})
    job = NetJob("j", ("s1", "s2"), "s1", frozenset({"r"}))
    paper = job_flows(f, job, {"r": 40.0})
    assert paper.flows[access("s1")] == 2 and paper.aggregating == {"r"} and paper.fan_in["r"] == 2
    local = job_flows(f, job, {"r": 40.0}, ps_loopback=True)
    assert local.flows == {access("s2"): 1, access("s1"): 1} and not local.aggregating and local.fan_in["r"] == 1
    st = waterfill(f, [job], ps_loopback=True)
    assert st.rate["j"] == pytest.approx(100.0) and not st.aggregated["j"]


def test_the_fabric_takes_its_pat_from_the_topologys_switches():
    """An experiment sets each INA switch's PAT on the graph (ina.pat_gbps): a fabric without a PAT of
    its own reads it (0 on a ToR without one), and the paper's 1 Tb/s where no switch has one."""
    from experiment.config.schema import from_dict, validate
    from placement.netpack.network import DEFAULT_PAT_GBPS, PAT_ATTRIBUTE

    g = build_topology("leaf_spine", n_leaf=2, n_spine=1, hosts_per_leaf=2)
    assert Fabric.from_graph(g).pat_gbps == {"l1": DEFAULT_PAT_GBPS, "l2": DEFAULT_PAT_GBPS}
    g.nodes["l1"][PAT_ATTRIBUTE] = 7.0
    assert Fabric.from_graph(g).pat_gbps == {"l1": 7.0, "l2": 0.0}
    assert Fabric.from_graph(g, 3.0).pat_gbps == {"l1": 3.0, "l2": 3.0}
    cfg = from_dict({"topology": {"kind": "leaf_spine", "n_leaf": 2, "n_spine": 1, "hosts_per_leaf": 2},
                     "jobs": [{"name": "a", "model": "resnet50", "workers": 2, "collective": "ina"}],
                     "ina": {"pat_gbps": 42, "switches": ["l2"]}})
    assert Fabric.from_graph(validate(cfg)).pat_gbps == {"l1": 0.0, "l2": 42.0}
