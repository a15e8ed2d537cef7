"""Placing a topology's nodes on the servers of an emulation cluster (``topo.partition``) and the
cluster's options (``emulator.cluster.ClusterOptions``): pure, no root, no SSH."""

from __future__ import annotations

import collections

import pytest

from emulator.cluster import ClusterOptions
from topo import fat_tree, leaf_spine
from topo.partition import assign_servers, crossing_links, rack_groups


@pytest.mark.parametrize("g", [fat_tree(4), leaf_spine(4, 2, 3), leaf_spine(3, 1, 1)], ids=lambda g: g.graph["name"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_every_node_is_placed_machines_beside_their_switch_tunnels_all_start_here(g, n):
    """Every node gets a server; a machine shares its switch's; pods or racks are whole and spread
    evenly (sizes differ by at most one group); every link between servers has one end on the
    first server (this machine), as Mininet's SSH tunnels from here need."""
    servers = ["localhost", *[f"127.0.0.{i + 2}" for i in range(n - 1)]]
    placed = assign_servers(g, servers)
    assert set(placed) == set(g.nodes) and set(placed.values()) <= set(servers)
    for m, d in g.nodes(data=True):
        if d["role"] == "machine":
            assert placed[m] == placed[d["rack"]]
    racks = rack_groups(g)
    per_server = collections.Counter(placed[grp[0]] for grp in racks)
    assert all(len({placed[x] for x in grp}) == 1 for grp in racks)
    assert max(per_server.values()) - min(per_server.get(s, 0) for s in servers[:len(racks)]) <= 1
    assert all("localhost" in (placed[u], placed[v]) for u, v in crossing_links(g, placed))
    assert (crossing_links(g, placed) == []) == (n == 1)


def test_fat_tree_pods_stay_whole_and_the_core_stays_here():
    """A k=4 fat-tree over 3 servers: pods 0-1 here, pod 2 and pod 3 on one server each, the four
    core switches here; the 8 links from the two remote pods to the core are the tunnels."""
    g = fat_tree(4)
    placed = assign_servers(g, ["localhost", "a", "b"])
    pods = {placed[m]: set() for m in g}
    for node, d in g.nodes(data=True):
        if d.get("pod"):
            pods[placed[node]].add(d["pod"])
    assert pods == {"localhost": {"p0", "p1"}, "a": {"p2"}, "b": {"p3"}}
    assert all(placed[s] == "localhost" for s, d in g.nodes(data=True) if d.get("tier") == "core")
    assert len(crossing_links(g, placed)) == 8


@pytest.mark.parametrize("servers,match", [((), "start with 'localhost'"), (("h2", "localhost"), "start with"),
                                           (("localhost", "h2", "h2"), "named once each")])
def test_cluster_servers_start_here_and_are_named_once(servers, match):
    """A cluster's server list starts with this machine and names each server once."""
    with pytest.raises(ValueError, match=match):
        ClusterOptions(servers)


def test_check_says_how_the_shipped_cluster_experiment_is_spread():
    """``check experiments/cluster.yaml`` (no root, no server reached) validates it and says how its
    k=4 fat-tree is spread: pods 0-1 and the core here, pods 2-3 on host2, 8 tunnels."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cp = subprocess.run([sys.executable, os.path.join(root, "run_testbed.py"), "check",
                         os.path.join(root, "experiments", "cluster.yaml")], capture_output=True, text=True,
                        timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert "spread over 2 servers (localhost: 20 nodes, host2: 16 nodes; 8 links as SSH tunnels)" in cp.stdout
