"""Unit tests that a simulation's cost per event follows the jobs running, not the jobs seen: as
finished jobs pile up, the structures the engines walk at every event (started runs, flows, link users,
heaps, the levels reported) stay the size of what runs, and the routes of a placement are computed once
per rank pair whatever its bucket sizes; the routes' hop counts are :func:`topo.routing._hops`'s."""

import math
import random

from conftest import uniform_rates

from jobs.models import get_model, scaled_buckets
from sim.flowsim import FlowEngine, SimJob, SimOptions
from sim.fluid import FluidEngine
from sim.fluid_costs import IterationCosts
from topo import fat_tree, leaf_spine, machines
from topo.routing import EcmpRoutes, _hops, ecmp_path

JOBS = 60
GAP_S = 50.0  # each job ends well before the next starts: one runs at a time


def sequential_jobs(g, n=JOBS, iterations=3):
    """``n`` 2-machine ring jobs on random machine pairs, one starting every :data:`GAP_S` seconds."""
    rng = random.Random(7)
    hosts = machines(g)
    buckets = tuple(scaled_buckets(get_model("resnet50"), 5000))
    return [SimJob(f"j{i:03d}", tuple(rng.sample(hosts, 2)), "ring", buckets, 0.01, iterations,
                   start_s=i * GAP_S) for i in range(n)]


def test_fluid_engine_walks_the_started_runs_only_as_finished_ones_pile_up():
    """Every job added at once (the bench's way, the later ones pending): at every completion the
    started runs, the link users and the levels reported are those of the one job running, however
    many finished or wait to start."""
    g = fat_tree(4)
    engine = FluidEngine(g, uniform_rates(g, 100.0), SimOptions(mtu=1500, overlap="independent"))
    for job in sequential_jobs(g):
        engine.add(job)
    finished = 0
    while done := engine.advance(math.inf):
        finished += len(done)
        assert len(engine.levels()) == len(engine._started) <= 1, finished
        users = {user for on in engine._users.users.values() for user in on}
        assert users <= set(engine._started), (finished, users)
        assert len(engine._live) == JOBS - finished  # the pending ones, not the finished
    assert finished == JOBS


def test_fluid_engine_levels_report_the_running_jobs_while_many_wait():
    """levels() mid-run: the runs started and unfinished, not the ones added for later."""
    g = fat_tree(4)
    engine = FluidEngine(g, uniform_rates(g, 100.0))
    for job in sequential_jobs(g):
        engine.add(job)
    while engine.advance(GAP_S * 10 + 1e-3):
        pass
    assert list(engine.levels()) == ["j010"]


def test_step_engine_keeps_no_finished_flows_timers_or_users():
    """The step-level engine on jobs one after another: at every completion its flows, link users,
    completion heap and timers hold at most the running job's, however many finished before."""
    g = fat_tree(4)
    engine = FlowEngine(g, uniform_rates(g, 100.0), SimOptions(mtu=1500))
    for job in sequential_jobs(g, n=30, iterations=2):
        engine.add(job)
    finished = 0
    ranks = 2
    while done := engine.advance(math.inf):
        finished += len(done)
        network = engine.network
        assert len(engine._running) == 30 - finished
        assert not network.active and not network.components.users, finished
        assert len(network.completions) <= ranks, finished
        # the pending jobs' start timers, one per rank, and nothing of the finished ones
        assert len(engine.timers) == ranks * (30 - finished), finished
    assert finished == 30


def test_a_placement_is_routed_once_per_rank_pair_whatever_its_bucket_sizes():
    """IterationCosts.of on a job of many distinct bucket sizes whose collective joins the same rank
    pairs at every size: one route looked up per cross-machine pair, not per pair and size."""
    g = fat_tree(4)
    hosts = machines(g)
    rates = uniform_rates(g, 100.0)
    engine = FluidEngine(g, rates)
    costs: IterationCosts = engine.costs
    routed = []
    route = costs._route

    def counting(job, a, b):
        routed.append((a, b))
        return route(job, a, b)

    costs._route = counting
    sizes = (4000, 8000, 12000, 16000, 20000, 24000)
    spec = SimJob("j", tuple(hosts[:4]), "ring", sizes, 0.0, 1)
    costs.of(spec)
    assert len(routed) == 4, routed  # a 4-rank ring's pairs r -> r + 1
    routed.clear()
    costs.of(SimJob("k", tuple(hosts[4:8]), "ring", sizes, 0.0, 1))
    assert len(routed) == 4, routed


def test_hop_counts_of_ecmp_routes_are_the_breadth_first_ones():
    """EcmpRoutes' array search gives every switch's hop count that _hops gives, and its paths are
    ecmp_path's, on a fat-tree and on an oversubscribed leaf-spine."""
    for g in (fat_tree(6), leaf_spine(4, 2, 4, oversubscription=2.0)):
        routes = EcmpRoutes(g)
        for start in routes._adjacency:
            assert routes._hops(start) == _hops(routes._adjacency, start), start
        hosts = machines(g)
        for a in hosts[:6]:
            for b in hosts:
                if a != b:
                    assert routes.path(a, b) == ecmp_path(g, a, b), (a, b)
