"""The emulated network's variants, each an object chosen once: switch port kinds, ECN markers and how
a congestion control is installed.

A run resolves a name from the config and this machine's capabilities once
(:func:`emulator.ports.resolve_port_type`, :func:`emulator.ecn.resolve_method`), looks the
object up here (:func:`switch_ports`, :func:`ecn_marker`) and hands it to
:class:`emulator.net.EmulatedNetwork`, which asks the object, never the name, what to build.
Registries: :data:`SWITCH_PORTS` (``system``, ``afxdp``), :data:`ECN_MARKERS` (``none``, ``red``,
``bpf``) and :data:`CONGESTION_INSTALLERS` (``kernel``, ``struct_ops``, keyed by the run's
:class:`congestion.CongestionControl`'s ``installer``).

Every variant and what resolves it: ``docs/architecture.md`` (The emulator's variants).
"""

from __future__ import annotations

from common.errors import EmulationError
from emulator import ports
from emulator.ecn import BpfMarker, red_qdisc_args
from emulator.journal import Change
from measure.marking import MarkingParams

OFFLOADS = ("rx", "tx", "tso", "gso", "gro")
"""Offloads turned off on every interface (the userspace datapath stalls TCP with them on)."""


class SwitchPorts:
    """How a switch's link interfaces reach Open vSwitch."""

    name: str = ""

    def devices(self, intf: str) -> tuple[str, ...]:
        """The interfaces this kind adds for switch interface ``intf`` (none: the veth is the port)."""
        return ()

    def ovs_port(self, intf: str) -> str:
        """The OVS port that carries switch interface ``intf``."""
        return intf

    def attach(self, net) -> None:
        """Turn the started network's switch interfaces into this kind of port (recorded first)."""


class SystemPorts(SwitchPorts):
    """The link's veth is itself the OVS port."""

    name = "system"


class AfxdpPorts(SwitchPorts):
    """Each switch interface behind an AF_XDP socket on a veth pipe, polled by a PMD thread."""

    name = "afxdp"

    def devices(self, intf: str) -> tuple[str, ...]:
        return ports.pipe_names(intf)

    def ovs_port(self, intf: str) -> str:
        return ports.pipe_names(intf)[0]

    def attach(self, net) -> None:
        ports.set_pmd_sleep(net.record)
        bridge_ports = net.bridge_ports()
        for intfs in bridge_ports.values():
            for intf in intfs:
                for dev in self.devices(intf):
                    net.record.add(Change("link", dev, what=f"AF_XDP pipe of {intf}"))
        ports.attach_afxdp(bridge_ports, net.options.mtu, [a for o in OFFLOADS for a in (o, "off")])


class EcnMarker:
    """How switch ports mark ECN-capable packets, if at all."""

    name: str = ""
    measures: bool = True
    """True when marks are counted (hosts then negotiate ECN)."""

    def fifo(self, params: MarkingParams | None, rate_mbps: float, mtu: int, queue_packets: int) -> str:
        """The queue discipline under a switch port's shaper (a plain FIFO unless the marker is the FIFO)."""
        return f"pfifo limit {queue_packets}"

    def start(self, net) -> BpfMarker | None:
        """Start marking on the started network's switch ports; returns the loaded marker, if any."""
        return None


class NoMarker(EcnMarker):
    """No marking: ECN is not measured."""

    name = "none"
    measures = False


class RedMarker(EcnMarker):
    """Kernel RED with ECN as each switch port's FIFO; its marks are read from ``tc -s``."""

    name = "red"

    def fifo(self, params: MarkingParams | None, rate_mbps: float, mtu: int, queue_packets: int) -> str:
        return " ".join(red_qdisc_args(params, rate_mbps, mtu))


class BpfVirtualQueue(EcnMarker):
    """The BPF virtual-queue marker at each switch port's ``clsact`` egress, counters in BPF maps."""

    name = "bpf"

    def start(self, net) -> BpfMarker:
        marker = BpfMarker(record=net.record)
        marker.start({intf: (net.shaping.port_rate(s, other), net.options.marking(net.shaping.port_rate(s, other)))
                      for (s, other), intf in net.switch_intfs.items()})
        return marker


class CongestionInstaller:
    """How a run gives the hosts' kernels a congestion control (a :class:`congestion.CongestionControl`,
    whose ``installer`` names this) before the hosts pick it."""

    name: str = ""

    def install(self, changes) -> None:
        """Make ``changes.options.congestion_control`` available to the network's hosts, recording it in
        ``changes.record`` first (``changes``: the run's :class:`emulator.host_changes.HostChanges`)."""


class KernelModule(CongestionInstaller):
    """A Linux module (``tcp_<name>.ko``): the kernel loads it when a host picks it, and the network's
    pre-check finds it among the available ones on every server; nothing to install."""

    name = "kernel"


class StructOps(CongestionInstaller):
    """An MLTCP variant, registered as BPF struct_ops in this machine's kernel for the run with the run's
    F and idle gap (:class:`emulator.mltcp.MltcpCongestionControl`); the run's end unregisters it."""

    name = "struct_ops"

    def install(self, changes) -> None:
        """Register it (recorded: the run's end unregisters it).

        Raises:
            EmulationError: in cluster mode (other servers' kernels would lack it), without MLTCP's
                parameters, or :class:`emulator.mltcp.MltcpUnavailable` where it cannot run.
        """
        from emulator.mltcp import MltcpCongestionControl

        cc = changes.options.congestion_control
        if changes.options.cluster is not None:
            raise EmulationError(f"congestion control {cc.name} is registered in this machine's kernel only; "
                                 "cluster mode cannot use it")
        if changes.options.mltcp is None:
            raise EmulationError(f"congestion control {cc.name} needs MLTCP's parameters (NetOptions.mltcp)")
        MltcpCongestionControl(cc.name, *changes.options.mltcp, record=changes.record).start()


SWITCH_PORTS: dict[str, SwitchPorts] = {"system": SystemPorts(), "afxdp": AfxdpPorts()}
ECN_MARKERS: dict[str, EcnMarker] = {"none": NoMarker(), "red": RedMarker(), "bpf": BpfVirtualQueue()}
CONGESTION_INSTALLERS: dict[str, CongestionInstaller] = {"kernel": KernelModule(), "struct_ops": StructOps()}


def switch_ports(name: str) -> SwitchPorts:
    """The switch port kind of a resolved name (``system`` or ``afxdp``).

    Raises:
        EmulationError: any other name (``auto`` must be resolved first).
    """
    try:
        return SWITCH_PORTS[name]
    except KeyError:
        raise EmulationError(f"switch port type {name!r}: resolve it first ({' or '.join(SWITCH_PORTS)})") from None


def ecn_marker(name: str) -> EcnMarker:
    """The ECN marker of a resolved marking path (``none``, ``red`` or ``bpf``).

    Raises:
        EmulationError: any other name.
    """
    try:
        return ECN_MARKERS[name]
    except KeyError:
        raise EmulationError(f"ECN method {name!r}: resolve it first ({', '.join(ECN_MARKERS)})") from None
