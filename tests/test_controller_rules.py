"""Unit tests of the controller's pure rule computation, on a fake flow table (no switch)."""

import subprocess
import sys

import pytest

from common.errors import TopologyError
from controller.rules import PRIORITY_DST_ROUTE, compute_rules, forward
from topo import fat_tree, leaf_spine, machines, switches
from topo.routing import ecmp_path


@pytest.mark.parametrize("g", [fat_tree(4), leaf_spine(3, 2, 4, oversubscription=2.0)], ids=["fat4", "ls"])
def test_ecmp_rules_follow_the_shared_routing_function(g):
    """Walking the installed ECMP rules from every machine reaches every other along ecmp_path exactly."""
    rules = compute_rules(g, "ecmp")
    ms = machines(g)
    for src in ms:
        for dst in ms:
            if src != dst:
                assert forward(rules, g, src, dst) == ecmp_path(g, src, dst)


def test_ecmp_rule_count_matches_path_lengths():
    """One rule per switch on each pair's path, and nothing else."""
    g = fat_tree(4)
    rules = compute_rules(g, "ecmp")
    expected = sum(len(ecmp_path(g, s, d)) - 2 for s in machines(g) for d in machines(g) if s != d)
    assert sum(len(v) for v in rules.flows.values()) == expected
    assert all(not v for v in rules.groups.values())


def test_select_mode_uses_groups_for_multipath():
    """Select mode: one rule per switch per destination; edge switches hash inter-rack traffic over k/2 uplinks."""
    k = 4
    g = fat_tree(k)
    rules = compute_rules(g, "select")
    for s in switches(g):
        dpid = g.nodes[s]["dpid"]
        assert len(rules.flows[dpid]) == len(machines(g))
        assert all(r.priority == PRIORITY_DST_ROUTE for r in rules.flows[dpid])
    e1 = g.nodes["e1"]["dpid"]
    groups = {gr.group_id: gr for gr in rules.groups[e1]}
    far = g.nodes["h16"]["index"]
    assert len(groups[far].ports) == k // 2
    near = g.nodes["h2"]["index"]  # same edge switch: a single output, no group
    assert near not in groups
    cores = [s for s in switches(g) if g.nodes[s]["tier"] == "core"]
    assert all(not rules.groups[g.nodes[c]["dpid"]] for c in cores)


def test_rules_are_deterministic():
    """The same topology always yields the same rule set."""
    assert compute_rules(fat_tree(4)) == compute_rules(fat_tree(4))


def test_unknown_mode_names_valid_modes():
    """An unknown routing mode is rejected with the list of valid modes."""
    with pytest.raises(TopologyError, match="ecmp, select"):
        compute_rules(fat_tree(4), "spray")


def test_rule_computation_does_not_import_os_ken():
    """controller.rules is pure: importing it loads no os_ken, mininet or torch."""
    code = ("import sys, controller.rules; bad=[m for m in ('os_ken','mininet','torch') if m in sys.modules];"
            "print(','.join(bad)); sys.exit(1 if bad else 0)")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=".")
    assert cp.returncode == 0, cp.stdout + cp.stderr
