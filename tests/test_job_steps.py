"""Unit tests of the step-synchronous bandwidth bound."""

import pytest

from jobs.patterns import pattern
from jobs.steps import link_loads, step_bound_s
from topo import fat_tree


def rates(g, mbps):
    """Every link at the same rate."""
    return {(u, v): mbps for u, v in g.edges()}


def test_ring_on_distinct_machines_matches_textbook_bound():
    """A ring over machines under one edge switch is bound by 2(N-1)/N * S / B."""
    g = fat_tree(4)
    n, size = 2, 1_000_000
    bound = step_bound_s(g, rates(g, 20.0), ["h1", "h2"], pattern("ring", n, size))
    assert bound == pytest.approx(2 * (n - 1) / n * size * 8 / 20e6)


def test_same_machine_transfers_are_free():
    """Ranks that share a machine exchange over loopback: no link load, zero bound."""
    g = fat_tree(4)
    steps = pattern("ring", 4, 400_000)
    assert step_bound_s(g, rates(g, 20.0), ["h1"] * 4, steps) == 0.0
    assert link_loads(g, ["h1"] * 4, steps[0]) == {}


def test_two_ranks_per_machine_share_the_uplink_once_per_step():
    """Ranks 0,1 on h1 and 2,3 on h5: each step puts one chunk on h1's uplink, giving 2(N-1)/N * S / B."""
    g = fat_tree(4)
    n, size = 4, 2_000_000
    bound = step_bound_s(g, rates(g, 20.0), ["h1", "h1", "h5", "h5"], pattern("ring", n, size))
    assert bound == pytest.approx(2 * (n - 1) / n * size * 8 / 20e6)
