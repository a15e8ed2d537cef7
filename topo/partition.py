"""Which server of an emulation cluster holds each node of a topology (cluster mode).

Mininet's cluster edition (``mininet.examples.cluster.SwitchBinPlacer``) puts switches in
evenly sized bins, one per server, and each host beside its switch, so that host links never
cross servers. :func:`assign_servers` does the same with the topology's own structure: the
unit is a *group* that must stay whole (a fat-tree pod: its edge and aggregation switches and
their machines; a leaf-spine rack: its leaf and machines; or one pod-less core or spine
switch), and groups are dealt out in order in contiguous, evenly sized bins, so only links
between groups (pod to core, leaf to spine) become tunnels between servers. The pod-less
switches stay on the first server (this machine), so every tunnel has one end there: a star
of tunnels, which Mininet's SSH tunnels need no server-to-server login for.

Pure: networkx graphs in, plain dicts out. Time: O(nodes).
"""

from __future__ import annotations

import networkx as nx

from topo.schema import POD_LESS_TIERS, machines, natural_key, switches


def node_groups(g: nx.Graph) -> list[list[str]]:
    """The topology's groups that stay on one server, in order: pods (or, where every machine
    is in one pod, as in a leaf-spine, racks) first, then the pod-less switches one by one."""
    pods = {g.nodes[m]["pod"] for m in machines(g)}
    key = "pod" if len(pods) > 1 else "rack"
    groups: dict[str, list[str]] = {}
    for m in machines(g):
        groups.setdefault(g.nodes[m][key], []).append(m)
    loose = []
    for s in switches(g):
        d = g.nodes[s]
        if d.get("tier") in POD_LESS_TIERS:
            loose.append([s])
        elif key == "pod":
            groups.setdefault(d["pod"], []).append(s)
        else:
            groups.setdefault(s, []).append(s)  # a leaf: its rack is named after it
    return [groups[k] for k in sorted(groups, key=natural_key)] + loose


def rack_groups(g: nx.Graph) -> list[list[str]]:
    """The groups of :func:`node_groups` that hold machines (pods or racks): what is spread."""
    return [grp for grp in node_groups(g) if any(g.nodes[n]["role"] == "machine" for n in grp)]


def _bins(items: list, n: int) -> list[list]:
    """``items`` in ``n`` contiguous bins whose sizes differ by at most one (the first larger)."""
    q, r = divmod(len(items), n)
    out, i = [], 0
    for b in range(n):
        size = q + (1 if b < r else 0)
        out.append(items[i:i + size])
        i += size
    return out


def assign_servers(g: nx.Graph, servers: list[str]) -> dict[str, str]:
    """Node -> server, for every machine and switch of ``g``.

    Pods (or racks) are spread evenly over the servers in contiguous bins; the pod-less
    switches are on the first server; a machine is always on its switch's server.

    Args:
        g: a validated topology.
        servers: server names, the first one this machine's.

    Raises:
        ValueError: no servers.
    """
    if not servers:
        raise ValueError("a cluster needs at least one server")
    out = {n: servers[0] for grp in node_groups(g) for n in grp}
    for server, bin_ in zip(servers, _bins(rack_groups(g), len(servers)), strict=True):
        for grp in bin_:
            out.update(dict.fromkeys(grp, server))
    return out


def crossing_links(g: nx.Graph, placement: dict[str, str]) -> list[tuple[str, str]]:
    """The links whose two ends are on different servers (each a tunnel), in sorted order."""
    return sorted((u, v) for u, v in g.edges() if placement[u] != placement[v])


def spread(g: nx.Graph, servers: list[str]) -> dict:
    """How :func:`assign_servers` spreads ``g``: ``nodes`` (server -> its nodes, sorted) and
    ``tunnels`` (the links between servers, as lists)."""
    placed = assign_servers(g, servers)
    return {"nodes": {s: sorted(n for n, v in placed.items() if v == s) for s in servers},
            "tunnels": [list(link) for link in crossing_links(g, placed)]}
