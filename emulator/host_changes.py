"""What an emulated network changes on the servers it runs on, outside its own nodes, and its turn.

:class:`HostChanges` holds the network's run record (:class:`emulator.journal.RunJournal`) and the
machine's emulator lock (:class:`emulator.journal.EmulatorLock`), checks before the build that no
other run's changes and no bridge or interface of the same name are there, makes the changes a
network needs beside its Mininet nodes (the congestion control allowed, MLTCP registered, the INA
switches' aggregator ports), each recorded before it is made, and undoes them all at the end.
``docs/faults.md`` describes the record.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from common.errors import EmulationError
from emulator.cluster import LOCAL, by_server
from emulator.journal import Change, EmulatorLock, RunJournal, require_no_leftovers
from emulator.procs import run
from emulator.variants import CONGESTION_INSTALLERS, OFFLOADS
from topo import switches


def plan_ina_ports(g, ina_switches) -> dict[str, int]:
    """Switch -> OpenFlow port of its aggregator: the one after its links' ports.

    Raises:
        EmulationError: a name that is not a switch of ``g``.
    """
    out = {}
    for s in ina_switches:
        if s not in g or g.nodes[s].get("role") != "switch":
            raise EmulationError(f"INA switch {s!r} is not a switch of the topology")
        out[s] = max(d["ports"][s] for _, _, d in g.edges(s, data=True)) + 1
    return out


def ina_peer(switch: str, port: int) -> str:
    """The interface an aggregator engine serves for ``switch`` (the veth peer of its port ``port``)."""
    return f"{switch}-ia{port}"


class HostChanges:
    """The changes one emulated network makes to its servers, recorded, and its turn at the emulator.

    Args:
        g: the topology graph.
        options: the network's :class:`emulator.net.NetOptions`.
        servers: where the nodes run (:class:`emulator.cluster.ThisMachine` or
            :class:`emulator.cluster.MultiServer`).
        record: the network's run record (its purpose names the run's directory, as the lock does).
        ina_ports: switch -> its aggregator port (:func:`plan_ina_ports`).
    """

    def __init__(self, g, options, servers, record: RunJournal, ina_ports: dict[str, int]):
        self.g, self.options, self.servers, self.record, self.ina_ports = g, options, servers, record, ina_ports
        self.turn = EmulatorLock(record.purpose)

    def begin(self) -> None:
        """Take the machine's emulator turn and refuse to start over another run's changes.

        Raises:
            EmulationError: another run is active (and the wait, ``TESTBED_EMULATOR_WAIT_S``, ran out),
                or a dead run left changes behind.
        """
        self.turn.acquire()
        require_no_leftovers()

    def require_names_free(self) -> None:
        """Refuse to touch an OVS bridge or interface this network would create but did not.

        Raises:
            EmulationError: naming the bridges or interfaces already there.
        """
        for server, group in by_server(switches(self.g), self.servers.placement).items():
            where = "" if server == LOCAL else f" on {server}"
            bridges = set(self.servers.run(server, ["ovs-vsctl", "--timeout=10", "list-br"]).stdout.split())
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
            wanted |= {ina_peer(s, p) for s, p in self.ina_ports.items()}
            present = (os.listdir("/sys/class/net") if server == LOCAL
                       else self.servers.run(server, ["ls", "/sys/class/net"]).stdout.split())
            taken = sorted(wanted & set(present))
            if taken:
                raise EmulationError(f"network interface(s) {', '.join(taken[:5])} already exist{where} and this "
                                     f"run did not create them; remove them to run here")

    def install_congestion_control(self) -> None:
        """Give the hosts' kernels the configured congestion control, by its installer
        (:data:`emulator.variants.CONGESTION_INSTALLERS`; recorded: the run's end undoes it)."""
        CONGESTION_INSTALLERS[self.options.congestion_control.installer].install(self)

    def allow_congestion_control(self) -> None:
        """Let the hosts pick the configured congestion control (every server's root namespace).

        Raises:
            EmulationError: the kernel of a server lacks it.
        """
        key = "net.ipv4.tcp_allowed_congestion_control"
        cc = self.options.congestion_control.name
        for server in by_server(self.g.nodes, self.servers.placement):
            allowed = self.servers.run(server, ["sysctl", "-n", key]).stdout.split()
            available = self.servers.run(server, ["sysctl", "-n",
                                                  "net.ipv4.tcp_available_congestion_control"]).stdout.split()
            if cc not in available:
                raise EmulationError(f"congestion control {cc!r} is not available"
                                     f"{'' if server == LOCAL else ' on ' + server}; available: {', '.join(available)}")
            if cc not in allowed:
                via = self.servers.via(server)
                self.record.add(Change("sysctl", key, original=" ".join(allowed), what=f"allow {cc}", via=via))
                self.servers.run(server, ["sysctl", "-w", f"{key}={' '.join(allowed + [cc])}"])

    def add_ina_ports(self) -> None:
        """Add each INA switch's aggregator port: a veth into the bridge at its planned port number."""
        off = [a for o in OFFLOADS for a in (o, "off")]
        mtu = str(self.options.mtu)
        for s, port in self.ina_ports.items():
            intf, peer = f"{s}-eth{port}", ina_peer(s, port)
            self.record.add(Change("link", intf, what=f"INA aggregator port of {s}"))
            run(["ip", "link", "add", intf, "mtu", mtu, "type", "veth", "peer", "name", peer, "mtu", mtu])
            for dev in (intf, peer):
                run(["sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1"])
                run(["ethtool", "-K", dev, *off])
                run(["ip", "link", "set", dev, "up"])
            run(["ovs-vsctl", "--timeout=30", "add-port", s, intf, "--", "set", "Interface", intf,
                 f"ofport_request={port}"])

    def undo(self, settle: Callable[[], None] = lambda: None) -> list[str]:
        """Undo every recorded change, newest first (:meth:`emulator.journal.RunJournal.unwind`), call
        ``settle`` (what must be over before another run may start), and end the turn.

        Never raises. What could not be undone stays recorded for ``run_testbed.py clean`` and is
        said on stderr.

        Returns:
            One line per change that could not be undone.
        """
        failures = self.record.unwind()
        settle()
        if failures:
            print(f"warning: {len(failures)} change(s) of this run could not be undone (first: "
                  f"{failures[0]}); they are recorded: run `sudo python3 run_testbed.py clean`",
                  file=sys.stderr, flush=True)
        self.turn.release()
        return failures
