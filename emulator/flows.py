"""Which job a packet belongs to: TCP sockets of processes, and marks attributed to jobs.

A worker's TCP connections (gloo's full mesh and its rendezvous store) are read from
``/proc/<pid>/fd`` (socket inodes) and ``/proc/<pid>/net/tcp`` (the connections of the
process's network namespace). A flow counted at a switch port, ``src:sport -> dst:dport``,
belongs to the job owning either end of the connection.
"""

from __future__ import annotations

import os
import socket
import struct
from collections import defaultdict

Endpoint = tuple[str, int]
Conn = tuple[str, int, str, int]  # local ip, local port, remote ip, remote port

TCP_LISTEN = 0x0A


def parse_proc_net_tcp(text: str) -> dict[int, Conn]:
    """Connections of a ``/proc/net/tcp`` text by socket inode (listening sockets left out)."""
    out = {}
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 10 or int(f[3], 16) == TCP_LISTEN:
            continue
        (lip, lport), (rip, rport) = (_endpoint(x) for x in (f[1], f[2]))
        out[int(f[9])] = (lip, lport, rip, rport)
    return out


def _endpoint(hex_endpoint: str) -> Endpoint:
    addr, port = hex_endpoint.split(":")
    return socket.inet_ntoa(struct.pack("<I", int(addr, 16))), int(port, 16)


def sockets_of(pid: int) -> set[Conn]:
    """TCP connections (IPv4) held open by process ``pid``; empty if it has ended."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
        with open(f"/proc/{pid}/net/tcp") as f:
            conns = parse_proc_net_tcp(f.read())
    except OSError:
        return set()
    return {c for inode, c in conns.items() if inode in inodes}


def owners(conns_by_job: dict[str, set[Conn]]) -> dict[tuple[Endpoint, Endpoint], str]:
    """``((src ip, port), (dst ip, port)) -> job`` for both directions of every connection."""
    out = {}
    for job, conns in conns_by_job.items():
        for lip, lport, rip, rport in conns:
            out[((lip, lport), (rip, rport))] = job
            out[((rip, rport), (lip, lport))] = job
    return out


def flow_deltas(before: list[dict], after: list[dict]) -> list[dict]:
    """Per-flow counter differences between two marker snapshots (flows new since ``before`` count whole)."""
    def key(f):
        return f["intf"], f["src"], f["sport"], f["dst"], f["dport"]

    base = {key(f): f for f in before}
    out = []
    for f in after:
        b = base.get(key(f))
        d = dict(f)
        for c in ("pkts", "bytes", "marks"):
            d[c] = f[c] - (b[c] if b else 0)
        if d["pkts"] > 0 or d["marks"] > 0:
            out.append(d)
    return out


def attribute(flows: list[dict], owner: dict[tuple[Endpoint, Endpoint], str]) -> dict[str, dict[str, int]]:
    """Sum ``pkts``, ``bytes`` and ``marks`` of counted flows per job (``None`` key: no job owns it)."""
    out: dict = defaultdict(lambda: {"pkts": 0, "bytes": 0, "marks": 0})
    for f in flows:
        job = owner.get(((f["src"], f["sport"]), (f["dst"], f["dport"])))
        for c in ("pkts", "bytes", "marks"):
            out[job][c] += f[c]
    return dict(out)


def netstat_counters(pid: int) -> dict[str, int]:
    """The IP and TCP extended counters of ``pid``'s network namespace (``/proc/<pid>/net/netstat``)."""
    out = {}
    try:
        with open(f"/proc/{pid}/net/netstat") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        prefix, *keys = names.split()
        _, *vals = values.split()
        for k, v in zip(keys, vals, strict=False):
            out[prefix.rstrip(":") + k] = int(v)
    return out
