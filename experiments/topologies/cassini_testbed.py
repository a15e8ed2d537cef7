"""Write ``cassini_testbed.json``: the Cassini thesis's testbed fabric as ``docs/resolutions.md``
(Cassini §7.2) reads it. The thesis splits one Tofino switch into 13 logical switches joined by 48
links into a 2:1 oversubscribed fabric of 24 single-GPU servers with 50 Gbit/s NICs, but its
Fig. 4.10 (the layout) is missing; the one layout that matches every stated count is 6 ToRs of 4
servers, each ToR with 2 uplinks (2:1), 4 aggregation switches and 3 cores, each aggregation
switch with 3 core uplinks: 6 + 4 + 3 = 13 switches, 24 + 12 + 12 = 48 links. ToRs e1-e3 go up to
a1 and a2, e4-e6 to a3 and a4 (two pods); every link 50 Gbit/s.

    python3 experiments/topologies/cassini_testbed.py    # rewrites the JSON beside this file
"""

from __future__ import annotations

import os
import sys

import networkx as nx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from topo.fat_tree import DPID_TIER_BASE  # noqa: E402  (the fat-tree's tiers and DPIDs)
from topo.io import write_topology_json  # noqa: E402
from topo.schema import assign_ports, machine_ip, machine_mac  # noqa: E402

TORS, HOSTS_PER_TOR, AGGS, CORES = 6, 4, 4, 3
BW_MBPS = 50_000.0


def cassini_testbed() -> nx.Graph:
    """The 13-switch, 48-link fabric (module docstring), validated."""
    g = nx.Graph(name="cassini_testbed", kind="file", params={"path": "cassini_testbed.json"})
    link = {"bw_mbps": BW_MBPS, "delay_us": 0.0}
    pod = {t: f"p{(t - 1) // 3}" for t in range(1, TORS + 1)}
    for t in range(1, TORS + 1):
        for m in range(HOSTS_PER_TOR):
            index = (t - 1) * HOSTS_PER_TOR + m + 1
            g.add_node(f"h{index}", role="machine", gpus=1, index=index, rack=f"e{t}", pod=pod[t],
                       ip=machine_ip(index), mac=machine_mac(index))
    for t in range(1, TORS + 1):
        g.add_node(f"e{t}", role="switch", tier="edge", dpid=DPID_TIER_BASE["edge"] + t, pod=pod[t])
    for a in range(1, AGGS + 1):
        g.add_node(f"a{a}", role="switch", tier="agg", dpid=DPID_TIER_BASE["agg"] + a, pod=f"p{(a - 1) // 2}")
    for c in range(1, CORES + 1):
        g.add_node(f"c{c}", role="switch", tier="core", dpid=DPID_TIER_BASE["core"] + c, pod="")
    for machine, data in list(g.nodes(data=True)):
        if data["role"] == "machine":
            g.add_edge(machine, data["rack"], **link)
    for t in range(1, TORS + 1):
        first = 1 + 2 * ((t - 1) // 3)
        for a in (first, first + 1):
            g.add_edge(f"e{t}", f"a{a}", **link)
    for a in range(1, AGGS + 1):
        for c in range(1, CORES + 1):
            g.add_edge(f"a{a}", f"c{c}", **link)
    assign_ports(g)
    return g


if __name__ == "__main__":
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cassini_testbed.json")
    g = cassini_testbed()
    write_topology_json(g, out)
    switches = sum(1 for _, r in g.nodes(data="role") if r == "switch")
    print(f"wrote {out}: {switches} switches, {g.number_of_edges()} links")
