"""The NetPack paper's baselines (spec netpack.md §4): each ranking rule on an exact small cluster,
the fewest-flows PS rule, several jobs in one call, waiting, spec strings and a topology graph."""

from __future__ import annotations

import pytest

from common.errors import PlacementError
from placement import Cluster, GpuSlot, JobRequest, MachineInfo, Placement, make_policy
from placement.netpack.baselines import (
    CallState,
    CombPolicy,
    FlowBalancePolicy,
    GpuBalancePolicy,
    LeastFragmentationPolicy,
    OptimusPolicy,
    TetrisPolicy,
)
from placement.netpack.network import Fabric, access
from placement.netpack.state import Decision
from topo import fat_tree

BASELINES = {
    "gpu_balance": GpuBalancePolicy,
    "flow_balance": FlowBalancePolicy,
    "least_fragmentation": LeastFragmentationPolicy,
    "optimus": OptimusPolicy,
    "tetris": TetrisPolicy,
    "comb": CombPolicy,
}


def make_cluster(rows: list[tuple[str, int, int, str]]) -> Cluster:
    """A cluster from ``(name, gpus, busy_gpus, rack)`` rows (no graph: uniform 100 Gbit/s links)."""
    cluster = Cluster([MachineInfo(name, gpus, rack=rack, pod="p0") for name, gpus, _, rack in rows])
    cluster.set_background({name: busy for name, _, busy, _ in rows if busy})
    return cluster


def four_by_two() -> Cluster:
    """Four idle 2-GPU machines h0..h3 in one rack."""
    return make_cluster([(f"h{i}", 2, 0, "r0") for i in range(4)])


def job(name: str, workers: int) -> JobRequest:
    """A job with a fixed model, for brevity."""
    return JobRequest(name, "resnet50", workers)


def gpus(*pairs: tuple[str, int]) -> tuple[GpuSlot, ...]:
    """Slots from ``(machine, gpu)`` pairs, in rank order."""
    return tuple(GpuSlot(m, g) for m, g in pairs)


def start(policy, cluster: Cluster, *jobs: JobRequest) -> list[Placement]:
    """Place ``jobs`` with ``policy`` and apply the placements (they are running afterwards)."""
    placements = policy.place(list(jobs), cluster.view())
    for p in placements:
        cluster.apply(p)
    return placements


def call_state(policy, cluster: Cluster) -> CallState:
    """The state a call of ``policy`` would decide over on ``cluster``."""
    view = cluster.view()
    fabric = Fabric.from_view(view, policy.pat_gbps)
    return CallState(view, fabric, policy.decisions.running(view, fabric))


def comb_cluster() -> Cluster:
    """Racks r0 = h0 (2 GPUs), h1 (4), h2 (2) and r1 = h3 (4), h4 (2), h5 (2); job x runs on h0 and
    h3 (2 GPUs each) with no recorded decision, so its PS is on h0 (state.py's default).

    Its steady state: r1 has fan-in 1 (no aggregation), r0 aggregates h0's worker and r1's flow, so
    h0's link carries 2 flows (worker + PS): rate 50, h0's link full, h3's half used, PAT r0 950 left.
    """
    cluster = make_cluster([("h0", 2, 0, "r0"), ("h1", 4, 0, "r0"), ("h2", 2, 0, "r0"),
                            ("h3", 4, 0, "r1"), ("h4", 2, 0, "r1"), ("h5", 2, 0, "r1")])
    cluster.apply(Placement("x", gpus(("h0", 0), ("h0", 1), ("h3", 0), ("h3", 1))))
    return cluster


@pytest.mark.parametrize("key", list(BASELINES))
def test_registered_under_their_names(key):
    """Each baseline is registered under its key and builds from its spec string."""
    assert BASELINES[key].name == key
    assert type(make_policy(key)) is BASELINES[key]


def test_gpu_balance_and_least_fragmentation_pick_different_servers():
    """GB takes the server with the most free GPUs; LF packs onto the most used one, skipping full ones."""
    rows = [("h0", 4, 2, "r0"), ("h1", 4, 0, "r0"), ("h2", 4, 3, "r1"), ("h3", 4, 4, "r1")]
    gb = make_policy("gpu_balance").place([job("a", 2)], make_cluster(rows).view())
    assert gb == [Placement("a", gpus(("h1", 0), ("h1", 1)))]
    lf = make_policy("least_fragmentation").place([job("a", 2)], make_cluster(rows).view())
    # h3 (4 used, full) is skipped; h2 (3 used) then h0 (2 used); the PS on the first flowless server.
    assert lf == [Placement("a", gpus(("h2", 3), ("h0", 2)), ps_host="h1")]


def test_gpu_balance_fills_in_rank_order():
    """GB fills the freest server, then the next: ranks grouped by server, lowest GPU indices first."""
    rows = [("h0", 4, 2, "r0"), ("h1", 4, 0, "r0"), ("h2", 4, 3, "r1")]
    [p] = make_policy("gpu_balance").place([job("a", 5)], make_cluster(rows).view())
    assert p.slots == gpus(("h1", 0), ("h1", 1), ("h1", 2), ("h1", 3), ("h0", 2))
    assert p.ps_host == "h2"


def test_flow_balance_avoids_a_running_jobs_servers():
    """FB puts a job on the server without flows, not on the running job's PS server that GB picks."""
    cluster = four_by_two()
    fb = make_policy("flow_balance")
    [a] = start(fb, cluster, job("a", 4))
    assert (a.machines, a.ps_host) == (("h0", "h1"), "h2")
    assert fb.place([job("b", 1)], cluster.view()) == [Placement("b", gpus(("h3", 0)))]
    assert make_policy("gpu_balance").place([job("b", 1)], cluster.view())[0].slots == gpus(("h2", 0))
    # A fresh FB has no record of a's PS, so it assumes the default (a's first server, h0): h2 looks free.
    assert make_policy("flow_balance").place([job("b", 1)], cluster.view())[0].slots == gpus(("h2", 0))


def test_optimus_deals_round_robin_over_the_smallest_covering_prefix():
    """Free 4, 3, 2, 2: 6 GPUs need the first two servers; Optimus alternates them, GB fills h0 first."""
    rows = [("h0", 4, 0, "r0"), ("h1", 4, 1, "r0"), ("h2", 4, 2, "r1"), ("h3", 4, 2, "r1")]
    [p] = make_policy("optimus").place([job("a", 6)], make_cluster(rows).view())
    assert p.slots == gpus(("h0", 0), ("h1", 1), ("h0", 1), ("h1", 2), ("h0", 2), ("h1", 3))
    assert p.ps_host == "h2"
    [g] = make_policy("gpu_balance").place([job("a", 6)], make_cluster(rows).view())
    assert g.slots == gpus(("h0", 0), ("h0", 1), ("h0", 2), ("h0", 3), ("h1", 1), ("h1", 2))


def test_optimus_caps_the_deal_by_free_gpus():
    """A prefix server with one free GPU gets one; the rest of the deal goes to the servers with room."""
    rows = [("h0", 4, 0, "r0"), ("h1", 4, 3, "r0"), ("h2", 4, 3, "r0")]
    [p] = make_policy("optimus").place([job("a", 5)], make_cluster(rows).view())
    assert p.slots == gpus(("h0", 0), ("h1", 3), ("h0", 1), ("h0", 2), ("h0", 3))


def test_tetris_prefers_residual_bandwidth_when_gpus_tie():
    """h2 (the running job's PS, its link full) and h3 (idle link) both have 2 free GPUs: Tetris takes h3."""
    cluster = four_by_two()
    tetris = make_policy("tetris")
    [a] = start(tetris, cluster, job("a", 4))
    assert (a.machines, a.ps_host) == (("h0", "h1"), "h2")
    state = call_state(tetris, cluster)
    steady = state.steady()
    assert steady.residual[access("h2")] == pytest.approx(0.0, abs=1e-9)
    assert tetris.score(job("b", 2), "h2", state, steady) == pytest.approx(1.0)
    assert tetris.score(job("b", 2), "h3", state, steady) == pytest.approx(2.0)
    assert tetris.place([job("b", 2)], cluster.view()) == [Placement("b", gpus(("h3", 0), ("h3", 1)))]
    assert make_policy("gpu_balance").place([job("b", 2)], cluster.view())[0].machines == ("h2",)


def test_tetris_score_is_the_alignment_dot_product():
    """On h3 (G = 4, 2 free, link half used) a 2-GPU job scores (2/4)(2/4) + 50/100 = 0.75."""
    cluster = comb_cluster()
    tetris = TetrisPolicy()
    state = call_state(tetris, cluster)
    assert tetris.score(job("y", 2), "h3", state, state.steady()) == pytest.approx(0.75)
    assert tetris.score(job("y", 8), "h1", state, state.steady()) == pytest.approx(2.0)


def test_comb_ranks_lexicographically():
    """Free GPUs first (h1), then the ToR's PAT left (r1's idle ToR before r0's, even for h3 whose link
    is half used), then the residual bandwidth (h4, h5 before h3)."""
    cluster = comb_cluster()
    comb = CombPolicy()
    state = call_state(comb, cluster)
    steady = state.steady()
    assert steady.pat_left == pytest.approx({"r0": 950.0, "r1": 1000.0})
    assert steady.residual[access("h3")] == pytest.approx(50.0)
    assert comb.rank(job("y", 8), state) == ["h1", "h4", "h5", "h3", "h2", "h0"]
    [p] = comb.place([job("y", 8)], cluster.view())
    assert p.machines == ("h1", "h4", "h5")
    # Flows: h0 2 (x's worker and PS), h3 1; with y's workers counted, h2 is the first with none.
    assert p.ps_host == "h2"


def test_ps_on_the_fewest_flows_server_ties_by_order():
    """The PS goes on the fewest-flows server, lowest index on ties, even a full server without workers."""
    cluster = four_by_two()
    gb = make_policy("gpu_balance")
    [a] = start(gb, cluster, job("a", 4))
    assert (a.machines, a.ps_host) == (("h0", "h1"), "h2")
    [b] = gb.place([job("b", 4)], cluster.view())
    # Flows after counting b's workers: h0 1, h1 1, h2 2 (a's PS + b's worker), h3 1.
    assert (b.machines, b.ps_host) == (("h2", "h3"), "h0")


def test_ps_may_share_a_server_with_the_jobs_workers():
    """When every other server has more flows, the PS lands on one of the job's own worker servers."""
    cluster = make_cluster([("h0", 4, 0, "r0"), ("h1", 4, 0, "r0"), ("h2", 1, 0, "r0"), ("h3", 1, 0, "r0")])
    for name, first in (("x", 0), ("z", 2)):
        cluster.apply(Placement(name, gpus(("h0", first), ("h0", first + 1), ("h1", first), ("h1", first + 1))))
    [y] = make_policy("gpu_balance").place([job("y", 2)], cluster.view())
    # x and z have their PS on h0 (no record: their first server): h0 4 flows, h1 2, then h2 1, h3 1.
    assert (y.machines, y.ps_host) == (("h2", "h3"), "h2")


@pytest.mark.parametrize("key", list(BASELINES))
def test_single_server_job_has_no_ps_and_ina_everywhere(key):
    """A job on one server has no PS; every placement leaves INA to the run (None: on at every switch)."""
    policy = make_policy(key)
    [p] = policy.place([job("a", 2)], four_by_two().view())
    assert (len(p.machines), p.ps_host, p.ina_switches) == (1, None, None)
    assert policy.decisions.get("a") == Decision(None, frozenset({"r0"}))


@pytest.mark.parametrize("key", list(BASELINES))
def test_decision_recorded_with_every_rack(key):
    """A multi-server job's decision is remembered: its PS and INA on at every rack."""
    cluster = make_cluster([(f"h{i}", 2, 0, f"r{i // 2}") for i in range(4)])
    policy = make_policy(key)
    [p] = policy.place([job("a", 4)], cluster.view())
    assert p.ps_host is not None and p.ina_switches is None
    assert policy.decisions.get("a") == Decision(p.ps_host, frozenset({"r0", "r1"}))


def test_jobs_of_one_call_share_no_gpu_and_see_each_others_flows():
    """FB in one call: b avoids a's PS server h2; c, after b's single-server job (no flows), takes h3's
    other GPU."""
    placements = make_policy("flow_balance").place([job("a", 4), job("b", 1), job("c", 1)], four_by_two().view())
    assert placements == [
        Placement("a", gpus(("h0", 0), ("h0", 1), ("h1", 0), ("h1", 1)), ps_host="h2"),
        Placement("b", gpus(("h3", 0))),
        Placement("c", gpus(("h3", 1))),
    ]


@pytest.mark.parametrize("key", ["tetris", "comb"])
def test_steady_state_counts_the_calls_earlier_jobs(key):
    """Placing a and b in one call gives what placing a, running it, then b gives: the water-filling
    is re-run with the call's earlier jobs, so b sees h2's full link (a's PS) and takes h3."""
    together = make_policy(key).place([job("a", 4), job("b", 2)], four_by_two().view())
    cluster = four_by_two()
    policy = make_policy(key)
    one_by_one = start(policy, cluster, job("a", 4)) + policy.place([job("b", 2)], cluster.view())
    assert together == one_by_one
    assert together[1].machines == ("h3",)


@pytest.mark.parametrize("key", list(BASELINES))
def test_a_job_that_does_not_fit_waits(key):
    """With 3 free GPUs a 4-GPU job waits and a later 2-GPU job starts; strict_order stops at the first."""
    rows = [("h0", 2, 1, "r0"), ("h1", 2, 0, "r0")]
    placements = make_policy(key).place([job("big", 4), job("small", 2)], make_cluster(rows).view())
    assert [p.job for p in placements] == ["small"]
    strict = make_policy(f"{key},strict_order=true").place([job("big", 4), job("small", 2)],
                                                           make_cluster(rows).view())
    assert strict == []


def test_pat_is_a_spec_key_of_tetris_and_comb_only():
    """pat_gbps comes from the spec string (Gbit/s), is checked, and is not a key of the other baselines."""
    assert make_policy("tetris,pat_gbps=500").pat_gbps == 500.0
    assert make_policy("comb").pat_gbps is None  # the topology's
    with pytest.raises(PlacementError, match="pat_gbps"):
        make_policy("comb,pat_gbps=-1")
    with pytest.raises(PlacementError, match="pat_gbps"):
        make_policy("gpu_balance,pat_gbps=1")


@pytest.mark.parametrize("key", list(BASELINES))
def test_baselines_run_on_a_topology_graph(key):
    """On a fat-tree (its own link capacities), two calls place valid jobs with a PS exactly when multi-server."""
    cluster = Cluster.from_topology(fat_tree(4))
    cluster.set_background({"h1": 3, "h2": 2, "h6": 3})
    policy = make_policy(key)
    placements = start(policy, cluster, job("a", 8), job("b", 4), job("c", 6))
    placements += start(policy, cluster, job("d", 7))
    assert [p.job for p in placements] == ["a", "b", "c", "d"]
    for p in placements:
        assert (p.ps_host is not None) == (len(p.machines) > 1)
