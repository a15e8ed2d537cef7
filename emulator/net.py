"""Realise a topology graph as a Mininet network: OVS switches, shaped links, configured hosts.

:class:`EmulatedNetwork` is a context manager. On entry it writes ``topology.json``, starts
the controller, builds the network and waits until every switch is programmed; on exit
(success, exception or Ctrl-C) it undoes every change the run recorded, newest first. It builds
the nodes and runs commands in them; what it changes on the servers beside its nodes, and its
turn at the emulator, are :class:`emulator.host_changes.HostChanges`; the links' shapers and
queues :class:`emulator.link_shaping.LinkShaping`; the ports' counters
:class:`emulator.counters.PortCounters`.

The choices the machines force (datapath, offloads, shaping, the hosts' TCP, ECN, the INA
aggregators' ports) and cluster mode: ``docs/architecture.md`` (The emulated network).
"""

from __future__ import annotations

import dataclasses
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
from emulator.counters import PortCounters
from emulator.ecn import BpfMarker, wait_unloaded
from emulator.host_changes import HostChanges, ina_peer, plan_ina_ports
from emulator.journal import Change, RunJournal, process_change
from emulator.link_shaping import LinkShaping, script
from emulator.procs import pid_alive
from emulator.variants import ECN_MARKERS, SWITCH_PORTS, EcnMarker, SwitchPorts
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
            :func:`emulator.variants.resolve_ecn` chose).
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


class EmulatedNetwork(StartStop):
    """A Mininet network built from a topology graph, with its controller.

    Use as ``with EmulatedNetwork(g, run_dir, options) as net: ...``. ``net.hosts[name]`` are
    Mininet hosts; :meth:`popen` runs a command in a machine's namespace and records its PID
    so cleanup can stop it. Beside the build, three parts: what the network changes on its servers
    and its turn at the emulator (:attr:`changes`, :class:`emulator.host_changes.HostChanges`), the
    links' shapers and queues (:attr:`shaping`, :class:`emulator.link_shaping.LinkShaping`), and the
    switch ports' counters (:attr:`counters`, :class:`emulator.counters.PortCounters`).
    """

    def __init__(self, g, run_dir: str, options: NetOptions = NetOptions()):
        self.g = g
        self.run_dir = run_dir
        self.options = options
        self.datapath = resolve_datapath(options.datapath)
        self.mn = None
        self.controller: ControllerProcess | None = None
        self.hosts = {}
        self.switch_intfs: dict[tuple[str, str], str] = {}  # (switch, neighbour) -> interface name
        self.host_intf: dict[str, str] = {}
        self._procs: dict[subprocess.Popen, Change] = {}
        self.undo_failures: list[str] = []
        self._vswitchd_pid: int | None = None
        self.marker: BpfMarker | None = None
        self.rates = link_rates_mbps(g, options.scale, options.dilation)
        self.ina_ports = plan_ina_ports(g, options.ina_switches)
        if options.ecn.measures and not options.marking:
            raise EmulationError(f"ECN method {options.ecn.name!r} needs marking parameters")
        self.record = RunJournal(f"emulated network of {run_dir}")
        self.servers = MultiServer(g, options.cluster, self.record) if options.cluster else ThisMachine(g)
        self.servers.refuse(options.switch_ports.one_machine_only, options.ecn.measures, bool(options.ina_switches))
        self.server_of = self.servers.placement
        self.changes = HostChanges(g, options, self.servers, self.record, self.ina_ports)
        self.shaping = LinkShaping(g, options, self.servers, self.rates, self.switch_intfs, self.host_intf,
                                   self.ina_ports, self.host_script)
        self.counters = PortCounters(g, self.switch_intfs, self.servers)
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
        self.changes.begin()
        self.changes.install_congestion_control()
        self.servers.precheck(self.options.congestion_control.name, self.run_dir)
        self.changes.require_names_free()
        self._vswitchd_pid = vswitchd_pid()
        write_topology_json(self.g, self.topology_path)
        self.changes.allow_congestion_control()
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
        # Recorded together, so they are undone together: one Open vSwitch transaction per server.
        self.record.add_all(Change("bridge", s, what="switch", via=self.via(s)) for s in switches(self.g))
        for s in switches(self.g):
            d = self.g.nodes[s]
            sw = self.mn.addSwitch(s, cls=switch_cls, dpid=f"{d['dpid']:016x}", datapath=self.datapath,
                                   failMode="secure", protocols="OpenFlow13", **self._node_params(s))
            self.record.add(process_change(_shell_pid(sw), f"switch {s} shell"))
        edges = sorted(self.g.edges(data=True))
        links = []
        for u, v, d in edges:
            for node, other in ((u, v), (v, u)):
                name = f"{node}-eth{d['ports'][node]}"
                links.append(Change("link", name, what=f"{node} port to {other}", via=self.via(node)))
                if self.g.nodes[node]["role"] == "switch":
                    self.switch_intfs[(node, other)] = name
                else:
                    self.host_intf[node] = name
        self.record.add_all(links)
        for u, v, d in edges:
            self.mn.addLink(u, v, port1=d["ports"][u], port2=d["ports"][v])
        self.mn.build()
        self._configure_hosts()
        self.mn.start()
        # After the switches start: Open vSwitch replaces the root qdisc of a port it adds
        # (noqueue), so shaping configured earlier would silently vanish.
        self.shaping.configure_interfaces()
        self.changes.add_ina_ports()
        self.options.switch_ports.attach(self)
        self.shaping.check()
        self.marker = self.options.ecn.start(self)
        self.shaping.request_mtu()
        self.controller.wait_ready()

    def _node_params(self, node: str) -> dict:
        """Mininet's parameters of a node for where it runs (none on this machine alone)."""
        return self.servers.node_params(node)

    def via(self, node: str) -> tuple[str, ...]:
        """The command prefix that reaches ``node``'s server (empty on this machine)."""
        return self.servers.via(self.server_of[node])

    def stop(self) -> None:
        """Undo everything this network changed, newest first (:meth:`emulator.host_changes.HostChanges.undo`).

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

        def marker_freed() -> None:
            if prog_id is not None:  # its pins and ports are gone; the kernel frees it after an RCU grace period
                wait_unloaded(prog_id)

        self.undo_failures = self.changes.undo(settle=marker_freed)

    def ina_peer(self, switch: str) -> str:
        """The interface an aggregator engine serves for ``switch`` (the veth peer of its port)."""
        return ina_peer(switch, self.ina_ports[switch])

    def bridge_ports(self) -> dict[str, dict[str, int]]:
        """Bridge -> {switch port interface -> OpenFlow port number}."""
        out: dict[str, dict[str, int]] = {}
        for (s, other), intf in self.switch_intfs.items():
            out.setdefault(s, {})[intf] = self.g.edges[s, other]["ports"][s]
        return out

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
        argv = self.servers.wrap(self.server_of[machine], ["mnexec", "-a", str(host.pid)] + shlex.split(cmd))
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
        """TCP echo from every source machine to every target machine (not itself): failure lines per
        source machine, empty when every connection worked (:func:`emulator.tcpcheck.check`)."""
        from emulator.tcpcheck import check

        return check(self, sources, targets, port, timeout_s)

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

    def host_tcp_settings(self) -> dict[str, dict[str, str]]:
        """What every host's TCP actually uses: ``tcp_ecn`` and ``congestion_control``, read back."""
        out = {}
        for m in sorted(self.hosts, key=lambda h: self.g.nodes[h]["index"]):
            ecn, cc = self.host_exec(m, "sysctl -n net.ipv4.tcp_ecn net.ipv4.tcp_congestion_control").split()
            out[m] = {"tcp_ecn": ecn, "congestion_control": cc}
        return out
