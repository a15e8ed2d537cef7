"""Titan (placement/titan.py, placement/titan_patterns.py) against docs/resolutions.md (Titan).

Covers the communication patterns (§1.3), the traffic quantities (§1.4), the worked examples of
§5 (with EF-F and HiveD-F of §3.1/§3.2 written here as small local helpers, rank-order mapping of
§3.4), REFINE/PACK building blocks, the C3 bandwidth mode, the paper variant, and a property test
against an exhaustive oracle on seeded tiny clusters.

On a wider seeded family than the property test uses (K in {4, 8}, 2-4 machines, p <= 8, HD in
both labellings and ring, 1194 runs over gamma in {inf, 1, 0}) Titan-R's (O1, O2) always matched
the oracle's; X was above the oracle's in 3 runs (HD p = 7 with fold-in, local minima of REFINE),
one of which missed a budget that another mapping meets — in line with the spec's own validation
(§2.4.6: 757/759 exact).
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from common.errors import JobError, PlacementError
from common.units import mbps_to_bytes_per_s
from jobs.patterns import pattern as transfer_pattern
from placement import Cluster, JobRequest, MachineInfo, make_policy
from placement.metrics import used_machines
from placement.titan import (
    MachineState,
    TitanParams,
    TitanPolicy,
    pack,
    refine,
    select_idle,
    titan_paper,
    titan_r,
)
from placement.titan_patterns import (
    agglomerative_tree,
    allreduce_time_s,
    block_tree,
    chain_tree,
    comm_pattern,
    cross_traffic_bytes,
    hd_steps,
    machine_pair_volumes,
    nic_egress_bytes,
    pair_steps_from_transfers,
    ring_steps,
    ring_trees,
    tree_steps,
)
from topo import build_topology

M = 1024.0  # a power of two keeps every HD volume exact


# ---------------------------------------------------------------------------------------------
# helpers


def states(free: list[int], k: int, racks: list[str] | None = None) -> list[MachineState]:
    """Machines M1..Mn with the given free GPUs (names 1-based like the paper)."""
    racks = racks or ["r0"] * len(free)
    return [MachineState(f"M{i + 1}", f, k, racks[i], i) for i, f in enumerate(free)]


def ef_f(free: list[int], k: int, p: int, pow2_round: bool = True) -> list[str] | None:
    """EF-F (§3.1) on one rack: best-fit single machine, else ceil(g/K) idle machines, rank order."""
    g = 2 ** math.ceil(math.log2(p)) if pow2_round else p
    if g <= k:
        fits = [i for i, f in enumerate(free) if f >= g]
        return [f"M{min(fits, key=lambda i: (free[i], i)) + 1}"] * p if fits else None
    idle = [i for i, f in enumerate(free) if f == k][: math.ceil(g / k)]
    if len(idle) < math.ceil(g / k):
        return None
    return [f"M{idle[w // k] + 1}" for w in range(p)]


def hived_f(free: list[int], k: int, p: int) -> list[str] | None:
    """HiveD-F (§3.2): fill fragments exactly (largest that fits, else smallest), then idle machines."""
    if sum(free) < p:
        return None
    r, out = p, []
    frag = [i for i, f in enumerate(free) if 1 <= f < k]
    while r > 0 and frag:
        fits = [i for i in frag if free[i] <= r]
        s = max(fits, key=lambda i: (free[i], -i)) if fits else min(frag, key=lambda i: (free[i], i))
        t = min(free[s], r)
        out += [f"M{s + 1}"] * t
        r -= t
        frag.remove(s)
    for i in (i for i, f in enumerate(free) if f == k):
        if r <= 0:
            break
        out += [f"M{i + 1}"] * min(k, r)
        r -= min(k, r)
    return out


def oracle(pat, ms: list[MachineState], budget_bytes: float = math.inf):
    """Exhaustive lexicographic minimum of (O1, O2, X/M) over capacity-respecting maps with X <= budget."""
    best = None
    for a in itertools.product(range(len(ms)), repeat=pat.p):
        if any(a.count(i) > m.free for i, m in enumerate(ms)):
            continue
        x = cross_traffic_bytes(pat, a)
        if x > budget_bytes * (1 + 1e-9):
            continue
        used = set(a)
        key = (sum(1 for i in used if ms[i].idle), len(used), round(x / pat.size_bytes, 9))
        best = key if best is None or key < best else best
    return best


def fig1_cluster() -> Cluster:
    """§5.1: 4 machines x 4 GPUs, busy (0, 1, 2, 3)."""
    cluster = Cluster([MachineInfo(f"M{i}", 4, rack="r0", pod="p0") for i in range(1, 5)])
    cluster.set_background({"M2": 1, "M3": 2, "M4": 3})
    return cluster


# ---------------------------------------------------------------------------------------------
# §1.3 patterns


def test_hd_paper_labelling_reproduces_fig1a_table():
    """HD p=4 in the paper labelling has the pairs and per-pair volumes of the §1.3.1 table."""
    steps = hd_steps(4, M, "paper")
    assert steps == [
        {(0, 2): M / 2, (1, 3): M / 2},
        {(0, 1): M / 4, (2, 3): M / 4},
        {(0, 1): M / 4, (2, 3): M / 4},
        {(0, 2): M / 2, (1, 3): M / 2},
    ]


@pytest.mark.parametrize("p", range(2, 17))
def test_hd_gloo_labelling_matches_the_executed_transfers(p):
    """HD in gloo labelling (incl. fold-in) equals jobs.patterns' byte-exact transfers, as pair volumes."""
    size = 4 * 1024  # 1024 float32 elements split evenly into p' <= 16 blocks
    assert pair_steps_from_transfers(transfer_pattern("hd", p, size)) == hd_steps(p, size, "gloo")


@pytest.mark.parametrize("p", range(2, 9))
def test_ring_matches_the_executed_transfers(p):
    """Ring C^t equals jobs.patterns' transfers (840 elements split evenly for every p <= 8)."""
    size = 4 * 840
    assert pair_steps_from_transfers(transfer_pattern("ring", p, size)) == ring_steps(p, size)


@pytest.mark.parametrize("labelling", ["gloo", "paper"])
@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_hd_sends_the_bandwidth_optimal_amount(labelling, p):
    """Every HD worker sends 2M(p-1)/p in total (§5.4: p=4 gives 1.5M)."""
    sent = [0.0] * p
    for step in hd_steps(p, M, labelling):
        for (a, b), vol in step.items():
            sent[a] += vol
            sent[b] += vol
    assert sent == [2 * M * (p - 1) / p] * p


@pytest.mark.parametrize("p", [4, 8, 16])
def test_hd_labellings_are_bit_reversal_relabelings(p):
    """The paper labelling is the gloo labelling with ranks bit-reversed (§1.3.1)."""
    k = p.bit_length() - 1

    def rev(r):
        return int(format(r, f"0{k}b")[::-1], 2)

    gloo = hd_steps(p, M, "gloo")
    relabelled = [{tuple(sorted((rev(a), rev(b)))): v for (a, b), v in s.items()} for s in gloo]
    assert relabelled == hd_steps(p, M, "paper")


def test_hd_fold_in_steps():
    """HD p=6: fold-in step (4->0, 5->1, M), 2·log2(4) HD steps, fold-out step (§1.3.2)."""
    steps = hd_steps(6, M, "gloo")
    assert len(steps) == 2 * 2 + 2
    assert steps[0] == steps[-1] == {(0, 4): M, (1, 5): M}
    assert steps[1] == {(0, 1): M / 2, (2, 3): M / 2}


def test_tree_steps_reduce_then_broadcast():
    """Binary tree p=6: two reduce levels (3,4->1; 5->2; then 1,2->0), mirrored broadcast (§1.3.4)."""
    steps = tree_steps(6, M)
    assert steps == [{(1, 3): M, (1, 4): M, (2, 5): M}, {(0, 1): M, (0, 2): M},
                     {(0, 1): M, (0, 2): M}, {(1, 3): M, (1, 4): M, (2, 5): M}]
    assert len(tree_steps(8, M)) == 2 * 3


def test_ring_two_ranks_each_way():
    """Ring p=2: the pair carries M/2 each way per step, 2 steps (§1.3.3)."""
    assert ring_steps(2, M) == [{(0, 1): M / 2}, {(0, 1): M / 2}]


def test_unknown_collective_and_labelling_are_rejected():
    """Unknown pattern names fail with the valid choices listed."""
    with pytest.raises(JobError, match="valid: gloo, hd, ring, tree"):
        comm_pattern("butterfly", 4, M)
    with pytest.raises(JobError, match="labelling"):
        comm_pattern("hd", 4, M, labelling="reverse")


def test_gloo_collective_is_modelled_as_ring():
    """The gloo collective (not modelled by jobs.patterns) gets the ring pattern."""
    assert comm_pattern("gloo", 5, M).steps == comm_pattern("ring", 5, M).steps


# ---------------------------------------------------------------------------------------------
# §1.4 quantities and §5.4 micro-vectors


@pytest.mark.parametrize("p,labelling,expected", [
    (8, "gloo", 1.0), (8, "paper", 4.0), (16, "gloo", 1.0), (16, "paper", 8.0)])
def test_contiguous_halves_cross_traffic(p, labelling, expected):
    """§5.4: HD split into contiguous halves costs M (gloo) and p/2·M (paper)."""
    pat = comm_pattern("hd", p, M, labelling)
    assert cross_traffic_bytes(pat, [r // (p // 2) for r in range(p)]) == expected * M


def test_ring_split_cross_traffic():
    """§5.4: ring p=4 split {0,1}|{2,3} cuts 2 edges x 6 steps x M/4 = 3M."""
    assert cross_traffic_bytes(comm_pattern("ring", 4, M), [0, 0, 1, 1]) == 3 * M


def test_fig1_pair_volumes_egress_and_nic_time():
    """§5.1: per-step machine-pair volumes, X and the NIC-time model of HiveD's and Titan's placements."""
    pat = comm_pattern("hd", 4, M, "paper")
    hived, titan = ["M2", "M2", "M2", "M4"], ["M2", "M3", "M2", "M3"]
    assert [v.get(("M2", "M4"), 0) for v in machine_pair_volumes(pat, hived)] == [M / 2, M / 4, M / 4, M / 2]
    assert [v.get(("M2", "M3"), 0) for v in machine_pair_volumes(pat, titan)] == [0, M / 2, M / 2, 0]
    assert cross_traffic_bytes(pat, hived) == 1.5 * M and cross_traffic_bytes(pat, titan) == M
    assert nic_egress_bytes(pat, titan)[1] == {"M2": M / 2, "M3": M / 2}
    b = mbps_to_bytes_per_s(100_000.0)
    assert allreduce_time_s(pat, hived, 100_000.0) == pytest.approx(1.5 * M / b)
    assert allreduce_time_s(pat, titan, {"M2": 100_000.0, "M3": 100_000.0}) == pytest.approx(M / b)
    assert allreduce_time_s(pat, titan, 100_000.0, alpha_s=1e-3) == pytest.approx(M / b + 2e-3)


# ---------------------------------------------------------------------------------------------
# §2.4.2 block tree, PACK, REFINE


@pytest.mark.parametrize("labelling", ["gloo", "paper"])
@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_hd_closed_form_tree_equals_agglomerative(labelling, p):
    """The HD closed-form block tree equals agglomerative clustering on w (§2.4.2)."""
    pat = comm_pattern("hd", p, M, labelling)
    assert block_tree(pat) == agglomerative_tree(pat)


def test_hd_closed_form_tree_shapes():
    """HD p=4: gloo splits {0,1}|{2,3}, paper splits even|odd; fold-in glues rank p'+i to rank i."""
    assert [b.ranks for b in block_tree(comm_pattern("hd", 4, M)).children] == [(0, 1), (2, 3)]
    assert [b.ranks for b in block_tree(comm_pattern("hd", 4, M, "paper")).children] == [(0, 2), (1, 3)]
    assert [b.ranks for b in block_tree(comm_pattern("hd", 6, M)).children] == [(0, 1, 4, 5), (2, 3)]


def test_pack_first_fit_with_splitting():
    """PACK puts whole blocks on the first machine with room and splits only when none has."""
    tree = block_tree(comm_pattern("hd", 8, M))
    assert pack(tree, [8, 8]) == [0] * 8
    assert pack(tree, [6, 5]) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert pack(tree, [3, 5]) == [1, 1, 1, 1, 0, 0, 0, 1]
    with pytest.raises(PlacementError):
        pack(tree, [3, 4])


def test_refine_swap_fixes_a_bad_split():
    """REFINE's single best swap turns an interleaved HD split (2M) into an aligned one (M)."""
    nbrs = comm_pattern("hd", 4, M).neighbours()
    out = refine([0, 1, 0, 1], [2, 2], nbrs, passes=1, swaps=True)
    assert out == [1, 1, 0, 0]  # ties: smallest worker id first (swap 0<->3 before 1<->2)


@pytest.mark.parametrize("seed", range(20))
def test_refine_never_increases_traffic_or_opens_machines(seed):
    """From random starts, REFINE never raises X, respects capacity and uses no new machine."""
    rng = random.Random(seed)
    p = rng.randint(2, 12)
    pat = comm_pattern(rng.choice(["hd", "ring", "tree"]), p, M, rng.choice(["gloo", "paper"]))
    caps = [rng.randint(1, 6) for _ in range(4)]
    caps[0] += max(0, p - sum(caps))
    start = pack(block_tree(pat), caps)
    rng.shuffle(start)
    out = refine(start, caps, pat.neighbours(), passes=20, swaps=True)
    assert cross_traffic_bytes(pat, out) <= cross_traffic_bytes(pat, start) + 1e-9
    assert set(out) <= set(start)
    assert all(out.count(i) <= c for i, c in enumerate(caps))


@pytest.mark.parametrize("seed", range(20))
def test_refine_step_is_the_best_single_move_or_swap(seed):
    """One REFINE pass reaches the lowest X over all single moves and swaps (checks its gain formulas)."""
    rng = random.Random(100 + seed)
    p = rng.randint(3, 10)
    pat = comm_pattern(rng.choice(["hd", "ring", "tree"]), p, M, rng.choice(["gloo", "paper"]))
    caps = [rng.randint(1, 5) for _ in range(3)]
    caps[0] += max(0, p - sum(caps))
    start = [m for m, c in enumerate(caps) for _ in range(c)][:p]
    rng.shuffle(start)
    hosts = set(start)
    options = [start]
    for n in range(p):
        for b in hosts - {start[n]}:
            if start.count(b) < caps[b]:
                options.append(start[:n] + [b] + start[n + 1:])
        for m in range(n + 1, p):
            swapped = list(start)
            swapped[n], swapped[m] = start[m], start[n]
            options.append(swapped)
    best = min(cross_traffic_bytes(pat, o) for o in options)
    out = refine(start, caps, pat.neighbours(), passes=1, swaps=True)
    assert cross_traffic_bytes(pat, out) == pytest.approx(best)


def test_select_idle_prefers_one_rack_best_fit():
    """SELECT_IDLE takes the rack with the fewest idle machines that suffice, else the biggest racks."""
    ms = [MachineState(f"h{i}", 4, 4, rack, i) for i, rack in enumerate("aabbbc")]
    assert [m.name for m in select_idle(ms, 8)] == ["h0", "h1"]
    assert [m.name for m in select_idle(ms, 12)] == ["h2", "h3", "h4"]
    assert [m.name for m in select_idle(ms, 16)] == ["h2", "h3", "h4", "h0"]


# ---------------------------------------------------------------------------------------------
# §5 worked examples


def test_fig1_titan_places_like_the_paper():
    """§5.1: Titan puts W1,W3 on M2 and W2,W4 on M3 (X = M, 3 launched machines), on their free GPUs."""
    cluster = fig1_cluster()
    view = cluster.view()
    policy = make_policy("titan,labelling=paper")
    [placement] = policy.place([JobRequest("j", "resnet50", 4, collective="hd")], view)
    assert [(s.machine, s.gpu) for s in placement.slots] == [("M2", 1), ("M3", 2), ("M2", 2), ("M3", 3)]
    plan = policy.plan(JobRequest("j", "resnet50", 4, collective="hd"), view)
    size = policy.pattern_for(JobRequest("j", "resnet50", 4, collective="hd")).size_bytes
    assert (plan.idle_used, plan.machines_used, plan.cross_bytes) == (0, 2, size)
    assert plan.budget_bytes == size  # X_cons = 0, gamma = 1
    cluster.apply(placement)
    assert used_machines(cluster.view()) == 3


def test_fig1_baselines_and_headline_reductions():
    """§5.1: EF 4 machines / X 0, HiveD 3 / 3M/2, Titan 3 / M: -33.3 % traffic, -25 % machines."""
    free, pat = [4, 3, 2, 1], comm_pattern("hd", 4, M, "paper")
    ef, hived = ef_f(free, 4, 4), hived_f(free, 4, 4)
    titan = titan_r(pat, states(free, 4))
    assert ef == ["M1"] * 4 and hived == ["M2", "M2", "M2", "M4"]

    def launched(assign):
        return sum(1 for i, f in enumerate(free) if f < 4 or f"M{i + 1}" in assign)

    assert [launched(a) for a in (ef, hived, titan.assign)] == [4, 3, 3]
    xs = [cross_traffic_bytes(pat, a) for a in (ef, hived, titan.assign)]
    assert xs == [0, 1.5 * M, M]
    assert 1 - xs[2] / xs[1] == pytest.approx(1 / 3)
    assert 1 - launched(titan.assign) / launched(ef) == 0.25
    assert oracle(pat, states(free, 4)) == (0, 2, 1.0)


def test_fig1_hived_split_exceeds_titans_budget():
    """§5.1/§2.4.4: with gamma = 1 the budget is M, which HiveD's split (1.5M) would exceed."""
    plan = titan_r(comm_pattern("hd", 4, M, "paper"), states([4, 3, 2, 1], 4))
    assert plan.budget_bytes == M < 1.5 * M


@pytest.mark.parametrize("labelling,expected", [
    ("gloo", ["A"] * 8 + ["B"] * 4 + ["C"] * 4),
    ("paper", ["A", "B", "A", "C"] * 4),
])
def test_intro_example_sixteen_workers(labelling, expected):
    """§5.2: Titan places a 16-worker job over A (idle) and fragments B, C with X = 2M; EF-F waits."""
    ms = [MachineState(n, f, 8, "r0", i) for i, (n, f) in enumerate([("A", 8), ("B", 4), ("C", 4)])]
    pat = comm_pattern("hd", 16, M, labelling)
    plan = titan_r(pat, ms)
    assert list(plan.assign) == expected
    assert (plan.idle_used, plan.machines_used, plan.cross_bytes, plan.budget_bytes) == (1, 3, 2 * M, 2 * M)
    assert ef_f([8, 4, 4], 8, 16) is None


@pytest.mark.parametrize("labelling,expected", [("gloo", 2.0), ("paper", 10.0)])
def test_intro_example_hived(labelling, expected):
    """§5.2: HiveD-F (B <- 0-3, C <- 4-7, A <- 8-15, rank order) costs 2M (gloo) or 10M (paper)."""
    assign = hived_f([8, 4, 4], 8, 16)
    assert assign == ["M2"] * 4 + ["M3"] * 4 + ["M1"] * 8
    assert cross_traffic_bytes(comm_pattern("hd", 16, M, labelling), assign) == expected * M


def test_lookahead_breaks_the_coverage_tie():
    """§5.3: after M1 (6) the last 2 workers go to M3 (X = M), not the best-fit M2 (X = 1.5M)."""
    plan = titan_r(comm_pattern("hd", 8, M), states([6, 2, 5], 8))
    assert list(plan.assign) == ["M1"] * 4 + ["M3"] * 4
    assert (plan.idle_used, plan.machines_used, plan.cross_bytes) == (0, 2, M)
    assert cross_traffic_bytes(comm_pattern("hd", 8, M), ["M1"] * 6 + ["M2"] * 2) == 1.5 * M


TESTBED_FREE = [1, 1, 1, 2, 2, 3, 4, 4]  # background [3,3,3,2,2,1,0,0]
TESTBED_ROWS = [  # p, EF-F (idle machines, X/M) or None, HiveD-F, Titan gamma=1, Titan gamma=inf
    (4, (1, 0.0), (2, 0, 1.5), (2, 0, 1.0), (2, 0, 1.0)),
    (6, (2, 4.0), (3, 0, 5.5), (3, 0, 2.0), (3, 0, 2.0)),
    (8, (2, 1.0), (4, 0, 5.5), (3, 1, 2.0), (4, 0, 4.0)),
    (10, None, (6, 0, 9.5), (4, 1, 3.0), (6, 0, 5.75)),
    (12, None, (7, 1, 13.5), (4, 2, 3.0), (5, 1, 4.75)),
]


@pytest.mark.parametrize("p,ef,hived,titan1,titan_inf", TESTBED_ROWS)
def test_testbed_like_illustration(p, ef, hived, titan1, titan_inf):
    """§5.4 table (K = 4, background [3,3,3,2,2,1,0,0], HD gloo labelling with fold-in): every column."""
    pat = comm_pattern("hd", p, M)

    def summary(assign):
        used = set(assign)
        idle = sum(1 for m in used if TESTBED_FREE[int(m[1:]) - 1] == 4)
        return len(used), idle, cross_traffic_bytes(pat, assign) / M

    ef_assign = ef_f(TESTBED_FREE, 4, p)
    assert (ef_assign is None) == (ef is None)
    if ef is not None:
        assert summary(ef_assign)[1:] == ef
    assert summary(hived_f(TESTBED_FREE, 4, p)) == hived
    for gamma, expected in ((1.0, titan1), (math.inf, titan_inf)):
        plan = titan_r(pat, states(TESTBED_FREE, 4), TitanParams(gamma=gamma))
        assert (plan.machines_used, plan.idle_used, plan.cross_bytes / M) == expected


@pytest.mark.parametrize("p", [4, 8, 16])
def test_titan_is_labelling_invariant(p):
    """A pattern-aware placer finds the same machines and X under either HD labelling (§1.3.1)."""
    free = [8, 5, 3, 6, 2]
    plans = [titan_r(comm_pattern("hd", p, M, lab), states(free, 8)) for lab in ("gloo", "paper")]
    assert plans[0].cross_bytes == plans[1].cross_bytes
    assert sorted(plans[0].assign) == sorted(plans[1].assign)


# ---------------------------------------------------------------------------------------------
# Guard, C3, variants, policy plumbing


def test_gamma_zero_keeps_a_job_whole_on_an_idle_machine():
    """gamma = 0 uses fragments only at no extra traffic: Fig. 1's job goes to idle M1."""
    plan = titan_r(comm_pattern("hd", 4, M, "paper"), states([4, 3, 2, 1], 4), TitanParams(gamma=0.0))
    assert list(plan.assign) == ["M1"] * 4


def test_strict_waits_when_no_plan_meets_the_budget():
    """strict=True waits instead of returning the least-traffic plan above the guard."""
    ms = states([3, 3, 2], 4)  # no idle machine: any 8-worker plan splits three ways
    pat = comm_pattern("hd", 8, M)
    loose = titan_r(pat, ms, TitanParams(gamma=0.0))
    assert loose is not None and loose.cross_bytes > loose.budget_bytes
    assert titan_r(pat, ms, TitanParams(gamma=0.0, strict=True)) is None


def test_c3_per_step_pair_limit_uses_the_topology():
    """bw_mode=per_step_pair: beta = 0.5 admits Fig. 1's split (M/2 per step), beta = 0.4 does not."""
    cluster = Cluster.from_topology(build_topology("leaf_spine", n_leaf=1, n_spine=1, hosts_per_leaf=4))
    cluster.set_background({"h2": 1, "h3": 2, "h4": 3})
    job = JobRequest("j", "resnet50", 4, collective="hd")
    ok = make_policy("titan,labelling=paper,bw_mode=per_step_pair,beta=0.5").place([job], cluster.view())
    assert [s.machine for s in ok[0].slots] == ["h2", "h3", "h2", "h3"]
    tight = make_policy("titan,labelling=paper,bw_mode=per_step_pair,beta=0.4").place([job], cluster.view())
    assert [s.machine for s in tight[0].slots] == ["h1"] * 4


def test_c3_sees_oversubscribed_uplinks():
    """On a 4:1 leaf-spine (5 Gbps uplinks) the cross-rack limit M/4 < M/2 sends the job to idle h3."""
    g = build_topology("leaf_spine", n_leaf=2, n_spine=1, hosts_per_leaf=2, oversubscription=4.0)
    cluster = Cluster.from_topology(g)
    cluster.set_background({"h1": 2, "h2": 3, "h4": 2})  # free: h1 2, h2 1, h3 4 (idle), h4 2
    job = JobRequest("j", "resnet50", 4, collective="hd")
    on = make_policy("titan,bw_mode=per_step_pair,beta=0.5").place([job], cluster.view())
    off = make_policy("titan").place([job], cluster.view())
    assert {s.machine for s in off[0].slots} == {"h1", "h4"}  # 2 + 2 across racks, X = M
    assert {s.machine for s in on[0].slots} == {"h3"}


def test_c3_per_step_nic_limits_egress():
    """bw_mode=per_step_nic: Fig. 1's split sends M/2 per NIC and step: beta 0.5 admits it, 0.4 does not."""
    job = JobRequest("j", "resnet50", 4, collective="hd")
    for beta, expected in ((0.5, ["M2", "M3", "M2", "M3"]), (0.4, ["M1"] * 4)):
        policy = make_policy(f"titan,labelling=paper,bw_mode=per_step_nic,beta={beta}")
        assert [s.machine for s in policy.place([job], fig1_cluster().view())[0].slots] == expected


def test_c3_without_graph_falls_back_to_uniform_bandwidth():
    """With no topology graph the C3 limit is beta·M on every pair (same result as a flat fabric)."""
    job = JobRequest("j", "resnet50", 4, collective="hd")
    policy = make_policy("titan,labelling=paper,bw_mode=per_step_pair,beta=0.4")
    tight = policy.place([job], fig1_cluster().view())
    assert [s.machine for s in tight[0].slots] == ["M1"] * 4


def test_paper_variant_picks_the_idle_machine_on_fig1():
    """The literal two-pass greedy (max coverage) chooses idle M1 on Fig. 1: the reason for Titan-R (§2.3)."""
    plan = titan_paper(comm_pattern("hd", 4, M, "paper"), states([4, 3, 2, 1], 4), random.Random(0))
    assert list(plan.assign) == ["M1"] * 4 and plan.idle_used == 1


def test_paper_variant_prefers_fragments_on_coverage_ties():
    """Paper variant: with the job covered equally, a non-idle machine beats an idle one."""
    plan = titan_paper(comm_pattern("hd", 2, M), states([4, 2, 3], 4), random.Random(0))
    assert set(plan.assign) == {"M2"}


def test_paper_variant_mixes_idle_and_fragments_when_idle_gpus_are_short():
    """Paper variant: pass 1's partial idle set plus fragments cover a job no idle-only plan can hold."""
    plan = titan_paper(comm_pattern("hd", 8, M), states([2, 4, 3], 4), random.Random(0))
    assert sorted(plan.assign) == ["M1"] + ["M2"] * 4 + ["M3"] * 3
    assert (plan.idle_used, plan.machines_used) == (1, 3)


def test_paper_variant_random_split_is_seeded():
    """The paper variant's random initial split depends on the seed only (same seed, same slots)."""
    cluster = Cluster([MachineInfo(f"h{i}", 4, rack="r0", pod="p0") for i in range(4)])
    cluster.set_background({"h0": 1, "h1": 2})
    job = [JobRequest("j", "resnet50", 6, collective="hd")]
    runs = {s: make_policy("titan,variant=paper", seed=s).place(job, cluster.view())[0].slots
            for s in range(6)}
    assert runs[3] == make_policy("titan,variant=paper", seed=3).place(job, cluster.view())[0].slots
    assert len(set(runs.values())) > 1


def test_policy_spec_errors():
    """Bad spec values fail with the valid choices."""
    with pytest.raises(PlacementError, match="valid: paper, r"):
        make_policy("titan,variant=greedy")
    with pytest.raises(PlacementError, match="bw_mode"):
        make_policy("titan,bw_mode=nic")
    with pytest.raises(PlacementError, match="gamma"):
        make_policy("titan,gamma=-1")
    assert make_policy("titan,gamma=inf").params.gamma == math.inf


def test_several_jobs_in_one_call_see_each_other():
    """Jobs of one call never share a GPU and a later job sees the fragments an earlier one left."""
    cluster = Cluster([MachineInfo(f"h{i}", 4, rack="r0", pod="p0") for i in range(3)])
    jobs = [JobRequest("a", "resnet50", 3, collective="hd"), JobRequest("b", "resnet50", 1, collective="hd")]
    a, b = TitanPolicy().place(jobs, cluster.view())
    assert {s.machine for s in a.slots} == {"h0"}
    assert b.slots == (a.slots[0].__class__("h0", 3),)  # the 1-GPU job fills h0's hole, not an idle machine


def test_waits_when_too_few_gpus():
    """A job larger than the free GPUs waits; the next one is still placed."""
    jobs = [JobRequest("big", "resnet50", 11, collective="hd"), JobRequest("small", "resnet50", 2)]
    out = TitanPolicy().place(jobs, fig1_cluster().view())
    assert [p.job for p in out] == ["small"]


# ---------------------------------------------------------------------------------------------
# Property test against the exhaustive oracle (§2.6)


def _random_instance(seed: int):
    rng = random.Random(seed)
    k = rng.choice([2, 4])
    ms = [MachineState(f"h{i}", rng.randint(0, k), k, f"r{i % 2}", i) for i in range(rng.randint(2, 4))]
    total = sum(m.free for m in ms)
    p = rng.randint(1, min(6, total)) if total else 0
    coll, lab = rng.choice(["hd", "ring"]), rng.choice(["gloo", "paper"])
    return ms, p, coll, lab


@pytest.mark.parametrize("block", range(6))
def test_titan_r_against_exhaustive_oracle(block):
    """On seeded tiny clusters: gamma=inf gives the oracle's (O1, O2); with a budget Titan never uses more
    idle machines than the budgeted optimum and stays within its budget whenever some placement does."""
    checked = 0
    for seed in range(block * 50, block * 50 + 50):
        ms, p, coll, lab = _random_instance(seed)
        if p == 0:
            continue
        pat = comm_pattern(coll, p, M, lab)
        free_plan = titan_r(pat, ms, TitanParams(gamma=math.inf))
        assert (free_plan.idle_used, free_plan.machines_used) == oracle(pat, ms)[:2], seed
        for gamma in (1.0, 0.0):
            plan = titan_r(pat, ms, TitanParams(gamma=gamma))
            best = oracle(pat, ms, plan.budget_bytes)
            if best is not None:
                assert plan.idle_used <= best[0], seed
                assert plan.cross_bytes <= plan.budget_bytes * (1 + 1e-9), seed
        checked += 1
    assert checked >= 40


@pytest.mark.parametrize("spec", ["titan,variant=paper", "titan,gamma=inf", "titan,gamma=0,strict=true",
                                  "titan,labelling=paper,bw_mode=per_step_pair"])
@pytest.mark.parametrize("seed", range(8))
def test_variants_keep_the_placement_contract(spec, seed):
    """Non-default specs use only free GPUs, never double-book, size jobs right and leave the view alone."""
    rng = random.Random(seed)
    cluster = Cluster([MachineInfo(f"h{i}", rng.choice([2, 4, 8]), rack=f"r{i // 3}", pod="p0")
                       for i in range(rng.randint(2, 7))])
    cluster.set_background({m.name: rng.randint(0, m.gpus) for m in cluster.view().machines})
    view = cluster.view()
    jobs = [JobRequest(f"j{i}", "resnet50", rng.randint(1, 8), collective=rng.choice(["hd", "ring", "gloo"]))
            for i in range(4)]
    before = cluster.snapshot()
    out = make_policy(spec, seed=seed).place(jobs, view)
    assert cluster.snapshot() == before
    assert out == make_policy(spec, seed=seed).place(jobs, view)
    sizes = {j.name: j.workers for j in jobs}
    used = [s for p in out for s in p.slots]
    assert len(used) == len(set(used)) and all(view.owner(s) is None for s in used)
    assert all(len(p.slots) == sizes[p.job] for p in out)


# ---------------------------------------------------------------------------------------------
# Ring grouping: the spec's balanced tree and the clustered chain (§2.4.2, ring_trees deviation)


def ring_cuts(assign) -> int:
    """Ring edges ``(r, r+1 mod p)`` whose ranks sit on different machines."""
    p = len(assign)
    return sum(1 for r in range(p) if assign[r] != assign[(r + 1) % p])


def ring_edge_bytes(p: int) -> float:
    """Traffic of one cut ring edge: 2(p-1) steps of M/p (§1.3.3)."""
    return 2 * (p - 1) * M / p


@pytest.mark.parametrize("p", range(2, 33))
def test_ring_chain_is_what_agglomerative_clustering_builds(p):
    """§2.4.2: the generic agglomerative grouping of a ring is the left-deep chain of prefixes."""
    assert chain_tree(p) == agglomerative_tree(comm_pattern("ring", p, M))


def test_ring_example_needs_three_crossings_not_four():
    """§2.4.2 deviation: K = 4, free {4, 3, 1, 4, 4}, a 10-worker ring crosses machines 3 times, not 4.

    The spec's balanced tree alone packs {0,1,2} {3,4,8,9} {5,6,7} (4 cut edges, X = 7.2M, guard
    X_cons + M = 8.2M); with the clustered chain Titan needs 3 cuts (5.4M) and its guard is 6.4M.
    """
    ms = states([4, 3, 1, 4, 4], 4)
    pat = comm_pattern("ring", 10, M)
    edge = ring_edge_bytes(10)
    plan = titan_r(pat, ms)
    assert ring_cuts(plan.assign) == 3
    assert plan.cross_bytes == pytest.approx(3 * edge)
    assert plan.budget_bytes == pytest.approx(3 * edge + M)
    assert (plan.idle_used, plan.machines_used) == (2, 3)
    literal = titan_r(pat, ms, TitanParams(ring_grouping="balanced"))
    assert ring_cuts(literal.assign) == 4 and literal.budget_bytes == pytest.approx(4 * edge + M)


def test_ring_example_through_the_policy():
    """The same example through make_policy: the placement's ranks cross machines 3 times."""
    cluster = Cluster([MachineInfo(f"m{i}", 4, rack="r0", pod="p0") for i in range(5)])
    cluster.set_background({"m1": 1, "m2": 3})
    [placement] = make_policy("titan").place([JobRequest("j", "resnet50", 10, collective="ring")],
                                             cluster.view())
    assert ring_cuts([s.machine for s in placement.slots]) == 3


def test_neither_ring_tree_dominates():
    """On capacities (2, 3, 3) a 6-worker ring packs better balanced (2 cuts) than chained (3): keep both."""
    pat = comm_pattern("ring", 6, M)
    balanced, chain = (pack(t, [2, 3, 3]) for t in (block_tree(pat), chain_tree(6)))
    assert (ring_cuts(balanced), ring_cuts(chain)) == (2, 3)
    assert ring_trees(pat) == (block_tree(pat), chain_tree(6))
    assert ring_trees(pat, "balanced") == (block_tree(pat),) and ring_trees(comm_pattern("hd", 8, M)) == (
        block_tree(comm_pattern("hd", 8, M)),)
    with pytest.raises(JobError, match="valid: balanced, both, chain"):
        ring_trees(pat, "best")
    with pytest.raises(PlacementError, match="ring_grouping"):
        make_policy("titan,ring_grouping=best")


def _ring_instance(seed: int):
    """A seeded ring instance: K in {4, 8}, 2-8 machines with random free GPUs, 2-24 workers."""
    rng = random.Random(seed)
    k = rng.choice([4, 8])
    ms = [MachineState(f"h{i}", rng.randint(0, k), k, f"r{i % 2}", i) for i in range(rng.randint(2, 8))]
    total = sum(m.free for m in ms)
    if total < 2:
        return None
    return ms, rng.randint(2, min(24, total)), rng.choice(["ring", "gloo"])


@pytest.mark.parametrize("block", range(5))
def test_titan_never_needs_more_ring_traffic_than_the_clustered_reference(block):
    """On 200 seeded ring instances per block and gamma in {1, 0, inf}, Titan's traffic and guard never
    exceed those of the reference Titan-R that packs the clustered chain (§2.4.2)."""
    checked = literal_worse = 0
    for seed in range(block * 200, block * 200 + 200):
        inst = _ring_instance(seed)
        if inst is None:
            continue
        ms, p, coll = inst
        pat = comm_pattern(coll, p, M)
        for gamma in (1.0, 0.0, math.inf):
            plan = titan_r(pat, ms, TitanParams(gamma=gamma))
            ref = titan_r(pat, ms, TitanParams(gamma=gamma, ring_grouping="chain"))
            literal = titan_r(pat, ms, TitanParams(gamma=gamma, ring_grouping="balanced"))
            assert plan.cross_bytes <= ref.cross_bytes * (1 + 1e-9), (seed, gamma)
            assert plan.budget_bytes <= ref.budget_bytes * (1 + 1e-9), (seed, gamma)
            assert ring_cuts(plan.assign) <= ring_cuts(ref.assign), (seed, gamma)
            literal_worse += literal.cross_bytes > ref.cross_bytes * (1 + 1e-9)
            checked += 1
    assert checked >= 550
    assert literal_worse > 0, "the family exercises the spec-literal grouping's extra cuts"
