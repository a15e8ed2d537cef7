"""The software INA aggregator as a packet-processing element: :class:`ina.aggregator.Aggregator` on
raw sockets, where bmv2 is missing.

Seen from the wire it behaves as ``ina/p4/aggregator.p4`` on bmv2 does, with the same counters.
``python -m ina.softswitch --control PATH -i 0@eth0 ...`` is programmed over a UNIX socket, one JSON
object per line (configure, add and remove jobs without disturbing the others' slots, counters,
PAT meter, ...). :class:`SoftAggregator` starts it and speaks that protocol with the methods of
:class:`ina.p4.switch.Bmv2Aggregator`, so either serves a rig or a fabric.

How it forwards and its control protocol, operation by operation: ``docs/ina-internals.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from common.errors import TestbedError
from ina.aggregator import Aggregator, Copy, Dest, JobEntry, JobTraffic, PatMeter, Role
from ina.p4.runtime import log_tail
from ina.p4.switch import TO_PS, TO_WORKERS
from ina.protocol import (
    INA_UDP_PORT,
    SO_RCVBUFFORCE,
    VALUES_PER_PACKET,
    InaError,
    check_slots,
    check_values_per_packet,
)

ETH_P_ALL = 0x0003
_READY_S = 15.0


def split_frame(frame: bytes) -> tuple[int, bool] | None:
    """``(offset of the UDP payload, IP ECN is CE)`` of an INA frame, or None for another frame:
    Ethernet / IPv4 without options, not a fragment / UDP with either port the INA port (as the
    P4 parser)."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[14] != 0x45 or frame[23] != 17:
        return None
    if struct.unpack_from(">H", frame, 20)[0] & 0x1FFF or INA_UDP_PORT not in struct.unpack_from(">HH", frame, 34):
        return None
    return 42, frame[15] & 3 == 3


def _checked_entries(rows: Iterable) -> list[tuple[int, JobEntry]]:
    """Table rows ``[job_id, fan_in, role, out_bit]``, ``[..., members]`` (IPv4 sources as
    integers) or ``[..., members, copies]`` (``[[ip, mac], ...]``) of a control message, each
    checked as :meth:`ina.aggregator.Aggregator.install` checks it, before any is installed.

    Raises:
        InaError: an entry out of range, an unknown role or a bad copy.
        ValueError, TypeError: a row that is not four to six values.
    """
    scratch = Aggregator(1)
    out = []
    for row in rows:
        job_id, fan_in, role, out_bit, *rest = row
        if len(rest) > 2:
            raise ValueError(f"table row {row!r}: expected [job_id, fan_in, role, out_bit(, members(, copies))]")
        members = tuple(rest[0]) if rest else ()
        copies = tuple(Copy(ip, mac) for ip, mac in rest[1]) if len(rest) > 1 else ()
        scratch.install(job_id, fan_in, role, out_bit, members, copies)
        out.append((job_id, scratch.jobs[job_id]))
    return out


def ipv4_checksum(header: bytes) -> int:
    """The Internet checksum of an IPv4 header (RFC 1071): with its checksum field 0, the value to
    put there; with the field filled in, 0 when the header is intact."""
    s = sum(struct.unpack(f">{len(header) // 2}H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def addressed_to(frame: bytes, copy: Copy) -> bytes:
    """An IPv4/UDP ``frame`` addressed to ``copy``: Ethernet and IPv4 destination rewritten, the
    IPv4 header checksum recomputed, UDP checksum 0 (none)."""
    out = bytearray(frame)
    out[0:6] = bytes.fromhex(copy.mac.replace(":", ""))
    out[30:34] = copy.ip.to_bytes(4, "big")
    out[24:26] = b"\0\0"
    out[24:26] = ipv4_checksum(bytes(out[14:34])).to_bytes(2, "big")
    out[40:42] = b"\0\0"
    return bytes(out)


def _job_ids(msg: dict) -> list[int]:
    """A control message's ``job_ids``.

    Raises:
        KeyError: none.
        TypeError: not a list of integers.
    """
    job_ids = msg["job_ids"]
    if not isinstance(job_ids, list) or not all(isinstance(j, int) and not isinstance(j, bool) for j in job_ids):
        raise TypeError(f"job_ids {job_ids!r} must be a list of integers")
    return job_ids


def udp_payload(frame: bytes, start: int) -> bytes:
    """The UDP payload by the UDP length field (bytes beyond it are Ethernet padding)."""
    length = struct.unpack_from(">H", frame, 38)[0]
    return frame[start:start + max(0, length - 8)]


class SoftSwitch:
    """The engine behind raw sockets (the process's body; see ``docs/ina-internals.md``)."""

    def __init__(self, ports: Mapping[int, str]):
        self.socks: dict[int, socket.socket] = {}
        for port, ifname in ports.items():
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((ifname, 0))
            s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 4 << 20)
            self.socks[port] = s
        self.by_fd = {s.fileno(): p for p, s in self.socks.items()}
        self.engine = Aggregator(64)
        self.pat: PatMeter | None = None
        self.routes: dict[int, int] = {}
        self.plain: dict[bytes, int] = {}
        self.other = 0

    def configure(self, msg: dict) -> None:
        """Install a new engine with ``n_slots`` and ``jobs``, and the routes (see ``docs/ina-internals.md``)."""
        engine = Aggregator(check_slots(msg["n_slots"]), check_values_per_packet(msg.get("values_per_packet",
                                                                                          VALUES_PER_PACKET)))
        for job_id, entry in _checked_entries(msg.get("jobs", [])):
            engine.install_entry(job_id, entry)
        engine.set_pat(self.pat)
        self.engine = engine
        self.routes = {int(d): int(p) for d, p in msg.get("routes", {}).items()}
        self.plain = {bytes.fromhex(mac.replace(":", "")): int(p) for mac, p in msg.get("plain", {}).items()}
        self.other = 0

    def add_jobs(self, msg: dict) -> None:
        """Install (or replace) the entries of ``msg["jobs"]``; every other entry, the slots and the
        counters stay (see ``docs/ina-internals.md``).

        Raises:
            KeyError: no ``jobs``.
            InaError, ValueError, TypeError: a bad entry (then none is installed).
        """
        for job_id, entry in _checked_entries(msg["jobs"]):
            self.engine.install_entry(job_id, entry)

    def remove_jobs(self, msg: dict) -> None:
        """Remove the entries of ``msg["job_ids"]`` (ids not installed are ignored); the slots and
        the counters stay.

        Raises:
            KeyError: no ``job_ids``.
            TypeError: ``job_ids`` is not a list of integers.
        """
        for job_id in _job_ids(msg):
            self.engine.uninstall(job_id)

    def release_slots(self) -> None:
        """Every slot free; the table entries and the counters stay."""
        self.engine.release_slots()

    def reset(self) -> None:
        """Every slot free and every counter 0; the table entries stay."""
        engine = Aggregator(self.engine.n_slots, self.engine.values_per_packet)
        for job_id, e in self.engine.jobs.items():
            engine.install_entry(job_id, e)
        engine.set_pat(self.pat)
        self.engine, self.other = engine, 0

    def set_pat(self, msg: dict) -> None:
        """Meter claims at ``msg["rate_pps"]`` per second, ``msg["burst"]`` deep (rule 8a of
        :mod:`ina.aggregator`; a null rate: unmetered), kept across configure and reset as the P4
        program's meter is.

        Raises:
            KeyError: no ``rate_pps``.
            InaError: a rate or burst out of range.
        """
        rate = msg["rate_pps"]
        self.pat = None if rate is None else PatMeter(float(rate), int(msg.get("burst", 1)))
        self.engine.set_pat(self.pat)

    def counters(self) -> dict[str, int]:
        """The engine's counters and ``other``, by the P4 register's names."""
        d = self.engine.stats.to_dict()
        out = {k: v for k, v in d.items() if k != "malformed"}
        out.update({f"malformed:{r}": v for r, v in d["malformed"].items()})
        out["other"] = self.other
        return out

    def job_traffic(self, msg: dict) -> dict:
        """``msg["job_ids"]``' packets forwarded by direction (see ``docs/ina-internals.md``).

        Raises:
            KeyError: no ``job_ids``.
            TypeError: ``job_ids`` is not a list of integers.
        """
        job_ids = _job_ids(msg)
        return {"jobs": [[j, t.to_ps, t.to_workers] for j, t in self.engine.job_traffic(job_ids).items()]}

    def handle(self, port: int, frame: bytes) -> None:
        """One frame in on ``port``: aggregate, forward or drop it."""
        split = split_frame(frame)
        if split is None:
            out = self.plain.get(frame[:6])
            if out is None:
                self.other += 1
            else:
                self.socks[out].send(frame)
            return
        start, ce = split
        payload = udp_payload(frame, start)
        for o in self.engine.process(payload, ce, int.from_bytes(frame[26:30], "big")):
            if o.dest is Dest.DROP:
                continue
            out_port = self.routes.get(TO_WORKERS if o.dest is Dest.TO_WORKERS else TO_PS, port)
            if o.copies:  # a result multicast: the packet is unchanged, its address is each child's
                for c in o.copies:
                    self.socks[out_port].send(addressed_to(frame, c))
            elif o.data == payload:
                self.socks[out_port].send(frame)
            else:  # rewritten: same length, UDP checksum 0
                self.socks[out_port].send(frame[:40] + b"\0\0" + o.data + frame[start + len(payload):])

    def serve(self, control_path: str) -> None:
        """Forward frames and answer the control socket until SIGTERM."""
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(control_path):
            os.remove(control_path)
        server.bind(control_path)
        server.listen(4)
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        clients: dict[int, tuple[socket.socket, bytearray]] = {}
        try:
            while not stop:
                fds = [*self.by_fd, server.fileno(), *clients]
                try:
                    ready = select.select(fds, [], [], 0.5)[0]
                except InterruptedError:
                    continue
                for fd in ready:
                    if fd in self.by_fd:
                        sock = self.socks[self.by_fd[fd]]
                        frame, addr = sock.recvfrom(65535)
                        if addr[2] != socket.PACKET_OUTGOING:
                            self.handle(self.by_fd[fd], frame)
                    elif fd == server.fileno():
                        conn, _ = server.accept()
                        clients[conn.fileno()] = (conn, bytearray())
                    else:
                        self._control(clients, fd)
        finally:
            server.close()
            if os.path.exists(control_path):
                os.remove(control_path)

    def _control(self, clients: dict, fd: int) -> None:
        conn, buf = clients[fd]
        data = conn.recv(65536)
        if not data:
            conn.close()
            del clients[fd]
            return
        buf += data
        while b"\n" in buf:
            line, _, rest = bytes(buf).partition(b"\n")
            buf[:] = rest
            conn.sendall(json.dumps(self._answer(line)).encode() + b"\n")

    def _ops(self) -> dict[str, Callable[[dict], dict | None]]:
        """Control op -> its handler: the request in, extra answer fields (or None) out."""
        return {"configure": self.configure, "add_jobs": self.add_jobs, "remove_jobs": self.remove_jobs,
                "release_slots": lambda _: self.release_slots(), "reset": lambda _: self.reset(),
                "counters": lambda _: {"counters": self.counters()}, "job_traffic": self.job_traffic,
                "set_pat": self.set_pat}

    def _answer(self, line: bytes) -> dict:
        """The answer to one control line (see ``docs/ina-internals.md``); never raises on its content."""
        try:
            msg = json.loads(line)
            op = msg.get("op") if isinstance(msg, dict) else None
            ops = self._ops()
            if op not in ops:
                return {"ok": False, "error": f"unknown op {op!r}; valid: {', '.join(ops)}"}
            return {"ok": True, **(ops[op](msg) or {})}
        except (ValueError, KeyError, TypeError, InaError) as e:
            return {"ok": False, "error": f"{type(e).__name__}: {e}"}


class SoftAggregator:
    """A software aggregator process, driven like :class:`ina.p4.switch.Bmv2Aggregator`.

    Args:
        ports: port number -> interface name.
        control_path: its UNIX control socket.
        log_path: its standard output and error.
        netns: network namespace to run in (None: this one).
        values_per_packet: int32 lanes per packet it aggregates (as bmv2's program is compiled for).
    """

    def __init__(self, ports: Mapping[int, str], control_path: str, log_path: str, netns: str | None = None,
                 values_per_packet: int = VALUES_PER_PACKET):
        self.ports, self.control_path, self.log_path, self.netns = dict(ports), control_path, log_path, netns
        self.values_per_packet = check_values_per_packet(values_per_packet)
        self.proc: subprocess.Popen | None = None

    def start(self, on_spawn=None) -> None:
        """Start the process and wait until its control socket answers.

        Args:
            on_spawn: called with the process's PID as soon as it exists (to record it).

        Raises:
            TestbedError: it exited or did not answer in 15 s (its log's tail included).
        """
        cmd = [sys.executable, "-m", "ina.softswitch", "--control", self.control_path]
        for port, intf in sorted(self.ports.items()):
            cmd += ["-i", f"{port}@{intf}"]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True)
        if on_spawn is not None:
            on_spawn(self.proc.pid)
        deadline = time.monotonic() + _READY_S
        while True:
            if self.proc.poll() is not None:
                raise TestbedError(f"the software aggregator exited with {self.proc.returncode}: "
                                   f"{log_tail(self.log_path)}")
            try:
                self.request({"op": "counters"})
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise TestbedError(f"the software aggregator did not answer in {_READY_S:g} s: "
                                       f"{log_tail(self.log_path)}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop the process by its PID (idempotent)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None

    def request(self, msg: dict) -> dict:
        """One control request; its answer.

        Raises:
            OSError: the socket is not there (yet).
            TestbedError: the aggregator refused the request.
        """
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(self.control_path)
            s.sendall(json.dumps(msg).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    raise OSError("the software aggregator closed its control socket")
                buf += chunk
        answer = json.loads(buf)
        if not answer.get("ok"):
            raise TestbedError(f"the software aggregator refused {msg.get('op')!r}: {answer.get('error')}")
        return answer

    def configure(self, n_slots: int, jobs: Mapping[int, JobEntry], routes: Mapping[int, int] | None = None,
                  plain: Mapping[str, int] | None = None) -> None:
        """As :meth:`ina.p4.switch.Bmv2Aggregator.configure` (counters restart at 0)."""
        self.request({"op": "configure", "n_slots": n_slots, "jobs": _rows(jobs),
                      "routes": {str(d): p for d, p in (routes or {}).items()}, "plain": dict(plain or {}),
                      "values_per_packet": self.values_per_packet})

    def add_jobs(self, jobs: Mapping[int, JobEntry]) -> None:
        """As :meth:`ina.p4.switch.Bmv2Aggregator.add_jobs`: these jobs' entries installed (an id
        already installed: replaced); other entries, the slots and the counters untouched.

        Raises:
            TestbedError: the aggregator refused an entry (then it installed none).
        """
        if jobs:
            self.request({"op": "add_jobs", "jobs": _rows(jobs)})

    def remove_jobs(self, job_ids: Iterable[int]) -> None:
        """As :meth:`ina.p4.switch.Bmv2Aggregator.remove_jobs`: those entries removed (ids not
        installed ignored); the slots and the counters untouched.

        Raises:
            TestbedError: the aggregator refused.
        """
        job_ids = sorted(set(job_ids))
        if job_ids:
            self.request({"op": "remove_jobs", "job_ids": job_ids})

    def set_pat(self, rate_pps: float | None, burst: int = 1) -> None:
        """As :meth:`ina.p4.switch.Bmv2Aggregator.set_pat`.

        Raises:
            TestbedError: the aggregator refused.
        """
        self.request({"op": "set_pat", "rate_pps": rate_pps, "burst": burst})

    def release_slots(self) -> None:
        """Every slot free; the table entries and the counters stay.

        Raises:
            TestbedError: the aggregator refused.
        """
        self.request({"op": "release_slots"})

    def reset(self) -> None:
        """Every slot free and every counter 0."""
        self.request({"op": "reset"})

    def counters(self) -> dict[str, int]:
        """The counters by name (:data:`ina.p4.switch.STAT_NAMES`)."""
        return self.request({"op": "counters"})["counters"]

    def job_traffic(self, job_ids: Iterable[int]) -> dict[int, JobTraffic]:
        """As :meth:`ina.p4.switch.Bmv2Aggregator.job_traffic`."""
        ids = sorted(set(job_ids))
        if not ids:
            return {}
        rows = self.request({"op": "job_traffic", "job_ids": ids})["jobs"]
        return {j: JobTraffic(to_ps, to_workers) for j, to_ps, to_workers in rows}


def _rows(jobs: Mapping[int, JobEntry]) -> list[list]:
    """Table entries as the control protocol's rows ``[job_id, fan_in, role, out_bit, members, copies]``,
    by job id."""
    return [[j, e.fan_in, Role(e.role).value, e.out_bit, sorted(e.members), [c.to_data() for c in e.copies]]
            for j, e in sorted(jobs.items())]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ina.softswitch``: serve until SIGTERM."""
    ap = argparse.ArgumentParser(description="the software INA aggregator on raw sockets")
    ap.add_argument("--control", required=True, help="UNIX control socket path")
    ap.add_argument("-i", dest="ports", action="append", required=True, help="PORT@INTERFACE")
    args = ap.parse_args(argv)
    ports = {}
    for spec in args.ports:
        port, _, ifname = spec.partition("@")
        if not port.isdigit() or not ifname:
            print(f"softswitch: bad port {spec!r}, expected PORT@INTERFACE", file=sys.stderr)
            return 2
        ports[int(port)] = ifname
    try:
        SoftSwitch(ports).serve(args.control)
    except OSError as e:
        print(f"softswitch: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
