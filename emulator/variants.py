"""The emulator's variants, each an object chosen once: switch port kinds, ECN markers, how much a run
wants ECN marking or INA, how a congestion control is installed, how workers run and where.

A run resolves a name from the config and this machine's capabilities once
(:func:`emulator.ports.resolve_port_type`, :func:`resolve_ecn`), looks the object up here
(:func:`switch_ports`, :func:`ecn_marker`, ...) and hands it on; the code that uses it asks the
object, never the name, what to do. Registries: :data:`SWITCH_PORTS` (``system``, ``afxdp``) with
:data:`SWITCH_PORT_CHOICES` (``switch_ports``),
:data:`ECN_MARKERS` (``none``, ``red``, ``bpf``) with :data:`ECN_METHODS` (``ecn.method``),
:data:`ECN_MARKINGS` (``ecn.marking``) and :data:`INA_USES` (``ina.use``),
:data:`CONGESTION_INSTALLERS` (``kernel``, ``struct_ops``, keyed by the run's
:class:`congestion.CongestionControl`'s ``installer``), :data:`WORKER_RUNTIMES` (``agent``,
``torch``) and :data:`CONTAINER_ENGINES` (``none``, ``docker``).

Every variant and what resolves it: ``docs/architecture.md`` (The emulator's variants).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from common.errors import EmulationError
from common.sockets import free_tcp_port
from emulator import ports
from emulator.ecn import BpfMarker, EcnUnavailable, red_qdisc_args
from emulator.journal import Change
from jobs.modes import work_mode
from measure.marking import MarkingParams
from measure.ports import AFXDP_MAX_MTU
from workers.agent import launch_agents, plan_agents
from workers.launcher import ExecFn, launch, with_ina

OFFLOADS = ("rx", "tx", "tso", "gso", "gro")
"""Offloads turned off on every interface (the userspace datapath stalls TCP with them on)."""


class SwitchPorts:
    """How a switch's link interfaces reach Open vSwitch."""

    name: str = ""
    one_machine_only: bool = False
    """True when cluster mode cannot use it."""
    max_mtu: float = math.inf
    """The largest MTU its ports carry."""

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
    one_machine_only = True
    max_mtu = AFXDP_MAX_MTU

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
    why: str = ""
    """What marks, for the run's description."""
    ramp_as_time: bool = False
    """True when it holds the K..K_max ramp as a time at the port's rate (at most
    :data:`measure.marking.MAX_RAMP_NS`)."""

    def problem(self, has_red: bool, bpf_why: str | None) -> str | None:
        """Why it cannot run where the kernel takes RED or not (``has_red``) and the BPF marker cannot
        run for ``bpf_why`` (None: it can); None when it runs."""
        return None

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
    why = "kernel RED with ECN under each port's shaper"

    def problem(self, has_red: bool, bpf_why: str | None) -> str | None:
        return None if has_red else "the kernel has no sch_red (RED qdisc)"

    def fifo(self, params: MarkingParams | None, rate_mbps: float, mtu: int, queue_packets: int) -> str:
        return " ".join(red_qdisc_args(params, rate_mbps, mtu))


class BpfVirtualQueue(EcnMarker):
    """The BPF virtual-queue marker at each switch port's ``clsact`` egress, counters in BPF maps."""

    name = "bpf"
    why = "BPF virtual-queue marker at each switch port's clsact egress"
    ramp_as_time = True

    def problem(self, has_red: bool, bpf_why: str | None) -> str | None:
        return bpf_why or None

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


@dataclasses.dataclass(frozen=True)
class Requirement:
    """How much a run wants a part that may not run here: ECN marking (``ecn.marking``) or INA (``ina.use``).

    Attributes:
        name: ``off``, ``optional`` or ``required``.
        on: the part is to run where it can.
        required: a run where it cannot stops.
    """

    name: str
    on: bool
    required: bool


class WorkerRuntime:
    """How a job's ranks run: one process per rank, or one agent per machine running them all."""

    name: str = ""

    def launch(self, job: str, specs: Sequence, ips: Mapping[str, str], spawn: ExecFn, out_dir: str,
               timeout_s: float, ina: Mapping | None = None) -> tuple[list, list]:
        """Start ``job``'s ranks (``specs``: :class:`workers.launcher.WorkerSpec` s; ``ina``: each machine's
        :class:`workers.launcher.InaEndpoint` for an INA job, else None).

        Returns:
            ``(workers, agent plans)``: the started workers, and the plans whose connections
            :func:`workers.agent.read_conns` reads (empty where ranks run as their own processes).
        """
        raise NotImplementedError


class AgentRuntime(WorkerRuntime):
    """One light process per machine running every rank there (:mod:`workers.agent`)."""

    name = "agent"

    def launch(self, job, specs, ips, spawn, out_dir, timeout_s, ina=None):
        plans = plan_agents({job: specs}, ips, free_tcp_port(), out_dir, timeout_s,
                            ina={job: ina} if ina is not None else None)
        return launch_agents(plans, spawn, out_dir), plans


class TorchRuntime(WorkerRuntime):
    """One ``torch.distributed`` process per rank (:mod:`workers.worker`)."""

    name = "torch"

    def launch(self, job, specs, ips, spawn, out_dir, timeout_s, ina=None):
        if ina is not None:
            specs = with_ina(specs, ina)
        return launch(specs, spawn, out_dir), []


class ContainerEngine:
    """Where a run's workers run: as processes in their machines, or in containers there."""

    name: str = ""
    one_machine_only: bool = False
    """True when cluster mode cannot use it."""

    def prepare(self, cpus: float, say):
        """What the run's workers need before it starts, and its record for ``capabilities.json``.

        Returns:
            ``(settings, record)``: :class:`emulator.containers.ContainerSettings` (None: workers run
            as processes) and a JSON-able dict.
        """
        return None, {"engine": self.name}


class NoContainers(ContainerEngine):
    """Workers run as processes in their machines."""

    name = "none"


class DockerContainers(ContainerEngine):
    """Workers run in Docker containers in their machines' network namespaces (:mod:`emulator.containers`),
    from an image of this machine's own packages (:mod:`emulator.worker_image`)."""

    name = "docker"
    one_machine_only = True

    def prepare(self, cpus: float, say):
        from emulator.containers import ContainerSettings
        from emulator.worker_image import ensure_image

        image = ensure_image(say)
        return ContainerSettings(image.tag, cpus), {"engine": self.name, "cpus": cpus, **image.to_dict()}


SWITCH_PORTS: dict[str, SwitchPorts] = {"system": SystemPorts(), "afxdp": AfxdpPorts()}
SWITCH_PORT_CHOICES: dict[str, tuple[SwitchPorts, ...]] = {
    "auto": (SWITCH_PORTS["afxdp"], SWITCH_PORTS["system"]), "afxdp": (SWITCH_PORTS["afxdp"],),
    "system": (SWITCH_PORTS["system"],)}
"""``switch_ports`` -> the kinds it may resolve to (:func:`emulator.ports.resolve_port_type`), in order of
preference."""
ECN_MARKERS: dict[str, EcnMarker] = {"none": NoMarker(), "red": RedMarker(), "bpf": BpfVirtualQueue()}
ECN_METHODS: dict[str, tuple[EcnMarker, ...]] = {
    "auto": (ECN_MARKERS["red"], ECN_MARKERS["bpf"]), "red": (ECN_MARKERS["red"],), "bpf": (ECN_MARKERS["bpf"],)}
"""``ecn.method`` -> the markers it may resolve to, in order of preference."""
ECN_MARKINGS: dict[str, Requirement] = {"off": Requirement("off", False, False),
                                        "optional": Requirement("optional", True, False),
                                        "required": Requirement("required", True, True)}
INA_USES: dict[str, Requirement] = {"optional": ECN_MARKINGS["optional"], "required": ECN_MARKINGS["required"]}
CONGESTION_INSTALLERS: dict[str, CongestionInstaller] = {"kernel": KernelModule(), "struct_ops": StructOps()}
WORKER_RUNTIMES: dict[str, WorkerRuntime] = {"agent": AgentRuntime(), "torch": TorchRuntime()}
CONTAINER_ENGINES: dict[str, ContainerEngine] = {"none": NoContainers(), "docker": DockerContainers()}


def _lookup(registry: Mapping, name: str, what: str):
    """``registry[name]``, or EmulationError naming the valid names."""
    try:
        return registry[name]
    except KeyError:
        raise EmulationError(f"{what} {name!r}: valid: {', '.join(registry)}") from None


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


def ecn_marking(name: str) -> Requirement:
    """How much a run wants ECN marked, by ``ecn.marking`` (``off``, ``optional``, ``required``)."""
    return _lookup(ECN_MARKINGS, name, "ECN marking")


def ina_use(name: str) -> Requirement:
    """How much a run wants its INA jobs aggregated in the fabric, by ``ina.use`` (``optional``, ``required``)."""
    return _lookup(INA_USES, name, "INA use")


def resolve_ecn(marking: str, method: str, has_red: bool, bpf_why: str | None) -> tuple[str, str]:
    """Which marker a run uses, where the kernel takes RED or not (``has_red``) and the BPF
    marker cannot run for ``bpf_why`` (None: it can): the first of ``method``'s markers
    (:data:`ECN_METHODS`) that runs here.

    Returns:
        ``(marker name, why)``: the name is ``red``, ``bpf`` or ``none``.

    Raises:
        EcnUnavailable: marking is required and the asked-for path cannot run here.
    """
    if not ecn_marking(marking).on:
        return "none", "ECN marking is off in the configuration"
    for marker in _lookup(ECN_METHODS, method, "ECN method"):
        problem = marker.problem(has_red, bpf_why)
        if problem is None:
            return marker.name, marker.why
    if not ecn_marking(marking).required:
        return "none", f"ECN not measured: {problem}"
    raise EcnUnavailable(f"ECN marking ({marker.name}) cannot run here: {problem}; set ecn.marking: optional to "
                         f"run without ECN measurement, or ecn.method to another path")


def worker_runtime(runtime: str, mode: str = "replay") -> WorkerRuntime:
    """How ranks run: ``runtime`` (``agent`` or ``torch``), unless the work ``mode`` needs its own
    (:attr:`jobs.modes.WorkMode.runtime`: training runs in torch)."""
    return _lookup(WORKER_RUNTIMES, work_mode(mode).runtime or runtime, "worker runtime")


def container_engine(name: str) -> ContainerEngine:
    """Where workers run, by ``container.engine`` (``none`` or ``docker``)."""
    return _lookup(CONTAINER_ENGINES, name, "container engine")
