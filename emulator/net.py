"""Realise a topology graph as a Mininet network: OVS switches, shaped links, configured hosts.

:class:`EmulatedNetwork` is a context manager. On entry it writes ``topology.json``, starts
the controller, builds the network and waits until every switch is programmed; on exit
(success, exception or Ctrl-C) it stops the processes the run started (by PID), stops
Mininet, and removes any bridge or interface of this network that is left.

Choices forced by the machines this runs on (see ARCHITECTURE.md):

* switches are Open vSwitch bridges with the userspace datapath (``datapath_type=netdev``),
  their ports AF_XDP sockets or plain veths (see :mod:`emulator.ports`),
  unless the kernel has the openvswitch module, in secure fail mode, OpenFlow 1.3;
* checksum and segmentation offloads are turned off on every interface (the userspace
  datapath stalls TCP otherwise);
* links are shaped by a token bucket (TBF) at both ends at the scaled rate, with a bounded
  FIFO below it (or RED with ECN at switch ports);
  Mininet's TCLink would silently ignore rates above 1000 Mbit/s, so shaping is done here
  and any rate outside [0.1, 1000] Mbit/s or any failed ``tc`` command is an error;
* hosts run TCP with ``tcp_slow_start_after_idle=0``, ``tcp_no_metrics_save=1`` and a
  configured congestion control, IPv6 off, and static ARP entries (no flooding rules are
  needed);
* with ECN marking (marker ``red`` or ``bpf``, :mod:`emulator.variants`, :mod:`emulator.ecn`) every switch
  port marks CE on its egress, and hosts run with ``net.ipv4.tcp_ecn=1``;
* each INA switch (``ina_switches``) gets one more port, after its links' (``<switch>-eth<P>``),
  a veth whose peer ``<switch>-ia<P>`` an INA aggregator engine serves one-armed
  (:mod:`emulator.ina_fabric`); it is not shaped (the aggregator stands for the switch's own
  pipeline) and carries only what the controller steers to it. It stays a ``system`` port on an
  AF_XDP fabric (OVS's userspace datapath polls both kinds): behind an AF_XDP pipe
  (:mod:`emulator.ports`) the aggregator's packets back into its switch were lost after the first
  few (a 4-machine INA job stalled), as a system port the same job completes.

In cluster mode (``cluster``, :mod:`emulator.cluster`) the nodes are spread over several servers
with Mininet's cluster edition: every command for a node (configuration, shaping, counters,
workers) runs on the node's server, and what the network creates there is recorded with the
way to reach it, so the same undo removes it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
import typing

from common.errors import EmulationError
from common.lifecycle import StartStop
from congestion import CONGESTION_CONTROLS, CongestionControl
from emulator.capabilities import resolve_datapath
from emulator.cluster import LOCAL, REMOTE_RUN, ClusterOptions, MultiServer, ThisMachine
from emulator.controller_proc import ControllerProcess
from emulator.ecn import BpfMarker, wait_unloaded
from emulator.journal import Change, EmulatorLock, RunJournal, process_change, require_no_leftovers
from emulator.procs import pid_alive, run, stop_process
from emulator.variants import CONGESTION_INSTALLERS, ECN_MARKERS, OFFLOADS, SWITCH_PORTS, EcnMarker, SwitchPorts
from measure import shaping
from measure.marking import MarkingParams
from measure.shaping import MAX_RATE_MBPS, MIN_RATE_MBPS, link_rates_mbps  # noqa: F401 (re-exported)
from topo import machines, switches
from topo.io import write_topology_json

HOST_PORT_RANGE = "10000 32767"
"""Local ports of the emulated machines' outgoing connections: below Linux's default ephemeral range
(32768-60999), from which :func:`common.sockets.free_tcp_port` picks listening ports."""


@dataclasses.dataclass(frozen=True)
class NetOptions:
    """How to build the emulated network.

    Attributes:
        scale: divides paper-scale link rates (and, elsewhere, byte counts).
        dilation: time dilation factor D: divides link rates on top of ``scale`` (virtual time
            runs D times slower than wall time; see :func:`common.units.virtual_s`).
        mtu: MTU of every emulated interface (1500, or 9000 for jumbo frames).
        routing: controller routing mode, ``ecmp`` or ``select``.
        queue_packets: FIFO limit under each switch port's shaper, in packets.
        host_queue_packets: FIFO limit under each machine's own shaper (its NIC), in packets:
            deep enough that TCP does not overflow it, as a real host's TCP is held back before
            its NIC's queue drops (``host_queue_packets`` in the config).
        congestion_control: TCP congestion control used in every host (installed as its ``installer``
            says, :data:`emulator.variants.CONGESTION_INSTALLERS`).
        stats_interval_s: controller port-statistics polling period.
        datapath: the OVS datapath: ``auto`` (the kernel's where the kernel has the openvswitch
            module, as in the VM; else the userspace one, :func:`emulator.capabilities.resolve_datapath`),
            ``user`` or ``kernel``.
        ecn: the ECN marker (:data:`emulator.variants.ECN_MARKERS`, the path
            :func:`emulator.ecn.resolve_method` chose).
        marking: thresholds per port rate: a function ``rate Mbit/s -> MarkingParams``.
        switch_ports: the switch port kind (:data:`emulator.variants.SWITCH_PORTS`, the kind
            :func:`emulator.ports.resolve_port_type` chose; see :mod:`emulator.ports`).
        ina_switches: switches that get an INA aggregator port (:meth:`EmulatedNetwork.ina_port`),
            to which the controller steers INA packets (:func:`controller.rules.ina_steering`).
        cluster: the servers the network is spread over (:mod:`emulator.cluster`), or None for
            this machine alone.
        mltcp: MLTCP's ``(slope, intercept, idle gap in wall seconds)``, with which the run registers an
            MLTCP ``congestion_control`` (:mod:`emulator.mltcp`); other congestion controls ignore it.
    """

    scale: float = 1.0
    dilation: float = 1.0
    mtu: int = 1500
    routing: str = "ecmp"
    queue_packets: int = 100
    host_queue_packets: int = 1000
    congestion_control: CongestionControl = CONGESTION_CONTROLS["cubic"]
    stats_interval_s: float = 0.5
    datapath: str = "auto"
    ecn: EcnMarker = ECN_MARKERS["none"]
    marking: typing.Callable[[float], MarkingParams] | None = None
    switch_ports: SwitchPorts = SWITCH_PORTS["system"]
    ina_switches: tuple[str, ...] = ()
    cluster: ClusterOptions | None = None
    mltcp: tuple[float, float, float] | None = None


VSWITCHD_PID_FILES = ("/run/openvswitch/ovs-vswitchd.pid", "/var/run/openvswitch/ovs-vswitchd.pid")


def vswitchd_pid() -> int | None:
    """PID of the running Open vSwitch daemon, from its pid file (None when not found)."""
    for path in VSWITCHD_PID_FILES:
        try:
            with open(path) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if pid_alive(pid):
            return pid
    return None


def _controller_class():
    """Mininet's RemoteController without its start-up probe, which runs telnet against the port
    and decodes the reply (an OpenFlow HELLO, binary) as UTF-8: a random crash at network start.
    :meth:`emulator.controller_proc.ControllerProcess.start` has already seen the port listen."""
    from mininet.node import RemoteController

    class Controller(RemoteController):
        def checkListening(self):
            return None

    return Controller


def _shell_pid(node) -> int:
    """The local process that holds a Mininet node's shell: the shell itself, or for a node on
    another server the ``ssh`` client whose end takes the shell with it."""
    return node.shell.pid if getattr(node, "isRemote", False) else node.pid


def script(cmds: list[str]) -> str:
    """Shell lines run in order that stop at the first failure, naming it on stderr."""
    return "\n".join(f"{c} || {{ echo {shlex.quote('`' + c + '` failed')} >&2; exit 1; }}" for c in cmds)


class EmulatedNetwork(StartStop):
    """A Mininet network built from a topology graph, with its controller.

    Use as ``with EmulatedNetwork(g, run_dir, options) as net: ...``. ``net.hosts[name]`` are
    Mininet hosts; :meth:`popen` runs a command in a machine's namespace and records its PID
    so cleanup can stop it.
    """

    def __init__(self, g, run_dir: str, options: NetOptions = NetOptions()):
        self.g = g
        self.run_dir = run_dir
        self.options = options
        self.datapath = resolve_datapath(options.datapath)
        self.rates = link_rates_mbps(g, options.scale, options.dilation)
        self.mn = None
        self.controller: ControllerProcess | None = None
        self.hosts = {}
        self.switch_intfs: dict[tuple[str, str], str] = {}  # (switch, neighbour) -> interface name
        self.host_intf: dict[str, str] = {}
        self._procs: dict[subprocess.Popen, Change] = {}
        self.record = RunJournal(f"emulated network of {run_dir}")
        self.turn = EmulatorLock(f"emulated network of {run_dir}")
        self.undo_failures: list[str] = []
        self._vswitchd_pid: int | None = None
        self.marker: BpfMarker | None = None
        self.ina_ports = self._plan_ina_ports(options.ina_switches)
        if options.ecn.measures and not options.marking:
            raise EmulationError(f"ECN method {options.ecn.name!r} needs marking parameters")
        self.servers = MultiServer(g, options.cluster, self.record) if options.cluster else ThisMachine(g)
        self.servers.refuse(options.switch_ports.name, options.ecn.measures, bool(options.ina_switches))
        self.server_of = self.servers.placement
        os.makedirs(run_dir, exist_ok=True)
        self.topology_path = os.path.join(run_dir, "topology.json")

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Write topology.json, start the controller, build and configure the network.

        Every change to the machine is recorded (:class:`emulator.journal.RunJournal`) before it
        is made, so :meth:`stop`, or ``run_testbed.py clean`` after a crash, undoes exactly it.

        The machine's emulator lock (:class:`emulator.journal.EmulatorLock`) is held from here to the end
        of :meth:`stop`: node names are global, so no other network can be built meanwhile.

        Raises:
            EmulationError: when another run is active (and the wait for it, ``TESTBED_EMULATOR_WAIT_S``,
                ran out), a dead run left changes behind, or a bridge or interface this network needs
                already exists (it is not ours to remove).
        """
        from mininet.log import setLogLevel
        from mininet.net import Mininet

        setLogLevel("error")
        self.turn.acquire()
        require_no_leftovers()
        CONGESTION_INSTALLERS[self.options.congestion_control.installer].install(self)
        self.servers.precheck(self.options.congestion_control.name, self.run_dir)
        self._require_names_free()
        self._vswitchd_pid = vswitchd_pid()
        write_topology_json(self.g, self.topology_path)
        self._allow_congestion_control()
        self.controller = ControllerProcess(self.run_dir, self.topology_path, self.options.routing,
                                            self.options.stats_interval_s, self.ina_ports)
        self.controller.start(on_spawn=lambda pid: self.record.add(process_change(pid, "controller")))
        self.servers.start(self.controller.port)
        classes, switch_cls = self.servers.mininet_classes()
        self.mn = Mininet(topo=None, build=False, autoSetMacs=False, autoStaticArp=False,
                          controller=None, waitConnected=False, **classes)
        c0 = self.mn.addController("c0", controller=_controller_class(), ip="127.0.0.1", port=self.controller.port)
        self.record.add(process_change(c0.pid, "controller node shell"))
        for m in machines(self.g):
            d = self.g.nodes[m]
            self.hosts[m] = self.mn.addHost(m, ip=f"{d['ip']}/8", mac=d["mac"], **self._node_params(m))
            self.record.add(process_change(_shell_pid(self.hosts[m]), f"machine {m} shell"))
        for s in switches(self.g):
            d = self.g.nodes[s]
            self.record.add(Change("bridge", s, what="switch", via=self.via(s)))
            sw = self.mn.addSwitch(s, cls=switch_cls, dpid=f"{d['dpid']:016x}", datapath=self.datapath,
                                   failMode="secure", protocols="OpenFlow13", **self._node_params(s))
            self.record.add(process_change(_shell_pid(sw), f"switch {s} shell"))
        for u, v, d in sorted(self.g.edges(data=True)):
            pu, pv = d["ports"][u], d["ports"][v]
            for node, other, port in ((u, v, pu), (v, u, pv)):
                name = f"{node}-eth{port}"
                self.record.add(Change("link", name, what=f"{node} port to {other}", via=self.via(node)))
                if self.g.nodes[node]["role"] == "switch":
                    self.switch_intfs[(node, other)] = name
                else:
                    self.host_intf[node] = name
            self.mn.addLink(u, v, port1=pu, port2=pv)
        self.mn.build()
        self._configure_hosts()
        self.mn.start()
        # After the switches start: Open vSwitch replaces the root qdisc of a port it adds
        # (noqueue), so shaping configured earlier would silently vanish.
        self._configure_interfaces()
        self._add_ina_ports()
        self.options.switch_ports.attach(self)
        self._check_shaping()
        self.marker = self.options.ecn.start(self)
        if self.options.mtu != 1500:
            # The userspace datapath keeps its own MTU per port; ask for the interface's.
            for intf in self.switch_intfs.values():
                port = self.options.switch_ports.ovs_port(intf)
                run(["ovs-vsctl", "set", "Interface", port, f"mtu_request={self.options.mtu}"])
            for s, port in self.ina_ports.items():  # system ports on either fabric
                run(["ovs-vsctl", "set", "Interface", f"{s}-eth{port}", f"mtu_request={self.options.mtu}"])
        self.controller.wait_ready()

    def _node_params(self, node: str) -> dict:
        """Mininet's parameters of a node for where it runs (none on this machine alone)."""
        return self.servers.node_params(node)

    def via(self, node: str) -> tuple[str, ...]:
        """The command prefix that reaches ``node``'s server (empty on this machine)."""
        return self.servers.via(self.server_of[node])

    def _on(self, server: str, argv: list[str], timeout_s: float = 30.0) -> subprocess.CompletedProcess:
        """Run a short command in the root namespace of ``server``; EmulationError if it fails."""
        return self.servers.run(server, argv, timeout_s=timeout_s)

    def _servers(self, nodes) -> dict[str, list[str]]:
        """``nodes`` grouped by their server, this machine first."""
        out: dict[str, list[str]] = {}
        for n in sorted(nodes, key=lambda n: self.server_of[n] != LOCAL):
            out.setdefault(self.server_of[n], []).append(n)
        return out

    def _require_names_free(self) -> None:
        """Refuse to touch an OVS bridge or interface this network would create but did not."""
        for server, group in self._servers(switches(self.g)).items():
            where = "" if server == LOCAL else f" on {server}"
            bridges = set(self._on(server, ["ovs-vsctl", "--timeout=10", "list-br"]).stdout.split())
            taken = sorted(bridges & set(switches(self.g)))
            if taken:
                raise EmulationError(f"Open vSwitch bridge(s) {', '.join(taken[:5])} already exist{where} and this "
                                     f"run did not create them; remove or rename them (`ovs-vsctl del-br NAME`) "
                                     f"to run here")
            mine = set(group)
            wanted = {f"{n}-eth{d['ports'][n]}" for u, v, d in self.g.edges(data=True) for n in (u, v)
                      if self.g.nodes[n]["role"] == "switch" and n in mine}
            wanted |= {dev for name in list(wanted) for dev in self.options.switch_ports.devices(name)}
            wanted |= {f"{s}-eth{p}" for s, p in self.ina_ports.items()}  # system ports, whatever the others
            wanted |= {self.ina_peer(s) for s in self.ina_ports}
            present = (os.listdir("/sys/class/net") if server == LOCAL
                       else self._on(server, ["ls", "/sys/class/net"]).stdout.split())
            taken = sorted(wanted & set(present))
            if taken:
                raise EmulationError(f"network interface(s) {', '.join(taken[:5])} already exist{where} and this "
                                     f"run did not create them; remove them to run here")

    def stop(self) -> None:
        """Undo everything this network changed, newest first (:meth:`emulator.journal.RunJournal.unwind`).

        Idempotent; never raises. Further SIGINT/SIGTERM meanwhile are counted, not obeyed.
        What could not be undone stays recorded for ``run_testbed.py clean`` and is listed in
        :attr:`undo_failures` and on stderr.
        """
        prog_id = None
        if self.marker is not None:
            prog_id = self.marker.prog_id
            self.marker.close()
            self.marker = None
        # Mininet's own stop is not used: it would undo what it knows of, not what was recorded,
        # and its commands die with a second Ctrl-C. The node shells, bridges and interfaces
        # are all in the record.
        self.mn = None
        self._procs.clear()
        self.undo_failures = self.record.unwind()
        if prog_id is not None:
            # Its pins and ports are gone; the kernel frees it after an RCU grace period.
            wait_unloaded(prog_id)
        if self.undo_failures:
            print(f"warning: {len(self.undo_failures)} change(s) of this run could not be undone (first: "
                  f"{self.undo_failures[0]}); they are recorded: run `sudo python run_testbed.py clean`",
                  file=sys.stderr, flush=True)
        self.turn.release()

    # -- INA aggregator ports ----------------------------------------------------------------

    def _plan_ina_ports(self, ina_switches) -> dict[str, int]:
        """Switch -> OpenFlow port of its aggregator: the one after its links' ports."""
        out = {}
        for s in ina_switches:
            if s not in self.g or self.g.nodes[s].get("role") != "switch":
                raise EmulationError(f"INA switch {s!r} is not a switch of the topology")
            out[s] = max(d["ports"][s] for _, _, d in self.g.edges(s, data=True)) + 1
        return out

    def ina_peer(self, switch: str) -> str:
        """The interface an aggregator engine serves for ``switch`` (the veth peer of its port)."""
        return f"{switch}-ia{self.ina_ports[switch]}"

    def _add_ina_ports(self) -> None:
        """Add each INA switch's aggregator port: a veth into the bridge at its planned port number."""
        off = [a for o in OFFLOADS for a in (o, "off")]
        for s, port in self.ina_ports.items():
            intf, peer = f"{s}-eth{port}", self.ina_peer(s)
            self.record.add(Change("link", intf, what=f"INA aggregator port of {s}"))
            run(["ip", "link", "add", intf, "mtu", str(self.options.mtu), "type", "veth", "peer", "name", peer,
                 "mtu", str(self.options.mtu)])
            for dev in (intf, peer):
                run(["sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1"])
                run(["ethtool", "-K", dev, *off])
                run(["ip", "link", "set", dev, "up"])
            run(["ovs-vsctl", "--timeout=30", "add-port", s, intf, "--", "set", "Interface", intf,
                 f"ofport_request={port}"])

    def bridge_ports(self) -> dict[str, dict[str, int]]:
        """Bridge -> {switch port interface -> OpenFlow port number}."""
        out: dict[str, dict[str, int]] = {}
        for (s, other), intf in self.switch_intfs.items():
            out.setdefault(s, {})[intf] = self.g.edges[s, other]["ports"][s]
        return out

    # -- configuration ---------------------------------------------------------------------

    def _allow_congestion_control(self) -> None:
        """Let the hosts pick the configured congestion control (every server's root namespace)."""
        key = "net.ipv4.tcp_allowed_congestion_control"
        cc = self.options.congestion_control.name
        for server in self._servers(self.g.nodes):
            allowed = self._on(server, ["sysctl", "-n", key]).stdout.split()
            available = self._on(server, ["sysctl", "-n", "net.ipv4.tcp_available_congestion_control"]).stdout.split()
            if cc not in available:
                raise EmulationError(f"congestion control {cc!r} is not available"
                                     f"{'' if server == LOCAL else ' on ' + server}; available: {', '.join(available)}")
            if cc not in allowed:
                via = self.servers.via(server)
                self.record.add(Change("sysctl", key, original=" ".join(allowed), what=f"allow {cc}", via=via))
                self._on(server, ["sysctl", "-w", f"{key}={' '.join(allowed + [cc])}"])

    def port_rate(self, node: str, other: str) -> float:
        """Emulated rate of the link between ``node`` and ``other``, Mbit/s."""
        return self.rates.get((node, other)) or self.rates[(other, node)]

    def _shape_cmds(self, intf: str, rate_mbps: float, switch_port: bool = False) -> list[str]:
        # TBF rather than HTB: one class needs no hierarchy, and HTB halves what the userspace
        # datapath can forward (measured: one flow across five switches at 1000 Mbit/s, ~100
        # Mbit/s with HTB on every port, ~195 with TBF, ~200 unshaped).
        frame = shaping.frame_bytes(self.options.mtu)
        burst = shaping.burst_bytes(rate_mbps, self.options.mtu)
        queue = self.options.queue_packets if switch_port else self.options.host_queue_packets
        leaf = f"pfifo limit {queue}"
        if switch_port:  # the marker may be the FIFO itself (RED)
            params = self.options.marking(rate_mbps) if self.options.ecn.measures else None
            leaf = self.options.ecn.fifo(params, rate_mbps, self.options.mtu, queue)
        return [
            f"tc qdisc replace dev {intf} root handle 5: tbf rate {rate_mbps:.6f}mbit burst {burst} "
            f"limit {queue * frame}",
            f"tc qdisc replace dev {intf} parent 5:1 handle 10: {leaf}",
        ]

    def _configure_interfaces(self) -> None:
        off = " ".join(f"{o} off" for o in OFFLOADS)
        root_cmds: dict[str, list[str]] = {}
        for (s, other), intf in self.switch_intfs.items():
            cmds = root_cmds.setdefault(self.server_of[s], [])
            cmds.append(f"ethtool -K {intf} {off}")
            cmds.append(f"ip link set {intf} mtu {self.options.mtu}")
            cmds += self._shape_cmds(intf, self.port_rate(s, other), switch_port=True)
        for server, cmds in root_cmds.items():
            if server == LOCAL:
                for cmd in cmds:
                    cp = subprocess.run(shlex.split(cmd), capture_output=True, text=True, timeout=30)
                    if cp.returncode != 0:
                        raise EmulationError(f"`{cmd}` failed: {cp.stderr.strip()}")
            else:
                self._on(server, ["sh", "-c", script(cmds)], timeout_s=120)
        for m, intf in self.host_intf.items():
            (nbr,) = self.g.neighbors(m)
            self.host_script(m, [f"ethtool -K {intf} {off}", f"ip link set {intf} mtu {self.options.mtu}",
                                 *self._shape_cmds(intf, self.port_rate(m, nbr))])

    def _check_shaping(self) -> None:
        """Raise EmulationError unless every switch port has its shaper (catches anything that resets qdiscs)."""
        for server, group in self._servers(switches(self.g)).items():
            cp = subprocess.run(self._wrap(server, ["tc", "-j", "qdisc", "show"]), capture_output=True, text=True,
                                timeout=30)
            shaped = {q.get("dev") for q in json.loads(cp.stdout or "[]") if q.get("kind") == "tbf" and q.get("root")}
            mine = set(group)
            missing = sorted({i for (s, _), i in self.switch_intfs.items() if s in mine} - shaped)
            if cp.returncode != 0 or missing:
                raise EmulationError(f"link shaping is missing on switch ports {', '.join(missing[:5]) or '?'}"
                                     f"{' ...' if len(missing) > 5 else ''}"
                                     f"{'' if server == LOCAL else ' on ' + server}: {cp.stderr.strip()}")

    def _wrap(self, server: str, argv: list[str]) -> list[str]:
        return self.servers.wrap(server, argv)

    def _configure_hosts(self) -> None:
        cc = self.options.congestion_control.name
        ecn = ["sysctl -w net.ipv4.tcp_ecn=1"] if self.options.ecn.measures else []
        for m in self.hosts:
            intf = self.host_intf[m]
            # tcp_no_metrics_save: a connection starts from nothing its predecessors to the same
            # host learnt (ssthresh, RTT), so runs sharing a network do not inherit each other's.
            # Static ARP: every host knows every other host's MAC.
            # Outgoing connections take local ports below the range the testbed hands out for
            # listeners (free_tcp_port: this machine's ephemeral range), or a job's agent could find
            # its listening port taken by another job's connection on the same machine.
            self.host_script(m, [*ecn, f"sysctl -w net.ipv4.ip_local_port_range='{HOST_PORT_RANGE}'",
                                 "sysctl -w net.ipv4.tcp_slow_start_after_idle=0",
                                 "sysctl -w net.ipv4.tcp_no_metrics_save=1",
                                 f"sysctl -w net.ipv4.tcp_congestion_control={cc}",
                                 "sysctl -w net.ipv6.conf.all.disable_ipv6=1",
                                 "sysctl -w net.ipv6.conf.default.disable_ipv6=1",
                                 *(f"ip neigh replace {d['ip']} lladdr {d['mac']} dev {intf} nud permanent"
                                   for other, d in ((o, self.g.nodes[o]) for o in self.hosts) if other != m)])

    # -- running things --------------------------------------------------------------------

    def host_exec(self, machine: str, cmd: str, timeout_s: float = 30.0) -> str:
        """Run a short command in a machine's namespace; raise EmulationError if it fails."""
        host = self.hosts[machine]
        argv = self._wrap(self.server_of[machine], ["mnexec", "-a", str(host.pid)] + shlex.split(cmd))
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        if cp.returncode != 0:
            raise EmulationError(f"{machine}: `{cmd}` failed ({cp.returncode}): {cp.stderr.strip()}")
        return cp.stdout

    def host_script(self, machine: str, cmds: list[str], timeout_s: float = 60.0) -> None:
        """Run short commands in a machine's namespace in one shell, in order; raise EmulationError
        naming the first that fails."""
        self.host_exec(machine, shlex.join(["sh", "-c", script(cmds)]), timeout_s=timeout_s)

    def machine_argv(self, machine: str, argv: list[str], env: dict | None = None,
                     cwd: str | None = None) -> list[str]:
        """The local command that runs ``argv`` in a machine's namespace. On another server of a
        cluster it runs under :mod:`emulator.remote_run` (ended with its SSH session), with
        ``env`` and ``cwd`` given there (they do not travel with ``ssh``)."""
        inside = ["mnexec", "-a", str(self.hosts[machine].pid)]
        server = self.server_of[machine]
        if server == LOCAL:
            return inside + list(argv)
        env_args = ["env", "-i", *(f"{k}={v}" for k, v in sorted((env or {}).items()))] if env is not None else []
        return self.servers.wrap(server, [*inside, *env_args, sys.executable, REMOTE_RUN, "--cwd",
                                          cwd or os.getcwd(), "--", *argv])

    def popen(self, machine: str, argv: list[str], env: dict | None = None, log_path: str | None = None,
              cwd: str | None = None) -> subprocess.Popen:
        """Start a long-running command in a machine's namespace (own session); record its PID.

        On another server of a cluster the local process is the ``ssh`` client; its standard input
        stays open while it runs, and closing it (the client ending) ends the command there."""
        remote = self.server_of[machine] != LOCAL
        out = open(log_path, "ab") if log_path else subprocess.DEVNULL
        try:
            p = subprocess.Popen(self.machine_argv(machine, argv, env, cwd), stdout=out,
                                 stdin=subprocess.PIPE if remote else None,
                                 stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
        finally:
            if log_path:
                out.close()
        what = " ".join(os.path.basename(a) for a in argv[:3])
        self._procs[p] = self.record.add(process_change(p.pid, f"{what} on {machine}"))
        return p

    def track(self, proc: subprocess.Popen, change: Change) -> None:
        """Tie a process started elsewhere (a worker container's client) to the change recorded
        for it, so :meth:`forget` drops that change once the process has ended."""
        self._procs[proc] = change

    def forget(self, proc: subprocess.Popen) -> None:
        """Drop a finished process from the cleanup list (and the record)."""
        if proc in self._procs and proc.poll() is not None:
            self.record.discard(self._procs.pop(proc))

    def tcp_check(self, sources: list[str], targets: list[str], port: int = 5999,
                  timeout_s: float = 60.0) -> dict[str, list[str]]:
        """TCP echo from every source machine to every target machine (not itself).

        Returns:
            Failure lines per source machine; empty when every connection worked.
        """
        import time

        from common.paths import PROJECT_ROOT

        env = {"PYTHONPATH": PROJECT_ROOT, "PATH": os.environ.get("PATH", "")}
        servers = [self.popen(t, [sys.executable, "-m", "emulator.tcpcheck", "serve", str(port)], env=env,
                              cwd=PROJECT_ROOT) for t in targets]
        try:
            # Probe once every server listens: one on another server of a cluster starts over SSH.
            deadline = time.monotonic() + timeout_s
            for t, srv in zip(targets, servers, strict=True):
                while not self.host_exec(t, f"ss -Hltn sport = :{port}").strip():
                    if srv.poll() is not None:
                        return {t: [f"fail the check's server on {t} (port {port}) exited ({srv.returncode})"]}
                    if time.monotonic() > deadline:
                        return {t: [f"fail the check's server on {t} (port {port}) not listening in {timeout_s:g} s"]}
                    time.sleep(0.05)
            probes = {}
            for src in sources:
                ips = [self.g.nodes[t]["ip"] for t in targets if t != src]
                # Standard input open while it runs: on another server, its end ends the probe.
                probes[src] = subprocess.Popen(
                    self.machine_argv(src, [sys.executable, "-m", "emulator.tcpcheck", "probe", str(port), *ips],
                                      env, PROJECT_ROOT), stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=PROJECT_ROOT)
            failures = {}
            for src, p in probes.items():
                try:
                    p.wait(timeout=timeout_s)  # its few lines fit the pipe
                    out = p.stdout.read()
                except subprocess.TimeoutExpired:
                    stop_process(p)
                    out = "fail timeout"
                finally:
                    p.stdin.close()
                    p.stdout.close()
                bad = [line for line in out.splitlines() if not line.startswith("ok")]
                if bad or p.returncode != 0:
                    failures[src] = bad or [f"exit {p.returncode}"]
            return failures
        finally:
            for srv in servers:
                stop_process(srv)
                self.forget(srv)

    def check_alive(self) -> None:
        """Raise :class:`EmulationError` naming the first process the network depends on that died:
        the controller (routes and port statistics) or the Open vSwitch daemon (every switch)."""
        if self.controller is not None:
            self.controller.check_alive()
        self.servers.check_alive()
        if self._vswitchd_pid is not None and not pid_alive(self._vswitchd_pid):
            raise EmulationError(f"the Open vSwitch daemon (ovs-vswitchd, pid {self._vswitchd_pid}) died: every "
                                 f"switch of the emulated network stopped")

    # -- measurement -----------------------------------------------------------------------

    def qdisc_stats(self) -> dict:
        """Queue counters of every switch port (:func:`emulator.queues.parse_tc_qdiscs`), read on
        every server of the network."""
        from emulator.queues import local_qdiscs, parse_tc_qdiscs

        out = local_qdiscs()
        for server in self._servers(switches(self.g)):
            if server != LOCAL:
                cp = subprocess.run(self._wrap(server, ["tc", "-s", "-j", "qdisc", "show"]), capture_output=True,
                                    text=True, timeout=30, stdin=subprocess.DEVNULL)
                if cp.returncode == 0:
                    out.update(parse_tc_qdiscs(cp.stdout))
        return out

    def port_links(self) -> dict[str, tuple[str, str]]:
        """Switch interface -> the directed link it transmits on (switch, neighbour)."""
        return {intf: key for key, intf in self.switch_intfs.items()}

    def host_tcp_settings(self) -> dict[str, dict[str, str]]:
        """What every host's TCP actually uses: ``tcp_ecn`` and ``congestion_control``, read back."""
        out = {}
        for m in sorted(self.hosts, key=lambda h: self.g.nodes[h]["index"]):
            ecn, cc = self.host_exec(m, "sysctl -n net.ipv4.tcp_ecn net.ipv4.tcp_congestion_control").split()
            out[m] = {"tcp_ecn": ecn, "congestion_control": cc}
        return out

    def switch_counters(self) -> dict[tuple[str, str], tuple[int, int]]:
        """Kernel byte counters ``(tx_bytes, rx_bytes)`` of every switch port, by (switch, neighbour)."""
        out = {}
        for key, intf in self.switch_intfs.items():
            if self.server_of[key[0]] != LOCAL:
                continue
            base = f"/sys/class/net/{intf}/statistics"
            with open(f"{base}/tx_bytes") as f1, open(f"{base}/rx_bytes") as f2:
                out[key] = (int(f1.read()), int(f2.read()))
        for server, group in self._servers(switches(self.g)).items():
            if server == LOCAL:
                continue
            mine = set(group)
            keys = [key for key in self.switch_intfs if key[0] in mine]
            files = [f"/sys/class/net/{self.switch_intfs[k]}/statistics/{c}" for k in keys for c in ("tx_bytes",
                                                                                                      "rx_bytes")]
            values = [int(v) for v in self._on(server, ["cat", *files]).stdout.split()]
            for i, key in enumerate(keys):
                out[key] = (values[2 * i], values[2 * i + 1])
        return out

    def link_bytes(self, before, after) -> dict[tuple[str, str], int]:
        """Bytes carried on every directed link between two :meth:`switch_counters` snapshots.

        Direction ``u -> v`` is read on the switch side: the switch's transmit counter when
        ``u`` is a switch, else the receive counter of the switch port facing ``u``.
        """
        out = {}
        for u, v in self.g.edges():
            for a, b in ((u, v), (v, u)):
                if self.g.nodes[a]["role"] == "switch":
                    out[(a, b)] = after[(a, b)][0] - before[(a, b)][0]
                else:
                    out[(a, b)] = after[(b, a)][1] - before[(b, a)][1]
        return out
