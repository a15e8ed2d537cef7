"""Two-tier leaf-spine (folded Clos) fabric with a configurable oversubscription ratio.

Every leaf connects to every spine. Leaf ``l{n}`` (1-based) hosts machines
``h{(n-1)*hosts_per_leaf + 1} .. h{n*hosts_per_leaf}``. Each leaf-spine link runs at
``hosts_per_leaf * host_bw_mbps / (oversubscription * n_spine)``, so a leaf's total uplink
capacity is its total downlink capacity divided by the oversubscription ratio (1.0 is
non-blocking; 3.0 is the common 3:1).

Every machine and leaf is in pod ``"p0"``; spines are in no pod (``""``). DPIDs encode the tier
in the third byte: ``l{n}`` has ``0x1_0000 + n`` and ``s{n}`` ``0x2_0000 + n``.
"""

from __future__ import annotations

import networkx as nx

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

DPID_TIER_BASE = {"leaf": 0x1_0000, "spine": 0x2_0000}
POD = "p0"


def leaf_spine(n_leaf: int, n_spine: int, hosts_per_leaf: int, oversubscription: float = 1.0,
               gpus_per_machine: int = 4, host_bw_mbps: float = 10000.0, delay_us: float = 0.0,
               name: str | None = None, limits: SizeLimits = EMULATOR_LIMITS) -> nx.Graph:
    """Build a leaf-spine cluster.

    Args:
        n_leaf: number of leaf (top-of-rack) switches (>= 1).
        n_spine: number of spine switches (>= 1).
        hosts_per_leaf: machines per leaf (>= 1).
        oversubscription: leaf downlink capacity over uplink capacity (> 0).
        gpus_per_machine: GPU slots on every machine (1..64).
        host_bw_mbps: paper-scale rate of each machine's link, Mbit/s (> 0).
        delay_us: one-way delay of every link, microseconds (>= 0).
        name: graph name; defaults to ``"leaf_spine_{n_leaf}x{n_spine}x{hosts_per_leaf}_os{ratio}"``.
        limits: the largest topology the back end takes (:class:`topo.schema.SizeLimits`).

    Returns:
        A validated topology (see :mod:`topo.schema`) with ``kind="leaf_spine"``.

    Raises:
        TopologyError: an argument is out of range, or the fabric would be larger than ``limits``
            allow.
    """
    for arg, value in (("n_leaf", n_leaf), ("n_spine", n_spine), ("hosts_per_leaf", hosts_per_leaf)):
        check_positive_int(arg, value)
    n_machines = n_leaf * hosts_per_leaf
    check_size(f"leaf_spine n_leaf={n_leaf}, n_spine={n_spine}, hosts_per_leaf={hosts_per_leaf}",
               n_machines, n_leaf + n_spine, n_machines + n_leaf * n_spine, limits)
    check_positive_int("gpus_per_machine", gpus_per_machine, maximum=MAX_GPUS_PER_MACHINE)
    check_number("oversubscription", oversubscription, minimum=0.0, strict=True)
    check_number("host_bw_mbps", host_bw_mbps, minimum=0.0, strict=True)
    check_number("delay_us", delay_us, minimum=0.0, strict=False)
    uplink_bw_mbps = hosts_per_leaf * host_bw_mbps / (oversubscription * n_spine)
    g = nx.Graph(name=name or f"leaf_spine_{n_leaf}x{n_spine}x{hosts_per_leaf}_os{oversubscription:g}",
                 kind="leaf_spine",
                 params={"n_leaf": n_leaf, "n_spine": n_spine, "hosts_per_leaf": hosts_per_leaf,
                         "oversubscription": float(oversubscription), "gpus_per_machine": gpus_per_machine,
                         "host_bw_mbps": float(host_bw_mbps), "delay_us": float(delay_us), "name": name})

    # Machines first, in index order: node order is machine order for anyone iterating g.nodes.
    for leaf in range(1, n_leaf + 1):
        for m in range(hosts_per_leaf):
            index = (leaf - 1) * hosts_per_leaf + m + 1
            g.add_node(f"h{index}", role="machine", gpus=gpus_per_machine, index=index, rack=f"l{leaf}",
                       pod=POD, ip=machine_ip(index), mac=machine_mac(index))
    for leaf in range(1, n_leaf + 1):
        g.add_node(f"l{leaf}", role="switch", tier="leaf", dpid=DPID_TIER_BASE["leaf"] + leaf, pod=POD)
    for spine in range(1, n_spine + 1):
        g.add_node(f"s{spine}", role="switch", tier="spine", dpid=DPID_TIER_BASE["spine"] + spine, pod="")

    for machine, data in list(g.nodes(data=True)):
        if data["role"] == "machine":
            g.add_edge(machine, data["rack"], bw_mbps=float(host_bw_mbps), delay_us=float(delay_us))
    for leaf in range(1, n_leaf + 1):
        for spine in range(1, n_spine + 1):
            g.add_edge(f"l{leaf}", f"s{spine}", bw_mbps=float(uplink_bw_mbps), delay_us=float(delay_us))

    assign_ports(g)
    validate_topology(g, limits)
    return g
