"""The one routing function shared by the OpenFlow controller and the flow-level simulator.

Routing is minimum-hop with deterministic ECMP: among all minimum-hop paths from ``src`` to
``dst``, listed in a fixed order, a flow takes number ``stable_hash(src, dst) % len(paths)``. The
controller installs exactly these paths and the simulator places flows on them, so the simulator
knows every flow's path. Nothing here is random or depends on Python's salted ``hash``: the same
graph gives the same routes in every process.

Path order: paths are sorted lexicographically by :func:`topo.schema.natural_key` of their node
names (``h2`` before ``h10``). Because every path starts at ``src``, this is the order of a
depth-first walk that tries next hops in natural order, which lets :func:`ecmp_path` and
:func:`route_table` pick path ``i`` from path counts without listing all paths.

Direction: ``(src, dst)`` and ``(dst, src)`` are hashed separately, so a flow and its reverse may
take different paths, as in a real ECMP fabric hashing each direction's headers.

Complexity: one breadth-first search from ``dst`` (O(V + E)) serves every source; picking a path
then costs O(path length * degree). :func:`route_table` does one BFS per machine.
"""

from __future__ import annotations

import itertools
import zlib

import networkx as nx

from common.errors import TopologyError
from topo.schema import machines, natural_key


def stable_hash(*parts: str) -> int:
    """A process-independent hash of the strings ``parts``: CRC-32 of ``"|".join(parts)``."""
    return zlib.crc32("|".join(parts).encode("utf-8"))


def path_links(path) -> list[tuple[str, str]]:
    """The directed hops ``(a, b)`` of a path, in order."""
    return list(itertools.pairwise(path))


def port_towards(g: nx.Graph, node: str, neighbour: str) -> int:
    """The port number on ``node`` of its link to ``neighbour``.

    Raises:
        TopologyError: there is no link between the two nodes.
    """
    if not g.has_edge(node, neighbour):
        raise TopologyError(f"no link between {node!r} and {neighbour!r}")
    return g.edges[node, neighbour]["ports"][node]


class _MinHopDag:
    """All minimum-hop paths towards one destination, as a DAG of next hops with path counts."""

    def __init__(self, g: nx.Graph, dst: str, order: dict[str, list[str]] | None = None):
        _check_node(g, dst)
        self.g = g
        self.dst = dst
        self.dist = nx.single_source_shortest_path_length(g, dst)
        self._order = order
        self.count: dict[str, int] = {dst: 1}
        for node in sorted(self.dist, key=self.dist.__getitem__):
            if node != dst:
                self.count[node] = sum(self.count[n] for n in self.next_hops(node))

    def next_hops(self, node: str) -> list[str]:
        """Neighbours of ``node`` one hop closer to ``dst``, in natural order."""
        nbrs = self._order[node] if self._order is not None else sorted(self.g[node], key=natural_key)
        closer = self.dist[node] - 1
        return [n for n in nbrs if self.dist.get(n) == closer]

    def require_path_from(self, src: str) -> None:
        """Raise :class:`TopologyError` unless ``src`` exists and reaches ``dst``."""
        _check_node(self.g, src)
        if src not in self.dist:
            raise TopologyError(f"no path from {src!r} to {self.dst!r}")

    def all_paths(self, src: str) -> tuple[tuple[str, ...], ...]:
        """Every minimum-hop path from ``src``, in natural lexicographic order."""
        self.require_path_from(src)
        if src == self.dst:
            return ((src,),)
        return tuple((src, *rest) for nbr in self.next_hops(src) for rest in self.all_paths(nbr))

    def path(self, src: str, i: int) -> tuple[str, ...]:
        """Path number ``i`` (0-based) of :meth:`all_paths`, found without listing the others."""
        self.require_path_from(src)
        if not 0 <= i < self.count[src]:
            raise IndexError(i)
        path = [src]
        node = src
        while node != self.dst:
            for nbr in self.next_hops(node):
                if i < self.count[nbr]:
                    node = nbr
                    break
                i -= self.count[nbr]
            path.append(node)
        return tuple(path)

    def ecmp(self, src: str) -> tuple[str, ...]:
        """The deterministic-ECMP path from ``src``: number ``stable_hash(src, dst) % count``."""
        self.require_path_from(src)
        return self.path(src, stable_hash(src, self.dst) % self.count[src])


def _check_node(g: nx.Graph, node: str) -> None:
    if node not in g:
        raise TopologyError(f"unknown node {node!r} in topology {g.graph.get('name', '?')!r}")


def equal_cost_paths(g: nx.Graph, src: str, dst: str) -> tuple[tuple[str, ...], ...]:
    """All minimum-hop paths from ``src`` to ``dst``, sorted by the natural key of their nodes.

    Raises:
        TopologyError: a node is unknown or ``dst`` is unreachable.
    """
    return _MinHopDag(g, dst).all_paths(src)


def ecmp_path(g: nx.Graph, src: str, dst: str) -> tuple[str, ...]:
    """The path of flows from machine ``src`` to machine ``dst`` under deterministic ECMP.

    It is ``equal_cost_paths(g, src, dst)[stable_hash(src, dst) % len(paths)]``. The reverse
    direction is hashed separately and may take another path, as in a real ECMP fabric.

    Raises:
        TopologyError: a node is unknown or ``dst`` is unreachable.
    """
    return _MinHopDag(g, dst).ecmp(src)


class EcmpRoutes:
    """:func:`ecmp_path` for many pairs of one graph: one BFS per destination, kept.

    For callers that route many pairs (a simulator placing thousands of jobs); the paths are
    :func:`ecmp_path`'s. The graph must not change while this object is in use.
    """

    def __init__(self, g: nx.Graph):
        self.g = g
        self._order = {n: sorted(g[n], key=natural_key) for n in g}
        self._dags: dict[str, _MinHopDag] = {}

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        """The path of flows from machine ``src`` to machine ``dst`` (:func:`ecmp_path`).

        Raises:
            TopologyError: a node is unknown or ``dst`` is unreachable.
        """
        dag = self._dags.get(dst)
        if dag is None:
            dag = self._dags[dst] = _MinHopDag(self.g, dst, self._order)
        return dag.ecmp(src)


def route_table(g: nx.Graph) -> dict[tuple[str, str], tuple[str, ...]]:
    """The ECMP path (as :func:`ecmp_path`) of every ordered pair of distinct machines.

    One BFS per destination machine; a k=8 fat-tree (128 machines, 16256 pairs) takes a fraction
    of a second.
    """
    order = {n: sorted(g[n], key=natural_key) for n in g}
    hosts = machines(g)
    table: dict[tuple[str, str], tuple[str, ...]] = {}
    for dst in hosts:
        dag = _MinHopDag(g, dst, order)
        for src in hosts:
            if src != dst:
                table[(src, dst)] = dag.ecmp(src)
    return table


def next_hops(g: nx.Graph, node: str, dst: str) -> tuple[str, ...]:
    """Neighbours of ``node`` on some minimum-hop path to ``dst``, in natural order.

    Empty when ``node`` is ``dst``. These are the buckets of an OpenFlow select group.

    Raises:
        TopologyError: a node is unknown or ``dst`` is unreachable from ``node``.
    """
    dag = _MinHopDag(g, dst)
    dag.require_path_from(node)
    return tuple(dag.next_hops(node)) if node != dst else ()
