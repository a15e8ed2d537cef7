"""A bench for INA aggregators outside any emulated network: each switch on three veths.

:class:`SwitchRig` creates one private network namespace; for each switch it adds three veth
pairs whose switch ends move into the namespace (bmv2 ports 0: in, 1: towards the PS, 2:
towards the workers) and whose host ends stay here, where raw sockets send INA frames in and read
what comes out. :meth:`SwitchRig.step` sends one UDP payload and returns where it went, exactly:
after the packet it sends a sentinel frame to each output port (the ``plain`` table forwards
them), and since bmv2's ingress runs packets in order and each port's egress queue is FIFO,
whatever the packet produced arrives before the sentinels. No timing decides a drop.

The switches are bmv2 running ``aggregator.p4`` (:class:`ina.p4.switch.Bmv2Aggregator`) or the
software engine's process (:class:`ina.softswitch.SoftAggregator`): the same frames, the same
checks. The rig removes what it created (its switches by PID, then its namespace, which takes the
veths with it), also after a failure. The test vectors (:mod:`ina.vectors`), the fuzz test and
``bench/ina.py`` use it.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import select
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Mapping

from common.errors import TestbedError
from common.lifecycle import StartStop
from ina.aggregator import JobEntry, Role
from ina.p4.build import ENGINES, P4Error, Toolchain
from ina.p4.switch import TO_PS, TO_WORKERS, Bmv2Aggregator, aggregator_stats
from ina.protocol import INA_UDP_PORT, SO_RCVBUFFORCE, VALUES_PER_PACKET, WORKER_PORT_BASE, Flag, data_packet
from ina.softswitch import SoftAggregator, ipv4_checksum

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
SENTINEL_TYPE = 0x88B5  # IEEE local experimental EtherType
HOST_MAC = bytes.fromhex("020000000001")
SWITCH_MAC = bytes.fromhex("020000000002")
SENTINEL_MAC = {1: bytes.fromhex("020000000101"), 2: bytes.fromhex("020000000102")}
OUT_PORTS = {1: "to_ps", 2: "to_workers"}
_IP = struct.Struct(">BBHHHBBH4s4s")
_UDP = struct.Struct(">HHHH")
_WAIT_S = 5.0
_RIGS = itertools.count()
OFFLOADS_OFF = ("rx", "off", "tx", "off", "sg", "off", "tso", "off", "gso", "off", "gro", "off")
"""Off on both ends of every veth: with them on, bmv2 loses about half of a burst of over 32 frames."""


SRC_IP = "10.0.0.1"
"""The IPv4 source of :func:`ina_frame` unless told otherwise."""


def ina_frame(payload: bytes, ecn_ce: bool = False, src_port: int = 40000, dst_port: int = INA_UDP_PORT,
              src_ip: str = SRC_IP) -> bytes:
    """Ethernet / IPv4 ``src_ip`` -> 10.0.0.2 / UDP ``src_port`` -> ``dst_port`` / ``payload`` (any
    length, as a malformed packet's may be), IP ECN = CE when ``ecn_ce``."""
    udp_len = _UDP.size + len(payload)
    ip = bytearray(_IP.pack(0x45, 3 if ecn_ce else 0, 20 + udp_len, 1, 0, 64, 17, 0,
                            ipaddress.IPv4Address(src_ip).packed, bytes([10, 0, 0, 2])))
    ip[10:12] = struct.pack(">H", ipv4_checksum(bytes(ip)))
    return SWITCH_MAC + HOST_MAC + struct.pack(">H", ETH_P_IP) + bytes(ip) + _UDP.pack(
        src_port, dst_port, udp_len, 0) + payload


def ina_payload(frame: bytes) -> bytes | None:
    """The UDP payload of an INA frame (by the UDP length field), or None for any other frame."""
    if len(frame) < 42 or frame[12:14] != struct.pack(">H", ETH_P_IP) or frame[23] != 17:
        return None
    ihl = (frame[14] & 0x0F) * 4
    sport, dport, length, _ = _UDP.unpack_from(frame, 14 + ihl)
    if INA_UDP_PORT not in (sport, dport):
        return None
    start = 14 + ihl + _UDP.size
    return frame[start:start + length - _UDP.size]


class _Port:
    """A raw socket on a veth's host end."""

    def __init__(self, ifname: str):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind((ifname, 0))
        self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 4 << 20)

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def frames_until(self, sentinel: bytes) -> list[bytes]:
        """Frames received (the host's own outgoing ones excluded) until ``sentinel``."""
        got, deadline = [], time.monotonic() + _WAIT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise P4Error(f"no sentinel back within {_WAIT_S:g} s (frames before it: {len(got)})")
            frame, addr = self.sock.recvfrom(65535)
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            if frame == sentinel:
                return got
            got.append(frame)

    def drain(self) -> None:
        while select.select([self.sock], [], [], 0)[0]:
            self.sock.recv(65535)

    def close(self) -> None:
        self.sock.close()



class SwitchRig(StartStop):
    """``n`` aggregators on veths (see the module docstring). A context manager (:class:`StartStop`).

    Args:
        n: switches.
        log_dir: where the switches' logs (and the software engine's control sockets) go.
        engine: ``bmv2`` or ``software``.
        toolchain, program: the P4 tools and the compiled aggregator (``bmv2`` only).
        thrift_base: the first bmv2 switch's runtime CLI port (the next ones follow), in the rig's own
            network namespace: rigs at once, of one process or several, never share one.
        values_per_packet: the software engine's lanes per packet (bmv2's ``program`` is compiled for its own).
        record: told ``(kind, name)`` of everything it makes before making it or as soon as it
            exists (``netns``, a veth ``link`` by its end outside, a switch ``process`` by PID),
            so that a caller's record can undo it after a crash.
    """

    def __init__(self, n: int, log_dir: str, engine: str = "bmv2", toolchain: Toolchain | None = None,
                 program: str | None = None, thrift_base: int = 22090, values_per_packet: int = VALUES_PER_PACKET,
                 record: Callable[[str, str], None] | None = None):
        if engine not in ENGINES or (engine == "bmv2" and (toolchain is None or program is None)):
            raise TestbedError(f"rig engine {engine!r}: valid: {', '.join(ENGINES)} (bmv2 needs a toolchain and "
                               f"a program)")
        self.engine, self.toolchain, self.program, self.n, self.log_dir = engine, toolchain, program, n, log_dir
        self.values_per_packet = values_per_packet
        self.record = record or (lambda kind, name: None)
        tag = f"{os.getpid() % 100000}{next(_RIGS) % 10}"  # two rigs of one process apart
        self.netns = f"dtina{tag}"
        self.names = [[(f"ia{tag}{k}{p}", f"ib{tag}{k}{p}") for p in range(3)] for k in range(n)]
        self.thrift_base = thrift_base
        self.switches: list[Bmv2Aggregator | SoftAggregator] = []
        self.ports: list[dict[int, _Port]] = []
        self._seq = 0
        self._made_ns = False

    def _ip(self, *args: str, ns: bool = False) -> None:
        cmd = ["ip", "netns", "exec", self.netns, "ip", *args] if ns else ["ip", *args]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise TestbedError(f"{' '.join(cmd)}: {p.stderr.strip()}")

    def start(self) -> None:
        self.record("netns", self.netns)
        self._ip("netns", "add", self.netns)
        self._made_ns = True
        self._ip("link", "set", "lo", "up", ns=True)
        for k in range(self.n):
            for host, sw in self.names[k]:
                self.record("link", host)
                self._ip("link", "add", host, "type", "veth", "peer", "name", sw)
                self._ip("link", "set", sw, "netns", self.netns)
                with open(f"/proc/sys/net/ipv6/conf/{host}/disable_ipv6", "w") as f:
                    f.write("1")
                subprocess.run(["ip", "netns", "exec", self.netns, "sysctl", "-qw",
                                f"net.ipv6.conf.{sw}.disable_ipv6=1"], capture_output=True)
                for cmd in (["ethtool", "-K", host, *OFFLOADS_OFF],
                            ["ip", "netns", "exec", self.netns, "ethtool", "-K", sw, *OFFLOADS_OFF]):
                    subprocess.run(cmd, capture_output=True)
                self._ip("link", "set", host, "up")
                self._ip("link", "set", sw, "up", ns=True)
            self.ports.append({p: _Port(self.names[k][p][0]) for p in range(3)})
        os.makedirs(self.log_dir, exist_ok=True)
        for k in range(self.n):
            ports = {p: self.names[k][p][1] for p in range(3)}
            log = os.path.join(self.log_dir, f"switch{k}.log")
            if self.engine == "bmv2":
                sw = Bmv2Aggregator(self.toolchain, self.program, ports, self.thrift_base + k, 90 + k, log,
                                    netns=self.netns)
            else:
                sw = SoftAggregator(ports, os.path.join(self.log_dir, f"switch{k}.sock"), log, netns=self.netns,
                                    values_per_packet=self.values_per_packet)
            self.switches.append(sw)
            sw.start(on_spawn=lambda pid: self.record("process", str(pid)))

    def configure(self, k: int, n_slots: int, jobs: Mapping[int, JobEntry]) -> None:
        """Free every slot, zero the counters, and program switch ``k``'s tables."""
        sw = self.switches[k]
        sw.configure(n_slots, jobs, routes={TO_PS: 1, TO_WORKERS: 2},
                     plain={":".join(f"{b:02x}" for b in mac): p for p, mac in SENTINEL_MAC.items()})
        sw.reset()
        for port in self.ports[k].values():
            port.drain()

    def stats(self, k: int):
        """Switch ``k``'s counters as :class:`ina.aggregator.AggregatorStats`."""
        return aggregator_stats(self.switches[k].counters())

    def job_traffic(self, k: int, job_ids):
        """Switch ``k``'s per-job forwarded packets (:class:`ina.aggregator.JobTraffic` by job id)."""
        return self.switches[k].job_traffic(job_ids)

    def step(self, k: int, payload: bytes, ecn_ce: bool = False) -> list[tuple[str, bytes]]:
        """Send one INA payload into switch ``k``; return ``[(dest, payload), ...]`` of what left it
        (``to_ps`` or ``to_workers``; empty: dropped). A RESULT travels as the PS sends it (from
        the INA port to a worker's port), anything else to the INA port.

        Raises:
            P4Error: a sentinel did not come back (the switch stopped forwarding), or a stray frame.
        """
        if len(payload) >= 4 and payload[1] & Flag.RESULT:
            frame = ina_frame(payload, ecn_ce, src_port=INA_UDP_PORT, dst_port=WORKER_PORT_BASE)
        else:
            frame = ina_frame(payload, ecn_ce)
        return self.step_frame(k, frame)

    def step_frame(self, k: int, frame: bytes, whole: bool = False) -> list[tuple[str, bytes]]:
        """Send one Ethernet frame into switch ``k``; return the INA payloads that left it (as
        :meth:`step`), or with ``whole`` the frames."""
        self.ports[k][0].send(frame)
        return self._collect(k, whole)

    def _collect(self, k: int, whole: bool = False) -> list[tuple[str, bytes]]:
        """Send a sentinel to each output port of switch ``k``; return the INA frames before them
        (their payloads, or with ``whole`` the frames)."""
        ports = self.ports[k]
        self._seq += 1
        sentinels = {p: mac + HOST_MAC + struct.pack(">HI", SENTINEL_TYPE, self._seq) + bytes(40)
                     for p, mac in SENTINEL_MAC.items()}
        for frame in sentinels.values():
            ports[0].send(frame)
        out = []
        for p in SENTINEL_MAC:
            for frame in ports[p].frames_until(sentinels[p]):
                data = ina_payload(frame)
                if data is None:
                    raise P4Error(f"switch {k} sent a non-INA frame out of port {p}: {frame[:64].hex()}")
                out.append((OUT_PORTS[p], frame if whole else data))
        return out

    def blast(self, k: int, payloads: list[bytes], window: int = 128) -> tuple[list[tuple[str, bytes]], float]:
        """Send ``payloads`` into switch ``k`` ``window`` at a time (each window closed by sentinels,
        so no more than ``window`` packets wait in the switch); return what came out and the wall
        seconds it took.

        Raises:
            P4Error: a sentinel did not come back (packets lost in the switch or the veths).
        """
        frames = [ina_frame(p) for p in payloads]
        send, out = self.ports[k][0].send, []
        t0 = time.perf_counter()
        for start in range(0, len(frames), window):
            for frame in frames[start:start + window]:
                send(frame)
            out += self._collect(k)
        return out, time.perf_counter() - t0

    def stop(self) -> None:
        """Stop the switches (by PID), close the sockets, delete the namespace (and with it the veths)."""
        for sw in self.switches:
            sw.stop()
        for ports in self.ports:
            for port in ports.values():
                port.close()
        self.switches, self.ports = [], []
        if self._made_ns:
            subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)
            self._made_ns = False
        for pairs in self.names:  # a host end whose peer never reached the namespace
            for host, _ in pairs:
                if os.path.exists(f"/sys/class/net/{host}"):
                    subprocess.run(["ip", "link", "del", host], capture_output=True)


def packet_rate(engine: str, values_per_packet: int, log_dir: str, toolchain: Toolchain | None = None,
                program: str | None = None, packets: int = 2000, fan_in: int = 4, window: int = 256,
                record: Callable[[str, str], None] | None = None, thrift_port: int = 22090) -> float:
    """Packets per second one aggregator of ``engine`` takes on this machine: ``packets`` packets of
    ``values_per_packet`` values, one job of fan-in ``fan_in`` summed at a leaf, seq by seq (a slot
    freed by its aggregate before the next seq wants it), sent from a raw socket on a veth
    ``window`` at a time, as ``bench/ina.py`` measures it (``record``: as :class:`SwitchRig`'s;
    ``thrift_port``: bmv2's runtime CLI port).

    Raises:
        TestbedError: the rig or the engine did not start, or the engine lost packets.
    """
    job, seqs = 1, max(1, packets // fan_in)
    payloads = [data_packet(job, seq, 1 << w, [seq + w] * values_per_packet) for seq in range(seqs)
                for w in range(fan_in)]
    with SwitchRig(1, log_dir, engine, toolchain, program, thrift_base=thrift_port, values_per_packet=values_per_packet,
                   record=record) as rig:
        rig.configure(0, 4096, {job: JobEntry(fan_in, Role.LEAF, 0)})
        out, seconds = rig.blast(0, payloads, window)
    if sum(1 for dest, _ in out if dest == "to_ps") != seqs:
        raise TestbedError(f"the {engine} aggregator sent {len(out)} aggregates for {seqs} seqs")
    return len(payloads) / seconds
