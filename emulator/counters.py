"""What an emulated network's switch ports carried and queued, read on every server it runs on.

:class:`PortCounters` reads the kernel's byte counters of the switch ports and their queue
discipline's counters; the network (:class:`emulator.net.EmulatedNetwork`) builds the ports, this
reads them.
"""

from __future__ import annotations

import subprocess

from emulator.cluster import LOCAL, by_server
from emulator.queues import local_qdiscs, parse_tc_qdiscs
from topo import switches


class PortCounters:
    """The counters of a network's switch ports.

    Args:
        g: the topology graph.
        switch_intfs: (switch, neighbour) -> the switch's interface toward it (filled as the network
            is built).
        servers: where the nodes run (:class:`emulator.cluster.ThisMachine` or
            :class:`emulator.cluster.MultiServer`).
    """

    def __init__(self, g, switch_intfs: dict[tuple[str, str], str], servers):
        self.g, self.switch_intfs, self.servers = g, switch_intfs, servers

    def switch_counters(self) -> dict[tuple[str, str], tuple[int, int]]:
        """Kernel byte counters ``(tx_bytes, rx_bytes)`` of every switch port, by (switch, neighbour)."""
        placement = self.servers.placement
        out = {}
        for key, intf in self.switch_intfs.items():
            if placement[key[0]] != LOCAL:
                continue
            base = f"/sys/class/net/{intf}/statistics"
            with open(f"{base}/tx_bytes") as f1, open(f"{base}/rx_bytes") as f2:
                out[key] = (int(f1.read()), int(f2.read()))
        for server, group in by_server(switches(self.g), placement).items():
            if server == LOCAL:
                continue
            mine = set(group)
            keys = [key for key in self.switch_intfs if key[0] in mine]
            files = [f"/sys/class/net/{self.switch_intfs[k]}/statistics/{c}" for k in keys
                     for c in ("tx_bytes", "rx_bytes")]
            values = [int(v) for v in self.servers.run(server, ["cat", *files]).stdout.split()]
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

    def qdisc_stats(self) -> dict:
        """Queue counters of every switch port (:func:`emulator.queues.parse_tc_qdiscs`), read on
        every server of the network."""
        out = local_qdiscs()
        for server in by_server(switches(self.g), self.servers.placement):
            if server != LOCAL:
                cp = subprocess.run(self.servers.wrap(server, ["tc", "-s", "-j", "qdisc", "show"]),
                                    capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
                if cp.returncode == 0:
                    out.update(parse_tc_qdiscs(cp.stdout))
        return out

    def port_links(self) -> dict[str, tuple[str, str]]:
        """Switch interface -> the directed link it transmits on (switch, neighbour)."""
        return {intf: key for key, intf in self.switch_intfs.items()}
