"""Unit tests of the iteration-level simulator (``sim.fluid``) and its weighted water-filling
(``sim.maxmin.maxmin_levels``): exact times for a job alone, jobs sharing a link, an arrival in the
middle, preemption, local jobs; agreement with the step-level engine where both are exact (a job
alone), and with a brute-force reference of the model (``tests/reference_fluid.py``) under contention;
misuse fails with the offending value."""

import dataclasses
import math
import random

import numpy as np
import pytest
from conftest import uniform_rates
from reference_fluid import Demand, ReferenceFluid, water_fill

from common.errors import JobError, TopologyError
from jobs.models import get_model, scaled_buckets
from jobs.steps import job_bound_s
from sim.backend import FluidSimBackend
from sim.flowsim import SimJob, SimOptions, simulate
from sim.fluid import FluidEngine
from sim.ina import InaSpec
from sim.maxmin import maxmin_levels
from sim.overlap import Coupling
from topo import fat_tree, leaf_spine, machines

B_MBPS = 100.0
SIZE = 400_000  # a 2-rank ring moves SIZE bytes each way per iteration: SIZE / B alone
ALONE_S = SIZE * 8 / (B_MBPS * 1e6)
COMPUTE_S = 0.01


def uniform(g, mbps=B_MBPS):
    """Every link at the same rate."""
    return uniform_rates(g, mbps)


def levels_at_start(g, jobs, overlap: str) -> dict[str, float]:
    """The levels of ``jobs`` all started at 0 on ``g`` (uniform links) with ``overlap``."""
    eng = FluidEngine(g, uniform(g), SimOptions(overlap=overlap))
    for job in jobs:
        eng.add(job)
    eng.advance(0.0)
    return eng.levels()


def run_to_end(engine):
    states = []
    while done := engine.advance(math.inf):
        states.extend(done)
    return {s.job: s for s in states}


@pytest.fixture(scope="module")
def g():
    return fat_tree(4)


# -- weighted water-filling ------------------------------------------------------------------------

def test_levels_split_a_link_by_weight_and_cap_at_one():
    assert maxmin_levels([[(0, 1.0)], [(0, 1.0)]], [1.0]) == [0.5, 0.5]
    assert maxmin_levels([[(0, 1.0)], [(0, 0.2)]], [1.0]) == pytest.approx([1 / 1.2, 1 / 1.2])
    assert maxmin_levels([[(0, 0.3)], [(0, 0.2)]], [1.0]) == [1.0, 1.0]  # room for both at full speed
    assert maxmin_levels([[]], [1.0]) == [1.0]


def test_levels_freeze_at_the_first_full_link_and_let_others_grow():
    """A on l0 and l1, B on l1, C on l0 at half weight: l1 fills at 0.5 (A, B), then C alone on
    l0's remaining 0.5 at weight 0.5 reaches the cap."""
    levels = maxmin_levels([[(0, 1.0), (1, 1.0)], [(1, 1.0)], [(0, 0.5)]], [1.0, 1.0])
    assert levels == pytest.approx([0.5, 0.5, 1.0])


def test_levels_never_overload_a_link():
    demands = [[(0, 1.0), (1, 0.7)], [(1, 0.9), (2, 0.4)], [(0, 0.3), (2, 1.0)], [(2, 0.6)]]
    caps = [1.0, 0.8, 1.2]
    levels = maxmin_levels(demands, caps)
    for link, cap in enumerate(caps):
        load = sum(w * x for d, x in zip(demands, levels, strict=True) for lk, w in d if lk == link)
        assert load <= cap * (1 + 1e-9)
    # max-min: every job below the cap has a full link
    for d, x in zip(demands, levels, strict=True):
        if x < 1.0:
            full = [sum(w * y for e, y in zip(demands, levels, strict=True) for lk2, w in e if lk2 == lk)
                    >= caps[lk] * (1 - 1e-9) for lk, _ in d]
            assert any(full)


# -- the engine ------------------------------------------------------------------------------------

def test_a_job_alone_takes_compute_plus_its_bound_per_iteration(g):
    eng = FluidEngine(g, uniform(g))
    eng.add(SimJob("a", ("h1", "h5"), "ring", (SIZE,), COMPUTE_S, 10, 2, start_s=1.0))
    (run,) = run_to_end(eng).values()
    assert run.finished and run.iterations_done == 10
    assert run.end_s == pytest.approx(1.0 + 12 * (COMPUTE_S + ALONE_S))
    est = run.estimate
    assert est.comm_mean_s == pytest.approx(ALONE_S) and est.compute_mean_s == pytest.approx(COMPUTE_S)


def test_a_job_alone_agrees_with_the_step_level_engine(g):
    """Alone, both engines cost a job at its bound: the same mean communication time."""
    job = SimJob("a", ("h1", "h5", "h9", "h13"), "ring", (16000, 4000), 0.003, 3)
    steps = simulate(g, uniform(g), [job]).job("a")
    eng = FluidEngine(g, uniform(g))
    eng.add(job)
    fluid = run_to_end(eng)["a"].estimate
    assert fluid.comm_mean_s == pytest.approx(steps.comm_mean_s, rel=1e-9)
    bound = job_bound_s(g, uniform(g), job.machines_by_rank, "ring", job.bucket_bytes)
    assert fluid.comm_mean_s == pytest.approx(bound)


def test_two_jobs_on_one_link_each_communicate_at_half_speed(g):
    """a and b both cross h1's uplink at full rate: each gets level 0.5, twice its bound."""
    eng = FluidEngine(g, uniform(g))
    eng.add(SimJob("a", ("h1", "h5"), "ring", (SIZE,), COMPUTE_S, 4))
    eng.add(SimJob("b", ("h1", "h9"), "ring", (SIZE,), COMPUTE_S, 4))
    eng.advance(0.0)
    assert eng.levels() == pytest.approx({"a": 0.5, "b": 0.5})
    runs = run_to_end(eng)
    for name in "ab":
        assert runs[name].end_s == pytest.approx(4 * (COMPUTE_S + 2 * ALONE_S))
        assert runs[name].estimate.comm_mean_s == pytest.approx(2 * ALONE_S)


def _share_level(compute_s: float, bound_s: float) -> float:
    """The level x of two identical jobs alone on a link with independent phases: x = 1 / (1 + a), a the
    share of its iteration a job communicates, (b / x) / (c + b / x) = b / (c x + b); multiplied out,
    c x^2 + (2b - c) x - b = 0."""
    c, b = compute_s, bound_s
    return (-(2 * b - c) + math.sqrt((2 * b - c) ** 2 + 4 * c * b)) / (2 * c)


@pytest.mark.parametrize("compute_s", [COMPUTE_S, ALONE_S, 10 * ALONE_S])
def test_independent_overlap_gives_two_identical_jobs_the_mean_field_level(g, compute_s):
    """With overlap independent, a and b (each alone at full rate on h1's uplink) each meet the other's
    traffic for the share of time it communicates: level x = 1 / (1 + a(x)), the root of
    c x^2 + (2b - c) x - b = 0, between the together level 1/2 and 1; more compute, closer to 1."""
    eng = FluidEngine(g, uniform(g), SimOptions(overlap="independent"))
    eng.add(SimJob("a", ("h1", "h5"), "ring", (SIZE,), compute_s, 4))
    eng.add(SimJob("b", ("h1", "h9"), "ring", (SIZE,), compute_s, 4))
    eng.advance(0.0)
    want = _share_level(compute_s, ALONE_S)
    assert 0.5 < want < 1 and eng.levels() == pytest.approx({"a": want, "b": want}, rel=1e-5)
    a = (ALONE_S / want) / (compute_s + ALONE_S / want)
    assert want == pytest.approx(1 / (1 + a), rel=1e-5)
    runs = run_to_end(eng)
    assert runs["a"].estimate.comm_mean_s == pytest.approx(ALONE_S / want, rel=1e-5)


def test_independent_overlap_is_max_min_for_jobs_that_only_communicate_and_never_below_it(g):
    """Jobs with no compute communicate all the time, so the independent overlap is the fill itself; with
    compute, no job falls below its fill level, and a job alone is unchanged."""
    jobs = [SimJob(name, machines, "ring", (SIZE,), 0.0, 4) for name, machines in
            (("a", ("h1", "h5")), ("b", ("h1", "h9")), ("c", ("h1", "h2", "h9")), ("d", ("h13", "h14")))]
    levels = {overlap: levels_at_start(g, jobs, overlap) for overlap in ("together", "independent")}
    assert levels["independent"] == pytest.approx(levels["together"], rel=1e-6)
    computing = levels_at_start(g, [dataclasses.replace(j, compute_s=ALONE_S) for j in jobs], "independent")
    assert all(computing[j] >= levels["together"][j] - 1e-12 for j in "abcd")
    assert computing["a"] > levels["together"]["a"] and computing["d"] == 1.0
    with pytest.raises(JobError, match="unknown overlap 'sometimes'"):
        SimOptions(overlap="sometimes")


def test_independent_overlap_lets_a_ring_use_an_ina_job_s_link_while_the_ina_job_computes():
    """An INA job (PS h9, workers h13 and h14 summed at l4, results unicast) and a ring on h13 and h15 share
    h13's link: together, the ring gets what the INA job's stream leaves it all the time; independent, it
    meets that stream only while the INA job communicates, so it runs faster, and the INA job no slower."""
    ls = leaf_spine(4, 2, 4, oversubscription=2)
    jobs = [SimJob("ina", ("h9", "h13", "h14"), "ina", (SIZE,), ALONE_S, 4, ina=InaSpec("h9", ("l3", "l4"))),
            SimJob("ring", ("h13", "h15"), "ring", (SIZE,), ALONE_S, 4)]
    levels = {overlap: levels_at_start(ls, jobs, overlap) for overlap in ("together", "independent")}
    assert levels["together"]["ring"] < levels["independent"]["ring"] < 1
    assert levels["independent"]["ina"] >= levels["together"]["ina"] - 1e-12


def test_an_arrival_slows_a_running_job_from_then_on(g):
    """b arrives after a has run 2 iterations alone; a's remaining 2 run at half speed, and b
    speeds up to full when a ends."""
    t_alone = COMPUTE_S + ALONE_S
    t_shared = COMPUTE_S + 2 * ALONE_S
    eng = FluidEngine(g, uniform(g))
    eng.add(SimJob("a", ("h1", "h5"), "ring", (SIZE,), COMPUTE_S, 4))
    eng.add(SimJob("b", ("h1", "h9"), "ring", (SIZE,), COMPUTE_S, 4, start_s=2 * t_alone))
    runs = run_to_end(eng)
    a_end = 2 * t_alone + 2 * t_shared
    assert runs["a"].end_s == pytest.approx(a_end)
    b_done_by_a_end = 2.0  # 2 shared iterations
    assert runs["b"].end_s == pytest.approx(a_end + (4 - b_done_by_a_end) * t_alone)
    assert runs["a"].estimate.comm_mean_s == pytest.approx((2 * ALONE_S + 2 * 2 * ALONE_S) / 4)


def test_jobs_on_disjoint_paths_do_not_interact(g):
    eng = FluidEngine(g, uniform(g))
    eng.add(SimJob("a", ("h1", "h5"), "ring", (SIZE,), COMPUTE_S, 3))
    eng.add(SimJob("b", ("h9", "h13"), "ring", (SIZE,), COMPUTE_S, 3))
    eng.advance(0.0)
    assert eng.levels() == {"a": 1.0, "b": 1.0}


def test_a_local_job_only_computes(g):
    eng = FluidEngine(g, uniform(g))
    eng.add(SimJob("a", ("h1", "h1", "h1"), "ring", (SIZE,), COMPUTE_S, 5))
    (run,) = run_to_end(eng).values()
    assert run.end_s == pytest.approx(5 * COMPUTE_S) and run.estimate.comm_mean_s == 0.0


def test_removal_keeps_whole_iterations_and_frees_the_link(g):
    t_shared = COMPUTE_S + 2 * ALONE_S
    eng = FluidEngine(g, uniform(g))
    eng.add(SimJob("a", ("h1", "h5"), "ring", (SIZE,), COMPUTE_S, 10))
    eng.add(SimJob("b", ("h1", "h9"), "ring", (SIZE,), COMPUTE_S, 10))
    assert eng.advance(2.5 * t_shared) == []
    assert eng.progress("a") == 2
    state = eng.remove("a")
    assert not state.finished and state.iterations_done == 2 and state.end_s == pytest.approx(2.5 * t_shared)
    eng.advance(eng.now_s)
    assert eng.levels() == {"b": 1.0}
    runs = run_to_end(eng)
    assert runs["b"].end_s == pytest.approx(2.5 * t_shared + 7.5 * (COMPUTE_S + ALONE_S))


def test_advance_stops_at_the_first_batch_that_finishes(g):
    eng = FluidEngine(g, uniform(g))
    eng.add(SimJob("a", ("h1", "h5"), "ring", (SIZE,), COMPUTE_S, 1))
    eng.add(SimJob("b", ("h9", "h13"), "ring", (SIZE,), COMPUTE_S, 3))
    done = eng.advance(math.inf)
    assert [s.job for s in done] == ["a"] and eng.running() == ["b"]
    assert eng.now_s == pytest.approx(COMPUTE_S + ALONE_S)


def test_the_backend_restarts_a_preempted_job_with_its_remaining_iterations(g):
    """A resnet50 ring on h1 and h5 is stopped 0.5 s in, inside its first iteration (compute c, then its
    bound b alone), and restarted on one machine: it runs its 6 iterations again there, computing only.
    Its estimate is over every run's measured iterations, the first run's fraction t / (c + b) of one
    included (the time it spent, at the same rates): comm t b / (c + b) over 6 + t / (c + b)."""
    from backend.protocol import ExperimentJob
    from placement.base import GpuSlot, Placement

    def placed(*machines):
        return Placement("j", tuple(GpuSlot(m, i) for i, m in enumerate(machines)))

    model = get_model("resnet50")
    c = model.compute_time_s
    b = job_bound_s(g, uniform(g), ("h1", "h5"), "ring", scaled_buckets(model, 1.0))
    backend = FluidSimBackend(g, uniform(g), scale=1.0)
    job = ExperimentJob("j", 2, 0.0, model="resnet50", collective="ring", iterations=6)
    backend.start([(job, placed("h1", "h5"))])
    backend.advance(1e-9)
    backend.advance(backend.now_s + 0.5)
    end = backend.stop("j")
    t = 1e-9 + 0.5
    assert t < c + b and (end.start_s, end.end_s) == (0.0, pytest.approx(t))
    assert not end.finished and end.iterations_done == backend.done["j"] == 0
    backend.start([(job, placed("h2", "h2"))])
    (last,) = backend.advance(math.inf)
    assert last.finished and backend.done["j"] == 6 and last.end_s == pytest.approx(t + 6 * c)
    est = backend.estimate("j")
    assert est.iterations == 6 and est.compute_mean_s == pytest.approx(c)
    assert est.comm_mean_s == pytest.approx(t * b / (c + b) / (6 + t / (c + b)), rel=1e-9)


def test_misuse_names_the_offending_value(g):
    eng = FluidEngine(g, uniform(g))
    with pytest.raises(TopologyError, match="nowhere"):
        eng.add(SimJob("a", ("h1", "nowhere"), "ring", (SIZE,), 0.0, 1))
    with pytest.raises(JobError, match="collective"):
        eng.add(SimJob("a", ("h1", "h5"), "nosuch", (SIZE,), 0.0, 1))
    eng.add(SimJob("a", ("h1", "h5"), "ring", (SIZE,), 0.0, 1, start_s=1.0))
    with pytest.raises(JobError, match="already running"):
        eng.add(SimJob("a", ("h1", "h5"), "ring", (SIZE,), 0.0, 1, start_s=1.0))
    eng.advance(0.5)
    with pytest.raises(JobError, match="before the simulation's clock"):
        eng.add(SimJob("b", ("h1", "h5"), "ring", (SIZE,), 0.0, 1, start_s=0.1))
    with pytest.raises(JobError, match="cannot advance"):
        eng.advance(0.1)
    with pytest.raises(JobError, match="no running job"):
        eng.remove("zzz")


def test_latency_is_added_per_step_with_a_cross_machine_transfer(g):
    """A 2-rank ring has 2 steps per bucket; with latency L each adds L, unaffected by sharing."""
    eng = FluidEngine(g, uniform(g), SimOptions(latency_s=1e-3))
    eng.add(SimJob("a", ("h1", "h5"), "ring", (SIZE,), 0.0, 2))
    (run,) = run_to_end(eng).values()
    assert run.estimate.comm_mean_s == pytest.approx(ALONE_S + 2e-3)


# -- contention: the engine against a brute-force reference of the model (tests/reference_fluid.py) ----

def contended_scenario(engine_class):
    """40 jobs on an oversubscribed leaf-spine, arriving every 10 ms on average: rings, halving-doubling,
    gloo and INA jobs (PAT short of the links), spread or on neighbouring machines, with warm-ups and
    latency; three of them removed (one before it started) and restarted with their remaining iterations.
    Returns the event count and the record: every run as ``advance`` and ``remove`` reported it, and the
    levels once each restart has been filled in."""
    g = leaf_spine(4, 2, 4, oversubscription=2, gpus_per_machine=2, host_bw_mbps=1000)
    rates = {(u, v): d["bw_mbps"] for u, v, d in g.edges(data=True)}
    hosts = machines(g)
    rng = random.Random(7)
    jobs, t = [], 0.0
    for i in range(40):
        t += rng.expovariate(1 / 0.01)
        workers = rng.choice((2, 4, 6, 8))
        collective = rng.choice(("ring", "hd", "gloo", "ina"))
        if rng.random() < 0.6:
            placed = rng.sample(hosts, min(len(hosts), max(1, workers // 2)))
        else:
            first = rng.randrange(len(hosts) - 3)
            placed = hosts[first:first + max(1, workers // 2)]
        ranks = tuple(placed[r * len(placed) // workers] for r in range(workers))
        ina = None
        if collective == "ina":  # its PS on rank 0's machine, up to two of its racks aggregating
            ina = InaSpec(ranks[0], tuple(sorted({g.nodes[m]["rack"] for m in ranks}))[:rng.randint(0, 2)])
        buckets = tuple(rng.choice((40_000, 120_000, 4_000, 800_000)) for _ in range(rng.randint(1, 4)))
        jobs.append(SimJob(f"j{i:02d}", ranks, collective, buckets, rng.choice((0.0, 0.002, 0.01)), rng.randint(3, 40),
                           rng.choice((0, 1)), start_s=t, ina=ina))
    engine = engine_class(g, rates, SimOptions(mtu=1500, latency_s=2e-5, pat_bytes_s=40e6, ina_results="multicast"))
    for j in jobs:
        engine.add(j)
    record = []

    def advance_to(at: float) -> None:
        while done := engine.advance(at):
            record.extend(("finished", dataclasses.asdict(r)) for r in done)

    for at, name in ((0.05, "j03"), (0.08, "j10"), (0.12, "j21")):
        advance_to(at)
        if name in engine.running():
            run = engine.remove(name)
            record.append(("removed", dataclasses.asdict(run)))
            spec = next(j for j in jobs if j.name == name)
            engine.add(dataclasses.replace(spec, iterations=spec.iterations - run.iterations_done, warmup_iterations=0,
                                           start_s=max(spec.start_s, engine.now_s)))
        advance_to(engine.now_s)
        record.append(("levels", engine.levels()))
    advance_to(math.inf)
    return engine.events, record


def test_the_reference_fills_the_worked_examples():
    """The brute-force reference's water-filling on worked cases: two equal jobs on a link get 1/2 each;
    a link filling at 1/2 (A, B) lets C, at half weight on the other, reach its cap; NetPack's vector 1
    (workers s1, s2 and their PS s3 in one rack, links 100, PAT 40: the PAT runs out at 40, the PS's
    link then carries both streams, 40 + 2 x 30 = 100: rate 70) and vector 2 (two such jobs share the
    PAT: 20 each, then 40 on their own PS links: 60)."""
    links = {r: 1.0 for r in "lm"}
    assert water_fill([Demand(lambda _: {"l": 1.0}), Demand(lambda _: {"l": 1.0})], links) == [0.5, 0.5]
    abc = [Demand(lambda _: {"l": 1.0, "m": 1.0}), Demand(lambda _: {"m": 1.0}), Demand(lambda _: {"l": 0.5})]
    assert water_fill(abc, links) == [0.5, 0.5, 1.0]

    def ps_job(s1, s2, ps):
        return Demand(lambda spent: {s1: 1.0, s2: 1.0, ps: 2.0} if spent else {s1: 1.0, s2: 1.0, ps: 1.0, "pat": 1.0},
                      cap=math.inf)

    capacity = {**{f"s{i}": 100.0 for i in range(1, 7)}, "pat": 40.0}
    assert water_fill([ps_job("s1", "s2", "s3")], capacity, frozenset({"pat"})) == pytest.approx([70.0])
    both = [ps_job("s1", "s2", "s3"), ps_job("s4", "s5", "s6")]
    assert water_fill(both, capacity, frozenset({"pat"})) == pytest.approx([60.0, 60.0])


def test_contended_runs_equal_a_brute_force_reference_of_the_model():
    """Filling only the jobs an event couples, bringing a job's progress up to date only when its level
    changes, and memoising costs per placement shape give the events, runs and levels of the reference,
    which computes every job's cost from jobs.steps and sim.ina and fills every running job from scratch
    at every event: equal up to floating-point rounding, both being exact."""
    events, record = contended_scenario(FluidEngine)
    want_events, want = contended_scenario(ReferenceFluid)
    assert events == want_events
    assert [kind for kind, _ in record] == [kind for kind, _ in want]
    # three removals, and every job of the 40 finishes once (those removed in their restarts)
    assert sum(kind == "removed" for kind, _ in record) == 3 and sum(kind == "finished" for kind, _ in record) == 40
    for (_, got), (_, expected) in zip(record, want, strict=True):
        assert got.keys() == expected.keys()
        for key, value in expected.items():
            assert got[key] == (pytest.approx(value, rel=1e-9, abs=1e-15) if isinstance(value, float) else value), key


def test_the_couplings_loads_follow_each_demands_phases():
    """Run 0 loads resource 3 at weight 2 up to level 0.5, then resources 3 and 7 at weight 1 (a spill);
    run 1 loads resource 7 at weight 4: at levels 0.8 and 0.25 the pairs carry 2 x 0.5 + 0.3, 0.3 and
    1.0; the margins are the phase above each floor, and the rooms the resources' capacities."""
    phases = [[(0.0, {3: 2.0}), (0.5, {3: 1.0, 7: 1.0})], [(0.0, {7: 4.0})]]
    c = Coupling(phases, [{3: 1.0, 7: 1.0}, {7: 4.0}], {3: 10.0, 7: 20.0}.__getitem__)
    pairs = zip(c.pair_run.tolist(), c.pair_res.tolist(), strict=True)
    loads = dict(zip(pairs, c.loads(np.array([0.8, 0.25])).tolist(), strict=True))
    assert loads == pytest.approx({(0, 0): 1.3, (0, 1): 0.3, (1, 1): 1.0})
    assert sorted(zip(c.margin_run.tolist(), c.margin_w.tolist(), strict=True)) == [(0, 1.0), (0, 1.0), (1, 4.0)]
    assert c.room.tolist() == [10.0, 20.0]


def test_every_overlap_a_config_may_name_has_its_strategy():
    """``SimOptions.overlap``'s names and the fluid engine's overlap strategies are the same list."""
    from sim.flowsim import OVERLAPS
    from sim.overlap import OVERLAP_MODELS

    assert tuple(OVERLAP_MODELS) == OVERLAPS
