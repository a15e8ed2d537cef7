"""Every collective a job may name (``jobs.collective.JOB_COLLECTIVES``) against the invariants the
rest of the testbed relies on when it asks the entry instead of comparing names: registered under its
own name, a fallback that needs no fabric for one that aggregates in the fabric, a torch implementation
or the fabric's client in the worker, a traffic schedule exactly when it needs no fabric, and an
estimate from the simulator engine that models it."""

from __future__ import annotations

import math

import pytest

from common.errors import JobError
from jobs.collective import INA, JOB_COLLECTIVES, collective_of
from jobs.patterns import replay_pattern
from sim.flowsim import SimJob, SimOptions, simulate
from sim.fluid import FluidEngine
from sim.ina import InaSpec
from topo import fat_tree

ENTRIES = sorted(JOB_COLLECTIVES)
SIZE = 40_000  # bytes of one bucket, a multiple of 4 and of every rank count below


@pytest.fixture(scope="module")
def g():
    return fat_tree(4)


@pytest.mark.parametrize("name", ENTRIES)
def test_an_entry_is_registered_under_its_own_name_with_a_one_line_help(name):
    """The registry key is the entry's name, lowercase, and its help is one non-empty line."""
    c = JOB_COLLECTIVES[name]
    assert c.name == name == name.lower()
    assert c.help.strip() and "\n" not in c.help
    assert collective_of(name) is c


@pytest.mark.parametrize("name", ENTRIES)
def test_a_fabric_collective_falls_back_to_one_that_needs_no_fabric(name):
    """A collective that aggregates in the fabric names a registered fallback that does not (and has none
    itself); any other collective has no fallback."""
    c = JOB_COLLECTIVES[name]
    if c.aggregates_in_fabric:
        fallback = collective_of(c.fallback)
        assert not fallback.aggregates_in_fabric and fallback.fallback is None
    else:
        assert c.fallback is None


@pytest.mark.parametrize("name", ENTRIES)
def test_a_worker_can_run_every_entry(name):
    """The torch registry implements exactly the collectives that need no fabric; the worker runs the
    others through the fabric's client (``workers.collectives.ina``)."""
    from workers.collectives import COLLECTIVES

    assert (name in COLLECTIVES) == (not JOB_COLLECTIVES[name].aggregates_in_fabric)


@pytest.mark.parametrize("name", ENTRIES)
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 8])
def test_traffic_is_a_schedule_of_transfers_exactly_when_no_fabric_aggregates(name, p):
    """A collective without fabric aggregation replays steps of transfers between distinct ranks in which
    every rank sends at least the whole vector (every other rank needs its contribution; a lone rank sends
    nothing); one that aggregates in the fabric has no such schedule."""
    if JOB_COLLECTIVES[name].aggregates_in_fabric:
        with pytest.raises(JobError, match=name):
            replay_pattern(name, p, SIZE)
        return
    steps = replay_pattern(name, p, SIZE)
    sent = [0] * p
    for step in steps:
        for src, dst, n in step:
            assert 0 <= src < p and 0 <= dst < p and src != dst and n > 0
            sent[src] += n
    assert sent == [0] if p == 1 else min(sent) >= SIZE


@pytest.mark.parametrize("name", ENTRIES)
def test_the_fluid_engine_estimates_every_entry(g, name):
    """The fluid engine gives a two-machine job of every collective (a fabric one with its PS and racks
    aggregating) a finite, positive communication time."""
    ina = InaSpec("h1", ("e1", "e3")) if JOB_COLLECTIVES[name].aggregates_in_fabric else None
    engine = FluidEngine(g, {(u, v): 100.0 for u, v in g.edges()}, SimOptions(mtu=1500))
    engine.add(SimJob("job", ("h1", "h5"), name, (SIZE,), 0.01, 3, ina=ina))
    (run,) = engine.advance(math.inf)
    assert 0 < run.estimate.comm_mean_s < math.inf


@pytest.mark.parametrize("name", ENTRIES)
def test_the_step_level_engine_models_exactly_the_collectives_without_fabric_aggregation(g, name):
    """The step-level engine estimates every collective that needs no fabric and refuses, naming the fluid
    engine, one that aggregates in the fabric."""
    job = SimJob("job", ("h1", "h5"), name, (SIZE,), 0.01, 3)
    rates = {(u, v): 100.0 for u, v in g.edges()}
    if JOB_COLLECTIVES[name].aggregates_in_fabric:
        with pytest.raises(JobError, match="fluid"):
            simulate(g, rates, [job])
    else:
        (est,) = simulate(g, rates, [job]).jobs
        assert 0 < est.comm_mean_s < math.inf


def test_an_unknown_name_lists_every_collective():
    """An unknown collective is a JobError naming every registered one, with the nearest as a hint."""
    with pytest.raises(JobError, match=r"unknown collective 'rnig'; valid: gloo, hd, ina, ring \(did you mean 'ring'"):
        collective_of("rnig")


def test_ina_aggregates_in_the_fabric_and_falls_back_to_the_ring():
    """``ina`` (the config's value) is the collective aggregated by the fabric, run as a ring without it."""
    assert collective_of(INA).aggregates_in_fabric and collective_of(INA).fallback == "ring"


PRODUCT = ("common", "congestion", "backend", "measure", "topo", "placement", "scheduling", "sim", "jobs", "ina",
           "controller", "experiment", "emulator", "vm", "reproduce", "bench")


def name_comparisons(source: str) -> list[int]:
    """Lines of ``source`` comparing a collective (``x.collective`` or ``collective``) with a name: a string
    literal or ``INA``."""
    import ast

    def is_collective(node):
        return (isinstance(node, ast.Attribute) and node.attr == "collective") or (
            isinstance(node, ast.Name) and node.id == "collective")

    def is_name(node):
        return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or (
            isinstance(node, ast.Name) and node.id in ("INA", "INA_COLLECTIVE"))

    return [node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Compare)
            and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops)
            and any(is_collective(a) for a in (node.left, *node.comparators))
            and any(is_name(a) for a in (node.left, *node.comparators))]


def test_no_product_module_compares_a_collective_with_a_name():
    """Every part asks the job's Collective (collective_of) what it needs; none tests a collective's name."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    found = {str(p.relative_to(repo)): lines for pkg in PRODUCT for p in sorted((repo / pkg).rglob("*.py"))
             if (lines := name_comparisons(p.read_text(encoding="utf-8")))}
    assert found == {}


def test_the_name_check_sees_a_planted_comparison():
    """The check is not vacuous: ``spec.collective == INA`` and ``collective != "ina"`` are both found."""
    assert name_comparisons("if spec.collective == INA:\n    pass\nok = collective != 'ina'\n") == [1, 3]
