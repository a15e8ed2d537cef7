"""Unit tests of the max-min rates (``sim.maxmin``) and the flow-level simulator (``sim.flowsim``):
hand-computed vectors, agreement with the contention-free bound of ``jobs.steps``, and determinism."""

import itertools
import math
import random
import subprocess
import sys

import pytest
from conftest import REPO, contending_mix, uniform_rates

from common.errors import JobError, TopologyError
from common.units import wire_bytes
from jobs.patterns import barrier_bytes
from jobs.steps import job_bound_s, job_collisions, job_steps
from sim.flowsim import SimJob, SimOptions, simulate
from sim.maxmin import EPS, maxmin_rates
from topo import fat_tree
from topo.routing import ecmp_path, path_links
from topo.schema import machines

B_MBPS = 100.0
B_BYTES_PER_S = B_MBPS * 1e6 / 8


def uniform(g, mbps=B_MBPS):
    """Every link at the same rate."""
    return uniform_rates(g, mbps)


def host_bottleneck(g, mbps=B_MBPS):
    """Machine links at ``mbps``, switch-to-switch links four times faster: machine links are the bottleneck."""
    return {(u, v): mbps if g.nodes[u]["role"] == "machine" or g.nodes[v]["role"] == "machine" else 4 * mbps
            for u, v in g.edges()}


def per_iteration_comm(result, job):
    """The slowest rank's communication time of each measured iteration of ``job``."""
    out: dict[int, float] = {}
    for r in result.records:
        if r.job == job:
            out[r.iteration] = max(out.get(r.iteration, 0.0), r.comm_s)
    return [out[i] for i in sorted(out)]


# -- max-min rates -------------------------------------------------------------------------------

def test_maxmin_one_link_shared_by_two_flows():
    """Two flows on one link of capacity 10 get 5 each."""
    assert maxmin_rates({"a": ["L"], "b": ["L"]}, {"L": 10.0}) == {"a": 5.0, "b": 5.0}


def test_maxmin_parking_lot():
    """A over L1 and L2, B over L1, C over L2, capacities 1: everyone gets 0.5."""
    got = maxmin_rates({"A": ["L1", "L2"], "B": ["L1"], "C": ["L2"]}, {"L1": 1.0, "L2": 1.0})
    assert got == pytest.approx({"A": 0.5, "B": 0.5, "C": 0.5}, rel=1e-12)


def test_maxmin_unequal_bottlenecks():
    """A limited to 0.3 by L2 leaves 0.7 of L1 to B."""
    got = maxmin_rates({"A": ["L1", "L2"], "B": ["L1"]}, {"L1": 1.0, "L2": 0.3})
    assert got == pytest.approx({"A": 0.3, "B": 0.7}, rel=1e-12)


def test_maxmin_ties_saturate_together():
    """Links whose shares differ only by rounding (0.1 + 0.2 vs 0.3) fill in one round, at one rate."""
    got = maxmin_rates({"x": ["L1"], "y": ["L2"], "z": ["L1", "L2"]}, {"L1": 0.1 + 0.2, "L2": 0.3})
    assert got["x"] == got["y"] == got["z"] == 0.15


def test_maxmin_empty_inputs():
    """No flows give no rates; a flow without links is unlimited."""
    assert maxmin_rates({}, {}) == {}
    assert maxmin_rates({"f": []}, {}) == {"f": math.inf}


def test_maxmin_rejects_a_link_without_capacity():
    """A link some flow crosses must have a capacity, named in the error."""
    with pytest.raises(ValueError, match="'L9'"):
        maxmin_rates({"f": ["L9"]}, {"L1": 1.0})


def test_maxmin_random_instances_are_feasible_fair_and_order_independent():
    """On random instances: no link over capacity, every flow has a saturated link on which no
    flow gets more (the max-min condition), and shuffling the input changes nothing."""
    rng = random.Random(7)
    for _ in range(200):
        links = [f"L{i}" for i in range(rng.randint(1, 8))]
        cap = {link: rng.choice([1.0, 2.0, 0.5, rng.uniform(0.1, 3.0)]) for link in links}
        flows = {f"f{i}": rng.sample(links, rng.randint(1, len(links))) for i in range(rng.randint(1, 12))}
        rates = maxmin_rates(flows, cap)
        load = {link: sum(rates[f] for f, ls in flows.items() if link in ls) for link in links}
        for link in links:
            assert load[link] <= cap[link] * (1 + 1e-9)
        for f, ls in flows.items():
            assert any(load[link] >= cap[link] * (1 - 1e-9)
                       and all(rates[g] <= rates[f] * (1 + 1e-9) for g, gl in flows.items() if link in gl)
                       for link in ls), f
        shuffled = dict(rng.sample(list(flows.items()), len(flows)))
        assert maxmin_rates(shuffled, dict(reversed(list(cap.items())))) == rates


# -- one job alone -------------------------------------------------------------------------------

@pytest.mark.parametrize("placement", [("h1", "h2", "h3", "h4"), ("h6", "h1", "h3", "h7", "h8", "h15", "h9", "h13")])
def test_ring_alone_takes_the_textbook_time(placement):
    """A ring of N ranks on N machines, bottleneck B, no shared links: 2(N-1)/N * S * 8 / B per iteration."""
    g = fat_tree(4)
    n = len(placement)
    size = 4 * n * 2500  # every chunk of S/N bytes
    assert job_collisions(g, uniform(g), placement, "ring", [size]) == 0
    res = simulate(g, host_bottleneck(g), [SimJob("r", placement, "ring", (size,), 0.0, 3)])
    want = 2 * (n - 1) / n * size * 8 / (B_MBPS * 1e6)
    assert res.job("r").comm_mean_s == pytest.approx(want, rel=1e-12)
    assert res.job("r").iterations == 3 and len(res.records) == 3 * n
    assert all(r.comm_s == pytest.approx(want, rel=1e-12) for r in res.records)


UNCONTENDED = [
    ("ring", ("h1", "h2", "h3", "h4")),
    ("ring", ("h1", "h1", "h5", "h5")),
    ("ring", ("h3", "h12", "h11", "h8", "h14", "h4")),
    ("gloo", ("h9", "h4", "h3", "h6", "h15", "h16", "h2", "h10")),
    ("hd", ("h1", "h15", "h7", "h11")),
    ("hd", ("h8", "h11", "h15", "h4", "h10", "h6", "h1", "h14")),
]


@pytest.mark.parametrize("collective,placement", UNCONTENDED)
@pytest.mark.parametrize("buckets", [(1,), (10, 1, 3)])
@pytest.mark.parametrize("mtu", [None, 1500])
@pytest.mark.parametrize("rates", ["uniform", "mixed"])
def test_uncontended_job_matches_job_bound(collective, placement, buckets, mtu, rates):
    """A job alone whose transfers never share a link within a step communicates for exactly
    jobs.steps.job_bound_s per iteration (bucket sizes that split evenly)."""
    g = fat_tree(4)
    p = len(placement)
    bucket_bytes = tuple(4 * p * 400 * b for b in buckets)
    assert job_collisions(g, uniform(g), placement, collective, bucket_bytes) == 0
    rng = random.Random(11)
    rate = uniform(g) if rates == "uniform" else {e: rng.choice([50.0, 100.0, 200.0]) for e in g.edges()}
    res = simulate(g, rate, [SimJob("j", placement, collective, bucket_bytes, 0.002, 3, 1)], SimOptions(mtu=mtu))
    bound = job_bound_s(g, rate, placement, collective, bucket_bytes, mtu)
    assert per_iteration_comm(res, "j") == pytest.approx([bound] * 3, rel=1e-9)


def test_an_early_send_on_a_shared_link_is_a_collision():
    """Halving-doubling with three of four ranks on h1: rank 1's first step is on its machine, so it
    sends its second step's transfer to rank 3 while rank 2's first-step transfer to rank 3 is still
    on h1's uplink. No step has two transfers on one link, yet the two meet: job_collisions counts
    it, and the job alone takes longer than its bound (the bound serves them one after the other)."""
    g = fat_tree(4)
    placement, buckets = ("h1", "h1", "h1", "h2"), (4 * 40_000,)
    assert job_collisions(g, uniform(g), placement, "hd", buckets) > 0
    assert job_collisions(g, uniform(g), ("h1", "h15", "h7", "h11"), "hd", buckets) == 0
    res = simulate(g, uniform(g), [SimJob("j", placement, "hd", buckets, 0.002, 3, 1)])
    bound = job_bound_s(g, uniform(g), placement, "hd", buckets)
    assert per_iteration_comm(res, "j")[0] > 1.05 * bound


@pytest.mark.parametrize("collective", ["ring", "hd", "gloo"])
def test_a_job_without_collisions_takes_its_bound(collective):
    """On random placements, machines repeated or not: wherever job_collisions finds none, the job
    alone communicates for exactly its bound."""
    g = fat_tree(4)
    rng = random.Random(collective)
    hosts = machines(g)
    seen = {True: 0, False: 0}
    for _ in range(40):
        p = rng.choice([3, 4, 6, 8])
        placement = tuple(rng.choice(hosts[:rng.choice([2, 4, 16])]) for _ in range(p))
        bucket_bytes = (4 * p * 1000 * rng.choice([1, 3]),)
        bound = job_bound_s(g, uniform(g), placement, collective, bucket_bytes)
        if bound == 0:
            continue
        clean = job_collisions(g, uniform(g), placement, collective, bucket_bytes) == 0
        seen[clean] += 1
        res = simulate(g, uniform(g), [SimJob("j", placement, collective, bucket_bytes, 0.002, 2, 1)])
        if clean:
            assert per_iteration_comm(res, "j") == pytest.approx([bound] * 2, rel=1e-9), placement
    assert seen[True] and seen[False]


def test_tcps_share_slows_only_the_links_two_flows_saturate():
    """shared_efficiency 0.8: two identical rings whose transfers share h1's link both ways take 1/0.8
    of their max-min time (each gets 0.4 of the link), a ring alone keeps its bound exactly, and a
    share outside (0, 1] is refused."""
    g = fat_tree(4)
    size = 4 * 2 * 5000
    pair = [SimJob("a", ("h1", "h3"), "ring", (size,), 0.0, 3), SimJob("b", ("h1", "h4"), "ring", (size,), 0.0, 3)]
    maxmin = simulate(g, uniform(g), pair)
    tcp = simulate(g, uniform(g), pair, SimOptions(shared_efficiency=0.8))
    for job in ("a", "b"):
        assert tcp.job(job).comm_mean_s == pytest.approx(maxmin.job(job).comm_mean_s / 0.8, rel=1e-9)
    alone = [SimJob("c", ("h1", "h3"), "ring", (size,), 0.0, 3)]
    bound = job_bound_s(g, uniform(g), ("h1", "h3"), "ring", (size,))
    assert simulate(g, uniform(g), alone, SimOptions(shared_efficiency=0.8)).job("c").comm_mean_s == pytest.approx(
        bound, rel=1e-9)
    for bad in (0.0, 1.5):
        with pytest.raises(JobError, match="shared_efficiency"):
            SimOptions(shared_efficiency=bad)


def test_uneven_chunks_stay_within_the_bound():
    """Uneven chunks let fast ranks start the next bucket early, so a lone ring finishes a little
    before the bound that synchronises every bucket, never after it."""
    g = fat_tree(4)
    placement = ("h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8")
    buckets = (32004, 12)
    assert job_collisions(g, uniform(g), placement, "ring", buckets) == 0
    res = simulate(g, uniform(g), [SimJob("j", placement, "ring", buckets, 0.0, 2)])
    bound = job_bound_s(g, uniform(g), placement, "ring", buckets)
    assert bound * (1 - 1e-3) < res.job("j").comm_mean_s <= bound * (1 + 1e-12)


def test_barriers_and_warmup_frame_the_measured_iterations():
    """Finish time = barrier + (warm-up + measured) iterations of compute + comm + barrier; only
    measured iterations are recorded."""
    g = fat_tree(4)
    placement, size, compute = ("h1", "h2", "h3", "h4"), 4 * 4 * 1000, 0.01
    res = simulate(g, uniform(g), [SimJob("j", placement, "ring", (size,), compute, 3, warmup_iterations=2)])
    n = len(placement)
    comm = 2 * (n - 1) * (size / n) / B_BYTES_PER_S
    barrier = 2 * (n - 1) * (barrier_bytes(n) / n) / B_BYTES_PER_S
    est = res.job("j")
    assert est.iterations == 3 and {r.iteration for r in res.records} == {0, 1, 2}
    assert est.finish_s == pytest.approx(2 * barrier + 5 * (compute + comm), rel=1e-12)
    first = min(r.start_s for r in res.records)
    assert first == pytest.approx(barrier + 2 * (compute + comm), rel=1e-12)


def test_same_machine_job_costs_nothing():
    """Ranks on one machine exchange in memory: no communication time, latency or not."""
    g = fat_tree(4)
    res = simulate(g, uniform(g), [SimJob("j", ("h1",) * 4, "hd", (1600,), 0.01, 2)], SimOptions(latency_s=0.5))
    assert res.job("j").comm_mean_s == 0.0
    assert res.job("j").finish_s == pytest.approx(0.02)


def test_single_rank_job_only_computes():
    """A job of one rank has nothing to exchange."""
    g = fat_tree(4)
    res = simulate(g, uniform(g), [SimJob("j", ("h1",), "ring", (400,), 0.5, 2, start_s=1.0)])
    assert res.job("j").comm_mean_s == 0.0 and res.job("j").finish_s == pytest.approx(2.0)


# -- contention ----------------------------------------------------------------------------------

def test_two_jobs_sharing_links_halve_then_recover():
    """Two identical 2-rank rings on the same machines share every link: each iteration takes twice
    as long as alone; once the shorter job is gone the other speeds back up (by hand: the
    iteration overlapping the last barrier loses 8 bytes' worth of time, the next is as alone)."""
    g = fat_tree(4)
    size = 400_000
    placement = ("h1", "h5")
    alone_s = size / B_BYTES_PER_S  # 2 steps of size/2 bytes
    long = SimJob("long", placement, "ring", (size,), 0.0, 4)
    short = SimJob("short", placement, "ring", (size,), 0.0, 2)
    assert per_iteration_comm(simulate(g, uniform(g), [long]), "long") == pytest.approx([alone_s] * 4, rel=1e-12)
    res = simulate(g, uniform(g), [long, short])
    assert per_iteration_comm(res, "short") == pytest.approx([2 * alone_s] * 2, rel=1e-12)
    # short's last barrier (two steps of one 4-byte chunk) shares long's first step: for 16 bytes'
    # time at half rate long moves 8 bytes, so its iteration ends 8 bytes' time later than alone
    extra_s = barrier_bytes(2) / B_BYTES_PER_S
    assert per_iteration_comm(res, "long") == pytest.approx(
        [2 * alone_s, 2 * alone_s, alone_s + extra_s, alone_s], rel=1e-12)
    assert res.job("short").finish_s < res.job("long").finish_s


def _colliding_pairs(g):
    """Two machine pairs in different racks whose ECMP paths share a link into or out of a core switch."""
    hosts = machines(g)
    paths = {(a, b): set(path_links(ecmp_path(g, a, b))) for a in hosts for b in hosts if a != b}
    for (a, b), p1 in sorted(paths.items()):
        for (c, d), p2 in sorted(paths.items()):
            racks = {g.nodes[m]["rack"] for m in (a, b, c, d)}
            if len({a, b, c, d}) < 4 or len(racks) < 4:
                continue
            if any(g.nodes[u].get("tier") == "core" or g.nodes[v].get("tier") == "core" for u, v in p1 & p2):
                return (a, b), (c, d)
    raise AssertionError("no colliding pairs")


def test_ecmp_collision_on_a_core_link_halves_both_flows():
    """Two jobs' flows hashed onto one core link get half its rate each, so each job's 2-rank ring
    takes twice as long as alone."""
    g = fat_tree(4)
    (a, b), (c, d) = _colliding_pairs(g)
    cap = {link: B_BYTES_PER_S for p in ((a, b), (c, d)) for link in path_links(ecmp_path(g, *p))}
    rates = maxmin_rates({"f1": path_links(ecmp_path(g, a, b)), "f2": path_links(ecmp_path(g, c, d))}, cap)
    assert rates == {"f1": B_BYTES_PER_S / 2, "f2": B_BYTES_PER_S / 2}
    size = 400_000
    jobs = [SimJob("x", (a, b), "ring", (size,), 0.0, 2), SimJob("y", (c, d), "ring", (size,), 0.0, 2)]
    res = simulate(g, uniform(g), jobs)
    for job in ("x", "y"):
        assert per_iteration_comm(res, job) == pytest.approx([2 * size / B_BYTES_PER_S] * 2, rel=1e-12)


# -- latency and MTU -----------------------------------------------------------------------------

@pytest.mark.parametrize("placement", [("h1", "h2", "h3", "h4"), ("h1", "h1", "h5", "h5")])
def test_latency_adds_once_per_sequential_cross_machine_step(placement):
    """latency_s adds latency_s per step with a cross-machine transfer: 2(N-1) per ring bucket."""
    g = fat_tree(4)
    n, buckets = len(placement), (4 * 4 * 1000, 4 * 4 * 250)
    job = SimJob("j", placement, "ring", buckets, 0.0, 2)
    base = simulate(g, uniform(g), [job]).job("j").comm_mean_s
    slow = simulate(g, uniform(g), [job], SimOptions(latency_s=1e-3)).job("j").comm_mean_s
    assert slow - base == pytest.approx(len(buckets) * 2 * (n - 1) * 1e-3, rel=1e-9)


def test_mtu_counts_wire_bytes():
    """With an MTU, every transfer costs common.units.wire_bytes of its payload."""
    g = fat_tree(4)
    placement, size = ("h1", "h2", "h3", "h4"), 4 * 4 * 10_000
    res = simulate(g, uniform(g), [SimJob("j", placement, "ring", (size,), 0.0, 1)], SimOptions(mtu=1500))
    assert res.job("j").comm_mean_s == pytest.approx(6 * wire_bytes(size // 4, 1500) / B_BYTES_PER_S, rel=1e-12)


# -- aggregation, determinism, timing ------------------------------------------------------------



def test_estimates_aggregate_like_the_report():
    """comm_mean_s is the mean over iterations of measure.iterations.job_iteration_times' slowest-rank time."""
    from measure.iterations import job_iteration_times

    g = fat_tree(4)
    res = simulate(g, uniform(g), contending_mix())
    times = job_iteration_times(res.records)
    for est in res.jobs:
        its = times[est.job]
        assert est.iterations == len(its)
        assert est.comm_mean_s == pytest.approx(sum(v.comm_s for v in its.values()) / len(its), rel=1e-12)
        assert est.compute_mean_s == pytest.approx(sum(v.compute_s for v in its.values()) / len(its), rel=1e-12)


def test_same_inputs_same_results_whatever_the_job_order():
    """Two runs give identical results; reversing the jobs list changes no job's records or estimate."""
    g = fat_tree(4)
    jobs = contending_mix()
    first = simulate(g, uniform(g), jobs, SimOptions(mtu=1500, latency_s=1e-5))
    assert simulate(g, uniform(g), jobs, SimOptions(mtu=1500, latency_s=1e-5)) == first
    rev = simulate(g, uniform(g), list(reversed(jobs)), SimOptions(mtu=1500, latency_s=1e-5))
    assert rev.records == first.records
    assert sorted(rev.jobs, key=lambda e: e.job) == sorted(first.jobs, key=lambda e: e.job)


def test_compute_and_start_time():
    """Alone, an iteration is compute then the contention-free comm; a later start shifts only the clock."""
    g = fat_tree(4)
    placement, size = ("h1", "h2", "h3", "h4"), 4 * 4 * 1000
    quick = simulate(g, uniform(g), [SimJob("j", placement, "ring", (size,), 0.0, 3)]).job("j")
    job = SimJob("j", placement, "ring", (size,), 0.02, 3)
    res = simulate(g, uniform(g), [job])
    est = res.job("j")
    assert est.comm_mean_s == pytest.approx(quick.comm_mean_s, rel=1e-12)
    assert est.iteration_mean_s == pytest.approx(0.02 + est.comm_mean_s, rel=1e-12)
    starts = sorted({r.start_s for r in res.records})
    assert [b - a for a, b in itertools.pairwise(starts)] == pytest.approx([0.02 + est.comm_mean_s] * 2, rel=1e-9)
    late = simulate(g, uniform(g), [SimJob("j", placement, "ring", (size,), 0.02, 3, start_s=1.5)])
    assert late.job("j").finish_s == pytest.approx(est.finish_s + 1.5, rel=1e-12)
    assert late.job("j").comm_mean_s == pytest.approx(est.comm_mean_s, rel=1e-9)


# -- errors and layering -------------------------------------------------------------------------

def test_bad_inputs_fail_with_the_offending_value():
    """Duplicate names, unknown collectives, odd bucket sizes and missing rates are named."""
    g = fat_tree(4)
    job = SimJob("j", ("h1", "h2"), "ring", (400,), 0.0, 1)
    with pytest.raises(JobError, match="repeated: j"):
        simulate(g, uniform(g), [job, job])
    with pytest.raises(JobError, match="ringg"):
        simulate(g, uniform(g), [SimJob("j", ("h1", "h2"), "ringg", (400,), 0.0, 1)])
    with pytest.raises(JobError, match="multiple of 4"):
        simulate(g, uniform(g), [SimJob("j", ("h1", "h2"), "ring", (401,), 0.0, 1)])
    with pytest.raises(TopologyError, match="h1-e1|e1-h1"):
        simulate(g, {}, [job])
    with pytest.raises(TopologyError, match="'h99' is not a machine"):
        simulate(g, uniform(g), [SimJob("j", ("h99",), "ring", (400,), 0.0, 1)])
    with pytest.raises(JobError, match="compute_s"):
        SimJob("j", ("h1",), "ring", (4,), -1.0, 1)
    with pytest.raises(JobError, match="latency_s"):
        SimOptions(latency_s=-1.0)
    assert EPS > 0


def test_flowsim_loads_no_emulator():
    """Importing sim.flowsim loads no mininet, os_ken or torch."""
    code = ("import sys, sim.flowsim; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'mininet', 'os_ken', 'emulator')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# -- token buckets -------------------------------------------------------------------------------
# hd on (h1, h1, h2): per bucket of S bytes, rank 2 sends S to rank 0 (h2 -> e1 -> h1), ranks 0
# and 1 exchange in memory, then rank 0 sends S to rank 2 (h1 -> e1 -> h2): one transfer per
# direction, one after the other. A compute of 10 ms refills any bucket (125 000 bytes at B).

DEPTH = 15000.0
ONE_EACH_WAY = ("h1", "h1", "h2")


@pytest.mark.parametrize("latency_s", [0.0, 1e-4])
def test_bucket_carries_a_small_transfer_at_once(latency_s):
    """A transfer of fewer bytes than the buckets of its idle path hold takes no time beyond its latency."""
    g = fat_tree(4)
    job = SimJob("j", ONE_EACH_WAY, "hd", (8000,), 0.01, 3)
    res = simulate(g, uniform(g), [job], SimOptions(latency_s=latency_s, burst_bytes=DEPTH))
    assert per_iteration_comm(res, "j") == pytest.approx([2 * latency_s] * 3, rel=1e-12, abs=1e-15)


def test_bucket_shortens_a_large_transfer_by_its_depth():
    """A transfer of S > B bytes on an idle path takes (S - B) * 8 / rate."""
    g = fat_tree(4)
    size = 40000
    res = simulate(g, uniform(g), [SimJob("j", ONE_EACH_WAY, "hd", (size,), 0.01, 3)], SimOptions(burst_bytes=DEPTH))
    assert per_iteration_comm(res, "j") == pytest.approx([2 * (size - DEPTH) / B_BYTES_PER_S] * 3, rel=1e-12)


@pytest.mark.parametrize("gap_s", [0.00048, 0.01])
def test_back_to_back_transfers_get_only_what_the_gap_refilled(gap_s):
    """A 2-rank ring sends two chunks back to back on each link: the second gets no burst; after a
    compute gap g the next bucket's first chunk gets min(B, g * rate) (6000 bytes, then capped)."""
    g = fat_tree(4)
    chunk = 40000
    res = simulate(g, uniform(g), [SimJob("j", ("h1", "h2"), "ring", (2 * chunk,), gap_s, 3)],
                   SimOptions(burst_bytes=DEPTH))
    refill = min(DEPTH, gap_s * B_BYTES_PER_S)
    # the barrier before the first iteration takes 8 bytes, which the first compute gap refills
    want = [(2 * chunk - DEPTH) / B_BYTES_PER_S] + [(2 * chunk - refill) / B_BYTES_PER_S] * 2
    assert per_iteration_comm(res, "j") == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("shallow", [("h1", "e1"), ("e1", "h2")])
def test_burst_is_the_least_bucket_of_the_path(shallow):
    """With one link of h1 -> e1 -> h2 at 5000 bytes and the rest at 15 000, that way bursts 5000 bytes."""
    g = fat_tree(4)
    depths = {(u, v): DEPTH for u, v in g.edges()}
    depths.update({shallow: 5000.0, shallow[::-1]: DEPTH})
    size = 20000
    res = simulate(g, uniform(g), [SimJob("j", ONE_EACH_WAY, "hd", (size,), 0.01, 2)], SimOptions(burst_bytes=depths))
    want = ((size - DEPTH) + (size - 5000.0)) / B_BYTES_PER_S
    assert per_iteration_comm(res, "j") == pytest.approx([want] * 2, rel=1e-12)


def test_ring_steps_drain_the_buckets():
    """A 3-rank ring of 6000-byte chunks, B = 15 000: in the first bucket two steps pass at once, the
    third bursts the 3000 bytes left and the fourth none (9000 bytes' time); the second bucket,
    right after on saturated links, gets no burst (24 000 bytes' time)."""
    g = fat_tree(4)
    placement, size = ("h1", "h2", "h3"), 3 * 6000
    assert job_collisions(g, uniform(g), placement, "ring", [size]) == 0
    res = simulate(g, uniform(g), [SimJob("j", placement, "ring", (size, size), 0.01, 2)],
                   SimOptions(burst_bytes=DEPTH))
    want = (9000 / B_BYTES_PER_S, 24000 / B_BYTES_PER_S)
    assert len(res.records) == 6
    for rec in res.records:
        assert rec.bucket_comm_s == pytest.approx(want, rel=1e-12)
    assert res.job("j").comm_mean_s == pytest.approx(33000 / B_BYTES_PER_S, rel=1e-12)


@pytest.mark.parametrize("depths", ["number", "mapping"])
def test_buckets_keep_results_deterministic_and_job_order_free(depths):
    """With token buckets, two runs are identical and reversing the jobs list changes nothing."""
    g = fat_tree(4)
    jobs = contending_mix()
    burst = DEPTH if depths == "number" else {e: 4000.0 * (1 + i % 4) for i, e in enumerate(sorted(g.edges()))}
    options = SimOptions(mtu=1500, latency_s=1e-5, burst_bytes=burst)
    first = simulate(g, uniform(g), jobs, options)
    assert first != simulate(g, uniform(g), jobs, SimOptions(mtu=1500, latency_s=1e-5))
    assert simulate(g, uniform(g), jobs, options) == first
    rev = simulate(g, uniform(g), list(reversed(jobs)), options)
    assert rev.records == first.records
    assert sorted(rev.jobs, key=lambda e: e.job) == sorted(first.jobs, key=lambda e: e.job)


def _flows_per_link(g, jobs) -> dict[tuple[str, str], int]:
    """Per directed link, the most flows all the jobs together can put on it at once: the sum over
    jobs of the most transfers one step of the job sends across it."""
    total: dict[tuple[str, str], int] = {}
    for job in jobs:
        most: dict[tuple[str, str], int] = {}
        for steps in job_steps(job.collective, len(job.machines_by_rank), job.bucket_bytes):
            for step in steps:
                count: dict[tuple[str, str], int] = {}
                for src, dst, nbytes in step:
                    a, b = job.machines_by_rank[src], job.machines_by_rank[dst]
                    if a != b and nbytes:
                        for link in path_links(ecmp_path(g, a, b)):
                            count[link] = count.get(link, 0) + 1
                for link, n in count.items():
                    most[link] = max(most.get(link, 0), n)
        for link, n in most.items():
            total[link] = total.get(link, 0) + n
    return total


def test_contended_estimates_lie_between_bounds_derived_without_the_simulator():
    """The pinned mix below, checked by bounds that do not come from the simulator: each job's
    communication is at least its contention-free chained bound (``jobs.steps``), and at most the
    same bound with every link's rate divided by the most flows the four jobs can put on it at once
    (max-min gives each flow at least that share) plus the fixed latency of every step; its run
    ends no earlier than all its iterations at the contention-free bound. Contention shows: some
    job is above its contention-free bound."""
    g = fat_tree(4)
    rates, jobs, latency = uniform(g), contending_mix(), 1e-5
    res = simulate(g, rates, jobs, SimOptions(mtu=1500, latency_s=latency))
    flows = _flows_per_link(g, jobs)
    shared = {**rates, **{link: (rates.get(link) or rates[link[::-1]]) / n for link, n in flows.items()}}
    estimates = {e.job: e for e in res.jobs}
    above = []
    for job in jobs:
        est = estimates[job.name]
        args = (list(job.machines_by_rank), job.collective, job.bucket_bytes)
        lo = job_bound_s(g, rates, *args, mtu=1500)
        steps = sum(len(s) for s in job_steps(job.collective, len(job.machines_by_rank), job.bucket_bytes))
        hi = job_bound_s(g, shared, *args, mtu=1500) + steps * latency
        assert lo <= est.comm_mean_s <= hi, (job.name, lo, est.comm_mean_s, hi)
        runs = job.warmup_iterations + job.iterations
        assert est.finish_s >= job.start_s + runs * (job.compute_s + lo)
        above.append(est.comm_mean_s > lo * 1.01)
    assert len(above) == 4 and any(above)


def test_without_buckets_results_are_unchanged_bit_for_bit():
    """burst_bytes None (and a depth of 0) reproduce the estimates of the model without buckets exactly
    (a regression pin beside the bounds of
    :func:`test_contended_estimates_lie_between_bounds_derived_without_the_simulator`)."""
    g = fat_tree(4)
    res = simulate(g, uniform(g), contending_mix(), SimOptions(mtu=1500, latency_s=1e-5))
    golden = {  # float.hex of (comm_mean_s, finish_s), computed before token buckets were modelled
        "a": ("0x1.5de81cc01c353p-8", "0x1.2f2f588e9fcefp-5"),
        "b": ("0x1.a3cd1ecac3bf2p-7", "0x1.d95617ad4325bp-6"),
        "c": ("0x1.73899df2586f8p-8", "0x1.fe7f6e3d2f2aep-6"),
        "d": ("0x1.a55ba22b9659fp-8", "0x1.9ec615c4b197dp-6"),
    }
    assert {e.job: (e.comm_mean_s.hex(), e.finish_s.hex()) for e in res.jobs} == golden
    assert res.events == 965
    assert simulate(g, uniform(g), contending_mix(), SimOptions(mtu=1500, latency_s=1e-5, burst_bytes=0.0)) == res


def test_bad_bucket_depths_are_named():
    """Negative, infinite or non-numeric depths, and a mapping missing a link of a path, fail with the value."""
    with pytest.raises(JobError, match="-1"):
        SimOptions(burst_bytes=-1.0)
    with pytest.raises(JobError, match="'15k'"):
        SimOptions(burst_bytes="15k")
    with pytest.raises(JobError, match=r"\('h1', 'e1'\).*inf"):
        SimOptions(burst_bytes={("h1", "e1"): math.inf})
    g = fat_tree(4)
    with pytest.raises(TopologyError, match="h1-e1|e1-h1"):
        simulate(g, uniform(g), [SimJob("j", ("h1", "h2"), "ring", (400,), 0.0, 1)],
                 SimOptions(burst_bytes={("e1", "h2"): DEPTH, ("h2", "e1"): DEPTH}))


@pytest.mark.parametrize("collective", ["ring", "hd", "gloo"])
def test_step_plan_matches_the_agents_rank_steps(collective):
    """Each rank's per-step sends, hand-overs and reception counts are those of workers.agent.rank_steps."""
    from sim.flowsim import _Job
    from workers.agent import rank_steps

    ranks = ("m0", "m0", "m1", "m2", "m2", "m2")
    spec = SimJob(name="j", machines_by_rank=ranks, collective=collective, bucket_bytes=(4, 400, 4000),
                  compute_s=0.0, iterations=1)
    job = _Job(0, 0, spec, lambda a, b: (a, b), 1500)
    for size in (4, 400, 4000, barrier_bytes(len(ranks))):
        for r in range(len(ranks)):
            expected = rank_steps(collective, len(ranks), r, size)
            assert len(job.plan[size]) == len(expected)
            for (local, remote, n_recv), (sends, recvs) in zip((step[r] for step in job.plan[size]), expected,
                                                               strict=True):
                assert n_recv == len(recvs)
                assert local == tuple(d for d, b in sends if b == 0 or ranks[d] == ranks[r])
                assert remote == tuple((i, d, float(wire_bytes(b, 1500)), (ranks[r], ranks[d]))
                                       for i, (d, b) in enumerate(sends) if b and ranks[d] != ranks[r])
