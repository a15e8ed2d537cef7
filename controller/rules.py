"""Pure rule computation: topology graph -> OpenFlow rules per switch.

Two routing modes, both proactive (every rule installed when the switch connects): ``ecmp`` (the
default), one rule per machine pair routed through a switch, on the pair's
:func:`topo.routing.ecmp_path`, the simulator's path; ``select``, one rule per destination,
pointing at a SELECT group where several next hops lie on minimum-hop paths.
:func:`ina_steering` sends INA packets to a switch's one-armed aggregator, above the routes. Only
IPv4 is forwarded; what matches no rule is dropped. Priorities live here, in one place.

The rules in full: ``docs/topologies.md`` (The controller's rules).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from common.errors import TopologyError
from ina.protocol import INA_UDP_PORT
from topo import machines, switches
from topo.routing import ecmp_path, next_hops, port_towards, route_table

ETH_TYPE_IPV4 = 0x0800
IP_PROTO_UDP = 17

PRIORITY_INA_STEER = 300
PRIORITY_PAIR_ROUTE = 200
PRIORITY_DST_ROUTE = 100

MODES = ("ecmp", "select")

# Cookie that tags every rule this controller installs, so its own rules can be told apart.
RULE_COOKIE = 0x7E57


@dataclasses.dataclass(frozen=True, order=True)
class FlowRule:
    """One flow-table entry.

    Attributes:
        dpid: datapath id of the switch.
        priority: OpenFlow priority.
        match: sorted ``(field, value)`` pairs in os-ken's OFPMatch keyword names.
        output_port: port to send matching packets to, or None when ``group_id`` is set.
        group_id: SELECT group to send matching packets to, or None.
    """

    dpid: int
    priority: int
    match: tuple[tuple[str, object], ...]
    output_port: int | None = None
    group_id: int | None = None


@dataclasses.dataclass(frozen=True, order=True)
class GroupRule:
    """One SELECT group: a flow is hashed onto one of ``ports``."""

    dpid: int
    group_id: int
    ports: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class RuleSet:
    """Every rule for every switch, keyed by dpid."""

    flows: dict[int, tuple[FlowRule, ...]]
    groups: dict[int, tuple[GroupRule, ...]]

    def count(self) -> int:
        """Total number of flow rules and groups."""
        return sum(len(v) for v in self.flows.values()) + sum(len(v) for v in self.groups.values())


def _match(**fields) -> tuple[tuple[str, object], ...]:
    return tuple(sorted(fields.items()))


def switch_ports(g, switch: str) -> dict[int, str]:
    """OpenFlow port -> neighbour of every link of ``switch``."""
    return {d["ports"][switch]: other for _, other, d in g.edges(switch, data=True)}


def ina_steering(g, ina_ports: Mapping[str, int]) -> dict[int, list[FlowRule]]:
    """The INA steering rules (see the module docstring), by dpid.

    Raises:
        TopologyError: an aggregator on a node that is not a switch, or on a port a link uses.
    """
    out: dict[int, list[FlowRule]] = {}
    for s, agg_port in sorted(ina_ports.items()):
        if s not in g or g.nodes[s].get("role") != "switch":
            raise TopologyError(f"INA aggregator on {s!r}: not a switch of the topology")
        links = switch_ports(g, s)
        if agg_port in links or not isinstance(agg_port, int) or agg_port < 1:
            raise TopologyError(f"INA aggregator of {s} on port {agg_port!r}: a link uses it, or it is not a port")
        dpid = g.nodes[s]["dpid"]
        out[dpid] = [FlowRule(dpid, PRIORITY_INA_STEER,
                              _match(in_port=p, eth_type=ETH_TYPE_IPV4, ip_proto=IP_PROTO_UDP, **{field: INA_UDP_PORT}),
                              output_port=agg_port)
                     for p in sorted(links) for field in ("udp_dst", "udp_src")]
    return out


def compute_rules(g, mode: str = "ecmp", ina_ports: Mapping[str, int] | None = None) -> RuleSet:
    """Compute the complete rule set for a topology.

    Args:
        g: a validated topology graph (see ``topo.schema``).
        mode: ``"ecmp"`` (deterministic per-pair paths) or ``"select"`` (OVS per-flow hashing).
        ina_ports: switch -> OpenFlow port of the INA aggregator attached to it (none by default).

    Returns:
        The rule set; switches with no rules are present with empty tuples.
    """
    if mode not in MODES:
        raise TopologyError(f"unknown routing mode {mode!r}; valid: {', '.join(MODES)}")
    sw = switches(g)
    flows: dict[int, list[FlowRule]] = {g.nodes[s]["dpid"]: [] for s in sw}
    groups: dict[int, list[GroupRule]] = {g.nodes[s]["dpid"]: [] for s in sw}
    if mode == "ecmp":
        for (src, dst), path in route_table(g).items():
            match = _match(eth_type=ETH_TYPE_IPV4, ipv4_src=g.nodes[src]["ip"], ipv4_dst=g.nodes[dst]["ip"])
            for here, nxt in zip(path[1:-1], path[2:], strict=True):
                dpid = g.nodes[here]["dpid"]
                flows[dpid].append(FlowRule(dpid, PRIORITY_PAIR_ROUTE, match, output_port=port_towards(g, here, nxt)))
    else:
        for s in sw:
            dpid = g.nodes[s]["dpid"]
            for dst in machines(g):
                match = _match(eth_type=ETH_TYPE_IPV4, ipv4_dst=g.nodes[dst]["ip"])
                ports = tuple(port_towards(g, s, n) for n in next_hops(g, s, dst))
                if len(ports) == 1:
                    flows[dpid].append(FlowRule(dpid, PRIORITY_DST_ROUTE, match, output_port=ports[0]))
                else:
                    gid = g.nodes[dst]["index"]
                    groups[dpid].append(GroupRule(dpid, gid, ports))
                    flows[dpid].append(FlowRule(dpid, PRIORITY_DST_ROUTE, match, group_id=gid))
    for dpid, rules in ina_steering(g, ina_ports or {}).items():
        flows[dpid] += rules
    return RuleSet(
        flows={d: tuple(sorted(v)) for d, v in flows.items()},
        groups={d: tuple(sorted(v)) for d, v in groups.items()},
    )


def forward(rules: RuleSet, g, src: str, dst: str, max_hops: int = 64) -> tuple[str, ...]:
    """Follow the flow tables from machine ``src`` to ``dst`` (``ecmp`` rules only).

    A fake flow table walk used to check rule sets without a switch: returns the node
    sequence, or raises :class:`TopologyError` on a missing rule or a loop.
    """
    by_port = {}
    for u, v, d in g.edges(data=True):
        by_port[(u, d["ports"][u])] = v
        by_port[(v, d["ports"][v])] = u
    src_ip, dst_ip = g.nodes[src]["ip"], g.nodes[dst]["ip"]
    path = [src, next(iter(g.neighbors(src)))]
    while path[-1] != dst:
        here = path[-1]
        if len(path) > max_hops:
            raise TopologyError(f"forwarding loop from {src} to {dst}: {path}")
        dpid = g.nodes[here]["dpid"]
        hit = None
        for r in sorted(rules.flows[dpid], key=lambda r: -r.priority):
            m = dict(r.match)
            if m.get("ipv4_dst") == dst_ip and m.get("ipv4_src", src_ip) == src_ip:
                hit = r
                break
        if hit is None or hit.output_port is None:
            raise TopologyError(f"no output rule at {here} for {src}->{dst}")
        path.append(by_port[(here, hit.output_port)])
    return tuple(path)


__all__ = [
    "FlowRule", "GroupRule", "RuleSet", "compute_rules", "forward", "ecmp_path", "MODES",
    "PRIORITY_INA_STEER", "PRIORITY_PAIR_ROUTE", "PRIORITY_DST_ROUTE", "RULE_COOKIE", "ina_steering", "switch_ports",
]
