"""The one routing function shared by the OpenFlow controller and the flow-level simulator.

Minimum-hop with deterministic ECMP: among all minimum-hop paths from ``src`` to ``dst``, in natural
name order, a flow takes number ``stable_hash(src, dst) % len(paths)``; each direction is hashed on
its own. The controller installs exactly these paths and the simulator places flows on them, so the
simulator knows every flow's path; the same graph gives the same routes in every process.

The path order, directions and cost: ``docs/topologies.md`` (Routing). One breadth-first search from
``dst`` (O(V + E)) serves every source; picking a path then costs O(path length * degree).
"""

from __future__ import annotations

import itertools
import zlib

import networkx as nx
import numpy as np

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
    """All minimum-hop paths towards one destination, as a DAG of next hops with path counts.

    ``adjacency`` (each node's neighbours in natural order) may leave out machines with their one
    link: such a machine is never inside a minimum-hop path, only at its ends (:class:`EcmpRoutes`).
    Path counts are computed on demand, for the nodes on the way from the sources asked about.
    """

    def __init__(self, g: nx.Graph, dst: str, adjacency: dict[str, list[str]] | None = None,
                 dist: dict[str, int] | None = None):
        _check_node(g, dst)
        self.g = g
        self.dst = dst
        self._adjacency = adjacency
        if dist is None:
            dist = nx.single_source_shortest_path_length(g, dst) if adjacency is None else _hops(adjacency, dst)
        self.dist = dist
        self._count: dict[str, int] = {dst: 1}
        self._next: dict[str, list[str]] = {}

    def next_hops(self, node: str) -> list[str]:
        """Neighbours of ``node`` one hop closer to ``dst``, in natural order."""
        hops = self._next.get(node)
        if hops is None:
            nbrs = self._adjacency[node] if self._adjacency is not None else sorted(self.g[node], key=natural_key)
            closer = self.dist[node] - 1
            hops = self._next[node] = [n for n in nbrs if self.dist.get(n) == closer]
        return hops

    def count(self, node: str) -> int:
        """The number of minimum-hop paths from ``node`` (which reaches ``dst``) to ``dst``."""
        count = self._count
        stack = [node]
        while stack:  # post-order over the DAG below node, without recursion (a long chain is deep)
            top = stack[-1]
            if top in count:
                stack.pop()
                continue
            hops = self.next_hops(top)
            missing = [n for n in hops if n not in count]
            if missing:
                stack.extend(missing)
            else:
                count[top] = sum(count[n] for n in hops)
                stack.pop()
        return count[node]

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
        if not 0 <= i < self.count(src):
            raise IndexError(i)
        path = [src]
        node = src
        while node != self.dst:
            for nbr in self.next_hops(node):
                below = self.count(nbr)
                if i < below:
                    node = nbr
                    break
                i -= below
            path.append(node)
        return tuple(path)

    def ecmp(self, src: str) -> tuple[str, ...]:
        """The deterministic-ECMP path from ``src``: number ``stable_hash(src, dst) % count``."""
        self.require_path_from(src)
        return self.path(src, stable_hash(src, self.dst) % self.count(src))


def _hops(adjacency: dict[str, list[str]], start: str) -> dict[str, int]:
    """Hop counts from ``start`` over ``adjacency``, breadth first."""
    dist = {start: 0}
    frontier = [start]
    hops = 0
    while frontier:
        hops += 1
        ahead = []
        for node in frontier:
            for nbr in adjacency[node]:
                if nbr not in dist:
                    dist[nbr] = hops
                    ahead.append(nbr)
        frontier = ahead
    return dist


class _HopCounter:
    """:func:`_hops` over one adjacency, many starts: the adjacency as arrays (CSR), each breadth-first
    search a few array operations per hop instead of a Python step per link (a k = 36 fat-tree's 1,620
    switches and 46,656 directed links: well under a millisecond a search, where :func:`_hops` takes ten)."""

    def __init__(self, adjacency: dict[str, list[str]]):
        self.names = list(adjacency)
        number = {n: i for i, n in enumerate(self.names)}
        self.indptr = np.zeros(len(self.names) + 1, dtype=np.int64)
        self.indptr[1:] = np.cumsum([len(nbrs) for nbrs in adjacency.values()])
        self.indices = np.array([number[x] for nbrs in adjacency.values() for x in nbrs], dtype=np.int64)
        self.number = number

    def __call__(self, start: str) -> dict[str, int]:
        """Hop counts from ``start``, as :func:`_hops` gives them."""
        dist = np.full(len(self.names), -1, dtype=np.int64)
        frontier = np.array([self.number[start]], dtype=np.int64)
        dist[frontier] = 0
        hops = 0
        indptr, indices = self.indptr, self.indices
        while frontier.size:
            hops += 1
            first, lens = indptr[frontier], indptr[frontier + 1] - indptr[frontier]
            ends = np.cumsum(lens)
            at = np.arange(int(ends[-1])) + np.repeat(first - (ends - lens), lens)
            ahead = np.unique(indices[at])
            ahead = ahead[dist[ahead] < 0]
            dist[ahead] = hops
            frontier = ahead
        names = self.names
        return {names[i]: h for i, h in enumerate(dist.tolist()) if h >= 0}


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
    """:func:`ecmp_path` for many pairs of one graph: one BFS per destination rack, kept.

    For callers that route many pairs (a simulator placing thousands of jobs); the paths are
    :func:`ecmp_path`'s. A machine (one link, to its rack) is only ever at the end of a path,
    so the machines of a rack share the rack's DAG: the path from ``a`` to machine ``b`` is
    ``a``, the rack DAG's path number ``stable_hash(a, b) % count`` from ``a``'s rack, then ``b``
    (the choice ``b``'s own DAG makes: its counts and next hops are the rack's). The BFS's cross
    switches only. The graph must not change while this object is in use.

    Complexity: O(S + E_s) per destination rack (S switches, E_s links between them), then
    O(path length * degree) per pair: O(R * (S + E_s)) for R racks, where one BFS of the whole
    graph per destination machine would cost O(M * (M + S + E)) for M machines.
    """

    def __init__(self, g: nx.Graph):
        self.g = g
        order = {n: sorted(g[n], key=natural_key) for n in g}
        self._rack = {n: nbrs[0] for n, nbrs in order.items()
                      if len(nbrs) == 1 and g.nodes[n].get("role") == "machine"
                      and g.nodes[nbrs[0]].get("role") == "switch"}
        self._adjacency = {n: [x for x in nbrs if x not in self._rack] for n, nbrs in order.items()
                           if n not in self._rack}
        self._hops = _HopCounter(self._adjacency)
        self._dags: dict[str, _MinHopDag] = {}

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        """The path of flows from machine ``src`` to machine ``dst`` (:func:`ecmp_path`).

        Raises:
            TopologyError: a node is unknown or ``dst`` is unreachable.
        """
        _check_node(self.g, dst)
        _check_node(self.g, src)
        if src == dst:
            return (src,)
        head, tail = self._rack.get(src), self._rack.get(dst)
        first, last = head or src, tail or dst
        dag = self._dags.get(last)
        if dag is None:
            dag = self._dags[last] = _MinHopDag(self.g, last, self._adjacency, self._hops(last))
        if first not in dag.dist:
            raise TopologyError(f"no path from {src!r} to {dst!r}")
        middle = dag.path(first, stable_hash(src, dst) % dag.count(first))
        return (*((src,) if head else ()), *middle, *((dst,) if tail else ()))


def route_table(g: nx.Graph) -> dict[tuple[str, str], tuple[str, ...]]:
    """The ECMP path (as :func:`ecmp_path`) of every ordered pair of distinct machines.

    One BFS per destination rack (:class:`EcmpRoutes`); a k=8 fat-tree (128 machines, 16256
    pairs) takes a fraction of a second.
    """
    routes = EcmpRoutes(g)
    hosts = machines(g)
    return {(src, dst): routes.path(src, dst) for dst in hosts for src in hosts if src != dst}


def next_hops(g: nx.Graph, node: str, dst: str) -> tuple[str, ...]:
    """Neighbours of ``node`` on some minimum-hop path to ``dst``, in natural order.

    Empty when ``node`` is ``dst``. These are the buckets of an OpenFlow select group.

    Raises:
        TopologyError: a node is unknown or ``dst`` is unreachable from ``node``.
    """
    dag = _MinHopDag(g, dst)
    dag.require_path_from(node)
    return tuple(dag.next_hops(node)) if node != dst else ()
