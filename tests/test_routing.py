"""Unit tests of the shared routing function (minimum-hop paths, deterministic ECMP)."""

import os
import subprocess
import sys
import zlib

import networkx as nx
import pytest
from conftest import ROOT

from common.errors import TopologyError
from topo import fat_tree, leaf_spine, machines, natural_key, switches
from topo.routing import (
    EcmpRoutes,
    ecmp_path,
    equal_cost_paths,
    next_hops,
    path_links,
    port_towards,
    route_table,
    stable_hash,
)
from topo.schema import assign_ports, machine_ip, machine_mac


@pytest.fixture(scope="module")
def k4():
    """A k=4 fat-tree (16 machines, 20 switches)."""
    return fat_tree(4)


@pytest.fixture(scope="module")
def k4_routes(k4):
    """The route table of the k=4 fat-tree."""
    return route_table(k4)


def test_route_table_covers_every_ordered_pair(k4, k4_routes):
    """Every ordered pair of distinct machines has a route; no self pairs."""
    hosts = machines(k4)
    assert set(k4_routes) == {(s, d) for s in hosts for d in hosts if s != d}


def test_routes_are_valid_minimum_hop_paths(k4, k4_routes):
    """Each route starts and ends at its machines, uses only existing edges and has minimum length."""
    for (src, dst), path in k4_routes.items():
        assert path[0] == src and path[-1] == dst
        assert all(k4.has_edge(a, b) for a, b in path_links(path))
        assert len(path) - 1 == nx.shortest_path_length(k4, src, dst)
        assert all(k4.nodes[n]["role"] == "switch" for n in path[1:-1])


def test_route_table_matches_ecmp_path(k4, k4_routes):
    """route_table gives exactly ecmp_path for every pair (the controller and simulator agree)."""
    for (src, dst), path in k4_routes.items():
        assert ecmp_path(k4, src, dst) == path


def test_ecmp_path_is_hash_indexed_equal_cost_path(k4):
    """ecmp_path picks paths[stable_hash(src, dst) % len(paths)] of equal_cost_paths."""
    for src, dst in [("h1", "h16"), ("h16", "h1"), ("h3", "h4"), ("h5", "h12"), ("h2", "h1")]:
        paths = equal_cost_paths(k4, src, dst)
        assert ecmp_path(k4, src, dst) == paths[stable_hash(src, dst) % len(paths)]


@pytest.mark.parametrize("src, dst, expected", [
    ("h1", "h16", 4),   # different pods: (k/2)^2
    ("h1", "h5", 4),
    ("h1", "h3", 2),    # same pod, different edge: k/2
    ("h1", "h2", 1),    # same edge
])
def test_equal_cost_path_counts_k4(k4, src, dst, expected):
    """In k=4 there are 4 paths between pods, 2 within a pod across edges, 1 under one edge switch."""
    assert len(equal_cost_paths(k4, src, dst)) == expected


def test_equal_cost_path_counts_all_pairs_k4(k4):
    """The path count of every machine pair in k=4 follows from whether they share a pod or an edge."""
    for src in machines(k4):
        for dst in machines(k4):
            if src == dst:
                continue
            s, d = k4.nodes[src], k4.nodes[dst]
            expected = 1 if s["rack"] == d["rack"] else 2 if s["pod"] == d["pod"] else 4
            assert len(equal_cost_paths(k4, src, dst)) == expected


def test_equal_cost_paths_are_all_shortest_paths_in_natural_order(k4):
    """equal_cost_paths lists exactly networkx's shortest paths, sorted by the natural key (h2 < h10)."""
    g = fat_tree(6)
    for src, dst in [("h1", "h54"), ("h10", "h2"), ("h1", "h4")]:
        expected = sorted(map(tuple, nx.all_shortest_paths(g, src, dst)),
                          key=lambda p: [natural_key(n) for n in p])
        assert equal_cost_paths(g, src, dst) == tuple(expected)
    assert equal_cost_paths(k4, "h1", "h16")[0] == ("h1", "e1", "a1", "c1", "a7", "e8", "h16")


def test_equal_cost_paths_between_switches_and_to_self(k4):
    """The function also works for any two nodes, and a node's path to itself is just the node."""
    assert equal_cost_paths(k4, "e1", "e2") == (("e1", "a1", "e2"), ("e1", "a2", "e2"))
    assert len(equal_cost_paths(k4, "e1", "e3")) == 4
    assert equal_cost_paths(k4, "h1", "h1") == (("h1",),)


def test_ecmp_uses_every_core_k4(k4, k4_routes):
    """Deterministic ECMP spreads the k=4 machine pairs over all four core switches."""
    used = {n for path in k4_routes.values() for n in path if k4.nodes[n].get("tier") == "core"}
    assert used == {"c1", "c2", "c3", "c4"}


def test_ecmp_uses_every_spine():
    """Deterministic ECMP spreads leaf-spine pairs over all spines."""
    g = leaf_spine(4, 4, 4)
    used = {n for path in route_table(g).values() for n in path if n.startswith("s")}
    assert used == {"s1", "s2", "s3", "s4"}


def test_reverse_direction_is_hashed_separately(k4, k4_routes):
    """Some flow's reverse direction takes a different core, as a real ECMP fabric may do."""
    assert any(k4_routes[(d, s)] != tuple(reversed(p)) for (s, d), p in k4_routes.items())


def test_routing_is_deterministic(k4, k4_routes):
    """Two computations over the same or a rebuilt graph give identical routes."""
    assert route_table(k4) == k4_routes
    assert route_table(fat_tree(4)) == k4_routes
    assert ecmp_path(k4, "h1", "h16") == ecmp_path(fat_tree(4), "h1", "h16")


def test_routes_do_not_depend_on_insertion_order(k4, k4_routes):
    """A graph with the same nodes and links added in another order routes identically."""
    shuffled = nx.Graph(**k4.graph)
    shuffled.add_nodes_from(reversed(list(k4.nodes(data=True))))
    shuffled.add_edges_from(reversed(list(k4.edges(data=True))))
    assert route_table(shuffled) == k4_routes


def test_routing_is_stable_across_processes(k4_routes):
    """A fresh interpreter with another hash seed computes the same routes (no salted hash())."""
    code = ("import topo\n"
            "rt = topo.route_table(topo.fat_tree(4))\n"
            "print(repr(sorted(rt.items())))\n")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == repr(sorted(k4_routes.items()))


def test_stable_hash_is_crc32_of_joined_parts():
    """stable_hash is zlib.crc32 of the '|'-joined parts, so its value is fixed across runs."""
    assert stable_hash("h1", "h16") == zlib.crc32(b"h1|h16")
    assert stable_hash("h1", "h16") != stable_hash("h16", "h1")


def test_next_hops_k4(k4):
    """next_hops lists the neighbours on some minimum-hop path, in natural order."""
    assert next_hops(k4, "e1", "h16") == ("a1", "a2")        # up, either aggregation switch
    assert next_hops(k4, "a1", "h16") == ("c1", "c2")        # up, either of its cores
    assert next_hops(k4, "c1", "h16") == ("a7",)             # down, the one agg of the pod
    assert next_hops(k4, "a7", "h16") == ("e8",)
    assert next_hops(k4, "e8", "h16") == ("h16",)
    assert next_hops(k4, "e1", "h2") == ("h2",)
    assert next_hops(k4, "h16", "h16") == ()


def test_next_hops_agree_with_equal_cost_paths(k4):
    """The union of each path's next hop from a switch equals next_hops at that switch."""
    for dst in ("h1", "h16"):
        for sw in switches(k4):
            hops = {p[1] for p in equal_cost_paths(k4, sw, dst)}
            assert set(next_hops(k4, sw, dst)) == hops


def test_port_towards(k4):
    """port_towards reads the port number of the link on the given end."""
    assert port_towards(k4, "e1", "h1") == 1 and port_towards(k4, "h1", "e1") == 0
    assert port_towards(k4, "e1", "a2") == 4 and port_towards(k4, "c1", "a7") == 4
    with pytest.raises(TopologyError, match="no link between 'e1' and 'c1'"):
        port_towards(k4, "e1", "c1")


def test_path_links():
    """path_links turns a path into its directed hops."""
    assert path_links(("h1", "e1", "h2")) == [("h1", "e1"), ("e1", "h2")]
    assert path_links(("h1",)) == []


def test_unknown_and_unreachable_nodes_are_errors(k4):
    """Routing to or from a node not in the graph, or across a cut, fails with a TopologyError."""
    with pytest.raises(TopologyError, match="unknown node 'h99'"):
        ecmp_path(k4, "h1", "h99")
    with pytest.raises(TopologyError, match="unknown node 'x1'"):
        equal_cost_paths(k4, "x1", "h1")
    with pytest.raises(TopologyError, match="unknown node 'h99'"):
        next_hops(k4, "h99", "h1")
    g = nx.Graph(k4)
    g.remove_edge("h16", "e8")
    with pytest.raises(TopologyError, match="no path from 'h1' to 'h16'"):
        ecmp_path(g, "h1", "h16")


def test_route_table_k8_size():
    """A k=8 fat-tree's table has all 128*127 pairs, each a valid 1-, 3- or 5-switch path."""
    g = fat_tree(8)
    table = route_table(g)
    assert len(table) == 128 * 127
    assert {len(p) for p in table.values()} == {3, 5, 7}


def irregular_topology() -> nx.Graph:
    """Eight switches wired unevenly (a tree plus chords: unequal path counts and lengths), with
    machines on six of them, two on some."""
    g = nx.Graph(name="irregular", kind="file", params={})
    wiring = [(1, 2), (1, 3), (2, 4), (3, 4), (4, 5), (2, 6), (6, 7), (5, 7), (7, 8), (3, 8), (1, 5)]
    for i in range(1, 9):
        g.add_node(f"s{i}", role="switch", tier="edge", dpid=i, pod="p0")
    g.add_edges_from(((f"s{a}", f"s{b}") for a, b in wiring), bw_mbps=100.0, delay_us=0.0)
    for i, rack in enumerate((1, 1, 3, 5, 6, 8, 8, 4), start=1):
        g.add_node(f"h{i}", role="machine", gpus=1, index=i, rack=f"s{rack}", pod="p0", ip=machine_ip(i),
                   mac=machine_mac(i))
        g.add_edge(f"h{i}", f"s{rack}", bw_mbps=100.0, delay_us=0.0)
    assign_ports(g)
    return g


@pytest.mark.parametrize("g", [fat_tree(6), leaf_spine(5, 3, 3), irregular_topology()],
                         ids=["fat_tree_k6", "leaf_spine", "irregular"])
def test_kept_routes_share_a_racks_dag_and_equal_ecmp_path(g):
    """EcmpRoutes (one BFS per destination rack, over the switches) gives ecmp_path's path for every
    pair of nodes, machines and switches alike."""
    routes = EcmpRoutes(g)
    nodes = sorted(g, key=natural_key)
    assert all(routes.path(a, b) == ecmp_path(g, a, b) for a in nodes for b in nodes)


def test_kept_routes_name_unknown_and_unreachable_nodes():
    """EcmpRoutes fails as ecmp_path does: an unknown node, or no path, named in a TopologyError."""
    g = irregular_topology()
    routes = EcmpRoutes(g)
    with pytest.raises(TopologyError, match="unknown node 'h99'"):
        routes.path("h1", "h99")
    with pytest.raises(TopologyError, match="unknown node 'x1'"):
        routes.path("x1", "h1")
    g.remove_edge("s3", "s8")
    g.remove_edge("s7", "s8")
    with pytest.raises(TopologyError, match="no path from 'h1' to 'h6'"):
        EcmpRoutes(g).path("h1", "h6")
