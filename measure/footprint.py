"""How much memory an emulated fabric takes on the machine that runs it, predicted from its size.

The cost grows with the switch ports. An AF_XDP switch port of the userspace datapath holds a
umem of its own in ``ovs-vswitchd``: 4 x (2,048 + 2,048) frames of 4 kB, 64 MiB, zeroed when the
port opens (Open vSwitch ``lib/netdev-afxdp.c``: ``NUM_FRAMES``, ``FRAME_SIZE``, constants of the
build, with one receive queue per port as the testbed opens them), plus its packet metadata; a
system port costs the daemon almost nothing. Every port also has a veth end in the kernel, and
every node a namespace and a shell. The figures per port kind are measured by
``bench/emulator_scale.py``: the fall of the machine's available memory from before the network
was built to with it up, over its switch ports.
"""

from __future__ import annotations

import dataclasses

from common.errors import EmulationError

MIB = 1024 * 1024

PORT_BYTES = {"afxdp": 75 * MIB, "system": 1 * MIB}
"""Memory per switch port by port kind, bytes: the slope of the fall of the machine's available
memory against the switch ports that ``bench/emulator_scale.py`` measured on fat-trees of k = 4
and 6 (AF_XDP 74.8 MiB, of which the daemon's own 73.0 MiB; plain veths 0.3 MiB there, up to 2 MiB
on small leaf-spines: rounded up)."""

BASE_BYTES = 128 * MIB
"""Memory of a network apart from its ports (the same line's intercept, 34-89 MiB, rounded up)."""

RESERVE_BYTES = 1536 * MIB
"""Memory left beside a network for its jobs (the agents, the controller) and the kernel; a k = 6
fat-tree of AF_XDP ports (20.9 GB predicted, 20.3 GB measured) then fits a 24 GB machine, not a
16 GB one."""


@dataclasses.dataclass(frozen=True)
class Footprint:
    """A network's predicted memory beside what the machine has.

    Attributes:
        switch_ports: the fabric's switch ports.
        port_kind: the switch port kind the prediction is for.
        predicted_bytes: the memory predicted for the network.
        available_bytes: the machine's available memory (``MemAvailable``).
    """

    switch_ports: int
    port_kind: str
    predicted_bytes: int
    available_bytes: int

    @property
    def fits(self) -> bool:
        """Whether the prediction leaves :data:`RESERVE_BYTES` of the memory available."""
        return self.predicted_bytes + RESERVE_BYTES <= self.available_bytes

    def text(self) -> str:
        """``about 5.6 GB with 80 afxdp switch ports, of 22.1 GB available``."""
        return (f"about {self.predicted_bytes / 1e9:.1f} GB with {self.switch_ports} {self.port_kind} switch ports, "
                f"of {self.available_bytes / 1e9:.1f} GB available")


def switch_port_count(g) -> int:
    """The fabric's switch ports: one per link end at a switch."""
    return sum(1 for u, v in g.edges() for n in (u, v) if g.nodes[n].get("role") == "switch")


def footprint(g, port_kind: str, available_bytes: int) -> Footprint:
    """The predicted memory of ``g`` emulated with ``port_kind`` switch ports.

    Raises:
        KeyError: a port kind without a measured cost.
    """
    ports = switch_port_count(g)
    return Footprint(ports, port_kind, BASE_BYTES + PORT_BYTES[port_kind] * ports, available_bytes)


def mem_available_bytes(meminfo: str = "/proc/meminfo") -> int:
    """The machine's available memory (``MemAvailable``), bytes.

    Raises:
        OSError: the file cannot be read; KeyError: it has no ``MemAvailable`` line.
    """
    with open(meminfo) as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise KeyError(f"{meminfo}: no MemAvailable line")


def check_memory(g, port_kind: str, available_bytes: int, enforce: bool = True) -> dict:
    """The network's predicted memory for the run record (``capabilities.json``'s ``memory``).

    Raises:
        EmulationError: with ``enforce``, the network is predicted not to fit (one line: its size,
            the estimate, what is available and what to change).
    """
    fp = footprint(g, port_kind, available_bytes)
    if enforce and not fp.fits:
        options = []
        if port_kind != "system":
            options.append(f"switch_ports: system ({footprint(g, 'system', available_bytes).predicted_bytes / 1e9:.1f} "
                           f"GB)")
        options += ["a smaller fabric", "cluster mode (cluster.servers)"]
        raise EmulationError(f"the emulated network would not fit in this machine's memory: {fp.text()} (and "
                             f"{RESERVE_BYTES / 1e9:.1f} GB for the jobs and the kernel); use {', '.join(options)}, "
                             f"or memory_check: false to start it anyway")
    return {"switch_ports": fp.switch_ports, "port_kind": port_kind, "predicted_bytes": fp.predicted_bytes,
            "available_bytes": fp.available_bytes, "fits": fp.fits}
