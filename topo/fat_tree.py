"""The k-ary fat-tree of Al-Fares, Loukissas and Vahdat, SIGCOMM 2008 (Section 3.2).

``k`` pods of ``k/2`` edge and ``k/2`` aggregation switches, ``(k/2)**2`` cores, ``k/2`` machines per
edge switch: ``k**3/4`` machines, ``5*k**2/4`` switches and ``3*k**3/4`` links. Switches are ``e{n}``,
``a{n}``, ``c{n}`` and machines ``h{n}``, numbered globally from 1 in pod order; DPIDs encode the tier
in the third byte.

The naming, wiring and DPIDs in full: ``docs/topologies.md`` (Fat-tree names and DPIDs).
"""

from __future__ import annotations

import networkx as nx

from common.errors import TopologyError
from topo.schema import (
    EMULATOR_LIMITS,
    MAX_GPUS_PER_MACHINE,
    SizeLimits,
    assign_ports,
    check_number,
    check_positive_int,
    check_size,
    machine_ip,
    machine_mac,
    validate_topology,
)

DPID_TIER_BASE = {"edge": 0x1_0000, "agg": 0x2_0000, "core": 0x3_0000}


def fat_tree(k: int, gpus_per_machine: int = 4, bw_mbps: float = 10000.0, delay_us: float = 0.0,
             name: str | None = None, limits: SizeLimits = EMULATOR_LIMITS) -> nx.Graph:
    """Build a k-ary fat-tree cluster.

    Args:
        k: switch radix; even, >= 2.
        gpus_per_machine: GPU slots on every machine (1..64).
        bw_mbps: paper-scale rate of every link, Mbit/s (> 0).
        delay_us: one-way delay of every link, microseconds (>= 0).
        name: graph name; defaults to ``"fat_tree_k{k}"``.
        limits: the largest topology the back end takes (:class:`topo.schema.SizeLimits`).

    Returns:
        A validated topology (see :mod:`topo.schema`) with ``kind="fat_tree"``.

    Raises:
        TopologyError: ``k`` is not an even integer >= 2, the tree would be larger than ``limits``
            allow (k <= 24 on the emulator, k <= 40 on the simulator), or another argument is out of
            range.
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 2 or k % 2:
        raise TopologyError(f"fat-tree k must be an even integer >= 2 (k/2 hosts, uplinks and downlinks "
                            f"per switch), got k={k!r}")
    check_size(f"fat_tree k={k}", k**3 // 4, 5 * k**2 // 4, 3 * k**3 // 4, limits)
    check_positive_int("gpus_per_machine", gpus_per_machine, maximum=MAX_GPUS_PER_MACHINE)
    check_number("bw_mbps", bw_mbps, minimum=0.0, strict=True)
    check_number("delay_us", delay_us, minimum=0.0, strict=False)
    half = k // 2
    g = nx.Graph(name=name or f"fat_tree_k{k}", kind="fat_tree",
                 params={"k": k, "gpus_per_machine": gpus_per_machine, "bw_mbps": float(bw_mbps),
                         "delay_us": float(delay_us), "name": name})
    link = {"bw_mbps": float(bw_mbps), "delay_us": float(delay_us)}

    # Machines first, in index order: node order is machine order for anyone iterating g.nodes.
    for pod in range(k):
        for j in range(half):
            edge = f"e{pod * half + j + 1}"
            for m in range(half):
                index = (pod * half + j) * half + m + 1
                g.add_node(f"h{index}", role="machine", gpus=gpus_per_machine, index=index, rack=edge,
                           pod=f"p{pod}", ip=machine_ip(index), mac=machine_mac(index))
    for pod in range(k):
        for j in range(half):
            n = pod * half + j + 1
            g.add_node(f"e{n}", role="switch", tier="edge", dpid=DPID_TIER_BASE["edge"] + n, pod=f"p{pod}")
    for pod in range(k):
        for j in range(half):
            n = pod * half + j + 1
            g.add_node(f"a{n}", role="switch", tier="agg", dpid=DPID_TIER_BASE["agg"] + n, pod=f"p{pod}")
    for n in range(1, half * half + 1):
        g.add_node(f"c{n}", role="switch", tier="core", dpid=DPID_TIER_BASE["core"] + n, pod="")

    for machine, data in list(g.nodes(data=True)):
        if data["role"] == "machine":
            g.add_edge(machine, data["rack"], **link)
    for pod in range(k):
        for j in range(half):
            for jj in range(half):
                g.add_edge(f"e{pod * half + j + 1}", f"a{pod * half + jj + 1}", **link)
    for pod in range(k):
        for j in range(half):
            for m in range(half):
                g.add_edge(f"a{pod * half + j + 1}", f"c{j * half + m + 1}", **link)

    assign_ports(g)
    validate_topology(g, limits)
    return g

