"""Unit tests of the baseline placement policies, the spec strings and the placement metrics."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter

import pytest
from conftest import REPO

from common.errors import PlacementError
from placement import (
    POLICIES,
    Cluster,
    ConsolidatePolicy,
    GpuSlot,
    JobRequest,
    MachineInfo,
    Placement,
    RandomPolicy,
    make_policy,
    parse_spec,
)
from placement.metrics import (
    cross_machine_pairs,
    fragmentation,
    idle_machines_consumed,
    machines_used,
    used_machines,
)

BASELINES = ["random", "consolidate", "spread"]


def make_cluster(spec: list[tuple[str, int, int, str]]) -> Cluster:
    """Build a cluster from ``(name, gpus, busy_gpus, rack)`` rows."""
    cluster = Cluster([MachineInfo(name, gpus, rack=rack, pod="p0") for name, gpus, _, rack in spec])
    cluster.set_background({name: busy for name, _, busy, _ in spec})
    return cluster


def job(name: str, workers: int) -> JobRequest:
    """A job with a fixed model, for brevity."""
    return JobRequest(name, "resnet50", workers)


def rank_machines(p: Placement) -> list[str]:
    """The machine of every rank, in rank order."""
    return [s.machine for s in p.slots]


def assert_grouped(p: Placement):
    """All ranks of a machine are contiguous."""
    machines = rank_machines(p)
    runs = [m for i, m in enumerate(machines) if i == 0 or machines[i - 1] != m]
    assert len(runs) == len(set(runs)), f"ranks not grouped by machine: {machines}"


# --- consolidate -------------------------------------------------------------------------

def test_consolidate_single_machine_best_fit():
    """A job that fits on one machine goes to the machine with the fewest free GPUs that fits."""
    # free GPUs: m0 8, m1 3, m2 4, m3 2
    cluster = make_cluster([("m0", 8, 0, "r0"), ("m1", 4, 1, "r0"), ("m2", 8, 4, "r1"), ("m3", 2, 0, "r1")])
    [p] = ConsolidatePolicy().place([job("a", 3)], cluster.view())
    assert p.slots == (GpuSlot("m1", 1), GpuSlot("m1", 2), GpuSlot("m1", 3))
    [p] = ConsolidatePolicy().place([job("a", 5)], cluster.view())
    assert rank_machines(p) == ["m0"] * 5


def test_consolidate_best_fit_ties_go_to_machine_order():
    """Among machines with equally few free GPUs, the earlier machine wins."""
    cluster = make_cluster([("m0", 8, 0, "r0"), ("m1", 4, 2, "r0"), ("m2", 4, 2, "r1")])
    [p] = ConsolidatePolicy().place([job("a", 2)], cluster.view())
    assert rank_machines(p) == ["m1", "m1"]


def test_consolidate_multi_machine_exact_choice():
    """A job too big for one machine fills the largest machines, then best-fits the rest."""
    # free: m0 6, m1 5, m2 4, m3 3. Two machines are needed; m0 is filled, the remaining 3
    # go to m3 (best fit among m1, m2, m3), not to m1 (the next largest).
    cluster = make_cluster([("m0", 8, 2, "r0"), ("m1", 8, 3, "r0"), ("m2", 8, 4, "r1"), ("m3", 8, 5, "r1")])
    [p] = ConsolidatePolicy().place([job("a", 9)], cluster.view())
    assert p.slots == tuple(GpuSlot("m0", g) for g in range(2, 8)) + tuple(
        GpuSlot("m3", g) for g in range(5, 8))


@pytest.mark.parametrize("seed", range(30))
def test_consolidate_uses_minimum_number_of_machines(seed):
    """On random clusters, consolidate uses exactly the minimum possible number of machines."""
    rng = random.Random(seed)
    rows = []
    for i in range(rng.randint(2, 8)):
        gpus = rng.choice([2, 4, 8])
        rows.append((f"m{i}", gpus, rng.randint(0, gpus), f"r{i % 3}"))
    cluster = make_cluster(rows)
    view = cluster.view()
    free_desc = sorted((view.n_free(m.name) for m in view.machines), reverse=True)
    for workers in range(1, view.total_free + 1):
        minimum = next(k for k in range(1, len(free_desc) + 1) if sum(free_desc[:k]) >= workers)
        [p] = ConsolidatePolicy().place([job("a", workers)], view)
        assert machines_used(p) == minimum, f"{workers} workers on {free_desc}"
        assert_grouped(p)


def test_consolidate_later_jobs_see_earlier_jobs_of_the_call():
    """Two jobs of one call never share a GPU: the second goes where the first left room."""
    cluster = make_cluster([("m0", 4, 0, "r0"), ("m1", 4, 0, "r0")])
    a, b = ConsolidatePolicy().place([job("a", 4), job("b", 4)], cluster.view())
    assert set(rank_machines(a)) == {"m0"} and set(rank_machines(b)) == {"m1"}


# --- consolidate,idle_first=true: YARN-CS (Tiresias §2.2; spec tiresias.md §6.1) ------------

YARN_CS = "consolidate,idle_first=true,strict_order=true"


def test_yarn_cs_eight_gpu_job_takes_one_whole_idle_machine():
    """An 8-GPU job takes a whole idle 8-GPU machine, not a partly used one (plain consolidate's best fit)."""
    cluster = make_cluster([("big", 16, 8, "r0"), ("m1", 8, 3, "r0"), ("m2", 8, 0, "r0"), ("m3", 8, 0, "r0")])
    [p] = make_policy(YARN_CS).place([job("a", 8)], cluster.view())
    assert p.slots == tuple(GpuSlot("m2", g) for g in range(8))
    [q] = make_policy("consolidate,strict_order=true").place([job("a", 8)], cluster.view())
    assert rank_machines(q) == ["big"] * 8, "best fit ties with the partly used 16-GPU machine"


def test_yarn_cs_never_splits_a_job_over_partly_used_machines():
    """8 GPUs on 4-GPU machines need 2 idle machines: with one, YARN-CS waits (and blocks); consolidate splits."""
    cluster = make_cluster([("m0", 4, 1, "r0"), ("m1", 4, 1, "r0"), ("m2", 4, 2, "r0"), ("m3", 4, 0, "r0")])
    assert make_policy(YARN_CS).place([job("a", 8), job("b", 1)], cluster.view()) == []
    [p] = make_policy("consolidate,strict_order=true").place([job("a", 8)], cluster.view())
    assert machines_used(p) == 3 and "m0" in rank_machines(p)
    [b] = make_policy("consolidate,idle_first=true").place([job("a", 8), job("b", 1)], cluster.view())
    assert b.job == "b" and rank_machines(b) == ["m2"], "without strict_order later jobs still start"


def test_yarn_cs_whole_idle_machines_then_one_best_fit_remainder():
    """10 GPUs on 4-GPU machines: two idle machines whole, the last 2 on the best-fit machine."""
    cluster = make_cluster([("m0", 4, 0, "r0"), ("m1", 4, 1, "r0"), ("m2", 4, 0, "r0"), ("m3", 4, 2, "r0"),
                            ("m4", 4, 0, "r0")])
    [p] = make_policy(YARN_CS).place([job("a", 10)], cluster.view())
    assert rank_machines(p) == ["m0"] * 4 + ["m2"] * 4 + ["m3"] * 2


@pytest.mark.parametrize("seed", range(30))
def test_yarn_cs_uses_floor_w_over_k_idle_machines(seed):
    """On uniform random clusters YARN-CS gives a job floor(w/K) whole idle machines plus at most one other."""
    rng = random.Random(seed)
    k = rng.choice([2, 4, 8])
    rows = [(f"m{i}", k, rng.choice([0, 0, rng.randint(0, k)]), "r0") for i in range(rng.randint(2, 8))]
    view = make_cluster(rows).view()
    idle = {m.name for m in view.machines if view.n_free(m.name) == k}
    for workers in range(1, view.total_free + 1):
        out = make_policy(YARN_CS).place([job("a", workers)], view)
        whole, rest = divmod(workers, k)
        possible = len(idle) >= whole and (rest == 0 or any(
            view.n_free(m.name) >= rest for m in view.machines if m.name not in sorted(idle)[:whole]))
        assert bool(out) == possible, (workers, rows)
        if out:
            counts = Counter(rank_machines(out[0]))
            assert sum(1 for m, n in counts.items() if m in idle and n == k) >= whole
            assert len(counts) == whole + (rest > 0)
            assert_grouped(out[0])


# --- spread --------------------------------------------------------------------------------

def three_racks() -> Cluster:
    """Three racks of two 4-GPU machines; in r0 the second machine has more free GPUs."""
    return make_cluster([
        ("a0", 4, 2, "r0"), ("a1", 4, 0, "r0"),
        ("b0", 4, 0, "r1"), ("b1", 4, 0, "r1"),
        ("c0", 4, 0, "r2"), ("c1", 4, 0, "r2"),
    ])


def test_spread_uses_as_many_racks_as_possible():
    """A job of w workers uses min(w, racks) racks, balanced, one worker per rack in turn."""
    cluster = three_racks()
    view = cluster.view()
    rack = {m.name: m.rack for m in view.machines}
    [p] = make_policy("spread").place([job("a", 3)], view)
    assert sorted(rack[m] for m in rank_machines(p)) == ["r0", "r1", "r2"]
    [p] = make_policy("spread").place([job("a", 5)], view)
    assert sorted(Counter(rack[m] for m in rank_machines(p)).values()) == [1, 2, 2]
    assert_grouped(p)


def test_spread_picks_machine_with_most_free_gpus_in_rack():
    """Within a rack, each worker goes to the machine with the most free GPUs left."""
    [p] = make_policy("spread").place([job("a", 6)], three_racks().view())
    # r0: a1 (4 free) beats a0 (2 free); r1/r2: ties go to the first machine, then the
    # second one has more free GPUs left.
    assert Counter(rank_machines(p)) == Counter({"a1": 2, "b0": 1, "b1": 1, "c0": 1, "c1": 1})
    assert rank_machines(p)[:2] == ["a1", "a1"]


def test_spread_skips_full_racks():
    """Racks with no free GPU are skipped; the job is dealt over the others."""
    cluster = make_cluster([("a0", 2, 2, "r0"), ("b0", 4, 0, "r1"), ("c0", 4, 0, "r2")])
    [p] = make_policy("spread").place([job("a", 4)], cluster.view())
    assert Counter(rank_machines(p)) == Counter({"b0": 2, "c0": 2})


# --- random --------------------------------------------------------------------------------

def test_random_same_seed_same_output_regardless_of_history():
    """A random policy that has placed other jobs before returns what a fresh one returns."""
    cluster = three_racks()
    pending = [job("a", 3), job("b", 5)]
    used = RandomPolicy(seed=5)
    used.place([job("x", 2), job("y", 7)], cluster.view())
    used.place(pending, cluster.view())
    assert used.place(pending, cluster.view()) == RandomPolicy(seed=5).place(pending, cluster.view())


def test_random_depends_on_seed_and_uses_many_machines():
    """Different seeds give different placements, and draws cover all machines with free GPUs."""
    view = three_racks().view()
    results = [RandomPolicy(seed=s).place([job("a", 3)], view)[0] for s in range(20)]
    assert len({p.slots for p in results}) > 1
    assert {m for p in results for m in rank_machines(p)} == {m.name for m in view.machines}
    for p in results:
        assert_grouped(p)


def test_random_uses_only_free_gpus_when_almost_full():
    """With exactly w free GPUs left, a random job of w workers takes exactly those GPUs."""
    cluster = make_cluster([("m0", 4, 3, "r0"), ("m1", 4, 4, "r0"), ("m2", 4, 2, "r1")])
    [p] = RandomPolicy(seed=1).place([job("a", 3)], cluster.view())
    assert sorted(p.slots) == [GpuSlot("m0", 3), GpuSlot("m2", 2), GpuSlot("m2", 3)]


# --- queueing (all baselines) ------------------------------------------------------------

@pytest.mark.parametrize("name", BASELINES)
def test_no_head_of_line_blocking_by_default(name):
    """A job that does not fit waits; later smaller jobs are still placed."""
    cluster = make_cluster([("m0", 4, 0, "r0"), ("m1", 4, 2, "r1")])
    pending = [job("a", 3), job("big", 4), job("c", 2)]
    assert [p.job for p in make_policy(name).place(pending, cluster.view())] == ["a", "c"]


@pytest.mark.parametrize("name", BASELINES)
def test_strict_order_stops_at_first_job_that_does_not_fit(name):
    """With strict_order=true, nothing after the first waiting job is placed."""
    cluster = make_cluster([("m0", 4, 0, "r0"), ("m1", 4, 2, "r1")])
    pending = [job("a", 3), job("big", 4), job("c", 2)]
    policy = make_policy(f"{name},strict_order=true")
    assert [p.job for p in policy.place(pending, cluster.view())] == ["a"]


@pytest.mark.parametrize("name", BASELINES)
def test_duplicate_pending_names_rejected(name):
    """Two pending jobs with one name are an error, not two placements."""
    cluster = make_cluster([("m0", 4, 0, "r0")])
    with pytest.raises(PlacementError, match="duplicate job name 'a'"):
        make_policy(name).place([job("a", 1), job("a", 1)], cluster.view())


# --- spec strings --------------------------------------------------------------------------

def test_make_policy_parses_spec_and_seed():
    """A spec string sets constructor keywords; the seed comes from the argument."""
    policy = make_policy("random,strict_order=true", seed=3)
    assert isinstance(policy, RandomPolicy)
    assert policy.strict_order is True and policy.seed == 3
    assert make_policy(" consolidate ").strict_order is False


def test_parse_spec_value_types():
    """Values parse as bool, int, float, else str; whitespace is ignored."""
    name, kwargs = parse_spec("x, a=1, b=2.5, c=TRUE, d=false, e=titan, f=-3")
    assert name == "x"
    assert kwargs == {"a": 1, "b": 2.5, "c": True, "d": False, "e": "titan", "f": -3}
    assert type(kwargs["a"]) is int and type(kwargs["c"]) is bool


def test_unknown_policy_lists_valid_names():
    """An unknown policy name fails with every valid name and a close match."""
    with pytest.raises(PlacementError) as err:
        make_policy("randon")
    assert "'randon'" in str(err.value)
    assert "valid: " + ", ".join(sorted(POLICIES)) in str(err.value)
    assert "did you mean 'random'" in str(err.value)


def test_unknown_keyword_names_it_and_the_valid_ones():
    """An unknown keyword fails naming the keyword and the policy's valid keywords."""
    with pytest.raises(PlacementError) as err:
        make_policy("spread,strict=true")
    assert "'strict'" in str(err.value) and "valid: strict_order" in str(err.value)


@pytest.mark.parametrize("spec,message", [
    ("", "empty policy name"),
    ("random,strict_order", "expected key=value"),
    ("random,=1", "expected key=value"),
    ("random,strict_order=true,strict_order=false", "given twice"),
    ("random,seed=4", "seed is not a spec keyword"),
    ("random,strict_order=3", "should be a bool"),
])
def test_malformed_specs_rejected(spec, message):
    """Malformed specs, a seed in the spec and wrongly typed values raise PlacementError."""
    with pytest.raises(PlacementError, match=message):
        make_policy(spec)


# --- metrics -----------------------------------------------------------------------------
def test_kept_machine_counts_equal_a_scan_through_applies_releases_and_copies():
    """The machines in use and partly used, kept by the cluster as GPUs are taken and freed (background
    work, placements, releases, copies), equal a count over every machine at each step."""
    rng = random.Random(5)
    cluster = make_cluster([(f"m{i}", rng.choice((1, 2, 4)), 0, f"r{i // 3}") for i in range(12)])
    cluster.set_background({"m0": 1, "m4": 2})

    def scanned(view):
        return (sum(1 for m in view.machines if not view.is_idle(m.name)),
                sum(1 for m in view.machines if 0 < view.n_free(m.name) < m.gpus))

    placed = []
    for step in range(60):
        view = cluster.view()
        free = [GpuSlot(m.name, g) for m in view.machines for g in view.free_gpus(m.name)]
        if free and (not placed or rng.random() < 0.6):
            job = f"j{step}"
            cluster.apply(Placement(job, tuple(rng.sample(free, rng.randint(1, min(5, len(free)))))))
            placed.append(job)
        elif placed:
            cluster.release(placed.pop(rng.randrange(len(placed))))
        if step % 10 == 9:
            cluster = cluster.copy()
        view = cluster.view()
        assert (used_machines(view), fragmentation(view)) == scanned(view)



def test_metrics_on_small_example():
    """Machine counts, idle machines consumed, cross-machine pairs and fragmentation are exact."""
    cluster = make_cluster([("m0", 4, 0, "r0"), ("m1", 4, 1, "r0"), ("m2", 4, 0, "r1"), ("m3", 2, 2, "r1")])
    view = cluster.view()
    assert used_machines(view) == 2 and fragmentation(view) == 1  # m1 partial, m3 full
    p = Placement("a", (GpuSlot("m0", 0), GpuSlot("m0", 1), GpuSlot("m1", 1), GpuSlot("m2", 0)))
    assert machines_used(p) == 3
    assert idle_machines_consumed(p, view) == 2  # m0 and m2 were idle; m1 was not
    assert cross_machine_pairs(p) == 6 - 1  # 4 workers: 6 pairs, one pair shares m0
    cluster.apply(p)
    assert used_machines(view) == 4 and fragmentation(view) == 3  # m0, m1, m2 partial
    assert cross_machine_pairs(Placement("b", (GpuSlot("m0", 2),))) == 0


# --- layering ----------------------------------------------------------------------------

def test_import_loads_no_torch_mininet_or_os_ken():
    """Importing placement (all policies and metrics) loads none of torch, mininet, os_ken."""
    code = (
        "import sys, placement, placement.metrics\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'mininet', 'os_ken'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == ""


def test_the_clusters_counters_follow_every_change():
    """Free GPUs per machine, the cluster's total and each job's machines are kept as GPUs are taken
    and freed (O(1) reads); they equal a recount from the owners after every step, copies included."""
    import random

    from placement import Cluster, GpuSlot, MachineInfo, Placement

    rnd = random.Random(5)
    cluster = Cluster([MachineInfo(f"h{i}", rnd.choice([1, 2, 4]), rack=f"r{i // 3}", pod="p") for i in range(9)])
    cluster.set_background({"h0": 1, "h4": 1})

    def check(c):
        view = c.view()
        owners = c.snapshot()
        for m in view.machines:
            assert view.n_free(m.name) == sum(o is None for o in owners[m.name])
            assert view.is_idle(m.name) == all(o is None for o in owners[m.name])
        assert view.total_free == sum(o is None for os_ in owners.values() for o in os_)
        want = {}
        for m in view.machines:
            for o in owners[m.name]:
                if o not in (None, "_background") and m.name not in want.setdefault(o, []):
                    want[o].append(m.name)
        assert view.job_machines() == {j: tuple(ms) for j, ms in want.items()}

    running = []
    for k in range(40):
        free = [GpuSlot(m.name, g) for m in cluster.view().machines for g in cluster.view().free_gpus(m.name)]
        if free and rnd.random() < 0.6:
            slots = rnd.sample(free, rnd.randint(1, min(4, len(free))))
            cluster.apply(Placement(f"j{k}", tuple(slots)))
            running.append(f"j{k}")
        elif running:
            cluster.release(running.pop(rnd.randrange(len(running))))
        check(cluster)
        check(cluster.copy())
