"""In-network aggregation in the fluid simulator (sim.ina, sim.maxmin.fill_levels, sim.fluid).

The NetPack spec's worked examples are exact tests here: Table 1 (one switch, one job, partial
INA), Fig. 5's flow counts, Fig. 14a/b's aggregation ratios; and the fluid engine's rates are
checked against the independent implementation of NetPack's Algorithm 1 that the placement policy
uses (placement.netpack.waterfill) on random placements.
"""

from __future__ import annotations

import math
import random

import pytest

from common.errors import JobError
from common.units import MEGA
from jobs.models import get_model, scaled_buckets
from placement.netpack.network import Fabric, NetJob
from placement.netpack.waterfill import waterfill
from sim.flowsim import FlowEngine, SimJob, SimOptions
from sim.fluid import FluidEngine
from sim.ina import InaSpec, ina_routes, rate_alone, stream_bytes, streams
from sim.maxmin import AggregatedDemand, fill_levels, maxmin_levels
from topo import build_topology
from topo.routing import ecmp_path, path_links


def one_switch_job(n: int, pat: float, uplink: float = 100.0, jobs: int = 1):
    """``jobs`` identical jobs of ``n`` workers at rate 1 behind one aggregator of PAT ``pat``, each
    with its own link to its PS (capacity ``uplink``): Table 1's setting."""
    demands = [AggregatedDemand(((0, 1.0),), lambda spilled, j=j: ((j, float(n) if spilled else 1.0),))
               for j in range(jobs)]
    return fill_levels(demands, [uplink] * jobs, [pat])


@pytest.mark.parametrize("pat", [0.0, 0.25, 0.5, 1.0, 2.0])
def test_table_1_one_job_aggregates_min_of_pat_and_rate(pat):
    fill = one_switch_job(4, pat)
    assert fill.levels == [1.0]
    assert fill.aggregated_fraction(0, 0) == pytest.approx(min(1.0, pat))  # Fig. 14a: y = x


def test_table_1_partial_ina_loads_the_uplink_with_a_plus_c_minus_a_times_n():
    """Uplink load A + (C - A) * n: with A = 0.5, n = 4 it is 2.5 at C = 1; an uplink of 2 holds
    the job at the rate where 0.5 + 4 (C - 0.5) = 2, C = 0.875."""
    fill = one_switch_job(4, 0.5, uplink=2.0)
    assert fill.levels[0] == pytest.approx(0.875)
    assert fill.aggregated_fraction(0, 0) == pytest.approx(0.5 / 0.875)


@pytest.mark.parametrize("x", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0])
def test_fig_14b_two_jobs_share_the_pat(x):
    """PAT ratio 1 is enough for one job: two identical jobs each get y = 0.5 x (at most 1)."""
    fill = one_switch_job(2, x, jobs=2)
    assert [fill.aggregated_fraction(j, 0) for j in (0, 1)] == pytest.approx([min(1.0, x / 2)] * 2)


def test_a_spill_onto_a_full_link_freezes_the_job_there():
    """Job 0 alone would fill link 1 at level 0.5; job 1 crosses it once its aggregator runs out
    (at 0.25, link 1 then half full): the 0.5 left is shared by weights 2 + 1, both end at 5/12."""
    plain = [(1, 2.0)]
    agg = AggregatedDemand(((0, 1.0),), lambda spilled: ((0, 1.0), (1, 1.0)) if spilled else ((0, 1.0),))
    fill = fill_levels([plain, agg], [10.0, 1.0], [0.25])
    assert fill.levels == pytest.approx([5 / 12, 5 / 12])
    assert fill.spilled[1] == {0: pytest.approx(0.25)}
    assert fill.aggregated_fraction(1, 0) == pytest.approx(0.6)


def test_without_aggregators_it_is_the_weighted_maxmin():
    rng = random.Random(3)
    for _ in range(50):
        caps = [rng.uniform(0.1, 5) for _ in range(6)]
        demands = [[(link, rng.uniform(0.1, 3)) for link in sorted(rng.sample(range(6), rng.randint(1, 4)))]
                   for _ in range(rng.randint(1, 8))]
        levels = maxmin_levels(demands, caps)
        for link, cap in enumerate(caps):  # no link over capacity
            load = sum(w * lv for d, lv in zip(demands, levels, strict=True) for lk, w in d if lk == link)
            assert load <= cap * (1 + 1e-9)
        for d, lv in zip(demands, levels, strict=True):  # every job below 1 is held by a full link
            assert lv == pytest.approx(1.0) or any(
                sum(w2 * lv2 for d2, lv2 in zip(demands, levels, strict=True) for lk2, w2 in d2 if lk2 == lk)
                >= caps[lk] * (1 - 1e-9) for lk, _ in d)


# -- Fig. 5: flow counts on a routed fabric -----------------------------------------------------


def fig5():
    """Four racks of 3 machines, one spine: the PS rack (l2) holds 2 workers and the PS machine
    (h6), the leaf racks l1, l3, l4 two workers each (8 workers)."""
    g = build_topology("leaf_spine", n_leaf=4, n_spine=1, hosts_per_leaf=3)
    machines = ("h1", "h2", "h4", "h5", "h7", "h8", "h10", "h11")
    routes = ina_routes(g, machines, InaSpec("h6", ("l1", "l2", "l3", "l4")),
                        lambda a, b: path_links(ecmp_path(g, a, b)))
    return g, routes


@pytest.mark.parametrize("spilled, fc, fs", [
    ((), 3, 1),  # C < A_1
    (("l1",), 4, 1),  # A_1 < C < A_p
    (("l1", "l2"), 4, 6),  # A_p < C < A_3: 2 local + 4
    (("l1", "l2", "l3"), 5, 7),  # A_3 < C < A_4
    (("l1", "l2", "l3", "l4"), 6, 8),  # C > A_4
])
def test_fig_5_flow_counts(spilled, fc, fs):
    _, routes = fig5()
    assert routes.aggregators == ("l1", "l3", "l4", "l2")
    up = streams(routes, frozenset(spilled))
    assert (up[("s1", "l2")], up[("l2", "h6")]) == (fc, fs)
    assert up[("h6", "l2")] == 8  # unicast results: one per worker, whatever was summed
    mirrored = streams(routes, frozenset(spilled), "multicast")
    assert (mirrored[("l2", "s1")], mirrored[("h6", "l2")]) == (fc, fs)


def test_a_single_child_tor_sums_nothing_and_the_ps_machine_is_no_child():
    g = build_topology("leaf_spine", n_leaf=2, n_spine=1, hosts_per_leaf=2)
    path = lambda a, b: path_links(ecmp_path(g, a, b))  # noqa: E731
    both = ("l1", "l2")
    # h1 is the PS (loopback): l1 has one child (h2); l2's h3 alone is no leaf.
    assert ina_routes(g, ("h1", "h2"), InaSpec("h1", both), path).aggregators == ()
    assert ina_routes(g, ("h1", "h3"), InaSpec("h1", both), path).aggregators == ()
    routes = ina_routes(g, ("h1", "h2", "h3"), InaSpec("h1", both), path)
    assert routes.aggregators == ("l1",)  # the root sums h2 and h3
    assert streams(routes, frozenset())[("l1", "h1")] == 1
    assert streams(routes, frozenset({"l1"}))[("l1", "h1")] == 2
    off = ina_routes(g, ("h1", "h2", "h3", "h4"), InaSpec("h1", ()), path)
    assert off.aggregators == () and streams(off, frozenset())[("s1", "l1")] == 2


def test_stream_bytes_are_ina_frames_on_the_wire():
    assert stream_bytes([128, 4], wire=False) == 132
    assert stream_bytes([128, 4], wire=True) == 2 * 190


# -- the fluid engine ---------------------------------------------------------------------------


def engine(g, pat_gbps=math.inf, results="unicast", fast=()):
    """10 Gb/s links, 100 Gb/s for the machines of ``fast``."""
    rates = {(u, v): 100_000.0 if u in fast or v in fast else 10_000.0 for u, v in g.edges()}
    return FluidEngine(g, rates, SimOptions(pat_bytes_s=pat_gbps * 1e9 / 8, ina_results=results))


def ina_job(name, machines, ps, switches, gbytes=1.0):
    return SimJob(name, tuple(machines), "ina", (int(gbytes * 1e9),), compute_s=0.0, iterations=10,
                  ina=InaSpec(ps, tuple(switches)))


@pytest.mark.parametrize("ratio", [0.0, 0.3, 0.7, 1.0, 1.5])
def test_fig_14a_in_the_engine_one_job_aggregates_at_the_pat_ratio(ratio):
    """§5.2's micro-benchmark: 2 workers and a PS in one rack, the job at 10 Gb/s (the workers'
    links) and the PS on 100 Gb/s: PAT ratio x gives aggregation ratio min(1, x) at full rate."""
    g = build_topology("leaf_spine", n_leaf=1, n_spine=1, hosts_per_leaf=3)
    e = engine(g, pat_gbps=10 * ratio, results="multicast", fast=("h3",))
    e.add(ina_job("a", ("h1", "h2"), "h3", ("l1",)))
    e.advance(0.0)
    assert e.aggregation("a") == {"l1": pytest.approx(min(1.0, ratio))}
    assert e.levels()["a"] == pytest.approx(1.0)


@pytest.mark.parametrize("ratio", [0.0, 0.3, 0.7, 1.0])
def test_a_ps_on_a_worker_rate_link_is_slowed_by_the_spill(ratio):
    """The same job with the PS on 10 Gb/s: its link carries x + 2 (level - x), full at level (1 + x) / 2."""
    g = build_topology("leaf_spine", n_leaf=1, n_spine=1, hosts_per_leaf=3)
    e = engine(g, pat_gbps=10 * ratio, results="multicast")
    e.add(ina_job("a", ("h1", "h2"), "h3", ("l1",)))
    e.advance(0.0)
    assert e.levels()["a"] == pytest.approx((1 + ratio) / 2)
    assert e.aggregation("a")["l1"] == pytest.approx(2 * ratio / (1 + ratio))


@pytest.mark.parametrize("ratio", [0.0, 0.3, 0.7, 1.0, 2.0])
def test_a_jobs_rate_alone_under_a_pat_is_the_engines(ratio):
    """rate_alone, the fidelity bound's rate of an INA job alone: the job above on links of 10, PAT
    10 x ratio. Results multicast: the PS's link carries x + 2 (rate - x) each way, so the rate is
    10 (1 + x) / 2 up to a PAT of 10, the engine's level times 10; results unicast: the PS's link
    sends a result to each of the 2 machines whatever the switch sums, 5 at every PAT."""
    g = build_topology("leaf_spine", n_leaf=1, n_spine=1, hosts_per_leaf=3)
    routes = ina_routes(g, ("h1", "h2"), InaSpec("h3", ("l1",)), lambda a, b: path_links(ecmp_path(g, a, b)))
    capacity = {link: 10.0 for u, v in g.edges for link in ((u, v), (v, u))}
    assert rate_alone(routes, capacity, 10 * ratio, "multicast") == pytest.approx(10 * (1 + min(ratio, 1)) / 2)
    assert rate_alone(routes, capacity, 10 * ratio, "unicast") == pytest.approx(5.0)
    assert rate_alone(routes, capacity, math.inf, "multicast") == pytest.approx(10.0)
    e = engine(g, pat_gbps=10 * ratio, results="multicast")
    e.add(ina_job("a", ("h1", "h2"), "h3", ("l1",)))
    e.advance(0.0)
    assert e.levels()["a"] * 10 == pytest.approx(rate_alone(routes, capacity, 10 * ratio, "multicast"))
    with pytest.raises(JobError, match="no capacity"):
        rate_alone(routes, {}, 1.0, "multicast")


@pytest.mark.parametrize("ratio", [0.0, 0.5, 1.0, 2.0, 3.0])
def test_fig_14b_in_the_engine_two_jobs_share_the_pat(ratio):
    """Two such jobs in one rack, PAT ratio 1 = enough for one: each aggregates min(1, x / 2)."""
    g = build_topology("leaf_spine", n_leaf=1, n_spine=1, hosts_per_leaf=6)
    e = engine(g, pat_gbps=10 * ratio, results="multicast", fast=("h3", "h6"))
    e.add(ina_job("a", ("h1", "h2"), "h3", ("l1",)))
    e.add(ina_job("b", ("h4", "h5"), "h6", ("l1",)))
    e.advance(0.0)
    assert [e.aggregation(j)["l1"] for j in ("a", "b")] == pytest.approx([min(1.0, ratio / 2)] * 2)


def test_ina_quarters_a_ps_bound_job_and_unicast_results_keep_the_ps_downlink_busy():
    g = build_topology("leaf_spine", n_leaf=1, n_spine=1, hosts_per_leaf=5)
    times = {}
    for results in ("multicast", "unicast"):
        for switches in (("l1",), ()):
            e = engine(g, results=results)
            e.add(ina_job("a", ("h1", "h2", "h3", "h4"), "h5", switches))
            (run,) = e.advance(math.inf)
            times[results, bool(switches)] = run.comm_s / run.measured
    assert times["multicast", True] * 4 == pytest.approx(times["multicast", False])
    assert times["unicast", True] == pytest.approx(times["unicast", False])  # the PS sends 4 streams anyway
    assert times["multicast", True] == pytest.approx(1e9 / (10_000 * MEGA / 8))  # payload (no mtu) at 10 Gb/s


def test_the_engine_agrees_with_netpacks_water_filling_on_random_placements():
    """Random INA jobs on a 1-spine leaf-spine (a rack's uplink is one link: NetPack's one big
    switch), results multicast (NetPack's undirected links), PS loopback: every job's per-worker
    rate is NetPack Algorithm 1's."""
    g = build_topology("leaf_spine", n_leaf=4, n_spine=1, hosts_per_leaf=4, oversubscription=2)
    machines = [n for n, d in g.nodes(data=True) if d.get("role") == "machine"]
    tors = ("l1", "l2", "l3", "l4")
    rng = random.Random(7)
    gbps = {(u, v): d["bw_mbps"] / 1000 for u, v, d in g.edges(data=True)}
    for _ in range(25):
        pat = rng.choice([0.0, 2.0, 5.0, 12.0, 100.0])
        e = FluidEngine(g, {k: v * 1000 for k, v in gbps.items()},
                        SimOptions(pat_bytes_s=pat * 1e9 / 8, ina_results="multicast"))
        jobs = []
        for j in range(rng.randint(1, 4)):
            ms = tuple(rng.sample(machines, rng.randint(2, 6)))
            ps = rng.choice(ms) if rng.random() < 0.5 else rng.choice(machines)
            ina = tuple(t for t in tors if rng.random() < 0.8)
            jobs.append((f"j{j}", ms, ps, ina))
            e.add(ina_job(f"j{j}", ms, ps, ina))
        e.advance(0.0)
        fabric = Fabric.from_graph(g, pat)
        want = waterfill(fabric, [NetJob(n, ms, ps, frozenset(ina)) for n, ms, ps, ina in jobs],
                         ps_loopback=True).rate
        for name, ms, ps, ina in jobs:
            routes = ina_routes(g, ms, InaSpec(ps, ina), lambda a, b: path_links(ecmp_path(g, a, b)))
            full = streams(routes, frozenset(), "multicast")
            per_stream_gbps = min(gbps.get(link, gbps.get(link[::-1])) / k for link, k in full.items())
            assert e.levels()[name] * per_stream_gbps == pytest.approx(want[name], rel=1e-6), (pat, jobs)


def test_the_step_level_engine_refuses_ina_jobs():
    g = build_topology("leaf_spine", n_leaf=1, n_spine=1, hosts_per_leaf=3)
    with pytest.raises(JobError, match="step-level simulator does not model in-network aggregation"):
        FlowEngine(g, {(u, v): 1000.0 for u, v in g.edges()}).add(ina_job("a", ("h1", "h2"), "h3", ("l1",)))


def test_an_ina_job_without_its_ps_or_with_an_unknown_switch_is_one_error():
    g = build_topology("leaf_spine", n_leaf=1, n_spine=1, hosts_per_leaf=3)
    e = engine(g)
    with pytest.raises(JobError, match="needs its PS host"):
        e.add(SimJob("a", ("h1", "h2"), "ina", (400,), 0.0, 1))
    with pytest.raises(JobError, match="'x9' is not a switch"):
        e.add(ina_job("a", ("h1", "h2"), "h3", ("x9",)))


def test_a_ring_and_an_ina_job_share_a_link_half_and_half():
    """A 2-rank ring h1 <-> h2 and an INA job streaming h2 -> h3 (its PS): both would fill h2's uplink
    alone, and the fill gives each half (one level unit each: the ring's of its own speed, the INA
    job's a per-worker rate, the fastest link's here)."""
    g = build_topology("leaf_spine", n_leaf=1, n_spine=1, hosts_per_leaf=3)
    e = engine(g)
    e.add(SimJob("r", ("h1", "h2"), "ring", (10_000_000,), compute_s=0.0, iterations=10))
    e.add(ina_job("i", ("h2",), "h3", ("l1",)))
    e.advance(0.0)
    assert e.levels() == {"i": pytest.approx(0.5), "r": pytest.approx(0.5)}


def sim_cfg(**over):
    from experiment.config.schema import from_dict

    return from_dict({
        "name": "ina-sim", "scale": 1, "iterations": 4, "warmup_iterations": 0,
        "topology": {"kind": "leaf_spine", "n_leaf": 2, "n_spine": 1, "hosts_per_leaf": 3, "gpus_per_machine": 1},
        "jobs": [{"name": "a", "model": "vgg16", "workers": 4, "collective": "ina"}],
        "policies": ["consolidate"], "simulator": {"mode": "fluid", "headers": False},
        "ina": {"results": "multicast"}, **over})


@pytest.mark.parametrize("pat, switches, ps_streams", [(1000, [], 1), (0, [], 3), (1000, ["l2"], 3)])
def test_an_experiment_on_the_simulator_runs_ina_jobs(pat, switches, ps_streams):
    """4 workers on 1-GPU machines, consolidated: h1-h3 under l1, h4 under l2, the PS on h1 (rank 0's
    machine, loopback). With l1 summing h2, h3 and h4 (l2 has one machine: no leaf) the PS's link
    carries 1 stream; without PAT, or with INA on l2 only, 3."""
    from experiment.config.schema import validate
    from experiment.run.simrun import simulate_policy

    cfg = sim_cfg(ina={"results": "multicast", "pat_gbps": pat, "switches": switches})
    (row,) = simulate_policy(cfg, validate(cfg, backend="sim"), "consolidate").summary.jobs
    assert row.machines == ("h1", "h2", "h3", "h4")
    gradient = sum(scaled_buckets(get_model("vgg16"), 1))
    assert row.comm_mean_s == pytest.approx(ps_streams * gradient / (10_000 * MEGA / 8))


def test_every_shipped_experiment_validates_for_its_back_ends():
    """Traces run on the simulator only; netpack.yaml runs on both (its INA jobs in fluid mode)."""
    import glob
    import os

    from experiment.config.schema import load, validate

    paths = sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(__file__)), "experiments", "*.yaml")))
    assert len(paths) >= 6
    for path in paths:
        cfg = load(path)
        if cfg.trace.file:
            validate(cfg, backend="sim")
        else:
            validate(cfg)
    validate(load(os.path.join(os.path.dirname(paths[0]), "netpack.yaml")), backend="sim")


def test_the_netpack_simulator_experiment_runs_a_slice(tmp_path, monkeypatch):
    """experiments/netpack_sim.yaml's first 60 Philly jobs under netpack and gpu_balance: every job
    finishes, the distributed ones communicate, NetPack names each INA job's switches and the baseline
    leaves INA on for every job."""
    import dataclasses
    import io
    import json
    import os

    from experiment.config.schema import load
    from experiment.run.driver import run_experiment
    from experiment.run.simrun import SimulatorExperiment

    root = os.path.dirname(os.path.dirname(__file__))
    monkeypatch.chdir(root)
    cfg = load(os.path.join(root, "experiments", "netpack_sim.yaml"))
    cfg = dataclasses.replace(cfg, trace=dataclasses.replace(cfg.trace, max_jobs=60))
    run_dir = run_experiment(cfg, SimulatorExperiment(), lambda _: None, str(tmp_path / "run"),
                             ["netpack", "gpu_balance"], stream=io.StringIO())
    summary = json.loads(open(os.path.join(run_dir, "summary.json")).read())
    assert [p["policy"] for p in summary["policies"]] == ["netpack", "gpu_balance"]
    jobs = list(json.loads(open(os.path.join(run_dir, "netpack", "summary.json")).read())["jobs"].values())
    assert len(jobs) == 60 and all(j["end_s"] >= j["start_s"] for j in jobs)
    assert any(j["comm_mean_s"] and j["comm_mean_s"] > 0 for j in jobs)
    placed = json.loads(open(os.path.join(run_dir, "netpack", "placements.json")).read())
    multi = [p for p in placed if len({m for m, _ in p["slots"]}) > 1]
    assert multi and all(p["ina_switches"] is not None and p["ps_host"] for p in multi)
    # a baseline leaves INA to the run, which turns it on at every ToR for every job (Fig. 12's setting)
    baseline = json.loads(open(os.path.join(run_dir, "gpu_balance", "placements.json")).read())
    assert baseline and all(p["ina_switches"] is None for p in baseline)
