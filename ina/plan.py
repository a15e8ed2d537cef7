"""A job's INA plan on a fabric: which switch aggregates what, each machine's bit, the PS's job.

Pure: a topology graph (:mod:`topo.schema`) and a placement's machines in, plain records out,
shared by the emulator and tests. ATP's two levels (NetPack §1.2-1.6, ``docs/resolutions.md``), one
INA endpoint per machine and job: leaves (INA ToRs of two or more of the job's machines), the root
(the PS's ToR), everything else unaggregated; a switch with a single child gets no entry (this
project's resolution). Results go back ``unicast`` or ``multicast`` (:data:`RESULTS`).

The tree and the results' paths: ``docs/ina.md`` (How it works). O(machines) per job.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
from collections.abc import Iterable, Mapping, Sequence

from ina.aggregator import MAX_BITS, Copy, JobEntry, JobTraffic, JobTree, LeafGroup, Role
from ina.protocol import VALUES_PER_PACKET, InaError, check_values_per_packet, frame_bytes

RESULTS = ("unicast", "multicast")
"""How results reach the workers (``docs/ina.md``); the simulator models the same two (:data:`sim.ina.RESULTS`)."""


@dataclasses.dataclass(frozen=True)
class JobPlan:
    """What the fabric, the PS and the workers need to run one job over INA.

    Attributes:
        tree: the job's aggregation tree in bits (the PS installs it).
        bits: machine -> its bit in the tree.
        entries: switch -> its table entry for the job (leaves and the root only).
        ps_host: the machine running the job's parameter server.
        addresses: bit -> the machine's IP, where the PS sends results (:class:`ina.ps.PsJob`).
        members: the IPv4 addresses (integers) the job's packets come from: its machines and its
            PS; every switch entry of the job drops packets from any other (engine rule 1b).
        result_to: the IPs the PS sends each result to, in order: every machine's (unicast), or
            those the switches' copies do not reach (multicast; ``docs/ina.md``).
        values_per_packet: int32 lanes per packet of the job (its workers', switches' and PS's).
    """

    tree: JobTree
    bits: Mapping[str, int]
    entries: Mapping[str, JobEntry]
    ps_host: str
    addresses: Mapping[int, str]
    members: frozenset[int] = frozenset()
    result_to: tuple[str, ...] = ()
    values_per_packet: int = VALUES_PER_PACKET

    @property
    def job_id(self) -> int:
        """The job's INA id."""
        return self.tree.job_id


def tor_of(g, machine: str) -> str:
    """The switch a machine is attached to.

    Raises:
        InaError: not a machine of ``g``.
    """
    if machine not in g or g.nodes[machine].get("role") != "machine":
        raise InaError(f"{machine!r} is not a machine of the topology")
    (tor,) = g.neighbors(machine)
    return tor


def uplink_packets(g, machines: Iterable[str], ps_host: str, forwarded: Mapping[str, JobTraffic],
                   sent: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """A job's INA packets up each rack's uplinks towards its PS, with the aggregation that ran and
    unaggregated, by ToR (every ToR of its machines but the PS's: in the PS's rack nothing
    crosses an uplink).

    Args:
        g: the topology.
        machines: the job's machines.
        ps_host: the machine of its PS.
        forwarded: ToR -> the job's packets its aggregator forwarded (:class:`ina.aggregator.JobTraffic`);
            every INA packet on the fabric passes the aggregator of each ToR on its way, so
            ``to_ps`` at a ToR outside the PS's rack is what went up its uplinks.
        sent: machine -> data packets its client sent, resends included
            (:attr:`ina.client.ClientStats.sent`).

    Returns:
        ``(with_ina, unaggregated)``: ToR -> packets. With INA, a ToR with an aggregator gives
        its counter; one without gives its machines' ``sent`` (nothing summed them). Unaggregated
        is its machines' ``sent``: every worker packet sent to the PS as it is (a PS, the
        baseline of ATP, NetPack spec §1.2).
    """
    ps_tor = tor_of(g, ps_host)
    unaggregated: dict[str, int] = {}
    for m in dict.fromkeys(machines):
        t = tor_of(g, m)
        if t != ps_tor:
            unaggregated[t] = unaggregated.get(t, 0) + sent.get(m, 0)
    with_ina = {t: forwarded[t].to_ps if t in forwarded else n for t, n in unaggregated.items()}
    return with_ina, unaggregated


def ps_host_of(ps_host: str | None, machines: Sequence[str]) -> str:
    """The machine of a job's PS: the placement's ``ps_host``, else the machine of its rank 0
    (this project's default, the specs leave it to the system; ATP co-locates PSs with workers)."""
    return ps_host or machines[0]


@dataclasses.dataclass(frozen=True)
class TreeShape:
    """Where a job aggregates, by the rule of ``docs/ina.md``, for any number of machines.

    Attributes:
        machines: the job's distinct machines, in first-appearance (rank) order.
        ps_host: the machine of its PS.
        ps_tor: the PS's ToR (the root).
        racks: ToR -> the job's machines under it, in order (the PS's machine included).
        leaves: the aggregating leaf ToRs, in the order of their first machine.
        root_aggregates: whether the PS's ToR aggregates the job.
    """

    machines: tuple[str, ...]
    ps_host: str
    ps_tor: str
    racks: Mapping[str, tuple[str, ...]]
    leaves: tuple[str, ...]
    root_aggregates: bool

    @property
    def at_root(self) -> tuple[str, ...]:
        """The machines whose packets reach the root unaggregated (those not under a leaf)."""
        return tuple(m for t, ms in self.racks.items() if t not in self.leaves for m in ms)

    @property
    def root_children(self) -> int:
        """The root's fan-in: the machines at the root but the PS's own (loopback), and the leaves."""
        return len(self.at_root) - (self.ps_host in self.at_root) + len(self.leaves)


def tree_shape(g, machines: Sequence[str], ps_host: str, ina_switches: Iterable[str],
               job: str = "INA job") -> TreeShape:
    """The aggregation tree's shape of a job placed on ``machines`` (repeats folded) with its PS on
    ``ps_host`` and INA allowed on ``ina_switches``: the rule :func:`plan_job` installs, without
    its header's limit on bits (the simulator models jobs of any size with it).

    Raises:
        InaError: an unknown machine or switch, or no machine.
    """
    order = tuple(dict.fromkeys(machines))
    if not order:
        raise InaError(f"{job}: no machines")
    ina = set(ina_switches)
    bad = sorted(s for s in ina if s not in g or g.nodes[s].get("role") != "switch")
    if bad:
        raise InaError(f"{job}: {', '.join(bad)} are not switches of the topology")
    ps_tor = tor_of(g, ps_host)
    racks: dict[str, list[str]] = {}
    for m in order:
        racks.setdefault(tor_of(g, m), []).append(m)
    leaves = tuple(t for t, ms in racks.items() if t in ina and t != ps_tor and len(ms) >= 2)
    shape = TreeShape(order, ps_host, ps_tor, {t: tuple(ms) for t, ms in racks.items()}, leaves, False)
    # The PS's own machine reaches the PS over loopback, never through its ToR: the root sums the others.
    return dataclasses.replace(shape, root_aggregates=ps_tor in ina and shape.root_children >= 2)


def _copy(g, machine: str) -> Copy:
    return Copy(int(ipaddress.IPv4Address(g.nodes[machine]["ip"])), g.nodes[machine]["mac"])


def plan_job(g, job_id: int, machines: Sequence[str], ps_host: str, ina_switches: Iterable[str],
             results: str = "unicast", values_per_packet: int = VALUES_PER_PACKET) -> JobPlan:
    """The INA plan of one job (see ``docs/ina.md``).

    Args:
        g: the topology.
        job_id: the job's INA id (0..65535).
        machines: the job's machines, in rank order (repeats, for several ranks per machine,
            are folded: bits follow first appearance).
        ps_host: the machine of the job's PS (need not host a worker).
        ina_switches: switches that may aggregate the job (a placement's ``ina_switches``);
            each must be a switch of ``g``.
        results: ``unicast`` or ``multicast`` (:data:`RESULTS`).
        values_per_packet: int32 lanes per packet (:func:`ina.protocol.check_values_per_packet`).

    Raises:
        InaError: an unknown machine or switch, no machine, more bits than the header has, or an
            unknown ``results``.
    """
    if results not in RESULTS:
        raise InaError(f"INA job {job_id}: results {results!r} is not one of {', '.join(RESULTS)}")
    check_values_per_packet(values_per_packet)
    multicast = results == "multicast"
    shape = tree_shape(g, machines, ps_host, ina_switches, job=f"INA job {job_id}")
    racks, leaf_tors = shape.racks, shape.leaves
    at_root = list(shape.at_root)
    if len(at_root) + sum(1 + len(racks[t]) for t in leaf_tors) > MAX_BITS:
        raise InaError(f"INA job {job_id}: {len(shape.machines)} machines and {len(leaf_tors)} leaves need more than "
                       f"{MAX_BITS} bits")
    bits: dict[str, int] = {m: b for b, m in enumerate(at_root)}
    leaves, entries, nxt = [], {}, len(at_root)
    for t in leaf_tors:
        leaf_bit = nxt
        workers = tuple(range(nxt + 1, nxt + 1 + len(racks[t])))
        bits.update(zip(racks[t], workers, strict=True))
        leaves.append(LeafGroup(leaf_bit, workers))
        copies = tuple(_copy(g, m) for m in racks[t]) if multicast else ()
        entries[t] = JobEntry(len(workers), Role.LEAF, leaf_bit, copies=copies)
        nxt += 1 + len(workers)
    tree = JobTree(job_id, tuple(range(len(at_root))), tuple(leaves))
    addresses = {b: g.nodes[m]["ip"] for m, b in bits.items()}
    # The root's children: machines at the root but the PS's own (loopback), one machine per leaf.
    children = [m for m in at_root if m != ps_host] + [racks[t][0] for t in leaf_tors]
    result_to = tuple(addresses[b] for b in sorted(addresses))
    if multicast:  # the root copies to its children where it has an entry; else the PS sends each one
        local = (g.nodes[ps_host]["ip"],) if ps_host in bits else ()
        result_to = (*(g.nodes[m]["ip"] for m in (children[:1] if shape.root_aggregates else children)), *local)
    if shape.root_aggregates:
        copies = tuple(_copy(g, m) for m in children) if multicast else ()
        entries[shape.ps_tor] = JobEntry(shape.root_children, Role.ROOT, copies=copies)
    members = frozenset(int(ipaddress.IPv4Address(g.nodes[m]["ip"])) for m in [*bits, ps_host])
    return JobPlan(tree, bits, entries, ps_host, addresses, members, result_to, values_per_packet)


def switch_tables(plans: Iterable[JobPlan]) -> dict[str, dict[int, JobEntry]]:
    """Switch -> {job id -> entry}: what each aggregator has installed for the given jobs, each
    entry with its job's members.

    Raises:
        InaError: two plans share a job id.
    """
    out: dict[str, dict[int, JobEntry]] = {}
    seen: set[int] = set()
    for p in plans:
        if p.job_id in seen:
            raise InaError(f"INA job id {p.job_id} is planned twice")
        seen.add(p.job_id)
        for s, entry in p.entries.items():
            out.setdefault(s, {})[p.job_id] = dataclasses.replace(entry, members=p.members)
    return out


def aggregator_demand_pps(g, switch: str, rate_mbps: Mapping[tuple[str, str], float],
                          values_per_packet: int = VALUES_PER_PACKET) -> float:
    """The most INA packets per second ``switch``'s aggregator may be sent: everything its links
    can bring into the switch (every INA packet crossing an INA switch passes its aggregator, and
    could all be INA), in frames of ``values_per_packet`` values.

    Args:
        g: the topology.
        switch: an INA switch of ``g``.
        rate_mbps: each link's rate as emulated (wall clock: paper rate / (scale x dilation)),
            keyed by either orientation.
        values_per_packet: the fabric's.
    """
    mbps = sum(rate_mbps.get((u, switch), rate_mbps.get((switch, u), 0.0)) for u in g.neighbors(switch))
    return mbps * 1e6 / 8 / frame_bytes(values_per_packet)


def pat_pps(pat_gbps: float, scale: float, dilation: float, values_per_packet: int = VALUES_PER_PACKET) -> float:
    """An aggregator's declared Peak Aggregation Throughput (``ina.pat_gbps``, paper-scale Gbit/s
    of INA frames, as the simulator counts it) as INA packets per second of wall time on the
    emulator, mapped as links are: divided by the scale and the dilation."""
    return pat_gbps * 1e9 / (scale * dilation) / 8 / frame_bytes(values_per_packet)


def carrying_dilation(demand_pps: float, engine_pps: float, dilation: float) -> float | None:
    """The least dilation (to 0.1) at which an aggregator taking ``engine_pps`` keeps up with a
    switch sent ``demand_pps`` at ``dilation`` (rates fall as 1 / dilation); None when it keeps up."""
    if demand_pps <= engine_pps:
        return None
    return math.ceil(dilation * demand_pps / engine_pps * 10) / 10
