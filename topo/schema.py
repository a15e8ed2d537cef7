"""The topology schema: what every cluster graph carries, and its validator.

A topology is an undirected :class:`networkx.Graph` whose graph, machine-node, switch-node and edge
attributes, port numbering and names follow one schema; every builder returns a graph that passes
:func:`validate_topology`, and :func:`topo.io.read_topology_json` validates what it loads, so the
controller, the simulator and the emulator may rely on it. Its size is bounded by the back end
that takes it (:class:`SizeLimits`: :data:`EMULATOR_LIMITS`, the default, or
:data:`SIMULATOR_LIMITS`); builders check the counts before they build (:func:`check_size`).

Every attribute, its type and range, and the naming rule: ``docs/topologies.md`` (The topology schema).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import re

import networkx as nx

from common.errors import TopologyError

KINDS = ("fat_tree", "leaf_spine", "file")
ROLES = ("machine", "switch")

#: Switch tiers allowed per topology kind.
TIERS_BY_KIND = {
    "fat_tree": ("edge", "agg", "core"),
    "leaf_spine": ("leaf", "spine"),
    "file": ("edge", "agg", "core", "leaf", "spine"),
}

#: Height of each tier, machines at 0; orders ports (lower tiers first) and tells "upward".
TIER_RANK = {"edge": 1, "leaf": 1, "agg": 2, "spine": 2, "core": 3}

#: Tiers whose switches belong to no pod.
POD_LESS_TIERS = ("core", "spine")

MAX_NAME_LEN = 10
IFNAMSIZ_CHARS = 15  # Linux interface names: 16 bytes including the terminating NUL
MAX_DPID = 2**64 - 1
MAX_MACHINE_INDEX = 65534  # two bytes in ip/mac; 10.0.255.255 would be the /16 broadcast

MAX_GPUS_PER_MACHINE = 64  # the cluster model keeps one slot per GPU

@dataclasses.dataclass(frozen=True)
class SizeLimits:
    """The largest topology a back end takes.

    Sizes bound the work of building, validating, routing and placing on a graph: a slip such as
    ``n_spine: 10000000`` would otherwise build for minutes and exhaust memory. Each back end has
    its own (:data:`EMULATOR_LIMITS`, :data:`SIMULATOR_LIMITS`), chosen once with the back end.

    Attributes:
        holder: what takes topologies this large, for messages (``"the emulator"``).
        machines: most machines.
        switches: most switches.
        links: most links.
    """

    holder: str
    machines: int
    switches: int
    links: int

    def describe(self) -> str:
        """``"4,096 machines, 1,024 switches and 16,384 links"``."""
        return f"{self.machines:,} machines, {self.switches:,} switches and {self.links:,} links"


EMULATOR_LIMITS = SizeLimits("the emulator", machines=4096, switches=1024, links=16384)
"""Far above what one host can emulate, with room above the papers' emulated and simulated
clusters of the emulator's era (a k = 16 fat-tree: 1,024 machines, 320 switches, 3,072 links);
the largest fat-tree within them is k = 24. The default of every builder and loader."""

SIMULATOR_LIMITS = SizeLimits("the simulator", machines=16384, switches=4096, links=65536)
"""Four times the emulator's in each count: NetPack's 10,000-server cluster (625 racks of 16
machines), a k = 40 fat-tree (16,000 machines, 2,000 switches, 48,000 links; k = 42 would have
18,522 machines) and a leaf-spine of 1,024 racks of 16 machines with up to 48 spines fit."""

SIZE_LIMITS = (EMULATOR_LIMITS, SIMULATOR_LIMITS)
"""Every back end's limits, smallest first: a refusal says which other back end holds the topology."""


_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_DIGITS_RE = re.compile(r"(\d+)")
_MAC_RE = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2}){5}")
_MAX_REPORTED_PROBLEMS = 20


def natural_key(name: str) -> tuple:
    """Sort key that orders embedded numbers by value, so ``h2`` < ``h10``.

    The raw name breaks ties between names such as ``h1`` and ``h01``, so distinct names never
    compare equal.
    """
    parts = tuple(int(t) if i % 2 else t for i, t in enumerate(_DIGITS_RE.split(name)))
    return (parts, name)


def machine_ip(index: int) -> str:
    """The IPv4 address builders give machine number ``index`` (1-based): ``10.0.X.Y``."""
    _check_machine_index(index)
    return f"10.0.{index // 256}.{index % 256}"


def machine_mac(index: int) -> str:
    """The MAC address builders give machine number ``index`` (1-based): ``00:00:00:00:XX:YY``."""
    _check_machine_index(index)
    return f"00:00:00:00:{index // 256:02x}:{index % 256:02x}"


def _check_machine_index(index: int) -> None:
    if not 1 <= index <= MAX_MACHINE_INDEX:
        raise TopologyError(f"machine index {index} out of range 1..{MAX_MACHINE_INDEX} "
                            "(its ip and mac encode it in two bytes)")


def machines(g: nx.Graph) -> list[str]:
    """Machine names in machine order (by their ``index`` attribute)."""
    return sorted((n for n, d in g.nodes(data=True) if d.get("role") == "machine"),
                  key=lambda n: g.nodes[n]["index"])


def switches(g: nx.Graph) -> list[str]:
    """Switch names sorted by ``dpid``."""
    return sorted((n for n, d in g.nodes(data=True) if d.get("role") == "switch"),
                  key=lambda n: g.nodes[n]["dpid"])


def _rank(g: nx.Graph, node: str) -> int:
    data = g.nodes[node]
    return 0 if data.get("role") == "machine" else TIER_RANK.get(data.get("tier"), len(TIER_RANK) + 1)


def assign_ports(g: nx.Graph) -> None:
    """Number every link's ports in place, following the schema's port rules.

    Machines get port 0. A switch numbers its links 1..degree, lower tiers first (hosts, then
    switches one tier up, and so on), ties in natural name order. Deterministic: the result depends
    only on names, roles and tiers, not on insertion order.
    """
    for _, _, data in g.edges(data=True):
        data["ports"] = {}
    for node, data in g.nodes(data=True):
        if data.get("role") == "machine":
            for nbr in g[node]:
                g.edges[node, nbr]["ports"][node] = 0
            continue
        order = sorted(g[node], key=lambda n: (_rank(g, n), natural_key(n)))
        for port, nbr in enumerate(order, start=1):
            g.edges[node, nbr]["ports"][node] = port


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_positive_int(arg: str, value, maximum: int | None = None) -> None:
    """Raise :class:`TopologyError` unless the builder argument ``arg`` is an int >= 1 (and <= ``maximum``)."""
    if maximum is not None and _is_int(value) and value > maximum:
        raise TopologyError(f"{arg} must be an integer in 1..{maximum}, got {value!r}")
    if not _is_int(value) or value < 1:
        raise TopologyError(f"{arg} must be an integer >= 1, got {value!r}")


def check_size(what: str, n_machines: int, n_switches: int, n_links: int,
               limits: SizeLimits = EMULATOR_LIMITS) -> None:
    """Raise :class:`TopologyError` when a topology of these counts is larger than ``limits`` allow.

    Builders call it with counts computed from their parameters, before they build anything.

    Args:
        what: the topology, for the message (``"fat_tree k=26"``).
        n_machines: its machines.
        n_switches: its switches.
        n_links: its links.
        limits: the back end's limits.
    """
    counts = (n_machines, n_switches, n_links)
    over = [f"{n:,} {noun}" for n, noun, limit in zip(counts, ("machines", "switches", "links"),
                                                      (limits.machines, limits.switches, limits.links),
                                                      strict=True) if n > limit]
    if not over:
        return
    msg = f"{what} is too large: {', '.join(over)}; {limits.holder} holds at most {limits.describe()}"
    larger = [other for other in SIZE_LIMITS if other != limits and _within(counts, other)]
    if larger:
        msg += f" ({larger[0].holder} holds up to {larger[0].describe()})"
    raise TopologyError(msg)


def _within(counts: tuple[int, int, int], limits: SizeLimits) -> bool:
    return all(n <= limit for n, limit in zip(counts, (limits.machines, limits.switches, limits.links), strict=True))


def check_number(arg: str, value, minimum: float, strict: bool) -> None:
    """Raise :class:`TopologyError` unless the builder argument ``arg`` is a finite number above ``minimum``.

    ``strict`` means ``value > minimum``; otherwise ``value >= minimum``.
    """
    if not _is_real(value) or not (value > minimum if strict else value >= minimum):
        relation = ">" if strict else ">="
        raise TopologyError(f"{arg} must be a finite number {relation} {minimum:g}, got {value!r}")


def _check_name(node, problems: list[str]) -> None:
    if not isinstance(node, str):
        problems.append(f"node {node!r}: name must be a str, got {type(node).__name__}")
    elif len(node) > MAX_NAME_LEN:
        problems.append(f"node {node!r}: name has {len(node)} characters, at most {MAX_NAME_LEN} allowed "
                        f"(interface '<name>-eth<N>' must fit {IFNAMSIZ_CHARS} characters)")
    elif not _NAME_RE.fullmatch(node):
        problems.append(f"node {node!r}: name must be letters and digits starting with a letter "
                        "(no '-' or '_': interfaces are '<name>-eth<N>')")


def _check_graph_attrs(g: nx.Graph, problems: list[str]) -> None:
    name, kind, params = g.graph.get("name"), g.graph.get("kind"), g.graph.get("params")
    if not isinstance(name, str) or not name:
        problems.append(f"graph attribute 'name' must be a non-empty str, got {name!r}")
    if kind not in KINDS:
        problems.append(f"graph attribute 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    if not isinstance(params, dict):
        problems.append(f"graph attribute 'params' must be a dict, got {params!r}")


def _check_machine(g: nx.Graph, node: str, data: dict, problems: list[str]) -> None:
    where = f"machine {node!r}"
    if not _is_int(data.get("gpus")) or not 1 <= data["gpus"] <= MAX_GPUS_PER_MACHINE:
        problems.append(f"{where}: 'gpus' must be an int >= 1 and <= {MAX_GPUS_PER_MACHINE}, got {data.get('gpus')!r}")
    if not _is_int(data.get("index")) or data["index"] < 1:
        problems.append(f"{where}: 'index' must be an int >= 1, got {data.get('index')!r}")
    for attr in ("rack", "pod"):
        if not isinstance(data.get(attr), str):
            problems.append(f"{where}: {attr!r} must be a str, got {data.get(attr)!r}")
    try:
        ipaddress.IPv4Address(data.get("ip"))
    except (ipaddress.AddressValueError, ValueError):
        problems.append(f"{where}: 'ip' must be an IPv4 address string, got {data.get('ip')!r}")
    if not isinstance(data.get("mac"), str) or not _MAC_RE.fullmatch(data["mac"]):
        problems.append(f"{where}: 'mac' must be a lower-case 'xx:xx:xx:xx:xx:xx' string, "
                        f"got {data.get('mac')!r}")
    nbrs = list(g[node])
    if len(nbrs) != 1:
        problems.append(f"{where}: must have exactly one link, has {len(nbrs)} ({', '.join(map(str, nbrs))})")
        return
    (nbr,) = nbrs
    if g.nodes[nbr].get("role") != "switch":
        problems.append(f"{where}: its link must go to a switch, goes to {nbr!r}")
    elif data.get("rack") != nbr:
        problems.append(f"{where}: 'rack' is {data.get('rack')!r} but the machine attaches to switch {nbr!r}")


def _check_switch(g: nx.Graph, node: str, data: dict, problems: list[str]) -> None:
    where = f"switch {node!r}"
    tiers = TIERS_BY_KIND.get(g.graph.get("kind"), TIERS_BY_KIND["file"])
    tier = data.get("tier")
    if tier not in tiers:
        problems.append(f"{where}: 'tier' must be one of {', '.join(tiers)} for kind "
                        f"{g.graph.get('kind')!r}, got {tier!r}")
    dpid = data.get("dpid")
    if not _is_int(dpid) or not 1 <= dpid <= MAX_DPID:
        problems.append(f"{where}: 'dpid' must be an int in 1..2**64-1, got {dpid!r}")
    pod = data.get("pod")
    if not isinstance(pod, str):
        problems.append(f"{where}: 'pod' must be a str, got {pod!r}")
    elif tier in POD_LESS_TIERS and pod:
        problems.append(f"{where}: a {tier} switch belongs to no pod, 'pod' must be '', got {pod!r}")


def _check_edge(g: nx.Graph, u, v, data: dict, problems: list[str]) -> None:
    where = f"link {u!r}-{v!r}"
    if u == v:
        problems.append(f"{where}: self-loop")
        return
    bw = data.get("bw_mbps")
    if not _is_real(bw) or bw <= 0:
        problems.append(f"{where}: 'bw_mbps' must be a finite number > 0, got {bw!r}")
    delay = data.get("delay_us")
    if not _is_real(delay) or delay < 0:
        problems.append(f"{where}: 'delay_us' must be a finite number >= 0, got {delay!r}")
    ports = data.get("ports")
    if not isinstance(ports, dict) or set(ports) != {u, v}:
        keys = sorted(map(str, ports)) if isinstance(ports, dict) else ports
        problems.append(f"{where}: 'ports' must be a dict with exactly the keys {u!r} and {v!r}, "
                        f"got {keys!r}")
        return
    for end in (u, v):
        port = ports[end]
        if not _is_int(port):
            problems.append(f"{where}: port on {end!r} must be an int, got {port!r}")
        elif g.nodes[end].get("role") == "machine" and port != 0:
            problems.append(f"{where}: a machine's port must be 0, {end!r} has {port}")
        elif g.nodes[end].get("role") == "switch" and not 1 <= port <= g.degree(end):
            problems.append(f"{where}: port on switch {end!r} must be in 1..{g.degree(end)} (its degree), "
                            f"got {port}")


def _check_unique(g: nx.Graph, role: str, attr: str, problems: list[str]) -> None:
    seen: dict = {}
    for node, data in g.nodes(data=True):
        value = data.get(attr)
        if data.get("role") != role or value is None or isinstance(value, (dict, list)):
            continue
        if value in seen:
            problems.append(f"{role}s {seen[value]!r} and {node!r} share {attr} {value!r}")
        else:
            seen[value] = node


def _check_switch_ports(g: nx.Graph, node, problems: list[str]) -> None:
    owner: dict[int, str] = {}
    for nbr in g[node]:
        ports = g.edges[node, nbr].get("ports")
        port = ports.get(node) if isinstance(ports, dict) else None
        if not _is_int(port):
            continue
        if port in owner:
            problems.append(f"switch {node!r}: port {port} used by both links to {owner[port]!r} and {nbr!r}")
        else:
            owner[port] = nbr
    if isinstance(node, str) and len(node) <= MAX_NAME_LEN and owner:
        ifname = f"{node}-eth{max(owner)}"
        if len(ifname) > IFNAMSIZ_CHARS:
            problems.append(f"switch {node!r}: interface name {ifname!r} is longer than {IFNAMSIZ_CHARS} "
                            "characters; use a shorter name")


def validate_topology(g: nx.Graph, limits: SizeLimits = EMULATOR_LIMITS) -> None:
    """Check ``g`` against the schema (``docs/topologies.md``).

    All problems are collected and reported together (the first few, if there are many).

    Args:
        g: the graph to check.
        limits: the largest topology allowed (the back end's).

    Raises:
        TopologyError: the graph breaks the schema; the message names each offending node or link
            and what is wrong with it.

    Complexity: O(V + E).
    """
    if not isinstance(g, nx.Graph) or g.is_directed() or g.is_multigraph():
        raise TopologyError(f"a topology must be an undirected networkx.Graph, got {type(g).__name__}")
    n_machines = sum(1 for _, role in g.nodes(data="role") if role == "machine")
    check_size("the topology", n_machines, len(g) - n_machines, g.number_of_edges(), limits)
    problems: list[str] = []
    _check_graph_attrs(g, problems)
    for node, data in g.nodes(data=True):
        _check_name(node, problems)
        role = data.get("role")
        if role not in ROLES:
            problems.append(f"node {node!r}: 'role' must be one of {', '.join(ROLES)}, got {role!r}")
    if problems:  # the per-role checks below assume valid roles and names
        _raise(problems)
    for node, data in g.nodes(data=True):
        if data["role"] == "machine":
            _check_machine(g, node, data, problems)
        else:
            _check_switch(g, node, data, problems)
            _check_switch_ports(g, node, problems)
    for u, v, data in g.edges(data=True):
        _check_edge(g, u, v, data, problems)
    for role, attr in (("machine", "index"), ("machine", "ip"), ("machine", "mac"), ("switch", "dpid")):
        _check_unique(g, role, attr, problems)
    if not any(d["role"] == "machine" for _, d in g.nodes(data=True)):
        problems.append("the topology has no machine")
    elif not nx.is_connected(g):
        parts = sorted((sorted(c, key=natural_key) for c in nx.connected_components(g)), key=len)
        problems.append(f"the topology is disconnected: {len(parts)} components, e.g. "
                        f"{{{', '.join(parts[0][:5])}}} is cut off from {parts[-1][0]!r}")
    if problems:
        _raise(problems)


def _raise(problems: list[str]) -> None:
    shown = problems[:_MAX_REPORTED_PROBLEMS]
    more = len(problems) - len(shown)
    msg = "invalid topology: " + "; ".join(shown)
    if more:
        msg += f"; and {more} more problem(s)"
    raise TopologyError(msg)
