"""Cluster topologies as pure, validated ``networkx`` graphs (no Mininet here).

A topology is built by a registered builder function and follows the schema in
:mod:`topo.schema`::

    g = build_topology("fat_tree", k=4)
    g = build_topology("leaf_spine", n_leaf=4, n_spine=2, hosts_per_leaf=4, oversubscription=2.0)
    g = build_topology("file", path="results/run/topology.json")
    g = build_topology("leaf_spine", n_leaf=625, n_spine=16, hosts_per_leaf=16, limits=SIMULATOR_LIMITS)

Every builder takes the back end's size limits (:class:`topo.schema.SizeLimits`), the emulator's
by default. Adding a topology is one new module with a builder function plus one line in
:data:`TOPOLOGIES`. Routing over a topology lives in :mod:`topo.routing`; the file format in
:mod:`topo.io`.
"""

from __future__ import annotations

import inspect

import networkx as nx

from common.errors import TopologyError, unknown_name
from topo.fat_tree import fat_tree
from topo.io import read_topology_json, write_topology_json
from topo.leaf_spine import leaf_spine
from topo.routing import (
    ecmp_path,
    equal_cost_paths,
    next_hops,
    path_links,
    port_towards,
    route_table,
    stable_hash,
)
from topo.schema import (
    EMULATOR_LIMITS,
    SIMULATOR_LIMITS,
    SizeLimits,
    machines,
    natural_key,
    switches,
    validate_topology,
)

#: Builders by name; each takes keyword parameters and returns a validated graph.
TOPOLOGIES = {
    "fat_tree": fat_tree,
    "leaf_spine": leaf_spine,
    "file": read_topology_json,
}


def build_topology(kind: str, /, limits: SizeLimits = EMULATOR_LIMITS, **params) -> nx.Graph:
    """Build the topology registered as ``kind`` with keyword ``params``, within ``limits`` (the
    back end's; not a builder parameter a config can set).

    Raises:
        TopologyError: ``kind`` is unknown (the message lists the valid ones), a parameter is not
            accepted or is missing (the message names it and the valid ones), or the builder
            rejects a value.
    """
    if kind not in TOPOLOGIES:
        raise TopologyError(unknown_name("topology", kind, TOPOLOGIES))
    builder = TOPOLOGIES[kind]
    signature = inspect.signature(builder)
    valid = [p for p in signature.parameters if p != "limits"]
    bad = [p for p in params if p not in valid]
    if not isinstance(limits, SizeLimits):  # a config's parameter named "limits" (a scalar) lands here
        bad.insert(0, "limits")
    if bad:
        raise TopologyError(f"unknown parameter(s) {', '.join(map(repr, bad))} for topology {kind!r}; "
                            f"valid: {', '.join(valid)}")
    missing = [p for p in valid if signature.parameters[p].default is inspect.Parameter.empty and p not in params]
    if missing:
        raise TopologyError(f"topology {kind!r} needs parameter(s) {', '.join(map(repr, missing))}; "
                            f"valid: {', '.join(valid)}")
    return builder(**params, limits=limits)


__all__ = [
    "EMULATOR_LIMITS",
    "SIMULATOR_LIMITS",
    "TOPOLOGIES",
    "SizeLimits",
    "build_topology",
    "ecmp_path",
    "equal_cost_paths",
    "fat_tree",
    "leaf_spine",
    "machines",
    "natural_key",
    "next_hops",
    "path_links",
    "port_towards",
    "read_topology_json",
    "route_table",
    "stable_hash",
    "switches",
    "validate_topology",
    "write_topology_json",
]
