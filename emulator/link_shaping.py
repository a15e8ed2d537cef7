"""The shapers and queues of an emulated network's links, set on its ports once the switches run.

:class:`LinkShaping` gives every switch port and every machine's interface its token bucket (TBF) at
the link's emulated rate with a bounded FIFO below it (at switch ports, the ECN marker's queue where
one marks), offloads off and the run's MTU, and checks that every switch port kept its shaper.
Mininet's TCLink would silently ignore rates above 1000 Mbit/s, so shaping is done here and any rate
outside [0.1, 1000] Mbit/s (:func:`measure.shaping.link_rates_mbps`, refused before) or any failed ``tc``
command is an error.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable

from common.errors import EmulationError
from emulator.cluster import LOCAL, by_server
from emulator.procs import run
from emulator.variants import OFFLOADS
from measure import shaping
from topo import switches


def script(cmds: list[str]) -> str:
    """Shell lines run in order that stop at the first failure, naming it on stderr."""
    return "\n".join(f"{c} || {{ echo {shlex.quote('`' + c + '` failed')} >&2; exit 1; }}" for c in cmds)


class LinkShaping:
    """The links' rates, shapers and queues of one emulated network.

    Args:
        g: the topology graph.
        options: the network's :class:`emulator.net.NetOptions` (scale, dilation, MTU, queues, ECN marker).
        servers: where the nodes run (:class:`emulator.cluster.ThisMachine` or
            :class:`emulator.cluster.MultiServer`).
        rates: (node, neighbour) -> the link's emulated rate, Mbit/s (:func:`measure.shaping.link_rates_mbps`).
        switch_intfs: (switch, neighbour) -> the switch's interface toward it (filled as the network is built).
        host_intf: machine -> its interface (filled as the network is built).
        ina_ports: switch -> its INA aggregator port.
        host_script: runs shell lines in a machine's namespace (:meth:`emulator.net.EmulatedNetwork.host_script`).
    """

    def __init__(self, g, options, servers, rates: dict[tuple[str, str], float],
                 switch_intfs: dict[tuple[str, str], str], host_intf: dict[str, str], ina_ports: dict[str, int],
                 host_script: Callable[[str, list[str]], None]):
        self.g, self.options, self.servers, self.rates = g, options, servers, rates
        self.switch_intfs, self.host_intf, self.ina_ports = switch_intfs, host_intf, ina_ports
        self.host_script = host_script

    def port_rate(self, node: str, other: str) -> float:
        """Emulated rate of the link between ``node`` and ``other``, Mbit/s."""
        return self.rates.get((node, other)) or self.rates[(other, node)]

    def shape_cmds(self, intf: str, rate_mbps: float, switch_port: bool = False) -> list[str]:
        """The ``tc`` commands that shape ``intf`` to ``rate_mbps`` with its queue below."""
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

    def configure_interfaces(self) -> None:
        """Offloads off, the MTU and the shaper on every switch port (in its server's root namespace)
        and every machine's interface (in its namespace).

        Raises:
            EmulationError: naming the first command that failed.
        """
        off = " ".join(f"{o} off" for o in OFFLOADS)
        root_cmds: dict[str, list[str]] = {}
        for (s, other), intf in self.switch_intfs.items():
            cmds = root_cmds.setdefault(self.servers.placement[s], [])
            cmds.append(f"ethtool -K {intf} {off}")
            cmds.append(f"ip link set {intf} mtu {self.options.mtu}")
            cmds += self.shape_cmds(intf, self.port_rate(s, other), switch_port=True)
        for server, cmds in root_cmds.items():
            if server == LOCAL:
                for cmd in cmds:
                    cp = subprocess.run(shlex.split(cmd), capture_output=True, text=True, timeout=30)
                    if cp.returncode != 0:
                        raise EmulationError(f"`{cmd}` failed: {cp.stderr.strip()}")
            else:
                self.servers.run(server, ["sh", "-c", script(cmds)], timeout_s=120)
        for m, intf in self.host_intf.items():
            (nbr,) = self.g.neighbors(m)
            self.host_script(m, [f"ethtool -K {intf} {off}", f"ip link set {intf} mtu {self.options.mtu}",
                                 *self.shape_cmds(intf, self.port_rate(m, nbr))])

    def request_mtu(self) -> None:
        """Ask Open vSwitch for the interfaces' MTU on every switch port (the userspace datapath keeps
        its own MTU per port); nothing to ask at 1500."""
        if self.options.mtu == 1500:
            return
        for intf in self.switch_intfs.values():
            port = self.options.switch_ports.ovs_port(intf)
            run(["ovs-vsctl", "set", "Interface", port, f"mtu_request={self.options.mtu}"])
        for s, port in self.ina_ports.items():  # system ports on either fabric
            run(["ovs-vsctl", "set", "Interface", f"{s}-eth{port}", f"mtu_request={self.options.mtu}"])

    def check(self) -> None:
        """Raise EmulationError unless every switch port has its shaper (catches anything that resets qdiscs)."""
        for server, group in by_server(switches(self.g), self.servers.placement).items():
            cp = subprocess.run(self.servers.wrap(server, ["tc", "-j", "qdisc", "show"]), capture_output=True,
                                text=True, timeout=30)
            shaped = {q.get("dev") for q in json.loads(cp.stdout or "[]") if q.get("kind") == "tbf" and q.get("root")}
            mine = set(group)
            missing = sorted({i for (s, _), i in self.switch_intfs.items() if s in mine} - shaped)
            if cp.returncode != 0 or missing:
                raise EmulationError(f"link shaping is missing on switch ports {', '.join(missing[:5]) or '?'}"
                                     f"{' ...' if len(missing) > 5 else ''}"
                                     f"{'' if server == LOCAL else ' on ' + server}: {cp.stderr.strip()}")
