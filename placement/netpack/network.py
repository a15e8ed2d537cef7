"""NetPack's view of the network (spec §2.2): servers, racks, their links and the ToRs' PAT.

The "one big switch" view: each server's access link and each rack's uplink, undirected, in Gbit/s
(``("access", server)``, ``("uplink", rack)``), and each ToR's Peak Aggregation Throughput. A
placed multi-server job (:class:`NetJob`) is a two-level tree; :func:`job_flows` gives the flows it
puts on each link and the ToRs aggregating it (one flow per worker server, §6 #11; ``min_fan_in``,
§6 #12, ours; ``ps_loopback``, §6 #33, ours).

The model in full: ``docs/algorithms.md`` (NetPack's network model).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping

from common.errors import PlacementError

Link = tuple[str, str]
"""``("access", server)`` or ``("uplink", rack)``."""

EPS = 1e-9
"""Tolerance of every saturation test (§6 #9: never exact equality)."""
DEFAULT_LINK_GBPS = 100.0
"""Access link rate where the cluster has no topology (the paper's testbed NICs, §5.2)."""
DEFAULT_PAT_GBPS = 1000.0
"""Every ToR's PAT where neither the policy nor the topology gives one (the paper's simulator, §5.3)."""
PAT_ATTRIBUTE = "pat_gbps"
"""The switch attribute of a topology graph holding its PAT, Gbit/s (an experiment sets it on its
INA switches from ``ina.pat_gbps``: the network the policies estimate is the one the runs have)."""


def access(server: str) -> Link:
    """A server's access link."""
    return ("access", server)


def uplink(rack: str) -> Link:
    """A rack's uplink."""
    return ("uplink", rack)


@dataclasses.dataclass(frozen=True)
class Fabric:
    """The one-big-switch network (see ``docs/algorithms.md``).

    Attributes:
        rack_of: server -> its rack (its ToR switch's name).
        access_gbps: server -> its access link's capacity.
        uplink_gbps: rack -> its uplink's capacity (the sum of the ToR's links to the fabric).
        pat_gbps: rack -> its ToR's PAT (0: no INA there).

    Raises:
        PlacementError: a server without a capacity, a rack without an uplink or PAT entry, or a
            negative capacity.
    """

    rack_of: Mapping[str, str]
    access_gbps: Mapping[str, float]
    uplink_gbps: Mapping[str, float]
    pat_gbps: Mapping[str, float]

    def __post_init__(self):
        if not self.rack_of:
            raise PlacementError("NetPack: the network has no servers")
        missing = sorted(set(self.rack_of) - set(self.access_gbps))
        racks = set(self.rack_of.values())
        missing += sorted(r for r in racks if r not in self.uplink_gbps or r not in self.pat_gbps)
        if missing:
            raise PlacementError(f"NetPack: no capacity given for {', '.join(missing[:5])}")
        bad = [k for d in (self.access_gbps, self.uplink_gbps, self.pat_gbps) for k, v in d.items() if not v >= 0]
        if bad:
            raise PlacementError(f"NetPack: negative or NaN capacity for {', '.join(map(str, bad[:5]))}")

    @property
    def racks(self) -> tuple[str, ...]:
        """Every rack, in the servers' order."""
        return tuple(dict.fromkeys(self.rack_of.values()))

    def links(self) -> dict[Link, float]:
        """Every link and its capacity (a fresh dict)."""
        return dict(self._links)

    @functools.cached_property
    def _links(self) -> dict[Link, float]:
        out = {access(s): float(c) for s, c in self.access_gbps.items()}
        out.update({uplink(r): float(c) for r, c in self.uplink_gbps.items()})
        return out

    @classmethod
    def from_view(cls, view, pat_gbps: float | None = None, link_gbps: float = DEFAULT_LINK_GBPS) -> Fabric:
        """The fabric of a cluster view: :meth:`from_graph` of its topology, or where it has none
        (a cluster built from machines only), its racks with ``link_gbps`` access links and
        uplinks of the rack's servers times ``link_gbps`` (no oversubscription) and ``pat_gbps``
        (None: :data:`DEFAULT_PAT_GBPS`)."""
        if view.graph is not None:
            return cls.from_graph(view.graph, pat_gbps)
        rack_of = {m.name: m.rack for m in view.machines}
        racks = view.racks()
        pat = DEFAULT_PAT_GBPS if pat_gbps is None else pat_gbps
        return cls(rack_of, {m: link_gbps for m in rack_of}, {r: len(ms) * link_gbps for r, ms in racks.items()},
                   {r: pat for r in racks})

    @classmethod
    def from_graph(cls, g, pat_gbps: float | Mapping[str, float] | None = None) -> Fabric:
        """The fabric of a topology graph (machines carry ``rack``; links ``bw_mbps``).

        A rack's uplink is the sum of its ToR's links to switches. ``pat_gbps``: every ToR's PAT,
        or a PAT per rack (missing racks: 0), or None: the graph's, each ToR's
        :data:`PAT_ATTRIBUTE` (0 where a ToR has none), or :data:`DEFAULT_PAT_GBPS` everywhere
        where no switch of the graph has one.

        Raises:
            PlacementError: no machines, or a machine not attached to its rack's switch.
        """
        if g is None:
            raise PlacementError("NetPack needs the topology (a cluster built without a graph)")
        rack_of, acc = {}, {}
        for n, d in g.nodes(data=True):
            if d.get("role") != "machine":
                continue
            rack = str(d.get("rack", ""))
            if not g.has_edge(n, rack):
                raise PlacementError(f"NetPack: machine {n} is not attached to a ToR (its rack {rack!r}); "
                                     "the topology has no ToR switches")
            rack_of[n] = rack
            acc[n] = float(g.edges[n, rack].get("bw_mbps", 0.0)) / 1000.0
        if not rack_of:
            raise PlacementError("NetPack: the topology has no machines")
        up = {}
        for r in dict.fromkeys(rack_of.values()):
            up[r] = sum(float(g.edges[r, v].get("bw_mbps", 0.0)) for v in g.neighbors(r)
                        if g.nodes[v].get("role") == "switch") / 1000.0
        if pat_gbps is None:
            annotated = {n: d[PAT_ATTRIBUTE] for n, d in g.nodes(data=True) if PAT_ATTRIBUTE in d}
            pat_gbps = annotated if annotated else DEFAULT_PAT_GBPS
        pat = {r: float(pat_gbps.get(r, 0.0)) if isinstance(pat_gbps, Mapping) else float(pat_gbps) for r in up}
        return cls(rack_of, acc, up, pat)


class FabricCache:
    """A policy's fabric, rebuilt only when the cluster it is asked about is another
    (:meth:`Fabric.from_view` is O(servers); a policy is asked about the same cluster again and
    again)."""

    def __init__(self, pat_gbps: float | None = None):
        self.pat_gbps = pat_gbps
        self._key: tuple = ()
        self._fabric: Fabric | None = None

    def of(self, view) -> Fabric:
        """The fabric of ``view`` (:meth:`Fabric.from_view` with this cache's PAT)."""
        machines, graph = self._key or (None, None)
        if self._fabric is None or machines is not view.machines or graph is not view.graph:
            self._fabric, self._key = Fabric.from_view(view, self.pat_gbps), (view.machines, view.graph)
        return self._fabric


@dataclasses.dataclass(frozen=True)
class NetJob:
    """A placed multi-server job as the estimation sees it.

    Attributes:
        name: the job.
        servers: its worker servers, distinct, in order.
        ps: its parameter server's server (any server, its own workers' included: §6 #33).
        ina: the racks where INA is on for it (the baselines: every rack, §4).
    """

    name: str
    servers: tuple[str, ...]
    ps: str
    ina: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class JobFlows:
    """What :func:`job_flows` gives: flows per link, the ToRs aggregating, and each ToR's fan-in."""

    flows: Mapping[Link, int]
    aggregating: frozenset[str]
    fan_in: Mapping[str, int]
    """rack -> the job's children there (its worker servers in a leaf rack; at the PS's rack, its
    local worker servers plus the flows arriving from the leaves): the aggregation efficiency's
    incoming flows (§3.7)."""


def job_flows(fabric: Fabric, job: NetJob, pat_left: Mapping[str, float], min_fan_in: int = 2,
              ps_loopback: bool = False) -> JobFlows:
    """The spec's ``FLOWS(j)`` (§2.3, clarified; see ``docs/algorithms.md``).

    A leaf rack r (workers, not the PS's) sends 1 flow up if INA is on for the job at r, r's PAT is
    not used up and the job has ``min_fan_in`` servers there; else one per worker server. The PS's
    rack collects its local workers and the leaves' flows and sends the PS 1 flow under the same
    conditions, else all of them.
    """
    rack_of = fabric.rack_of
    n: dict[Link, int] = {}
    agg: set[str] = set()
    fan: dict[str, int] = {}
    by_rack: dict[str, int] = {}
    for w in job.servers:
        if ps_loopback and w == job.ps:
            continue  # reaches its PS over loopback (docs/algorithms.md, NetPack's network model)
        n[access(w)] = n.get(access(w), 0) + 1
        by_rack[rack_of[w]] = by_rack.get(rack_of[w], 0) + 1
    p = rack_of[job.ps]
    fc = 0
    for r, k in by_rack.items():
        if r == p:
            continue
        fan[r] = k
        out = _sent_on(job, r, k, pat_left, min_fan_in, agg)
        n[uplink(r)] = n.get(uplink(r), 0) + out
        fc += out
    if fc:
        n[uplink(p)] = n.get(uplink(p), 0) + fc
    children = by_rack.get(p, 0) + fc
    fan[p] = children
    fs = _sent_on(job, p, children, pat_left, min_fan_in, agg)
    if fs:
        n[access(job.ps)] = n.get(access(job.ps), 0) + fs
    return JobFlows(n, frozenset(agg), fan)


def _sent_on(job: NetJob, rack: str, children: int, pat_left: Mapping[str, float], min_fan_in: int,
             aggregating: set[str]) -> int:
    """The flows ``rack``'s ToR sends on for ``job`` from ``children`` flows: 1 where it aggregates
    the job (INA on for it there, PAT left, fan-in enough; added to ``aggregating``), else all."""
    if rack in job.ina and pat_left.get(rack, 0.0) > EPS and children >= min_fan_in:
        aggregating.add(rack)
        return 1
    return children


def flows_on(flows: Iterable[JobFlows], kind: str) -> dict[str, int]:
    """Flows summed over jobs on every link of ``kind`` (``access``: server -> ``s.flows``;
    ``uplink``: rack -> ``FC_r``)."""
    out: dict[str, int] = {}
    for f in flows:
        for (k, name), n in f.flows.items():
            if k == kind:
                out[name] = out.get(name, 0) + n
    return out
