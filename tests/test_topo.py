"""Unit tests of the topology builders, the schema validator, the registry and topology.json."""

import json
import os
import subprocess
import sys

import networkx as nx
import pytest
from conftest import ROOT
from fifos import read_fifo_within

from common.errors import TopologyError
from topo import (
    TOPOLOGIES,
    build_topology,
    fat_tree,
    leaf_spine,
    machines,
    natural_key,
    read_topology_json,
    switches,
    validate_topology,
    write_topology_json,
)
from topo.io import MAX_FILE_BYTES
from topo.schema import EMULATOR_LIMITS, SIMULATOR_LIMITS, assign_ports, machine_ip, machine_mac


def tiny_topology() -> nx.Graph:
    """Two machines on one switch, hand-built as a file topology would be."""
    g = nx.Graph(name="tiny", kind="file", params={})
    for i in (1, 2):
        g.add_node(f"h{i}", role="machine", gpus=2, index=i, rack="s1", pod="p0",
                   ip=machine_ip(i), mac=machine_mac(i))
    g.add_node("s1", role="switch", tier="leaf", dpid=1, pod="p0")
    for i in (1, 2):
        g.add_edge(f"h{i}", "s1", bw_mbps=100.0, delay_us=0.0)
    assign_ports(g)
    return g


def rename(g: nx.Graph, old: str, new: str) -> nx.Graph:
    """A copy of ``g`` with node ``old`` renamed, ports and racks kept consistent."""
    h = nx.relabel_nodes(g, {old: new}, copy=True)
    for _, _, data in h.edges(data=True):
        data["ports"] = {(new if n == old else n): p for n, p in data["ports"].items()}
    for _, data in h.nodes(data=True):
        if data.get("rack") == old:
            data["rack"] = new
    return h


# --- fat-tree ---------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_fat_tree_counts(k):
    """A k-ary fat-tree has k^3/4 machines, 5k^2/4 switches and 3k^3/4 links."""
    g = fat_tree(k)
    tiers = [g.nodes[s]["tier"] for s in switches(g)]
    assert len(machines(g)) == k**3 // 4
    assert len(switches(g)) == 5 * k**2 // 4
    assert tiers.count("edge") == tiers.count("agg") == k * k // 2
    assert tiers.count("core") == (k // 2) ** 2
    assert g.number_of_edges() == 3 * k**3 // 4
    assert g.number_of_nodes() == k**3 // 4 + 5 * k**2 // 4


@pytest.mark.parametrize("k", [4, 6, 8])
def test_fat_tree_schema(k):
    """Every fat-tree node and link carries the schema's attributes with the documented values."""
    g = fat_tree(k, gpus_per_machine=8, bw_mbps=400.0, delay_us=5.0)
    validate_topology(g)
    assert g.graph["kind"] == "fat_tree" and g.graph["name"] == f"fat_tree_k{k}"
    assert g.graph["params"]["k"] == k and g.graph["params"]["gpus_per_machine"] == 8
    assert machines(g) == [f"h{i}" for i in range(1, k**3 // 4 + 1)]
    half = k // 2
    for name in machines(g):
        d = g.nodes[name]
        i = d["index"]
        assert name == f"h{i}" and d["gpus"] == 8
        assert d["rack"] == f"e{(i - 1) // half + 1}"
        assert d["pod"] == f"p{(i - 1) // (half * half)}"
        assert d["ip"] == f"10.0.{i // 256}.{i % 256}"
        assert d["mac"] == f"00:00:00:00:{i // 256:02x}:{i % 256:02x}"
        assert list(g[name]) == [d["rack"]]
    for s in switches(g):
        d = g.nodes[s]
        assert d["pod"] == "" if d["tier"] == "core" else d["pod"] in {f"p{i}" for i in range(k)}
        assert sorted(g.edges[s, n]["ports"][s] for n in g[s]) == list(range(1, g.degree(s) + 1))
    assert len({g.nodes[s]["dpid"] for s in switches(g)}) == len(switches(g))
    for _, _, d in g.edges(data=True):
        assert d["bw_mbps"] == 400.0 and d["delay_us"] == 5.0


def test_fat_tree_core_wiring():
    """Aggregation switch j of every pod connects to cores j*(k/2)+1..(j+1)*(k/2)."""
    k, half = 6, 3
    g = fat_tree(k)
    for pod in range(k):
        for j in range(half):
            agg = f"a{pod * half + j + 1}"
            cores = sorted((n for n in g[agg] if g.nodes[n]["tier"] == "core"), key=natural_key)
            assert cores == [f"c{j * half + m + 1}" for m in range(half)]
            assert g.nodes[agg]["pod"] == f"p{pod}"


def test_fat_tree_pods_are_complete_bipartite():
    """Within a pod every edge switch links to every aggregation switch and to none elsewhere."""
    g = fat_tree(4)
    for e in (s for s in switches(g) if g.nodes[s]["tier"] == "edge"):
        aggs = [n for n in g[e] if g.nodes[n]["role"] == "switch"]
        assert len(aggs) == 2
        assert all(g.nodes[a]["tier"] == "agg" and g.nodes[a]["pod"] == g.nodes[e]["pod"] for a in aggs)


def test_fat_tree_ports_hosts_first_then_up():
    """Switch ports go to lower tiers first: e1 has its hosts on 1-2 and aggs on 3-4; c1 has pods in order."""
    g = fat_tree(4)
    ports_e1 = {g.edges["e1", n]["ports"]["e1"]: n for n in g["e1"]}
    ports_a1 = {g.edges["a1", n]["ports"]["a1"]: n for n in g["a1"]}
    ports_c1 = {g.edges["c1", n]["ports"]["c1"]: n for n in g["c1"]}
    assert ports_e1 == {1: "h1", 2: "h2", 3: "a1", 4: "a2"}
    assert ports_a1 == {1: "e1", 2: "e2", 3: "c1", 4: "c2"}
    assert ports_c1 == {1: "a1", 2: "a3", 3: "a5", 4: "a7"}
    assert g.edges["h1", "e1"]["ports"]["h1"] == 0


def test_fat_tree_node_order_is_machine_order():
    """Graph node order starts with the machines in index order (Cluster.from_topology relies on it)."""
    g = fat_tree(4)
    assert list(g.nodes)[:16] == machines(g)


@pytest.mark.parametrize("k", [0, 1, 3, 5, -2])
def test_fat_tree_rejects_bad_k(k):
    """Odd, zero and negative k are rejected with a message naming k and saying it must be even."""
    with pytest.raises(TopologyError, match=rf"k must be an even.*got k={k}"):
        fat_tree(k)


@pytest.mark.parametrize("kwargs, arg", [
    ({"k": 4.0}, "k must be"),
    ({"k": 4, "gpus_per_machine": 0}, "gpus_per_machine"),
    ({"k": 4, "bw_mbps": 0.0}, "bw_mbps"),
    ({"k": 4, "bw_mbps": float("nan")}, "bw_mbps"),
    ({"k": 4, "delay_us": -1.0}, "delay_us"),
])
def test_fat_tree_rejects_bad_arguments(kwargs, arg):
    """Out-of-range builder arguments fail with a TopologyError naming the argument."""
    with pytest.raises(TopologyError, match=arg):
        fat_tree(**kwargs)


# --- leaf-spine -------------------------------------------------------------------------------


@pytest.mark.parametrize("ratio", [1.0, 2.0, 3.0, 4.5, 0.5])
def test_leaf_spine_oversubscription(ratio):
    """Each leaf's total uplink capacity equals its total downlink capacity divided by the ratio."""
    g = leaf_spine(3, 4, 6, oversubscription=ratio, host_bw_mbps=25000.0)
    for leaf in (s for s in switches(g) if g.nodes[s]["tier"] == "leaf"):
        down = sum(g.edges[leaf, n]["bw_mbps"] for n in g[leaf] if g.nodes[n]["role"] == "machine")
        up = sum(g.edges[leaf, n]["bw_mbps"] for n in g[leaf] if g.nodes[n]["role"] == "switch")
        assert down == pytest.approx(6 * 25000.0)
        assert up == pytest.approx(down / ratio)


def test_leaf_spine_structure():
    """Every leaf links to every spine; machines, leaves and spines carry the documented attributes."""
    g = leaf_spine(4, 3, 5, gpus_per_machine=2)
    leaves = [s for s in switches(g) if g.nodes[s]["tier"] == "leaf"]
    spines = [s for s in switches(g) if g.nodes[s]["tier"] == "spine"]
    assert leaves == ["l1", "l2", "l3", "l4"] and spines == ["s1", "s2", "s3"]
    assert all(g.has_edge(leaf, s) for leaf in leaves for s in spines)
    assert g.number_of_edges() == 4 * 5 + 4 * 3
    assert machines(g) == [f"h{i}" for i in range(1, 21)]
    assert g.nodes["h6"]["rack"] == "l2" and g.nodes["h6"]["pod"] == "p0" and g.nodes["h6"]["gpus"] == 2
    assert all(g.nodes[s]["pod"] == "" for s in spines) and all(g.nodes[x]["pod"] == "p0" for x in leaves)
    assert g.graph["kind"] == "leaf_spine" and g.graph["params"]["n_spine"] == 3


@pytest.mark.parametrize("kwargs, arg", [
    ({"n_leaf": 0, "n_spine": 1, "hosts_per_leaf": 1}, "n_leaf"),
    ({"n_leaf": 1, "n_spine": 0, "hosts_per_leaf": 1}, "n_spine"),
    ({"n_leaf": 1, "n_spine": 1, "hosts_per_leaf": 0}, "hosts_per_leaf"),
    ({"n_leaf": 1, "n_spine": 1, "hosts_per_leaf": 1, "oversubscription": 0.0}, "oversubscription"),
    ({"n_leaf": 1, "n_spine": 1, "hosts_per_leaf": 1, "oversubscription": -2.0}, "oversubscription"),
    ({"n_leaf": 1, "n_spine": 1, "hosts_per_leaf": 1, "host_bw_mbps": 0}, "host_bw_mbps"),
])
def test_leaf_spine_rejects_bad_arguments(kwargs, arg):
    """Out-of-range leaf-spine arguments fail with a TopologyError naming the argument."""
    with pytest.raises(TopologyError, match=arg):
        leaf_spine(**kwargs)


# --- size limits ------------------------------------------------------------------------------


@pytest.mark.parametrize("builder, kwargs, pattern", [
    (leaf_spine, {"n_leaf": 2, "n_spine": 10_000_000, "hosts_per_leaf": 4},
     r"^leaf_spine n_leaf=2, n_spine=10000000, hosts_per_leaf=4 is too large: 10,000,002 switches, 20,000,008 links; "
     r"the emulator holds at most 4,096 machines, 1,024 switches and 16,384 links$"),
    (leaf_spine, {"n_leaf": 10**9, "n_spine": 1, "hosts_per_leaf": 1},
     r"1,000,000,000 machines, 1,000,000,001 switches"),
    (leaf_spine, {"n_leaf": 128, "n_spine": 128, "hosts_per_leaf": 32}, r"is too large: 20,480 links;"),
    (fat_tree, {"k": 26}, r"^fat_tree k=26 is too large: 4,394 machines; the emulator holds at most 4,096 machines"),
    (fat_tree, {"k": 10**12}, rf"^fat_tree k={10**12} is too large: {10**36 // 4:,} machines, {10**24 * 5 // 4:,} "),
    (fat_tree, {"k": 42, "limits": SIMULATOR_LIMITS},
     r"^fat_tree k=42 is too large: 18,522 machines; the simulator holds at most 16,384 machines, 4,096 switches "
     r"and 65,536 links$"),
])
def test_builders_reject_oversized_topologies_before_building(monkeypatch, builder, kwargs, pattern):
    """A topology over the size limits is a TopologyError naming the counts and limits, raised from the
    parameters alone: no graph is even created."""
    def no_graph(*args, **kw):
        raise AssertionError("the builder created a graph before checking its size")

    monkeypatch.setattr(nx, "Graph", no_graph)
    with pytest.raises(TopologyError, match=pattern):
        builder(**kwargs)


def test_largest_fat_tree_within_the_limits_builds():
    """k = 24 (3456 machines, 720 switches, 10368 links) is within the limits; they are the documented ones."""
    limits = (EMULATOR_LIMITS.machines, EMULATOR_LIMITS.switches, EMULATOR_LIMITS.links)
    assert limits == (4096, 1024, 16384)
    g = fat_tree(24)
    assert len(machines(g)) == 3456 and len(switches(g)) == 720 and g.number_of_edges() == 10368


def test_sixteen_thousand_machines_build_with_the_simulators_limits_only():
    """A 16,384-machine leaf-spine builds within the simulator's limits (names, addresses and dpids hold
    at that size), and the emulator's refuse it naming both back ends' limits."""
    kwargs = {"n_leaf": 1024, "n_spine": 16, "hosts_per_leaf": 16}
    g = build_topology("leaf_spine", limits=SIMULATOR_LIMITS, **kwargs)
    hosts = machines(g)
    assert len(hosts) == SIMULATOR_LIMITS.machines == 16384
    assert hosts[-1] == "h16384" and g.nodes["h16384"]["ip"] == "10.0.64.0"
    assert g.nodes["h16384"]["mac"] == "00:00:00:00:40:00" and g.nodes["l1024"]["dpid"] == 0x1_0000 + 1024
    with pytest.raises(TopologyError, match=r"^leaf_spine n_leaf=1024, n_spine=16, hosts_per_leaf=16 is too large: "
                                            r"16,384 machines, 1,040 switches, 32,768 links; the emulator holds at "
                                            r"most 4,096 machines, 1,024 switches and 16,384 links \(the simulator "
                                            r"holds up to 16,384 machines, 4,096 switches and 65,536 links\)$"):
        build_topology("leaf_spine", **kwargs)


def test_largest_fat_tree_within_the_simulators_limits_builds():
    """k = 40 (16,000 machines, 2,000 switches, 48,000 links), the largest fat-tree within the simulator's
    limits, builds and validates with them."""
    g = fat_tree(40, limits=SIMULATOR_LIMITS)
    assert len(machines(g)) == 16000 and len(switches(g)) == 2000 and g.number_of_edges() == 48000
    with pytest.raises(TopologyError, match=r"^the topology is too large: 16,000 machines, 2,000 switches, 48,000 "
                                            r"links; the emulator holds at most"):
        validate_topology(g)


def test_limits_are_not_a_builder_parameter_of_a_config():
    """A config's topology parameter named limits (a scalar) is an unknown parameter, never the back end's limits."""
    with pytest.raises(TopologyError, match=r"^unknown parameter\(s\) 'limits' for topology 'fat_tree'; valid: k, "):
        build_topology("fat_tree", k=4, limits=100000)


@pytest.mark.parametrize("builder, kwargs", [(fat_tree, {"k": 4}), (leaf_spine, {"n_leaf": 1, "n_spine": 1,
                                                                              "hosts_per_leaf": 1})])
def test_gpus_per_machine_is_bounded(builder, kwargs):
    """More than 64 GPU slots per machine is rejected (the cluster model keeps one slot per GPU)."""
    assert builder(**kwargs, gpus_per_machine=64)
    with pytest.raises(TopologyError, match=r"^gpus_per_machine must be an integer in 1..64, got 100000000$"):
        builder(**kwargs, gpus_per_machine=10**8)


def test_validate_rejects_oversized_graph():
    """validate_topology holds any graph, hand-built or loaded, to the same size limits."""
    g = tiny_topology()
    g.add_nodes_from((f"s{i}", {"role": "switch"}) for i in range(2, EMULATOR_LIMITS.switches + 2))
    with pytest.raises(TopologyError, match=r"^the topology is too large: 1,025 switches; the emulator holds at most"):
        validate_topology(g)


# --- validation -------------------------------------------------------------------------------


def test_validate_accepts_hand_built_file_topology():
    """A hand-built graph following the schema validates, and the same graph with a schema field
    broken does not (the check is not vacuous)."""
    g = tiny_topology()
    validate_topology(g)
    g.nodes["s1"]["dpid"] = None
    with pytest.raises(TopologyError):
        validate_topology(g)


def test_validate_rejects_duplicate_dpid():
    """Two switches with one dpid are reported by name."""
    g = fat_tree(4)
    g.nodes["a3"]["dpid"] = g.nodes["e1"]["dpid"]
    with pytest.raises(TopologyError, match=r"'e1' and 'a3' share dpid"):
        validate_topology(g)


def test_validate_rejects_duplicate_port():
    """Two links on one switch port are reported with the switch and both neighbours."""
    g = fat_tree(4)
    g.edges["e1", "a1"]["ports"]["e1"] = g.edges["e1", "h1"]["ports"]["e1"]
    with pytest.raises(TopologyError, match=r"switch 'e1': port 1 used by both links to 'h1' and 'a1'"):
        validate_topology(g)


def test_validate_rejects_port_out_of_range():
    """A switch port beyond the switch's degree is rejected."""
    g = tiny_topology()
    g.edges["h1", "s1"]["ports"]["s1"] = 7
    with pytest.raises(TopologyError, match=r"port on switch 's1' must be in 1..2"):
        validate_topology(g)


def test_validate_rejects_nonzero_machine_port():
    """A machine's port must be 0 (its interface is <name>-eth0)."""
    g = tiny_topology()
    g.edges["h1", "s1"]["ports"]["h1"] = 1
    with pytest.raises(TopologyError, match=r"machine's port must be 0, 'h1'"):
        validate_topology(g)


@pytest.mark.parametrize("bad, problem", [
    ("hostnumber1", "at most 10"),
    ("h-1", "no '-' or '_'"),
    ("a1_2", "no '-' or '_'"),
    ("1h", "starting with a letter"),
])
def test_validate_rejects_bad_names(bad, problem):
    """Names that are too long or would break '<name>-eth<N>' interface names are rejected."""
    g = rename(tiny_topology(), "h1", bad)
    with pytest.raises(TopologyError, match=rf"node '{bad}'.*{problem}"):
        validate_topology(g)


def test_validate_rejects_interface_name_over_15_chars():
    """A 10-character switch name with a two-digit port would make a 16-character interface name."""
    g = rename(fat_tree(4), "e1", "edgeswitch")  # 10 chars: fine with ports 1..4
    validate_topology(g)
    g = rename(leaf_spine(1, 1, 10), "l1", "leafswitch")  # port 11: 'leafswitch-eth11' is 16 chars
    with pytest.raises(TopologyError, match=r"'leafswitch-eth11' is longer than 15"):
        validate_topology(g)


def test_validate_rejects_machine_with_two_links():
    """A machine attached to two switches is rejected, naming the machine and its links."""
    g = fat_tree(4)
    g.add_edge("h1", "e2", bw_mbps=1.0, delay_us=0.0, ports={"h1": 0, "e2": 5})
    with pytest.raises(TopologyError, match=r"machine 'h1': must have exactly one link, has 2 \(e1, e2\)"):
        validate_topology(g)


def test_validate_rejects_machine_linked_to_machine():
    """A machine's single link must go to a switch."""
    g = tiny_topology()
    g.add_node("h3", **{**g.nodes["h2"], "index": 3, "ip": machine_ip(3), "mac": machine_mac(3)})
    g.remove_edge("h2", "s1")
    g.add_edge("h2", "h3", bw_mbps=1.0, delay_us=0.0, ports={"h2": 0, "h3": 0})
    g.edges["h1", "s1"]["ports"]["s1"] = 1
    with pytest.raises(TopologyError, match=r"machine 'h2': its link must go to a switch, goes to 'h3'"):
        validate_topology(g)


def test_validate_rejects_missing_bw():
    """A link without bw_mbps is reported by its endpoints."""
    g = fat_tree(4)
    del g.edges["a1", "c1"]["bw_mbps"]
    with pytest.raises(TopologyError, match=r"link '(a1'-'c1|c1'-'a1)': 'bw_mbps' must be .* > 0, got None"):
        validate_topology(g)


def test_validate_rejects_disconnected():
    """A graph in two pieces is rejected as disconnected."""
    g = tiny_topology()
    g.add_node("h3", role="machine", gpus=1, index=3, rack="s2", pod="p1", ip=machine_ip(3),
               mac=machine_mac(3))
    g.add_node("s2", role="switch", tier="leaf", dpid=2, pod="p1")
    g.add_edge("h3", "s2", bw_mbps=1.0, delay_us=0.0)
    assign_ports(g)
    with pytest.raises(TopologyError, match=r"disconnected: 2 components, e.g. \{h3, s2\}"):
        validate_topology(g)


@pytest.mark.parametrize("mutate, problem", [
    (lambda g: g.nodes["h1"].update(gpus=0), r"machine 'h1': 'gpus' must be an int >= 1"),
    (lambda g: g.nodes["h1"].update(gpus=True), r"machine 'h1': 'gpus' must be an int >= 1"),
    (lambda g: g.nodes["h2"].update(index=1), r"machines 'h1' and 'h2' share index 1"),
    (lambda g: g.nodes["h2"].update(ip="10.0.0.1"), r"share ip '10.0.0.1'"),
    (lambda g: g.nodes["h2"].update(ip="10.0.0.300"), r"'ip' must be an IPv4 address"),
    (lambda g: g.nodes["h2"].update(mac="00:00:00:00:00:01"), r"share mac"),
    (lambda g: g.nodes["h1"].update(rack="s9"), r"'rack' is 's9' but the machine attaches to switch 's1'"),
    (lambda g: g.nodes["s1"].update(tier="tor"), r"switch 's1': 'tier' must be one of"),
    (lambda g: g.nodes["s1"].update(dpid=0), r"switch 's1': 'dpid' must be an int"),
    (lambda g: g.nodes["s1"].update(tier="spine"), r"a spine switch belongs to no pod"),
    (lambda g: g.nodes["s1"].update(role="router"), r"node 's1': 'role' must be one of machine, switch"),
    (lambda g: g.edges["h1", "s1"].update(delay_us=-1.0), r"'delay_us' must be a finite number >= 0"),
    (lambda g: g.edges["h1", "s1"].update(ports={"h1": 0}), r"'ports' must be a dict with exactly the keys"),
    (lambda g: g.graph.update(kind="mesh"), r"graph attribute 'kind' must be one of"),
    (lambda g: g.graph.pop("params"), r"graph attribute 'params' must be a dict"),
])
def test_validate_rejects_each_broken_attribute(mutate, problem):
    """Each kind of bad attribute is caught and named."""
    g = tiny_topology()
    mutate(g)
    with pytest.raises(TopologyError, match=problem):
        validate_topology(g)


def test_validate_rejects_wrong_tier_for_kind():
    """A fat-tree may not contain a leaf switch."""
    g = fat_tree(4)
    g.nodes["e1"]["tier"] = "leaf"
    with pytest.raises(TopologyError, match=r"'e1': 'tier' must be one of edge, agg, core for kind 'fat_"):
        validate_topology(g)


def test_validate_rejects_directed_and_multigraphs():
    """Only an undirected simple networkx.Graph is a topology."""
    with pytest.raises(TopologyError, match="undirected networkx.Graph"):
        validate_topology(nx.DiGraph(tiny_topology()))
    with pytest.raises(TopologyError, match="undirected networkx.Graph"):
        validate_topology(nx.MultiGraph(tiny_topology()))


def test_validate_reports_all_problems_at_once():
    """Several problems are reported together in one message."""
    g = tiny_topology()
    g.nodes["h1"]["gpus"] = 0
    g.nodes["s1"]["dpid"] = -1
    with pytest.raises(TopologyError) as info:
        validate_topology(g)
    assert "'gpus'" in str(info.value) and "'dpid'" in str(info.value)


def test_natural_key_orders_numbers_by_value():
    """h2 sorts before h10, and distinct names never tie."""
    names = ["h10", "h2", "e1", "h1", "a10", "a9"]
    assert sorted(names, key=natural_key) == ["a9", "a10", "e1", "h1", "h2", "h10"]
    assert natural_key("h1") != natural_key("h01")


def test_machine_addresses():
    """IP and MAC are derived from the index's two bytes, and out-of-range indices are refused."""
    assert machine_ip(1) == "10.0.0.1" and machine_ip(257) == "10.0.1.1"
    assert machine_mac(300) == "00:00:00:00:01:2c"
    with pytest.raises(TopologyError, match="out of range"):
        machine_ip(0)


# --- registry ---------------------------------------------------------------------------------


def test_build_topology_dispatches_to_registered_builders():
    """build_topology calls the registered builder with the given parameters."""
    assert set(TOPOLOGIES) == {"fat_tree", "leaf_spine", "file"}
    g = build_topology("fat_tree", k=4, gpus_per_machine=2)
    assert len(machines(g)) == 16 and g.nodes["h1"]["gpus"] == 2
    g = build_topology("leaf_spine", n_leaf=2, n_spine=2, hosts_per_leaf=3, oversubscription=2.0)
    assert g.edges["l1", "s1"]["bw_mbps"] == pytest.approx(3 * 10000.0 / 4)


def test_build_topology_unknown_kind():
    """An unknown topology kind lists the valid ones and suggests the closest."""
    with pytest.raises(TopologyError,
                       match=r"unknown topology 'fattree'; valid: fat_tree, file, leaf_spine.*'fat_tree'"):
        build_topology("fattree", k=4)


def test_build_topology_bad_keyword():
    """A parameter the builder does not take is named together with the valid parameters."""
    with pytest.raises(TopologyError, match=r"parameter\(s\) 'radix' for topology 'fat_tree'; valid: k, gp"):
        build_topology("fat_tree", radix=4)
    with pytest.raises(TopologyError, match=r"topology 'leaf_spine' needs parameter\(s\) 'hosts_per_leaf'"):
        build_topology("leaf_spine", n_leaf=2, n_spine=2)


def test_build_topology_from_file(tmp_path):
    """The 'file' kind loads a topology.json."""
    path = tmp_path / "topology.json"
    write_topology_json(fat_tree(4), path)
    assert len(machines(build_topology("file", path=str(path)))) == 16


# --- topology.json ----------------------------------------------------------------------------


@pytest.mark.parametrize("g", [fat_tree(4, delay_us=3.0), leaf_spine(3, 2, 4, oversubscription=3.0),
                               tiny_topology()], ids=["fat_tree", "leaf_spine", "file"])
def test_json_round_trip_preserves_everything(tmp_path, g):
    """Writing and reading topology.json gives back the same graph, attributes, node order and ports."""
    path = tmp_path / "topology.json"
    write_topology_json(g, path)
    back = read_topology_json(path)
    assert type(back) is nx.Graph
    assert back.graph == g.graph
    assert list(back.nodes(data=True)) == list(g.nodes(data=True))
    assert {frozenset((u, v)): d for u, v, d in back.edges(data=True)} == \
        {frozenset((u, v)): d for u, v, d in g.edges(data=True)}
    assert all(isinstance(p, int) for _, _, d in back.edges(data=True) for p in d["ports"].values())
    assert os.listdir(tmp_path) == ["topology.json"]  # no temporary file left behind


def test_json_read_hand_written_file_without_graph_flags(tmp_path):
    """A file that omits "directed" and "multigraph" loads as a plain undirected Graph."""
    path = tmp_path / "topology.json"
    write_topology_json(tiny_topology(), path)
    data = json.loads(path.read_text())
    del data["directed"], data["multigraph"]
    path.write_text(json.dumps(data))
    assert type(read_topology_json(path)) is nx.Graph


def test_json_write_replaces_existing_file(tmp_path):
    """Writing over an existing topology.json replaces it whole."""
    path = tmp_path / "topology.json"
    write_topology_json(fat_tree(4), path)
    write_topology_json(tiny_topology(), path)
    assert read_topology_json(path).graph["name"] == "tiny"
    assert os.listdir(tmp_path) == ["topology.json"]


def test_json_write_refuses_invalid_graph(tmp_path):
    """An invalid graph is not written."""
    g = tiny_topology()
    g.nodes["s1"]["dpid"] = 0
    with pytest.raises(TopologyError, match="dpid"):
        write_topology_json(g, tmp_path / "t.json")
    assert not os.listdir(tmp_path)


def test_json_write_unwritable_path_names_it(tmp_path):
    """A write into a missing directory fails with a TopologyError naming the path."""
    path = tmp_path / "missing" / "t.json"
    with pytest.raises(TopologyError, match=rf"cannot write topology file {path}"):
        write_topology_json(tiny_topology(), path)


@pytest.mark.parametrize("content, problem", [
    (None, "cannot read topology file"),
    ('{"multigraph": true, "graph": {}, "nodes": [], "links": []}', "undirected networkx.Graph"),
    ("{not json", "cannot read topology file"),
    ("[1, 2]", "expected a JSON object"),
    ('{"nodes": [], "links": [{"target": "s1"}]}', "not networkx node-link data"),
    ('{"nodes": 5, "links": []}', "not networkx node-link data"),
])
def test_json_read_malformed_names_path(tmp_path, content, problem):
    """A missing, unparsable or non-node-link file fails with a TopologyError naming the path."""
    path = tmp_path / "t.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(TopologyError, match=problem) as info:
        read_topology_json(path)
    assert str(path) in str(info.value)


def test_json_read_validates(tmp_path):
    """A well-formed file that breaks the schema is rejected with the path and the problem."""
    path = tmp_path / "t.json"
    write_topology_json(tiny_topology(), path)
    data = json.loads(path.read_text())
    data["nodes"][0]["gpus"] = 0
    path.write_text(json.dumps(data))
    with pytest.raises(TopologyError, match=rf"topology file {path}: invalid topology: machine 'h1': 'gpus'"):
        read_topology_json(path)


def test_json_read_refuses_a_fifo_without_blocking(tmp_path):
    """A FIFO is refused as not a regular file; reading never waits for a writer."""
    fifo = str(tmp_path / "topology.json")
    os.mkfifo(fifo)
    error = read_fifo_within(read_topology_json, fifo)
    assert isinstance(error, TopologyError)
    assert str(error) == f"cannot read topology file {fifo}: a FIFO, not a regular file"


@pytest.mark.parametrize("path, kind", [("/dev/null", "a character device"), (None, "a directory")])
def test_json_read_refuses_devices_and_directories(tmp_path, path, kind):
    """A device (/dev/null, hence never /dev/zero either) or a directory is refused before it is read."""
    path = path or str(tmp_path)
    with pytest.raises(TopologyError, match=rf"^cannot read topology file {path}: {kind}, not a regular file$"):
        read_topology_json(path)


def test_json_read_refuses_a_file_over_the_size_limit(tmp_path):
    """A regular file over MAX_FILE_BYTES (16 MiB) is refused unparsed, at most one byte over the limit read."""
    path = tmp_path / "topology.json"
    with open(path, "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk space used
    with pytest.raises(TopologyError, match=rf"^cannot read topology file {path}: larger than 16 MiB$"):
        read_topology_json(path)


@pytest.mark.parametrize("content, pattern", [
    (bytes(range(256)), r"not UTF-8 text \(byte 0x80 at offset 128\)$"),
    (b"[" * 100_000 + b"]" * 100_000, r"not usable JSON: RecursionError: maximum recursion depth exceeded"),
    (b'{"nodes": [' + b"9" * 5000 + b'], "links": []}', r"not usable JSON: ValueError: Exceeds the limit"),
    (json.dumps({"nodes": [{"id": f"h{i}", "role": "machine"} for i in range(5000)], "links": []}).encode(),
     r"the topology is too large: 5,000 machines; the emulator holds at most 4,096 machines"),
])
def test_json_read_malformed_content_is_one_line_error(tmp_path, content, pattern):
    """Non-UTF-8 bytes, nesting deeper than the stack, a 5000-digit number or too many nodes are one-line
    TopologyErrors naming the path (too many nodes: before a graph is built)."""
    path = tmp_path / "t.json"
    path.write_bytes(content)
    with pytest.raises(TopologyError, match=pattern) as info:
        read_topology_json(path)
    assert str(path) in str(info.value) and len(str(info.value).splitlines()) == 1


# --- layering ---------------------------------------------------------------------------------


def test_import_topo_loads_no_heavy_modules():
    """Importing topo (and topo.routing) loads no torch, mininet or os_ken module."""
    code = ("import sys, topo, topo.routing, topo.io\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'mininet', 'os_ken'})\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.strip() == ""
