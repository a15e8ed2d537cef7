"""A job's INA plan on the fabric (ina/plan.py) and the controller's INA steering rules."""

from __future__ import annotations

import ipaddress
import random

import pytest

from common.errors import TopologyError
from controller.rules import PRIORITY_INA_STEER, compute_rules, forward, switch_ports
from ina.aggregator import Aggregator, Dest, JobEntry, ParameterServer, Role
from ina.plan import plan_job, switch_tables, tor_of
from ina.protocol import INA_UDP_PORT, InaError, data_packet, decode
from topo import fat_tree, leaf_spine


@pytest.fixture(scope="module")
def ls():
    """Three racks of five machines: l1 (h1-h5), l2 (h6-h10), l3 (h11-h15)."""
    return leaf_spine(3, 2, 5)


def test_four_workers_in_one_rack_aggregate_at_their_tor_and_the_ps_finishes(ls):
    """Workers h1-h4 under l1, PS h6 under l2, both INA: l1 is a leaf of fan-in 4; l2 would have one
    child, so it gets no entry and the PS completes from the leaf's partial."""
    p = plan_job(ls, 7, ["h1", "h2", "h3", "h4"], "h6", ["l1", "l2"])
    assert p.tree.root_workers == () and len(p.tree.leaves) == 1
    leaf = p.tree.leaves[0]
    assert leaf.bit == 0 and leaf.workers == (1, 2, 3, 4)
    assert p.bits == {"h1": 1, "h2": 2, "h3": 3, "h4": 4}
    assert p.entries == {"l1": JobEntry(4, Role.LEAF, 0)}
    assert p.addresses == {b: ls.nodes[m]["ip"] for m, b in p.bits.items()}


def test_two_racks_and_the_ps_rack_make_two_levels(ls):
    """Two machines under l1, three under l3, one beside the PS under l2: l1 and l3 are leaves, l2 the
    root with fan-in 3 (its worker and two leaves); ranks on one machine fold to one bit."""
    p = plan_job(ls, 3, ["h1", "h1", "h2", "h11", "h12", "h13", "h7"], "h6", ["l1", "l2", "l3"])
    assert p.bits["h7"] == 0 and p.tree.root_workers == (0,)
    assert p.entries["l1"] == JobEntry(2, Role.LEAF, 1) and p.entries["l3"] == JobEntry(3, Role.LEAF, 4)
    assert p.entries["l2"] == JobEntry(3, Role.ROOT)
    assert sorted(p.bits.values()) == [0, 2, 3, 5, 6, 7]


def test_a_tor_not_chosen_for_ina_sends_its_workers_to_the_root(ls):
    """Only l2 aggregates: l1's machines are the root's workers (fan-in 3 with h7)."""
    p = plan_job(ls, 3, ["h1", "h2", "h7"], "h6", ["l2"])
    assert p.tree.leaves == () and p.tree.root_workers == (0, 1, 2)
    assert p.entries == {"l2": JobEntry(3, Role.ROOT)}


def test_the_ps_machines_own_packets_bypass_the_root(ls):
    """The PS on a worker's machine (h1): h1's packets go to the PS over loopback, so the root l1
    sums the other three (fan-in 3), and with one other machine beside it l1 gets no entry."""
    p = plan_job(ls, 2, ["h1", "h2", "h3", "h4"], "h1", ["l1"])
    assert p.tree.root_workers == (0, 1, 2, 3) and p.entries == {"l1": JobEntry(3, Role.ROOT)}
    assert plan_job(ls, 2, ["h1", "h2"], "h1", ["l1"]).entries == {}
    p = plan_job(ls, 2, ["h1", "h2", "h6", "h7"], "h1", ["l1", "l2"])
    assert p.entries == {"l2": JobEntry(2, Role.LEAF, 2), "l1": JobEntry(2, Role.ROOT)}


def test_a_lone_worker_gets_no_leaf():
    """A ToR with one of the job's machines would aggregate nothing: that machine goes to the root."""
    g = fat_tree(4)
    p = plan_job(g, 1, ["h1", "h3"], "h16", [tor_of(g, "h1"), tor_of(g, "h3"), tor_of(g, "h16")])
    assert p.entries == {tor_of(g, "h16"): JobEntry(2, Role.ROOT)}


def test_the_plan_aggregates_exactly_through_the_engines(ls):
    """Replaying the plan through engine switches (leaves, then the root) and the PS gives every
    worker the exact sum, for random placements on three racks."""
    rnd = random.Random(5)
    for trial in range(40):
        machines = rnd.sample([f"h{i}" for i in range(1, 16)], rnd.randint(1, 9))
        ps = rnd.choice([f"h{i}" for i in range(1, 16)])
        ina = [s for s in ("l1", "l2", "l3") if rnd.random() < 0.7]
        p = plan_job(ls, trial, machines, ps, ina)
        switches = {s: Aggregator(64) for s in p.entries}
        for s, entry in p.entries.items():
            switches[s].install(p.job_id, entry.fan_in, entry.role, entry.out_bit)
        server = ParameterServer()
        server.install(p.tree)
        values = {m: [rnd.randint(-1000, 1000) for _ in range(32)] for m in p.bits}
        results = []
        for m, bit in p.bits.items():
            pkts = [data_packet(p.job_id, 0, 1 << bit, values[m])]
            if m == ps:  # the PS's own machine: loopback, no switch
                hops = []
            else:
                hops = ([tor_of(ls, m)] if tor_of(ls, m) != tor_of(ls, ps) else []) + [tor_of(ls, ps)]
            for hop in hops:  # a switch without an entry for the job passes it unchanged
                if hop in switches:
                    pkts = [o.data for pk in pkts for o in switches[hop].process(pk) if o.dest is Dest.TO_PS]
            for pk in pkts:
                results += [o.data for o in server.process(pk) if o.dest is Dest.TO_WORKERS]
        assert len(results) == 1, (machines, ps, ina, p.entries)
        assert list(decode(results[0])[1]) == [sum(col) for col in zip(*values.values(), strict=True)]


def test_bad_plans_say_why(ls):
    """Unknown machines or switches, no machine, or more than 32 bits: one InaError each."""
    with pytest.raises(InaError, match="not a machine"):
        plan_job(ls, 1, ["h99"], "h1", [])
    with pytest.raises(InaError, match="not switches"):
        plan_job(ls, 1, ["h1"], "h2", ["h3"])
    with pytest.raises(InaError, match="no machines"):
        plan_job(ls, 1, [], "h2", [])
    big = leaf_spine(2, 1, 20)
    with pytest.raises(InaError, match="more than 32 bits"):
        plan_job(big, 1, [f"h{i}" for i in range(1, 34)], "h40", [])
    p = plan_job(ls, 1, ["h1", "h2"], "h6", ["l1"])
    ips = {int(ipaddress.IPv4Address(ls.nodes[m]["ip"])) for m in ("h1", "h2", "h6")}
    assert p.members == ips
    assert switch_tables([p]) == {"l1": {1: JobEntry(2, Role.LEAF, 0, frozenset(ips))}}
    with pytest.raises(InaError, match="planned twice"):
        switch_tables([p, p])


def _steer(rules, g, switch: str, in_port: int, **udp) -> int | None:
    """The output port of the highest-priority rule of ``switch`` matching an INA packet."""
    dpid = g.nodes[switch]["dpid"]
    for r in sorted(rules.flows[dpid], key=lambda r: -r.priority):
        m = dict(r.match)
        if m.get("in_port", in_port) == in_port and all(m.get(k, v) == v for k, v in udp.items()) \
                and "ipv4_dst" not in m:
            return r.output_port
    return None


def test_ina_packets_are_steered_to_the_aggregator_and_come_back_routed(ls):
    """At l1 (aggregator on port 9): UDP to or from the INA port arriving on any link port goes to
    port 9; from port 9 it matches no steering rule (the routes apply); other switches and other
    traffic are unchanged, and every route still leads to its destination."""
    plain = compute_rules(ls, "ecmp")
    rules = compute_rules(ls, "ecmp", {"l1": 9})
    links = switch_ports(ls, "l1")
    for port in links:
        assert _steer(rules, ls, "l1", port, udp_dst=INA_UDP_PORT, udp_src=40000) == 9
        assert _steer(rules, ls, "l1", port, udp_src=INA_UDP_PORT, udp_dst=20007) == 9
    assert _steer(rules, ls, "l1", 9, udp_dst=INA_UDP_PORT) is None
    dpid = ls.nodes["l1"]["dpid"]
    steering = [r for r in rules.flows[dpid] if r.priority == PRIORITY_INA_STEER]
    assert len(steering) == 2 * len(links)
    assert set(rules.flows[dpid]) - set(steering) == set(plain.flows[dpid])
    for s in ("l2", "l3", "s1", "s2"):
        d = ls.nodes[s]["dpid"]
        assert rules.flows[d] == plain.flows[d]
    assert forward(rules, ls, "h1", "h6") == forward(plain, ls, "h1", "h6")


def test_an_aggregator_on_a_link_port_or_a_machine_is_refused(ls):
    """The aggregator port must be free on a switch of the topology."""
    with pytest.raises(TopologyError, match="a link uses it"):
        compute_rules(ls, "ecmp", {"l1": next(iter(switch_ports(ls, "l1")))})
    with pytest.raises(TopologyError, match="not a switch"):
        compute_rules(ls, "ecmp", {"h1": 9})


def test_engine_resolution_names_the_engine_and_refuses_unknown_ones():
    """auto takes bmv2 where it runs here, else software (with why); software is always available;
    an unknown engine or bmv2 where it cannot run is one EmulationError."""
    from common.errors import EmulationError
    from emulator.ina_engines import resolve_engine
    from ina.p4.build import engine_available

    available, why = engine_available()
    assert resolve_engine("auto") == (available, why)
    assert resolve_engine("software") == ("software", "asked for")
    with pytest.raises(EmulationError, match="valid: auto, bmv2, software"):
        resolve_engine("tofino")
    if available != "bmv2":
        with pytest.raises(EmulationError, match="cannot run here"):
            resolve_engine("bmv2")


def _delivered(g, p, ps: str) -> tuple[list[str], int]:
    """Where one result of plan ``p`` ends up when results are multicast: the PS sends one packet to
    each of ``p.result_to``; a packet addressed to machine m passes the root (the PS's ToR) and
    then m's ToR, and every switch with an entry of the job copies it to the entry's children
    (engine rule 2). Returns the machines reached (with repeats) and the packets the PS sent into
    the network."""
    by_ip = {g.nodes[m]["ip"]: m for m in g.nodes if g.nodes[m].get("role") == "machine"}
    switches = {s: Aggregator(64) for s in p.entries}
    for s, entry in p.entries.items():
        switches[s].install_entry(p.job_id, entry)
    packet = data_packet(p.job_id, 0, 0, [0] * 32, flags=1)  # a RESULT
    reached, sent = [], 0

    def travel(m: str, hops: list[str]) -> None:
        for i, hop in enumerate(hops):
            if hop in switches:
                (out,) = switches[hop].process(packet)
                if out.copies:
                    for c in out.copies:
                        child = by_ip[str(ipaddress.IPv4Address(c.ip))]
                        travel(child, [t for t in [tor_of(g, child)] if t not in hops[:i + 1]])
                    return
        reached.append(m)

    for ip in p.result_to:
        m = by_ip[ip]
        if m == ps:
            reached.append(m)  # loopback
            continue
        sent += 1
        travel(m, list(dict.fromkeys([tor_of(g, ps), tor_of(g, m)])))
    return reached, sent


def test_multicast_results_reach_every_machine_once_with_one_result_from_the_ps(ls):
    """Results multicast: the root copies to its machines and one machine per leaf, each leaf to its
    rack; the PS sends one result into the network where the root aggregates (else one per root
    child), and every machine of the job gets exactly one, for random placements on three racks."""
    p = plan_job(ls, 3, ["h1", "h2", "h11", "h12", "h13", "h7", "h6"], "h6", ["l1", "l2", "l3"], "multicast")
    ip = {m: int(ipaddress.IPv4Address(ls.nodes[m]["ip"])) for m in ls.nodes if m.startswith("h")}
    assert [c.ip for c in p.entries["l2"].copies] == [ip["h7"], ip["h1"], ip["h11"]]
    assert [c.ip for c in p.entries["l1"].copies] == [ip["h1"], ip["h2"]]
    assert p.result_to == (ls.nodes["h7"]["ip"], ls.nodes["h6"]["ip"])
    assert plan_job(ls, 3, ["h1", "h2", "h7"], "h6", ["l1", "l2"]).entries["l1"].copies == ()  # unicast
    rnd = random.Random(11)
    for trial in range(60):
        machines = rnd.sample([f"h{i}" for i in range(1, 16)], rnd.randint(1, 9))
        ps = rnd.choice([f"h{i}" for i in range(1, 16)])
        ina = [s for s in ("l1", "l2", "l3") if rnd.random() < 0.7]
        p = plan_job(ls, trial, machines, ps, ina, "multicast")
        reached, sent = _delivered(ls, p, ps)
        assert sorted(reached) == sorted(set(machines)), (machines, ps, ina, p.entries, p.result_to)
        assert sent == 1 if tor_of(ls, ps) in p.entries else sent <= len(set(machines)), (machines, ps, ina)
    with pytest.raises(InaError, match="results 'broadcast'"):
        plan_job(ls, 1, ["h1"], "h2", [], "broadcast")


def test_an_aggregators_demand_is_what_its_switchs_links_can_bring(ls):
    """l1 has five machines and two spines: at 8 Mbit/s a link, 56 Mbit/s of 1,086-byte frames (256
    values) is 6,446 packets/s; an engine of 5,000 packets/s keeps up from dilation 3 x 6,446 / 5,000
    = 3.9 (to 0.1, up), and one of 7,000 at 3 already."""
    from ina.plan import aggregator_demand_pps, carrying_dilation

    rates = {(u, v): 8.0 for u, v in ls.edges}
    pps = aggregator_demand_pps(ls, "l1", rates, 256)
    assert pps == pytest.approx(56e6 / 8 / 1086)
    assert carrying_dilation(pps, 5000.0, 3.0) == pytest.approx(3.9)
    assert carrying_dilation(pps, 7000.0, 3.0) is None


def test_a_declared_pat_maps_to_packets_per_second_of_wall_time_as_links_do():
    """14 Gbit/s of 1,086-byte frames at scale 500 and dilation 3: 14e9 / 1,500 / 8,688 = 1,074 packets/s."""
    from ina.plan import pat_pps

    assert pat_pps(14, 500, 3, 256) == pytest.approx(14e9 / 1500 / (1086 * 8))
    assert pat_pps(0, 500, 3, 256) == 0.0
